/**
 * What workflows accept: ids, step names and event types (length and characters), payload sizes, steps
 * per instance, and durations as milliseconds or the strings Cloudflare Workflows takes ("10 seconds",
 * "2 days"). Each check names the field; a refused call writes nothing.
 * @internal
 */
import * as Effect from "effect/Effect"
import { InvalidInputError } from "../shared/Errors.js"
import * as Json from "../shared/json.js"
import { shown } from "../shared/validate.js"

/** An instance id: 1–100 characters, letters, digits, `_` and `-`, not starting with `-` (as Cloudflare's). */
export const MAX_ID_LENGTH = 100
/** A step's name: 1–256 characters, no control characters. */
export const MAX_STEP_NAME_LENGTH = 256
/** An event's type: 1–100 characters, letters, digits, `_`, `-` and `.`. */
export const MAX_EVENT_TYPE_LENGTH = 100
/** Params, a step's result, an event's payload and the output, as stored JSON: 1 MiB (Cloudflare's limit too). */
export const MAX_PAYLOAD_BYTES = 1024 * 1024
/** Steps one instance may take (Cloudflare's default). */
export const MAX_STEPS = 10_000
/** Instances one `createBatch` may create (Cloudflare's limit). */
export const MAX_BATCH = 100
/** The longest sleep or wait: 365 days (Cloudflare's). */
export const MAX_DURATION_MS = 365 * 24 * 60 * 60 * 1000

const ID = /^[A-Za-z0-9_][A-Za-z0-9_-]*$/
const EVENT_TYPE = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]|\p{Surrogate}/u

const invalid = (field: string, message: string, kind: "type" | "range" = "type") =>
  Effect.fail(new InvalidInputError({ field, kind, message }))

export const id = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> =>
  typeof value === "string" && value.length > 0 && value.length <= MAX_ID_LENGTH && ID.test(value)
    ? Effect.succeed(value)
    : invalid(field, `${field} must be 1–${MAX_ID_LENGTH} letters, digits, "_" or "-" (not starting with "-"), got ${shown(value)}`)

export const stepNameProblem = (value: unknown): string | undefined =>
  typeof value === "string" && value.length > 0 && value.length <= MAX_STEP_NAME_LENGTH && !CONTROL.test(value)
    ? undefined
    : `A step's name must be a string of 1–${MAX_STEP_NAME_LENGTH} characters without control characters, got ${shown(value)}`

export const eventTypeProblem = (field: string, value: unknown): string | undefined =>
  typeof value === "string" && value.length > 0 && value.length <= MAX_EVENT_TYPE_LENGTH && EVENT_TYPE.test(value)
    ? undefined
    : `${field} must be 1–${MAX_EVENT_TYPE_LENGTH} letters, digits, "_", "-" or ".", got ${shown(value)}`

export const eventType = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> => {
  const problem = eventTypeProblem(field, value)
  return problem === undefined ? Effect.succeed(value as string) : invalid(field, problem)
}

/** `value` as stored JSON (a top-level `undefined` kept), or why it cannot be: not JSON, or over the payload limit. */
export const encoded = (what: string, value: unknown): { readonly text: string } | { readonly problem: string } => {
  const checked = Json.check(value)
  if (!checked.ok) return { problem: `${what} must be JSON: ${checked.reason}` }
  const text = Json.encode(value)
  const bytes = new TextEncoder().encode(text).length
  return bytes > MAX_PAYLOAD_BYTES ? { problem: `${what} is ${bytes} bytes as JSON; the limit is ${MAX_PAYLOAD_BYTES}` } : { text }
}

export const payload = (field: string, value: unknown): Effect.Effect<string, InvalidInputError> => {
  const stored = encoded(field, value)
  return "text" in stored ? Effect.succeed(stored.text) : invalid(field, stored.problem)
}

const UNITS: Readonly<Record<string, number>> = {
  millisecond: 1,
  second: 1000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000
}

const DURATION = /^\s*(\d+(?:\.\d+)?)\s*(millisecond|second|minute|hour|day|week|month|year)s?\s*$/i

/** What a duration may be: milliseconds, or "<number> <unit>" with Cloudflare's units (singular or plural). */
export type WorkflowDuration = number | `${number} ${DurationUnit}`

/** A duration's unit, as Cloudflare Workflows spells them. */
export type DurationUnit =
  | "millisecond"
  | "milliseconds"
  | "second"
  | "seconds"
  | "minute"
  | "minutes"
  | "hour"
  | "hours"
  | "day"
  | "days"
  | "week"
  | "weeks"
  | "month"
  | "months"
  | "year"
  | "years"

/** The milliseconds a duration stands for, or what is wrong with it. */
export const durationMillis = (field: string, value: unknown): number | string => {
  let millis: number | undefined
  if (typeof value === "number") millis = value
  else if (typeof value === "string") {
    const parsed = DURATION.exec(value)
    if (parsed !== null) millis = Math.round(Number(parsed[1]) * (UNITS[parsed[2]!.toLowerCase()] ?? Number.NaN))
  }
  if (millis === undefined) {
    return `${field} must be milliseconds or a string such as "10 seconds" or "2 days", got ${shown(value)}`
  }
  return Number.isSafeInteger(millis) && millis >= 0 && millis <= MAX_DURATION_MS
    ? millis
    : `${field} must be between 0 and ${MAX_DURATION_MS} milliseconds (365 days), got ${shown(value)}`
}

export const duration = (field: string, value: unknown): Effect.Effect<number, InvalidInputError> => {
  const millis = durationMillis(field, value)
  return typeof millis === "number" ? Effect.succeed(millis) : invalid(field, millis, "range")
}
