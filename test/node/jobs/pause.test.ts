/**
 * Pausing is a durable queue flag: a paused queue starts nothing on any path (an add's eager
 * start, the early timer, the alarm pass), across a restart, until `resume`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { jobRow, rows, type TestObject } from "./support.js"

const setup = (object: TestObject, seen: Array<string>) =>
  object.run(Jobs.make({
    work: Jobs.queue({ handler: (job: Jobs.JobContext<null>) => Effect.sync(() => seen.push(job.id)) }),
    other: Jobs.queue({ handler: (job: Jobs.JobContext<null>) => Effect.sync(() => seen.push(job.id)) })
  }))

describe("pause", () => {
  it.scoped("a paused queue starts nothing: not on add, not from the early timer, not from the alarm; other queues run", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<string> = []
      const jobs = yield* setup(object, seen)
      expect(yield* object.run(jobs.work.isPaused)).toBe(false)
      yield* object.run(jobs.work.pause)
      expect(yield* object.run(jobs.work.isPaused)).toBe(true)
      expect(yield* rows(object, "SELECT queue, paused FROM durability_job_queues")).toEqual([{ queue: "work", paused: 1 }])

      // Eager path: due now.
      expect(yield* object.run(jobs.work.add({ id: "now", payload: null }))).toMatchObject({ state: "waiting" })
      expect((yield* object.run(jobs.work.get("now")))?.state).toBe("waiting")
      // Early-timer path: due inside the alarm's minimum delay.
      yield* object.run(jobs.work.add({ id: "soon", payload: null, delayMs: 2_000 }))
      // Alarm path: due beyond it.
      yield* object.run(jobs.work.add({ id: "later", payload: null, delayMs: 60_000 }))
      yield* object.run(jobs.other.add({ id: "other", payload: null, delayMs: 2_000 }))
      yield* TestClock.adjust(0)
      expect((yield* object.run(jobs.work.get("now")))?.state).toBe("waiting")
      // A paused queue's jobs do not wake the object: only the other queue's job is waited for.
      expect(object.storage.alarmAt).toBe(15_000)
      yield* TestClock.adjust(2_000)
      expect(seen).toEqual(["other"])
      yield* TestClock.adjust(60_000)
      // A pass the platform delivers anyway starts nothing of the paused queue.
      yield* Effect.promise(() => object.storage.setAlarm(63_000))
      expect(yield* object.fireAlarm()).toBe(true)
      expect((yield* object.deliveries).map((delivery) => delivery.at)).toEqual([63_000])
      expect(seen).toEqual(["other"])
      for (const id of ["now", "soon", "later"]) {
        expect(yield* jobRow(object, "work", id), id).toMatchObject({ status: "pending", attempt: 0 })
      }
      expect(yield* object.run(jobs.work.counts)).toMatchObject({ waiting: 3, active: 0 })

      yield* object.run(jobs.work.resume)
      expect(yield* object.run(jobs.work.isPaused)).toBe(false)
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["other", "now", "soon", "later"])
      expect(yield* object.run(jobs.work.counts)).toMatchObject({ completed: 3, waiting: 0 })
    }))

  it.scoped("pause is durable: after a restart the queue is still paused until resumed", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<string> = []
      const before = yield* setup(object, seen)
      yield* object.run(before.work.pause)
      yield* object.run(before.work.add({ id: "a", payload: null }))
      yield* TestClock.adjust(0)

      const next = yield* object.restart
      const jobs = yield* setup(next, seen)
      expect(yield* next.run(jobs.work.isPaused)).toBe(true)
      yield* next.run(jobs.work.add({ id: "b", payload: null }))
      yield* next.run(jobs.work.add({ id: "c", payload: null, delayMs: 1_000 }))
      yield* TestClock.adjust(30_000)
      expect(seen).toEqual([])
      yield* next.run(jobs.work.resume)
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["a", "b", "c"])
    }))

  it.scoped("a running job finishes when its queue is paused; the next does not start", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<string> = []
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          concurrency: 1,
          handler: (job: Jobs.JobContext<null>) => Effect.zipRight(Effect.sleep(1_000), Effect.sync(() => seen.push(job.id)))
        })
      }))
      yield* object.run(jobs.work.addBulk([{ id: "a", payload: null }, { id: "b", payload: null }]))
      yield* TestClock.adjust(500)
      yield* object.run(jobs.work.pause)
      yield* TestClock.adjust(5_000)
      expect(seen).toEqual(["a"])
      expect((yield* object.run(jobs.work.get("b")))?.state).toBe("waiting")
      yield* object.run(jobs.work.resume)
      yield* TestClock.adjust(1_000)
      expect(seen).toEqual(["a", "b"])
    }))
})
