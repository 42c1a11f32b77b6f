/**
 * User data as an inspector shows it: the stored JSON text, cut to a bound, never decoded (a value
 * whose schema no longer decodes must still show). Reads take only a bounded head of a column from
 * SQLite (`headOf`), so a 2 MB payload never crosses into memory to show 1 000 characters of it.
 * @internal
 */
import type { Row, SqlValue } from "../engine/StorageService.js"
import { COUNT_CAP, MESSAGE_CHARS } from "./limits.js"
import type { ErrorView, JsonText } from "./protocol.js"

// What `Json.encode` wraps every stored value in.
const VALUE_PREFIX = "{\"kind\":\"value\",\"value\":"
const UNDEFINED = "{\"kind\":\"undefined\"}"
/** Characters of the wrapper a head must take beyond the bound. */
const WRAPPER = VALUE_PREFIX.length + 1

/**
 * SQL selecting a bounded head of a JSON column (as `<column>`) and its full length (as
 * `<column>_length`), for `jsonOf`.
 */
export const headOf = (column: string, bound: number): string =>
  `substr(${column}, 1, ${bound + WRAPPER}) AS ${column}, length(${column}) AS ${column}_length`

/** The JSON text of a column read with `headOf` (or whole), cut at `bound`. */
export const jsonOf = (row: Row, column: string, bound: number): JsonText => {
  const head = row[column]
  if (head === null || head === undefined) return { json: "null", truncated: false }
  const text = String(head)
  const length = Number(row[`${column}_length`] ?? text.length)
  if (text === UNDEFINED) return { json: "undefined", truncated: false }
  const whole = length <= text.length
  // Text not written by `Json.encode` (none is, today) shows as it is.
  const inner = text.startsWith(VALUE_PREFIX)
    ? whole ? text.slice(VALUE_PREFIX.length, text.endsWith("}") ? -1 : undefined) : text.slice(VALUE_PREFIX.length)
    : text
  return inner.length > bound || !whole ? { json: inner.slice(0, bound), truncated: true } : { json: inner, truncated: false }
}

/** A message (error, log line) cut at `MESSAGE_CHARS`. */
export const message = (value: SqlValue | undefined): string => String(value ?? "").slice(0, MESSAGE_CHARS)

/** A stored error's name and message, when there is one. */
export const errorOf = (name: SqlValue | undefined, text: SqlValue | undefined): ErrorView | undefined =>
  text === null || text === undefined ? undefined : { name: name === null || name === undefined ? "Error" : String(name).slice(0, 200), message: message(text) }

/** SQL selecting a bounded message column. */
export const messageOf = (column: string): string => `substr(${column}, 1, ${MESSAGE_CHARS}) AS ${column}`

/** SQL counting the rows of `table` that match `where`, stopping at `COUNT_CAP` (as `n`). */
export const cappedCount = (table: string, where: string): string =>
  `SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${table} WHERE ${where} LIMIT ${COUNT_CAP})`
