/**
 * Durable operations: register a side effect by id, run it effectively once
 * with retries, look up its result.
 *
 * Registration is insert-if-absent by id in one transaction with the alarm
 * reconciliation; the handler never runs before that commits. Each attempt is
 * claimed durably before the handler runs, so an eviction mid-attempt still
 * counts it. Completed and failed records are kept (deduplicating their ids)
 * until purged.
 *
 * Handlers are Effects. Their requirements `R` are taken from the context
 * `make` runs in: provide them once per Durable Object, in the layer of the
 * object's runtime, and every attempt runs with them. In a handler,
 * `Operations.step(name, effect)` is a durable step of the call (see `Steps`).
 * @packageDocumentation
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import type { CallDuration } from "../shared/duration.js"
import type {
  DuplicateDurableCallError,
  InvalidInputError,
  InvalidOptionError,
  MigrationError,
  ParticipantConflictError,
  StorageError
} from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as Codec from "../shared/codec.js"
import type { IsJson } from "../shared/jsonType.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as OperationsInspect from "./inspection.js"
import type * as Policy from "../engine/policy.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import * as StepMemo from "../steps/memo.js"
import type * as Scheduler from "../engine/Scheduler.js"
import * as Steps from "../steps/Steps.js"
import type { StorageService } from "../engine/StorageService.js"
import * as Manage from "./manage.js"
import * as Participant from "./participant.js"
import * as Read from "./read.js"
import * as Register from "./register.js"
import { CAPABILITY, migrations } from "./schema.js"
import type {
  AnyOperationDefinition,
  DurableCall,
  ListOptions,
  OperationDefinition,
  OperationPage,
  OperationResult,
  PayloadOf,
  RegisterCall,
  RequirementsOf,
  ResultOf
} from "./types.js"
export type { ExecutionOptions, RetriesOptions } from "../engine/policy.js"
export type {
  AnyOperationDefinition,
  DurableCall,
  ListOptions,
  OperationDefinition,
  OperationEntry,
  OperationPage,
  OperationResult,
  OperationStatus,
  PayloadOf,
  RegisterCall,
  RequirementsOf,
  ResultOf
} from "./types.js"
export { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from "./read.js"
export { CAPABILITY, migrations, TABLE } from "./schema.js"

/** A durable step of the current call: its first successful result is stored and replayed (see `Steps.step`). */
export const step = Steps.step

/**
 * Declares an operation. `payload`/`result` schemas are optional: with one, the
 * payload is validated and encoded at registration and decoded at execution.
 */
export const operation = <P, R, E = never, Req = never, PI = P, RI = R>(
  options:
    & Policy.ExecutionOptions
    & {
      readonly handler: (call: DurableCall<P>) => Effect.Effect<R, E, Req>
      readonly payload?: Schema.Schema<P, PI> | undefined
      readonly result?: Schema.Schema<R, RI> | undefined
    }
    // The stored form (the result, or its schema's encoded form) must be JSON: a compile error, not
    // a terminal failure after the side effect ran.
    & (IsJson<NoInfer<RI>> extends true ? unknown
      : { readonly result: "the handler's result (or its result schema's encoded form) must be JSON" })
  // Every attempt gets its steps' `CurrentCall`: it is not a requirement of the handler.
): OperationDefinition<NoInfer<P>, NoInfer<R>, NoInfer<E>, Exclude<NoInfer<Req>, Steps.CurrentCall>> => ({
  ...(options.attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs: options.attemptTimeoutMs }),
  ...(options.retries === undefined ? {} : { retries: options.retries }),
  handler: options.handler as (call: DurableCall<P>) => Effect.Effect<R, E, Exclude<Req, Steps.CurrentCall>>,
  payload: Codec.fromSchema(options.payload),
  result: Codec.fromSchema(options.result)
})

export interface OperationsOptions extends Policy.ExecutionOptions {
  /** Told each lifecycle event of the calls after it committed, e.g. for metrics. */
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/**
 * The operations service `make` returns: register calls, read their outcome, wait for them, cancel, list and
 * purge.
 */
export interface Operations<Defs extends Record<string, AnyOperationDefinition>> {
  /**
   * Resolves once the registration committed; never waits for the handler. Same id + same operation
   * is a no-op. With `runAt`/`delayMs` the call runs no earlier than that; otherwise at once when a
   * permit is free.
   */
  readonly register: <K extends keyof Defs & string>(
    operation: K,
    call: RegisterCall<PayloadOf<Defs[K]>>
  ) => Effect.Effect<void, InvalidInputError | DuplicateDurableCallError | StorageError>
  /**
   * Registers many calls of one operation in one transaction: every call is checked first (a bad one
   * fails the batch with `InvalidInputError` naming `calls[i]` and writes nothing), then all are
   * written or, on a `DuplicateDurableCallError` or `StorageError`, none. Each call then behaves as
   * if registered alone (an id already registered for this operation is a no-op).
   */
  readonly registerMany: <K extends keyof Defs & string>(
    operation: K,
    calls: Iterable<RegisterCall<PayloadOf<Defs[K]>>>
  ) => Effect.Effect<void, InvalidInputError | DuplicateDurableCallError | StorageError>
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
  /** Waits up to `timeoutMs` (a Duration or milliseconds) for the record to settle, then returns its latest state. */
  readonly wait: <K extends keyof Defs & string>(
    operation: K,
    id: string,
    timeoutMs: CallDuration
  ) => Effect.Effect<OperationResult<ResultOf<Defs[K]>>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** Deletes every record created before `before` (strict; epoch ms or a `Date`); returns how many. */
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
}

/** Applies (or reverts to `target`) the operations table's migrations. */
export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

/**
 * Attaches the operations capability to the scheduler: migrates its table,
 * checks the definitions, and returns the typed API.
 */
export const make = <const Defs extends Record<string, AnyOperationDefinition>>(
  definitions: Defs,
  options: OperationsOptions = {}
): Effect.Effect<
  Operations<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<RequirementsOf<Defs>>()
    const parts = yield* Capability.make(Participant.spec(definitions, options, context))
    const { purgeBefore, storage } = parts
    const cancel = (operation: string, id: string) => Manage.cancel(parts, operation, id)
    yield* InspectionRegistry.register(OperationsInspect.source(storage, { cancel, purgeBefore }))
    return {
      register: (operation, call) => Register.register(parts, operation, call),
      registerMany: (operation, calls) => Register.registerMany(parts, operation, calls),
      getResult: <K extends keyof Defs & string>(operation: K, id: string) =>
        Read.getResult<ResultOf<Defs[K]>>(parts, operation, id),
      wait: <K extends keyof Defs & string>(operation: K, id: string, timeoutMs: CallDuration) =>
        Read.wait<ResultOf<Defs[K]>>(parts, operation, id, timeoutMs),
      purgeBefore,
      cancel,
      list: <K extends keyof Defs & string>(operation: K, options?: ListOptions) =>
        Read.list<ResultOf<Defs[K]>>(parts, operation, options)
    }
  })

/** A service tag for an application's operations, when you want them in a layer. */
export const tag = <Defs extends Record<string, AnyOperationDefinition>>(key: string) =>
  Context.GenericTag<Operations<Defs>>(key)

/** The capability as a layer over the engine (provide the handlers' requirements to it). */
export const layer = <const Defs extends Record<string, AnyOperationDefinition>>(
  service: Context.Tag<Operations<Defs>, Operations<Defs>>,
  definitions: Defs,
  options: OperationsOptions = {}
): Layer.Layer<
  Operations<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> => Layer.effect(service, make(definitions, options))
