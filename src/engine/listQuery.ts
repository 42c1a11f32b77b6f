/**
 * Paging options of the capabilities' `list` calls: checked once, with keyset
 * cursors (`<createdAt>:<key>`) so a page never skips or repeats a record that
 * was there before the first page was read.
 * @internal
 */
import * as Effect from "effect/Effect"
import { InvalidInputError } from "../shared/Errors.js"
import type { Row } from "./StorageService.js"
import { shown } from "../shared/validate.js"

export interface Query<S extends string> {
  readonly statuses: ReadonlyArray<S> | undefined
  readonly limit: number
  readonly after: { readonly at: number; readonly key: string } | undefined
}

export const cursor = (at: number, key: string): string => `${at}:${key}`

/**
 * A page from the `limit + 1` rows a keyset read asked for: the first `limit` as items, and the cursor
 * after the last of them when the extra row says more follow.
 */
export const page = <A>(
  rows: ReadonlyArray<Row>,
  limit: number,
  item: (row: Row) => A,
  cursorAfter: (last: Row) => string
): { readonly items: Array<A>; readonly cursor?: string } => {
  const shown = rows.slice(0, limit)
  const last = shown[shown.length - 1]
  const items = shown.map(item)
  return rows.length > limit && last !== undefined ? { items, cursor: cursorAfter(last) } : { items }
}

const invalid = (field: string, message: string) => new InvalidInputError({ field, kind: "type", message })

/** A page size: an integer from 1 to `maxLimit` (`defaultLimit` when absent). */
export const limit = (value: unknown, defaultLimit: number, maxLimit: number): Effect.Effect<number, InvalidInputError> =>
  value === undefined
    ? Effect.succeed(defaultLimit)
    : typeof value === "number" && Number.isSafeInteger(value) && value >= 1 && value <= maxLimit
    ? Effect.succeed(value)
    : Effect.fail(
      new InvalidInputError({
        field: "limit",
        kind: "range",
        message: `limit must be an integer from 1 to ${maxLimit}, got ${shown(value)}`
      })
    )

export const parse = <S extends string>(
  options: {
    readonly status?: S | ReadonlyArray<S> | undefined
    readonly limit?: number | undefined
    readonly cursor?: string | undefined
  },
  defaultLimit: number,
  maxLimit: number,
  known: ReadonlyArray<S>
): Effect.Effect<Query<S>, InvalidInputError> =>
  Effect.gen(function*() {
    if (typeof options !== "object" || options === null) {
      return yield* invalid("options", `options must be an object, got ${shown(options)}`)
    }
    const pageSize = yield* limit(options.limit, defaultLimit, maxLimit)
    const { status } = options
    const statuses: ReadonlyArray<S> | undefined = status === undefined
      ? undefined
      : typeof status === "string"
      ? [status]
      : status
    if (statuses !== undefined) {
      if (!Array.isArray(statuses) || statuses.length === 0) {
        return yield* invalid("status", `status must be one of ${known.join(", ")} or a non-empty array of them`)
      }
      const unknown = statuses.find((s: S) => !known.includes(s))
      if (unknown !== undefined) {
        return yield* invalid("status", `status must be one of ${known.join(", ")}, got ${shown(unknown)}`)
      }
    }
    if (options.cursor === undefined) return { statuses, limit: pageSize, after: undefined }
    const text = options.cursor
    const separator = typeof text === "string" ? text.indexOf(":") : -1
    const at = separator > 0 ? Number(text.slice(0, separator)) : Number.NaN
    if (!Number.isSafeInteger(at) || at < 0) {
      return yield* invalid("cursor", `cursor must be a cursor returned by list, got ${shown(text)}`)
    }
    return { statuses, limit: pageSize, after: { at, key: text.slice(separator + 1) } }
  })
