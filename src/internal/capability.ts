/**
 * What operations and named alarms share: their standard table columns, purge,
 * and turning handler options into the engine's attempt policy.
 * @internal
 */
import { Effect } from "effect"
import type * as Lifecycle from "../Lifecycle.js"
import type * as Scheduler from "../Scheduler.js"
import type { StorageService } from "../StorageService.js"
import type * as Policy from "./policy.js"
import type { Watchers } from "./watchers.js"

export const attemptPolicy = (
  resolved: Policy.Resolved,
  timeoutError: (timeoutMs: number) => unknown,
  isTerminal?: (error: unknown) => boolean
): Scheduler.AttemptPolicy => ({
  maxAttempts: resolved.maxAttempts,
  schedule: resolved.schedule,
  attemptTimeoutMs: resolved.attemptTimeoutMs,
  timeoutError,
  isTerminal
})

/** Passes every event to the settlement watchers, then to the user's hook. */
export const observe = (
  watchers: Watchers,
  hook: Lifecycle.LifecycleHook | undefined
): Lifecycle.LifecycleHook =>
(event) => {
  const settles = event.type === "terminal" ||
    (event.type === "attempt_settled" && event.outcome !== "retry_scheduled")
  if (settles && "id" in event) watchers.notify(event.id)
  return hook?.(event)
}

/**
 * Deletes every record created before `before` (strictly), whatever its status,
 * after aborting the matching executions of this isolate (best effort: abort is
 * cooperative, and the per-key lock is kept until those handlers settle).
 */
export const purge = (options: {
  readonly storage: StorageService
  readonly handle: Scheduler.TableHandle
  readonly watchers: Watchers
  readonly table: string
  readonly keyColumn: string
  readonly entityKind: string
  readonly before: number
  readonly reason: () => Error
}) =>
  Effect.gen(function*() {
    const { before, handle, storage } = options
    const doomed = yield* storage.exec(
      `SELECT ${options.keyColumn} AS key FROM ${options.table} WHERE created_at < ?`,
      [before]
    )
    const keys = new Set(doomed.map((row) => String(row.key)))
    yield* handle.abort((key) => keys.has(key), options.reason())
    const deleted = yield* handle.write(
      storage.exec(`DELETE FROM ${options.table} WHERE created_at < ? RETURNING ${options.keyColumn} AS key`, [before])
    )
    for (const row of deleted) options.watchers.notify(String(row.key))
    yield* handle.emit((timestamp) => ({
      type: "purged",
      entityKind: options.entityKind,
      timestamp,
      before,
      count: deleted.length
    }))
    return deleted.length
  })
