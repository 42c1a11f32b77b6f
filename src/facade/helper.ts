/**
 * The one builder of the promise helpers (`Durability`, `DurabilityAlarms` and those to come): the
 * config checked, the handler map checked once (`checkHandlers`), each handler turned into its
 * capability's definition, the capability made on the object's runtime, and the members every
 * helper has (`alarm`, `purgeBefore`). A helper adds one method per handler name and its own members.
 * @internal
 */
import type * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"
import type * as Schema from "effect/Schema"
import type { LifecycleHook } from "../engine/Lifecycle.js"
import type * as Scheduler from "../engine/Scheduler.js"
import type { IsJson } from "../shared/jsonType.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"
import type { ExecutionOptions, RetriesOptions } from "../engine/policy.js"
import type { StepRunner } from "../steps/memo.js"
import { attach, checkHandlers, fromPromise, type SchedulerAttachment } from "./attachment.js"
import type { DurabilityScheduler } from "./DurabilityScheduler.js"
import { fromCause } from "./errors.js"
import type { ObjectRuntime } from "./objectRuntime.js"

/** How failed attempts are retried: attempts in all and the delay before each retry. */
export interface DurabilityRetryOptions {
  /** Total attempts, the first included. Default 5. */
  readonly maxAttempts?: number | undefined
  /**
   * Delay in milliseconds after failed attempt n (1-based). Default: `jitter(exponential(n))` from
   * `durability/utils`.
   */
  readonly delay?: ((attempt: number) => number) | undefined
}

/**
 * Retries and timeouts, for all handlers of a capability or for one (`methods`), the one's overriding the
 * all's.
 */
export interface DurabilityMethodOptions {
  /** Per-attempt timeout in milliseconds (default 5 minutes): the signal is aborted and the attempt fails. */
  readonly attemptTimeoutMs?: number | undefined
  /** How failed attempts are retried (default: 5 attempts, exponential backoff with jitter). */
  readonly retries?: DurabilityRetryOptions | undefined
}

/** What every helper's config has, whatever its handlers. */
export type HelperConfig = DurabilityMethodOptions & SchedulerAttachment & {
  readonly handlers: unknown
  readonly methods?: Readonly<Record<string, DurabilityMethodOptions | undefined>> | undefined
  readonly onLifecycleEvent?: LifecycleHook | undefined
}

/** How one helper differs: its name, its capability, and a handler's definition in it. */
export interface HelperSpec<M extends DurabilityMethodOptions, D, S> {
  readonly owner: string
  readonly define: (handler: (argument: never) => unknown, method: M | undefined) => D
  readonly make: (
    definitions: Record<string, D>,
    options: ExecutionOptions & { readonly onLifecycleEvent?: LifecycleHook }
  ) => Effect.Effect<S, unknown, Scheduler.Services>
}

/** `methods` must be an object of objects, keyed by handler names (a typo would silently drop its options). */
const checkMethods = (handlers: Record<string, unknown>, methods: unknown): void => {
  if (methods === undefined) return
  if (typeof methods !== "object" || methods === null || Array.isArray(methods)) {
    throw new TypeError("methods must be an object")
  }
  for (const [name, options] of Object.entries(methods)) {
    if (!Object.prototype.hasOwnProperty.call(handlers, name)) {
      throw new TypeError(`methods.${name} does not name a handler`)
    }
    if (options !== undefined && (typeof options !== "object" || options === null)) {
      throw new TypeError(`methods.${name} must be an object`)
    }
  }
}

/** The execution options as given; the Effect API checks them and names the field. */
export const pickExecution = (options: DurabilityMethodOptions | undefined): ExecutionOptions =>
  options === undefined ? {} : {
    ...(options.attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs: options.attemptTimeoutMs }),
    ...(options.retries === undefined ? {} : { retries: options.retries as RetriesOptions })
  }

export interface Built<S> {
  readonly scheduler: DurabilityScheduler
  readonly runtime: ObjectRuntime
  readonly service: S
  /** The handler names, in the map's order (each becomes a method). */
  readonly names: ReadonlyArray<string>
}

/** Checks the config and makes the helper's capability on the object's runtime. */
export const build = <M extends DurabilityMethodOptions, D, S>(config: HelperConfig, spec: HelperSpec<M, D, S>): Built<S> => {
  if (typeof config !== "object" || config === null) throw new TypeError(`${spec.owner} needs a config object`)
  const handlers = checkHandlers(config.handlers, spec.owner)
  checkMethods(handlers, config.methods)
  const { runtime, scheduler } = attach(config)
  const methods = config.methods as Readonly<Record<string, M | undefined>> | undefined
  const definitions: Record<string, D> = {}
  for (const name of Object.keys(handlers)) {
    definitions[name] = spec.define(handlers[name] as (argument: never) => unknown, methods?.[name])
  }
  const service = runtime.runSync(spec.make(definitions, {
    ...pickExecution(config),
    ...(config.onLifecycleEvent === undefined ? {} : { onLifecycleEvent: config.onLifecycleEvent })
  }))
  return { scheduler, runtime, service, names: Object.keys(handlers) }
}

interface Purgeable {
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, unknown, never>
}

/**
 * The base of every helper. Its state is in private fields and reached through static methods, so a
 * handler's method (an own property of the instance, under any name not reserved) can shadow nothing
 * the helper itself calls.
 */
export class Helper<S extends Purgeable> {
  readonly #scheduler: DurabilityScheduler
  readonly #runtime: ObjectRuntime
  readonly #service: S

  constructor(built: Built<S>) {
    this.#scheduler = built.scheduler
    this.#runtime = built.runtime
    this.#service = built.service
  }

  /** Runs a call of the helper's capability on the object's runtime; rejects with the mapped error. */
  protected static run<S extends Purgeable, A, E>(helper: Helper<S>, call: (service: S) => Effect.Effect<A, E, never>): Promise<A> {
    return helper.#runtime.run(call(helper.#service))
  }

  /** Makes `name` an own, enumerable method of the helper. */
  protected static method<S extends Purgeable>(helper: Helper<S>, name: string, value: object): void {
    Object.defineProperty(helper, name, { value, enumerable: true })
  }

  /** Delegate the object's `alarm(info)` here (or to the shared scheduler). */
  alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.#scheduler.alarm(info)
  }

  purgeBefore(before: number | Date): Promise<number> {
    return Helper.run(this, (service) => service.purgeBefore(before))
  }
}

/**
 * `call.step(name, fn, options?)`: a durable step of the handler's call. `fn` runs only when no
 * earlier attempt of the call stored this step's result; its first successful result is stored
 * (JSON, or the encoded form of `options.result`, an Effect `Schema`) and returned on every later
 * attempt without running `fn`. A rejection is not stored. Rejects with `DurableStepError` (terminal
 * when the handler lets it through) when the name is invalid or used twice in one attempt, or the
 * result cannot be stored.
 */
export interface DurableStep {
  <A, I>(
    name: string,
    fn: () => A | PromiseLike<A>,
    options: DurableStepOptions<A, I> & { readonly result: Schema.Schema<A, I> } & (IsJson<NoInfer<I>> extends true ? unknown
        : { readonly "the encoded form of a step's result schema must be JSON": never })
  ): Promise<A>
  <A>(
    name: string,
    fn: (() => A | PromiseLike<A>) & (IsJson<NoInfer<A>> extends true ? unknown
      : { readonly "a step's result must be JSON (no Date, Map, Set, BigInt, function or Error): give options.result, a Schema that encodes it": never }),
    options?: { readonly result?: undefined }
  ): Promise<A>
}

/** `promiseStep` over a runner made when the handler first calls `step` (most handlers never do). */
export const lazyStep = (runner: () => StepRunner, runtime: Runtime.Runtime<never>): DurableStep => {
  let step: DurableStep | undefined
  return ((name: string, fn: () => unknown, options?: DurableStepOptions<unknown, unknown>) =>
    (step ??= promiseStep(runner(), runtime))(name, fn as never, options as never)) as DurableStep
}

/** A durable step's options. */
export interface DurableStepOptions<A, I> {
  /** An Effect `Schema` whose encoded form (JSON) is stored; the stored form is decoded on replay. */
  readonly result?: Schema.Schema<A, I> | undefined
}

/**
 * A handler's `step` for the promise face, over its attempt's step runner, run on the handler's own
 * runtime (its clock and services). Any helper whose handlers have steps builds it this way.
 */
export const promiseStep = (runner: StepRunner, runtime: Runtime.Runtime<never>): DurableStep =>
  ((name: string, fn: () => unknown, options?: DurableStepOptions<unknown, unknown>): Promise<unknown> => {
    if (typeof fn !== "function") {
      return Promise.reject(new TypeError(`step ${JSON.stringify(String(name)).slice(0, 80)} needs a function`))
    }
    return Runtime.runPromiseExit(runtime)(runner.step(name, fromPromise(fn), options)).then((exit) => {
      if (Exit.isFailure(exit)) throw fromCause(exit.cause)
      return exit.value
    })
  }) as DurableStep
