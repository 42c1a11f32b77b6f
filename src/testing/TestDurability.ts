/**
 * One simulated Durable Object for tests: in-memory SQLite storage, the whole
 * engine, a recording `Background`, all on the test's `TestClock`.
 *
 * ```ts
 * it.effect("charges once", () => Effect.gen(function*() {
 *   const object = yield* TestDurability.make()
 *   const ops = yield* object.run(Operations.make({ charge: Operations.operation({ handler }) }))
 *   yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 500 } }))
 *   yield* TestClock.adjust("1 second")
 *   expect(yield* object.run(ops.getResult("charge", "inv-1"))).toMatchObject({ status: "completed" })
 *   const next = yield* object.restart    // eviction: memory gone, storage kept
 * }))
 * ```
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import type { InvalidOptionError } from "../Errors.js"
import type { AlarmInvocationInfo } from "../internal/platform.js"
import * as Logging from "../Logging.js"
import type * as Scheduler from "../Scheduler.js"
import * as MemoryStorage from "./MemoryStorage.js"
import * as TestBackground from "./TestBackground.js"
import * as TestScheduler from "./TestScheduler.js"

export interface TestObject {
  readonly storage: MemoryStorage.MemoryStorage
  readonly background: TestBackground.TestBackground
  /**
   * What the library logged through Effect's `Logger` while running in this object (`Logging.toRecord`
   * shape: `{ level, message, event, ... }`), oldest first: e.g. a record failing for good.
   */
  readonly logs: Effect.Effect<ReadonlyArray<Readonly<Record<string, unknown>>>>
  readonly options: Scheduler.SchedulerOptions
  readonly context: Context.Context<Scheduler.Services>
  /** Runs an effect against this instance's services. */
  readonly run: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, Exclude<R, Scheduler.Services>>
  /** Does what the platform does when the physical alarm is due (see `TestScheduler.fireAlarm`). */
  readonly fireAlarm: (info?: AlarmInvocationInfo) => Effect.Effect<boolean, unknown>
  /** Eviction: every fiber, timer and in-memory lock of this instance is gone; storage stays. */
  readonly evict: Effect.Effect<void>
  /** Evicts this instance and builds a new one on the same storage (capabilities must be made again). */
  readonly restart: Effect.Effect<TestObject, InvalidOptionError>
}

export interface TestObjectOptions {
  /** Reuse the storage of an earlier instance. */
  readonly storage?: MemoryStorage.MemoryStorage | undefined
  readonly scheduler?: Scheduler.SchedulerOptions | undefined
}

export const make = (options: TestObjectOptions = {}): Effect.Effect<TestObject, InvalidOptionError> =>
  Effect.gen(function*() {
    const storage = options.storage ?? (yield* MemoryStorage.make)
    const background = yield* TestBackground.make
    const schedulerOptions = options.scheduler ?? {}
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      TestScheduler.layer(storage, background.layer, schedulerOptions),
      scope
    )
    const logged: Array<Readonly<Record<string, unknown>>> = []
    const collect = Logger.add(Logger.make((entry) => void logged.push(Logging.toRecord(entry))))
    // The logger is a fiber setting, not a service: provided on every run, it reaches the fibers the
    // engine forks from there (eager starts, timers, passes).
    const run = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.provide(Effect.provide(effect, context), collect) as Effect.Effect<A, E, Exclude<R, Scheduler.Services>>
    const evict = Scope.close(scope, Exit.void)
    const object: TestObject = {
      storage,
      background,
      logs: Effect.sync(() => [...logged]),
      options: schedulerOptions,
      context,
      run,
      fireAlarm: (info) => run(TestScheduler.fireAlarm(storage, info)),
      evict,
      restart: Effect.zipRight(evict, Effect.suspend(() => make({ storage, scheduler: schedulerOptions })))
    }
    return object
  })
