/**
 * Token buckets checked when a job would start: a saturated queue never starts more than
 * `capacity + refillPerSecond × t` jobs in any t since the start, and close to that many; an empty
 * bucket puts its next token's time into the timer or the alarm (no polling in between); the
 * bucket is stored in the claim's transaction, so a restart grants no fresh burst; one bucket per
 * group key; `setRateLimit` replaces the queue's limit durably.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import * as AlarmService from "../../../src/engine/AlarmService.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { rows, type TestObject } from "./support.js"

interface Start {
  readonly id: string
  readonly tenant: string
  readonly at: number
}

/** A queue whose handler only records when each job started. */
const recording = (
  object: TestObject,
  starts: Array<Start>,
  options: Pick<Jobs.QueueOptions, "rateLimit"> & { readonly groupRateLimit?: Jobs.GroupRateLimit<{ readonly tenant: string }> } = {}
) =>
  object.run(Jobs.make({
    work: Jobs.queue({
      ...options,
      handler: (job: Jobs.JobContext<{ readonly tenant: string }>) =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => starts.push({ id: job.id, tenant: job.payload.tenant, at })))
    })
  }))

const backlog = (n: number, tenant = "t", from = 0) =>
  Array.from({ length: n }, (_, i) => ({ id: `${tenant}${from + i}`, payload: { tenant } }))

const startedBy = (starts: ReadonlyArray<Start>, t: number) => starts.filter((start) => start.at <= t).length

describe("queue rate limit", () => {
  it.scoped("a saturated queue, tick by tick: started ≤ capacity + refill × t at every ms, ≥ 95 % of it over the window; no pass between tokens", () =>
    Effect.gen(function*() {
      const capacity = 10
      const refill = 10
      const windowMs = 2_000
      const bound = (t: number) => capacity + (refill * t) / 1_000
      const object = yield* TestDurability.make()
      const starts: Array<Start> = []
      const jobs = yield* recording(object, starts, { rateLimit: { capacity, refillPerSecond: refill } })
      const alarms = yield* object.run(AlarmService.AlarmService)
      yield* object.run(jobs.work.addBulk(backlog(bound(windowMs) + 10)))

      const tokenMs = 1_000 / refill
      let statements = object.storage.statements.length
      for (let t = 0; t <= windowMs; t += tokenMs / 2) {
        yield* TestClock.adjust(t === 0 ? 0 : tokenMs / 2)
        expect(startedBy(starts, t), `at ${t}`).toBeLessThanOrEqual(bound(t))
        expect(starts.length, `at ${t}`).toBe(startedBy(starts, t))
        const ran = object.storage.statements.length - statements
        statements = object.storage.statements.length
        if (t % tokenMs !== 0) {
          // Halfway to the next token: nothing ran since the last one, and the timer waits for that token.
          expect(ran, `statements in (${t - tokenMs / 2}, ${t}]`).toBe(0)
          expect(yield* alarms.timerAt, `timer at ${t}`).toBe(t + tokenMs / 2)
        }
      }
      // Every millisecond of the window, from the recorded start times.
      const over: Array<string> = []
      for (let t = 0; t <= windowMs; t++) {
        if (startedBy(starts, t) > bound(t)) over.push(`${startedBy(starts, t)} started by ${t} ms`)
      }
      expect(over).toEqual([])
      expect(starts.length).toBeGreaterThanOrEqual(0.95 * bound(windowMs))
      expect(starts.filter((start) => start.at === 0)).toHaveLength(capacity)
      // The bucket as the last claim stored it.
      const [bucket] = yield* rows(object, "SELECT group_key, tokens, updated_at FROM durability_job_buckets")
      expect(bucket).toMatchObject({ group_key: "", updated_at: starts[starts.length - 1]!.at })
      expect(Number(bucket?.tokens)).toBeLessThan(1)
    }))

  it.scoped("a slow bucket: the physical alarm is set at the next token; no pass and no statement until then", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const starts: Array<Start> = []
      // One token every 40 s: beyond the alarm's minimum delay, so the physical alarm carries it.
      const jobs = yield* recording(object, starts, { rateLimit: { capacity: 2, refillPerSecond: 0.025 } })
      yield* object.run(jobs.work.addBulk(backlog(5)))
      yield* TestClock.adjust(0)
      expect(starts.map((start) => start.at)).toEqual([0, 0])
      // Let the engine's one idle upkeep run, then watch a quiet object.
      yield* TestClock.adjust(1_000)
      expect(object.storage.alarmAt).toBe(40_000)
      const statements = object.storage.statements.length
      for (let t = 2_000; t < 40_000; t += 2_000) {
        yield* TestClock.adjust(2_000)
        expect(object.storage.statements.length, `at ${t}`).toBe(statements)
      }
      expect(yield* object.deliveries).toEqual([])
      yield* TestClock.adjust(1_000)
      expect(starts.map((start) => start.at)).toEqual([0, 0, 40_000])
      expect((yield* object.deliveries).map((delivery) => delivery.at)).toEqual([40_000])
      expect(object.storage.alarmAt).toBe(80_000)
      yield* TestClock.adjust(80_000)
      expect(starts.map((start) => start.at)).toEqual([0, 0, 40_000, 80_000, 120_000])
      expect((yield* object.deliveries).map((delivery) => delivery.at)).toEqual([40_000, 80_000, 120_000])
    }))

  it.scoped("the bucket is durable: a restart mid-window grants no fresh burst", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const starts: Array<Start> = []
      const before = yield* recording(first, starts, { rateLimit: { capacity: 3, refillPerSecond: 1 } })
      yield* first.run(before.work.addBulk(backlog(3, "a")))
      yield* TestClock.adjust(500)
      expect(starts.map((start) => start.at)).toEqual([0, 0, 0])
      expect(yield* rows(first, "SELECT group_key, tokens, updated_at FROM durability_job_buckets"))
        .toEqual([{ group_key: "", tokens: 0, updated_at: 0 }])

      const second = yield* first.restart
      const after = yield* recording(second, starts, { rateLimit: { capacity: 3, refillPerSecond: 1 } })
      yield* second.run(after.work.addBulk(backlog(5, "b")))
      for (let t = 500; t <= 3_000; t += 100) {
        expect(startedBy(starts, t), `at ${t}`).toBeLessThanOrEqual(3 + t / 1_000)
        yield* TestClock.adjust(100)
      }
      expect(starts.map((start) => start.at)).toEqual([0, 0, 0, 1_000, 2_000, 3_000])
    }))
})

describe("group rate limit", () => {
  it.scoped("one bucket per group key: tenants are limited independently", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const starts: Array<Start> = []
      const jobs = yield* recording(object, starts, {
        groupRateLimit: { key: (payload) => payload.tenant, capacity: 2, refillPerSecond: 1 }
      })
      yield* object.run(jobs.work.addBulk([...backlog(5, "A"), ...backlog(5, "B")]))
      yield* TestClock.adjust(2_500)
      const timesOf = (tenant: string) => starts.filter((start) => start.tenant === tenant).map((start) => start.at)
      expect(timesOf("A")).toEqual([0, 0, 1_000, 2_000])
      expect(timesOf("B")).toEqual([0, 0, 1_000, 2_000])
      // A tenant never seen has its full bucket while the others wait.
      yield* object.run(jobs.work.addBulk(backlog(3, "C")))
      yield* TestClock.adjust(0)
      expect(timesOf("C")).toEqual([2_500, 2_500])
      yield* TestClock.adjust(1_000)
      expect(timesOf("A")).toEqual([0, 0, 1_000, 2_000, 3_000])
      expect(timesOf("C")).toEqual([2_500, 2_500, 3_500])
      expect((yield* rows(object, "SELECT group_key FROM durability_job_buckets ORDER BY group_key")).map((row) => row.group_key))
        .toEqual(["g:A", "g:B", "g:C"])
      // The group is stored with the job.
      expect((yield* rows(object, "SELECT group_key FROM durability_jobs WHERE id = 'C0'"))[0]?.group_key).toBe("C")
    }))

  it.scoped("the queue's bucket and the group's: a job starts when both have a token", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const starts: Array<Start> = []
      const jobs = yield* recording(object, starts, {
        rateLimit: { capacity: 3, refillPerSecond: 1 },
        groupRateLimit: { key: (payload) => payload.tenant, capacity: 1, refillPerSecond: 10 }
      })
      yield* object.run(jobs.work.addBulk([...backlog(2, "A"), ...backlog(2, "B")]))
      yield* TestClock.adjust(0)
      // A0 and B0 take their groups' one token each; A1 waits for its group (100 ms), then the queue has one left.
      expect(starts.map((start) => `${start.id}@${start.at}`)).toEqual(["A0@0", "B0@0"])
      yield* TestClock.adjust(100)
      expect(starts.map((start) => `${start.id}@${start.at}`)).toEqual(["A0@0", "B0@0", "A1@100"])
      yield* TestClock.adjust(100)
      // B1's group has a token again, the queue's has 0.2 (three taken by 100 ms): B1 waits for the queue's next token, at 1 000.
      expect(starts).toHaveLength(3)
      yield* TestClock.adjust(1_000)
      expect(starts.map((start) => `${start.id}@${start.at}`)).toEqual(["A0@0", "B0@0", "A1@100", "B1@1000"])
    }))
})

describe("setRateLimit", () => {
  it.scoped("adds a limit durably (kept across a restart), replaces it, removes it with null", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const starts: Array<Start> = []
      const jobs = yield* recording(object, starts)
      yield* object.run(jobs.work.setRateLimit({ capacity: 1, refillPerSecond: 2 }))
      expect(yield* rows(object, "SELECT queue, rate_limit FROM durability_job_queues"))
        .toEqual([{ queue: "work", rate_limit: JSON.stringify({ capacity: 1, refillPerSecond: 2 }) }])
      yield* object.run(jobs.work.addBulk(backlog(3, "a")))
      yield* TestClock.adjust(600)
      expect(starts.map((start) => start.at)).toEqual([0, 500])

      const next = yield* object.restart
      const again = yield* recording(next, starts)
      yield* next.run(again.work.addBulk(backlog(2, "b")))
      yield* TestClock.adjust(1_000)
      expect(starts.map((start) => start.at)).toEqual([0, 500, 1_000, 1_500])

      yield* next.run(again.work.setRateLimit(null))
      yield* next.run(again.work.addBulk(backlog(4, "c")))
      yield* TestClock.adjust(0)
      expect(starts.filter((start) => start.at === 1_600).map((start) => start.id)).toEqual(["c0", "c1", "c2", "c3"])
      expect(yield* rows(next, "SELECT rate_limit FROM durability_job_queues")).toEqual([{ rate_limit: "null" }])

      const bad = yield* Effect.flip(next.run(again.work.setRateLimit({ capacity: 0, refillPerSecond: 1 })))
      expect(bad).toMatchObject({ _tag: "InvalidInputError", field: "limit.capacity" })
      expect(yield* Effect.flip(next.run(again.work.setRateLimit({ capacity: 1, refillPerSecond: -1 }))))
        .toMatchObject({ field: "limit.refillPerSecond" })
      expect(yield* rows(next, "SELECT rate_limit FROM durability_job_queues")).toEqual([{ rate_limit: "null" }])
    }))

  it.scoped("overrides the definition's limit", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const starts: Array<Start> = []
      const jobs = yield* recording(object, starts, { rateLimit: { capacity: 1, refillPerSecond: 0.001 } })
      yield* object.run(jobs.work.setRateLimit({ capacity: 5, refillPerSecond: 1 }))
      yield* object.run(jobs.work.addBulk(backlog(6)))
      yield* TestClock.adjust(1_000)
      expect(starts.map((start) => start.at)).toEqual([0, 0, 0, 0, 0, 1_000])
    }))
})
