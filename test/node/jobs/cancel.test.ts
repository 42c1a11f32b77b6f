/**
 * Cancel: a waiting or delayed job is `canceled` at once; an active one has its signal aborted with
 * `JobCanceledError`, is not retried, and is `canceled` when its handler ends, whatever it returns;
 * a flow parent's cancel cancels its children that have not started.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { JobCanceledError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { gates, jobRow, recorder, rows, type TestObject } from "./support.js"

type Behaviour = "hold" | "fail-on-abort" | "ignore-abort" | "quick"

const setup = (object: TestObject) =>
  Effect.gen(function*() {
    const held = gates()
    const events = recorder()
    const calls: Array<string> = []
    const signals = new Map<string, AbortSignal>()
    const jobs = yield* object.run(Jobs.make({
      work: Jobs.queue({
        retries: { maxAttempts: 5, delay: () => 1_000 },
        handler: (job: Jobs.JobContext<Behaviour>) =>
          Effect.gen(function*() {
            calls.push(`${job.id}#${job.attempt}`)
            signals.set(job.id, job.signal)
            switch (job.payload) {
              case "hold":
                return yield* Effect.as(held.wait(job.id), "held")
              case "fail-on-abort":
                // Cleans up on the abort, then fails with an error of its own: still not retried.
                return yield* Effect.onInterrupt(held.wait(job.id), () => Effect.sync(() => calls.push(`${job.id} cleaned up`)))
              case "ignore-abort":
                return yield* Effect.uninterruptible(Effect.as(held.wait(job.id), "finished anyway"))
              default:
                return "quick"
            }
          })
      })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, held, events, calls, signals }
  })

describe("cancel", () => {
  it.scoped("a waiting or delayed job is canceled at once and never runs", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, events, jobs } = yield* setup(object)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.add({ id: "waiting", payload: "quick" }))
      yield* object.run(jobs.work.resume)
      yield* object.run(jobs.work.add({ id: "delayed", payload: "quick", delayMs: 60_000 }))
      yield* TestClock.adjust(10)
      expect(calls).toEqual(["waiting#1"])
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.add({ id: "w2", payload: "quick" }))
      expect(yield* object.run(jobs.work.cancel("w2", "changed my mind"))).toBe(true)
      expect(yield* object.run(jobs.work.cancel("delayed"))).toBe(true)
      expect(yield* jobRow(object, "work", "w2")).toMatchObject({ status: "canceled", finished_at: 10, cancel_reason: "changed my mind", attempt: 0 })
      expect(yield* jobRow(object, "work", "delayed")).toMatchObject({ status: "canceled", finished_at: 10, cancel_reason: "" })
      expect(events.of("canceled").map((event) => [event.id, event.reason, event.timestamp])).toEqual([
        ["w2", "changed my mind", 10],
        ["delayed", "", 10]
      ])
      // Finished, unknown: nothing to cancel.
      expect(yield* object.run(jobs.work.cancel("waiting"))).toBe(false)
      expect(yield* object.run(jobs.work.cancel("delayed"))).toBe(false)
      expect(yield* object.run(jobs.work.cancel("missing"))).toBe(false)
      yield* object.run(jobs.work.resume)
      yield* TestClock.adjust(120_000)
      expect(calls).toEqual(["waiting#1"])
      // Nothing pending is left to wake the object for.
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("an active job: its signal is aborted with JobCanceledError; it is canceled, not retried", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, events, jobs, signals } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "a", payload: "fail-on-abort" }))
      yield* TestClock.adjust(5)
      expect((yield* object.run(jobs.work.get("a")))?.state).toBe("active")
      expect(yield* object.run(jobs.work.cancel("a", "stop"))).toBe(true)
      const signal = signals.get("a")!
      expect(signal.aborted).toBe(true)
      expect(signal.reason).toBeInstanceOf(JobCanceledError)
      expect((signal.reason as JobCanceledError).message).toBe(`Job "a" of queue "work" was canceled: stop`)
      yield* TestClock.adjust(0)
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "canceled", attempt: 1, cancel_reason: "stop", finished_at: 5 })
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual(["a#1", "a cleaned up"])
      expect(events.of("canceled")).toMatchObject([{ id: "a", reason: "stop" }])
      expect(events.of("retry_scheduled")).toEqual([])
      expect(events.of("failed")).toEqual([])
      expect(yield* object.run(jobs.work.get("a"))).toMatchObject({ state: "canceled" })
    }))

  it.scoped("an active handler that ignores the abort and returns a value still ends canceled", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, events, held, jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "a", payload: "ignore-abort" }))
      yield* TestClock.adjust(0)
      yield* object.run(jobs.work.cancel("a", "too late"))
      yield* TestClock.adjust(1_000)
      // Still running: cancel is cooperative.
      expect((yield* object.run(jobs.work.get("a")))?.state).toBe("active")
      expect((yield* jobRow(object, "work", "a"))?.cancel_requested).toBe(1)
      yield* held.open("a")
      yield* TestClock.adjust(0)
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "canceled", finished_at: 1_000, attempt: 1 })
      expect(events.of("canceled")).toMatchObject([{ id: "a", reason: "too late" }])
      expect(events.of("completed")).toEqual([])
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual(["a#1"])
    }))

  it.scoped("canceling a flow parent cancels its children that have not started (a running one keeps its run)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 1 } })
      const { calls, held, jobs } = yield* setup(object)
      yield* object.run(jobs.flow({
        queue: "work",
        id: "p",
        payload: "quick",
        children: [
          { queue: "work", id: "running", payload: "hold" },
          { queue: "work", id: "waiting", payload: "quick" },
          { queue: "work", id: "mid", payload: "quick", children: [{ queue: "work", id: "deep", payload: "quick", delayMs: 60_000 }] }
        ]
      }))
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["running#1"])
      expect(yield* object.run(jobs.work.cancel("p", "abandoned"))).toBe(true)
      expect(yield* rows(object, "SELECT id, status, cancel_reason FROM durability_jobs ORDER BY seq")).toEqual([
        { id: "p", status: "canceled", cancel_reason: "abandoned" },
        { id: "running", status: "pending", cancel_reason: null },
        { id: "waiting", status: "canceled", cancel_reason: "its parent was canceled" },
        { id: "mid", status: "canceled", cancel_reason: "its parent was canceled" },
        { id: "deep", status: "canceled", cancel_reason: "its parent was canceled" }
      ])
      yield* held.open("running")
      yield* TestClock.adjust(120_000)
      expect(calls).toEqual(["running#1"])
      expect((yield* jobRow(object, "work", "running"))?.status).toBe("completed")
      expect((yield* jobRow(object, "work", "p"))?.status).toBe("canceled")
    }))

  it.scoped("a canceled job can be retried: fresh attempts", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "a", payload: "quick", delayMs: 60_000 }))
      yield* object.run(jobs.work.cancel("a"))
      expect(yield* object.run(jobs.work.retry("a"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["a#1"])
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "completed", cancel_requested: 0, cancel_reason: null })
      expect(yield* Effect.flip(object.run(jobs.work.cancel("a", 5 as unknown as string)))).toMatchObject({ field: "reason" })
    }))
})
