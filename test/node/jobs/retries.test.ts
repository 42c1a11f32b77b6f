/**
 * Retries: `retries: { maxAttempts, delay }` and `retries.schedule` (an Effect Schedule), at
 * millisecond precision through the early timer (inside the alarm's minimum delay) and the physical
 * alarm (beyond it); the attempt timeout; `retry(id)` gives fresh attempts and a new idempotency key,
 * which is otherwise stable across a job's attempts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Schedule, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { jobRow, recorder, type TestObject } from "./support.js"

interface Attempt {
  readonly attempt: number
  readonly at: number
  readonly key: string
}

/** A queue whose handler records each attempt and fails until `succeedOn` (never by default). */
const flaky = (object: TestObject, options: Omit<Jobs.QueueOptions, "groupRateLimit"> & Pick<Parameters<typeof Jobs.queue>[0], "retries" | "attemptTimeoutMs">, succeedOn = Infinity) =>
  Effect.gen(function*() {
    const attempts: Array<Attempt> = []
    const events = recorder()
    const jobs = yield* object.run(Jobs.make({
      work: Jobs.queue({
        ...options,
        handler: (job: Jobs.JobContext<null>) =>
          Effect.gen(function*() {
            attempts.push({ attempt: job.attempt, at: yield* Clock.currentTimeMillis, key: job.idempotencyKey })
            if (job.attempt < succeedOn) return yield* Effect.fail(new Error(`attempt ${job.attempt} failed`))
            return job.attempt
          })
      })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, attempts, events }
  })

describe("retries", () => {
  it.scoped("maxAttempts and delay(n): each retry at its exact millisecond, then failed for good", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { attempts, events, jobs } = yield* flaky(object, { retries: { maxAttempts: 3, delay: (n) => 1_000 * n + 7 } })
      yield* object.run(jobs.work.add({ id: "a", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "pending", attempt: 1, next_attempt_at: 1_007, last_error: "attempt 1 failed" })
      expect((yield* object.run(jobs.work.get("a")))).toMatchObject({ state: "delayed", runAt: 1_007, attempt: 1, maxAttempts: 3 })
      yield* TestClock.adjust(1_006)
      expect(attempts).toHaveLength(1)
      yield* TestClock.adjust(1)
      expect(attempts.map((a) => a.at)).toEqual([0, 1_007])
      yield* TestClock.adjust(2_007)
      expect(attempts.map((a) => `${a.attempt}@${a.at}`)).toEqual(["1@0", "2@1007", "3@3014"])
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "failed", attempt: 3, last_error: "attempt 3 failed", finished_at: 3_014 })
      expect(events.of("retry_scheduled").map((event) => [event.attempt, event.nextAttemptAt, event.error.message])).toEqual([
        [1, 1_007, "attempt 1 failed"],
        [2, 3_014, "attempt 2 failed"]
      ])
      expect(events.of("failed")).toMatchObject([{ id: "a", attempt: 3, error: { name: "Error", message: "attempt 3 failed" } }])
      yield* TestClock.adjust(60_000)
      expect(attempts).toHaveLength(3)
    }))

  it.scoped("a retry beyond the alarm's minimum delay: the physical alarm is set for its exact time", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { attempts, jobs } = yield* flaky(object, { retries: { maxAttempts: 2, delay: () => 61_234 } }, 2)
      yield* object.run(jobs.work.add({ id: "a", payload: null, delayMs: 20_001 }))
      expect(object.storage.alarmAt).toBe(20_001)
      yield* TestClock.adjust(20_001)
      expect(attempts.map((a) => a.at)).toEqual([20_001])
      expect(object.storage.alarmAt).toBe(81_235)
      yield* TestClock.adjust(61_233)
      expect(attempts).toHaveLength(1)
      yield* TestClock.adjust(1)
      expect(attempts.map((a) => a.at)).toEqual([20_001, 81_235])
      expect((yield* object.deliveries).map((delivery) => delivery.at)).toEqual([20_001, 81_235])
      expect(yield* object.run(jobs.work.get("a"))).toMatchObject({ state: "completed", result: 2, attempt: 2 })
    }))

  it.scoped("retries.schedule: an Effect Schedule decides the delays", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { attempts, jobs } = yield* flaky(object, { retries: { maxAttempts: 4, schedule: Schedule.exponential("100 millis") } }, 4)
      yield* object.run(jobs.work.add({ id: "a", payload: null }))
      yield* TestClock.adjust(1_000)
      expect(attempts.map((a) => a.at)).toEqual([0, 100, 300, 700])
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "completed", attempt: 4 })
    }))

  it.scoped("attemptTimeoutMs: a slow attempt is aborted with DurableAttemptTimeoutError and retried", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const signals: Array<AbortSignal> = []
      const events = recorder()
      const jobs = yield* object.run(Jobs.make({
        work: Jobs.queue({
          attemptTimeoutMs: 500,
          retries: { maxAttempts: 2, delay: () => 100 },
          handler: (job: Jobs.JobContext<null>) => Effect.sync(() => signals.push(job.signal)).pipe(Effect.zipRight(Effect.never))
        })
      }, { onLifecycleEvent: events.hook }))
      yield* object.run(jobs.work.add({ id: "a", payload: null }))
      yield* TestClock.adjust(500)
      expect(signals[0]?.aborted).toBe(true)
      expect(signals[0]?.reason).toMatchObject({ _tag: "DurableAttemptTimeoutError", timeoutMs: 500 })
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "pending", attempt: 1, next_attempt_at: 600, last_error_name: "DurableAttemptTimeoutError" })
      yield* TestClock.adjust(600)
      expect(signals).toHaveLength(2)
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "failed", attempt: 2, finished_at: 1_100 })
      expect(events.of("failed")).toMatchObject([{ error: { name: "DurableAttemptTimeoutError", message: `A job of queue "work" timed out after 500ms` } }])
    }))

  it.scoped("the idempotency key is stable across retries; retry(id) of a failed job gives fresh attempts and a new key", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { attempts, jobs } = yield* flaky(object, { retries: { maxAttempts: 2, delay: () => 10 } })
      yield* object.run(jobs.work.add({ id: "a", payload: null }))
      yield* TestClock.adjust(100)
      expect(attempts.map((a) => a.attempt)).toEqual([1, 2])
      const firstKey = attempts[0]!.key
      expect(firstKey).toMatch(new RegExp(`^${Jobs.IDEMPOTENCY_PREFIX}[0-9a-f-]{36}$`))
      expect(attempts[1]!.key).toBe(firstKey)
      expect(firstKey).toBe(`${Jobs.IDEMPOTENCY_PREFIX}${String((yield* jobRow(object, "work", "a"))?.generation_id)}`)
      expect((yield* object.run(jobs.work.get("a")))?.state).toBe("failed")

      expect(yield* object.run(jobs.work.retry("a"))).toBe(true)
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ status: "pending", attempt: 0, last_error: null, finished_at: null })
      yield* TestClock.adjust(100)
      expect(attempts.map((a) => `${a.attempt}@${a.at}`)).toEqual(["1@0", "2@10", "1@100", "2@110"])
      expect(attempts[2]!.key).not.toBe(firstKey)
      expect(attempts[3]!.key).toBe(attempts[2]!.key)
      // Only a failed or canceled job is retried.
      yield* object.run(jobs.work.add({ id: "b", payload: null, delayMs: 60_000 }))
      expect(yield* object.run(jobs.work.retry("b"))).toBe(false)
      expect(yield* object.run(jobs.work.retry("missing"))).toBe(false)
    }))
})
