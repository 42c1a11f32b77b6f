/**
 * The promise face of the object's load telemetry (`RoutingLoad` in `durability/effect`).
 * @packageDocumentation
 */
import * as Effect from "effect/Effect"
import * as Load from "../routing/RoutingLoad.js"

export type { Direction, EnqueueResult, LoadSnapshot, ProcessingLoad, SerializedError } from "../routing/RoutingLoad.js"

const windows = new WeakMap<RoutingLoad, Load.Service>()

/**
 * Counts an object's calls in flight and the durations of those finished in the last minute, per
 * direction. In memory and advisory: an eviction forgets it. Give one to a `DurabilityFanout` or a
 * `DurabilityLog` (`routing`) to share it; each makes its own otherwise.
 */
export class RoutingLoad {
  constructor() {
    windows.set(this, Load.fromWindow(new Load.LoadWindow()))
  }

  /** Counts one call of `direction` as in flight; call the returned function when it ends (again is a no-op). */
  begin(direction: Load.Direction): () => void {
    const end = Effect.runSync(serviceOf(this).begin(direction))
    return () => Effect.runSync(end)
  }

  /** The load now; `pendingDeliveries` is the stored work still to deliver, which the caller counts. */
  snapshot(pendingDeliveries: number): Load.LoadSnapshot {
    return Effect.runSync(serviceOf(this).snapshot(pendingDeliveries))
  }
}

/** The Effect service behind a `RoutingLoad` (the capabilities' promise faces hand it to their Effect modules). */
export const serviceOf = (load: RoutingLoad): Load.Service => {
  const service = windows.get(load)
  if (service === undefined) throw new TypeError("routing must be a RoutingLoad")
  return service
}
