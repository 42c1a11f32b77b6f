/**
 * Slots missed while the object was evicted (the alarm came hours late) or the schedule was paused:
 * `catchUp: "skip"` runs none and continues at the next future slot, `"latest"` runs the most recent
 * once, `"all"` runs each in order, at most `MAX_CATCH_UP_RUNS` (the most recent ones). A slot that
 * starts within `graceMs` of its time is on time, not missed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { at, iso, recording, type TestObject } from "./support.js"

const HOURLY = { cron: "0 * * * *", timezone: "UTC" } as const

const open = (object: TestObject, tick: ReturnType<typeof recording>, options: Schedules.UpsertOptions = {}, timing: Schedules.TimingInput = HOURLY) =>
  Effect.gen(function*() {
    const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }))
    // What a cold start does: the same upsert again.
    yield* object.run(schedules.tick.upsert("k", timing, options))
    return schedules
  })

/** Runs the schedule, evicts the object at `evictAt`, and starts it again at `backAt` (the alarm is that late). */
const evictedUntil = (options: Schedules.UpsertOptions, evictAt: string, backAt: string, timing: Schedules.TimingInput = HOURLY) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(at("2026-12-02T10:30:00Z"))
    const first = yield* TestDurability.make()
    const tick = recording()
    yield* open(first, tick, options, timing)
    yield* TestClock.setTime(at(evictAt))
    yield* first.evict
    yield* TestClock.setTime(at(backAt))
    const second = yield* TestDurability.make({ storage: first.storage })
    const schedules = yield* open(second, tick, options, timing)
    yield* TestClock.adjust(0)
    return { tick, schedules, object: second }
  })

describe("catch-up after an eviction", () => {
  it.scoped("skip (default): none of the missed slots runs; the schedule continues at the next future slot", () =>
    Effect.gen(function*() {
      const { schedules, object, tick } = yield* evictedUntil({}, "2026-12-02T11:30:00Z", "2026-12-02T15:20:00Z")
      expect(tick.slots()).toEqual(["2026-12-02T11:00:00.000Z"])
      const info = yield* object.run(schedules.tick.get("k"))
      expect(info).toMatchObject({ missedCount: 4, nextRunAt: at("2026-12-02T16:00:00Z"), runCount: 1 })
      yield* TestClock.setTime(at("2026-12-02T16:00:00Z"))
      expect(tick.slots()).toEqual(["2026-12-02T11:00:00.000Z", "2026-12-02T16:00:00.000Z"])
      expect(tick.seen.map((s) => s.runNumber)).toEqual([1, 2])
    }))

  it.scoped("latest: the most recent missed slot runs once, as soon as the object is back", () =>
    Effect.gen(function*() {
      const { schedules, object, tick } = yield* evictedUntil({ catchUp: "latest" }, "2026-12-02T11:30:00Z", "2026-12-02T15:20:00Z")
      expect(tick.seen.map((s) => [iso(s.scheduledTime), iso(s.ranAt)])).toEqual([
        ["2026-12-02T11:00:00.000Z", "2026-12-02T11:00:00.000Z"],
        ["2026-12-02T15:00:00.000Z", "2026-12-02T15:20:00.000Z"]
      ])
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ missedCount: 3, nextRunAt: at("2026-12-02T16:00:00Z") })
    }))

  it.scoped("all: every missed slot runs, in order, one after the other, then the schedule is back on its slots", () =>
    Effect.gen(function*() {
      const { schedules, object, tick } = yield* evictedUntil({ catchUp: "all" }, "2026-12-02T11:30:00Z", "2026-12-02T15:20:00Z")
      expect(tick.slots()).toEqual([
        "2026-12-02T11:00:00.000Z",
        "2026-12-02T12:00:00.000Z",
        "2026-12-02T13:00:00.000Z",
        "2026-12-02T14:00:00.000Z",
        "2026-12-02T15:00:00.000Z"
      ])
      expect(tick.seen.map((s) => s.runNumber)).toEqual([1, 2, 3, 4, 5])
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ missedCount: 0, runCount: 5, nextRunAt: at("2026-12-02T16:00:00Z") })
      yield* TestClock.setTime(at("2026-12-02T16:00:00Z"))
      expect(tick.slots().at(-1)).toBe("2026-12-02T16:00:00.000Z")
    }))

  it.scoped(`all is capped: after an hour away, an every-second schedule runs its ${Schedules.MAX_CATCH_UP_RUNS} most recent slots`, () =>
    Effect.gen(function*() {
      const { schedules, object, tick } = yield* evictedUntil(
        { catchUp: "all" },
        "2026-12-02T10:30:00.500Z",
        "2026-12-02T11:30:00.500Z",
        { everyMs: 1_000 }
      )
      expect(tick.seen).toHaveLength(Schedules.MAX_CATCH_UP_RUNS)
      expect(tick.seen[0]!.scheduledTime).toBe(at("2026-12-02T11:30:00Z") - (Schedules.MAX_CATCH_UP_RUNS - 1) * 1_000)
      expect(tick.seen.at(-1)!.scheduledTime).toBe(at("2026-12-02T11:30:00Z"))
      expect(tick.seen.every((s, i) => i === 0 || s.scheduledTime - tick.seen[i - 1]!.scheduledTime === 1_000)).toBe(true)
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({
        missedCount: 3_600 - Schedules.MAX_CATCH_UP_RUNS,
        nextRunAt: at("2026-12-02T11:30:01Z")
      })
    }))

  it.scoped("a slot that starts within graceMs is on time and runs under skip; one later than that is missed", () =>
    Effect.gen(function*() {
      const late = yield* evictedUntil({ graceMs: 120_000 }, "2026-12-02T11:30:00Z", "2026-12-02T12:01:30Z")
      expect(late.tick.slots()).toEqual(["2026-12-02T11:00:00.000Z", "2026-12-02T12:00:00.000Z"])
      const missed = yield* evictedUntil({}, "2026-12-02T11:30:00Z", "2026-12-02T12:01:30Z")
      expect(missed.tick.slots()).toEqual(["2026-12-02T11:00:00.000Z"])
      expect(yield* missed.object.run(missed.schedules.tick.get("k"))).toMatchObject({ missedCount: 1 })
    }))
})

describe("catch-up after a pause", () => {
  const pausedFor = (options: Schedules.UpsertOptions) =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at("2026-12-02T10:30:00Z"))
      const object = yield* TestDurability.make()
      const tick = recording()
      const schedules = yield* open(object, tick, options)
      yield* TestClock.setTime(at("2026-12-02T11:30:00Z"))
      expect(yield* object.run(schedules.tick.pause("k"))).toBe(true)
      expect(yield* object.run(schedules.tick.pause("k"))).toBe(false)
      yield* TestClock.setTime(at("2026-12-02T14:10:00Z"))
      expect(tick.slots()).toEqual(["2026-12-02T11:00:00.000Z"])
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ status: "paused", nextRunAt: at("2026-12-02T12:00:00Z") })
      expect(yield* object.run(schedules.tick.resume("k"))).toBe(true)
      yield* TestClock.adjust(0)
      return { tick, schedules, object }
    })

  it.scoped("skip: the slots missed while paused do not run", () =>
    Effect.gen(function*() {
      const { object, schedules, tick } = yield* pausedFor({})
      expect(tick.slots()).toEqual(["2026-12-02T11:00:00.000Z"])
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ status: "active", missedCount: 3, nextRunAt: at("2026-12-02T15:00:00Z") })
    }))

  it.scoped("latest: the most recent slot missed while paused runs once on resume", () =>
    Effect.gen(function*() {
      const { tick } = yield* pausedFor({ catchUp: "latest" })
      expect(tick.slots()).toEqual(["2026-12-02T11:00:00.000Z", "2026-12-02T14:00:00.000Z"])
    }))

  it.scoped("all: each slot missed while paused runs on resume, in order", () =>
    Effect.gen(function*() {
      const { tick } = yield* pausedFor({ catchUp: "all" })
      expect(tick.slots()).toEqual([
        "2026-12-02T11:00:00.000Z",
        "2026-12-02T12:00:00.000Z",
        "2026-12-02T13:00:00.000Z",
        "2026-12-02T14:00:00.000Z"
      ])
    }))
})
