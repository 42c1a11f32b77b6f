/**
 * One Effect runtime per Durable Object instance, shared by every helper built
 * on the same scheduler.
 *
 * Every layer builds synchronously (no I/O), so helpers can attach to the
 * engine from the object's constructor. The one I/O step, reading the alarm,
 * is the warm-up: it runs inside `blockConcurrencyWhile` when the context has
 * it, and a failed warm-up is retried by the next call instead of being cached,
 * so a transient storage error cannot wedge the object.
 * Facade machinery, not exported.
 * @internal
 */
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import type * as Tracer from "effect/Tracer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type { DurabilityContext } from "../shared/platform.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as StorageService from "../engine/StorageService.js"
import type * as SchedulerConfig from "../engine/SchedulerConfig.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import { fromCause } from "./errors.js"

/** The engine's services, and the registry the helpers' inspection sources go to (`DurabilityScheduler.inspect`). */
export type Services = Scheduler.Services | InspectionRegistry.InspectionRegistry

/**
 * What the test kit (`TestObjectState`) attaches to a context it makes, under a symbol no user
 * context carries: a layer under the object's runtime (its `TestClock`), and a callback once the
 * runtime exists (to deliver alarms and move the clock in it).
 */
export interface RuntimeHooks {
  readonly layer: Layer.Layer<never>
  readonly started: (runtime: ObjectRuntime) => void
}

export const RUNTIME_HOOKS: unique symbol = Symbol.for("durability/internal/runtimeHooks")

const hooksOf = (context: DurabilityContext): RuntimeHooks | undefined =>
  (context as { readonly [RUNTIME_HOOKS]?: RuntimeHooks })[RUNTIME_HOOKS]

/** A `transaction` running now: the first call inside it that failed, which rolls it back. */
interface OpenTransaction {
  failed: { readonly error: Error } | undefined
  /** The promises of the calls made in it (settled already): `fn` may return one of them. */
  readonly made: Set<Promise<unknown>>
}

class RolledBack {}

/**
 * A call that had to wait (a result, a timer, a lock) cannot be part of the synchronous transaction: its
 * fiber, which would go on later outside it, is interrupted, and the transaction fails with this error.
 */
const suspended = (cause: Cause.Cause<unknown>): Error | undefined => {
  const defect = Cause.dieOption(cause)
  if (Option.isNone(defect) || !Runtime.isAsyncFiberException(defect.value)) return undefined
  defect.value.fiber.unsafeInterruptAsFork(FiberId.none)
  return new TypeError(
    "A call inside scheduler.transaction(fn) had to wait (for a result, a timer or a lock): only calls that " +
      "complete at once can join the transaction (nothing was written)"
  )
}

const isThenable = (value: unknown): boolean =>
  (typeof value === "object" || typeof value === "function") && value !== null &&
  typeof (value as { then?: unknown }).then === "function"

export class ObjectRuntime {
  private readonly runtime: ManagedRuntime.ManagedRuntime<Services, never>
  private ready: Promise<void> | undefined
  private open: OpenTransaction | undefined
  /** Set once the warm-up succeeded: later calls skip awaiting it (a promise turn per call). */
  private warmed = false

  constructor(private readonly context: DurabilityContext, config: SchedulerConfig.SchedulerConfig, tracer?: Tracer.Tracer) {
    // Resolved by the facade's constructor: the build checks nothing again and cannot fail.
    const engine = Layer.merge(Scheduler.layerDurableObjectResolved(context, config), InspectionRegistry.layer)
    const hooks = hooksOf(context)
    // Provided under the engine (not merged beside it), so the engine's own fibers, the alarm's, carry it too.
    const traced = tracer === undefined ? undefined : Layer.setTracer(tracer)
    const under = hooks === undefined ? traced : traced === undefined ? hooks.layer : Layer.merge(hooks.layer, traced)
    this.runtime = ManagedRuntime.make(under === undefined ? engine : Layer.provide(engine, under))
    this.block()
    hooks?.started(this)
  }

  private block(): void {
    if (typeof this.context.blockConcurrencyWhile === "function") {
      // A failure is not lost: the next call re-runs the warm-up and rejects with it.
      void this.context.blockConcurrencyWhile(() => this.warm()).catch(() => undefined)
    }
  }

  private warm(): Promise<void> {
    this.ready ??= this.runtime.runPromiseExit(Effect.flatMap(Scheduler.Scheduler, (engine) => engine.warm)).then(
      (exit) => {
        if (Exit.isFailure(exit)) {
          this.ready = undefined
          throw fromCause(exit.cause)
        }
        this.warmed = true
      }
    )
    return this.ready
  }

  /** Runs synchronously (attaching helpers in a constructor). Throws the mapped error. */
  runSync<A, E>(effect: Effect.Effect<A, E, Services>): A {
    const exit = this.runtime.runSyncExit(effect)
    if (Exit.isFailure(exit)) throw fromCause(exit.cause)
    return exit.value
  }

  /**
   * Runs after warm-up; rejects with the mapped error. Inside `transaction`, runs at once and
   * synchronously, in it: the promise is settled when this returns, and a failure rolls the
   * transaction back.
   */
  run<A, E>(effect: Effect.Effect<A, E, Services>): Promise<A> {
    const open = this.open
    if (open === undefined) return this.runLater(effect)
    const exit = this.runtime.runSyncExit(effect)
    let settled: Promise<A>
    if (Exit.isSuccess(exit)) {
      settled = Promise.resolve(exit.value)
    } else {
      const error = suspended(exit.cause) ?? fromCause(exit.cause)
      open.failed ??= { error }
      settled = Promise.reject(error)
      // The transaction throws it; a caller that also awaits this promise sees it too.
      settled.catch(() => undefined)
    }
    open.made.add(settled)
    return settled
  }

  /**
   * Runs `fn` in one transaction of the object's storage (`Scheduler.transaction` for the promise face):
   * the caller's own SQL and every helper call made in it commit together, or, when `fn` throws or a
   * call fails, none does (and this throws that error). Follow-ups (starts, events, the early timer)
   * are started after the commit. Nested calls join the outer one.
   */
  transaction<T>(fn: () => T): T {
    if (typeof fn !== "function") throw new TypeError("transaction needs a synchronous function")
    if (this.open !== undefined) return fn()
    const open: OpenTransaction = { failed: undefined, made: new Set() }
    let thrown: { readonly error: unknown } | undefined
    let followUps: Effect.Effect<void> = Effect.void
    const body = Effect.suspend(() => {
      let value: T
      try {
        value = fn()
      } catch (error) {
        thrown = { error }
        return Effect.fail(new RolledBack())
      }
      if (isThenable(value) && !open.made.has(value as Promise<unknown>)) {
        // Its awaits would run after the commit, outside the transaction.
        thrown = { error: new TypeError("transaction's function must be synchronous: it returned a promise (nothing was written)") }
        return Effect.fail(new RolledBack())
      }
      return open.failed === undefined ? Effect.succeed(value) : Effect.fail(new RolledBack())
    })
    this.open = open
    let exit: Exit.Exit<T, unknown>
    try {
      exit = this.runtime.runSyncExit(Effect.flatMap(StorageService.StorageService, (storage) =>
        storage.atomically(body, (all) =>
          Effect.sync(() => {
            followUps = all
          }))))
    } finally {
      this.open = undefined
    }
    if (thrown !== undefined) throw thrown.error
    if (open.failed !== undefined) throw open.failed.error
    if (Exit.isFailure(exit)) throw fromCause(exit.cause)
    // After the commit, on the object's runtime: a start or a timer may wait (for a lock, a permit).
    this.runtime.runFork(followUps)
    return exit.value
  }

  private async runLater<A, E>(effect: Effect.Effect<A, E, Services>): Promise<A> {
    if (!this.warmed) await this.warm()
    const exit = await this.runtime.runPromiseExit(effect)
    if (Exit.isFailure(exit)) throw fromCause(exit.cause)
    return exit.value
  }

  /** The engine's services of this object (the same instances every helper uses). */
  services(): Context.Context<Services> {
    return this.runSync(Effect.context<Services>())
  }

  /** Runs `effect` in the background on this runtime (the test kit's platform). */
  fork<A, E>(effect: Effect.Effect<A, E, Services>): void {
    this.runtime.runFork(effect)
  }

  /** Stops every fiber of this instance (tests, resets). */
  dispose(): Promise<void> {
    return this.runtime.dispose()
  }
}
