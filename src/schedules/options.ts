/**
 * A schedule's options as given to `upsert`, checked before anything is written: every value
 * named by its field, unknown keys refused (a typo would silently drop its option).
 * @internal
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Time from "../shared/duration.js"
import { InvalidInputError } from "../shared/Errors.js"
import * as Validate from "../shared/validate.js"
import * as Plan from "./plan.js"

/**
 * `Time`: how `graceMs` is given, a Duration or milliseconds on the Effect face, milliseconds
 * (`UpsertOptions<P, number>`) on the promise face.
 */
export interface UpsertOptions<P = unknown, Time = Duration.DurationInput> {
  /** What every run of the schedule is given (JSON, or the schedule's payload Schema's input). Default `null`. */
  readonly payload?: P | undefined
  /** No slot before this time (epoch ms or a `Date`). An `everyMs` schedule's slots count from it. */
  readonly startAt?: number | Date | undefined
  /** No slot after this time: the schedule then ends. */
  readonly endAt?: number | Date | undefined
  /** At most this many scheduled runs (manual runs do not count); the schedule then ends. */
  readonly limit?: number | undefined
  /** Slots missed while the object was evicted or the schedule paused: `"skip"` (default), `"latest"` or `"all"`. */
  readonly catchUp?: Plan.CatchUp | undefined
  /** Slots that come due while a run is active: `"wait"` (default) or `"skip"`. */
  readonly overlap?: Plan.Overlap | undefined
  /** A slot that starts at most this late still counts as on time (default 1 minute). */
  readonly graceMs?: Time | undefined
}

export interface Resolved {
  readonly startAt: number | null
  readonly endAt: number | null
  readonly limit: number | null
  readonly catchUp: Plan.CatchUp
  readonly overlap: Plan.Overlap
  readonly graceMs: number
}

const KNOWN = new Set(["payload", "startAt", "endAt", "limit", "catchUp", "overlap", "graceMs"])

const invalid = (field: string, kind: "type" | "range", message: string) => new InvalidInputError({ field, kind, message })

const oneOf = <S extends string>(field: string, value: unknown, allowed: ReadonlyArray<S>, fallback: S) =>
  value === undefined
    ? Effect.succeed(fallback)
    : typeof value === "string" && (allowed as ReadonlyArray<string>).includes(value)
    ? Effect.succeed(value as S)
    : Effect.fail(invalid(field, "type", `${field} must be one of ${allowed.map((a) => `"${a}"`).join(", ")}, got ${Validate.shown(value)}`))

const optional = <A>(value: unknown, check: (value: unknown) => Effect.Effect<A, InvalidInputError>) =>
  value === undefined ? Effect.succeed(null) : check(value)

// A number keeps the promise face's check and message.
const grace = (value: unknown): Effect.Effect<number, InvalidInputError> => {
  if (typeof value === "number") return Validate.milliseconds("options.graceMs", value)
  const checked = Time.check("options.graceMs", value, (ms) => Number.isSafeInteger(ms) && ms >= 0, {
    number: "a non-negative safe integer",
    duration: "a finite Duration"
  })
  return Time.isProblem(checked)
    ? Effect.fail(new InvalidInputError({ field: "options.graceMs", ...checked }))
    : Effect.succeed(checked.millis)
}

export const resolve = (options: unknown): Effect.Effect<Resolved, InvalidInputError> =>
  Effect.gen(function*() {
    if (options === undefined) options = {}
    if (typeof options !== "object" || options === null || Array.isArray(options)) {
      return yield* invalid("options", "type", `options must be an object, got ${Validate.shown(options)}`)
    }
    const given = options as UpsertOptions<unknown, unknown>
    for (const key of Object.keys(given)) {
      if (!KNOWN.has(key)) return yield* invalid(`options.${key}`, "type", `options.${key} is not a schedule option`)
    }
    const startAt = yield* optional(given.startAt, (value) => Validate.timestamp("options.startAt", value))
    const endAt = yield* optional(given.endAt, (value) => Validate.timestamp("options.endAt", value))
    if (startAt !== null && endAt !== null && endAt < startAt) {
      return yield* invalid("options.endAt", "range", `options.endAt (${endAt}) is before options.startAt (${startAt})`)
    }
    const limit = yield* optional(given.limit, (value) =>
      typeof value === "number" && Number.isSafeInteger(value) && value >= 1
        ? Effect.succeed(value)
        : Effect.fail(invalid("options.limit", "range", `options.limit must be a positive integer, got ${Validate.shown(value)}`)))
    const graceMs = given.graceMs === undefined ? Plan.DEFAULT_GRACE_MS : yield* grace(given.graceMs)
    return {
      startAt,
      endAt,
      limit,
      catchUp: yield* oneOf("options.catchUp", given.catchUp, ["skip", "latest", "all"], "skip"),
      overlap: yield* oneOf("options.overlap", given.overlap, ["wait", "skip"], "wait"),
      graceMs
    }
  })
