/**
 * Dead letters: with `deadLetter: true`, a job that fails for good is also listed under
 * `deadLetters` (queue, id, payload, attempts, error, failedAt); `redrive` puts it back to waiting
 * with fresh attempts and takes it off the list.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { count, jobRow, recorder, rows, type TestObject } from "./support.js"

const setup = (object: TestObject) =>
  Effect.gen(function*() {
    const broken = new Set<string>()
    const runs: Array<string> = []
    const events = recorder()
    const handler = (job: Jobs.JobContext<{ readonly to: string }>) =>
      Effect.suspend(() => {
        runs.push(`${job.id}#${job.attempt}`)
        return broken.has(job.id) ? Effect.fail(new Error(`${job.payload.to} bounced`)) : Effect.succeed("sent")
      })
    const jobs = yield* object.run(Jobs.make({
      email: Jobs.queue({ deadLetter: true, retries: { maxAttempts: 2, delay: () => 100 }, handler }),
      plain: Jobs.queue({ retries: { maxAttempts: 1 }, handler })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, broken, runs, events }
  })

describe("dead letters", () => {
  it.scoped("a job failing for good is listed with its queue, id, payload, attempts, error and failedAt", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, events, jobs } = yield* setup(object)
      broken.add("a").add("b").add("c")
      yield* object.run(jobs.email.add({ id: "a", payload: { to: "x@y" } }))
      yield* object.run(jobs.plain.add({ id: "b", payload: { to: "p@q" } }))
      yield* object.run(jobs.email.add({ id: "c", payload: { to: "c@d" }, delayMs: 60_000 }))
      yield* object.run(jobs.email.cancel("c"))
      yield* TestClock.adjust(100)
      expect(yield* object.run(jobs.email.deadLetters.list())).toEqual({
        items: [{ queue: "email", id: "a", payload: { to: "x@y" }, attempts: 2, error: { name: "Error", message: "x@y bounced" }, failedAt: 100 }]
      })
      expect(yield* rows(object, "SELECT queue, id, attempts, error_name, error_message, failed_at FROM durability_job_dead_letters")).toEqual([
        { queue: "email", id: "a", attempts: 2, error_name: "Error", error_message: "x@y bounced", failed_at: 100 }
      ])
      // A queue without deadLetter lists nothing; a canceled job is not a dead letter.
      expect((yield* object.run(jobs.plain.deadLetters.list())).items).toEqual([])
      expect((yield* jobRow(object, "plain", "b"))?.status).toBe("failed")
      expect(events.of("dead_lettered")).toMatchObject([{ queue: "email", id: "a", error: { name: "Error", message: "x@y bounced" }, timestamp: 100 }])
    }))

  it.scoped("pages by cursor in failure order, without skips or repeats", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs } = yield* setup(object)
      const ids = ["d", "b", "f", "a", "e", "c", "g"]
      for (const [i, id] of ids.entries()) {
        broken.add(id)
        yield* object.run(jobs.email.add({ id, payload: { to: id } }))
        // Two failures per millisecond: ties are ordered by id.
        if (i % 2 === 1) yield* TestClock.adjust(1)
      }
      yield* TestClock.adjust(1_000)
      const seen: Array<string> = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = yield* object.run(jobs.email.deadLetters.list({ limit: 3, ...(cursor === undefined ? {} : { cursor }) }))
        seen.push(...page.items.map((item) => `${item.id}@${item.failedAt}`))
        cursor = page.cursor
        pages++
      } while (cursor !== undefined)
      expect(seen).toEqual(["b@100", "d@100", "a@101", "f@101", "c@102", "e@102", "g@103"])
      expect(pages).toBe(3)
      expect(yield* Effect.flip(object.run(jobs.email.deadLetters.list({ cursor: "x" })))).toMatchObject({ _tag: "InvalidInputError", field: "cursor" })
    }))

  it.scoped("redrive({ ids }) puts a dead letter back to waiting with fresh attempts and off the list; it then completes", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs, runs } = yield* setup(object)
      broken.add("a").add("b")
      yield* object.run(jobs.email.addBulk([{ id: "a", payload: { to: "a" } }, { id: "b", payload: { to: "b" } }]))
      yield* TestClock.adjust(100)
      const generation = (yield* jobRow(object, "email", "a"))?.generation_id
      broken.delete("a")
      expect(yield* object.run(jobs.email.deadLetters.redrive({ ids: ["a", "missing"] }))).toBe(1)
      expect(yield* jobRow(object, "email", "a")).toMatchObject({ status: "pending", attempt: 0, last_error: null, finished_at: null })
      expect((yield* jobRow(object, "email", "a"))?.generation_id).not.toBe(generation)
      expect((yield* object.run(jobs.email.deadLetters.list())).items.map((item) => item.id)).toEqual(["b"])
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs.email.get("a"))).toMatchObject({ state: "completed", result: "sent", attempt: 1 })
      expect(runs).toEqual(["a#1", "b#1", "a#2", "b#2", "a#1"])
    }))

  it.scoped("redrive() takes every dead letter of the queue, even one whose job was removed since", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs, runs } = yield* setup(object)
      broken.add("a").add("b").add("c")
      yield* object.run(jobs.email.addBulk(["a", "b", "c"].map((id) => ({ id, payload: { to: id } }))))
      yield* TestClock.adjust(100)
      yield* object.run(jobs.email.remove("b"))
      expect(yield* jobRow(object, "email", "b")).toBeUndefined()
      broken.clear()
      runs.length = 0
      expect(yield* object.run(jobs.email.deadLetters.redrive())).toBe(3)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_dead_letters")).toBe(0)
      yield* TestClock.adjust(0)
      expect(runs.sort()).toEqual(["a#1", "b#1", "c#1"])
      expect(yield* object.run(jobs.email.get("b"))).toMatchObject({ state: "completed", payload: { to: "b" } })
      expect(yield* object.run(jobs.email.deadLetters.redrive())).toBe(0)
      expect(yield* Effect.flip(object.run(jobs.email.deadLetters.redrive({ ids: [""] })))).toMatchObject({ field: "ids[0]" })
    }))

  it.scoped("retry(id) of a dead-lettered job takes it off the list too", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs } = yield* setup(object)
      broken.add("a")
      yield* object.run(jobs.email.add({ id: "a", payload: { to: "a" } }))
      yield* TestClock.adjust(100)
      expect((yield* object.run(jobs.email.deadLetters.list())).items).toHaveLength(1)
      expect(yield* object.run(jobs.email.retry("a"))).toBe(true)
      expect((yield* object.run(jobs.email.deadLetters.list())).items).toEqual([])
    }))
})
