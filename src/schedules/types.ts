/**
 * The schedules' data types: a definition, what its handler is called with, and what the calls
 * return, as the public module re-exports them (its private parts build on them).
 * @internal
 */
import type * as Effect from "effect/Effect"
import type * as Codec from "../shared/codec.js"
import type { CallDuration } from "../shared/duration.js"
import type * as Policy from "../engine/policy.js"
import type * as Rows from "./rows.js"

/**
 * When a schedule runs: a cron expression (5 fields, or 6 with seconds) in a time zone (default UTC), or a
 * fixed interval, 1 second to 366 days. `Time`: how `everyMs` is given, a Duration or milliseconds on the
 * Effect face, milliseconds (`TimingInput<number>`) on the promise face; it is stored in milliseconds.
 */
export type TimingInput<Time = CallDuration> =
  | { readonly cron: string; readonly timezone?: string | undefined }
  | { readonly everyMs: Time }

/** What a schedule's handler is called with for one attempt of one run. */
export interface ScheduleRun<P = unknown> {
  /** The handler's name. */
  readonly schedule: string
  readonly key: string
  readonly payload: P
  /** The slot this run is for; a manual run (`trigger`): when it was requested. */
  readonly scheduledTime: number
  readonly manual: boolean
  /** 1-based, per schedule, counting manual runs. */
  readonly runNumber: number
  /** 1-based attempt of this run; already durably counted. */
  readonly attempt: number
  /** Aborted on timeout, removal or shutdown. Cooperative. */
  readonly signal: AbortSignal
  /** Stable for this run's slot across retries and evictions: pass it to the provider you call. */
  readonly idempotencyKey: string
}

export interface ScheduleDefinition<P, E, Req> extends Policy.ExecutionOptions {
  readonly handler: (run: ScheduleRun<P>) => Effect.Effect<unknown, E, Req>
  readonly payload: Codec.Codec<P>
}

export interface AnyScheduleDefinition extends Policy.ExecutionOptions {
  readonly handler: (run: ScheduleRun<never>) => Effect.Effect<unknown, unknown, unknown>
  readonly payload: Codec.AnyCodec
}

export type PayloadOf<D> = D extends ScheduleDefinition<infer P, infer _E, infer _Req> ? P : never
export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends ScheduleDefinition<infer _P, infer _E, infer Req> ? Req : never
}[keyof Defs]

export interface UpsertResult {
  /** The schedule did not exist. */
  readonly created: boolean
  /** Something was written: false when the same spec, payload and options were given again. */
  readonly changed: boolean
  readonly nextRunAt: number | null
}

export interface SchedulePage<P> {
  readonly items: ReadonlyArray<Rows.ScheduleInfo<P>>
  readonly cursor?: string | undefined
}
