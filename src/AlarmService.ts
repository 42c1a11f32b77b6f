/**
 * The object's one physical alarm and the one in-memory early timer.
 *
 * The physical alarm survives eviction but the platform will not fire it
 * earlier than the engine's minimum delay allows; the early timer is a fiber
 * sleeping on Effect's `Clock` (so `TestClock` drives it) that runs the alarm
 * pass for work due sooner. It dies with the isolate, which is fine: the
 * physical alarm is always armed at or before the work's due time plus the
 * minimum delay.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Fork from "./internal/fork.js"
import * as Background from "./Background.js"
import type { StorageError } from "./Errors.js"
import { StorageService } from "./StorageService.js"

/** `setTimeout` (and so `Effect.sleep`) treats longer delays as zero or forever; the physical alarm covers them. */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1

/**
 * How early the timer wakes to look at the clock again. In production Workers the clock stands
 * still while code runs (it moves on I/O), so a delay computed inside a long burst of work is too
 * long by the burst's length; waking a little early and sleeping the rest from a fresh reading
 * corrects it. (Local workerd's clock runs on, so there the second sleep is just the margin.)
 */
export const TIMER_RECHECK_MS = 25

/** Sleeps until `at` on `Clock`: most of `delay` first, then what a fresh reading says is left. */
const sleepUntil = (at: number, delay: number): Effect.Effect<void> =>
  delay <= TIMER_RECHECK_MS
    ? Effect.sleep(Duration.millis(delay))
    : Effect.zipRight(
      Effect.sleep(Duration.millis(delay - TIMER_RECHECK_MS)),
      Effect.flatMap(Clock.currentTimeMillis, (now) => at > now ? Effect.sleep(Duration.millis(at - now)) : Effect.void)
    )

export interface AlarmService {
  /** The physical alarm as last read or written (`undefined`: not read yet). */
  readonly physical: Effect.Effect<number | null | undefined>
  readonly setPhysical: (at: number) => Effect.Effect<void, StorageError>
  readonly deletePhysical: Effect.Effect<void, StorageError>
  /** Asks the platform (at warm-up). */
  readonly readPhysical: Effect.Effect<number | null, StorageError>
  /** The platform fired the physical alarm, which clears it. */
  readonly physicalFired: Effect.Effect<void>
  /**
   * Arms the one early timer for `at`, replacing any other; `null` cancels it.
   * A delay over 2^31−1 ms is not armed.
   */
  readonly armTimer: (at: number | null) => Effect.Effect<void>
  /** Makes sure the early timer fires at or before `at`: arms it unless it already does. */
  readonly coverTimer: (at: number) => Effect.Effect<void>
  /** When the early timer will fire, if armed. */
  readonly timerAt: Effect.Effect<number | null>
  /** What the early timer runs when it fires (the engine's alarm pass). */
  readonly setTimerHandler: (run: Effect.Effect<void>) => Effect.Effect<void>
}

export const AlarmService: Context.Tag<AlarmService, AlarmService> = Context.GenericTag<AlarmService>(
  "durability/AlarmService"
)

interface ArmedTimer {
  readonly at: number
  readonly fiber: Fiber.RuntimeFiber<void>
}

export const make: Effect.Effect<
  AlarmService,
  never,
  StorageService | Background.Background | Scope.Scope
> = Effect.gen(function*() {
  const storage = yield* StorageService
  const background = yield* Background.Background
  const scope = yield* Effect.scope
  let handler: Effect.Effect<void> = Effect.void
  let timer: ArmedTimer | undefined

  // The pass runs in the timer's own fiber (a fork would be one more scheduler turn before due
  // work starts). Detached from the timer slot first: the pass re-arms the timer, which must not
  // interrupt the pass itself.
  const fire = (self: () => ArmedTimer | undefined) =>
    Effect.gen(function*() {
      if (timer === self()) timer = undefined
      yield* Effect.withFiberRuntime((fiber) => background.waitUntil(Fork.settled(fiber)))
      yield* handler
    })

  // Callers race (settles, passes, writes); re-arming must be one step at a time.
  const lock = yield* Effect.makeSemaphore(1)

  const armTimer = (at: number | null): Effect.Effect<void> => lock.withPermits(1)(arm(at))

  const coverTimer = (at: number): Effect.Effect<void> =>
    lock.withPermits(1)(Effect.suspend(() => timer !== undefined && timer.at <= at ? Effect.void : arm(at)))

  const arm = (at: number | null): Effect.Effect<void> =>
    Effect.gen(function*() {
      if (timer !== undefined && at !== null && timer.at === at) return
      const previous = timer
      timer = undefined
      if (previous !== undefined) yield* Fiber.interruptFork(previous.fiber)
      if (at === null) return
      const delay = Math.max(0, at - (yield* Clock.currentTimeMillis))
      if (delay > MAX_TIMER_DELAY_MS) return
      let armed: ArmedTimer | undefined
      const fiber = yield* Fork.detached(
        Effect.zipRight(sleepUntil(at, delay), Effect.suspend(() => fire(() => armed))),
        scope
      )
      armed = { at, fiber }
      timer = armed
    })

  return AlarmService.of({
    physical: storage.alarm,
    setPhysical: storage.setAlarm,
    deletePhysical: storage.deleteAlarm,
    readPhysical: storage.readAlarm,
    physicalFired: storage.alarmFired,
    armTimer,
    coverTimer,
    timerAt: Effect.sync(() => timer?.at ?? null),
    setTimerHandler: (run) => Effect.sync(() => (handler = run))
  })
})

export const layer: Layer.Layer<AlarmService, never, StorageService | Background.Background> = Layer.scoped(
  AlarmService,
  make
)
