/**
 * The test kit's emulated platform (`TestDurability.make()`, alarms: "platform"): the
 * physical alarm is delivered when `TestClock` reaches it, as workerd delivers it, so a
 * test moves time and nothing else; a failed `alarm()` is retried with the platform's backoff.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Operations from "../../src/operations/Operations.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../src/testing/TestDurability.js"
import { type Faults, withFaults } from "./support/faults.js"

const stamp = (log: Array<string>, what: string) =>
  Effect.map(Clock.currentTimeMillis, (now) => void log.push(`${what}@${now}`))

describe("TestDurability: the platform delivers the physical alarm", () => {
  it.scoped("work due beyond alarmMinDelayMs runs when the clock reaches it: TestClock.adjust alone", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ran: Array<string> = []
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: () => stamp(ran, "renew") })
      }))
      yield* object.run(alarms.schedule("renew", 60_000))
      yield* TestClock.adjust(59_999)
      expect(ran).toEqual([])
      yield* TestClock.adjust(1)
      expect(ran).toEqual(["renew@60000"])
      expect(yield* object.deliveries).toEqual([{ at: 60_000, info: { isRetry: false, retryCount: 0 }, failed: false }])
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("after an eviction the new instance's alarm runs the interrupted work when its time comes", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ran: Array<string> = []
      const definitions = {
        charge: Operations.operation({
          handler: (call: Operations.DurableCall<null>) =>
            Effect.zipRight(stamp(ran, `charge#${call.attempt}`), call.attempt === 1 ? Effect.never : Effect.void)
        })
      }
      const ops = yield* object.run(Operations.make(definitions))
      yield* object.run(ops.register("charge", { id: "inv", payload: null }))
      yield* TestClock.adjust(0)
      expect(object.storage.alarmAt).toBe(15_000)
      const next = yield* object.restart
      const again = yield* next.run(Operations.make(definitions))
      yield* TestClock.adjust(15_000)
      expect(ran).toEqual(["charge#1@0", "charge#2@15000"])
      expect(yield* next.run(again.getResult("charge", "inv"))).toEqual({ status: "completed", result: undefined })
    }))

  it.scoped("fireAlarm() moves the clock to the alarm and waits for its delivery; false when none is set", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ran: Array<string> = []
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: () => stamp(ran, "renew") })
      }))
      yield* object.run(alarms.schedule("renew", 30_000))
      expect(yield* object.fireAlarm()).toBe(true)
      expect(ran).toEqual(["renew@30000"])
      expect(yield* Clock.currentTimeMillis).toBe(30_000)
      expect(yield* object.fireAlarm()).toBe(false)
    }))

  it.scoped("an alarm() that fails (its fallback alarm could not be armed) is retried by the platform: 2 s, then 4 s", () =>
    Effect.gen(function*() {
      const faults: Faults = {}
      const storage = withFaults(yield* MemoryStorage.make, faults)
      const object = yield* TestDurability.make({ storage })
      const ran: Array<string> = []
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: () => stamp(ran, "renew") })
      }))
      yield* object.run(alarms.schedule("renew", 60_000))
      // Storage breaks: the pass cannot scan or claim, and cannot arm its own fallback alarm.
      faults.sql = (query) => query.includes("durability_alarms")
      faults.setAlarm = true
      yield* TestClock.adjust(62_000)
      faults.sql = undefined
      faults.setAlarm = undefined
      yield* TestClock.adjust(4_000)
      expect(ran).toEqual(["renew@66000"])
      expect((yield* object.deliveries).map(({ at, failed, info }) => [at, info.retryCount, failed])).toEqual([
        [60_000, 0, true],
        [62_000, 1, true],
        [66_000, 2, false]
      ])
    }))
})
