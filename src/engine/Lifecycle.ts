/**
 * Lifecycle events: what happened to a record, told to the user's hook after the
 * change committed. Events are a best-effort tap, not a log: they may be lost or
 * repeated across evictions, and a hook can never change state: a hook that
 * throws or rejects is reported as `durability.lifecycle_hook.failed`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Background from "./Background.js"
import type { SerializedError } from "../shared/Errors.js"

/** Who an event is about; each capability adds its own fields (e.g. `operation`). */
export interface LifecycleEntity {
  /** The kind of record: `operation`, `named_alarm`, `job`, `schedule`, or a table of your own. */
  readonly entityKind: string
  /** The record's key within its kind. */
  readonly id: string
  /**
   * Which life of the record: a record registered again under the same key gets a new generation, so events
   * of the old one can be told apart.
   */
  readonly generation: string
  readonly [field: string]: unknown
}

/**
 * One event about a record (registered, scheduled, an attempt started or settled, terminal) or a purge, told
 * after the change committed.
 */
export type LifecycleEvent =
  | (LifecycleEntity & { readonly type: "registered"; readonly timestamp: number; readonly attempt: 0 })
  | (LifecycleEntity & {
    readonly type: "scheduled"
    readonly timestamp: number
    readonly attempt: 0
    readonly scheduledTime: number
  })
  | (LifecycleEntity & { readonly type: "attempt_started"; readonly timestamp: number; readonly attempt: number })
  | (LifecycleEntity & {
    readonly type: "attempt_settled"
    readonly outcome: "completed"
    readonly timestamp: number
    readonly attempt: number
    readonly durationMs: number
  })
  | (LifecycleEntity & {
    readonly type: "attempt_settled"
    readonly outcome: "retry_scheduled"
    readonly timestamp: number
    readonly attempt: number
    readonly durationMs: number
    readonly error: SerializedError
    readonly nextAttemptAt: number
  })
  | (LifecycleEntity & {
    readonly type: "attempt_settled"
    readonly outcome: "failed"
    readonly timestamp: number
    readonly attempt: number
    readonly durationMs: number
    readonly error: SerializedError
  })
  | (LifecycleEntity & {
    readonly type: "terminal"
    readonly timestamp: number
    readonly attempt: number
    /**
     * `attempts_exhausted`: claimed at its limit; `canceled`: by `cancel`, running or not; `dead_lettered`: a
     * fanout delivery its consumer dead-lettered.
     */
    readonly reason: "attempts_exhausted" | "canceled" | "dead_lettered"
    readonly error: SerializedError
  })
  | {
    readonly type: "purged"
    readonly entityKind: string
    readonly timestamp: number
    readonly before: number
    readonly count: number
  }

/**
 * A function told each lifecycle event, e.g. `logLifecycle` or a metrics forwarder; a throw or rejection is
 * reported, never retried.
 */
export type LifecycleHook = (event: LifecycleEvent) => void | PromiseLike<void>

/**
 * Calls `hook` with the event built from `at`, or from the current time. Never fails; a returned
 * promise is handed to `waitUntil` and its rejection reported. The background is given, not looked
 * up, and a caller that already read the clock passes its reading: this is on the engine's hot path.
 */
/**
 * Marks a hook that only listens for attempts' ends (the `wait` watchers and a capability's counts, when
 * there is no user hook).
 */
const SETTLES_ONLY: unique symbol = Symbol.for("durability/internal/settlesOnly")

/** `hook`, marked as listening only for attempts' ends: other events (a start) need not be built for it. */
export const settlesOnly = <Event>(hook: (event: Event) => void | PromiseLike<void>): (event: Event) => void | PromiseLike<void> =>
  Object.assign(hook, { [SETTLES_ONLY]: true })

/** Whether an event that ends no attempt (a start) would reach anyone through `hook`. */
export const hears = (hook: ((event: never) => unknown) | undefined): boolean =>
  hook !== undefined && (hook as { readonly [SETTLES_ONLY]?: boolean })[SETTLES_ONLY] !== true

export const emitTo = <Event extends { readonly type: string; readonly entityKind: string } = LifecycleEvent>(
  background: Background.Background,
  hook: ((event: Event) => void | PromiseLike<void>) | undefined,
  build: (timestamp: number) => Event,
  at?: number
): Effect.Effect<void> => {
  if (hook === undefined) return Effect.void
  const deliver = (timestamp: number): Effect.Effect<void> => {
    const event = build(timestamp)
    const failed = (error: unknown) =>
      background.report("durability.lifecycle_hook.failed", {
        entityKind: event.entityKind,
        lifecycleType: event.type,
        entityId: "id" in event ? String(event.id) : "durability",
        error: Background.serializeError(error)
      })
    let returned: void | PromiseLike<void>
    try {
      returned = hook(event)
    } catch (error) {
      return failed(error)
    }
    if (returned === undefined || typeof returned.then !== "function") return Effect.void
    return Background.waitUntilOr(background, returned, failed)
  }
  return at === undefined ? Effect.flatMap(Clock.currentTimeMillis, deliver) : Effect.suspend(() => deliver(at))
}
