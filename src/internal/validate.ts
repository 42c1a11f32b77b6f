/**
 * Checks of call arguments. Each failure names the field and is raised before
 * any storage access, so a rejected call leaves storage unchanged.
 * @internal
 */
import { Effect } from "effect"
import { InvalidInputError } from "../Errors.js"
import * as Json from "./json.js"

export const MAX_KEY_LENGTH = 512

export const key = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> =>
  typeof value === "string" && value.length > 0 && value.length <= MAX_KEY_LENGTH
    ? Effect.succeed(value)
    : Effect.fail(
      new InvalidInputError({
        field,
        kind: "type",
        message: `${field} must be a non-empty string of at most ${MAX_KEY_LENGTH} characters`
      })
    )

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
    const bytes = Json.byteLength(text)
    if (bytes > Json.MAX_ROW_BYTES) {
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
