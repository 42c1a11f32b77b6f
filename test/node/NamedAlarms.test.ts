import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as NamedAlarms from "../../src/NamedAlarms.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

describe("NamedAlarms smoke", () => {
  it.effect("schedules, fires at the time, deletes the occurrence", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<NamedAlarms.DurableAlarmInfo> = []
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: (info) => Effect.sync(() => seen.push(info)) })
      }))
      yield* object.run(alarms.schedule("renew", 60_000))
      expect(object.storage.alarmAt).toBe(60_000)
      yield* object.fireAlarm()
      expect(seen).toHaveLength(1)
      expect(seen[0]).toMatchObject({ name: "renew", scheduledTime: 60_000, attempt: 1, isRetry: false, retryCount: 0 })
      expect(seen[0]?.idempotencyKey).toMatch(/^durability-alarm:v1:/)
      expect(object.storage.alarmAt).toBeNull()
      yield* TestClock.adjust(0)
    }))
})
