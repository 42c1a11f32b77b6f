/**
 * Time options of the Effect face: a `Duration` or anything `Duration.decode` takes ("30 seconds",
 * `Duration.minutes(1)`, a number of milliseconds). A number passes through untouched, so the checks
 * and messages of the millisecond options the promise face gives stay exactly what they were.
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InvalidInputError } from "./Errors.js"
import { shown } from "./validate.js"

export interface Millis {
  /**
   * The value in milliseconds: a number as it is; a Duration rounded to whole milliseconds (less than
   * one means nothing to an alarm, and a computed one like `Duration.seconds(0.1 * 3)` is rarely whole);
   * `Infinity` for `Duration.infinity`; `-Infinity`, below every range, for a negative input, which
   * `Duration.decode` would quietly make zero.
   */
  readonly millis: number
  /** The value as a message shows it. */
  readonly shown: string
}

const isNegative = (value: unknown): boolean =>
  typeof value === "string"
    ? /^\s*-/.test(value)
    : typeof value === "bigint"
    ? value < 0n
    : Array.isArray(value) && value.some((part) => typeof part === "number" && part < 0)

const shownTime = (value: unknown, duration: Duration.Duration): string =>
  Duration.isDuration(value)
    ? String(duration)
    : Array.isArray(value)
    ? `[${value.map(String).join(", ")}]`
    : shown(value)

/** The milliseconds `value` stands for, or undefined when it is neither a number nor a Duration. */
export const millisOf = (value: unknown): Millis | undefined => {
  if (typeof value === "number") return { millis: value, shown: shown(value) }
  const decoded = Duration.decodeUnknown(value)
  if (Option.isNone(decoded)) return undefined
  const duration = decoded.value
  const millis = isNegative(value)
    ? Number.NEGATIVE_INFINITY
    : Duration.isFinite(duration)
    ? Math.round(Duration.toMillis(duration))
    : Number.POSITIVE_INFINITY
  return { millis, shown: shownTime(value, duration) }
}

/** What a time option must be, in words: for a number (milliseconds) and for a Duration. */
export interface Rule {
  readonly number: string
  readonly duration: string
}

export interface Problem {
  readonly kind: "range"
  readonly message: string
}

/**
 * A time option's milliseconds when `inRange` takes them, else what is wrong, with a message naming
 * `field`: a number keeps the millisecond wording (`rule.number`), a Duration gets its own.
 */
export const check = (
  field: string,
  value: unknown,
  inRange: (millis: number) => boolean,
  rule: Rule
): { readonly millis: number } | Problem => {
  const time = millisOf(value)
  // "range" like every other bad value of a time option: the promise face has always raised RangeError for them.
  if (time === undefined) {
    return { kind: "range", message: `${field} must be a Duration or a number of milliseconds, got ${shown(value)}` }
  }
  if (inRange(time.millis)) return { millis: time.millis }
  return {
    kind: "range",
    message: `${field} must be ${typeof value === "number" ? rule.number : rule.duration}, got ${time.shown}`
  }
}

export const isProblem = (result: { readonly millis: number } | Problem): result is Problem => "kind" in result

/**
 * A call's length of time on the Effect face (`delayMs`, `timeoutMs`…): a Duration, a string such as
 * "5 seconds", a `[seconds, nanos]` pair, or a number of milliseconds. Not a bigint, which a Duration
 * reads as nanoseconds: in a field named `…Ms` that is a slip, and calls have always refused it.
 */
export type CallDuration = Exclude<Duration.DurationInput, bigint>

/**
 * A call's time option in milliseconds when `inRange` takes them, else an `InvalidInputError` naming
 * `field` (kind "range", as a bad number of milliseconds has always been).
 */
export const input = (
  field: string,
  value: unknown,
  inRange: (millis: number) => boolean,
  rule: Rule
): Effect.Effect<number, InvalidInputError> => {
  const checked = typeof value === "bigint"
    ? { kind: "range" as const, message: `${field} must be a Duration or a number of milliseconds, got ${shown(value)}` }
    : check(field, value, inRange, rule)
  return isProblem(checked)
    ? Effect.fail(new InvalidInputError({ field, ...checked }))
    : Effect.succeed(checked.millis)
}

const isNonNegative = (millis: number): boolean => Number.isSafeInteger(millis) && millis >= 0

/**
 * A call's length of time (`delayMs`, `timeoutMs`, `olderThanMs`…) in whole milliseconds, 0 or more:
 * a number is checked and worded exactly as `Validate.milliseconds` does; a Duration must be finite.
 */
export const milliseconds = (field: string, value: unknown): Effect.Effect<number, InvalidInputError> =>
  input(field, value, isNonNegative, { number: "a non-negative safe integer", duration: "a finite Duration" })
