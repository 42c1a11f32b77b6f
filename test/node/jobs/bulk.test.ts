/**
 * Bulk operations by filter (`jobs.bulk(action, filter, options)`): each action changes every job
 * matching (queue or all queues, states, id prefix, age) as the call on its id does, one bounded chunk
 * per call in one transaction, with a cursor that goes on without skipping or repeating; jobs added
 * during a run are left alone; a bad filter is refused by field with storage unchanged.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { count, dump, gates, jobRow, recorder, rows, type TestObject } from "./support.js"

type Behaviour = "ok" | "fail" | "hold"

const setup = (object: TestObject) =>
  Effect.gen(function*() {
    const held = gates()
    const events = recorder()
    const runs: Array<string> = []
    const aborted: Array<string> = []
    const handler = (job: Jobs.JobContext<Behaviour>) =>
      Effect.gen(function*() {
        runs.push(`${job.queue}/${job.id}#${job.attempt}`)
        if (job.payload === "fail") return yield* Effect.fail(new Error(`${job.id} failed`))
        if (job.payload === "hold") {
          return yield* Effect.onInterrupt(held.wait(job.id), () =>
            Effect.sync(() => aborted.push(`${job.id}: ${String((job.signal.reason as Error | undefined)?.message)}`)))
        }
        return "done"
      })
    const jobs = yield* object.run(Jobs.make({
      work: Jobs.queue({ deadLetter: true, retries: { maxAttempts: 1 }, handler }),
      other: Jobs.queue({ retries: { maxAttempts: 1 }, handler })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, held, events, runs, aborted }
  })

/** Counts the object's transactions from now on. */
const countTransactions = (object: TestObject) => {
  const storage = object.storage as unknown as { transactionSync: <T>(closure: () => T) => T }
  const original = storage.transactionSync.bind(storage)
  const counter = { n: 0 }
  storage.transactionSync = (closure) => {
    counter.n++
    return original(closure)
  }
  return counter
}

describe("bulk operations by filter", () => {
  it.scoped("cancel: waiting and delayed jobs matching the prefix are canceled; a running one is aborted and ends canceled", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { aborted, events, jobs, runs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "a-running", payload: "hold" }))
      yield* TestClock.adjust(1)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.add({ id: "a-waiting", payload: "ok" }))
      yield* object.run(jobs.work.add({ id: "a-delayed", payload: "ok", delayMs: 60_000 }))
      yield* object.run(jobs.work.add({ id: "b-delayed", payload: "ok", delayMs: 30_000 }))
      yield* object.run(jobs.other.add({ id: "a-other", payload: "ok", delayMs: 20_000 }))
      expect(object.storage.alarmAt).toBe(20_001)

      const result = yield* object.run(jobs.bulk("cancel", { queue: "work", idPrefix: "a-" }, { reason: "cleanup" }))
      expect(result).toEqual({ matched: 3, affected: 3, examined: 4, done: true })
      expect(yield* rows(object, "SELECT id, status, cancel_reason FROM durability_jobs WHERE queue = 'work' ORDER BY seq")).toEqual([
        { id: "a-running", status: "pending", cancel_reason: "cleanup" },
        { id: "a-waiting", status: "canceled", cancel_reason: "cleanup" },
        { id: "a-delayed", status: "canceled", cancel_reason: "cleanup" },
        { id: "b-delayed", status: "pending", cancel_reason: null }
      ])
      // The running handler's signal was aborted, as `cancel` on its id does; it ends canceled, not failed.
      yield* TestClock.adjust(1)
      expect(aborted).toEqual([`a-running: Job "a-running" of queue "work" was canceled: cleanup`])
      expect((yield* jobRow(object, "work", "a-running"))?.status).toBe("canceled")
      expect(events.of("canceled").map((event) => event.id).sort()).toEqual(["a-delayed", "a-running", "a-waiting"])
      // The other queue's job is not in the filter; the alarm still covers it.
      expect((yield* jobRow(object, "other", "a-other"))?.status).toBe("pending")
      expect(object.storage.alarmAt).toBe(20_001)
      expect(runs).toEqual(["work/a-running#1"])
    }))

  it.scoped("cancel of a whole queue reconciles the alarm: no pending job left, no alarm", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "x", payload: "ok", delayMs: 20_000 }))
      yield* object.run(jobs.work.add({ id: "y", payload: "ok", delayMs: 30_000 }))
      expect(object.storage.alarmAt).toBe(20_000)
      expect(yield* object.run(jobs.bulk("cancel", { queue: "work" }))).toMatchObject({ affected: 2, done: true })
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("cancel of a flow parent cancels its children that never started, as cancel on its id does", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.flow({
        queue: "work",
        id: "parent",
        payload: "ok",
        children: [{ queue: "other", id: "child", payload: "ok", delayMs: 60_000 }]
      }))
      const result = yield* object.run(jobs.bulk("cancel", { queue: "work", states: ["waiting-children"] }))
      expect(result).toMatchObject({ matched: 1, affected: 1, done: true })
      expect((yield* jobRow(object, "work", "parent"))?.status).toBe("canceled")
      expect((yield* jobRow(object, "other", "child"))?.status).toBe("canceled")
    }))

  it.scoped("remove: finished jobs older than the age are deleted; a child removed fails its parent", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "old-done", payload: "ok" }))
      yield* object.run(jobs.work.add({ id: "old-failed", payload: "fail" }))
      yield* TestClock.adjust(60_000)
      yield* object.run(jobs.work.add({ id: "new-done", payload: "ok" }))
      yield* TestClock.adjust(1)
      const result = yield* object.run(jobs.bulk("remove", { queue: "work", states: ["completed", "failed"], olderThanMs: "1 minute" }))
      expect(result).toEqual({ matched: 2, affected: 2, examined: 3, done: true })
      expect((yield* rows(object, "SELECT id FROM durability_jobs ORDER BY seq")).map((row) => row.id)).toEqual(["new-done"])
      expect(events.of("removed").map((event) => [event.id, event.reason])).toEqual([["old-done", "remove"], ["old-failed", "remove"]])

      yield* object.run(jobs.flow({ queue: "work", id: "p", payload: "ok", children: [{ queue: "other", id: "c", payload: "ok", delayMs: 60_000 }] }))
      expect(yield* object.run(jobs.bulk("remove", { queue: "other", states: ["delayed"] }))).toMatchObject({ affected: 1, done: true })
      expect(yield* jobRow(object, "other", "c")).toBeUndefined()
      // The parent learns its child's end as a failure (so it is never left waiting), as `remove` on its id does.
      expect(yield* jobRow(object, "work", "p")).toMatchObject({ status: "failed", last_error_name: "ChildJobFailedError" })
    }))

  it.scoped("remove leaves a running job alone (cancel it first)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "running", payload: "hold" }))
      yield* TestClock.adjust(1)
      expect(yield* object.run(jobs.bulk("remove", { queue: "work" }))).toEqual({ matched: 0, affected: 0, examined: 1, done: true })
      expect((yield* jobRow(object, "work", "running"))?.status).toBe("pending")
      yield* held.open("running")
      yield* TestClock.adjust(1)
      expect((yield* jobRow(object, "work", "running"))?.status).toBe("completed")
    }))

  it.scoped("retry: failed and canceled jobs run again with fresh attempts; their dead letters go", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs, runs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "f1", payload: "fail" }))
      yield* object.run(jobs.work.add({ id: "f2", payload: "fail" }))
      yield* object.run(jobs.work.add({ id: "ok", payload: "ok" }))
      yield* TestClock.adjust(1)
      yield* object.run(jobs.work.add({ id: "c1", payload: "ok", delayMs: 60_000 }))
      yield* object.run(jobs.work.cancel("c1"))
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_dead_letters")).toBe(2)
      const generation = (yield* jobRow(object, "work", "f1"))?.generation_id
      const result = yield* object.run(jobs.bulk("retry", { queue: "work" }))
      expect(result).toEqual({ matched: 3, affected: 3, examined: 3, done: true })
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_dead_letters")).toBe(0)
      expect((yield* jobRow(object, "work", "f1"))?.generation_id).not.toBe(generation)
      yield* TestClock.adjust(1)
      expect(runs.filter((run) => run !== "work/ok#1").sort()).toEqual(["work/c1#1", "work/f1#1", "work/f1#1", "work/f2#1", "work/f2#1"])
      expect((yield* jobRow(object, "work", "c1"))?.status).toBe("completed")
    }))

  it.scoped("promote: delayed jobs matching the filter are due now and run; others keep their time", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs, runs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "soon-1", payload: "ok", delayMs: 60_000 }))
      yield* object.run(jobs.other.add({ id: "soon-2", payload: "ok", delayMs: 60_000 }))
      yield* object.run(jobs.work.add({ id: "late", payload: "ok", delayMs: 90_000 }))
      const result = yield* object.run(jobs.bulk("promote", { allQueues: true, idPrefix: "soon-" }))
      expect(result).toEqual({ matched: 2, affected: 2, examined: 3, done: true })
      yield* TestClock.adjust(1)
      expect(runs.sort()).toEqual(["other/soon-2#1", "work/soon-1#1"])
      expect((yield* jobRow(object, "work", "late"))?.next_attempt_at).toBe(90_000)
      // The alarm still covers the job left delayed.
      expect(object.storage.alarmAt).not.toBeNull()
      expect(object.storage.alarmAt!).toBeLessThanOrEqual(90_000)
    }))

  it.scoped("redrive: dead letters matching the prefix and age go back to waiting and run", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs, runs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "mail-1", payload: "fail" }))
      yield* object.run(jobs.work.add({ id: "sms-1", payload: "fail" }))
      yield* TestClock.adjust(10_000)
      yield* object.run(jobs.work.add({ id: "mail-2", payload: "fail" }))
      yield* TestClock.adjust(1)
      // mail-2 failed 1 ms ago: younger than the age asked.
      const result = yield* object.run(jobs.bulk("redrive", { queue: "work", idPrefix: "mail-", olderThanMs: 5_000 }))
      expect(result).toEqual({ matched: 1, affected: 1, examined: 3, done: true })
      expect((yield* object.run(jobs.work.deadLetters.list())).items.map((letter) => letter.id)).toEqual(["sms-1", "mail-2"])
      yield* TestClock.adjust(1)
      expect(runs.filter((run) => run.startsWith("work/mail-1"))).toEqual(["work/mail-1#1", "work/mail-1#1"])
    }))

  it.scoped("a filter matching more than one chunk completes over several calls, one transaction each, without skipping or repeating", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, jobs } = yield* setup(object)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.addBulk(Array.from({ length: 250 }, (_, i) => ({ id: `job-${i}`, payload: "ok" as const }))))
      yield* object.run(jobs.work.addBulk(Array.from({ length: 30 }, (_, i) => ({ id: `keep-${i}`, payload: "ok" as const }))))
      const transactions = countTransactions(object)
      const chunks: Array<Jobs.BulkResult> = []
      let cursor: string | undefined
      do {
        const result: Jobs.BulkResult = yield* object.run(jobs.bulk("cancel", { queue: "work", idPrefix: "job-" }, cursor === undefined ? { limit: 100 } : { limit: 100, cursor }))
        chunks.push(result)
        cursor = result.cursor
      } while (cursor !== undefined)
      expect(chunks.map((chunk) => [chunk.matched, chunk.affected, chunk.done])).toEqual([[100, 100, false], [100, 100, false], [50, 50, true]])
      expect(transactions.n).toBe(3)
      const canceled = events.of("canceled").map((event) => event.id)
      expect(canceled.length).toBe(250)
      expect(new Set(canceled).size).toBe(250)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs WHERE status = 'canceled'")).toBe(250)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs WHERE status = 'pending' AND id LIKE 'keep-%'")).toBe(30)
    }))

  it.scoped("a call reads at most MAX_BULK_EXAMINED rows: a rare match answers a short chunk and a cursor", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.addBulk(Array.from({ length: 1_200 }, (_, i) => ({ id: `plain-${i}`, payload: "ok" as const }))))
      yield* object.run(jobs.work.add({ id: "rare", payload: "ok" }))
      const first = yield* object.run(jobs.bulk("cancel", { queue: "work", idPrefix: "rare" }))
      expect(first).toMatchObject({ matched: 0, affected: 0, examined: Jobs.MAX_BULK_EXAMINED, done: false })
      const second = yield* object.run(jobs.bulk("cancel", { queue: "work", idPrefix: "rare" }, { cursor: first.cursor }))
      expect(second).toEqual({ matched: 1, affected: 1, examined: 201, done: true })
      expect((yield* jobRow(object, "work", "rare"))?.status).toBe("canceled")
    }))

  it.scoped("jobs added during a run are left alone: a run covers the jobs that existed when it began", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.addBulk(Array.from({ length: 5 }, (_, i) => ({ id: `before-${i}`, payload: "ok" as const }))))
      const first = yield* object.run(jobs.bulk("cancel", { queue: "work" }, { limit: 2 }))
      expect(first).toMatchObject({ affected: 2, done: false })
      yield* object.run(jobs.work.addBulk(Array.from({ length: 3 }, (_, i) => ({ id: `during-${i}`, payload: "ok" as const }))))
      let cursor = first.cursor
      while (cursor !== undefined) cursor = (yield* object.run(jobs.bulk("cancel", { queue: "work" }, { limit: 2, cursor }))).cursor
      expect(yield* rows(object, "SELECT id, status FROM durability_jobs WHERE status = 'pending' ORDER BY seq")).toEqual([
        { id: "during-0", status: "pending" },
        { id: "during-1", status: "pending" },
        { id: "during-2", status: "pending" }
      ])
      // A new run takes them.
      expect(yield* object.run(jobs.bulk("cancel", { queue: "work" }))).toMatchObject({ affected: 3, done: true })
    }))

  it.scoped("createdBefore and allQueues: only jobs created strictly before the time, in every queue", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "w0", payload: "ok", delayMs: 60_000 }))
      yield* object.run(jobs.other.add({ id: "o0", payload: "ok", delayMs: 60_000 }))
      yield* TestClock.adjust(1_000)
      yield* object.run(jobs.work.add({ id: "w1", payload: "ok", delayMs: 60_000 }))
      const result = yield* object.run(jobs.bulk("cancel", { allQueues: true, createdBefore: new Date(1_000) }))
      expect(result).toMatchObject({ matched: 2, affected: 2, done: true })
      expect(yield* rows(object, "SELECT id, status FROM durability_jobs ORDER BY seq")).toEqual([
        { id: "w0", status: "canceled" },
        { id: "o0", status: "canceled" },
        { id: "w1", status: "pending" }
      ])
    }))

  it.scoped("a bad action, filter or option is refused with an InvalidInputError naming the field; storage is unchanged", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "a", payload: "ok", delayMs: 60_000 }))
      yield* object.run(jobs.work.add({ id: "b", payload: "fail" }))
      yield* TestClock.adjust(1)
      yield* object.run(jobs.other.pause)
      yield* object.run(jobs.other.addBulk([{ id: "o1", payload: "ok" }, { id: "o2", payload: "ok" }]))
      const otherRun = (yield* object.run(jobs.bulk("cancel", { queue: "other" }, { limit: 1 }))).cursor
      expect(otherRun).toBeDefined()
      const before = yield* dump(object)
      const refused = (action: unknown, filter: unknown, options?: unknown) =>
        Effect.flip(object.run(jobs.bulk(action as Jobs.BulkAction, filter as Jobs.JobFilter, options as Jobs.BulkOptions)))
      const cases: ReadonlyArray<readonly [string, unknown, unknown, unknown?]> = [
        ["action", "delete", { queue: "work" }],
        ["filter", "cancel", null],
        ["filter.queue", "cancel", {}],
        ["filter.queue", "cancel", { queue: "work", allQueues: true }],
        ["filter.queue", "cancel", { queue: "nope" }],
        ["filter.allQueues", "cancel", { allQueues: false }],
        ["filter.state", "cancel", { queue: "work", state: "waiting" }],
        ["filter.states", "cancel", { queue: "work", states: [] }],
        ["filter.states", "cancel", { queue: "work", states: ["sleeping"] }],
        ["filter.states", "retry", { queue: "work", states: ["waiting"] }],
        ["filter.states", "remove", { queue: "work", states: ["active"] }],
        ["filter.states", "redrive", { queue: "work", states: ["failed"] }],
        ["filter.idPrefix", "cancel", { queue: "work", idPrefix: "" }],
        ["filter.createdBefore", "cancel", { queue: "work", createdBefore: -1 }],
        ["filter.createdBefore", "redrive", { queue: "work", createdBefore: 5 }],
        ["filter.olderThanMs", "cancel", { queue: "work", olderThanMs: -5 }],
        ["options", "cancel", { queue: "work" }, 5],
        ["options.limit", "cancel", { queue: "work" }, { limit: 0 }],
        ["options.limit", "cancel", { queue: "work" }, { limit: 501 }],
        ["options.cursor", "cancel", { queue: "work" }, { cursor: "not a cursor" }],
        ["options.cursor", "cancel", { queue: "work" }, { cursor: JSON.stringify(["j", 99, 0, 10]) }],
        ["options.cursor", "redrive", { queue: "work" }, { cursor: JSON.stringify(["j", 0, 0, 10]) }],
        // A cursor of another run (another queue or action) would walk other jobs: refused.
        ["options.cursor", "cancel", { queue: "work" }, { cursor: otherRun }],
        ["options.cursor", "remove", { queue: "other" }, { cursor: otherRun }],
        ["options.reason", "cancel", { queue: "work" }, { reason: 5 }],
        ["options.resume", "cancel", { queue: "work" }, { resume: true }]
      ]
      for (const [field, action, filter, options] of cases) {
        const error = yield* refused(action, filter, options)
        expect(error, `${field} ${JSON.stringify(filter)}`).toMatchObject({ _tag: "InvalidInputError", field })
      }
      expect(yield* dump(object)).toEqual(before)
    }))

  it.scoped("a running job canceled in bulk ends canceled, not failed, and is not retried", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "r", payload: "hold" }))
      yield* TestClock.adjust(1)
      expect(yield* object.run(jobs.bulk("cancel", { queue: "work", states: ["active"] }))).toMatchObject({ matched: 1, affected: 1 })
      yield* TestClock.adjust(1)
      expect((yield* jobRow(object, "work", "r"))?.status).toBe("canceled")
      expect(events.of("canceled")).toMatchObject([{ id: "r" }])
      expect(events.of("failed")).toEqual([])
    }))
})
