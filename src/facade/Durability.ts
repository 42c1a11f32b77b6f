/**
 * `Durability`: durable operations for promise-style code. Every handler
 * becomes a method: `durability.<op>({ id, payload })` resolves once the
 * registration committed, `.getResult(id)` reads the outcome, `.job(id)` gives
 * a handle that can wait for it.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { LifecycleHook } from "../engine/Lifecycle.js"
import * as Attach from "../operations/attach.js"
import * as Operations from "../operations/Operations.js"
import * as Steps from "../steps/Steps.js"
import * as Plain from "../shared/plain.js"
import type * as OperationsParticipant from "../operations/participant.js"
import type { IsJson } from "../shared/jsonType.js"
import type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
import type * as Scheduler from "../engine/Scheduler.js"
import { fromPromise, migrateWith, type MigrationResult, type SchedulerAttachment } from "./attachment.js"
import {
  build,
  type DurabilityMethodOptions,
  type DurableStep,
  Helper,
  type HelperSpec,
  lazyStep,
  pickExecution
} from "./helper.js"

/** What a handler is called with for one attempt. */
export interface DurableCall<P> extends Operations.DurableCall<P> {
  /**
   * A durable step of this call: `await call.step("charge", () => charge(...))` runs the function once
   * and stores its result (JSON, or `{ result: schema }`'s encoded form); every later attempt of the
   * call gets the stored result back. Names are unique within one attempt.
   */
  readonly step: DurableStep
}
/** A call's state as read back: unknown, pending, failed for good, or completed with its result. */
export type DurableOperationResult<R> = Operations.OperationResult<R>

/** A handler: receives the call, returns the result (JSON) or a promise of it. */
export type DurableHandler<P, R> = (call: DurableCall<P>) => R | PromiseLike<R>

/**
 * A function type that is bivariant in its parameter (method syntax), so the map's constraint
 * both types an unannotated handler's parameter and accepts one annotated with a narrower type.
 */
export type BivariantHandler<A> = { handle(argument: A): unknown }["handle"]

/**
 * What every handler map is assignable to. An unannotated handler's call is a
 * `DurableCall<unknown>` (its payload is `unknown` at the call site); annotate it
 * (`(call: DurableCall<{ to: string }>) => …`) to type the payload.
 */
export type HandlerMap = Record<string, BivariantHandler<DurableCall<unknown>>>

export type PayloadOf<H> = H extends (call: DurableCall<infer P>) => unknown ? P : never
export type ResultOf<H> = H extends (call: DurableCall<never>) => infer R ? Awaited<R> : never

export type { DurabilityMethodOptions, DurabilityRetryOptions } from "./helper.js"

/** `Durability`'s options: the handlers, per-handler options, and the defaults they override. */
export interface DurabilityOptions<H extends HandlerMap> extends DurabilityMethodOptions {
  /** The handlers, by name: each name becomes a method of the instance that registers calls to it. */
  readonly handlers: H
  /** Options for one handler (retries, timeouts), over the defaults given here. */
  readonly methods?: { readonly [K in keyof H]?: DurabilityMethodOptions } | undefined
  /** Told each lifecycle event of the calls after it committed, e.g. for metrics. */
  readonly onLifecycleEvent?: LifecycleHook | undefined
}

/**
 * What `new Durability(...)` takes: its options and where it attaches (a scheduler, or the object's context).
 */
export type DurabilityConfig<H extends HandlerMap> = DurabilityOptions<H> & SchedulerAttachment

/** How long `DurableJobHandle.wait` waits. */
export interface DurableJobWaitOptions {
  /** How long to wait for the call to settle; 0 returns the current state. */
  readonly timeoutMs: number
}

/** One call, by id, to read or wait for its outcome. */
export interface DurableJobHandle<R> {
  /** Reads the call's state now. */
  getResult(): Promise<DurableOperationResult<R>>
  /** Waits until the call completed or failed for good (or `timeoutMs` passed) and returns its state then. */
  wait(options: DurableJobWaitOptions): Promise<DurableOperationResult<R>>
}

/** Its `delayMs` in milliseconds (the Effect face's `Operations.register` takes a Duration too). */
export type DurableRegistration<P> = Operations.RegisterCall<P, number>
/** One stored call, as `list` returns it: its id, when it was registered, and its state. */
export type DurableOperationEntry<R> = Operations.OperationEntry<R>
/** What registering a call did (see `DurableOperation`). */
export type DurableRegistrationResult = Operations.Registration
/** A page of calls in registration order. */
export type DurableOperationPage<R> = Operations.OperationPage<R>
/** `list`'s options: a status filter and the page. */
export type DurableListOptions = Operations.ListOptions

/**
 * One operation of a `Durability`: call it to register a call, then read, wait for, cancel or list its calls.
 */
export interface DurableOperation<P, R> {
  /**
   * Registers the call; resolves once it committed (never waits for the handler). With `runAt` (a time
   * or a `Date`) or `delayMs` it runs no earlier than that; otherwise at once when a permit is free.
   * Resolves with nothing, as the reference's does; `register` is the same call and says what it did.
   */
  (call: DurableRegistration<P>): Promise<void>
  /**
   * Registers the call, as calling the operation does, and resolves with what it did: `created`, or,
   * for an id this operation has already, `existing` (same payload) or `conflicting` (another payload:
   * ignored, and logged as `durability.operation.conflicting`).
   */
  register(call: DurableRegistration<P>): Promise<DurableRegistrationResult>
  /**
   * Registers many calls in one transaction: all are checked first (a bad one rejects the batch with a
   * `TypeError`/`RangeError` naming `calls[i]`, nothing written), then all are written or none.
   */
  many(calls: ReadonlyArray<DurableRegistration<P>>): Promise<void>
  /** `many`, resolving with each call's registration (as `register`'s), in order. */
  registerMany(calls: ReadonlyArray<DurableRegistration<P>>): Promise<ReadonlyArray<DurableRegistrationResult>>
  /** Reads a call's state now. */
  getResult(id: string): Promise<DurableOperationResult<R>>
  /**
   * Waits up to `timeoutMs` for the call to settle, then resolves with its state: the same as
   * `job(id).wait(options)` (the reference's form), in the shape every capability's `wait` has.
   */
  wait(id: string, options: DurableJobWaitOptions): Promise<DurableOperationResult<R>>
  /**
   * Runs a call that failed for good (or was canceled) again: pending at once, attempts from one, a new
   * generation (its steps run again). Resolves true when a failed call was re-queued.
   */
  retry(id: string): Promise<boolean>
  /** A handle on one call (the reference's form of `getResult` and `wait`). */
  job(id: string): DurableJobHandle<R>
  /**
   * Cancels a pending call: it fails with `DurableCanceledError` and is not retried; a running handler's
   * signal is aborted. Resolves true when a pending call was canceled.
   */
  cancel(id: string): Promise<boolean>
  /** This operation's calls in registration order, a page at a time (`{ status?, limit?, cursor? }`). */
  list(options?: DurableListOptions): Promise<DurableOperationPage<R>>
}

/** The calls of a `Durability` besides its operations. */
export interface DurabilityBase {
  /** Delegate the object's `alarm(info)` here (or to the shared scheduler). */
  alarm(info?: AlarmInvocationInfo): Promise<void>
  /** Deletes every call created before `before` (strict), whatever its status; returns how many. */
  purgeBefore(before: number | Date): Promise<number>
}

/**
 * A `Durability` instance: the base calls, and one `DurableOperation` per handler name, typed by its handler.
 */
export type DurabilityInstance<H extends HandlerMap> =
  & DurabilityBase
  & { readonly [K in keyof H]: DurableOperation<PayloadOf<H[K]>, ResultOf<H[K]>> }

/**
 * No constraint for a handler whose result is JSON; otherwise a message type, so a `Date`, `Map`, `BigInt`,
 * function or `Error` in a result is a compile error at `new Durability`, not a terminal failure
 * after the side effect ran.
 */
export type JsonResultHandlers<H> = {
  readonly [K in keyof H]: IsJson<ResultOf<H[K]>> extends true ? unknown
    : `handler "${K & string}" must return JSON (no Date, Map, Set, BigInt, function or Error in its result)`
}

/** The `Durability` class: `new Durability({ handlers })`, and its static helpers. */
export interface DurabilityConstructor {
  new<H extends HandlerMap>(
    config: DurabilityConfig<H> & { readonly handlers: NoInfer<JsonResultHandlers<H>> }
  ): DurabilityInstance<H>
  /** Applies (default: latest) or reverts (`null`: all) the operations table's migrations. */
  migrate(context: DurabilityContext, target?: string | null): MigrationResult
}

type Service = Operations.OperationsBase<Record<string, Operations.AnyOperationDefinition>>

const spec: HelperSpec<DurabilityMethodOptions, Operations.AnyOperationDefinition, Service> = {
  owner: "Durability",
  define: (handler, method) => {
    const run = handler as (call: DurableCall<unknown>) => unknown
    const plain: OperationsParticipant.PlainHandler = (call, steps, runtime) => run({ ...call, step: lazyStep(steps, runtime) })
    return Plain.withPlain(
      Operations.operation({
        handler: (call: Operations.DurableCall<unknown>) =>
          Effect.flatMap(Effect.runtime<Steps.CurrentCall>(), (runtime) =>
            fromPromise(() => plain(call, () => Context.get(runtime.context, Steps.CurrentCall), runtime))),
        ...pickExecution(method)
      }),
      plain
    )
  },
  make: (definitions, options) => Attach.attach(definitions, options) as Effect.Effect<Service, unknown, Scheduler.Services>
}

class DurabilityImpl extends Helper<Service> {
  constructor(config: DurabilityConfig<HandlerMap>) {
    const built = build(config, spec)
    super(built)
    for (const name of built.names) this.#define(name)
  }

  #define(name: string): void {
    const run = <A, E>(call: (service: Service) => Effect.Effect<A, E>) => Helper.run(this, call)
    const getResult = (id: string) => run((service) => service.getResult(name, id))
    const register = (call: DurableRegistration<unknown>) => run((service) => service.register(name, call as never))
    const registerMany = (calls: ReadonlyArray<DurableRegistration<unknown>>) =>
      run((service) => service.registerMany(name, calls as never))
    const method = (call: DurableRegistration<unknown>) => register(call).then(() => undefined)
    const wait = (id: string, options: DurableJobWaitOptions) =>
      typeof options !== "object" || options === null
        ? Promise.reject(new TypeError("wait needs { timeoutMs }"))
        : run((service) => service.wait(name, id, options.timeoutMs))
    Object.defineProperties(method, {
      getResult: { value: getResult },
      register: { value: register },
      registerMany: { value: registerMany },
      many: { value: (calls: ReadonlyArray<DurableRegistration<unknown>>) => registerMany(calls).then(() => undefined) },
      cancel: { value: (id: string) => run((service) => service.cancel(name, id)) },
      retry: { value: (id: string) => run((service) => service.retry(name, id)) },
      wait: { value: (id: string, options: DurableJobWaitOptions) => wait(id, options) },
      list: { value: (options?: DurableListOptions) => run((service) => service.list(name, options)) },
      job: {
        value: (id: string): DurableJobHandle<unknown> => ({
          getResult: () => getResult(id),
          wait: (options: DurableJobWaitOptions) => wait(id, options)
        })
      }
    })
    Helper.method(this, name, method)
  }

  static migrate(context: DurabilityContext, target?: string | null): MigrationResult {
    return migrateWith(context, Operations.migrate, target)
  }
}

/**
 * Durable operations for promise-style code, in a Durable Object: each handler becomes a method whose calls
 * are stored, run and retried.
 */
export const Durability: DurabilityConstructor = DurabilityImpl as unknown as DurabilityConstructor

/**
 * `Durability` under the name that sits beside `DurabilityAlarms`, `DurabilityJobs` and
 * `DurabilitySchedules`: the same class (`Durability` is the reference's name, kept).
 */
export const DurabilityOperations: DurabilityConstructor = Durability
