/**
 * How a capability turns a typed payload/result into stored JSON and back:
 * through a `Schema` when one is given (validated at registration, decoded at
 * execution), otherwise as the value itself.
 * @internal
 */
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
export interface Codec<A> {
  readonly encode: (value: A) => Effect.Effect<unknown, ParseResult.ParseError>
  readonly decode: (stored: unknown) => Effect.Effect<A, ParseResult.ParseError>
  /** No schema: the stored form is the value itself (so a plain handler's call needs no Effect). */
  readonly identity?: true | undefined
}

/** The erased shape every `Codec<A>` is assignable to. */
export interface AnyCodec {
  readonly encode: (value: never) => Effect.Effect<unknown, ParseResult.ParseError>
  readonly decode: (stored: unknown) => Effect.Effect<unknown, ParseResult.ParseError>
  readonly identity?: true | undefined
}

export const identity = <A>(): Codec<A> => ({
  encode: (value) => Effect.succeed(value),
  decode: (stored) => Effect.succeed(stored as A),
  identity: true
})

export const fromSchema = <A, I>(schema: Schema.Schema<A, I> | undefined): Codec<A> =>
  schema === undefined ? identity<A>() : {
    encode: Schema.encode(schema),
    decode: Schema.decodeUnknown(schema)
  }

/**
 * A Schema failure as a message that starts with the field and the path inside it
 * (`payload.width: Expected an integer, actual 1.5`), not with a dump of the schema.
 */
export const describeParseError = (field: string, error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const shown = issues.slice(0, 3).map((issue) => {
    const path = issue.path.map((segment) =>
      typeof segment === "number" ? `[${segment}]` : `.${String(segment)}`
    ).join("")
    return `${field}${path}: ${issue.message}`
  })
  const more = issues.length > shown.length ? ` (and ${issues.length - shown.length} more)` : ""
  return shown.length === 0 ? `${field} is invalid` : `${shown.join("; ")}${more}`
}
