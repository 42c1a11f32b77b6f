/**
 * The platform's side of the physical alarm, for the test kit: one fiber that
 * sleeps on the test's `TestClock` until the stored alarm is due and then
 * delivers it (clears it, runs the engine's alarm pass), as workerd does. An
 * `alarm()` that fails is retried by the platform itself with backoff (2 s,
 * 4 s, … at most 6 times), unless the object sets an alarm of its own.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import type { AlarmInvocationInfo } from "../../shared/platform.js"
import type { MemoryStorage } from "../MemoryStorage.js"

/** One `alarm()` the emulated platform made. */
export interface Delivery {
  /** The alarm time it delivered. */
  readonly at: number
  readonly info: AlarmInvocationInfo
  /** Whether `alarm()` failed (the engine could not even arm its fallback alarm). */
  readonly failed: boolean
}

/** workerd's retries of a failed `alarm()`: exponential from 2 s, at most 6. */
export const MAX_PLATFORM_RETRIES = 6
const retryDelayMs = (retryCount: number) => 2_000 * 2 ** (retryCount - 1)

export interface PlatformAlarm<R> {
  /** Stops listening to the storage's alarm (the instance is gone). */
  readonly close: () => void
  /** The delivery loop; fork it in the object's scope. */
  readonly loop: Effect.Effect<never, never, R>
  /**
   * Whether the alarm set for `at` was delivered since delivery number `since` (waiting for a delivery
   * in progress to end); fails as that `alarm()` failed.
   */
  readonly delivered: (at: number, since: number) => Effect.Effect<boolean, unknown>
  /** Every delivery so far, oldest first. */
  readonly deliveries: ReadonlyArray<Delivery>
}

export const make = <R>(
  storage: MemoryStorage,
  alarm: (info: AlarmInvocationInfo) => Effect.Effect<void, unknown, R>
): PlatformAlarm<R> => {
  let changed = Deferred.unsafeMake<void>(FiberId.none)
  // The platform's own retry of a failed alarm(); an alarm the object sets replaces it.
  let retry: { readonly at: number } | undefined
  let retryCount = 0
  const close = storage.watchAlarm(() => {
    retry = undefined
    const previous = changed
    changed = Deferred.unsafeMake<void>(FiberId.none)
    Deferred.unsafeDone(previous, Exit.void)
  })
  const deliveries: Array<Delivery & { readonly exit: Exit.Exit<void, unknown> }> = []
  const inFlight = new Map<number, Deferred.Deferred<void, unknown>>()

  const deliver = (at: number) =>
    Effect.gen(function*() {
      const done = Deferred.unsafeMake<void, unknown>(FiberId.none)
      inFlight.set(at, done)
      const info: AlarmInvocationInfo = { isRetry: retryCount > 0, retryCount }
      storage.takeAlarm()
      retry = undefined
      const exit = yield* Effect.exit(alarm(info))
      deliveries.push({ at, info, failed: Exit.isFailure(exit), exit })
      if (Exit.isSuccess(exit)) {
        retryCount = 0
      } else if (storage.alarmAt === null && retryCount < MAX_PLATFORM_RETRIES) {
        retryCount++
        retry = { at: (yield* Clock.currentTimeMillis) + retryDelayMs(retryCount) }
      } else {
        retryCount = 0
      }
      inFlight.delete(at)
      yield* Deferred.done(done, exit)
    })

  const loop: Effect.Effect<never, never, R> = Effect.forever(Effect.gen(function*() {
    const signal = changed
    const at = storage.alarmAt ?? retry?.at ?? null
    if (at === null) return yield* Deferred.await(signal)
    const now = yield* Clock.currentTimeMillis
    if (at > now) {
      const due = yield* Effect.raceFirst(
        Effect.as(Effect.sleep(Duration.millis(at - now)), true),
        Effect.as(Deferred.await(signal), false)
      )
      if (!due) return
    }
    if ((storage.alarmAt ?? retry?.at) === at) yield* deliver(at)
  }))

  const delivered = (at: number, since: number): Effect.Effect<boolean, unknown> =>
    Effect.suspend(() => {
      const done = inFlight.get(at)
      if (done !== undefined) return Effect.as(Deferred.await(done), true)
      const past = deliveries.slice(since).find((delivery) => delivery.at === at)
      return past === undefined ? Effect.succeed(false) : Effect.as(past.exit, true)
    })

  return { close, loop, delivered, deliveries }
}
