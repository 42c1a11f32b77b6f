/**
 * Start order: higher priority first, first added first within a priority; `changePriority` and
 * `promote`. The queue runs one job at a time so the order of starts is the order of handler calls.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { gates, jobRow, type TestObject } from "./support.js"

const oneAtATime = (object: TestObject) =>
  Effect.gen(function*() {
    const started: Array<string> = []
    const held = gates()
    const jobs = yield* object.run(Jobs.make({
      work: Jobs.queue({
        concurrency: 1,
        handler: (job: Jobs.JobContext<null>) =>
          Effect.gen(function*() {
            started.push(`${job.id}@${yield* Clock.currentTimeMillis}`)
            if (job.id === "hold") yield* held.wait("hold")
          })
      })
    }))
    return { jobs, started, held }
  })

describe("start order", () => {
  it.scoped("higher priority first, FIFO within a priority, behind a running job", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs, started } = yield* oneAtATime(object)
      yield* object.run(jobs.work.add({ id: "hold", payload: null }))
      yield* TestClock.adjust(0)
      yield* object.run(jobs.work.addBulk(
        ([["a", 0], ["b", 5], ["c", 0], ["d", 5], ["e", -1], ["f", 10]] as const).map(([id, priority]) => ({ id, payload: null, priority }))
      ))
      yield* TestClock.adjust(0)
      expect(started).toEqual(["hold@0"])
      yield* TestClock.adjust(1_000)
      yield* held.open("hold")
      yield* TestClock.adjust(0)
      expect(started).toEqual(["hold@0", "f@1000", "b@1000", "d@1000", "a@1000", "c@1000", "e@1000"])
    }))

  // Each add here arms its own timer pass, which takes only that job: the order holds whenever each came due.
  it.scoped("higher priority first among jobs added one by one while the queue's slot is taken", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs, started } = yield* oneAtATime(object)
      yield* object.run(jobs.work.add({ id: "hold", payload: null }))
      yield* TestClock.adjust(0)
      for (const [id, priority] of [["a", 0], ["b", 5], ["c", 0], ["d", 5], ["e", -1], ["f", 10]] as const) {
        yield* object.run(jobs.work.add({ id, payload: null, priority }))
        yield* TestClock.adjust(0)
      }
      yield* TestClock.adjust(1_000)
      yield* held.open("hold")
      yield* TestClock.adjust(0)
      expect(started).toEqual(["hold@0", "f@1000", "b@1000", "d@1000", "a@1000", "c@1000", "e@1000"])
    }))

  it.scoped("the same order from a paused backlog; changePriority reorders a waiting job", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs, started } = yield* oneAtATime(object)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.addBulk([
        { id: "a", payload: null },
        { id: "b", payload: null, priority: 1 },
        { id: "c", payload: null },
        { id: "d", payload: null, priority: 1 }
      ]))
      expect(yield* object.run(jobs.work.changePriority("c", 7))).toBe(true)
      expect(yield* object.run(jobs.work.changePriority("missing", 7))).toBe(false)
      expect((yield* jobRow(object, "work", "c"))?.priority).toBe(7)
      expect((yield* object.run(jobs.work.get("c")))?.priority).toBe(7)
      expect(yield* Effect.flip(object.run(jobs.work.changePriority("a", 1.5)))).toMatchObject({
        _tag: "InvalidInputError",
        field: "priority"
      })
      yield* TestClock.adjust(0)
      expect(started).toEqual([])
      yield* object.run(jobs.work.resume)
      yield* TestClock.adjust(0)
      expect(started).toEqual(["c@0", "b@0", "d@0", "a@0"])
      // A finished job's priority is history.
      expect(yield* object.run(jobs.work.changePriority("a", 3))).toBe(false)
    }))

  // A pass already took them and they wait for the queue's slot: they start at their new places.
  it.scoped("changePriority reorders jobs already waiting behind a running one", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs, started } = yield* oneAtATime(object)
      yield* object.run(jobs.work.add({ id: "hold", payload: null }))
      yield* TestClock.adjust(0)
      for (const id of ["a", "b", "c"]) {
        yield* object.run(jobs.work.add({ id, payload: null }))
        yield* TestClock.adjust(0)
      }
      expect(yield* object.run(jobs.work.changePriority("c", 3))).toBe(true)
      expect(yield* object.run(jobs.work.changePriority("a", -3))).toBe(true)
      yield* held.open("hold")
      yield* TestClock.adjust(0)
      expect(started).toEqual(["hold@0", "c@0", "b@0", "a@0"])
    }))

  it.scoped("promote makes a delayed job due now: it runs at once, its run time moved", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs, started } = yield* oneAtATime(object)
      yield* object.run(jobs.work.add({ id: "later", payload: null, delayMs: 3_600_000 }))
      expect(object.storage.alarmAt).toBe(3_600_000)
      yield* TestClock.adjust(250)
      expect(yield* object.run(jobs.work.promote("later"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(started).toEqual(["later@250"])
      expect(yield* jobRow(object, "work", "later")).toMatchObject({ status: "completed", run_at: 250, next_attempt_at: 250 })
      // Only a delayed job is promoted.
      expect(yield* object.run(jobs.work.promote("later"))).toBe(false)
      yield* object.run(jobs.work.add({ id: "now", payload: null }))
      expect(yield* object.run(jobs.work.promote("missing"))).toBe(false)
      yield* TestClock.adjust(0)
      expect(started).toEqual(["later@250", "now@250"])
    }))
})
