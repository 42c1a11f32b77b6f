/**
 * How a capability turns a typed payload/result into stored JSON and back:
 * through a `Schema` when one is given (validated at registration, decoded at
 * execution), otherwise as the value itself.
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
export interface Codec<A> {
  readonly encode: (value: A) => Effect.Effect<unknown, ParseResult.ParseError>
  readonly decode: (stored: unknown) => Effect.Effect<A, ParseResult.ParseError>
}

/** The erased shape every `Codec<A>` is assignable to. */
export interface AnyCodec {
  readonly encode: (value: never) => Effect.Effect<unknown, ParseResult.ParseError>
  readonly decode: (stored: unknown) => Effect.Effect<unknown, ParseResult.ParseError>
}

export const identity = <A>(): Codec<A> => ({
  encode: (value) => Effect.succeed(value),
  decode: (stored) => Effect.succeed(stored as A)
})

export const fromSchema = <A, I>(schema: Schema.Schema<A, I> | undefined): Codec<A> =>
  schema === undefined ? identity<A>() : {
    encode: Schema.encode(schema),
    decode: Schema.decodeUnknown(schema)
  }
