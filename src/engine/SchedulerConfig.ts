/**
 * The engine's settings, checked once (a facade resolves them when it is constructed, a layer when
 * it is built) and read by every part of the engine as a service: the permits, the wake-up, the
 * passes.
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Time from "../shared/duration.js"
import { InvalidOptionError, type SerializedError } from "../shared/Errors.js"
import type * as Logging from "./Logging.js"
import { isPositiveInteger, positiveInteger, shown } from "../shared/validate.js"

/** What `onAlarmRetry` is told after a failed alarm pass armed its own fallback alarm. */
export interface AlarmRetryInfo {
  /** Why the pass failed. */
  readonly error: SerializedError
  /** When the fallback alarm fires, from now (milliseconds): the scheduler's `alarmMinDelayMs`. */
  readonly retryInMs: number
  /** The platform's retry count of the failed alarm invocation, when it gave one. */
  readonly retryCount?: number
  /** Whether the failed invocation was itself a platform retry, when the platform said. */
  readonly isRetry?: boolean
  /** The scheduler's `objectId` option, to tell objects apart in metrics. */
  readonly objectId?: string
}

/**
 * The engine's settings. `Time` is how its times are given: by default (the Effect face) a Duration
 * ("5 seconds", `Duration.minutes(14)`) or a number of milliseconds; the promise face takes
 * `SchedulerOptions<number>`, milliseconds only. (The names keep their `Ms` from the promise face.)
 */
export interface SchedulerOptions<Time = Duration.DurationInput> {
  /** Permits shared by every execution in the object (eager, timer and alarm). Default 10. */
  readonly alarmConcurrency?: number
  /** The physical alarm is never set sooner than this after a write (1 to 15 seconds). Default 15 seconds. */
  readonly alarmMinDelayMs?: Time
  /** An alarm pass returns after this long and lets the work continue (platform limit: 15 min). Default 14 minutes. */
  readonly alarmHandoffMs?: Time
  /** Run work at its exact due time with an in-memory timer. Default false. */
  readonly liveTimers?: boolean
  /** Told after a failed alarm pass armed its fallback alarm. Best effort. */
  readonly onAlarmRetry?: ((info: AlarmRetryInfo) => void | PromiseLike<void>) | undefined
  /** Included in `AlarmRetryInfo`. */
  readonly objectId?: string | undefined
  /**
   * Where the library's diagnostics go, one object per entry (`{ level, message, event, ... }`: failures for
   * good, timeouts, failed alarm passes). Default: the Workers console. Used by `Scheduler.layerDurableObject`.
   */
  readonly log?: Logging.Sink | undefined
}

/** The engine's settings, resolved: every option checked, times in milliseconds, defaults filled in. */
export interface SchedulerConfig {
  /** Permits shared by every execution in the object. */
  readonly alarmConcurrency: number
  /** The physical alarm is never set sooner than this after a write (milliseconds). */
  readonly alarmMinDelayMs: number
  /** An alarm pass returns after this long and lets the work continue (milliseconds). */
  readonly alarmHandoffMs: number
  /** Whether work runs at its exact due time with an in-memory timer. */
  readonly liveTimers: boolean
  /** Told after a failed alarm pass armed its fallback alarm. */
  readonly onAlarmRetry: ((info: AlarmRetryInfo) => void | PromiseLike<void>) | undefined
  /** Included in `AlarmRetryInfo`. */
  readonly objectId: string | undefined
  /** Where the library's diagnostics go. */
  readonly log: Logging.Sink | undefined
  /** Due rows a pass starts per table (a table may set its own). */
  readonly dueBatchSize: number
}

/** The `SchedulerConfig` service's tag: the engine's settings, resolved once. */
export const SchedulerConfig: Context.Tag<SchedulerConfig, SchedulerConfig> = Context.GenericTag<SchedulerConfig>(
  "durability/SchedulerConfig"
)

/** The defaults of the numeric settings (milliseconds), for reference and tests. */
export const defaults = {
  alarmConcurrency: 10,
  alarmMinDelayMs: 15_000,
  alarmHandoffMs: 840_000,
  dueBatchSize: 100
} as const

const typeError = (field: string, expected: string, value: unknown) =>
  new InvalidOptionError({ field, kind: "type", message: `${field} must be ${expected}, got ${shown(value)}` })

/** How a face gives its times: the Effect face Durations (or milliseconds), the promise face milliseconds only. */
export type TimeInput = "duration" | "milliseconds"

const MIN_DELAY_RANGE = { number: "between 1000 and 15000", duration: "between 1 second and 15 seconds" }

/** A time option in milliseconds; a number is checked (and named in messages) as the promise face always has. */
const millis = (field: string, value: unknown, fallback: number, times: TimeInput) =>
  Effect.suspend(() => {
    if (value === undefined || typeof value === "number" || times === "milliseconds") {
      return positiveInteger(field, value, fallback)
    }
    const checked = Time.check(field, value, isPositiveInteger, {
      number: "a positive integer",
      duration: "a finite Duration of at least 1 millisecond"
    })
    return Time.isProblem(checked)
      ? Effect.fail(new InvalidOptionError({ field, ...checked }))
      : Effect.succeed(checked.millis)
  })

/**
 * Checks options and fills defaults; messages name the field and show the bad value. `times`:
 * `"milliseconds"` for the promise face, whose options are numbers only.
 */
export const resolve = Effect.fn("SchedulerConfig.resolve")(function*(
  options: SchedulerOptions<unknown>,
  times: TimeInput = "duration"
) {
  if (typeof options !== "object" || options === null) {
    return yield* new InvalidOptionError({ field: "options", kind: "type", message: "options must be an object" })
  }
  const alarmConcurrency = yield* positiveInteger("alarmConcurrency", options.alarmConcurrency, defaults.alarmConcurrency)
  const alarmMinDelayMs = yield* millis("alarmMinDelayMs", options.alarmMinDelayMs, defaults.alarmMinDelayMs, times)
  if (alarmMinDelayMs < 1_000 || alarmMinDelayMs > 15_000) {
    const given = options.alarmMinDelayMs
    const number = typeof given === "number"
    return yield* new InvalidOptionError({
      field: "alarmMinDelayMs",
      kind: "range",
      message: `alarmMinDelayMs must be ${number ? MIN_DELAY_RANGE.number : MIN_DELAY_RANGE.duration}, got ${
        number ? alarmMinDelayMs : Time.millisOf(given)?.shown
      }`
    })
  }
  const alarmHandoffMs = yield* millis("alarmHandoffMs", options.alarmHandoffMs, defaults.alarmHandoffMs, times)
  if (options.liveTimers !== undefined && typeof options.liveTimers !== "boolean") {
    return yield* typeError("liveTimers", "a boolean", options.liveTimers)
  }
  if (options.onAlarmRetry !== undefined && typeof options.onAlarmRetry !== "function") {
    return yield* typeError("onAlarmRetry", "a function", options.onAlarmRetry)
  }
  if (options.log !== undefined && typeof options.log !== "function") {
    return yield* typeError("log", "a function", options.log)
  }
  if (options.objectId !== undefined && typeof options.objectId !== "string") {
    return yield* typeError("objectId", "a string", options.objectId)
  }
  return {
    alarmConcurrency,
    alarmMinDelayMs,
    alarmHandoffMs,
    liveTimers: options.liveTimers ?? false,
    onAlarmRetry: options.onAlarmRetry,
    objectId: options.objectId,
    log: options.log,
    dueBatchSize: defaults.dueBatchSize
  } satisfies SchedulerConfig
})

/** The settings from options (times as Durations or milliseconds); the layer fails to build on a bad option. */
export const layer = (options: SchedulerOptions = {}): Layer.Layer<SchedulerConfig, InvalidOptionError> =>
  Layer.effect(SchedulerConfig, resolve(options))

/** Settings already resolved (by a facade's constructor): no second check. */
export const layerResolved = (config: SchedulerConfig): Layer.Layer<SchedulerConfig> =>
  Layer.succeed(SchedulerConfig, config)
