/**
 * Checks of call arguments. Each failure names the field and is raised before
 * any storage access, so a rejected call leaves storage unchanged.
 * @internal
 */
import * as Effect from "effect/Effect"
import { InvalidInputError } from "../Errors.js"
import * as Json from "./json.js"

export const MAX_KEY_LENGTH = 512

/** A lone surrogate: SQLite stores it, but reads it back as U+FFFD, so the record could never be found again. */
const LONE_SURROGATE = /\p{Surrogate}/u

/** Why `value` cannot be a key (an id or a name), or undefined. */
export const keyProblem = (field: string, value: unknown): string | undefined =>
  typeof value !== "string" || value.length === 0 || value.length > MAX_KEY_LENGTH
    ? `${field} must be a non-empty string of at most ${MAX_KEY_LENGTH} characters`
    : LONE_SURROGATE.test(value)
    ? `${field} must be well-formed Unicode (it contains a lone surrogate, which storage would not read back as written)`
    : undefined

export const key = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> => {
  const problem = keyProblem(field, value)
  return problem === undefined
    ? Effect.succeed(value as string)
    : Effect.fail(new InvalidInputError({ field, kind: "type", message: problem }))
}

export const timestamp = (field: string, value: unknown): Effect.Effect<number, InvalidInputError> =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0
    ? Effect.succeed(value)
    : Effect.fail(new InvalidInputError({ field, kind: "range", message: `${field} must be a non-negative safe integer` }))

/** Stored text of a JSON value, or why it cannot be stored. */
export const json = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> =>
  Effect.suspend(() => {
    const checked = Json.check(value)
    if (!checked.ok) {
      return Effect.fail(
        new InvalidInputError({
          field,
          kind: "type",
          message: `${field} must be JSON-serializable: ${checked.reason.replace(/^value/, field)}`
        })
      )
    }
    const text = Json.encode(value)
    const bytes = Json.oversizedBytes(text)
    if (bytes !== undefined) {
      return Effect.fail(
        new InvalidInputError({
          field,
          kind: "range",
          message: `${field} is ${bytes} bytes as JSON; a stored row is limited to ${Json.MAX_ROW_BYTES} bytes`
        })
      )
    }
    return Effect.succeed(text)
  })
