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
import {
  type DuplicateDurableCallError,
  type InvalidInputError,
  InvalidOptionError,
  type MigrationError,
  type ParticipantConflictError,
  type StorageError
} from "../shared/Errors.js"
import * as Attach from "./attach.js"
import * as Codec from "../shared/codec.js"
import type { IsJson } from "../shared/jsonType.js"
import type * as Policy from "../engine/policy.js"
import * as StepMemo from "../steps/memo.js"
import type * as Scheduler from "../engine/Scheduler.js"
import * as Steps from "../steps/Steps.js"
import type { StorageService } from "../engine/StorageService.js"
import { CAPABILITY, migrations } from "./schema.js"
import type {
  AnyOperationDefinition,
  DurableCall,
  ListOptions,
  OperationDefinition,
  OperationPage,
  OperationResult,
  OperationsBase,
  OperationsOptions,
  PayloadOf,
  RegisterCall,
  Registration,
  RequirementsOf,
  ResultOf,
  WaitOptions
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
  OperationsBase,
  OperationsOptions,
  RegisterCall,
  Registration,
  RequirementsOf,
  ResultOf,
  WaitOptions
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

/** One operation's calls: `ops.resize.register(…)` is `ops.register("resize", …)`. */
export interface OperationHandle<P, R> {
  /** See `OperationsBase.register`. */
  readonly register: (call: RegisterCall<P>) => Effect.Effect<Registration, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** See `OperationsBase.registerMany`. */
  readonly registerMany: (
    calls: Iterable<RegisterCall<P>>
  ) => Effect.Effect<ReadonlyArray<Registration>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** The call's state now. */
  readonly getResult: (id: string) => Effect.Effect<OperationResult<R>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** See `OperationsBase.wait`. */
  readonly wait: (
    id: string,
    options: WaitOptions
  ) => Effect.Effect<OperationResult<R>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** See `OperationsBase.cancel`. */
  readonly cancel: (id: string) => Effect.Effect<boolean, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** See `OperationsBase.retry`. */
  readonly retry: (id: string) => Effect.Effect<boolean, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** See `OperationsBase.list`. */
  readonly list: (options?: ListOptions) => Effect.Effect<OperationPage<R>, InvalidInputError | StorageError>
}

/** The operations capability: by name (`OperationsBase`) and as one property per operation. */
export type Operations<Defs extends Record<string, AnyOperationDefinition>> =
  & OperationsBase<Defs>
  & { readonly [K in keyof Defs]: OperationHandle<PayloadOf<Defs[K]>, ResultOf<Defs[K]>> }

/** Applies (or reverts to `target`) the operations table's migrations. */
export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

/**
 * The service's calls by name: an operation of one of these names would hide it (`purgeBefore` and the
 * names every helper reserves are refused by the attachment, for both faces).
 */
export const RESERVED_NAMES: ReadonlyArray<string> = ["register", "registerMany", "getResult", "wait", "cancel", "retry", "list"]

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
    // Definitions that are not an object are the attachment's to refuse.
    const names = typeof definitions === "object" && definitions !== null ? Object.keys(definitions) : []
    const reserved = names.find((name) => RESERVED_NAMES.includes(name))
    if (reserved !== undefined) {
      return yield* new InvalidOptionError({
        field: `handlers.${reserved}`,
        kind: "type",
        message: `"${reserved}" is reserved by Operations (a member of the service): name the operation otherwise`
      })
    }
    const base = yield* Attach.attach(definitions, options)
    const handles: Record<string, OperationHandle<unknown, unknown>> = {}
    for (const name of names) {
      handles[name] = {
        register: (call) => base.register(name, call as never),
        registerMany: (calls) => base.registerMany(name, calls as never),
        getResult: (id) => base.getResult(name, id),
        wait: (id, waitOptions) => base.wait(name, id, waitOptions),
        cancel: (id) => base.cancel(name, id),
        retry: (id) => base.retry(name, id),
        list: (listOptions) => base.list(name, listOptions)
      }
    }
    // Typed per name by `Operations<Defs>`; built from the names at run time.
    return { ...handles, ...base } as unknown as Operations<Defs>
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
