/**
 * Lifecycle events of jobs, each with its fields, told after the change committed: added,
 * deduplicated, started, progress, completed, retry_scheduled, failed, canceled, dead_lettered, removed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { gates, recorder } from "./support.js"

describe("job lifecycle events", () => {
  it.scoped("every event type, in order, with its fields", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const events = recorder()
      const held = gates()
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          deadLetter: true,
          retries: { maxAttempts: 2, delay: () => 50 },
          handler: (job: Jobs.JobContext<string>) =>
            Effect.gen(function*() {
              if (job.payload === "hold") return yield* held.wait(job.id)
              yield* Jobs.progress(50)
              yield* Effect.sleep(5)
              if (job.payload === "fail") return yield* Effect.fail(new Error("boom"))
              return "done"
            })
        })
      }, { onLifecycleEvent: events.hook }))

      yield* object.run(jobs.work.add({ id: "ok", payload: "ok", dedup: { key: "k" } }))
      yield* object.run(jobs.work.add({ id: "dup", payload: "ok", dedup: { key: "k" } }))
      yield* TestClock.adjust(10)
      yield* object.run(jobs.work.add({ id: "bad", payload: "fail" }))
      yield* TestClock.adjust(100)
      yield* object.run(jobs.work.add({ id: "held", payload: "hold" }))
      yield* TestClock.adjust(0)
      yield* object.run(jobs.work.cancel("held", "stop"))
      yield* TestClock.adjust(0)
      yield* object.run(jobs.work.remove("ok"))
      yield* object.run(jobs.flow({ queue: "work", id: "parent", payload: "ok", children: [{ queue: "work", id: "child", payload: "ok", delayMs: 1_000 }] }))

      const job = { entityKind: "job", queue: "work" }
      expect(events.events).toEqual([
        { ...job, type: "added", id: "ok", state: "waiting", timestamp: 0 },
        { ...job, type: "deduplicated", id: "dup", existingId: "ok", replaced: false, dedupKey: "k", timestamp: 0 },
        { ...job, type: "started", id: "ok", attempt: 1, timestamp: 0 },
        { ...job, type: "progress", id: "ok", progress: 50, timestamp: 0 },
        { ...job, type: "completed", id: "ok", attempt: 1, durationMs: 5, timestamp: 5 },
        { ...job, type: "added", id: "bad", state: "waiting", timestamp: 10 },
        { ...job, type: "started", id: "bad", attempt: 1, timestamp: 10 },
        { ...job, type: "progress", id: "bad", progress: 50, timestamp: 10 },
        { ...job, type: "retry_scheduled", id: "bad", attempt: 1, error: { name: "Error", message: "boom" }, nextAttemptAt: 65, timestamp: 15 },
        { ...job, type: "started", id: "bad", attempt: 2, timestamp: 65 },
        { ...job, type: "progress", id: "bad", progress: 50, timestamp: 65 },
        { ...job, type: "failed", id: "bad", attempt: 2, error: { name: "Error", message: "boom" }, timestamp: 70 },
        { ...job, type: "dead_lettered", id: "bad", error: { name: "Error", message: "boom" }, timestamp: 70 },
        { ...job, type: "added", id: "held", state: "waiting", timestamp: 110 },
        { ...job, type: "started", id: "held", attempt: 1, timestamp: 110 },
        { ...job, type: "canceled", id: "held", reason: "stop", timestamp: 110 },
        { ...job, type: "removed", id: "ok", reason: "remove", timestamp: 110 },
        { ...job, type: "added", id: "child", state: "delayed", parentId: "parent", timestamp: 110 },
        { ...job, type: "added", id: "parent", state: "waiting-children", timestamp: 110 }
      ])
    }))

  it.scoped("a throwing or rejecting hook changes nothing: the job completes, the failure is reported", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      const jobs = yield* object.run(Jobs.make({ work: Jobs.queue({ handler: () => Effect.succeed("done") }) }, {
        onLifecycleEvent: (event) => {
          calls++
          if (event.type === "started") throw new Error("hook broke")
          if (event.type === "completed") return Promise.reject(new Error("hook rejected"))
        }
      }))
      yield* object.run(jobs.work.add({ id: "a", payload: null }))
      yield* TestClock.adjust(0)
      yield* Effect.promise(() => Promise.resolve())
      expect(calls).toBe(3)
      expect(yield* object.run(jobs.work.get("a"))).toMatchObject({ state: "completed", result: "done" })
      expect((yield* object.background.reports).map((report) => report.event)).toContain("durability.lifecycle_hook.failed")
    }))
})
