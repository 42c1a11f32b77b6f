/**
 * One simulated Durable Object for tests: in-memory SQLite storage, the whole
 * engine, a recording `Background`, all on the test's `TestClock`.
 *
 * ```ts
 * it.scoped("charges once", () => Effect.gen(function*() {
 *   const object = yield* TestDurability.make()   // ends with the test's scope
 *   const ops = yield* object.run(Operations.make({ charge: Operations.operation({ handler }) }))
 *   yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 500 } }))
 *   yield* TestClock.adjust("1 second")
 *   expect(yield* object.run(ops.getResult("charge", "inv-1"))).toMatchObject({ status: "completed" })
 *   const next = yield* object.restart    // eviction: memory gone, storage kept
 * }))
 * ```
 * @packageDocumentation
 */
import * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import type { InvalidOptionError } from "../shared/Errors.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"
import * as Logging from "../engine/Logging.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as PlatformAlarm from "./internal/platformAlarm.js"
import * as MemoryStorage from "./MemoryStorage.js"
import * as TestBackground from "./TestBackground.js"
import * as TestScheduler from "./TestScheduler.js"

/**
 * One simulated Durable Object instance: its storage, its services, and the platform's alarm, eviction and
 * restart.
 */
export interface TestObject {
  /** The object's storage (keep it to build a new instance over it). */
  readonly storage: MemoryStorage.MemoryStorage
  /** What the library reported in the background and handed to `waitUntil`. */
  readonly background: TestBackground.TestBackground
  /**
   * What the library logged through Effect's `Logger` while running in this object (`Logging.toRecord`
   * shape: `{ level, message, event, ... }`), oldest first: e.g. a record failing for good.
   */
  readonly logs: Effect.Effect<ReadonlyArray<Readonly<Record<string, unknown>>>>
  /** The scheduler options the instance was built with. */
  readonly options: Scheduler.SchedulerOptions
  /** The instance's services, to provide to effects that use capabilities. */
  readonly context: Context.Context<TestScheduler.Services>
  /** Runs an effect against this instance's services. */
  readonly run: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, Exclude<R, TestScheduler.Services>>
  /**
   * Delivers the physical alarm now, moving the clock to its time if it is still ahead; returns false
   * when no alarm is set. With `alarms: "platform"` (the default) the object's platform delivers it
   * (this waits for that delivery; `info` is the platform's); with `"manual"` this call runs the pass
   * itself with `info` (see `TestScheduler.fireAlarm`). Fails as `alarm()` would throw to the platform.
   */
  readonly fireAlarm: (info?: AlarmInvocationInfo) => Effect.Effect<boolean, unknown>
  /** Every `alarm()` the platform made (`alarms: "platform"`), oldest first. */
  readonly deliveries: Effect.Effect<ReadonlyArray<PlatformAlarm.Delivery>>
  /** Eviction: every fiber, timer and in-memory lock of this instance is gone; storage stays. */
  readonly evict: Effect.Effect<void>
  /** Evicts this instance and builds a new one on the same storage (capabilities must be made again). */
  readonly restart: Effect.Effect<TestObject, InvalidOptionError>
}

/** `make`'s options. */
export interface TestObjectOptions {
  /** Reuse the storage of an earlier instance. */
  readonly storage?: MemoryStorage.MemoryStorage | undefined
  /** The scheduler's options (`alarmConcurrency`, `alarmMinDelayMs`, …). */
  readonly scheduler?: Scheduler.SchedulerOptions | undefined
  /**
   * `"platform"` (default): the physical alarm is delivered when the test clock reaches it, as workerd
   * does, so `TestClock.adjust` runs work due beyond `alarmMinDelayMs` too (and a failed `alarm()` is
   * retried with the platform's backoff). `"manual"`: only `fireAlarm()` delivers it, for tests that
   * control every pass.
   */
  readonly alarms?: "platform" | "manual" | undefined
}

/**
 * One object, living until the caller's scope closes (the test's, with `it.scoped`); `evict` and
 * `restart` end it sooner, and `restart`'s new instance lives in that same scope.
 */
export const make = (options: TestObjectOptions = {}): Effect.Effect<TestObject, InvalidOptionError, Scope.Scope> =>
  Effect.gen(function*() {
    const owner = yield* Effect.scope
    const storage = options.storage ?? (yield* MemoryStorage.make)
    const background = yield* TestBackground.make
    const schedulerOptions = options.scheduler ?? {}
    const logged: Array<Readonly<Record<string, unknown>>> = []
    // Collected instead of printed (a test reads `logs`). The logger is a fiber setting, not a service:
    // set while the engine is built and on every run, it reaches every fiber the engine forks
    // (its wake-up loop when built; eager starts and passes from runs).
    const loggers = HashSet.make(Logger.make((entry) => void logged.push(Logging.toRecord(entry))))
    const collect = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.locally(effect, FiberRef.currentLoggers, loggers)
    // The instance's own scope, so an eviction can end it before the caller's does.
    const scope = yield* Scope.fork(owner, ExecutionStrategy.sequential)
    const context = yield* collect(Layer.buildWithScope(
      TestScheduler.layer(storage, background.layer, schedulerOptions),
      scope
    ))
    const run = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      collect(Effect.provide(effect, context)) as Effect.Effect<A, E, Exclude<R, TestScheduler.Services>>
    const evict = Scope.close(scope, Exit.void)
    const mode = options.alarms ?? "platform"
    const platform = PlatformAlarm.make(
      storage,
      (info) => run(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm(info)))
    )
    yield* Scope.addFinalizer(scope, Effect.sync(platform.close))
    if (mode === "platform") yield* Effect.forkIn(platform.loop, scope)

    const fireAlarm = (info?: AlarmInvocationInfo): Effect.Effect<boolean, unknown> =>
      mode === "manual" ? run(TestScheduler.fireAlarm(storage, info)) : Effect.gen(function*() {
        const at = storage.alarmAt
        if (at === null) return false
        const since = platform.deliveries.length
        const now = yield* Clock.currentTimeMillis
        yield* at > now ? TestClock.setTime(at) : TestClock.adjust(0)
        return yield* platform.delivered(at, since)
      })

    const object: TestObject = {
      storage,
      background,
      logs: Effect.sync(() => [...logged]),
      options: schedulerOptions,
      context,
      run,
      fireAlarm,
      deliveries: Effect.sync(() => platform.deliveries.map(({ at, failed, info }) => ({ at, failed, info }))),
      evict,
      restart: Effect.zipRight(
        evict,
        Effect.suspend(() => Scope.extend(make({ storage, scheduler: schedulerOptions, alarms: mode }), owner))
      )
    }
    return object
  })
