/**
 * Durable steps in job handlers (Effect face, `Jobs.step`) under TestClock: a stored step is
 * replayed after a later failure and after an eviction; the memos of a job go with its completion,
 * failure, cancel, removal, retention and purge; `retry` (a new generation) runs its steps afresh.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, TestClock } from "effect"
import type * as Background from "../../../src/engine/Background.js"
import { NonRetryableError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import type * as Scheduler from "../../../src/engine/Scheduler.js"
import type { StorageService } from "../../../src/engine/StorageService.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { jobRow } from "../jobs/support.js"
import { memoNames, memos, sideEffects, type TestObject } from "./support.js"

const RETRIES = { maxAttempts: 3, delay: () => 1_000 }

describe("a stored step of a job is replayed, not re-run", () => {
  it.scoped("on the retry after a later failure; the memos go with the completion", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const effects = sideEffects()
      const jobs = yield* object.run(Jobs.make({
        render: Jobs.queue({
          retries: RETRIES,
          handler: (job: Jobs.JobContext<string>) =>
            Effect.gen(function*() {
              const file = yield* Jobs.step("render", effects.run("render", `${job.payload}.pdf (attempt ${job.attempt})`))
              if (job.attempt === 1) return yield* Effect.fail(new Error("upload failed"))
              const url = yield* Jobs.step("upload", effects.run("upload", `https://files/${file}`))
              return { file, url }
            })
        })
      }))
      yield* object.run(jobs.render.add({ id: "r1", payload: "invoice" }))
      yield* TestClock.adjust(0)
      expect(yield* memoNames(object)).toEqual(["render/r1:render=\"invoice.pdf (attempt 1)\""])
      expect((yield* memos(object))[0]).toMatchObject({ capability: "jobs", generation: (yield* jobRow(object, "render", "r1"))?.generation_id })
      yield* TestClock.adjust(1_000)
      expect(effects.runs).toEqual({ render: 1, upload: 1 })
      expect(yield* object.run(jobs.render.get("r1"))).toMatchObject({
        state: "completed",
        attempt: 2,
        result: { file: "invoice.pdf (attempt 1)", url: "https://files/invoice.pdf (attempt 1)" }
      })
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("after an eviction mid-job", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const effects = sideEffects()
      const make = (object: TestObject, instance: string) =>
        object.run(Jobs.make({
          render: Jobs.queue({
            handler: (job: Jobs.JobContext<string>) =>
              Effect.gen(function*() {
                const file = yield* Jobs.step("render", effects.run("render", `${job.payload} by ${instance}`))
                if (instance === "first") yield* Effect.never
                return { file, attempt: job.attempt }
              })
          })
        }))
      const before = yield* make(first, "first")
      yield* first.run(before.render.add({ id: "r2", payload: "report" }))
      yield* TestClock.adjust(0)
      const second = yield* first.restart
      const after = yield* make(second, "second")
      expect(yield* second.fireAlarm()).toBe(true)
      expect(effects.runs).toEqual({ render: 1 })
      expect(yield* second.run(after.render.get("r2"))).toMatchObject({ state: "completed", result: { file: "report by first", attempt: 2 } })
      expect(yield* memos(second)).toEqual([])
    }))
})

describe("the memos of a job are deleted", () => {
  /** A queue whose handler stores step "a", then waits for `gate` (attempt 1 then fails, retryable, when `fail`). */
  const setup = (object: TestObject, options: { readonly fatal?: boolean; readonly removeOnComplete?: number } = {}) =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const effects = sideEffects()
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          retries: RETRIES,
          ...(options.removeOnComplete === undefined ? {} : { removeOnComplete: { count: options.removeOnComplete } }),
          handler: (job: Jobs.JobContext<string>) =>
            Effect.gen(function*() {
              yield* Jobs.step("a", effects.run(`a:${job.id}`, job.payload))
              if (job.payload === "held") yield* Deferred.await(gate)
              if (job.payload === "fatal") return yield* new NonRetryableError({ message: "gave up" })
              if (job.payload === "flaky" && job.attempt === 1) return yield* Effect.fail(new Error("try again later"))
              return "done"
            })
        })
      }))
      return { jobs, effects, open: Deferred.succeed(gate, undefined) }
    })

  it.scoped("when the job fails for good", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "f", payload: "fatal" }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs.work.get("f"))).toMatchObject({ state: "failed" })
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("when an active job is canceled", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "c", payload: "held" }))
      yield* TestClock.adjust(0)
      expect(yield* memoNames(object)).toEqual(["work/c:a=\"held\""])
      expect(yield* object.run(jobs.work.cancel("c", "no longer needed"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs.work.get("c"))).toMatchObject({ state: "canceled" })
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("when a job waiting for its retry is canceled, or removed", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.addBulk([{ id: "x", payload: "flaky" }, { id: "y", payload: "flaky" }]))
      yield* TestClock.adjust(0)
      expect(yield* memoNames(object)).toEqual(["work/x:a=\"flaky\"", "work/y:a=\"flaky\""])
      expect(yield* object.run(jobs.work.cancel("x"))).toBe(true)
      expect(yield* memoNames(object)).toEqual(["work/y:a=\"flaky\""])
      expect(yield* object.run(jobs.work.remove("y"))).toBe(true)
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("when the job is purged", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "p", payload: "flaky" }))
      yield* TestClock.adjust(10)
      expect(yield* memos(object)).toHaveLength(1)
      expect(yield* object.run(jobs.purgeBefore(5))).toBe(1)
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("when retention removes a finished job (a memo row of its key goes with it)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object, { removeOnComplete: 1 })
      yield* object.run(jobs.work.add({ id: "old", payload: "ok" }))
      yield* TestClock.adjust(0)
      expect(yield* memos(object)).toEqual([])
      // A row the fence would never write now (the job is finished): only the delete can remove it.
      const generation = String((yield* jobRow(object, "work", "old"))?.generation_id)
      object.storage.sql.exec(
        "INSERT INTO durability_steps VALUES ('jobs', 'work/old', ?, 'stale', '{\"kind\":\"value\",\"value\":0}', 0)",
        generation
      )
      yield* object.run(jobs.work.add({ id: "new", payload: "ok" }))
      yield* TestClock.adjust(0)
      expect(yield* jobRow(object, "work", "old")).toBeUndefined()
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("when the job's row gets another generation (`retry`): the retried job runs its steps afresh", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { effects, jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "again", payload: "fatal" }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs.work.retry("again"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(effects.runs).toEqual({ "a:again": 2 })

      // The trigger itself: a pending job re-armed in place keeps only its new generation's memos.
      yield* object.run(jobs.work.add({ id: "held", payload: "held" }))
      yield* TestClock.adjust(0)
      const sql = object.storage.sql
      sql.exec("INSERT INTO durability_steps VALUES ('jobs', 'work/held', 'g-next', 'a', '{\"kind\":\"value\",\"value\":1}', 0)")
      sql.exec("UPDATE durability_jobs SET generation_id = 'g-next' WHERE key = 'work/held'")
      expect((yield* memos(object)).map((row) => `${row.record_key}:${row.generation}:${row.name}`)).toEqual(["work/held:g-next:a"])
    }))
})

describe("types", () => {
  it("a job handler's steps are not a requirement of Jobs.make", () => {
    const made: Effect.Effect<unknown, unknown, Scheduler.Scheduler | StorageService | Background.Background> = Jobs.make({
      work: Jobs.queue({ handler: (_: Jobs.JobContext<null>) => Jobs.step("a", Effect.succeed(1)) })
    })
    expect(Effect.isEffect(made)).toBe(true)
  })
})
