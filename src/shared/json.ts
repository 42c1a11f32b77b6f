/**
 * Strict JSON for stored payloads and results. `JSON.stringify` silently drops
 * functions and `undefined` members and turns NaN into null; a durable call
 * must come back exactly as it went in, so anything that would not round-trip
 * is rejected before a write. A top-level `undefined` is kept through a wrapper
 * (`{"kind":"undefined"}` / `{"kind":"value","value":…}`).
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import type * as ParseResult from "effect/ParseResult"
import type * as Codec from "./codec.js"

/** The row size limit of Durable Object SQLite storage. */
export const MAX_ROW_BYTES = 2 * 1024 * 1024

export type JsonCheck = { readonly ok: true } | { readonly ok: false; readonly reason: string }

const describe = (value: unknown): string =>
  typeof value === "bigint" ? "a BigInt" : typeof value === "function" ? "a function" : typeof value === "symbol"
    ? "a symbol"
    : typeof value === "number"
    ? String(value)
    : value === undefined
    ? "undefined"
    : `a ${(value as object).constructor?.name ?? "prototype-less object"}`

/** Checks that `value` is plain JSON (a top-level `undefined` is allowed by the wrapper). */
export const check = (value: unknown): JsonCheck => {
  if (value === undefined) return { ok: true }
  const seen = new Set<object>()
  const visit = (v: unknown, path: string): string | undefined => {
    if (v === null || typeof v === "string" || typeof v === "boolean") return undefined
    if (typeof v === "number") return Number.isFinite(v) ? undefined : `${path} is ${describe(v)}`
    if (typeof v !== "object") return `${path} is ${describe(v)}`
    if (seen.has(v)) return `${path} is a circular reference`
    const proto = Object.getPrototypeOf(v)
    if (Array.isArray(v)) {
      seen.add(v)
      for (let i = 0; i < v.length; i++) {
        const failed = visit(v[i], `${path}[${i}]`)
        if (failed !== undefined) return failed
      }
      seen.delete(v)
      return undefined
    }
    if (proto !== Object.prototype && proto !== null) return `${path} is ${describe(v)}`
    // JSON.stringify drops symbol-keyed members silently.
    if (Object.getOwnPropertySymbols(v).length > 0) return `${path} has a symbol key`
    seen.add(v)
    for (const [key, member] of Object.entries(v)) {
      const failed = visit(member, `${path}.${key}`)
      if (failed !== undefined) return failed
    }
    seen.delete(v)
    return undefined
  }
  try {
    const failed = visit(value, "value")
    return failed === undefined ? { ok: true } : { ok: false, reason: failed }
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) }
  }
}

/** The stored text of a checked value. */
export const encode = (value: unknown): string =>
  value === undefined ? "{\"kind\":\"undefined\"}" : JSON.stringify({ kind: "value", value })

/** The value of stored text written by `encode`. */
export const decode = (text: string): unknown => {
  const wrapped = JSON.parse(text) as { readonly kind: string; readonly value?: unknown }
  return wrapped.kind === "undefined" ? undefined : wrapped.value
}

const equalValues = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const aKeys = Object.keys(a)
  if (aKeys.length !== Object.keys(b).length) return false
  return aKeys.every((key) =>
    Object.hasOwn(b, key) && equalValues((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])
  )
}

/** Whether two stored texts hold the same value, whatever the order of their objects' keys. */
export const same = (a: string, b: string): boolean => a === b || equalValues(decode(a), decode(b))

const byteLength = (text: string): number => new TextEncoder().encode(text).byteLength

/** The UTF-8 size of `text` when it is over the row limit; counted only when it could be (≤ 3 bytes per UTF-16 unit). */
export const oversizedBytes = (text: string): number | undefined => {
  if (text.length * 3 <= MAX_ROW_BYTES) return undefined
  const bytes = byteLength(text)
  return bytes > MAX_ROW_BYTES ? bytes : undefined
}

/**
 * Why a value cannot be stored. Each caller words it as its own error (its class and message are
 * the caller's contract), so this says only what went wrong.
 */
export type Unstorable =
  /** Its schema does not encode it. */
  | { readonly _tag: "Schema"; readonly cause: ParseResult.ParseError }
  /** Its encoded form is not plain JSON; `reason` names the value as the caller's `subject`. */
  | { readonly _tag: "NotJson"; readonly reason: string }
  /** Its stored text is over the row limit. */
  | { readonly _tag: "TooLarge"; readonly bytes: number }

/** The end of a `TooLarge` message: "is … bytes as JSON; a stored row is limited to … bytes". */
export const tooLarge = (bytes: number): string => `is ${bytes} bytes as JSON; a stored row is limited to ${MAX_ROW_BYTES} bytes`

/** Why a handler's result cannot be stored, as the end of its capability's message ("does not match its schema", …) and the cause. */
export const unstorableDetail = (failure: Unstorable): { readonly detail: string; readonly cause?: unknown } =>
  failure._tag === "Schema"
    ? { detail: "does not match its schema", cause: failure.cause }
    : failure._tag === "NotJson"
    ? { detail: `is not JSON-serializable: ${failure.reason}` }
    : { detail: tooLarge(failure.bytes) }

/**
 * The stored text of a value already in its stored form: checked as plain JSON, encoded, and its
 * size checked (over the row limit the write would fail, after a handler's side effect ran).
 */
export const stored = (value: unknown, subject: string): Either.Either<string, Exclude<Unstorable, { readonly _tag: "Schema" }>> => {
  const checked = check(value)
  if (!checked.ok) return Either.left({ _tag: "NotJson", reason: checked.reason.replace(/^value/, subject) })
  const text = encode(value)
  const bytes = oversizedBytes(text)
  return bytes === undefined ? Either.right(text) : Either.left({ _tag: "TooLarge", bytes })
}

/** `stored` as an `Exit`: the text, or the caller's error for why it cannot be stored (a plain handler's result). */
export const storedExit = <E>(
  value: unknown,
  subject: string,
  unstorable: (failure: Exclude<Unstorable, { readonly _tag: "Schema" }>) => E
): Exit.Exit<string, E> => Either.match(stored(value, subject), { onLeft: (failure) => Exit.fail(unstorable(failure)), onRight: Exit.succeed })

/** The stored text of `value`: encoded by its codec (its schema's encoded form), then as `stored`. */
export const encodeStored = (codec: Codec.AnyCodec, value: unknown, subject: string): Effect.Effect<string, Unstorable> =>
  Effect.flatMap(
    Effect.mapError(codec.encode(value as never), (cause): Unstorable => ({ _tag: "Schema", cause })),
    (encoded) => stored(encoded, subject)
  )
