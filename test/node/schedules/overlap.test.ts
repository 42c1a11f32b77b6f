/**
 * Slots that come due while a run is active: `overlap: "wait"` (default) starts the next slot once
 * the run settled; `"skip"` drops them and goes on at the first slot after the run. Either way one
 * schedule never runs twice at once. `trigger` adds one run now without moving the slots.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { gates, recording } from "./support.js"

/** A 10 s schedule whose first run is held open for 25 s (slots 20 s and 30 s come due meanwhile). */
const longFirstRun = (options: Schedules.UpsertOptions) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(0)
    const object = yield* TestDurability.make()
    const tick = recording((run) => run.runNumber === 1 ? Effect.sleep("25 seconds") : Effect.void)
    const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }))
    yield* object.run(schedules.tick.upsert("k", { everyMs: 10_000 }, options))
    return { object, schedules, tick }
  })

describe("overlap", () => {
  it.scoped("wait (default): the slots that came due during a long run run after it, the latest once (catchUp skip)", () =>
    Effect.gen(function*() {
      const { object, schedules, tick } = yield* longFirstRun({})
      yield* TestClock.adjust(34_000)
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt])).toEqual([[10_000, 10_000]])
      yield* TestClock.adjust(1_000)
      // The first run ended at 35 s; 20 s and 30 s came due while it ran: the latest runs at once.
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt])).toEqual([[10_000, 10_000], [30_000, 35_000]])
      yield* TestClock.adjust(5_000)
      expect(tick.seen.map((s) => s.scheduledTime)).toEqual([10_000, 30_000, 40_000])
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ missedCount: 1 })
    }))

  it.scoped("wait with catchUp all: every slot that came due during the run runs after it, in order", () =>
    Effect.gen(function*() {
      const { tick } = yield* longFirstRun({ catchUp: "all" })
      yield* TestClock.adjust(40_000)
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt])).toEqual([[10_000, 10_000], [20_000, 35_000], [30_000, 35_000], [40_000, 40_000]])
    }))

  it.scoped("wait: one slot that came due during a held run starts once, right after it, for its own slot and not missed", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const held = gates()
      let running = 0
      let most = 0
      const ended: Array<number> = []
      const tick = recording((run) =>
        Effect.acquireUseRelease(
          Effect.sync(() => (most = Math.max(most, ++running))),
          () => run.runNumber === 1 ? held.wait("first") : Effect.void,
          () => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => (running--, ended.push(now))))
        )
      )
      const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }))
      yield* object.run(schedules.tick.upsert("k", { everyMs: 10_000 }))
      yield* TestClock.adjust(10_000)
      // Slot 2 (20 s) comes due while run 1 is still open: it does not start beside it.
      yield* TestClock.adjust(15_000)
      expect(tick.seen.map((s) => [s.scheduledTime, s.runNumber])).toEqual([[10_000, 1]])
      yield* held.open("first")
      yield* TestClock.adjust(0)
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt, s.runNumber, s.attempt])).toEqual([
        [10_000, 10_000, 1, 1],
        [20_000, 25_000, 2, 1]
      ])
      expect(tick.seen[1]!.ranAt).toBeGreaterThanOrEqual(ended[0]!)
      expect(most).toBe(1)
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ runCount: 2, missedCount: 0, nextRunAt: 30_000 })
      yield* TestClock.adjust(5_000)
      expect(tick.seen.map((s) => s.scheduledTime)).toEqual([10_000, 20_000, 30_000])
    }))

  it.scoped("skip: the slots that came due during the run are dropped; the next is the first after it", () =>
    Effect.gen(function*() {
      const { object, schedules, tick } = yield* longFirstRun({ overlap: "skip" })
      yield* TestClock.adjust(40_000)
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt])).toEqual([[10_000, 10_000], [40_000, 40_000]])
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ missedCount: 2, runCount: 2 })
    }))
})

describe("trigger", () => {
  it.scoped("one run now; the slots go on as before; repeated requests before it starts are one run", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const tick = recording()
      const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }))
      yield* object.run(schedules.tick.upsert("k", { everyMs: 60_000 }))
      yield* TestClock.adjust(5_000)
      expect(yield* object.run(schedules.tick.trigger("k"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt, s.manual, s.runNumber])).toEqual([[5_000, 5_000, true, 1]])
      expect(tick.seen[0]!.idempotencyKey).toBe("durability-schedule:v1:tick/k@manual:1970-01-01T00:00:05.000Z")
      // The manual run left the next slot where it was.
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({
        nextRunAt: 60_000,
        lastRun: { manual: true, runNumber: 1, outcome: "completed" }
      })
      yield* TestClock.adjust(55_000)
      expect(tick.seen.map((s) => [s.scheduledTime, s.manual])).toEqual([[5_000, true], [60_000, false]])
      yield* TestClock.adjust(60_000)
      // The slots go on, their run numbers counting the manual run, each with its own key.
      expect(tick.seen.map((s) => [s.scheduledTime, s.ranAt, s.runNumber, s.manual])).toEqual([
        [5_000, 5_000, 1, true],
        [60_000, 60_000, 2, false],
        [120_000, 120_000, 3, false]
      ])
      expect(new Set(tick.seen.map((s) => s.idempotencyKey)).size).toBe(3)
      expect(yield* object.run(schedules.tick.trigger("missing"))).toBe(false)
    }))

  it.scoped("a trigger while a run is active runs once after it; a paused or ended schedule can be triggered", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const held = gates()
      const tick = recording((run) => run.runNumber === 1 ? held.wait("first") : Effect.void)
      const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }))
      yield* object.run(schedules.tick.upsert("k", { everyMs: 60_000 }, { limit: 1 }))
      yield* TestClock.adjust(60_000)
      yield* object.run(schedules.tick.trigger("k"))
      yield* object.run(schedules.tick.trigger("k"))
      yield* TestClock.adjust(1_000)
      expect(tick.seen.map((s) => s.runNumber)).toEqual([1])
      yield* held.open("first")
      yield* TestClock.adjust(0)
      expect(tick.seen.map((s) => [s.runNumber, s.manual, s.ranAt])).toEqual([[1, false, 60_000], [2, true, 61_000]])
      // The limit of one scheduled run is reached: the schedule ended, but a trigger still runs it once.
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ status: "ended", nextRunAt: null, runCount: 2 })
      yield* object.run(schedules.tick.trigger("k"))
      yield* TestClock.adjust(0)
      expect(tick.seen.map((s) => s.manual)).toEqual([false, true, true])
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ status: "ended", runCount: 3 })
      yield* object.run(schedules.tick.upsert("p", { everyMs: 60_000 }))
      yield* object.run(schedules.tick.pause("p"))
      yield* object.run(schedules.tick.trigger("p"))
      yield* TestClock.adjust(0)
      expect(tick.seen.filter((s) => s.key === "p").map((s) => s.manual)).toEqual([true])
      yield* TestClock.adjust(120_000)
      expect(tick.seen.filter((s) => s.key === "p")).toHaveLength(1)
    }))
})
