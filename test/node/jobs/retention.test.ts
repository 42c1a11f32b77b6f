/**
 * Retention: `removeOnComplete` / `removeOnFail` by count and age, enforced as jobs finish, with
 * their logs; `clean({ states, olderThanMs, limit })`; `remove(id)` with descendants (never an
 * active job).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { NonRetryableError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { count, gates, jobRow, recorder, rows, type TestObject } from "./support.js"

const completedRows = (object: TestObject) => count(object, "SELECT COUNT(*) FROM durability_jobs WHERE status = 'completed'")

describe("removeOnComplete / removeOnFail", () => {
  it.scoped("count 100: a queue that completes 10 000 jobs holds at most 100 completed rows, and only their logs", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 100 } })
      let ran = 0
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          removeOnComplete: { count: 100 },
          // Every tenth job logs: enough lines to see them go with their jobs, few enough to stay fast.
          handler: (job: Jobs.JobContext<number>) =>
            Effect.zipRight(job.payload % 10 === 0 ? job.log(`line of ${job.payload}`) : Effect.void, Effect.sync(() => void ran++))
        })
      }))
      let most = 0
      for (let chunk = 0; chunk < 10; chunk++) {
        yield* object.run(jobs.work.addBulk(Array.from({ length: 1_000 }, (_, i) => ({ id: `j${chunk * 1_000 + i}`, payload: chunk * 1_000 + i }))))
        yield* TestClock.adjust(1)
        most = Math.max(most, yield* completedRows(object))
      }
      yield* TestClock.adjust(1_000)
      expect(ran).toBe(10_000)
      expect(most).toBeLessThanOrEqual(100)
      expect(yield* completedRows(object)).toBe(100)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs")).toBe(100)
      // The newest are kept; every log left belongs to a kept job.
      expect((yield* rows(object, "SELECT MIN(seq) AS first FROM durability_jobs"))[0]?.first).toBe(9_901)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_logs")).toBe(10)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_logs WHERE key NOT IN (SELECT key FROM durability_jobs)")).toBe(0)
    }))

  it.scoped("ageMs: a finishing job removes completed jobs older than ageMs", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const events = recorder()
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({ removeOnComplete: { ageMs: 1_000 }, handler: (job: Jobs.JobContext<null>) => job.log("hi") })
      }, { onLifecycleEvent: events.hook }))
      const users = "SELECT id FROM durability_jobs WHERE queue <> '' ORDER BY seq"
      yield* object.run(jobs.work.add({ id: "old", payload: null }))
      yield* TestClock.adjust(999)
      yield* object.run(jobs.work.add({ id: "edge", payload: null }))
      yield* TestClock.adjust(0)
      // "old" finished 999 ms before this finish: not older than ageMs yet.
      expect((yield* rows(object, users)).map((row) => row.id)).toEqual(["old", "edge"])
      yield* TestClock.adjust(1)
      yield* object.run(jobs.work.add({ id: "new", payload: null }))
      yield* TestClock.adjust(0)
      // "old" finished exactly ageMs before this finish: not more than ageMs ago, kept.
      expect((yield* rows(object, users)).map((row) => row.id)).toEqual(["old", "edge", "new"])
      // One millisecond later it is: the next finish would remove it, and so does the upkeep with none.
      yield* TestClock.adjust(1)
      expect((yield* rows(object, users)).map((row) => row.id)).toEqual(["edge", "new"])
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_logs WHERE key = 'work/old'")).toBe(0)
      expect(events.of("removed")).toMatchObject([{ id: "old", reason: "retention" }])
    }))

  // The retention upkeep (src/jobs/upkeep.ts) wakes the object when the oldest kept job passes its age.
  it.scoped("ageMs is also enforced by upkeep, without another job finishing", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({ work: Jobs.queue({ removeOnComplete: { ageMs: 1_000 }, handler: () => Effect.void }) }))
      yield* object.run(jobs.work.add({ id: "old", payload: null }))
      yield* TestClock.adjust(3_600_000)
      expect(yield* jobRow(object, "work", "old")).toBeUndefined()
    }))

  it.scoped("removeOnFail count 2 keeps the newest two failed jobs; completed jobs are not counted", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          removeOnFail: { count: 2 },
          handler: (job: Jobs.JobContext<boolean>) => job.payload ? Effect.void : Effect.fail(new NonRetryableError({ message: "no" }))
        })
      }))
      for (let i = 0; i < 5; i++) {
        yield* object.run(jobs.work.addBulk([{ id: `f${i}`, payload: false }, { id: `ok${i}`, payload: true }]))
        yield* TestClock.adjust(10)
      }
      expect((yield* rows(object, "SELECT id FROM durability_jobs WHERE status = 'failed' ORDER BY seq")).map((row) => row.id)).toEqual(["f3", "f4"])
      expect(yield* completedRows(object)).toBe(5)
    }))

  it.scoped("removeOnFail holds for parents failed by their children (never through a settle of their own)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        root: Jobs.queue({ removeOnFail: { count: 2 }, handler: () => Effect.void }),
        leaf: Jobs.queue({ handler: () => Effect.fail(new NonRetryableError({ message: "no" })) })
      }))
      for (let i = 0; i < 5; i++) {
        yield* object.run(jobs.flow({ queue: "root", id: `r${i}`, payload: null, children: [{ queue: "leaf", id: `c${i}`, payload: null }] }))
        yield* TestClock.adjust(10)
      }
      expect((yield* rows(object, "SELECT id FROM durability_jobs WHERE queue = 'root' ORDER BY seq")).map((row) => row.id)).toEqual(["r3", "r4"])
      // Failed by a child's removal (no settle at all): the same bound.
      yield* object.run(jobs.flow({ queue: "root", id: "r5", payload: null, children: [{ queue: "leaf", id: "c5", payload: null, delayMs: 60_000 }] }))
      yield* object.run(jobs.leaf.remove("c5"))
      expect((yield* rows(object, "SELECT id FROM durability_jobs WHERE queue = 'root' ORDER BY seq")).map((row) => row.id)).toEqual(["r4", "r5"])
    }))

  it.scoped("a completed child is kept until its parent ran (the parent reads its value)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const held = gates()
      const seen: Array<unknown> = []
      const jobs = yield* object.run(Jobs.make({
        leaf: Jobs.queue({ removeOnComplete: { count: 0 }, handler: (job: Jobs.JobContext<null>) => Effect.succeed(`${job.id} done`) }),
        root: Jobs.queue({
          handler: (job: Jobs.JobContext<null>) =>
            Effect.gen(function*() {
              yield* held.wait(job.id)
              seen.push(yield* job.childrenValues)
            })
        })
      }))
      yield* object.run(jobs.flow({ queue: "root", id: "r", payload: null, children: [{ queue: "leaf", id: "c1", payload: null }, { queue: "leaf", id: "c2", payload: null }] }))
      yield* TestClock.adjust(0)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs WHERE queue = 'leaf'")).toBe(2)
      yield* held.open("r")
      yield* TestClock.adjust(0)
      expect(seen).toEqual([{ c1: { queue: "leaf", state: "completed", result: "c1 done" }, c2: { queue: "leaf", state: "completed", result: "c2 done" } }])
      // Once the parent ran, the next finish of the queue trims them.
      yield* object.run(jobs.leaf.add({ id: "later", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs WHERE queue = 'leaf'")).toBe(0)
    }))
})

describe("clean", () => {
  it.scoped("deletes finished jobs of the states given, finished at least olderThanMs ago, oldest first, up to limit", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const events = recorder()
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          handler: (job: Jobs.JobContext<string>) =>
            Effect.zipRight(job.log("x"), job.payload === "fail" ? Effect.fail(new NonRetryableError({ message: "no" })) : Effect.void)
        })
      }, { onLifecycleEvent: events.hook }))
      for (const [i, payload] of ["ok", "fail", "ok", "ok", "fail"].entries()) {
        yield* object.run(jobs.work.add({ id: `j${i}`, payload }))
        yield* TestClock.adjust(1_000)
      }
      yield* object.run(jobs.work.add({ id: "pending", payload: "ok", delayMs: 60_000 }))
      yield* object.run(jobs.work.add({ id: "canceled", payload: "ok", delayMs: 60_000 }))
      yield* object.run(jobs.work.cancel("canceled"))
      // Now 5 000: j0..j4 finished at 0, 1 000, 2 000, 3 000, 4 000.
      expect(yield* object.run(jobs.work.clean({ states: ["completed"], olderThanMs: 2_500, limit: 1 }))).toBe(1)
      expect(yield* jobRow(object, "work", "j0")).toBeUndefined()
      expect(yield* object.run(jobs.work.clean({ states: ["completed"], olderThanMs: 2_500 }))).toBe(1)
      expect(yield* jobRow(object, "work", "j2")).toBeUndefined()
      expect(yield* jobRow(object, "work", "j3")).toBeDefined()
      expect(yield* object.run(jobs.work.clean({ states: ["failed", "canceled"], olderThanMs: 0 }))).toBe(3)
      expect((yield* rows(object, "SELECT id FROM durability_jobs ORDER BY seq")).map((row) => row.id)).toEqual(["j3", "pending"])
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_logs")).toBe(1)
      expect(events.of("removed").map((event) => `${event.id}:${event.reason}`)).toEqual(["j0:clean", "j2:clean", "j1:clean", "j4:clean", "canceled:clean"])

      for (const [options, field] of [
        [{ states: [], olderThanMs: 0 }, "states"],
        [{ states: ["waiting"], olderThanMs: 0 }, "states"],
        [{ states: ["completed"], olderThanMs: -1 }, "olderThanMs"],
        [{ states: ["completed"], olderThanMs: 0, limit: 0 }, "limit"],
        [{ states: ["completed"], olderThanMs: 0, limit: 10_001 }, "limit"]
      ] as const) {
        expect(yield* Effect.flip(object.run(jobs.work.clean(options as unknown as Jobs.CleanOptions))), field).toMatchObject({
          _tag: "InvalidInputError",
          field
        })
      }
      expect((yield* rows(object, "SELECT id FROM durability_jobs ORDER BY seq")).map((row) => row.id)).toEqual(["j3", "pending"])
    }))
})

describe("remove", () => {
  it.scoped("removes a job with its descendants and their logs; refuses an active job", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const held = gates()
      const events = recorder()
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          handler: (job: Jobs.JobContext<null>) => Effect.zipRight(job.log(`${job.id} ran`), held.wait(job.id))
        })
      }, { onLifecycleEvent: events.hook }))
      yield* object.run(jobs.flow({
        queue: "work",
        id: "p",
        payload: null,
        children: [{ queue: "work", id: "c", payload: null, children: [{ queue: "work", id: "g", payload: null, delayMs: 60_000 }] }]
      }))
      yield* object.run(jobs.work.add({ id: "active", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_logs WHERE key = 'work/active'")).toBe(1)

      expect(yield* object.run(jobs.work.remove("active"))).toBe(false)
      expect((yield* jobRow(object, "work", "active"))?.status).toBe("pending")
      expect(yield* object.run(jobs.work.remove("c"))).toBe(true)
      expect((yield* rows(object, "SELECT id FROM durability_jobs ORDER BY seq")).map((row) => row.id)).toEqual(["p", "active"])
      expect(events.of("removed").map((event) => `${event.id}:${event.reason}`)).toEqual(["c:remove", "g:remove"])
      // Its parent learned the removal as a child's failure: not left waiting.
      expect(yield* object.run(jobs.work.get("p"))).toMatchObject({ state: "failed", error: { name: "ChildJobFailedError" } })
      expect(yield* object.run(jobs.work.remove("p"))).toBe(true)
      expect(yield* object.run(jobs.work.remove("p"))).toBe(false)

      yield* held.open("active")
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs.work.remove("active"))).toBe(true)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs")).toBe(0)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_logs")).toBe(0)
      expect(yield* Effect.flip(object.run(jobs.work.remove("")))).toMatchObject({ _tag: "InvalidInputError", field: "id" })
    }))
})
