/**
 * Daylight-saving transitions through the engine, on the test clock: a wall-clock slot that does
 * not exist (clocks go forward) is skipped, one that occurs twice (clocks go back) runs once, and
 * the slots after the transition are back at their wall-clock time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { at, recording } from "./support.js"

const runsBetween = (cron: string, timezone: string, from: string, to: string) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(at(from))
    const object = yield* TestDurability.make()
    const tick = recording()
    const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }))
    yield* object.run(schedules.tick.upsert("k", { cron, timezone }))
    yield* TestClock.setTime(at(to))
    expect(tick.seen.every((s) => s.ranAt === s.scheduledTime)).toBe(true)
    return tick.slots()
  })

describe("daylight saving", () => {
  it.scoped("Europe/Lisbon, clocks forward (2026-03-29 01:00 → 02:00): 01:30 does not exist that day and is skipped", () =>
    Effect.gen(function*() {
      expect(yield* runsBetween("30 1 * * *", "Europe/Lisbon", "2026-03-27T12:00:00Z", "2026-03-31T12:00:00Z")).toEqual([
        "2026-03-28T01:30:00.000Z", // 01:30 WET
        "2026-03-30T00:30:00.000Z", // 01:30 WEST
        "2026-03-31T00:30:00.000Z"
      ])
    }))

  it.scoped("Europe/Lisbon, clocks back (2026-10-25 02:00 → 01:00): 01:30 occurs twice and runs once", () =>
    Effect.gen(function*() {
      expect(yield* runsBetween("30 1 * * *", "Europe/Lisbon", "2026-10-23T12:00:00Z", "2026-10-27T12:00:00Z")).toEqual([
        "2026-10-24T00:30:00.000Z", // 01:30 WEST
        "2026-10-25T00:30:00.000Z", // the first 01:30 (WEST); the second, 01:30 WET, does not run
        "2026-10-26T01:30:00.000Z", // 01:30 WET
        "2026-10-27T01:30:00.000Z"
      ])
    }))

  it.scoped("Europe/Lisbon, an hourly cron across clocks back: each wall-clock hour runs once", () =>
    Effect.gen(function*() {
      expect(yield* runsBetween("0 * * * *", "Europe/Lisbon", "2026-10-24T22:30:00Z", "2026-10-25T03:30:00Z")).toEqual([
        "2026-10-24T23:00:00.000Z", // 00:00 WEST
        "2026-10-25T00:00:00.000Z", // 01:00 WEST; 01:00 WET (01:00Z) is the same wall-clock hour
        "2026-10-25T02:00:00.000Z", // 02:00 WET
        "2026-10-25T03:00:00.000Z"
      ])
    }))

  it.scoped("America/New_York, clocks forward (2026-03-08 02:00 → 03:00): 02:30 does not exist that day and is skipped", () =>
    Effect.gen(function*() {
      expect(yield* runsBetween("30 2 * * *", "America/New_York", "2026-03-06T12:00:00Z", "2026-03-10T12:00:00Z")).toEqual([
        "2026-03-07T07:30:00.000Z", // 02:30 EST
        "2026-03-09T06:30:00.000Z", // 02:30 EDT
        "2026-03-10T06:30:00.000Z"
      ])
    }))

  it.scoped("America/New_York, clocks back (2026-11-01 02:00 → 01:00): 01:30 occurs twice and runs once", () =>
    Effect.gen(function*() {
      expect(yield* runsBetween("30 1 * * *", "America/New_York", "2026-10-30T12:00:00Z", "2026-11-03T12:00:00Z")).toEqual([
        "2026-10-31T05:30:00.000Z", // 01:30 EDT
        "2026-11-01T05:30:00.000Z", // the first 01:30 (EDT) only
        "2026-11-02T06:30:00.000Z", // 01:30 EST
        "2026-11-03T06:30:00.000Z"
      ])
    }))

  it.scoped("America/New_York, every 30 minutes across clocks back: the repeated hour's slots run once", () =>
    Effect.gen(function*() {
      expect(yield* runsBetween("*/30 * * * *", "America/New_York", "2026-11-01T04:50:00Z", "2026-11-01T07:40:00Z")).toEqual([
        "2026-11-01T05:00:00.000Z", // 01:00 EDT
        "2026-11-01T05:30:00.000Z", // 01:30 EDT
        "2026-11-01T07:00:00.000Z", // 02:00 EST (01:00 and 01:30 EST are repeats)
        "2026-11-01T07:30:00.000Z"
      ])
    }))
})
