/**
 * `cancelOn`: a job names an event key; `jobs.event(key)` cancels every unfinished job naming it, as
 * `cancel` does (a waiting or delayed one at once, an active one through its signal, a flow's children
 * and parent as for a cancel), in one transaction, which can be the caller's own (`Scheduler.transaction`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, TestClock } from "effect"
import { InvalidInputError, JobCanceledError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as Scheduler from "../../../src/engine/Scheduler.js"
import { StorageService } from "../../../src/engine/StorageService.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { dump, gates, jobRow, recorder, rows, type TestObject } from "./support.js"

const KEY = "user.deleted:42"
const REASON = `event "${KEY}"`

const setup = (object: TestObject) =>
  Effect.gen(function*() {
    const held = gates()
    const events = recorder()
    const calls: Array<string> = []
    const signals = new Map<string, AbortSignal>()
    const jobs = yield* object.run(Jobs.make({
      work: Jobs.queue({
        retries: { maxAttempts: 3, delay: () => 1_000 },
        handler: (job: Jobs.JobContext<"hold" | "quick">) =>
          Effect.gen(function*() {
            calls.push(`${job.id}#${job.attempt}`)
            signals.set(job.id, job.signal)
            if (job.payload === "hold") yield* held.wait(job.id)
            return job.id
          })
      })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, held, events, calls, signals }
  })

describe("cancelOn and jobs.event", () => {
  it.scoped("the event cancels the waiting, delayed and active jobs naming it; others keep going", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, events, jobs, signals } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "active", payload: "hold", cancelOn: KEY }))
      yield* TestClock.adjust(0)
      yield* object.run(jobs.work.add({ id: "delayed", payload: "quick", delayMs: 60_000, cancelOn: KEY }))
      yield* object.run(jobs.work.add({ id: "other", payload: "quick", delayMs: 60_000, cancelOn: "user.deleted:43" }))
      yield* object.run(jobs.work.add({ id: "plain", payload: "quick", delayMs: 60_000 }))
      yield* object.run(jobs.work.add({ id: "done", payload: "quick", cancelOn: KEY }))
      yield* TestClock.adjust(10)
      expect(calls).toEqual(["active#1", "done#1"])

      expect(yield* object.run(jobs.event(KEY))).toBe(2)
      expect(signals.get("active")?.aborted).toBe(true)
      expect(signals.get("active")?.reason).toBeInstanceOf(JobCanceledError)
      expect(yield* rows(object, "SELECT id, status, cancel_reason, cancel_requested FROM durability_jobs ORDER BY seq")).toEqual([
        // Asked, ended as canceled when its handler returns.
        { id: "active", status: "pending", cancel_reason: REASON, cancel_requested: 1 },
        { id: "delayed", status: "canceled", cancel_reason: REASON, cancel_requested: 0 },
        { id: "other", status: "pending", cancel_reason: null, cancel_requested: 0 },
        { id: "plain", status: "pending", cancel_reason: null, cancel_requested: 0 },
        { id: "done", status: "completed", cancel_reason: null, cancel_requested: 0 }
      ])
      yield* TestClock.adjust(0)
      expect(yield* jobRow(object, "work", "active")).toMatchObject({ status: "canceled", attempt: 1 })
      expect(events.of("canceled").map((event) => [event.id, event.reason])).toEqual([["delayed", REASON], ["active", REASON]])
      // Finished ones do not match again.
      expect(yield* object.run(jobs.event(KEY))).toBe(0)
      expect(yield* object.run(jobs.work.get("plain"))).not.toHaveProperty("cancelOn")
      expect(yield* object.run(jobs.work.get("other"))).toMatchObject({ cancelOn: "user.deleted:43" })
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual(["active#1", "done#1", "other#1", "plain#1"])
      expect(events.of("retry_scheduled")).toEqual([])
    }))

  it.scoped("a flow: the event cancels a parent's children not started; a child's cancel fails its parent", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, jobs } = yield* setup(object)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.flow({
        queue: "work",
        id: "p1",
        payload: "quick",
        cancelOn: KEY,
        children: [{ queue: "work", id: "c1", payload: "quick" }, { queue: "work", id: "c2", payload: "quick", cancelOn: KEY }]
      }))
      yield* object.run(jobs.flow({
        queue: "work",
        id: "p2",
        payload: "quick",
        children: [{ queue: "work", id: "c3", payload: "quick", cancelOn: "order.canceled:7" }]
      }))
      // p1 and c2 match (c2 ends with its parent's cancel already); c1 goes with its parent.
      expect(yield* object.run(jobs.event(KEY))).toBe(1)
      expect(yield* object.run(jobs.event("order.canceled:7"))).toBe(1)
      expect(yield* rows(object, "SELECT id, status, cancel_reason FROM durability_jobs ORDER BY seq")).toEqual([
        { id: "p1", status: "canceled", cancel_reason: REASON },
        { id: "c1", status: "canceled", cancel_reason: "its parent was canceled" },
        { id: "c2", status: "canceled", cancel_reason: "its parent was canceled" },
        { id: "p2", status: "failed", cancel_reason: null },
        { id: "c3", status: "canceled", cancel_reason: `event "order.canceled:7"` }
      ])
      yield* object.run(jobs.work.resume)
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual([])
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("an event with no match, or bad input, changes nothing; a bad cancelOn is refused before any write", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "a", payload: "quick", delayMs: 60_000, cancelOn: KEY }))
      expect(yield* object.run(jobs.work.get("a"))).toMatchObject({ state: "delayed", cancelOn: KEY })
      const before = yield* dump(object)
      expect(yield* object.run(jobs.event("user.deleted:4"))).toBe(0)
      for (const bad of ["", 42, undefined, "x".repeat(10_000)]) {
        const error = yield* Effect.flip(object.run(jobs.event(bad as string)))
        expect(error).toBeInstanceOf(InvalidInputError)
        expect(error).toMatchObject({ field: "key" })
      }
      const addError = yield* Effect.flip(object.run(jobs.work.add({ id: "b", payload: "quick", cancelOn: "" })))
      expect(addError).toMatchObject({ _tag: "InvalidInputError", field: "cancelOn" })
      const bulkError = yield* Effect.flip(object.run(jobs.work.addBulk([
        { id: "c", payload: "quick" },
        { id: "d", payload: "quick", cancelOn: 7 as unknown as string }
      ])))
      expect(bulkError).toMatchObject({ _tag: "InvalidInputError", field: "jobs[1].cancelOn" })
      const flowError = yield* Effect.flip(object.run(jobs.flow({
        queue: "work",
        payload: "quick",
        children: [{ queue: "work", payload: "quick", cancelOn: "" }]
      })))
      expect(flowError).toMatchObject({ _tag: "InvalidInputError", field: "children[0].cancelOn" })
      expect(yield* dump(object)).toEqual(before)
    }))

  it.scoped("in the caller's transaction: a rollback cancels nothing and aborts nothing; a commit cancels and then aborts", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs, signals } = yield* setup(object)
      object.storage.sql.exec("CREATE TABLE users (id TEXT PRIMARY KEY)")
      object.storage.sql.exec("INSERT INTO users (id) VALUES ('42')")
      yield* object.run(jobs.work.add({ id: "active", payload: "hold", cancelOn: KEY }))
      yield* object.run(jobs.work.add({ id: "later", payload: "quick", delayMs: 60_000, cancelOn: KEY }))
      yield* TestClock.adjust(0)
      const deleteUser = (fail: boolean) =>
        Scheduler.transaction(Effect.gen(function*() {
          const storage = yield* StorageService
          yield* storage.exec("DELETE FROM users WHERE id = ?", ["42"])
          const canceled = yield* jobs.event(KEY)
          // Nothing acts in memory before the commit.
          expect(signals.get("active")?.aborted).toBe(false)
          if (fail) return yield* Effect.fail("rolled back" as const)
          return canceled
        }))
      expect(yield* Effect.exit(object.run(deleteUser(true)))).toEqual(Exit.fail("rolled back"))
      expect(signals.get("active")?.aborted).toBe(false)
      expect(yield* rows(object, "SELECT id FROM users")).toEqual([{ id: "42" }])
      expect(yield* rows(object, "SELECT id, status, cancel_requested FROM durability_jobs ORDER BY seq")).toEqual([
        { id: "active", status: "pending", cancel_requested: 0 },
        { id: "later", status: "pending", cancel_requested: 0 }
      ])
      expect(yield* object.run(deleteUser(false))).toBe(2)
      expect(signals.get("active")?.aborted).toBe(true)
      expect(yield* rows(object, "SELECT id FROM users")).toEqual([])
      yield* held.open("active")
      yield* TestClock.adjust(0)
      expect(yield* rows(object, "SELECT id, status FROM durability_jobs ORDER BY seq")).toEqual([
        { id: "active", status: "canceled" },
        { id: "later", status: "canceled" }
      ])
    }))

  it.scoped("the key is durable: after a restart the event still finds the job", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const before = yield* setup(first)
      yield* first.run(before.jobs.work.add({ id: "a", payload: "quick", delayMs: 60_000, cancelOn: KEY }))
      const second = yield* first.restart
      const after = yield* setup(second)
      expect(yield* second.run(after.jobs.event(KEY))).toBe(1)
      expect(yield* jobRow(second, "work", "a")).toMatchObject({ status: "canceled", cancel_reason: REASON })
      yield* TestClock.adjust(120_000)
      expect(after.calls).toEqual([])
    }))

  it.scoped("the match is one statement over the partial index", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      yield* setup(object)
      const plan = yield* rows(
        object,
        "EXPLAIN QUERY PLAN SELECT key, queue, id FROM durability_jobs WHERE cancel_on = ? AND status IN ('pending', 'waiting_children') ORDER BY seq",
        KEY
      )
      expect(plan.map((row) => String(row.detail)).join("\n")).toMatch(/USING INDEX durability_jobs_cancel_on_idx/)
    }))
})
