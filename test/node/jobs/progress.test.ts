/**
 * Progress and logs from a handler (`Jobs.progress` / `Jobs.log`, or the job's own methods): stored
 * with the job, `progress` events, the `keepLogs` bound, `logs(id, { limit, offset })`, and the
 * 64 KiB limit of an entry.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { InvalidInputError, StorageError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { jobRow, recorder, rows, stored } from "./support.js"

describe("progress and logs", () => {
  it.scoped("Jobs.progress and Jobs.log in an Effect handler: stored with the job, progress events told", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const events = recorder()
      const seen: Array<unknown> = []
      const jobs = yield* object.run(Jobs.make({
        email: Jobs.queue({
          handler: (job: Jobs.JobContext<{ readonly to: string }>) =>
            Effect.gen(function*() {
              yield* Jobs.progress(40)
              seen.push(yield* jobRow(object, "email", job.id))
              yield* Jobs.log("rendered")
              yield* Effect.sleep(10)
              yield* Jobs.progress({ step: "sent", of: 2 })
              yield* job.log(`sent to ${job.payload.to}`)
              return "ok"
            })
        })
      }, { onLifecycleEvent: events.hook }))
      yield* object.run(jobs.email.add({ id: "a", payload: { to: "x@y" } }))
      yield* TestClock.adjust(0)
      // Stored at once, while the job runs.
      expect(seen[0]).toMatchObject({ status: "pending", progress: stored(40) })
      expect((yield* object.run(jobs.email.get("a")))?.progress).toBe(40)
      yield* TestClock.adjust(10)
      expect(yield* object.run(jobs.email.get("a"))).toMatchObject({ state: "completed", progress: { step: "sent", of: 2 } })
      expect(yield* object.run(jobs.email.logs("a"))).toEqual({
        items: [{ seq: 1, at: 0, message: "rendered" }, { seq: 2, at: 10, message: "sent to x@y" }],
        total: 2
      })
      expect(events.of("progress").map((event) => [event.id, event.progress, event.timestamp])).toEqual([
        ["a", 40, 0],
        ["a", { step: "sent", of: 2 }, 10]
      ])
    }))

  it.scoped("keepLogs keeps the newest lines; logs(id, { limit, offset }) pages them", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        email: Jobs.queue({
          keepLogs: 3,
          handler: () => Effect.forEach([1, 2, 3, 4, 5], (n) => Jobs.log(`line ${n}`), { discard: true })
        }),
        quiet: Jobs.queue({ keepLogs: 0, handler: () => Jobs.log("dropped") })
      }))
      yield* object.run(jobs.email.add({ id: "a", payload: null }))
      yield* object.run(jobs.quiet.add({ id: "q", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* rows(object, "SELECT seq, message FROM durability_job_logs WHERE key = 'email/a' ORDER BY seq")).toEqual([
        { seq: 3, message: "line 3" },
        { seq: 4, message: "line 4" },
        { seq: 5, message: "line 5" }
      ])
      const page = yield* object.run(jobs.email.logs("a", { limit: 2, offset: 1 }))
      expect(page).toEqual({ items: [{ seq: 4, at: 0, message: "line 4" }, { seq: 5, at: 0, message: "line 5" }], total: 3 })
      expect((yield* object.run(jobs.email.logs("a", { limit: 1 }))).items.map((line) => line.message)).toEqual(["line 3"])
      expect(yield* object.run(jobs.quiet.logs("q"))).toEqual({ items: [], total: 0 })
      expect(yield* object.run(jobs.email.logs("missing"))).toEqual({ items: [], total: 0 })
      expect(yield* Effect.flip(object.run(jobs.email.logs("a", { limit: 0 })))).toMatchObject({ field: "limit" })
      expect(yield* Effect.flip(object.run(jobs.email.logs("a", { offset: -1 })))).toMatchObject({ field: "offset" })
    }))

  it.scoped("a progress value or a log line over 64 KiB is a typed error to the handler; nothing is stored", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const errors: Array<InvalidInputError | StorageError> = []
      const jobs = yield* object.run(Jobs.make({
        email: Jobs.queue({
          handler: () =>
            Effect.gen(function*() {
              yield* Jobs.progress(1)
              yield* Jobs.log("ok")
              // 65 537 bytes as UTF-8: 21 846 three-byte characters, under the limit as UTF-16.
              const big = "\u20ac".repeat(21_846)
              errors.push(yield* Effect.flip(Jobs.progress({ big })))
              errors.push(yield* Effect.flip(Jobs.log(big)))
              errors.push(yield* Effect.flip(Jobs.log(42 as unknown as string)))
              errors.push(yield* Effect.flip(Jobs.progress(() => 1)))
              // Exactly at the limit is fine.
              yield* Jobs.log("a".repeat(Jobs.MAX_ENTRY_BYTES))
            })
        })
      }))
      yield* object.run(jobs.email.add({ id: "a", payload: null }))
      yield* TestClock.adjust(0)
      expect(errors.map((error) => error._tag === "InvalidInputError" ? [error._tag, error.field, error.kind] : [error._tag])).toEqual([
        ["InvalidInputError", "progress", "range"],
        ["InvalidInputError", "message", "range"],
        ["InvalidInputError", "message", "type"],
        ["InvalidInputError", "progress", "type"]
      ])
      expect(errors[1]?.message).toContain("65538 bytes")
      expect(yield* jobRow(object, "email", "a")).toMatchObject({ status: "completed", progress: stored(1) })
      expect((yield* object.run(jobs.email.logs("a"))).items.map((line) => line.message.length)).toEqual([2, Jobs.MAX_ENTRY_BYTES])
    }))

  it.scoped("progress and logs of a job that already ended are not stored", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let later: Jobs.JobContext<null> | undefined
      const jobs = yield* object.run(Jobs.make({
        email: Jobs.queue({
          handler: (job: Jobs.JobContext<null>) =>
            Effect.sync(() => {
              later = job
            })
        })
      }))
      yield* object.run(jobs.email.add({ id: "a", payload: null }))
      yield* TestClock.adjust(0)
      yield* object.run(later!.progress(99))
      yield* object.run(later!.log("too late"))
      expect((yield* jobRow(object, "email", "a"))?.progress).toBeNull()
      expect((yield* object.run(jobs.email.logs("a"))).items).toEqual([])
    }))
})
