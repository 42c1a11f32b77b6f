/**
 * A schedule's runs through the engine: each slot to the millisecond on the one alarm, the run's
 * info (slot, run number, attempt, a per-slot idempotency key), retries under the policy, a run that
 * fails for good not stopping the schedule, and `limit`/`startAt`/`endAt` ending it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { at, iso, recording, rows, scheduleRow } from "./support.js"

describe("schedule runs", () => {
  it.scoped("an everyMs schedule runs at each slot to the millisecond, counted from the previous slot", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at("2026-12-01T10:00:00.250Z"))
      const object = yield* TestDurability.make()
      const tick = recording()
      const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }))
      const result = yield* object.run(schedules.tick.upsert("a", { everyMs: 1_500 }))
      expect(result).toEqual({ created: true, changed: true, nextRunAt: at("2026-12-01T10:00:01.750Z") })
      yield* TestClock.adjust(1_500 * 4)
      expect(tick.seen.map((s) => [iso(s.scheduledTime), iso(s.ranAt), s.runNumber, s.attempt])).toEqual([
        ["2026-12-01T10:00:01.750Z", "2026-12-01T10:00:01.750Z", 1, 1],
        ["2026-12-01T10:00:03.250Z", "2026-12-01T10:00:03.250Z", 2, 1],
        ["2026-12-01T10:00:04.750Z", "2026-12-01T10:00:04.750Z", 3, 1],
        ["2026-12-01T10:00:06.250Z", "2026-12-01T10:00:06.250Z", 4, 1]
      ])
      expect(new Set(tick.seen.map((s) => s.idempotencyKey)).size).toBe(4)
      const info = yield* object.run(schedules.tick.get("a"))
      expect(info).toMatchObject({ status: "active", runCount: 4, missedCount: 0, nextRunAt: at("2026-12-01T10:00:07.750Z") })
    }))

  it.scoped("a cron schedule in a time zone runs at its wall-clock slots", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at("2026-12-02T12:00:00Z"))
      const object = yield* TestDurability.make()
      const digest = recording()
      const schedules = yield* object.run(Schedules.make({ digest: Schedules.schedule({ handler: digest.handler }) }))
      yield* object.run(schedules.digest.upsert("u1", { cron: "0 9 * * 1-5", timezone: "America/New_York" }))
      yield* TestClock.adjust("7 days")
      expect(digest.slots()).toEqual([
        "2026-12-02T14:00:00.000Z",
        "2026-12-03T14:00:00.000Z",
        "2026-12-04T14:00:00.000Z",
        "2026-12-07T14:00:00.000Z",
        "2026-12-08T14:00:00.000Z"
      ])
      expect(digest.seen.every((s) => s.ranAt === s.scheduledTime)).toBe(true)
      // The next slot is armed on the one physical alarm, so an eviction cannot lose it.
      expect(object.storage.alarmAt).toBe(at("2026-12-09T14:00:00.000Z"))
    }))

  it.scoped("a failing run is retried with its slot's idempotency key; one that fails for good does not stop the schedule", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const flaky = recording((run) => run.runNumber === 1 ? Effect.fail(new Error(`boom ${run.attempt}`)) : Effect.void)
      const schedules = yield* object.run(Schedules.make({
        flaky: Schedules.schedule({ handler: flaky.handler, retries: { maxAttempts: 3, delay: () => 100 } })
      }))
      yield* object.run(schedules.flaky.upsert("k", { everyMs: 10_000 }))
      yield* TestClock.adjust(20_000)
      expect(flaky.seen.map((s) => [s.scheduledTime, s.ranAt, s.runNumber, s.attempt])).toEqual([
        [10_000, 10_000, 1, 1],
        [10_000, 10_100, 1, 2],
        [10_000, 10_200, 1, 3],
        [20_000, 20_000, 2, 1]
      ])
      expect(new Set(flaky.seen.slice(0, 3).map((s) => s.idempotencyKey)).size).toBe(1)
      const info = yield* object.run(schedules.flaky.get("k"))
      expect(info?.lastRun).toMatchObject({ runNumber: 2, outcome: "completed", scheduledTime: 20_000 })
      expect(info).toMatchObject({ runCount: 2, status: "active", nextRunAt: 30_000 })
      expect(yield* scheduleRow(object, "flaky", "k")).toMatchObject({ attempt: 0, status: "pending", run_slot: null })
    }))
})

describe("durable steps in schedule runs", () => {
  it.scoped("a step's result is kept for the run's retries, and the next run starts without it", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const built: Array<string> = []
      const sent: Array<string> = []
      const schedules = yield* object.run(Schedules.make({
        digest: Schedules.schedule({
          retries: { maxAttempts: 3, delay: () => 1_000 },
          handler: (run) =>
            Effect.gen(function*() {
              const body = yield* Schedules.step("build", Effect.sync(() => {
                built.push(`run ${run.runNumber} attempt ${run.attempt}`)
                return `digest #${run.runNumber}`
              }))
              if (run.runNumber === 1 && run.attempt === 1) return yield* Effect.fail(new Error("provider down"))
              yield* Schedules.step("send", Effect.sync(() => sent.push(body)))
            })
        })
      }))
      yield* object.run(schedules.digest.upsert("u", { everyMs: 60_000 }))
      yield* TestClock.adjust(60_000)
      expect(yield* rows(object, "SELECT name, value FROM durability_steps")).toEqual([{ name: "build", value: expect.stringContaining("digest #1") }])
      yield* TestClock.adjust(1_000)
      expect(built).toEqual(["run 1 attempt 1"])
      expect(sent).toEqual(["digest #1"])
      // The run ended: its memos are gone with its generation.
      expect(yield* rows(object, "SELECT * FROM durability_steps")).toEqual([])
      yield* TestClock.adjust(59_000)
      expect(built).toEqual(["run 1 attempt 1", "run 2 attempt 1"])
      expect(sent).toEqual(["digest #1", "digest #2"])
    }))
})
