/**
 * The operations' data types: a definition, a call and its stored states, as the public module
 * re-exports them (the private parts build on them without importing the module that composes them).
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { CallDuration } from "../shared/duration.js"
import type * as Codec from "../shared/codec.js"
import type * as Policy from "../engine/policy.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import type {
  DuplicateDurableCallError,
  InvalidInputError,
  SerializedError,
  StorageError
} from "../shared/Errors.js"

/** What a handler is called with for one attempt. */
export interface DurableCall<P> {
  /**
   * The call's id: unique per operation, so registering it again finds the stored call instead of running
   * twice.
   */
  readonly id: string
  /** The operation's name. */
  readonly operation: string
  /** The call's payload, decoded by the operation's payload codec. */
  readonly payload: P
  /** 1-based; already durably counted. */
  readonly attempt: number
  /** Aborted on timeout or purge. Cooperative: stop when you see it. */
  readonly signal: AbortSignal
}

/**
 * One operation: its handler, how its payload and result are stored (codecs), and its retries and timeouts.
 */
export interface OperationDefinition<P, R, E, Req> extends Policy.ExecutionOptions {
  /** Runs one attempt; a failure is retried under the policy, a success stores the result. */
  readonly handler: (call: DurableCall<P>) => Effect.Effect<R, E, Req>
  /** How the payload is encoded for storage and decoded for the handler. */
  readonly payload: Codec.Codec<P>
  /** How the result is encoded for storage and decoded for readers. */
  readonly result: Codec.Codec<R>
}

/** The shape every `OperationDefinition` is assignable to. */
export interface AnyOperationDefinition extends Policy.ExecutionOptions {
  /** The handler, taking any call. */
  readonly handler: (call: never) => Effect.Effect<unknown, unknown, unknown>
  /** The payload's codec. */
  readonly payload: Codec.AnyCodec
  /** The result's codec. */
  readonly result: Codec.AnyCodec
}

/** The payload type of a definition. */
export type PayloadOf<D> = D extends OperationDefinition<infer P, infer _R, infer _E, infer _Req> ? P : never
/** The result type of a definition. */
export type ResultOf<D> = D extends OperationDefinition<infer _P, infer R, infer _E, infer _Req> ? R : never
/** The services the handlers of a set of definitions need, which `make` takes from its context. */
export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends OperationDefinition<infer _P, infer _R, infer _E, infer Req> ? Req
    : never
}[keyof Defs]

/**
 * A call's state as read back: unknown, pending (with its attempt and last error), failed for good, or
 * completed with its result.
 */
export type OperationResult<R> =
  | { readonly status: "not_found" }
  | {
    readonly status: "pending"
    readonly attempt: number
    readonly nextAttemptAt: number
    /** The last attempt's error message (the reference's shape); `error` has it with its name. */
    readonly lastError: string | null
    /** The last attempt's error, as a failed call's `error` is, or null before any failure. */
    readonly error: SerializedError | null
  }
  | { readonly status: "failed"; readonly attempt: number; readonly error: SerializedError }
  | { readonly status: "completed"; readonly result: R }

/**
 * A call to register: its id, its payload, and optionally when to run it (default: now). `Time`: how
 * `delayMs` is given, a Duration or milliseconds on the Effect face, milliseconds
 * (`RegisterCall<P, number>`) on the promise face.
 */
export interface RegisterCall<P, Time = CallDuration> {
  /** The call's id; registering the same id again finds the stored call. */
  readonly id: string
  /** The call's payload, encoded by the operation's payload codec. */
  readonly payload: P
  /** Run no earlier than this time (epoch milliseconds or a `Date`). Not with `delayMs`. */
  readonly runAt?: number | Date | undefined
  /** Run no earlier than this long from now. Not with `runAt`. */
  readonly delayMs?: Time | undefined
}

/**
 * What registering a call did. `created`: the call was written. `existing`: its id was registered for
 * this operation already, with the same payload; nothing was written. `conflicting`: registered already
 * with another payload; nothing was written, the stored call keeps its own payload, and a warning is
 * logged (`durability.operation.conflicting`). An id of another operation is a `DuplicateDurableCallError`.
 */
export interface Registration {
  /** The call's id. */
  readonly id: string
  /** What the registration did. */
  readonly status: "created" | "existing" | "conflicting"
}

/** How long `wait` waits for a call to settle (a Duration or milliseconds; 0 returns its state now). */
export interface WaitOptions<Time = CallDuration> {
  /** How long to wait at most. */
  readonly timeoutMs: Time
}

/** A stored call's status: pending until its handler succeeds or fails for good. */
export type OperationStatus = "pending" | "completed" | "failed"

/** One stored call, as `list` returns it: its id, when it was registered, and its state. */
export type OperationEntry<R> = Exclude<OperationResult<R>, { readonly status: "not_found" }> & {
  readonly id: string
  readonly createdAt: number
}

/** Which calls a `list` reads, and the page. */
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
  /** The calls of this page. */
  readonly items: ReadonlyArray<OperationEntry<R>>
  /** Present when more follow: pass it back to read the next page. */
  readonly cursor?: string | undefined
}

/** Options of `Operations.make`: the default execution options, and a lifecycle hook. */
export interface OperationsOptions extends Policy.ExecutionOptions {
  /** Told each lifecycle event of the calls after it committed, e.g. for metrics. */
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/**
 * The operations by name (`ops.register("resize", …)`): the form for a name held in a variable. Each
 * operation is also a property with the same calls (`ops.resize.register(…)`), the form to use.
 */
export interface OperationsBase<Defs extends Record<string, AnyOperationDefinition>> {
  /**
   * Resolves once the registration committed; never waits for the handler. Same id + same operation
   * writes nothing: the result says whether the call was `created`, `existing` (same payload) or
   * `conflicting` (another payload, ignored and logged). With `runAt`/`delayMs` the call runs no
   * earlier than that; otherwise at once when a permit is free.
   */
  readonly register: <K extends keyof Defs & string>(
    operation: K,
    call: RegisterCall<PayloadOf<Defs[K]>>
  ) => Effect.Effect<Registration, InvalidInputError | DuplicateDurableCallError | StorageError>
  /**
   * Registers many calls of one operation in one transaction: every call is checked first (a bad one
   * fails the batch with `InvalidInputError` naming `calls[i]` and writes nothing), then all are
   * written or, on a `DuplicateDurableCallError` or `StorageError`, none. Each call then behaves as
   * if registered alone (an id already registered for this operation is a no-op); the results are in
   * the calls' order.
   */
  readonly registerMany: <K extends keyof Defs & string>(
    operation: K,
    calls: Iterable<RegisterCall<PayloadOf<Defs[K]>>>
  ) => Effect.Effect<ReadonlyArray<Registration>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /**
   * Cancels a pending call: it fails with `DurableCanceledError` and is never retried; a running
   * handler's signal is aborted with that error (its late settle changes nothing). True when a pending
   * call was canceled; false when it had already settled or does not exist.
   */
  readonly cancel: <K extends keyof Defs & string>(
    operation: K,
    id: string
  ) => Effect.Effect<boolean, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** The operation's calls in registration order, a page at a time. */
  readonly list: <K extends keyof Defs & string>(
    operation: K,
    options?: ListOptions
  ) => Effect.Effect<OperationPage<ResultOf<Defs[K]>>, InvalidInputError | StorageError>
  /** Reads a call's state now: not found, pending, failed for good, or completed with its result. */
  readonly getResult: <K extends keyof Defs & string>(
    operation: K,
    id: string
  ) => Effect.Effect<OperationResult<ResultOf<Defs[K]>>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /**
   * Waits up to `{ timeoutMs }` (a Duration or milliseconds; the time alone is accepted too) for the
   * record to settle, then returns its latest state.
   */
  readonly wait: <K extends keyof Defs & string>(
    operation: K,
    id: string,
    options: WaitOptions | CallDuration
  ) => Effect.Effect<OperationResult<ResultOf<Defs[K]>>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /**
   * Runs a call that failed for good (or was canceled) again: pending at once, attempts from one, a new
   * idempotency generation (its steps run again). True when a failed call was re-queued; false when it
   * is pending, completed or absent.
   */
  readonly retry: <K extends keyof Defs & string>(
    operation: K,
    id: string
  ) => Effect.Effect<boolean, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** Deletes every record created before `before` (strict; epoch ms or a `Date`); returns how many. */
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
}

