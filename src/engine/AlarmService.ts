/**
 * The object's wake-up: when the platform's one physical alarm is set, and the one in-memory early
 * timer for work due sooner than the physical alarm may be set.
 *
 * The engine says when the object must wake (`reconcile` with the earliest pending time, inside the
 * transaction that changed the rows, so the lost-wakeup invariant holds); this service decides the
 * physical alarm (never sooner than `alarmMinDelayMs` after a write, and one already inside
 * `[earliest, target]` is kept, so frequent writes cannot postpone it) and the early timer (work
 * inside the min-delay window, or any work with `liveTimers`). The timer is a fiber sleeping on
 * Effect's `Clock` (so `TestClock` drives it); its fires reach the engine through `wakeup`.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { StorageError } from "../shared/Errors.js"
import * as Fork from "../shared/fork.js"
import { SchedulerConfig } from "./SchedulerConfig.js"
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
  /**
   * Inside the rows' transaction: the object must wake by `earliest` (`null`: nothing is pending).
   * Sets the physical alarm to `max(earliest, now + alarmMinDelayMs)`, keeps one already inside
   * `[earliest, that]`, deletes it when nothing is pending.
   */
  readonly reconcile: (earliest: number | null) => Effect.Effect<void, StorageError>
  /**
   * Inside the rows' transaction, after one record became pending at `at` (which can only move the
   * earliest pending time earlier): whether the known alarm is what `reconcile` would keep, so no
   * read of the earliest time is needed.
   */
  readonly covers: (at: number) => Effect.Effect<boolean>
  /** Arms the early timer for `at`, the earliest pending time it may run, when that is its business; otherwise disarms it. */
  readonly armTimer: (at: number | null) => Effect.Effect<void>
  /** Makes the early timer fire at or before `at` when that is its business. */
  readonly coverTimer: (at: number) => Effect.Effect<void>
  /** When the early timer will fire, if armed. */
  readonly timerAt: Effect.Effect<number | null>
  /** Waits for the early timer's next fire; the engine runs a timer pass for each. */
  readonly wakeup: Effect.Effect<void>
  /** The platform is delivering the physical alarm, which clears it (no I/O, so `TestClock` sees every step). */
  readonly delivered: Effect.Effect<void>
  /**
   * A pass handing off before the platform's time limit: the continuation alarm at
   * `now + alarmMinDelayMs`, unless one already wakes the object inside `[now, that]`.
   */
  readonly handoff: Effect.Effect<void, StorageError>
  /** A pass that failed: its fallback alarm at `now + alarmMinDelayMs`, armed directly. */
  readonly fallback: Effect.Effect<void, StorageError>
  /** Reads the physical alarm from the platform (before serving); one already past arms the early timer. */
  readonly warm: Effect.Effect<void, StorageError>
  /**
   * Runs `effect` (a pass) as time the object is awake anyway: meanwhile the early timer takes work
   * due at any time, not only inside the min-delay window. A physical alarm cannot be delivered while
   * a pass started by one runs, so without the timer, work due during a long pass would wait for it.
   */
  readonly whileAwake: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export const AlarmService: Context.Tag<AlarmService, AlarmService> = Context.GenericTag<AlarmService>(
  "durability/AlarmService"
)

interface ArmedTimer {
  readonly at: number
  readonly fiber: Fiber.RuntimeFiber<void>
}

/**
 * The early timer's fires, counted: each `take` waits for one fire not yet taken (a pass each, in the
 * order they came). An unbounded `Queue` of nothing would do the same, but it links Effect's whole queue
 * machinery into every worker for one counter.
 */
const makeFires = () => {
  let owed = 0
  const takers: Array<() => void> = []
  const offer = Effect.sync(() => {
    const taker = takers.shift()
    if (taker === undefined) owed++
    else taker()
  })
  const take = Effect.async<void>((resume) => {
    if (owed > 0) {
      owed--
      return resume(Effect.void)
    }
    const taker = () => resume(Effect.void)
    takers.push(taker)
    // An interrupted taker leaves the line, so a later fire goes to a taker still waiting.
    return Effect.sync(() => {
      const at = takers.indexOf(taker)
      if (at !== -1) takers.splice(at, 1)
    })
  })
  return { offer, take }
}

export const make: Effect.Effect<AlarmService, never, StorageService | SchedulerConfig | Scope.Scope> = Effect.gen(
  function*() {
    const storage = yield* StorageService
    const config = yield* SchedulerConfig
    const scope = yield* Effect.scope
    const fires = makeFires()
    let timer: ArmedTimer | undefined

    // Passes running now: the object is awake for them.
    let awake = 0
    // The early timer's business: work due inside the min-delay window, or any work while the object is
    // awake for a pass (or always, with liveTimers).
    const forTimer = (at: number, now: number) => config.liveTimers || awake > 0 || at - now < config.alarmMinDelayMs

    // Detached from the slot first: the pass this fire starts re-arms the timer.
    const fire = (self: () => ArmedTimer | undefined) =>
      Effect.suspend(() => {
        if (timer === self()) timer = undefined
        return fires.offer
      })

    // Callers race (settles, passes, writes); re-arming must be one step at a time.
    const lock = yield* Effect.makeSemaphore(1)
    // Fibers holding or awaiting the lock: with none, a timer that already fires in time is read without it.
    let locking = 0
    const locked = (effect: Effect.Effect<void>): Effect.Effect<void> =>
      Effect.suspend(() => {
        locking++
        return Effect.ensuring(lock.withPermits(1)(effect), Effect.sync(() => locking--))
      })

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

    const armTimer = (at: number | null): Effect.Effect<void> =>
      locked(
        Effect.flatMap(Clock.currentTimeMillis, (now) => arm(at !== null && forTimer(at, now) ? at : null))
      )

    const coverTimer = (at: number): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        !forTimer(at, now) || (locking === 0 && timer !== undefined && timer.at <= at)
          ? Effect.void
          : locked(Effect.suspend(() => timer !== undefined && timer.at <= at ? Effect.void : arm(at))))

    // Keeping an alarm inside [earliest, target] means frequent writes cannot keep postponing it.
    const targetFor = (earliest: number, now: number) => Math.max(earliest, now + config.alarmMinDelayMs)
    const keeps = (current: number | null | undefined, earliest: number, now: number) =>
      typeof current === "number" && current >= earliest && current <= targetFor(earliest, now)

    const reconcile = (earliest: number | null): Effect.Effect<void, StorageError> =>
      Effect.flatMap(storage.alarm, (current) => {
        if (earliest === null) return current === null ? Effect.void : storage.deleteAlarm
        return Effect.flatMap(
          Clock.currentTimeMillis,
          (now) => keeps(current, earliest, now) ? Effect.void : storage.setAlarm(targetFor(earliest, now))
        )
      })

    // A new record due at `at` can only make the earliest pending time earlier: a known alarm that
    // reconciling with `at` would keep needs no read of the earliest time.
    const covers = (at: number): Effect.Effect<boolean> =>
      Effect.flatMap(storage.alarm, (current) => Effect.map(Clock.currentTimeMillis, (now) => keeps(current, at, now)))

    return AlarmService.of({
      reconcile,
      covers,
      armTimer,
      coverTimer,
      timerAt: Effect.sync(() => timer?.at ?? null),
      wakeup: fires.take,
      delivered: storage.alarmFired,
      // The alarm armed when the pass started may already be past (a handoff later than the minimum
      // delay): the platform would re-run alarm() at once. One still ahead, by now + minDelay, is kept.
      handoff: Effect.flatMap(Clock.currentTimeMillis, (now) => reconcile(now + 1)),
      fallback: Effect.flatMap(Clock.currentTimeMillis, (now) => storage.setAlarm(now + config.alarmMinDelayMs)),
      whileAwake: (effect) =>
        Effect.acquireUseRelease(Effect.sync(() => awake++), () => effect, () => Effect.sync(() => awake--)),
      warm: Effect.gen(function*() {
        const stored = yield* storage.readAlarm
        // A stored alarm already past is one the platform did not deliver (wrangler dev does not fire an
        // alarm set before a reload; workerd#3566): run what is overdue now instead of waiting for a write.
        if (stored !== null && stored <= (yield* Clock.currentTimeMillis)) {
          yield* locked(arm(stored))
        }
      })
    })
  }
)

export const layer: Layer.Layer<AlarmService, never, StorageService | SchedulerConfig> = Layer.scoped(
  AlarmService,
  make
)
