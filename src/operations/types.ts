/**
 * The operations' data types: a definition, a call and its stored states, as the public module
 * re-exports them (the private parts build on them without importing the module that composes them).
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { CallDuration } from "../shared/duration.js"
import type { SerializedError } from "../shared/Errors.js"
import type * as Codec from "../shared/codec.js"
import type * as Policy from "../engine/policy.js"

/** What a handler is called with for one attempt. */
export interface DurableCall<P> {
  readonly id: string
  readonly operation: string
  readonly payload: P
  /** 1-based; already durably counted. */
  readonly attempt: number
  /** Aborted on timeout or purge. Cooperative: stop when you see it. */
  readonly signal: AbortSignal
}

export interface OperationDefinition<P, R, E, Req> extends Policy.ExecutionOptions {
  readonly handler: (call: DurableCall<P>) => Effect.Effect<R, E, Req>
  readonly payload: Codec.Codec<P>
  readonly result: Codec.Codec<R>
}

/** The shape every `OperationDefinition` is assignable to. */
export interface AnyOperationDefinition extends Policy.ExecutionOptions {
  readonly handler: (call: never) => Effect.Effect<unknown, unknown, unknown>
  readonly payload: Codec.AnyCodec
  readonly result: Codec.AnyCodec
}

export type PayloadOf<D> = D extends OperationDefinition<infer P, infer _R, infer _E, infer _Req> ? P : never
export type ResultOf<D> = D extends OperationDefinition<infer _P, infer R, infer _E, infer _Req> ? R : never
export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends OperationDefinition<infer _P, infer _R, infer _E, infer Req> ? Req
    : never
}[keyof Defs]

export type OperationResult<R> =
  | { readonly status: "not_found" }
  | {
    readonly status: "pending"
    readonly attempt: number
    readonly nextAttemptAt: number
    readonly lastError: string | null
  }
  | { readonly status: "failed"; readonly attempt: number; readonly error: SerializedError }
  | { readonly status: "completed"; readonly result: R }

/**
 * A call to register: its id, its payload, and optionally when to run it (default: now). `Time`: how
 * `delayMs` is given, a Duration or milliseconds on the Effect face, milliseconds
 * (`RegisterCall<P, number>`) on the promise face.
 */
export interface RegisterCall<P, Time = CallDuration> {
  readonly id: string
  readonly payload: P
  /** Run no earlier than this time (epoch milliseconds or a `Date`). Not with `delayMs`. */
  readonly runAt?: number | Date | undefined
  /** Run no earlier than this long from now. Not with `runAt`. */
  readonly delayMs?: Time | undefined
}

export type OperationStatus = "pending" | "completed" | "failed"

/** One stored call, as `list` returns it: its id, when it was registered, and its state. */
export type OperationEntry<R> = Exclude<OperationResult<R>, { readonly status: "not_found" }> & {
  readonly id: string
  readonly createdAt: number
}

export interface ListOptions {
  /** Only calls in this state (or these states). Default: all. */
  readonly status?: OperationStatus | ReadonlyArray<OperationStatus> | undefined
  /** At most this many (1–1000). Default 100. */
  readonly limit?: number | undefined
  /** The `cursor` of the previous page. */
  readonly cursor?: string | undefined
}

/** A page of calls in registration order; `cursor` is set when more follow. */
export interface OperationPage<R> {
  readonly items: ReadonlyArray<OperationEntry<R>>
  readonly cursor?: string | undefined
}

