/**
 * A schedule across evictions, on the test clock, with the object's platform alarm: the stored alarm
 * wakes the new instance for the next slot; a run cut by an eviction is retried as attempt 2 of the
 * same slot and the schedule goes on from the slot; a pause outlives an eviction and arms no alarm;
 * the cold-start upsert after a run changes nothing. test/workers/schedules.test.ts runs the first
 * two through workerd's real alarm; every check that needs an exact instant between two slots is here.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { dump, gates, recording, scheduleRow, type TestObject } from "./support.js"

/** The workerd object's setting: a write arms the alarm no sooner than a second after it. */
const scheduler = { alarmMinDelayMs: 1_000 } as const
const EVERY = 60_000

const make = (object: TestObject, tick: ReturnType<typeof recording>) =>
  object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }))

const deliveredAt = (object: TestObject) => Effect.map(object.deliveries, (list) => list.map((delivery) => delivery.at))

describe("a schedule across evictions", () => {
  it.scoped("a recurring run after an eviction: the stored alarm wakes the new instance, which runs the next slot", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const first = yield* TestDurability.make({ scheduler })
      const tick = recording()
      const before = yield* make(first, tick)
      expect(yield* first.run(before.tick.upsert("k", { everyMs: EVERY }))).toMatchObject({ nextRunAt: EVERY })
      yield* TestClock.adjust(EVERY)
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt, s.runNumber, s.attempt])).toEqual([[EVERY, EVERY, 1, 1]])
      expect(yield* deliveredAt(first)).toEqual([EVERY])
      const second = 2 * EVERY

      yield* TestClock.adjust(5_000)
      const next = yield* first.restart
      const after = yield* make(next, tick)
      yield* TestClock.adjust(0)
      // The new instance is up, but nothing ran: its slot is ahead, and the stored alarm, not a call,
      // is what will run it.
      expect(tick.seen).toHaveLength(1)
      expect(yield* scheduleRow(next, "tick", "k")).toMatchObject({ next_attempt_at: second, slot_at: second, run_slot: null })
      expect(next.storage.alarmAt).toBe(second)

      yield* TestClock.setTime(second)
      expect(tick.seen[1]).toMatchObject({ scheduledTime: second, ranAt: second, runNumber: 2, attempt: 1, manual: false })
      expect(tick.seen[1]!.idempotencyKey).not.toBe(tick.seen[0]!.idempotencyKey)
      // The platform delivered the stored alarm to the new instance at the slot, and that ran it.
      expect(yield* deliveredAt(next)).toEqual([second])
      expect(yield* next.run(after.tick.get("k"))).toMatchObject({
        lastRun: { scheduledTime: second, runNumber: 2, outcome: "completed" },
        missedCount: 0,
        // Still on the grid after the eviction.
        nextRunAt: second + EVERY
      })
    }))

  it.scoped("an eviction mid-run: the retry has the same slot and idempotency key (attempt 2), and the schedule goes on from the slot", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const first = yield* TestDurability.make({ scheduler })
      const held = gates()
      const completed: Array<readonly [runNumber: number, attempt: number]> = []
      const tick = recording((run) =>
        Effect.zipRight(
          run.runNumber === 1 && run.attempt === 1 ? held.wait("first") : Effect.void,
          Effect.sync(() => completed.push([run.runNumber, run.attempt]))
        )
      )
      const before = yield* make(first, tick)
      yield* first.run(before.tick.upsert("k", { everyMs: EVERY }))
      yield* TestClock.adjust(EVERY)
      expect(tick.seen.map((s) => [s.scheduledTime, s.runNumber, s.attempt])).toEqual([[EVERY, 1, 1]])
      expect((yield* first.run(before.tick.get("k")))?.currentRun).toMatchObject({ scheduledTime: EVERY, runNumber: 1, attempt: 1 })
      // The pass that started the run re-armed the alarm before running it, for its start plus the
      // minimum delay: that alarm recovers a run cut by an eviction.
      expect(first.storage.alarmAt).toBe(EVERY + scheduler.alarmMinDelayMs)

      yield* TestClock.adjust(500)
      const next = yield* first.restart
      const after = yield* make(next, tick)
      yield* TestClock.adjust(500)
      const [cut, retry] = tick.seen
      expect(retry).toMatchObject({
        scheduledTime: cut!.scheduledTime,
        idempotencyKey: cut!.idempotencyKey,
        ranAt: EVERY + scheduler.alarmMinDelayMs,
        runNumber: 1,
        attempt: 2
      })

      // The schedule goes on from the slot, not from the retry's time.
      yield* TestClock.setTime(2 * EVERY)
      expect(tick.seen.slice(2).map((s) => [s.scheduledTime, s.ranAt, s.runNumber, s.attempt])).toEqual([[2 * EVERY, 2 * EVERY, 2, 1]])
      expect(yield* next.run(after.tick.get("k"))).toMatchObject({ lastRun: { runNumber: 2, outcome: "completed" }, runCount: 2 })
      // Attempt 1 never ended (the eviction cut it); run 1 completed once, in attempt 2.
      expect(completed).toEqual([[1, 2], [2, 1]])
    }))

  it.scoped("a pause survives an eviction: no run and no alarm while paused; resume runs the next slot on the grid", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const first = yield* TestDurability.make({ scheduler })
      const tick = recording()
      const graceMs = 10_000
      const before = yield* make(first, tick)
      yield* first.run(before.tick.upsert("k", { everyMs: EVERY }, { graceMs }))
      yield* TestClock.adjust(EVERY)
      expect(tick.seen).toHaveLength(1)

      yield* TestClock.adjust(1_000)
      expect(yield* first.run(before.tick.pause("k"))).toBe(true)
      // A paused schedule does not wake the object.
      expect(first.storage.alarmAt).toBeNull()
      const next = yield* first.restart
      const after = yield* make(next, tick)
      expect(yield* next.run(after.tick.get("k"))).toMatchObject({ status: "paused", nextRunAt: 2 * EVERY })
      expect(yield* scheduleRow(next, "tick", "k")).toMatchObject({ paused: 1 })

      // Past slot 2 by more than the grace (a live schedule would have run it): nothing ran or woke the object.
      yield* TestClock.setTime(2 * EVERY + graceMs + 1)
      expect(tick.seen).toHaveLength(1)
      expect(next.storage.alarmAt).toBeNull()
      expect(yield* deliveredAt(next)).toEqual([])

      expect(yield* next.run(after.tick.resume("k"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(tick.seen).toHaveLength(1)
      // Slot 2 was missed while paused (past its grace); slot 3 runs at its time, on the same grid.
      yield* TestClock.setTime(3 * EVERY)
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt, s.runNumber, s.attempt])).toEqual([
        [EVERY, EVERY, 1, 1],
        [3 * EVERY, 3 * EVERY, 2, 1]
      ])
      expect(yield* next.run(after.tick.get("k"))).toMatchObject({ status: "active", missedCount: 1 })
    }))

  it.scoped("the same upsert after a run and an eviction changes nothing: same row, same next run, same alarm, no extra run", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const first = yield* TestDurability.make({ scheduler })
      const tick = recording()
      const options = { payload: { tag: "boot" }, catchUp: "latest" } as const
      const before = yield* make(first, tick)
      expect(yield* first.run(before.tick.upsert("boot", { everyMs: EVERY }, options))).toMatchObject({
        created: true,
        changed: true
      })
      yield* TestClock.adjust(EVERY)
      const second = 2 * EVERY
      const info = yield* first.run(before.tick.get("boot"))
      expect(info).toMatchObject({ runCount: 1, nextRunAt: second, payload: { tag: "boot" } })
      const rows = yield* dump(first)
      const alarm = first.storage.alarmAt

      yield* TestClock.adjust(5_000)
      const next = yield* first.restart
      const after = yield* make(next, tick)
      // What an object does in its constructor on every cold start.
      expect(yield* next.run(after.tick.upsert("boot", { everyMs: EVERY }, options))).toEqual({
        created: false,
        changed: false,
        nextRunAt: second
      })
      expect(yield* next.run(after.tick.get("boot"))).toEqual(info)
      expect((yield* next.run(after.tick.list())).items).toEqual([info])
      expect(yield* dump(next)).toEqual(rows)
      expect(next.storage.alarmAt).toBe(alarm)
      expect(tick.seen).toHaveLength(1)

      yield* TestClock.setTime(second)
      // One run per slot, none in between, each with the payload.
      expect(tick.seen.map((s) => [s.scheduledTime, s.runNumber, s.attempt, s.payload])).toEqual([
        [EVERY, 1, 1, { tag: "boot" }],
        [second, 2, 1, { tag: "boot" }]
      ])
    }))
})
