/**
 * A schedule that targets a job queue: each slot adds one job whose id and dedup key are the slot's
 * idempotency key, so a run retried after its add (or repeated after an eviction) adds it once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { rows } from "./support.js"

describe("a schedule that enqueues jobs", () => {
  it.scoped("each slot adds one job with the schedule's payload, id = the slot's idempotency key; the job runs", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const sent: Array<unknown> = []
      const jobs = yield* object.run(Jobs.make({
        email: Jobs.queue({ handler: (job: Jobs.JobContext<{ to: string }>) => Effect.sync(() => sent.push([job.id, job.payload])) })
      }))
      const schedules = yield* object.run(Schedules.make({ nightly: Schedules.enqueue(jobs.email) }))
      yield* object.run(schedules.nightly.upsert("digest", { everyMs: 60_000 }, { payload: { to: "a@example.com" } }))
      yield* TestClock.adjust(120_000)
      expect(sent).toEqual([
        ["durability-schedule:v1:nightly/digest@1970-01-01T00:01:00.000Z", { to: "a@example.com" }],
        ["durability-schedule:v1:nightly/digest@1970-01-01T00:02:00.000Z", { to: "a@example.com" }]
      ])
      expect(yield* object.run(jobs.email.counts)).toMatchObject({ completed: 2, waiting: 0, failed: 0 })
    }))

  it.scoped("a run repeated after an eviction between its add and its settle adds the job once", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const first = yield* TestDurability.make()
      let adds = 0
      const make = (object: TestDurability.TestObject, failAfterAdd: boolean) =>
        Effect.gen(function*() {
          const jobs = yield* object.run(Jobs.make({ email: Jobs.queue({ handler: () => Effect.void }) }, {}))
          const target = Schedules.enqueue(jobs.email)
          const schedules = yield* object.run(Schedules.make({
            nightly: Schedules.schedule({
              retries: { maxAttempts: 3, delay: () => 1_000 },
              handler: (run) =>
                Effect.zipRight(
                  Effect.tap(target.handler(run as never), () => Effect.sync(() => adds++)),
                  failAfterAdd ? Effect.fail(new Error("the settle never landed")) : Effect.void
                )
            })
          }))
          // Paused after every capability is attached: a write reconciles the alarm over the tables attached so far.
          yield* object.run(jobs.email.pause)
          yield* object.run(schedules.nightly.upsert("digest", { everyMs: 60_000 }, { payload: "p" }))
          return { jobs, schedules }
        })
      yield* make(first, true)
      yield* TestClock.adjust(60_000)
      const second = yield* first.restart
      const { jobs, schedules } = yield* make(second, false)
      // The retry (due at 61 s) is woken by the alarm, armed at least alarmMinDelayMs after its write.
      yield* TestClock.adjust(20_000)
      expect(adds).toBe(2)
      expect(yield* rows(second, "SELECT id FROM durability_jobs")).toEqual([{ id: "durability-schedule:v1:nightly/digest@1970-01-01T00:01:00.000Z" }])
      expect(yield* second.run(schedules.nightly.get("digest"))).toMatchObject({ runCount: 1, lastRun: { outcome: "completed", scheduledTime: 60_000 } })
      expect(yield* second.run(jobs.email.counts)).toMatchObject({ waiting: 1 })
    }))
})
