/**
 * What operations and named alarms share: their standard table columns, purge,
 * and turning handler options into the engine's attempt policy.
 * @internal
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { InvalidOptionError } from "../Errors.js"
import type * as Lifecycle from "../Lifecycle.js"
import type * as Scheduler from "../Scheduler.js"
import type { StorageService } from "../StorageService.js"
import * as Policy from "./policy.js"
import * as Validate from "./validate.js"
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

/**
 * Runs a handler with the services its capability was made with. Providing a context costs a
 * fiber-ref update per attempt; when the fiber already runs with exactly that context (the usual
 * case: one runtime per object) it is skipped.
 */
export const provideCaptured = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  context: Context.Context<R>
): Effect.Effect<A, E> =>
  Effect.contextWithEffect((current: Context.Context<never>) =>
    (current as Context.Context<unknown>) === context
      ? (effect as Effect.Effect<A, E>)
      : Effect.provide(effect, context)
  )

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
 * then aborts the executions of the deleted records in this isolate (best
 * effort: abort is cooperative). With `releaseKeys` a deleted key can run a new
 * record at once (operations: ids are reusable immediately); without it the
 * key stays locked until the old handler ends (named alarms: one handler per
 * name at a time).
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
  readonly releaseKeys: boolean
}) =>
  Effect.gen(function*() {
    const { before, handle, storage } = options
    const deleted = yield* handle.write(
      storage.exec(`DELETE FROM ${options.table} WHERE created_at < ? RETURNING ${options.keyColumn} AS key`, [before])
    )
    const keys = new Set(deleted.map((row) => String(row.key)))
    yield* handle.abort((key) => keys.has(key), options.reason(), { release: options.releaseKeys })
    for (const key of keys) options.watchers.notify(key)
    yield* handle.emit((timestamp) => ({
      type: "purged",
      entityKind: options.entityKind,
      timestamp,
      before,
      count: deleted.length
    }))
    return deleted.length
  })

/**
 * Handler names that would shadow a member of the helper (or make it a
 * thenable, which `await` would try to unwrap).
 */
export const RESERVED_NAMES: ReadonlySet<string> = new Set([
  "constructor",
  "alarm",
  "purgeBefore",
  "__proto__",
  "prototype",
  "then"
])

/** `DurabilityAlarms` also has `get(name)`, `cancel(name)` and `list()`. */
export const RESERVED_ALARM_NAMES: ReadonlySet<string> = new Set([...RESERVED_NAMES, "get", "cancel", "list"])

/** The names a helper reserves, by the helper's name. */
export const reservedBy = (owner: string): ReadonlySet<string> =>
  owner === "DurabilityAlarms" ? RESERVED_ALARM_NAMES : RESERVED_NAMES

/** Checks handler names and handlers, then resolves each one's attempt policy over the capability's options. */
export const resolveDefinitions = (options: {
  readonly owner: string
  readonly definitions: Readonly<Record<string, Policy.ExecutionOptions & { readonly handler?: unknown }>>
  readonly execution: Policy.ExecutionOptions
  readonly timeoutError: (name: string) => (timeoutMs: number) => unknown
  readonly isTerminal?: ((name: string) => ((error: unknown) => boolean) | undefined) | undefined
}) =>
  Effect.gen(function*() {
    const policies = new Map<string, Scheduler.AttemptPolicy>()
    const definitions: unknown = options.definitions
    if (typeof definitions !== "object" || definitions === null || Array.isArray(definitions)) {
      return yield* new InvalidOptionError({
        field: "handlers",
        kind: "type",
        message: "handlers must be an object of handler definitions"
      })
    }
    if (Object.getOwnPropertySymbols(definitions).length > 0) {
      return yield* new InvalidOptionError({
        field: "handlers",
        kind: "type",
        message: "handlers must be keyed by strings (a symbol-keyed handler could never be called)"
      })
    }
    for (const [name, definition] of Object.entries(options.definitions)) {
      const badName = Validate.keyProblem("name", name)
      if (badName !== undefined) {
        return yield* new InvalidOptionError({
          field: "handlers",
          kind: "type",
          message: `The handler name ${JSON.stringify(name.slice(0, 40))} is invalid: ${badName}`
        })
      }
      if (reservedBy(options.owner).has(name)) {
        return yield* new InvalidOptionError({
          field: `handlers.${name}`,
          kind: "type",
          message: `"${name}" is reserved by ${options.owner}`
        })
      }
      if (typeof definition?.handler !== "function") {
        return yield* new InvalidOptionError({
          field: `handlers.${name}`,
          kind: "type",
          message: `handlers.${name} must be a function`
        })
      }
    }
    const base = yield* Policy.resolve("", options.execution, Policy.defaults)
    const hook = (options.execution as { readonly onLifecycleEvent?: unknown } | undefined)?.onLifecycleEvent
    if (hook !== undefined && typeof hook !== "function") {
      return yield* new InvalidOptionError({
        field: "onLifecycleEvent",
        kind: "type",
        message: "onLifecycleEvent must be a function"
      })
    }
    for (const [name, definition] of Object.entries(options.definitions)) {
      const resolved = yield* Policy.resolve(`methods.${name}.`, definition, base)
      policies.set(name, attemptPolicy(resolved, options.timeoutError(name), options.isTerminal?.(name)))
    }
    /** The policy of a stored row whose name has no definition any more (it fails as non-retryable). */
    const fallback = (name: string) => attemptPolicy(base, options.timeoutError(name), options.isTerminal?.(name))
    return { policies, fallback }
  })

/**
 * The engine's one-statement claim limits: each policy's `maxAttempts` by the column that names
 * it, and the fallback's for names without a definition.
 */
export const attemptLimits = (
  column: string,
  policies: ReadonlyMap<string, Scheduler.AttemptPolicy>,
  fallback: (name: string) => Scheduler.AttemptPolicy
): Scheduler.AttemptLimits => ({
  column,
  byValue: new Map([...policies].map(([name, policy]) => [name, policy.maxAttempts])),
  // The fallback's limit does not depend on the name it is asked for.
  otherwise: fallback("").maxAttempts
})

/** The definition registered under `name`, never one inherited from `Object.prototype`. */
export const ownDefinition = <D>(definitions: Readonly<Record<string, D>>, name: string): D | undefined =>
  Object.prototype.hasOwnProperty.call(definitions, name) ? definitions[name] : undefined
