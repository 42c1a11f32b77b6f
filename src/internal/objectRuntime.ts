/**
 * One Effect runtime per Durable Object instance, shared by every helper built
 * on the same scheduler.
 *
 * Every layer builds synchronously (no I/O), so helpers can attach to the
 * engine from the object's constructor. The one I/O step, reading the alarm,
 * is the warm-up: it runs inside `blockConcurrencyWhile` when the context has
 * it, and a failed warm-up is retried by the next call instead of being cached,
 * so a transient storage error cannot wedge the object.
 * @internal
 */
import { Effect, Exit, Layer, ManagedRuntime } from "effect"
import { fromCause } from "../facade/errors.js"
import * as Scheduler from "../Scheduler.js"
import type { DurabilityContext } from "./platform.js"

type Services = Scheduler.Services

export class ObjectRuntime {
  private readonly runtime: ManagedRuntime.ManagedRuntime<Services, never>
  private ready: Promise<void> | undefined

  constructor(private readonly context: DurabilityContext, config: Scheduler.SchedulerConfig) {
    // The config was validated by the caller, so the build cannot fail.
    this.runtime = ManagedRuntime.make(Layer.orDie(Scheduler.layerDurableObject(context, config)))
    const warm = () => this.warm()
    if (typeof context.blockConcurrencyWhile === "function") {
      void context.blockConcurrencyWhile(warm).catch(() => undefined)
    }
  }

  private warm(): Promise<void> {
    this.ready ??= this.exit(Effect.flatMap(Scheduler.Scheduler, (engine) => engine.warm)).then((exit) => {
      if (Exit.isFailure(exit)) {
        this.ready = undefined
        throw fromCause(exit.cause)
      }
    })
    return this.ready
  }

  private exit<A, E>(effect: Effect.Effect<A, E, Services>): Promise<Exit.Exit<A, E>> {
    return this.runtime.runPromiseExit(effect)
  }

  /** Runs synchronously (attaching helpers in a constructor). Throws the mapped error. */
  runSync<A, E>(effect: Effect.Effect<A, E, Services>): A {
    const exit = this.runtime.runSyncExit(effect)
    if (Exit.isFailure(exit)) throw fromCause(exit.cause)
    return exit.value
  }

  /** Runs after warm-up; rejects with the mapped error. */
  async run<A, E>(effect: Effect.Effect<A, E, Services>): Promise<A> {
    await this.warm()
    const exit = await this.exit(effect)
    if (Exit.isFailure(exit)) throw fromCause(exit.cause)
    return exit.value
  }

  /** Hands a promise to `waitUntil` when the context has it. */
  waitUntil(promise: Promise<unknown>): void {
    this.context.waitUntil?.(promise.catch(() => undefined))
  }

  /** Stops every fiber of this instance (tests, resets). */
  dispose(): Promise<void> {
    return this.runtime.dispose()
  }
}
