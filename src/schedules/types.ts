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
  /** The schedule's key, unique per handler. */
  readonly key: string
  /** The schedule's payload, as given at `upsert`. */
  readonly payload: P
  /** The slot this run is for; a manual run (`trigger`): when it was requested. */
  readonly scheduledTime: number
  /** True for a run requested with `trigger`, false for a slot of the timing. */
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

/**
 * One schedule handler: what runs for each slot of its schedules, its payload codec, its retries and
 * timeouts.
 */
export interface ScheduleDefinition<P, E, Req> extends Policy.ExecutionOptions {
  /** Runs one attempt of one run; a failure is retried under the policy. */
  readonly handler: (run: ScheduleRun<P>) => Effect.Effect<unknown, E, Req>
  /** How the schedules' payloads are encoded for storage and decoded for the handler. */
  readonly payload: Codec.Codec<P>
}

/** The shape every `ScheduleDefinition` is assignable to. */
export interface AnyScheduleDefinition extends Policy.ExecutionOptions {
  /** The handler, taking any run. */
  readonly handler: (run: ScheduleRun<never>) => Effect.Effect<unknown, unknown, unknown>
  /** The payload's codec. */
  readonly payload: Codec.AnyCodec
}

/** The payload type of a definition. */
export type PayloadOf<D> = D extends ScheduleDefinition<infer P, infer _E, infer _Req> ? P : never
/** The services the handlers of a set of definitions need, which `make` takes from its context. */
export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends ScheduleDefinition<infer _P, infer _E, infer Req> ? Req : never
}[keyof Defs]

/** What `upsert` answers: whether the schedule was created or changed, and its next run. */
export interface UpsertResult {
  /** The schedule did not exist. */
  readonly created: boolean
  /** Something was written: false when the same spec, payload and options were given again. */
  readonly changed: boolean
  /** When the next run is due (epoch milliseconds); null when none is (e.g. the schedule ended). */
  readonly nextRunAt: number | null
}

/** A page of one handler's schedules. */
export interface SchedulePage<P> {
  /** The schedules of this page. */
  readonly items: ReadonlyArray<Rows.ScheduleInfo<P>>
  /** Present when more follow: pass it back to read the next page. */
  readonly cursor?: string | undefined
}
