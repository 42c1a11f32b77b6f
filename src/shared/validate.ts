/**
 * Checks of call arguments. Each failure names the field and is raised before
 * any storage access, so a rejected call leaves storage unchanged.
 * @internal
 */
import * as Effect from "effect/Effect"
import { InvalidInputError, InvalidOptionError } from "./Errors.js"
import * as Json from "./json.js"

export const MAX_KEY_LENGTH = 512

/** A lone surrogate: SQLite stores it, but reads it back as U+FFFD, so the record could never be found again. */
const LONE_SURROGATE = /\p{Surrogate}/u

/** The bad value as a message shows it: short, and never throwing (hostile getters, symbols). */
export const shown = (value: unknown): string => {
  try {
    if (typeof value === "string") {
      return value.length > 60 ? `a string of ${value.length} characters` : JSON.stringify(value)
    }
    if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") {
      return typeof value === "bigint" ? `${value}n` : Object.is(value, -0) ? "-0" : String(value)
    }
    if (value === null || value === undefined) return String(value)
    if (value instanceof Date) return Number.isNaN(value.getTime()) ? "an invalid Date" : `the Date ${value.toISOString()}`
    if (Array.isArray(value)) return "an array"
    return typeof value === "object" ? "an object" : `a ${typeof value}`
  } catch {
    return "an unreadable value"
  }
}

/** Why `value` cannot be a key (an id or a name), or undefined. */
export const keyProblem = (field: string, value: unknown): string | undefined =>
  typeof value !== "string" || value.length === 0 || value.length > MAX_KEY_LENGTH
    ? `${field} must be a non-empty string of at most ${MAX_KEY_LENGTH} characters, got ${shown(value)}`
    : LONE_SURROGATE.test(value)
    ? `${field} must be well-formed Unicode (it contains a lone surrogate, which storage would not read back as written)`
    : undefined

/**
 * Why `value` cannot be the key of something new, or undefined: a key, and not "." or "..", which a URL
 * path cannot hold (its dot segments are removed, `%2e` too), so no inspector route could address them.
 * Checked where keys are created only: a key stored before stays readable.
 */
export const newKeyProblem = (field: string, value: unknown): string | undefined =>
  keyProblem(field, value) ??
    (value === "." || value === ".."
      ? `${field} cannot be "." or "..": a URL cannot address them (the inspector could not reach it)`
      : undefined)

/** `key` for a key being created (see `newKeyProblem`). */
export const newKey = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> => {
  const problem = newKeyProblem(field, value)
  return problem === undefined
    ? Effect.succeed(value as string)
    : Effect.fail(new InvalidInputError({ field, kind: "type", message: problem }))
}

export const key = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> => {
  const problem = keyProblem(field, value)
  return problem === undefined
    ? Effect.succeed(value as string)
    : Effect.fail(new InvalidInputError({ field, kind: "type", message: problem }))
}

/** Milliseconds as a non-negative safe integer (a duration or a limit). */
export const milliseconds = (field: string, value: unknown): Effect.Effect<number, InvalidInputError> =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0
    ? Effect.succeed(value)
    : Effect.fail(
      new InvalidInputError({
        field,
        kind: "range",
        message: `${field} must be a non-negative safe integer, got ${shown(value)}`
      })
    )

/** A point in time: epoch milliseconds as a non-negative safe integer, or a `Date` of one. */
export const timestamp = (field: string, value: unknown): Effect.Effect<number, InvalidInputError> => {
  const ms = value instanceof Date ? value.getTime() : value
  return typeof ms === "number" && Number.isSafeInteger(ms) && ms >= 0
    ? Effect.succeed(ms)
    : Effect.fail(
      new InvalidInputError({
        field,
        kind: "range",
        message: `${field} must be a non-negative safe integer or a Date, got ${shown(value)}`
      })
    )
}

/** Stored text of a JSON value, or why it cannot be stored. */
export const json = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> =>
  Effect.suspend(() => Effect.mapError(Json.stored(value, field), (failure) => unstorableInput(field, failure)))

/** The `InvalidInputError` of a field whose value is not plain JSON, or too large to store. */
export const unstorableInput = (
  field: string,
  failure: Exclude<Json.Unstorable, { readonly _tag: "Schema" }>
): InvalidInputError =>
  failure._tag === "NotJson"
    ? new InvalidInputError({ field, kind: "type", message: `${field} must be JSON-serializable: ${failure.reason}` })
    : new InvalidInputError({ field, kind: "range", message: `${field} ${Json.tooLarge(failure.bytes)}` })

export const isPositiveInteger = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value > 0

/** An option that must be a positive safe integer (the fallback when absent). */
export const positiveInteger = (field: string, value: unknown, fallback: number): Effect.Effect<number, InvalidOptionError> =>
  value === undefined
    ? Effect.succeed(fallback)
    : isPositiveInteger(value)
    ? Effect.succeed(value)
    : Effect.fail(
      new InvalidOptionError({ field, kind: "range", message: `${field} must be a positive integer, got ${shown(value)}` })
    )
