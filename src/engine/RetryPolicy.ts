/**
 * When a failed attempt runs again, as a decision the engine persists.
 *
 * A policy's `schedule` is an ordinary Effect `Schedule`, but it is never used to
 * sleep: after failed attempt n the engine steps it n times from its initial
 * state (input = the failure, `now` from `Clock`) and stores the start of the
 * last step's interval as the row's `next_attempt_at`. Replaying from the
 * initial state keeps the stored state down to one number (the attempt), so
 * any schedule works, including ones whose state is not serializable;
 * combinators that look at elapsed time see zero elapsed on each replay.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as ScheduleInterval from "effect/ScheduleInterval"
import * as ScheduleIntervals from "effect/ScheduleIntervals"
import * as Time from "../shared/duration.js"
import { DurableRetryPolicyError } from "../shared/Errors.js"
import { shown } from "../shared/validate.js"
import * as Utils from "../shared/backoff.js"

/** Anything that can be stepped to get the next attempt time. The output is ignored. */
export type RetrySchedule = Schedule.Schedule<unknown, unknown>

/** How a record is retried: how many attempts in all, and when each retry comes due. */
export interface RetryPolicy {
  /** Total attempts, the first one included. */
  readonly maxAttempts: number
  /** Stepped once per failure to get the next attempt's time (e.g. exponential backoff with jitter). */
  readonly schedule: RetrySchedule
}

export type Decision =
  | { readonly _tag: "Retry"; readonly at: number }
  | { readonly _tag: "Fail"; readonly error: unknown }

/** Attempts a record gets when its options name none (the first one included). */
export const DEFAULT_MAX_ATTEMPTS = 5

/** How long an attempt may run before its signal is aborted and it counts as timed out. */
export const DEFAULT_ATTEMPT_TIMEOUT_MS = 300_000

/**
 * Builds a schedule from a delay function of the 1-based failed attempt: a
 * number of milliseconds or a `Duration` ("30 seconds"). The raw value is
 * checked here, so NaN, negative (even −0.1 or "-1 second"), infinite,
 * fractional overflow and throwing functions surface as
 * `DurableRetryPolicyError` instead of being clamped by `Duration`.
 */
export const fromDelay = (
  delay: (attempt: number) => Duration.DurationInput | Effect.Effect<Duration.DurationInput>
): RetrySchedule =>
  Schedule.makeWithState(0, (now, _input: unknown, failed: number) => {
    const attempt = failed + 1
    return Effect.suspend(() => {
      const raw = delay(attempt)
      return Effect.isEffect(raw) ? raw : Effect.succeed(raw)
    }).pipe(
      Effect.map((raw: unknown) => {
        const time = Time.millisOf(raw)
        const ms = time?.millis
        if (ms === undefined || !Number.isFinite(ms) || ms < 0) {
          throw new DurableRetryPolicyError({
            message: typeof raw === "number"
              ? `Retry delay for attempt ${attempt} must be a finite non-negative number of milliseconds, got ${String(raw)}`
              : `Retry delay for attempt ${attempt} must be a finite non-negative Duration or number of milliseconds, got ${
                time?.shown ?? shown(raw)
              }`
          })
        }
        const rounded = Math.round(ms)
        if (!Number.isSafeInteger(rounded) || !Number.isSafeInteger(now + rounded)) {
          throw new DurableRetryPolicyError({
            message: `Retry delay for attempt ${attempt} (${ms} ms) does not give a safe integer timestamp`
          })
        }
        return [attempt, rounded, ScheduleDecision.continueWith(ScheduleInterval.after(now + rounded))] as const
      })
    )
  })

/**
 * The default backoff: exponential from 1 s doubling, capped at 300 s, with
 * equal jitter in [50 %, 100 %). Jitter draws from Effect's `Random`, so tests
 * can fix it with `Effect.withRandom`.
 */
export const defaultSchedule: RetrySchedule = fromDelay((attempt) =>
  Effect.map(Random.next, (r) => Utils.jitter(Utils.exponential(attempt), () => r))
)

const NON_RETRYABLE = "NonRetryableError"

/** How far up an error's prototype chain a class named `NonRetryableError` is looked for. */
const MAX_PROTOTYPE_DEPTH = 16

/**
 * True for failures that must never be retried: tagged or named `NonRetryableError`, branded so
 * (Cloudflare Workflows' `NonRetryableError`, whose `name` may be custom), or an instance of a
 * class named `NonRetryableError` anywhere in its prototype chain (ours, its subclasses, or another
 * package's class that never sets `name`).
 */
export const isNonRetryable = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null) return false
  try {
    const marked = error as { readonly name?: unknown; readonly _tag?: unknown; readonly __brand?: unknown }
    if (marked._tag === NON_RETRYABLE || marked.name === NON_RETRYABLE || marked.__brand === NON_RETRYABLE) return true
    let prototype: unknown = Object.getPrototypeOf(error)
    for (let depth = 0; prototype !== null && depth < MAX_PROTOTYPE_DEPTH; depth++) {
      const constructor = Object.prototype.hasOwnProperty.call(prototype, "constructor")
        ? (prototype as { readonly constructor?: { readonly name?: unknown } }).constructor
        : undefined
      if (constructor?.name === NON_RETRYABLE) return true
      prototype = Object.getPrototypeOf(prototype)
    }
    return false
  } catch {
    return false
  }
}

const policyError = (defect: unknown): DurableRetryPolicyError =>
  defect instanceof DurableRetryPolicyError
    ? defect
    : new DurableRetryPolicyError({
      message: `Retry policy failed: ${defect instanceof Error ? defect.message : String(defect)}`,
      cause: defect
    })

/**
 * Steps the schedule `attempt` times and returns when to retry, or that the
 * failure is final. `Fail.error` is the original error unless the policy itself
 * broke (`DurableRetryPolicyError`).
 */
export const decide = (
  policy: RetryPolicy,
  attempt: number,
  error: unknown,
  options: { readonly terminal?: boolean } = {}
): Effect.Effect<Decision> =>
  Effect.gen(function*() {
    if (options.terminal === true || isNonRetryable(error) || attempt >= policy.maxAttempts) {
      return { _tag: "Fail", error } as const
    }
    const now = yield* Clock.currentTimeMillis
    const stepped = yield* Effect.exit(replay(policy.schedule, attempt, error, now))
    if (Exit.isFailure(stepped)) {
      const defect = Option.getOrElse(Cause.dieOption(stepped.cause), () => Cause.squash(stepped.cause))
      return { _tag: "Fail", error: policyError(defect) } as const
    }
    if (Option.isNone(stepped.value)) return { _tag: "Fail", error } as const
    const at = Math.round(stepped.value.value)
    if (!Number.isSafeInteger(at) || at < now) {
      return {
        _tag: "Fail",
        error: new DurableRetryPolicyError({ message: `Retry schedule produced an invalid next attempt time: ${at}` })
      } as const
    }
    return { _tag: "Retry", at } as const
  })

const replay = (schedule: RetrySchedule, steps: number, input: unknown, now: number) =>
  Effect.gen(function*() {
    let state = schedule.initial
    let next = Option.none<number>()
    for (let i = 0; i < steps; i++) {
      const [nextState, , decision] = yield* schedule.step(now, input, state)
      if (ScheduleDecision.isDone(decision)) return Option.none<number>()
      state = nextState
      next = Option.some(ScheduleIntervals.start(decision.intervals))
    }
    return next
  })
