/**
 * Batched queues (`Jobs.batchQueue`, `batch: { size, waitMs }`): the handler takes the jobs started
 * together, up to `size`; each job settles on its own (its result, its retries, its cancel); `waitMs`
 * holds due jobs durably for more, across an eviction; bad `batch` options are refused by field.
 */
import { describe, expect, it } from "@effect/vitest"
import { expectTypeOf } from "vitest"
import { Clock, Deferred, Effect, Exit, Fiber, FiberId, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { dump, jobRow, recorder, rows, type TestObject } from "./support.js"

interface Call {
  readonly at: number
  readonly jobs: ReadonlyArray<string>
}

/**
 * A batched queue whose handler records each call and answers per job from its payload: "ok" succeeds with
 * the id upper-cased, "fail" fails, "hold" waits for `release`.
 */
const setup = (object: TestObject, batch: Jobs.Batch, calls: Array<Call>, options: { readonly maxAttempts?: number } = {}) =>
  Effect.gen(function*() {
    const events = recorder()
    const release = Deferred.unsafeMake<void>(FiberId.none)
    const signals = new Map<string, AbortSignal>()
    const jobs = yield* object.run(Jobs.make({
      work: Jobs.batchQueue({
        batch,
        retries: { maxAttempts: options.maxAttempts ?? 3, delay: () => 1_000 },
        handler: (batch: ReadonlyArray<Jobs.JobContext<string>>) =>
          Effect.gen(function*() {
            calls.push({ at: yield* Clock.currentTimeMillis, jobs: batch.map((job) => `${job.id}#${job.attempt}`) })
            for (const job of batch) signals.set(job.id, job.signal)
            if (batch.some((job) => job.payload === "hold")) yield* Deferred.await(release)
            return batch.map((job) =>
              job.payload === "fail"
                ? Exit.fail(new Error(`${job.id} failed`))
                : Exit.succeed(job.id.toUpperCase())
            )
          })
      })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, events, release, signals }
  })

const ids = (prefix: string, n: number, payload = "ok") => Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, payload }))

describe("batched queues", () => {
  it.scoped("jobs added together run in one call of at most `size`; each completes with its own result", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 20 } })
      const calls: Array<Call> = []
      const { jobs } = yield* setup(object, { size: 4 }, calls)
      // The payload's and the result's types come from the batch handler.
      expectTypeOf(jobs.work.add).parameter(0).toHaveProperty("payload").toEqualTypeOf<string>()
      expectTypeOf<Effect.Effect.Success<ReturnType<typeof jobs.work.get>>>().toEqualTypeOf<Jobs.JobInfo<string, string> | undefined>()
      yield* object.run(jobs.work.addBulk(ids("j", 6)))
      yield* TestClock.adjust(0)
      expect(calls.map((call) => call.jobs)).toEqual([["j0#1", "j1#1", "j2#1", "j3#1"], ["j4#1", "j5#1"]])
      for (let i = 0; i < 6; i++) {
        expect(yield* object.run(jobs.work.get(`j${i}`))).toMatchObject({ state: "completed", result: `J${i}`, attempt: 1 })
      }
    }))

  it.scoped("one job's failure fails only that job: it is retried alone, under its own backoff, and the others complete", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<Call> = []
      const { events, jobs } = yield* setup(object, { size: 5 }, calls, { maxAttempts: 2 })
      yield* object.run(jobs.work.addBulk([{ id: "a", payload: "ok" }, { id: "b", payload: "fail" }, { id: "c", payload: "ok" }]))
      yield* TestClock.adjust(0)
      expect(calls).toEqual([{ at: 0, jobs: ["a#1", "b#1", "c#1"] }])
      expect(yield* object.run(jobs.work.get("a"))).toMatchObject({ state: "completed", result: "A" })
      expect(yield* object.run(jobs.work.get("c"))).toMatchObject({ state: "completed", result: "C" })
      expect(yield* jobRow(object, "work", "b")).toMatchObject({ status: "pending", attempt: 1, next_attempt_at: 1_000 })
      expect(events.of("retry_scheduled").map((event) => event.id)).toEqual(["b"])
      yield* TestClock.adjust(1_000)
      expect(calls.slice(1)).toEqual([{ at: 1_000, jobs: ["b#2"] }])
      expect(yield* object.run(jobs.work.get("b"))).toMatchObject({ state: "failed", attempt: 2, error: { message: "b failed" } })
      expect(events.of("failed").map((event) => event.id)).toEqual(["b"])
      expect(events.of("completed").map((event) => event.id).sort()).toEqual(["a", "c"])
    }))

  it.scoped("a failure of the whole call fails every job of the batch, each retried", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.batchQueue({
          batch: { size: 3 },
          retries: { maxAttempts: 2, delay: () => 500 },
          handler: (batch: ReadonlyArray<Jobs.JobContext<null>>) =>
            ++calls === 1 ? Effect.fail(new Error("down")) : Effect.succeed(batch.map((job) => Exit.succeed(job.attempt)))
        })
      }))
      yield* object.run(jobs.work.addBulk(ids("j", 3).map(({ id }) => ({ id, payload: null }))))
      yield* TestClock.adjust(0)
      for (const id of ["j0", "j1", "j2"]) {
        expect(yield* jobRow(object, "work", id)).toMatchObject({ status: "pending", attempt: 1, last_error: "down" })
      }
      yield* TestClock.adjust(500)
      expect(calls).toBe(2)
      for (const id of ["j0", "j1", "j2"]) expect(yield* object.run(jobs.work.get(id))).toMatchObject({ state: "completed", result: 2 })
    }))

  it.scoped("an answer that is not one Exit per job fails every job with JobBatchOutcomesError", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.batchQueue({
          batch: { size: 3 },
          retries: { maxAttempts: 1 },
          handler: (batch: ReadonlyArray<Jobs.JobContext<null>>) => Effect.succeed(batch.slice(1).map(() => Exit.succeed(1)))
        })
      }))
      yield* object.run(jobs.work.addBulk([{ id: "a", payload: null }, { id: "b", payload: null }]))
      yield* TestClock.adjust(0)
      for (const id of ["a", "b"]) {
        expect(yield* object.run(jobs.work.get(id))).toMatchObject({
          state: "failed",
          error: { name: "JobBatchOutcomesError", message: `The batch handler of queue "work" returned 1 outcomes for 2 jobs` }
        })
      }
    }))

  it.scoped("canceling one job of a running batch aborts its signal at once and settles it canceled with the call; the others complete", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<Call> = []
      const { events, jobs, release, signals } = yield* setup(object, { size: 3 }, calls)
      yield* object.run(jobs.work.addBulk([{ id: "a", payload: "hold" }, { id: "b", payload: "ok" }, { id: "c", payload: "ok" }]))
      yield* TestClock.adjust(0)
      expect(calls.map((call) => call.jobs)).toEqual([["a#1", "b#1", "c#1"]])
      expect(yield* object.run(jobs.work.cancel("b", "not needed"))).toBeTruthy()
      yield* TestClock.adjust(0)
      expect(signals.get("b")?.aborted).toBe(true)
      expect(signals.get("a")?.aborted).toBe(false)
      // Its execution lasts as long as the call working on it (as a handler ignoring its abort does).
      expect(yield* object.run(jobs.work.get("b"))).toMatchObject({ state: "active" })
      expect(yield* object.run(jobs.work.get("a"))).toMatchObject({ state: "active" })
      yield* Deferred.succeed(release, undefined)
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs.work.get("a"))).toMatchObject({ state: "completed", result: "A" })
      expect(yield* object.run(jobs.work.get("c"))).toMatchObject({ state: "completed", result: "C" })
      expect(yield* object.run(jobs.work.get("b"))).toMatchObject({ state: "canceled" })
      expect(events.of("canceled").map((event) => event.id)).toEqual(["b"])
    }))

  it.scoped("waitMs: fewer than `size` due jobs wait (durably) for more, then run together at the wait's end", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<Call> = []
      const { jobs } = yield* setup(object, { size: 10, waitMs: 5_000 }, calls)
      yield* object.run(jobs.work.add({ id: "a", payload: "ok" }))
      yield* TestClock.adjust(0)
      expect(calls).toEqual([])
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "pending", attempt: 0, next_attempt_at: 5_000 })
      expect(yield* rows(object, "SELECT queue, batch_until FROM durability_job_queues")).toEqual([{ queue: "work", batch_until: 5_000 }])
      yield* TestClock.adjust(2_000)
      yield* object.run(jobs.work.add({ id: "b", payload: "ok" }))
      yield* TestClock.adjust(2_999)
      expect(calls).toEqual([])
      yield* TestClock.adjust(1)
      expect(calls).toEqual([{ at: 5_000, jobs: ["a#1", "b#1"] }])
      expect(yield* object.run(jobs.work.get("b"))).toMatchObject({ state: "completed", result: "B" })
      // The wait closed with its last job.
      expect(yield* rows(object, "SELECT queue, batch_until FROM durability_job_queues")).toEqual([{ queue: "work", batch_until: null }])
    }))

  it.scoped("waitMs: the wait ends as soon as `size` jobs wait", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<Call> = []
      const { jobs } = yield* setup(object, { size: 3, waitMs: 60_000 }, calls)
      yield* object.run(jobs.work.add({ id: "a", payload: "ok" }))
      yield* TestClock.adjust(1_000)
      yield* object.run(jobs.work.add({ id: "b", payload: "ok" }))
      yield* TestClock.adjust(1_000)
      expect(calls).toEqual([])
      yield* object.run(jobs.work.add({ id: "c", payload: "ok" }))
      yield* TestClock.adjust(0)
      expect(calls).toEqual([{ at: 2_000, jobs: ["a#1", "b#1", "c#1"] }])
    }))

  it.scoped("waitMs survives an eviction: the new instance runs the waiting jobs at the wait's end, not later, not sooner", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const calls: Array<Call> = []
      const before = yield* setup(first, { size: 10, waitMs: 30_000 }, calls)
      yield* first.run(before.jobs.work.addBulk(ids("j", 2)))
      yield* TestClock.adjust(10_000)
      expect(calls).toEqual([])
      const second = yield* first.restart
      const after = yield* setup(second, { size: 10, waitMs: 30_000 }, calls)
      expect(second.storage.alarmAt).toBe(30_000)
      yield* TestClock.adjust(19_999)
      expect(calls).toEqual([])
      yield* TestClock.adjust(1)
      expect(calls).toEqual([{ at: 30_000, jobs: ["j0#1", "j1#1"] }])
      expect(yield* second.run(after.jobs.work.get("j1"))).toMatchObject({ state: "completed", result: "J1" })
    }))

  it.scoped("a call past attemptTimeoutMs: each job times out and is retried; the call is interrupted, and no retry overlaps it", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<Call> = []
      let running = 0
      let most = 0
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.batchQueue({
          batch: { size: 5 },
          attemptTimeoutMs: 1_000,
          retries: { maxAttempts: 2, delay: () => 500 },
          handler: (batch: ReadonlyArray<Jobs.JobContext<null>>) =>
            Effect.gen(function*() {
              calls.push({ at: yield* Clock.currentTimeMillis, jobs: batch.map((job) => `${job.id}#${job.attempt}`) })
              most = Math.max(most, ++running)
              // The first call outlasts the timeout.
              if (batch[0]!.attempt === 1) yield* Effect.sleep(10_000)
              return batch.map((job) => Exit.succeed(job.attempt))
            }).pipe(Effect.ensuring(Effect.sync(() => running--)))
        })
      }))
      yield* object.run(jobs.work.addBulk([{ id: "a", payload: null }, { id: "b", payload: null }]))
      yield* TestClock.adjust(1_000)
      for (const id of ["a", "b"]) {
        expect(yield* jobRow(object, "work", id)).toMatchObject({ status: "pending", attempt: 1, next_attempt_at: 1_500, last_error_name: "DurableAttemptTimeoutError" })
      }
      yield* TestClock.adjust(500)
      expect(calls).toEqual([{ at: 0, jobs: ["a#1", "b#1"] }, { at: 1_500, jobs: ["a#2", "b#2"] }])
      expect(most).toBe(1)
      for (const id of ["a", "b"]) expect(yield* object.run(jobs.work.get(id))).toMatchObject({ state: "completed", result: 2 })
    }))

  it.scoped("a rate limit takes one token per job: a batch holds as many jobs as there are tokens", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<Call> = []
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.batchQueue({
          batch: { size: 5 },
          rateLimit: { capacity: 2, refillPerSecond: 1 },
          handler: (batch: ReadonlyArray<Jobs.JobContext<null>>) =>
            Effect.gen(function*() {
              calls.push({ at: yield* Clock.currentTimeMillis, jobs: batch.map((job) => job.id) })
              return batch.map(() => Exit.void)
            })
        })
      }))
      yield* object.run(jobs.work.addBulk(["a", "b", "c", "d"].map((id) => ({ id, payload: null }))))
      yield* TestClock.adjust(0)
      expect(calls).toEqual([{ at: 0, jobs: ["a", "b"] }])
      yield* TestClock.adjust(2_000)
      expect(calls.slice(1)).toEqual([{ at: 1_000, jobs: ["c"] }, { at: 2_000, jobs: ["d"] }])
    }))

  it.scoped("per job as for any queue: a batch in start order (priority, then first added), dead letters, wait()", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<ReadonlyArray<string>> = []
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.batchQueue({
          batch: { size: 10, waitMs: 100 },
          deadLetter: true,
          retries: { maxAttempts: 1 },
          handler: (batch: ReadonlyArray<Jobs.JobContext<string>>) =>
            Effect.sync(() => {
              calls.push(batch.map((job) => job.id))
              return batch.map((job) => job.payload === "fail" ? Exit.fail(new Error(`${job.id} failed`)) : Exit.succeed(job.payload))
            })
        })
      }))
      yield* object.run(jobs.work.addBulk([
        { id: "low", payload: "ok", priority: -1 },
        { id: "first", payload: "ok" },
        { id: "high", payload: "fail", priority: 5 },
        { id: "second", payload: "ok" }
      ]))
      const waited = yield* Effect.fork(object.run(jobs.work.wait("second", { timeoutMs: 1_000 })))
      yield* TestClock.adjust(100)
      expect(calls).toEqual([["high", "first", "second", "low"]])
      expect((yield* Fiber.join(waited))?.state).toBe("completed")
      const letters = yield* object.run(jobs.work.deadLetters.list())
      expect(letters.items.map((letter) => [letter.id, letter.error.message])).toEqual([["high", "high failed"]])
    }))

  it.scoped("bad batch options are refused, naming the field, before any write", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<Call> = []
      // The tables exist: a refused definition must leave them as they are.
      yield* setup(object, { size: 2 }, calls)
      const before = yield* dump(object)
      const handler = (batch: ReadonlyArray<Jobs.JobContext<null>>) => Effect.succeed(batch.map(() => Exit.void))
      const refused = (batch: unknown) =>
        Effect.flip(object.run(Jobs.make({ work: Jobs.batchQueue({ batch: batch as Jobs.Batch, handler }) })))
      expect(yield* refused({ size: 0 })).toMatchObject({ _tag: "InvalidOptionError", field: "queues.work.batch.size", kind: "range" })
      expect(yield* refused({ size: 101 })).toMatchObject({ field: "queues.work.batch.size" })
      expect(yield* refused({ size: 1.5 })).toMatchObject({ field: "queues.work.batch.size" })
      expect(yield* refused({ size: 2, waitMs: -1 })).toMatchObject({ field: "queues.work.batch.waitMs", kind: "range" })
      expect(yield* refused({ size: 2, waitMs: "2 days" })).toMatchObject({ field: "queues.work.batch.waitMs" })
      expect(yield* refused(5)).toMatchObject({ field: "queues.work.batch", kind: "type" })
      expect(yield* refused(undefined)).toMatchObject({ field: "queues.work.batch" })
      // A batch option on a queue of one job at a time, and on an external queue.
      const single = Jobs.queue({ handler: () => Effect.void })
      expect(yield* Effect.flip(object.run(Jobs.make({ work: { ...single, batch: { size: 2 } } }))))
        .toMatchObject({ field: "queues.work.batch" })
      expect(yield* Effect.flip(object.run(Jobs.make({ work: { ...Jobs.externalQueue({}), batch: { size: 2 } } }))))
        .toMatchObject({ field: "queues.work.batch" })
      // With a concurrency by key (a call would hold several keys at once).
      const keyed = Jobs.batchQueue({ batch: { size: 2 }, handler, concurrency: { key: () => "k", limit: 1 } })
      expect(yield* Effect.flip(object.run(Jobs.make({ work: keyed }))))
        .toMatchObject({ _tag: "InvalidOptionError", field: "queues.work.batch", message: expect.stringContaining("concurrency by key") })
      expect(yield* dump(object)).toEqual(before)
    }))
})
