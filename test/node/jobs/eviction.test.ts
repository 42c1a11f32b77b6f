/**
 * Eviction mid-job (`TestObject.restart`: memory gone, storage kept): the job is not lost, runs
 * again with its attempt counted and the same idempotency key, and completes once; a cancel asked
 * before the eviction ends the job as canceled after it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { gates, jobRow, recorder, type TestObject } from "./support.js"

interface Run {
  readonly id: string
  readonly attempt: number
  readonly at: number
  readonly key: string
}

const setup = (object: TestObject, runs: Array<Run>, completions: Array<string>, held: ReturnType<typeof gates>) =>
  Effect.gen(function*() {
    const events = recorder()
    const handler = (job: Jobs.JobContext<string>) =>
      Effect.gen(function*() {
        runs.push({ id: job.id, attempt: job.attempt, at: yield* Clock.currentTimeMillis, key: job.idempotencyKey })
        const work = Effect.zipRight(held.wait(`${job.id}#${job.attempt}`), Effect.sync(() => completions.push(job.id)))
        // "stubborn" ignores aborts: only an eviction ends it.
        yield* job.payload === "stubborn" ? Effect.uninterruptible(work) : work
        return job.attempt
      })
    const jobs = yield* object.run(Jobs.make({
      work: Jobs.queue({ handler }),
      root: Jobs.queue({ handler: (job: Jobs.JobContext<string>) => Effect.map(job.childrenValues, (values) => Object.keys(values)) })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, events }
  })

describe("eviction mid-job", () => {
  it.scoped("the job runs again after the restart, its attempt counted, the same idempotency key; it completes once", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const runs: Array<Run> = []
      const completions: Array<string> = []
      const held = gates()
      const before = yield* setup(first, runs, completions, held)
      yield* first.run(before.jobs.work.add({ id: "a", payload: "normal" }))
      yield* TestClock.adjust(1_000)
      expect(runs.map((run) => `${run.attempt}@${run.at}`)).toEqual(["1@0"])
      expect(yield* jobRow(first, "work", "a")).toMatchObject({ status: "pending", attempt: 1 })

      const second = yield* first.restart
      // Nothing executes in the new instance yet: the job is waiting, not active, and not lost.
      const after = yield* setup(second, runs, completions, held)
      expect(yield* second.run(after.jobs.work.get("a"))).toMatchObject({ state: "waiting", attempt: 1 })
      // The first run's end never lands: it was evicted.
      yield* held.open("a#1")
      yield* TestClock.adjust(0)
      expect(completions).toEqual([])
      // The physical alarm armed when it was added wakes the new instance.
      expect(second.storage.alarmAt).toBe(15_000)
      yield* TestClock.adjust(14_000)
      expect(runs.map((run) => `${run.attempt}@${run.at}`)).toEqual(["1@0", "2@15000"])
      expect(runs[1]?.key).toBe(runs[0]?.key)
      yield* held.open("a#2")
      yield* TestClock.adjust(0)
      expect(completions).toEqual(["a"])
      expect(yield* second.run(after.jobs.work.get("a"))).toMatchObject({ state: "completed", attempt: 2, result: 2 })
      expect(after.events.of("completed")).toHaveLength(1)
      yield* TestClock.adjust(60_000)
      expect(runs).toHaveLength(2)
    }))

  it.scoped("a cancel asked before the eviction: the job is canceled after the restart and never runs again", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const runs: Array<Run> = []
      const completions: Array<string> = []
      const held = gates()
      const before = yield* setup(first, runs, completions, held)
      yield* first.run(before.jobs.work.add({ id: "a", payload: "stubborn" }))
      yield* TestClock.adjust(0)
      expect(yield* first.run(before.jobs.work.cancel("a", "user asked"))).toBe(true)
      yield* TestClock.adjust(100)
      expect(yield* jobRow(first, "work", "a")).toMatchObject({ status: "pending", cancel_requested: 1, cancel_reason: "user asked" })

      const second = yield* first.restart
      const after = yield* setup(second, runs, completions, held)
      expect(yield* jobRow(second, "work", "a")).toMatchObject({ status: "canceled", cancel_reason: "user asked", finished_at: 100 })
      expect(after.events.of("canceled")).toMatchObject([{ id: "a", reason: "user asked" }])
      yield* TestClock.adjust(60_000)
      expect(runs).toHaveLength(1)
      expect(completions).toEqual([])
    }))

  it.scoped("a flow child evicted mid-run reruns, and its parent is released once", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const runs: Array<Run> = []
      const completions: Array<string> = []
      const held = gates()
      const before = yield* setup(first, runs, completions, held)
      yield* first.run(before.jobs.flow({ queue: "root", id: "r", payload: "", children: [{ queue: "work", id: "c", payload: "normal" }] }))
      yield* TestClock.adjust(0)
      const second = yield* first.restart
      const after = yield* setup(second, runs, completions, held)
      yield* held.open("c#2")
      yield* TestClock.adjust(15_000)
      expect(runs.map((run) => `${run.id}#${run.attempt}`)).toEqual(["c#1", "c#2"])
      expect(yield* second.run(after.jobs.root.get("r"))).toMatchObject({ state: "completed", result: ["c"], attempt: 1 })
    }))
})
