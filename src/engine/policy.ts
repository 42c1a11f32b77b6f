/**
 * Per-capability and per-method execution options (`attemptTimeoutMs`,
 * `retries`), checked once at construction with messages that name the field.
 * The Effect face's types: times are Durations (a number is milliseconds); the
 * promise face has its own millisecond types and passes them through here.
 * @internal
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Time from "../shared/duration.js"
import { InvalidOptionError } from "../shared/Errors.js"
import * as RetryPolicy from "./RetryPolicy.js"
import { isPositiveInteger, shown } from "../shared/validate.js"

/** How a record is retried: attempts in all, and the delay (or `Schedule`) before each retry. */
export interface RetriesOptions {
  /** Total attempts, the first included. Default 5. */
  readonly maxAttempts?: number | undefined
  /** Delay after failed attempt n (1-based): a Duration or milliseconds. Default: `jitter(exponential(n))`. */
  readonly delay?: ((attempt: number) => Duration.DurationInput) | undefined
  /** An Effect `Schedule` instead of `delay`; stepped to get the next attempt time, never slept. */
  readonly schedule?: RetryPolicy.RetrySchedule | undefined
}

/** Retries and timeouts of a capability or of one method; the method's options override the capability's. */
export interface ExecutionOptions {
  /**
   * Per-attempt timeout: a Duration ("30 seconds") or milliseconds, whole milliseconds at least 1.
   * Default 5 minutes. (The name keeps its `Ms` from the promise face, where it is milliseconds only.)
   */
  readonly attemptTimeoutMs?: Duration.DurationInput | undefined
  /** How failed attempts are retried (default: 5 attempts, exponential backoff with jitter). */
  readonly retries?: RetriesOptions | undefined
}

export interface Resolved {
  readonly attemptTimeoutMs: number
  readonly maxAttempts: number
  readonly schedule: RetryPolicy.RetrySchedule
}

export const defaults: Resolved = {
  attemptTimeoutMs: RetryPolicy.DEFAULT_ATTEMPT_TIMEOUT_MS,
  maxAttempts: RetryPolicy.DEFAULT_MAX_ATTEMPTS,
  schedule: RetryPolicy.defaultSchedule
}

const invalid = (field: string, kind: "range" | "type", message: string, value: unknown) =>
  new InvalidOptionError({ field, kind, message: `${field} ${message}, got ${shown(value)}` })

/** Resolves `options` over `inherited`; `prefix` is e.g. "" or "methods.resize.". */
export const resolve = (
  prefix: string,
  options: ExecutionOptions | undefined,
  inherited: Resolved
): Effect.Effect<Resolved, InvalidOptionError> =>
  Effect.suspend(() => {
    if (options === undefined) return Effect.succeed(inherited)
    if (typeof options !== "object" || options === null) {
      return Effect.fail(invalid(prefix.replace(/\.$/, "") || "options", "type", "must be an object", options))
    }
    const { retries } = options
    let attemptTimeoutMs: number | undefined
    if (options.attemptTimeoutMs !== undefined) {
      const field = `${prefix}attemptTimeoutMs`
      const timeout = Time.check(field, options.attemptTimeoutMs, isPositiveInteger, {
        number: "a positive integer",
        duration: "a finite Duration of at least 1 millisecond"
      })
      if (Time.isProblem(timeout)) return Effect.fail(new InvalidOptionError({ field, ...timeout }))
      attemptTimeoutMs = timeout.millis
    }
    if (retries !== undefined && (typeof retries !== "object" || retries === null)) {
      return Effect.fail(invalid(`${prefix}retries`, "type", "must be an object", retries))
    }
    if (retries?.maxAttempts !== undefined && !isPositiveInteger(retries.maxAttempts)) {
      return Effect.fail(invalid(`${prefix}retries.maxAttempts`, "range", "must be a positive integer", retries.maxAttempts))
    }
    if (retries?.delay !== undefined && typeof retries.delay !== "function") {
      return Effect.fail(invalid(`${prefix}retries.delay`, "type", "must be a function", retries.delay))
    }
    if (retries?.schedule !== undefined && !Schedule.isSchedule(retries.schedule)) {
      return Effect.fail(invalid(`${prefix}retries.schedule`, "type", "must be an Effect Schedule", retries.schedule))
    }
    if (retries?.delay !== undefined && retries.schedule !== undefined) {
      return Effect.fail(
        new InvalidOptionError({
          field: `${prefix}retries`,
          kind: "type",
          message: `${prefix}retries takes either delay or schedule, not both`
        })
      )
    }
    return Effect.succeed({
      attemptTimeoutMs: attemptTimeoutMs ?? inherited.attemptTimeoutMs,
      maxAttempts: retries?.maxAttempts ?? inherited.maxAttempts,
      schedule: retries?.schedule ??
        (retries?.delay !== undefined ? RetryPolicy.fromDelay(retries.delay) : inherited.schedule)
    })
  })
