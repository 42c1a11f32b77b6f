/**
 * `scheduler.runtime(layer)`: the Effect face on the object's one scheduler, beside the promise
 * helpers. Effects run on the object's own runtime (its engine, its clock: the test kit's `TestClock`
 * too), with the services of your layer, built once; a failure rejects with the library's named
 * error, never a `FiberFailure`, so its name reaches an RPC caller (see `reviveError`).
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import type * as Scheduler from "../engine/Scheduler.js"
import type * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import type { ObjectRuntime } from "./objectRuntime.js"

/** The engine's services an Effect run by a `DurabilityRuntime` may use: what `Operations.make`, `Jobs.make`, … require. */
export type DurabilityServices = Scheduler.Services | InspectionRegistry.InspectionRegistry

/** An object's Effect runtime over its scheduler and your layer (`DurabilityScheduler.runtime`). */
export interface DurabilityRuntime<R> {
  /**
   * Runs `effect` once the scheduler is warm, with the engine's services and your layer's. Rejects with
   * the error the failure stands for (`toError`): the promise face's named classes, `TypeError` or
   * `RangeError` for bad input, a defect as thrown.
   */
  runPromise<A, E>(effect: Effect.Effect<A, E, R | DurabilityServices>): Promise<A>
  /** Releases what your layer acquired (its scope); the scheduler itself lives on. */
  dispose(): Promise<void>
}

export const make = <R, E>(
  runtime: ObjectRuntime,
  layer: Layer.Layer<R, E, DurabilityServices>
): DurabilityRuntime<R> => {
  const scope = Effect.runSync(Scope.make())
  let built: Promise<Context.Context<R>> | undefined
  // Built on first use, in the object's runtime; a failed build is tried again by the next call.
  const services = () =>
    built ??= runtime.run(Layer.buildWithScope(layer, scope)).catch((error: unknown) => {
      built = undefined
      throw error
    })
  return {
    runPromise: async (effect) => runtime.run(Effect.provide(effect, await services())),
    dispose: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
