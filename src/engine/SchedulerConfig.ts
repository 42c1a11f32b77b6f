/**
 * The engine's settings, checked once (a facade resolves them when it is constructed, a layer when
 * it is built) and read by every part of the engine as a service: the permits, the wake-up, the
 * passes.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InvalidOptionError, type SerializedError } from "../shared/Errors.js"
import type * as Logging from "./Logging.js"
import { positiveInteger, shown } from "../shared/validate.js"

/** What `onAlarmRetry` is told after a failed alarm pass armed its own fallback alarm. */
export interface AlarmRetryInfo {
  readonly error: SerializedError
  readonly retryInMs: number
  readonly retryCount?: number
  readonly isRetry?: boolean
  readonly objectId?: string
}

export interface SchedulerOptions {
  /** Permits shared by every execution in the object (eager, timer and alarm). Default 10. */
  readonly alarmConcurrency?: number
  /** The physical alarm is never set sooner than this after a write (1 000–15 000 ms). Default 15 000. */
  readonly alarmMinDelayMs?: number
  /** An alarm pass returns after this long and lets the work continue (platform limit: 15 min). Default 840 000. */
  readonly alarmHandoffMs?: number
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

export interface SchedulerConfig {
  readonly alarmConcurrency: number
  readonly alarmMinDelayMs: number
  readonly alarmHandoffMs: number
  readonly liveTimers: boolean
  readonly onAlarmRetry: ((info: AlarmRetryInfo) => void | PromiseLike<void>) | undefined
  readonly objectId: string | undefined
  readonly log: Logging.Sink | undefined
  /** Due rows a pass starts per table (a table may set its own). */
  readonly dueBatchSize: number
}

export const SchedulerConfig: Context.Tag<SchedulerConfig, SchedulerConfig> = Context.GenericTag<SchedulerConfig>(
  "durability/SchedulerConfig"
)

export const defaults = {
  alarmConcurrency: 10,
  alarmMinDelayMs: 15_000,
  alarmHandoffMs: 840_000,
  dueBatchSize: 100
} as const

const typeError = (field: string, expected: string, value: unknown) =>
  new InvalidOptionError({ field, kind: "type", message: `${field} must be ${expected}, got ${shown(value)}` })

/** Checks options and fills defaults; messages name the field and show the bad value. */
export const resolve = Effect.fn("SchedulerConfig.resolve")(function*(options: SchedulerOptions) {
  if (typeof options !== "object" || options === null) {
    return yield* new InvalidOptionError({ field: "options", kind: "type", message: "options must be an object" })
  }
  const alarmConcurrency = yield* positiveInteger("alarmConcurrency", options.alarmConcurrency, defaults.alarmConcurrency)
  const alarmMinDelayMs = yield* positiveInteger("alarmMinDelayMs", options.alarmMinDelayMs, defaults.alarmMinDelayMs)
  if (alarmMinDelayMs < 1_000 || alarmMinDelayMs > 15_000) {
    return yield* new InvalidOptionError({
      field: "alarmMinDelayMs",
      kind: "range",
      message: `alarmMinDelayMs must be between 1000 and 15000, got ${alarmMinDelayMs}`
    })
  }
  const alarmHandoffMs = yield* positiveInteger("alarmHandoffMs", options.alarmHandoffMs, defaults.alarmHandoffMs)
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

/** The settings from options; the layer fails to build on a bad option. */
export const layer = (options: SchedulerOptions = {}): Layer.Layer<SchedulerConfig, InvalidOptionError> =>
  Layer.effect(SchedulerConfig, resolve(options))

/** Settings already resolved (by a facade's constructor): no second check. */
export const layerResolved = (config: SchedulerConfig): Layer.Layer<SchedulerConfig> =>
  Layer.succeed(SchedulerConfig, config)
