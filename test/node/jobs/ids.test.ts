/**
 * Job ids: generated when absent; the same id again is a no-op that returns the existing job,
 * whatever its state, until it is removed (then the id can be used again).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { expectTypeOf } from "vitest"
import { NonRetryableError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { count, dump, gates, jobRow, recorder, stored } from "./support.js"

describe("job ids", () => {
  it.scoped("a job without an id gets a generated one, distinct per add", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({ work: Jobs.queue({ handler: (job) => Effect.succeed(job.payload) }) }))
      // Without a payload schema or annotation, the payload is unknown (not never): any JSON can be added.
      expectTypeOf<Parameters<typeof jobs.work.add>[0]["payload"]>().toEqualTypeOf<unknown>()
      const first = yield* object.run(jobs.work.add({ payload: 1 }))
      const second = yield* object.run(jobs.work.add({ payload: 1 }))
      expect(first.id).toMatch(/^[0-9a-f-]{36}$/)
      expect(second.id).not.toBe(first.id)
      expect(first).toMatchObject({ state: "waiting", deduplicated: false })
      yield* TestClock.adjust(0)
      expect(yield* jobRow(object, "work", first.id)).toMatchObject({ id: first.id, status: "completed" })
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs")).toBe(2)
    }))

  it.scoped("the same id again returns the existing job in every state, changing nothing", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const held = gates()
      const events = recorder()
      const calls: Array<string> = []
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          handler: (job: Jobs.JobContext<string>) =>
            Effect.gen(function*() {
              calls.push(job.id)
              if (job.id === "active") yield* held.wait("active")
              if (job.id === "failed") return yield* new NonRetryableError({ message: "no" })
            })
        }),
        parent: Jobs.queue({ handler: () => Effect.void })
      }, { onLifecycleEvent: events.hook }))
      yield* object.run(jobs.work.addBulk([
        { id: "completed", payload: "first" },
        { id: "failed", payload: "first" },
        { id: "active", payload: "first" },
        { id: "delayed", payload: "first", delayMs: 60_000 },
        { id: "canceled", payload: "first", delayMs: 60_000 }
      ]))
      yield* object.run(jobs.work.cancel("canceled"))
      yield* object.run(jobs.flow({ queue: "parent", id: "waiting-children", payload: null, children: [{ queue: "work", id: "child", payload: "c", delayMs: 60_000 }] }))
      yield* TestClock.adjust(0)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.add({ id: "waiting", payload: "first" }))
      yield* TestClock.adjust(0)
      const before = yield* dump(object)
      events.events.length = 0

      for (const state of ["completed", "failed", "active", "delayed", "canceled", "waiting"] as const) {
        expect(yield* object.run(jobs.work.add({ id: state, payload: "second", delayMs: 5, priority: 9 })), state)
          .toEqual({ id: state, state, deduplicated: true })
      }
      expect(yield* object.run(jobs.parent.add({ id: "waiting-children", payload: null })))
        .toEqual({ id: "waiting-children", state: "waiting-children", deduplicated: true })
      expect(yield* object.run(jobs.work.addBulk([{ id: "delayed", payload: "third" }])))
        .toEqual([{ id: "delayed", state: "delayed", deduplicated: true }])
      yield* TestClock.adjust(0)
      expect(yield* dump(object)).toEqual(before)
      expect(calls.sort()).toEqual(["active", "completed", "failed"])
      expect(events.of("deduplicated").map((event) => [event.id, event.existingId, event.replaced])).toEqual([
        ["completed", "completed", false],
        ["failed", "failed", false],
        ["active", "active", false],
        ["delayed", "delayed", false],
        ["canceled", "canceled", false],
        ["waiting", "waiting", false],
        ["waiting-children", "waiting-children", false],
        ["delayed", "delayed", false]
      ])
      expect(events.of("added")).toEqual([])
    }))

  it.scoped("two jobs with one id in one addBulk: the second is the first", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<string> = []
      const jobs = yield* object.run(Jobs.make({ work: Jobs.queue({ handler: (job: Jobs.JobContext<string>) => Effect.sync(() => seen.push(job.payload)) }) }))
      const results = yield* object.run(jobs.work.addBulk([{ id: "x", payload: "one" }, { id: "x", payload: "two" }]))
      expect(results).toEqual([
        { id: "x", state: "waiting", deduplicated: false },
        { id: "x", state: "waiting", deduplicated: true }
      ])
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["one"])
    }))

  it.scoped("once removed, the id can be added again: a new job that runs again", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<string> = []
      const jobs = yield* object.run(Jobs.make({ work: Jobs.queue({ handler: (job: Jobs.JobContext<string>) => Effect.sync(() => seen.push(job.payload)) }) }))
      yield* object.run(jobs.work.add({ id: "x", payload: "one" }))
      yield* TestClock.adjust(0)
      const first = yield* jobRow(object, "work", "x")
      expect(yield* object.run(jobs.work.add({ id: "x", payload: "two" }))).toMatchObject({ deduplicated: true, state: "completed" })
      expect(yield* object.run(jobs.work.remove("x"))).toBe(true)
      expect(yield* jobRow(object, "work", "x")).toBeUndefined()
      expect(yield* object.run(jobs.work.get("x"))).toBeUndefined()
      expect(yield* object.run(jobs.work.add({ id: "x", payload: "three" }))).toEqual({ id: "x", state: "waiting", deduplicated: false })
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["one", "three"])
      const second = yield* jobRow(object, "work", "x")
      expect(second).toMatchObject({ status: "completed", payload: stored("three"), attempt: 1 })
      expect(second?.generation_id).not.toBe(first?.generation_id)
    }))
})
