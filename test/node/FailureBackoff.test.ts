/**
 * An execution that fails for infrastructure reasons (its claim or settle
 * statement throws) must not re-arm the early timer for the row it just failed
 * on: the row is still due, so the timer would fire at once, fail again, and
 * spin (a hot loop of statements and reports, never yielding under TestClock).
 * The retry belongs to the physical alarm, after the minimum delay.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Operations from "../../src/operations/Operations.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../src/testing/TestDurability.js"
import { withFaults } from "./support/faults.js"

describe("infrastructure failures of an execution", () => {
  it.scoped("a claim that keeps failing does not spin the early timer; the alarm retries it once storage recovers", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStorage.make
      const faults: { sql?: ((query: string) => boolean) | undefined } = {}
      const object = yield* TestDurability.make({ alarms: "manual", storage: withFaults(inner, faults) })
      let calls = 0
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({ handler: () => Effect.sync(() => ++calls) })
      }))
      // A spinning timer would never yield under TestClock: past 100 failed claims the fault stops,
      // so a regression ends as a failed assertion instead of a hang.
      let failedClaims = 0
      faults.sql = (query) => query.includes("SET attempt = attempt + 1") && ++failedClaims <= 100
      yield* object.run(ops.register("send", { id: "x", payload: null }))
      const statements = inner.statements.length
      yield* TestClock.adjust(0)
      yield* TestClock.adjust(10_000)
      // The eager start failed once (the registration arms no timer for a record it started); then
      // nothing ran it again before the registration's alarm.
      expect(failedClaims).toBe(1)
      expect(inner.statements.length - statements).toBeLessThan(20)
      expect(calls).toBe(0)
      expect(inner.alarmAt).toBe(15_000)
      expect((yield* object.background.reports).map((report) => report.event)).toEqual([
        "durability.background_execution.failed"
      ])
      // The platform alarm while storage still fails: the pass fails and arms its fallback.
      expect(yield* object.fireAlarm()).toBe(true)
      expect(inner.alarmAt).toBe(30_000)
      faults.sql = undefined
      expect(yield* object.fireAlarm()).toBe(true)
      expect(calls).toBe(1)
      expect(yield* object.run(ops.getResult("send", "x"))).toEqual({ status: "completed", result: 1 })
      expect(inner.alarmAt).toBeNull()
    }))
})
