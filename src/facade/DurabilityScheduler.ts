/**
 * `DurabilityScheduler`: the owner of a Durable Object's alarm for promise-style
 * code. Create one per object (in the constructor), give it to every helper,
 * and delegate `alarm()` to it.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type * as Tracer from "effect/Tracer"
import { type AlarmInvocationInfo, type DurabilityContext, objectIdOf } from "../shared/platform.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as SchedulerConfig from "../engine/SchedulerConfig.js"
import * as DurabilityRuntime from "./DurabilityRuntime.js"
import { ObjectRuntime } from "./objectRuntime.js"
import { toError } from "./errors.js"

export type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
export type { AlarmRetryInfo } from "../engine/SchedulerConfig.js"
export type { DurabilityRuntime, DurabilityServices } from "./DurabilityRuntime.js"

/**
 * Times in milliseconds (the Effect face's `Scheduler.layerDurableObject` takes Durations too).
 * `storageBackend` is typed as the reference library's so its code compiles unchanged; only `"sqlite"` runs
 * (a `TypeError` for `"kv"`): this package needs SQLite-backed objects.
 */
export type DurabilitySchedulerOptions = Omit<SchedulerConfig.SchedulerOptions<number>, "objectId"> & {
  readonly storageBackend?: "sqlite" | "kv" | undefined
}

/** Refuses a storage backend other than SQLite, naming the field. */
export const checkStorageBackend = (backend: unknown): void => {
  if (backend !== undefined && backend !== "sqlite") {
    throw new TypeError(
      `storageBackend must be "sqlite": this package runs on SQLite-backed objects only (new_sqlite_classes), got ${
        JSON.stringify(String(backend))
      }`
    )
  }
}

export interface DurabilitySchedulerConfig extends DurabilitySchedulerOptions {
  /** The object's `ctx` (`DurableObjectState`) of a SQLite-backed class. */
  readonly context: DurabilityContext
  /**
   * A tracer for the engine's runtime (e.g. OpenTelemetry's, from `@effect/opentelemetry`): the helpers'
   * calls and the attempts the alarm starts make their spans with it (see docs/observability.md). None by
   * default: no span is made.
   */
  readonly tracer?: Tracer.Tracer | undefined
}

interface Internals {
  readonly runtime: ObjectRuntime
  readonly config: SchedulerConfig.SchedulerConfig
  readonly tracer: Tracer.Tracer | undefined
}

const registry = new WeakMap<object, Internals>()

/**
 * The scheduler of each object storage in this isolate. An object has one alarm, so it gets one
 * engine: a second engine would reconcile the alarm against its own tables only (and delete it
 * while the other's work is pending). A new instance after an eviction has new storage.
 */
const byStorage = new WeakMap<object, DurabilityScheduler>()

/** The options a user gives a scheduler (its object id comes from the context). */
export const SCHEDULER_OPTIONS = ["alarmConcurrency", "alarmMinDelayMs", "alarmHandoffMs", "liveTimers", "onAlarmRetry", "log"] as const

const describeOption = (value: unknown): string => typeof value === "function" ? "a different function" : String(value)

export const checkContext = (context: unknown): DurabilityContext => {
  const storage = (context as { storage?: { sql?: unknown } } | null | undefined)?.storage
  if (typeof storage !== "object" || storage === null || typeof storage.sql !== "object") {
    throw new TypeError("context must be a Durable Object state whose class uses SQLite storage")
  }
  return context as DurabilityContext
}

/**
 * The object's one scheduler, for promise-style code: it owns the object's alarm and runs the work of every
 * capability attached to it (`Durability`, `DurabilityAlarms`, `DurabilityJobs`, `DurabilitySchedules`), so
 * they can share one alarm.
 */
export class DurabilityScheduler {
  /**
   * One scheduler per object storage: constructing another over the same storage with the same
   * options returns the existing one; with other options it throws.
   */
  constructor(config: DurabilitySchedulerConfig) {
    if (typeof config !== "object" || config === null) throw new TypeError("DurabilityScheduler needs a config object")
    const context = checkContext(config.context)
    const { context: _context, tracer, storageBackend, ...options } = config
    checkStorageBackend(storageBackend)
    if (tracer !== undefined && (typeof tracer !== "object" || tracer === null || typeof tracer.span !== "function")) {
      throw new TypeError("tracer must be an Effect Tracer (Tracer.make, or OpenTelemetry's from @effect/opentelemetry)")
    }
    const resolved = Effect.runSync(
      Effect.either(SchedulerConfig.resolve({ ...options, objectId: objectIdOf(context) }, "milliseconds"))
    )
    if (Either.isLeft(resolved)) throw toError(resolved.left)
    const existing = byStorage.get(context.storage)
    if (existing !== undefined) {
      const { config: current, tracer: currentTracer } = internals(existing)
      const differs = SCHEDULER_OPTIONS.find((key) => current[key] !== resolved.right[key])
      if (differs === undefined && tracer !== currentTracer) {
        throw new Error(
          "This Durable Object already has a DurabilityScheduler with another tracer: an object has one scheduler. " +
            "Create one DurabilityScheduler and pass it to every helper as { scheduler }."
        )
      }
      if (differs === undefined) return existing
      throw new Error(
        `This Durable Object already has a DurabilityScheduler with ${differs} ${describeOption(current[differs])}, ` +
          `not ${describeOption(resolved.right[differs])}: an object has one alarm and one scheduler. ` +
          `Create one DurabilityScheduler and pass it to every helper as { scheduler }.`
      )
    }
    registry.set(this, { runtime: new ObjectRuntime(context, resolved.right, tracer), config: resolved.right, tracer })
    byStorage.set(context.storage, this)
  }

  /** Delegate the Durable Object's `alarm(info)` here. */
  alarm(info?: AlarmInvocationInfo): Promise<void> {
    return internals(this).runtime.run(Effect.flatMap(Scheduler.Scheduler, (engine) => engine.alarm(info)))
  }

  /**
   * Runs `fn` in one transaction of the object's storage, so that your own rows and the library's work
   * commit together or not at all. In `fn`, write your rows with `ctx.storage.sql.exec` and call the
   * helpers attached to this scheduler as usual (`jobs.email.add(…)`, `durability.charge(…)`,
   * `alarms.renew(…)`, `schedules.digest.upsert(…)`, `jobs.event(…)`): each call runs at once, inside the
   * transaction, and its promise is already settled. When `fn` throws, or any call in it fails, nothing
   * is written (the alarm included) and `transaction` throws that error; otherwise it returns what `fn`
   * returned. `fn` must be synchronous, and calls that wait (`wait`, a handler's result) fail inside it.
   * Starts, lifecycle events and aborts of canceled handlers happen after the commit. See
   * docs/architecture.md, "Your writes and the library's in one transaction".
   */
  transaction<T>(fn: () => T): T {
    return internals(this).runtime.transaction(fn)
  }

  /**
   * The Effect face on this scheduler: `Operations.make`, `Jobs.make`, `NamedAlarms.make`, … run here
   * attach to the same engine as this object's promise helpers (one alarm, one concurrency pool).
   * `layer` provides your handlers' services; it is built once, on first use. Its `runPromise`
   * rejects with named errors (not Effect's `FiberFailure`), which keep their names over RPC through
   * `reviveError`. Two helpers of one capability still conflict, whichever face made them.
   */
  runtime(): DurabilityRuntime.DurabilityRuntime<never>
  runtime<R, E>(layer: Layer.Layer<R, E, DurabilityRuntime.DurabilityServices>): DurabilityRuntime.DurabilityRuntime<R>
  runtime<R, E>(layer?: Layer.Layer<R, E, DurabilityRuntime.DurabilityServices>): DurabilityRuntime.DurabilityRuntime<R> {
    return DurabilityRuntime.make(internals(this).runtime, layer ?? (Layer.empty as Layer.Layer<R>))
  }

  /**
   * This object's engine services as a layer, for a `ManagedRuntime` of your own: the same engine as
   * the promise helpers, not a second one. Prefer `runtime(layer)`: a runtime of your own has its own
   * clock (the test kit's `TestClock` does not reach it) and rejects with `FiberFailure`s
   * (`reviveError` turns them back into the library's errors).
   */
  get layer(): Layer.Layer<DurabilityRuntime.DurabilityServices> {
    return Layer.succeedContext(internals(this).runtime.services())
  }
}

/**
 * The engine behind a scheduler. Rejects objects this library did not create
 * (a look-alike would never own the alarm).
 * @internal
 */
export const internals = (scheduler: unknown): Internals => {
  const found = typeof scheduler === "object" && scheduler !== null ? registry.get(scheduler) : undefined
  if (found === undefined) throw new Error("Unknown DurabilityScheduler instance")
  return found
}
