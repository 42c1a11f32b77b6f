/**
 * A Durable Object's `ctx` for tests of the promise face (`DurabilityScheduler`,
 * `Durability`, `DurabilityAlarms`) in plain Node: in-memory SQLite storage, an
 * object clock the test moves (Effect's `TestClock` inside the object's
 * runtime), and the platform's alarm delivery. No workerd, no real waiting.
 *
 * ```ts
 * const state = await TestObjectState.make()
 * const durability = new Durability({ context: state.context, handlers: { charge } })
 * await durability.charge({ id: "inv-1", payload: { cents: 500 } })
 * await state.advance("1 minute")       // timers, retries and the physical alarm run as they come due
 * const next = await state.restart()    // eviction: build the helpers again on next.context
 * ```
 *
 * Handlers run for real: a handler awaiting real I/O (a `fetch`, a real
 * timer) finishes on its own schedule, not the object's clock. `Date.now()` in
 * a handler is the machine's time; the object's time is `state.now()`.
 * @packageDocumentation
 */
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import * as TestServices from "effect/TestServices"
import { fromCause } from "../facade/errors.js"
import { type ObjectRuntime, RUNTIME_HOOKS, type RuntimeHooks } from "../facade/objectRuntime.js"
import type { DurabilityContext } from "../shared/platform.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as PlatformAlarm from "./internal/platformAlarm.js"
import * as MemoryStorage from "./MemoryStorage.js"

/**
 * A simulated Durable Object state for promise-style code: pass its `context` to the helpers, then move its
 * clock and restart it.
 */
export interface TestObjectState {
  /** Pass it where the object passes `this.ctx`: `new DurabilityScheduler({ context })` or a helper's `{ context }`. */
  readonly context: DurabilityContext
  /** The object's storage: `storage.sql.exec` to read rows, `storage.alarmAt` for the physical alarm. */
  readonly storage: MemoryStorage.MemoryStorage
  /** The object's clock, in epoch milliseconds. */
  readonly now: () => number
  /**
   * Moves the object's clock: early timers, retries and the physical alarm that come due run in time
   * order, as the platform would run them. Resolves once the object waits for something else.
   */
  readonly advance: (duration: Duration.DurationInput) => Promise<void>
  /** Delivers the physical alarm now, moving the clock to it if it is ahead; false when none is set. */
  readonly fireAlarm: () => Promise<boolean>
  /** Every `alarm()` the platform made, oldest first. */
  readonly deliveries: () => ReadonlyArray<PlatformAlarm.Delivery>
  /**
   * Eviction: this instance's handlers, timers and in-memory state are gone; storage and the alarm
   * stay, and so does the clock. Build the object's helpers again on the returned state's `context`.
   */
  readonly restart: () => Promise<TestObjectState>
}

/** `make`'s options. */
export interface TestObjectStateOptions {
  /** Reuse the storage of an earlier instance. */
  readonly storage?: MemoryStorage.MemoryStorage | undefined
  /** The object's clock at the start (epoch milliseconds). Default 0. */
  readonly startTime?: number | undefined
}

/** Lets promise callbacks of handlers (and their `waitUntil`s) run; moves no time. */
const settle = async (): Promise<void> => {
  for (let turn = 0; turn < 3; turn++) await new Promise<void>((resolve) => setTimeout(resolve, 0))
}

// Not `Effect.runPromise`: its FiberFailure would wrap the error a caller reads ("sql.js is missing" among them).
const newStorage = async (): Promise<MemoryStorage.MemoryStorage> => {
  const exit = await Effect.runPromiseExit(MemoryStorage.make)
  if (Exit.isFailure(exit)) throw fromCause(exit.cause)
  return exit.value
}

/** Makes a simulated object state over a new (or the given) in-memory storage, its clock at `startTime`. */
export const make = async (options: TestObjectStateOptions = {}): Promise<TestObjectState> => {
  const data = options.storage ?? (await newStorage())
  // A storage object of its own (same data): the next instance gets its own scheduler, as after an eviction.
  const storage = MemoryStorage.intercept(data, {})
  let time = options.startTime ?? 0
  let runtime: ObjectRuntime | undefined
  let platform: PlatformAlarm.PlatformAlarm<Scheduler.Services> | undefined

  const hooks: RuntimeHooks = {
    // The object's clock: a TestClock at the state's time, the default clock of its runtime.
    layer: Layer.provide(
      TestClock.live(TestClock.makeData(time, Chunk.empty())),
      Layer.merge(TestServices.liveLayer(), TestServices.annotationsLayer())
    ).pipe(Layer.provide(TestContext.LiveContext)),
    started: (started) => {
      runtime = started
      platform = PlatformAlarm.make(
        storage,
        (info) => Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm(info))
      )
      started.fork(platform.loop)
    }
  }
  const waited: Array<Promise<unknown>> = []
  const context: DurabilityContext & { readonly [RUNTIME_HOOKS]: RuntimeHooks } = {
    storage,
    waitUntil: (promise) => void waited.push(promise),
    id: { toString: () => "test-object" },
    [RUNTIME_HOOKS]: hooks
  }

  const inRuntime = <A>(effect: Effect.Effect<A, unknown, Scheduler.Services>, otherwise: A): Promise<A> =>
    runtime === undefined ? Promise.resolve(otherwise) : runtime.run(effect)

  const state: TestObjectState = {
    context,
    storage,
    now: () => runtime === undefined ? time : runtime.runSync(Clock.currentTimeMillis),
    advance: async (duration) => {
      if (runtime === undefined) {
        throw new Error("TestObjectState.advance: build a DurabilityScheduler (or a helper) on state.context first")
      }
      await settle()
      await runtime.run(TestClock.adjust(duration))
      await settle()
      await runtime.run(TestClock.adjust(0))
    },
    fireAlarm: async () => {
      const at = storage.alarmAt
      if (at === null || platform === undefined) return false
      const since = platform.deliveries.length
      const delivered = platform.delivered
      await inRuntime(
        Effect.flatMap(Clock.currentTimeMillis, (now) => at > now ? TestClock.setTime(at) : TestClock.adjust(0)),
        undefined
      )
      const result = await inRuntime(delivered(at, since), false)
      await settle()
      return result
    },
    deliveries: () => platform?.deliveries.map(({ at, failed, info }) => ({ at, failed, info })) ?? [],
    restart: async () => {
      time = state.now()
      platform?.close()
      // Not awaited: an eviction drops the isolate, it does not wait for handlers that ignore interruption.
      void runtime?.dispose()
      return make({ storage: data, startTime: time })
    }
  }
  return state
}
