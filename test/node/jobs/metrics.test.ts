/**
 * The queues' metrics (`JobsMetrics`): each counter's value after adds, runs, completions, retries,
 * failures, dead letters, cancels and rate-limit refusals, tagged with the queue; the wait and run
 * time histograms from TestClock-advanced times; nothing counted for a write rolled back. Metrics
 * are global (Effect's registry), so each test uses queue names of its own.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Metric, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as JobsMetrics from "../../../src/jobs/JobsMetrics.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { withFaults } from "../support/faults.js"
import { count, recorder } from "./support.js"

const COUNTERS = {
  added: JobsMetrics.added,
  started: JobsMetrics.started,
  completed: JobsMetrics.completed,
  retried: JobsMetrics.retried,
  failed: JobsMetrics.failed,
  canceled: JobsMetrics.canceled,
  deadLettered: JobsMetrics.deadLettered,
  rateLimited: JobsMetrics.rateLimited
} as const

type Counts = { readonly [K in keyof typeof COUNTERS]: number }

/** Every counter of `queue`, as `Metric.value` reads it. */
const counts = (queue: string): Effect.Effect<Counts> =>
  Effect.map(
    Effect.forEach(Object.entries(COUNTERS), ([name, metric]) =>
      Effect.map(Metric.value(Metric.tagged(metric, JobsMetrics.QUEUE_TAG, queue)), (state) => [name, state.count] as const)),
    (entries) => Object.fromEntries(entries) as unknown as Counts
  )

const histogram = (metric: Metric.Metric.Histogram<number>, queue: string) =>
  Effect.map(Metric.value(Metric.tagged(metric, JobsMetrics.QUEUE_TAG, queue)), ({ count, max, min, sum }) => ({ count, sum, min, max }))

const none: Counts = { added: 0, started: 0, completed: 0, retried: 0, failed: 0, canceled: 0, deadLettered: 0, rateLimited: 0 }

describe("jobs metrics", () => {
  it.scoped("counts and times per queue: added, started, completed, retried, failed, dead-lettered, canceled; wait and run times", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const handler = (job: Jobs.JobContext<{ readonly fails: number }>) =>
        Effect.zipRight(
          Effect.sleep(250),
          job.attempt <= job.payload.fails ? Effect.fail(new Error(`attempt ${job.attempt} fails`)) : Effect.succeed("ok")
        )
      const jobs = yield* object.run(Jobs.make({
        "metrics-a": Jobs.queue({ concurrency: 1, deadLetter: true, retries: { maxAttempts: 2, delay: () => 100 }, handler }),
        "metrics-b": Jobs.queue({ handler })
      }))
      yield* object.run(jobs["metrics-a"].addBulk([
        { id: "ok", payload: { fails: 0 } },
        { id: "once", payload: { fails: 1 } },
        { id: "always", payload: { fails: 2 } }
      ]))
      yield* object.run(jobs["metrics-a"].add({ id: "later", payload: { fails: 0 }, delayMs: 60_000 }))
      expect((yield* counts("metrics-a")).added).toBe(4)

      // One at a time (concurrency 1), 250 ms each: ok 0–250; once#1 250–500 (retry at 600); always#1 500–750
      // (retry at 850); once#2 750–1000; always#2 1000–1250, failed for good and dead-lettered.
      yield* TestClock.adjust(1_250)
      yield* object.run(jobs["metrics-a"].cancel("later"))
      expect(yield* counts("metrics-a")).toEqual({
        ...none,
        added: 4,
        started: 5,
        completed: 2,
        retried: 2,
        failed: 1,
        deadLettered: 1,
        canceled: 1
      })
      // Each attempt ran 250 ms.
      expect(yield* histogram(JobsMetrics.runTime, "metrics-a")).toEqual({ count: 5, sum: 1_250, min: 250, max: 250 })
      // Waited from due to start: ok 0, once#1 250, always#1 500, once#2 750 − 600, always#2 1 000 − 850.
      expect(yield* histogram(JobsMetrics.waitTime, "metrics-a")).toEqual({ count: 5, sum: 1_050, min: 0, max: 500 })
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_dead_letters")).toBe(1)
      // Another queue's counts are its own.
      expect(yield* counts("metrics-b")).toEqual(none)
    }))

  it.scoped("a rate limit's refusals: one per deferral written, none for the jobs it let start", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        "metrics-limited": Jobs.queue({ rateLimit: { capacity: 2, refillPerSecond: 1 }, handler: () => Effect.void })
      }))
      yield* object.run(jobs["metrics-limited"].addBulk(Array.from({ length: 5 }, (_, i) => ({ id: `j${i}`, payload: i }))))
      yield* TestClock.adjust(3_000)
      const deferrals = object.storage.statements.filter((sql) => /^UPDATE durability_jobs SET next_attempt_at = \? WHERE key = \?/.test(sql))
      const after = yield* counts("metrics-limited")
      expect(after.completed).toBe(5)
      expect(after.started).toBe(5)
      expect(after.rateLimited).toBeGreaterThan(0)
      expect(after.rateLimited).toBe(deferrals.length)
    }))

  it.scoped("a rolled-back add counts nothing: a flow refused inside its transaction, a bulk add whose insert failed", () =>
    Effect.gen(function*() {
      let failInsert = false
      const object = yield* TestDurability.make({
        storage: withFaults(yield* MemoryStorage.make, { sql: (query) => failInsert && query.startsWith("INSERT INTO durability_jobs ") })
      })
      const jobs = yield* object.run(Jobs.make({ "metrics-rollback": Jobs.queue({ handler: () => Effect.never }) }))
      yield* object.run(jobs["metrics-rollback"].add({ id: "x", payload: 1, delayMs: 60_000 }))
      expect((yield* counts("metrics-rollback")).added).toBe(1)

      // The root is inserted, then its child's id exists: the whole flow rolls back.
      const flow = yield* Effect.exit(object.run(jobs.flow({
        queue: "metrics-rollback",
        id: "parent",
        payload: 1,
        children: [{ queue: "metrics-rollback", id: "x", payload: 2 }]
      })))
      expect(Exit.isFailure(flow)).toBe(true)
      failInsert = true
      const bulk = yield* Effect.exit(object.run(jobs["metrics-rollback"].addBulk([{ id: "y", payload: 1, delayMs: 60_000 }])))
      failInsert = false
      expect(Exit.isFailure(bulk)).toBe(true)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs WHERE queue = 'metrics-rollback'")).toBe(1)
      expect((yield* counts("metrics-rollback")).added).toBe(1)
    }))

  it.scoped("a settle rolled back counts nothing: the attempt's end is counted once, when a later attempt's settle commits", () =>
    Effect.gen(function*() {
      let failing = false
      const object = yield* TestDurability.make({
        storage: withFaults(yield* MemoryStorage.make, {
          // Retention's count runs in the settle's transaction, after the job's row was completed: failing it rolls the
          // completion back.
          sql: (query) => failing && query.startsWith("SELECT COUNT(*) AS n FROM durability_jobs WHERE queue = ? AND status = ?")
        })
      })
      const jobs = yield* object.run(Jobs.make({
        "metrics-settle": Jobs.queue({ removeOnComplete: { count: 10 }, handler: (job: Jobs.JobContext<number>) => Effect.succeed(job.payload) })
      }))
      failing = true
      yield* object.run(jobs["metrics-settle"].add({ id: "a", payload: 1 }))
      yield* TestClock.adjust(0)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs WHERE key = 'metrics-settle/a' AND status = 'pending'")).toBe(1)
      expect(yield* counts("metrics-settle")).toEqual({ ...none, added: 1, started: 1 })
      expect((yield* histogram(JobsMetrics.runTime, "metrics-settle")).count).toBe(0)

      failing = false
      // The object recovers on its own (the alarm after the failed settle): the next attempt completes.
      yield* TestClock.adjust(60_000)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs WHERE key = 'metrics-settle/a' AND status = 'completed'")).toBe(1)
      expect(yield* counts("metrics-settle")).toEqual({ ...none, added: 1, started: 2, completed: 1 })
      expect((yield* histogram(JobsMetrics.runTime, "metrics-settle")).count).toBe(1)
    }))

  it.scoped("a rate limit's deferral rolled back counts no refusal", () =>
    Effect.gen(function*() {
      let failing = false
      let refused = 0
      const object = yield* TestDurability.make({
        storage: withFaults(yield* MemoryStorage.make, {
          sql: (query) => {
            const deferral = query.startsWith("UPDATE durability_jobs SET next_attempt_at = ? WHERE key = ?")
            if (deferral && failing) refused++
            return deferral && failing
          }
        })
      })
      const jobs = yield* object.run(Jobs.make({
        "metrics-limit-rollback": Jobs.queue({ rateLimit: { capacity: 1, refillPerSecond: 1 }, handler: () => Effect.void })
      }))
      failing = true
      yield* object.run(jobs["metrics-limit-rollback"].addBulk([{ id: "a", payload: 1 }, { id: "b", payload: 2 }]))
      yield* TestClock.adjust(0)
      // The gate refused "b" (the statement that moves it was tried) but its transaction rolled back.
      expect(refused).toBeGreaterThan(0)
      expect(yield* counts("metrics-limit-rollback")).toEqual({ ...none, added: 2, started: 1, completed: 1 })
      failing = false
      yield* TestClock.adjust(60_000)
      const after = yield* counts("metrics-limit-rollback")
      expect(after.completed).toBe(2)
      const deferrals = object.storage.statements.filter((sql) => sql.startsWith("UPDATE durability_jobs SET next_attempt_at = ? WHERE key = ?"))
      expect(after.rateLimited).toBe(deferrals.length)
    }))

  it.scoped("an external worker's jobs: a lease starts them, its outcome ends them; run time from the lease's claim", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        "metrics-external": Jobs.externalQueue<number, number>({ leaseMs: 10_000, retries: { maxAttempts: 2, delay: () => 100 } })
      }))
      const queue = jobs["metrics-external"]
      yield* object.run(queue.addBulk([{ id: "ok", payload: 1 }, { id: "bad", payload: 2 }]))
      yield* TestClock.adjust(1_000)
      const leased = yield* object.run(queue.lease({ limit: 5 }))
      expect(leased).toHaveLength(2)
      expect(yield* counts("metrics-external")).toEqual({ ...none, added: 2, started: 2 })
      // Due at 0, leased at 1 000.
      expect(yield* histogram(JobsMetrics.waitTime, "metrics-external")).toEqual({ count: 2, sum: 2_000, min: 1_000, max: 1_000 })
      yield* TestClock.adjust(300)
      yield* object.run(queue.complete("ok", leased.find((job) => job.id === "ok")!.token, 10))
      yield* object.run(queue.fail("bad", leased.find((job) => job.id === "bad")!.token, "no", { retryable: false }))
      expect(yield* counts("metrics-external")).toEqual({ ...none, added: 2, started: 2, completed: 1, failed: 1 })
      // Both leased at 1 000 and settled at 1 300.
      expect(yield* histogram(JobsMetrics.runTime, "metrics-external")).toEqual({ count: 2, sum: 600, min: 300, max: 300 })
    }))

  it.scoped("with a lifecycle hook of the user's, each event is counted once and still told", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const events = recorder()
      const jobs = yield* object.run(Jobs.make({
        "metrics-hooked": Jobs.queue({
          retries: { maxAttempts: 2, delay: () => 10 },
          handler: (job: Jobs.JobContext<number>) => job.attempt === 1 ? Effect.fail(new Error("first")) : Effect.succeed(job.payload)
        })
      }, { onLifecycleEvent: events.hook }))
      yield* object.run(jobs["metrics-hooked"].add({ id: "a", payload: 1 }))
      yield* TestClock.adjust(10)
      expect(events.events.map((event) => event.type)).toEqual(["added", "started", "retry_scheduled", "started", "completed"])
      expect(yield* counts("metrics-hooked")).toEqual({ ...none, added: 1, started: 2, retried: 1, completed: 1 })
    }))
})
