/**
 * `upsert` is idempotent: the same spec on every cold start changes nothing (no write, no duplicate
 * run, no reset of the next run); a changed timing recomputes the next run from now; a changed
 * payload or option keeps the cursor. Bad input is a typed error naming the field and writes nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, TestClock } from "effect"
import { InvalidInputError } from "../../../src/shared/Errors.js"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { at, dump, recording, type TestObject } from "./support.js"

const make = (object: TestObject, tick: ReturnType<typeof recording>) =>
  object.run(Schedules.make({
    tick: Schedules.schedule({ handler: tick.handler }),
    typed: Schedules.schedule({ handler: tick.handler, payload: Schema.Struct({ userId: Schema.String, since: Schema.Date }) })
  }))

describe("upsert", () => {
  it.scoped("the same spec on every cold start changes nothing: no write, no extra run, the next run kept", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at("2026-12-02T08:00:00Z"))
      let object = yield* TestDurability.make()
      const tick = recording()
      const daily = { cron: "0 9 * * *", timezone: "Europe/Lisbon" } as const
      const first = yield* object.run((yield* make(object, tick)).tick.upsert("u1", daily, { payload: { n: 1 } }))
      expect(first).toEqual({ created: true, changed: true, nextRunAt: at("2026-12-02T09:00:00Z") })
      const before = yield* dump(object)
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust("10 minutes")
        object = yield* object.restart
        const again = yield* object.run((yield* make(object, tick)).tick.upsert("u1", daily, { payload: { n: 1 } }))
        expect(again).toEqual({ created: false, changed: false, nextRunAt: at("2026-12-02T09:00:00Z") })
        expect(yield* dump(object)).toEqual(before)
      }
      yield* TestClock.setTime(at("2026-12-03T09:00:00Z"))
      expect(tick.slots()).toEqual(["2026-12-02T09:00:00.000Z", "2026-12-03T09:00:00.000Z"])
    }))

  it.scoped("a changed timing recomputes the next run from now; a changed payload or option keeps it", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const tick = recording()
      const schedules = yield* make(object, tick)
      yield* object.run(schedules.tick.upsert("k", { everyMs: 60_000 }, { payload: "a" }))
      yield* TestClock.adjust(30_000)
      const payloadOnly = yield* object.run(schedules.tick.upsert("k", { everyMs: 60_000 }, { payload: "b", catchUp: "all" }))
      expect(payloadOnly).toEqual({ created: false, changed: true, nextRunAt: 60_000 })
      const retimed = yield* object.run(schedules.tick.upsert("k", { everyMs: 45_000 }, { payload: "b" }))
      expect(retimed).toEqual({ created: false, changed: true, nextRunAt: 75_000 })
      yield* TestClock.adjust(90_000)
      expect(tick.seen.map((s) => [s.scheduledTime, s.payload])).toEqual([[75_000, "b"], [120_000, "b"]])
      const info = yield* object.run(schedules.tick.get("k"))
      expect(info).toMatchObject({ timing: { everyMs: 45_000 }, description: "every 45000ms", payload: "b", catchUp: "skip" })
    }))

  for (const manualBetween of [false, true]) {
    it.scoped(`re-timed in the millisecond of a slot that just ran, the slot does not run again${manualBetween ? " (a manual run settled between)" : ""}`, () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(1_000)
        const object = yield* TestDurability.make()
        const tick = recording()
        const schedules = yield* make(object, tick)
        yield* object.run(schedules.tick.upsert("k", { cron: "0 * * * *" }))
        yield* TestClock.setTime(at("1970-01-01T01:00:00Z"))
        if (manualBetween) {
          yield* object.run(schedules.tick.trigger("k"))
          yield* TestClock.adjust(0)
        }
        // The new timing has 01:00 too: the next run is the first slot after the one that ran.
        const retimed = yield* object.run(schedules.tick.upsert("k", { cron: "0,30 * * * *" }))
        expect(retimed.nextRunAt).toBe(at("1970-01-01T01:30:00Z"))
        yield* TestClock.adjust("30 minutes")
        expect(tick.seen.filter((s) => !s.manual).map((s) => s.scheduledTime)).toEqual([at("1970-01-01T01:00:00Z"), at("1970-01-01T01:30:00Z")])
      }))
  }

  it.scoped("startAt, endAt and limit bound the slots; the schedule then ends", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const tick = recording()
      const schedules = yield* make(object, tick)
      yield* object.run(schedules.tick.upsert("bounded", { everyMs: 10_000 }, { startAt: 25_000, endAt: 60_000 }))
      yield* object.run(schedules.tick.upsert("limited", { everyMs: 10_000 }, { limit: 2 }))
      yield* TestClock.adjust(100_000)
      expect(tick.seen.filter((s) => s.key === "bounded").map((s) => s.scheduledTime)).toEqual([25_000, 35_000, 45_000, 55_000])
      expect(tick.seen.filter((s) => s.key === "limited").map((s) => s.scheduledTime)).toEqual([10_000, 20_000])
      for (const key of ["bounded", "limited"]) {
        expect(yield* object.run(schedules.tick.get(key))).toMatchObject({ status: "ended", nextRunAt: null })
      }
      // A raised limit revives an ended schedule from now.
      const revived = yield* object.run(schedules.tick.upsert("limited", { everyMs: 10_000 }, { limit: 3 }))
      expect(revived).toMatchObject({ changed: true, nextRunAt: 100_000 })
    }))

  it.scoped("a payload Schema: checked at upsert, decoded for each run", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const tick = recording()
      const schedules = yield* make(object, tick)
      yield* object.run(schedules.typed.upsert("u", { everyMs: 1_000 }, { payload: { userId: "u", since: new Date(5) } }))
      yield* TestClock.adjust(1_000)
      expect(tick.seen[0]!.payload).toEqual({ userId: "u", since: new Date(5) })
      const error = yield* Effect.flip(object.run(schedules.typed.upsert("v", { everyMs: 1_000 }, { payload: { userId: 1 } as never })))
      expect(error).toBeInstanceOf(InvalidInputError)
      expect(error.message).toMatch(/^options\.payload\.userId: Expected string, actual 1/)
    }))

  it.scoped("bad input is a typed error naming the field, and writes nothing", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const schedules = yield* make(object, recording())
      yield* object.run(schedules.tick.upsert("k", { everyMs: 1_000 }))
      const before = yield* dump(object)
      const cases: Array<[Effect.Effect<unknown, InvalidInputError | unknown>, string, string]> = [
        [schedules.tick.upsert("", { everyMs: 1_000 }), "key", "key must be a non-empty string"],
        [schedules.tick.upsert("k", { cron: "61 * * * *" }), "timing.cron", "61"],
        [schedules.tick.upsert("k", { cron: "0 9 * * *", timezone: "Mars/Olympus" }), "timing.timezone", "Mars/Olympus"],
        [schedules.tick.upsert("k", { everyMs: 10 }), "timing.everyMs", "1000"],
        [schedules.tick.upsert("k", { everyMs: 1_000 }, { catchUp: "some" as never }), "options.catchUp", "\"skip\", \"latest\", \"all\""],
        [schedules.tick.upsert("k", { everyMs: 1_000 }, { overlap: "queue" as never }), "options.overlap", "\"wait\", \"skip\""],
        [schedules.tick.upsert("k", { everyMs: 1_000 }, { limit: 0 }), "options.limit", "positive integer"],
        [schedules.tick.upsert("k", { everyMs: 1_000 }, { startAt: 10, endAt: 5 }), "options.endAt", "before options.startAt"],
        [schedules.tick.upsert("k", { everyMs: 1_000 }, { every: 1 } as never), "options.every", "not a schedule option"],
        [schedules.tick.upsert("k", { everyMs: 1_000 }, { payload: { at: new Date(0) } }), "options.payload", "JSON"],
        [schedules.tick.pause(1 as never), "key", "key must be"],
        [(schedules as unknown as Record<string, Schedules.ScheduleHandle<unknown>>).tick!.get("x".repeat(5_000)), "key", "at most"]
      ]
      for (const [call, field, text] of cases) {
        const error = yield* Effect.flip(object.run(call))
        expect(error).toBeInstanceOf(InvalidInputError)
        expect((error as InvalidInputError).field).toBe(field)
        expect((error as InvalidInputError).message).toContain(text)
      }
      expect(yield* dump(object)).toEqual(before)
    }))
})
