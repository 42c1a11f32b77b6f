/**
 * The named alarms' data types: a definition, what its handler is called with and a name's stored
 * occurrence, as the public module re-exports them (its private parts build on them).
 * @internal
 */
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Lifecycle from "../engine/Lifecycle.js"
import type { InvalidInputError, SerializedError, StorageError } from "../shared/Errors.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"
import type * as Policy from "../engine/policy.js"
import type * as Codec from "../shared/codec.js"

/** What a named-alarm handler is called with. `P`: the payload's type, as the handler declares it. */
export interface DurableAlarmInfo<Name extends string = string, P = unknown> {
  /** The alarm's name. */
  readonly name: Name
  /** The payload given when the occurrence was scheduled (JSON), or undefined. */
  readonly payload: P | undefined
  /** The time the occurrence was scheduled for. */
  readonly scheduledTime: number
  /** 1-based; already durably counted. */
  readonly attempt: number
  /** True from the second attempt on. */
  readonly isRetry: boolean
  /** Attempts before this one (`attempt - 1`). */
  readonly retryCount: number
  /** `durability-alarm:v1:<generation>`: stable across retries of one occurrence, new for a replacement. */
  readonly idempotencyKey: string
  /** Aborted on timeout, cancel or purge. Cooperative: stop when you see it. */
  readonly signal: AbortSignal
  /** The platform's alarm info when a physical alarm started this attempt. */
  readonly platform: AlarmInvocationInfo | undefined
}

/** One named alarm: its handler, retries and timeouts. */
export interface AlarmDefinition<E, Req> extends Policy.ExecutionOptions {
  /** Runs one attempt; a failure is retried under the policy. */
  readonly handler: (info: DurableAlarmInfo) => Effect.Effect<unknown, E, Req>
  /** Retry an attempt that timed out (default false: a timeout is terminal). */
  readonly retryTimeouts?: boolean | undefined
  /** How a payload is checked and stored (`alarm({ payload: schema })`); JSON as it is without one. */
  readonly payload?: Codec.AnyCodec | undefined
}

/** The shape every `AlarmDefinition` is assignable to. */
export interface AnyAlarmDefinition extends Policy.ExecutionOptions {
  /** The handler. */
  readonly handler: (info: DurableAlarmInfo) => Effect.Effect<unknown, unknown, unknown>
  /** Retry an attempt that timed out. */
  readonly retryTimeouts?: boolean | undefined
  /** How a payload is checked and stored. */
  readonly payload?: Codec.AnyCodec | undefined
}

/** The services the handlers of a set of definitions need, which `make` takes from its context. */
export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends AlarmDefinition<infer _E, infer Req> ? Req : never
}[keyof Defs]

/** A name's stored occurrence: pending (waiting, running or retrying) or failed for good. */
export interface NamedAlarmState<Name extends string = string> {
  /** The alarm's name. */
  readonly name: Name
  /**
   * `pending`: waiting, running or retrying; `failed`: failed for good, kept until scheduled again,
   * canceled or purged.
   */
  readonly status: "pending" | "failed"
  /** The time it was scheduled for. */
  readonly scheduledTime: number
  /** When its next attempt is due (its scheduled time, or a retry's time). */
  readonly nextAttemptAt: number
  /** Attempts claimed so far. */
  readonly attempt: number
  /** The last attempt's failure; null before any failed. */
  readonly lastError: SerializedError | null
  /** The `idempotencyKey` its handler gets (stable across this occurrence's retries). */
  readonly idempotencyKey: string
  /** When it was scheduled (epoch milliseconds). */
  readonly createdAt: number
  /** The payload it was scheduled with (JSON), or undefined. */
  readonly payload: unknown
}

/** Which occurrences `list` returns, a page at a time. */
export interface AlarmListOptions {
  /** Only occurrences in this state (or these states). Default: all. */
  readonly status?: NamedAlarmState["status"] | ReadonlyArray<NamedAlarmState["status"]> | undefined
  /** At most this many (1–1000). Default 100. */
  readonly limit?: number | undefined
  /** The `cursor` of the previous page. */
  readonly cursor?: string | undefined
}

/**
 * A page of occurrences, soonest first; `cursor` is set when more follow. An occurrence whose next
 * attempt moves while you page (a retry, a replacement) may be seen twice or not at all.
 */
export interface AlarmPage<Name extends string = string> {
  /** The occurrences of this page. */
  readonly items: ReadonlyArray<NamedAlarmState<Name>>
  /** Pass it back to `list` for the next page; absent on the last. */
  readonly cursor?: string | undefined
}

/** `make`'s options: the defaults of every name's retries and timeouts, and a lifecycle hook. */
export interface NamedAlarmsOptions extends Policy.ExecutionOptions {
  /** Told each lifecycle event of the alarms after it committed, e.g. for metrics. */
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/**
 * The named alarms by name (`alarms.schedule("cleanup", …)`): the form for a name held in a variable.
 * Each name is also a property with its own calls (`alarms.cleanup.schedule(…)`), the form to use.
 */
export interface NamedAlarmsBase<Defs extends Record<string, AnyAlarmDefinition>> {
  /**
   * Schedules the name at `scheduledTime` (epoch ms or a `Date`), replacing its pending occurrence;
   * `payload` (JSON) reaches its handler as `info.payload`.
   */
  readonly schedule: (
    name: keyof Defs & string,
    scheduledTime: number | Date,
    payload?: unknown
  ) => Effect.Effect<void, InvalidInputError | StorageError>
  /** The name's stored occurrence, if any. */
  readonly get: <K extends keyof Defs & string>(
    name: K
  ) => Effect.Effect<Option.Option<NamedAlarmState<K>>, InvalidInputError | StorageError>
  /**
   * Deletes the name's occurrence (pending or failed); a running handler's signal is aborted with
   * `DurableCanceledError` (the name stays locked until that handler ends). True when there was one.
   */
  readonly cancel: (name: keyof Defs & string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** The stored occurrences, soonest first, a page at a time (`{ status?, limit?, cursor? }`). */
  readonly list: (options?: AlarmListOptions) => Effect.Effect<AlarmPage, InvalidInputError | StorageError>
  /** Deletes every occurrence created before `before` (strict; epoch ms or a `Date`); returns how many. */
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
}

