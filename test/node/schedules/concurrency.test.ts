/**
 * The schedules' own limit inside the object's permits: at most `concurrency` runs at once (default
 * 1; one schedule never runs twice at once whatever the limit), so long recurring runs cannot take
 * every permit: other work still starts while they hold theirs.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Operations from "../../../src/operations/Operations.js"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { gates, recording } from "./support.js"

const fiveAtOnce = (concurrency: number | undefined) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(0)
    const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 10 } })
    let running = 0
    let most = 0
    const tick = recording(() =>
      Effect.acquireUseRelease(
        Effect.sync(() => (most = Math.max(most, ++running))),
        () => Effect.sleep("10 seconds"),
        () => Effect.sync(() => running--)
      )
    )
    const schedules = yield* object.run(Schedules.make(
      { tick: Schedules.schedule({ handler: tick.handler }) },
      concurrency === undefined ? {} : { concurrency }
    ))
    for (const key of ["a", "b", "c", "d", "e"]) yield* object.run(schedules.tick.upsert(key, { everyMs: 60_000 }))
    yield* TestClock.adjust(60_000 + 50_000)
    return { most: () => most, tick }
  })

describe("schedule concurrency", () => {
  it.scoped("default 1: schedules due together run one after the other", () =>
    Effect.gen(function*() {
      const { most, tick } = yield* fiveAtOnce(undefined)
      expect(most()).toBe(1)
      expect(tick.seen.map((s) => s.ranAt)).toEqual([60_000, 70_000, 80_000, 90_000, 100_000])
    }))

  it.scoped("concurrency 2: two at a time", () =>
    Effect.gen(function*() {
      const { most, tick } = yield* fiveAtOnce(2)
      expect(most()).toBe(2)
      expect(tick.seen.map((s) => s.ranAt)).toEqual([60_000, 60_000, 70_000, 70_000, 80_000])
    }))

  it.scoped("long recurring runs do not starve other work: an operation starts while they hold their slots", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 2 } })
      const held = gates()
      const tick = recording((run) => held.wait(run.key))
      const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: tick.handler }) }, { concurrency: 1 }))
      const ran: Array<number> = []
      const ops = yield* object.run(Operations.make({
        work: Operations.operation({ handler: () => Effect.flatMap(Effect.clockWith((c) => c.currentTimeMillis), (now) => Effect.sync(() => ran.push(now))) })
      }))
      for (const key of ["a", "b", "c"]) yield* object.run(schedules.tick.upsert(key, { everyMs: 1_000 }))
      yield* TestClock.adjust(5_000)
      expect(tick.seen.map((s) => s.key)).toEqual(["a"])
      yield* object.run(ops.register("work", { id: "op", payload: null }))
      yield* TestClock.adjust(0)
      expect(ran).toEqual([5_000])
      yield* held.open("a")
      yield* held.open("b")
      yield* held.open("c")
      yield* TestClock.adjust(0)
      expect(tick.seen.map((s) => s.key).slice(0, 3)).toEqual(["a", "b", "c"])
    }))
})
