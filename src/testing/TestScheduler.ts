/**
 * The whole engine on in-memory backends, driven by `TestClock`.
 *
 * `layer(storage, options)` builds StorageService, AlarmService, PermitSemaphore
 * and Scheduler over a `MemoryStorage`, with an `InspectionRegistry` (so the
 * `Inspector` sees the capabilities made on it). Build it in a scope you own to simulate
 * eviction: close the scope (running handlers are interrupted, timers vanish),
 * keep the `MemoryStorage`, build the layer again.
 * @packageDocumentation
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import type * as Background from "../engine/Background.js"
import type { InvalidOptionError } from "../shared/Errors.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as StorageService from "../engine/StorageService.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import type { MemoryStorage } from "./MemoryStorage.js"

/** The services a test scheduler provides: the scheduler's and an inspection registry. */
export type Services = Scheduler.Services | InspectionRegistry.InspectionRegistry

/**
 * A scheduler over a `MemoryStorage` and a `Background` (e.g. `TestBackground`), with its inspection
 * registry, for Effect tests.
 */
export const layer = (
  storage: MemoryStorage,
  background: Layer.Layer<Background.Background>,
  options: Scheduler.SchedulerOptions = {}
): Layer.Layer<Services, InvalidOptionError> =>
  Layer.merge(Scheduler.layerWith(StorageService.layer(storage), background, options), InspectionRegistry.layer)

/**
 * Does what the platform does when the physical alarm is due: moves the clock to
 * the alarm time if it is still ahead, clears the alarm, runs the alarm pass.
 * Returns false when no alarm was set. A pass that fails with its fallback
 * unarmed fails here, as `alarm()` would throw to the platform.
 *
 * Moving the clock from a forked fiber races the test fiber's own
 * `TestClock.adjust`; when you fork this (to watch a long pass), set the clock
 * to the alarm time first.
 */
export const fireAlarm = (
  storage: MemoryStorage,
  info: AlarmInvocationInfo = { isRetry: false, retryCount: 0 }
): Effect.Effect<boolean, unknown, Scheduler.Scheduler> =>
  Effect.gen(function*() {
    const at = storage.alarmAt
    if (at === null) return false
    const now = yield* Clock.currentTimeMillis
    if (at > now) yield* TestClock.setTime(at)
    storage.takeAlarm()
    const scheduler = yield* Scheduler.Scheduler
    yield* scheduler.alarm(info)
    return true
  })
