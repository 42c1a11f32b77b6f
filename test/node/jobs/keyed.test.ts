/**
 * A queue's concurrency by key (`concurrency: { key, limit, total? }`): at most `limit` jobs of one key run
 * at once, whatever else runs; a job waiting for its key is not claimed (its attempt is not counted) and
 * starts as soon as a job of its key ends; evictions, retries, rate limits, dedup and leases keep the limit.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { dump, gates, jobRow, rows, type TestObject } from "./support.js"

interface Payload {
  readonly tenant: string
  readonly fail?: boolean | undefined
}

/** A keyed queue whose handlers wait for their gate, counting how many of each key run at once. */
const setup = (object: TestObject, concurrency: Jobs.KeyedConcurrency<Payload>, options: { readonly rateLimit?: Jobs.RateLimit } = {}) =>
  Effect.gen(function*() {
    const held = gates()
    const running = new Map<string, number>()
    let most = 0
    let mostTotal = 0
    const started: Array<string> = []
    const handler = (job: Jobs.JobContext<Payload>) =>
      Effect.gen(function*() {
        const n = (running.get(job.payload.tenant) ?? 0) + 1
        running.set(job.payload.tenant, n)
        most = Math.max(most, n)
        mostTotal = Math.max(mostTotal, [...running.values()].reduce((a, b) => a + b, 0))
        started.push(`${job.id}#${job.attempt}`)
        yield* held.wait(`${job.id}#${job.attempt}`).pipe(
          Effect.ensuring(Effect.sync(() => running.set(job.payload.tenant, running.get(job.payload.tenant)! - 1)))
        )
        if (job.payload.fail === true && job.attempt === 1) return yield* Effect.fail(new Error("once"))
      })
    const jobs = yield* object.run(Jobs.make({
      tenants: Jobs.queue({
        concurrency,
        ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
        retries: { maxAttempts: 3, delay: () => 5_000 },
        handler
      })
    }))
    return {
      jobs,
      held,
      started,
      stats: () => ({ most, mostTotal, running: [...running.values()].reduce((a, b) => a + b, 0) })
    }
  })

const tenant = (key: string) => (payload: Payload) => payload.tenant + key

describe("concurrency by key", () => {
  it.scoped("one running job per key: the others of that key wait unclaimed; another key runs meanwhile", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 8 } })
      const { held, jobs, started, stats } = yield* setup(object, { key: tenant(""), limit: 1 })
      yield* object.run(jobs.tenants.addBulk([
        { id: "a1", payload: { tenant: "a" } },
        { id: "a2", payload: { tenant: "a" } },
        { id: "a3", payload: { tenant: "a" } },
        { id: "b1", payload: { tenant: "b" } }
      ]))
      yield* TestClock.adjust(0)
      expect(started).toEqual(["a1#1", "b1#1"])
      // Stored with its key; waiting for it, its attempt not counted.
      expect(yield* jobRow(object, "tenants", "a2")).toMatchObject({ concurrency_key: "a", waiting_key: 1, attempt: 0, status: "pending" })
      expect(yield* object.run(jobs.tenants.counts)).toMatchObject({ active: 2 })

      // a1's end lets a2 start at once (no wait for a timer); a3 still waits.
      yield* held.open("a1#1")
      yield* TestClock.adjust(0)
      expect(started).toEqual(["a1#1", "b1#1", "a2#1"])
      expect(yield* jobRow(object, "tenants", "a2")).toMatchObject({ waiting_key: 0, attempt: 1 })
      yield* held.open("a2#1")
      yield* held.open("b1#1")
      yield* TestClock.adjust(0)
      yield* held.open("a3#1")
      yield* TestClock.adjust(0)
      expect(started).toEqual(["a1#1", "b1#1", "a2#1", "a3#1"])
      expect(stats().most).toBe(1)
      expect(yield* object.run(jobs.tenants.counts)).toMatchObject({ completed: 4, active: 0, waiting: 0, delayed: 0 })
    }))

  it.scoped("limit 2 and total 3: never more than 2 of a key nor 3 in all; all complete", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 10 } })
      const { held, jobs, started, stats } = yield* setup(object, { key: tenant(""), limit: 2, total: 3 })
      const added = ["a", "a", "a", "a", "b", "b", "c"].map((t, i) => ({ id: `${t}${i}`, payload: { tenant: t } }))
      yield* object.run(jobs.tenants.addBulk(added))
      yield* TestClock.adjust(0)
      for (let round = 0; round < 10 && started.length < 7; round++) {
        expect(stats().running).toBeLessThanOrEqual(3)
        for (const name of [...started]) yield* held.open(name)
        yield* TestClock.adjust(0)
      }
      for (const name of started) yield* held.open(name)
      yield* TestClock.adjust(0)
      expect(new Set(started).size).toBe(7)
      expect(stats()).toMatchObject({ most: 2, running: 0 })
      expect(stats().mostTotal).toBeLessThanOrEqual(3)
      expect(yield* object.run(jobs.tenants.counts)).toMatchObject({ completed: 7 })
    }))

  it.scoped("a failed attempt gives its key back: the next job of the key runs while it waits for its retry", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs, started, stats } = yield* setup(object, { key: tenant(""), limit: 1 })
      yield* object.run(jobs.tenants.add({ id: "a1", payload: { tenant: "a", fail: true } }))
      yield* object.run(jobs.tenants.add({ id: "a2", payload: { tenant: "a" } }))
      yield* TestClock.adjust(0)
      yield* held.open("a1#1")
      yield* TestClock.adjust(0)
      expect(started).toEqual(["a1#1", "a2#1"])
      // a1's retry comes due while a2 runs: it waits for the key.
      yield* TestClock.adjust(5_000)
      expect(started).toEqual(["a1#1", "a2#1"])
      expect(yield* jobRow(object, "tenants", "a1")).toMatchObject({ attempt: 1, waiting_key: 1 })
      yield* held.open("a2#1")
      yield* TestClock.adjust(0)
      expect(started).toEqual(["a1#1", "a2#1", "a1#2"])
      yield* held.open("a1#2")
      yield* TestClock.adjust(0)
      expect(stats().most).toBe(1)
      expect(yield* object.run(jobs.tenants.counts)).toMatchObject({ completed: 2 })
    }))

  it.scoped("after an eviction the jobs of a key still run one at a time, and none is lost", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const before = yield* setup(first, { key: tenant(""), limit: 1 })
      yield* first.run(before.jobs.tenants.addBulk([1, 2, 3].map((i) => ({ id: `a${i}`, payload: { tenant: "a" } }))))
      yield* TestClock.adjust(0)
      expect(before.started).toEqual(["a1#1"])
      const second = yield* first.restart
      const after = yield* setup(second, { key: tenant(""), limit: 1 })
      // The evicted attempt's job is due again; the waiting ones look again by the attempt's timeout at the latest.
      for (let i = 0; i < 20 && after.started.length < 3; i++) {
        yield* TestClock.adjust(5_000)
        for (const name of after.started) yield* after.held.open(name)
        yield* TestClock.adjust(0)
        expect(after.stats().most).toBeLessThanOrEqual(1)
      }
      for (const name of after.started) yield* after.held.open(name)
      yield* TestClock.adjust(0)
      expect(after.started.map((name) => name.slice(0, 2)).sort()).toEqual(["a1", "a2", "a3"])
      expect(after.started).toContain("a1#2")
      expect(yield* second.run(after.jobs.tenants.counts)).toMatchObject({ completed: 3 })
      expect(after.stats().most).toBe(1)
    }))

  it.scoped("a job waiting for its key takes no rate-limit token", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs, started } = yield* setup(object, { key: tenant(""), limit: 1 }, { rateLimit: { capacity: 2, refillPerSecond: 0.001 } })
      yield* object.run(jobs.tenants.addBulk([
        { id: "a1", payload: { tenant: "a" } },
        { id: "a2", payload: { tenant: "a" } },
        { id: "b1", payload: { tenant: "b" } }
      ]))
      yield* TestClock.adjust(0)
      // a2 waited for its key without spending the second token: b1 has it.
      expect(started).toEqual(["a1#1", "b1#1"])
      yield* held.open("a1#1")
      yield* held.open("b1#1")
      yield* TestClock.adjust(0)
      expect(started).toEqual(["a1#1", "b1#1"])
    }))

  it.scoped("dedup replace composes: a waiting job replaced takes its new key", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs, started } = yield* setup(object, { key: tenant(""), limit: 1 })
      yield* object.run(jobs.tenants.add({ id: "a1", payload: { tenant: "a" } }))
      yield* object.run(jobs.tenants.add({ id: "a2", payload: { tenant: "a" }, dedup: { key: "d", mode: "replace" } }))
      yield* TestClock.adjust(0)
      expect(yield* jobRow(object, "tenants", "a2")).toMatchObject({ waiting_key: 1, concurrency_key: "a" })
      // Replaced by a job of tenant b: it no longer waits for a's key, and runs.
      const replaced = yield* object.run(jobs.tenants.add({ id: "x", payload: { tenant: "b" }, dedup: { key: "d", mode: "replace" } }))
      expect(replaced).toMatchObject({ id: "a2", deduplicated: true })
      yield* TestClock.adjust(0)
      expect(started).toEqual(["a1#1", "a2#1"])
      expect(yield* jobRow(object, "tenants", "a2")).toMatchObject({ concurrency_key: "b", waiting_key: 0 })
      yield* held.open("a1#1")
      yield* held.open("a2#1")
      yield* TestClock.adjust(0)
    }))

  it.scoped("a key function that throws or returns no key rejects the add, naming the field; nothing is stored", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        q: Jobs.queue({
          concurrency: {
            key: (payload: { readonly tenant: unknown }) => {
              if (payload.tenant === "boom") throw new Error("no tenant")
              return payload.tenant as string
            },
            limit: 1
          },
          handler: () => Effect.void
        })
      }))
      const before = yield* dump(object)
      for (const tenant of ["boom", "", 42]) {
        const result = yield* Effect.either(object.run(jobs.q.add({ payload: { tenant } })))
        expect(Either.isLeft(result)).toBe(true)
        if (Either.isLeft(result)) expect(result.left).toMatchObject({ _tag: "InvalidInputError", field: "payload" })
      }
      const bulk = yield* Effect.either(object.run(jobs.q.addBulk([{ payload: { tenant: "ok" } }, { payload: { tenant: "" } }])))
      expect(Either.isLeft(bulk) && bulk.left).toMatchObject({ _tag: "InvalidInputError", field: "jobs[1].payload" })
      expect(yield* dump(object)).toEqual(before)
    }))

  it.scoped("bad options name the field", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const make = (concurrency: unknown) =>
        Effect.either(object.run(Jobs.make({ q: Jobs.queue({ concurrency: concurrency as number, handler: () => Effect.void }) })))
      expect(yield* make({ key: () => "k", limit: 0 })).toMatchObject({ left: { field: "queues.q.concurrency.limit" } })
      expect(yield* make({ key: "tenant", limit: 1 })).toMatchObject({ left: { field: "queues.q.concurrency.key" } })
      expect(yield* make({ key: () => "k", limit: 1, total: 1.5 })).toMatchObject({ left: { field: "queues.q.concurrency.total" } })
      expect(yield* make("4")).toMatchObject({ left: { field: "queues.q.concurrency" } })
    }))

  it.scoped("lease: at most `limit` leases out per key, counted from the rows; a settle makes room", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        ext: Jobs.externalQueue({ concurrency: { key: (payload: Payload) => payload.tenant, limit: 1 } })
      }))
      yield* object.run(jobs.ext.addBulk(["a", "a", "b", "a", "c"].map((t, i) => ({ id: `${t}${i}`, payload: { tenant: t } }))))
      const first = yield* object.run(jobs.ext.lease({ limit: 10 }))
      expect(first.map((lease) => lease.id)).toEqual(["a0", "b2", "c4"])
      expect(yield* object.run(jobs.ext.lease({ limit: 10 }))).toEqual([])
      yield* object.run(jobs.ext.complete(first[0]!.id, first[0]!.token, null))
      const second = yield* object.run(jobs.ext.lease({ limit: 10 }))
      expect(second.map((lease) => lease.id)).toEqual(["a1"])
      const leased = yield* rows(object, "SELECT concurrency_key, COUNT(*) AS n FROM durability_jobs WHERE leased_until IS NOT NULL GROUP BY concurrency_key")
      expect(leased.every((row) => Number(row.n) <= 1)).toBe(true)
    }))

  it.scoped("fairness: with the queue's total binding, keys take turns round by round; a busy key does not go first", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 10 } })
      const { held, jobs, started } = yield* setup(object, { key: tenant(""), limit: 100, total: 2 })
      const hot = Array.from({ length: 8 }, (_, i) => ({ id: `h${i + 1}`, payload: { tenant: "h" } }))
      const others = ["a", "b", "c"].flatMap((t) => [1, 2, 3].map((i) => ({ id: `${t}${i}`, payload: { tenant: t } })))
      yield* object.run(jobs.tenants.addBulk([...hot, ...others]))
      // Each key's jobs take successive rounds: h1 0, h2 1, …; a1 0, a2 1, a3 2.
      expect((yield* jobRow(object, "tenants", "h5"))?.turn).toBe(4)
      expect((yield* jobRow(object, "tenants", "c3"))?.turn).toBe(2)
      yield* TestClock.adjust(0)
      for (let i = 0; i < 17; i++) {
        yield* held.open(started[i]!)
        yield* TestClock.adjust(0)
      }
      // The first two took the free slots as they were added; from then on, round by round.
      expect(started.map((name) => name.replace("#1", ""))).toEqual([
        "h1", "h2", "a1", "b1", "c1", "a2", "b2", "c2", "h3", "a3", "b3", "c3", "h4", "h5", "h6", "h7", "h8"
      ])
    }))

  it.scoped("fairness when a rate limit binds: each token goes to the next key in round order", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 10 } })
      const started: Array<string> = []
      const jobs = yield* object.run(Jobs.make({
        tenants: Jobs.queue({
          concurrency: { key: tenant(""), limit: 100 },
          rateLimit: { capacity: 1, refillPerSecond: 1 },
          handler: (job: Jobs.JobContext<Payload>) => Effect.sync(() => void started.push(job.id))
        })
      }))
      yield* object.run(jobs.tenants.addBulk([
        ...[1, 2, 3, 4].map((i) => ({ id: `h${i}`, payload: { tenant: "h" } })),
        ...["a", "b"].flatMap((t) => [1, 2].map((i) => ({ id: `${t}${i}`, payload: { tenant: t } })))
      ]))
      for (let second = 0; second < 10; second++) yield* TestClock.adjust(1_000)
      // h1 took the full bucket's token as it was added; then one token a second, round by round.
      expect(started).toEqual(["h1", "a1", "b1", "h2", "a2", "b2", "h3", "h4"])
    }))

  it.scoped("rounds never go back for jobs without a key: a queue without keys keeps its order after an eviction", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const make = (object: TestObject, log: Array<string>) =>
        object.run(Jobs.make({
          keyed: Jobs.queue({ concurrency: { key: (payload: Payload) => payload.tenant, limit: 1 }, handler: () => Effect.void }),
          plain: Jobs.queue({ concurrency: 1, handler: (job: Jobs.JobContext<null>) => Effect.sync(() => void log.push(job.id)) })
        }))
      const log: Array<string> = []
      const before = yield* make(first, log)
      yield* first.run(before.keyed.addBulk([1, 2, 3, 4].map((i) => ({ id: `k${i}`, payload: { tenant: "t" } }))))
      yield* TestClock.adjust(0)
      yield* first.run(before.plain.addBulk([{ id: "p1", payload: null, delayMs: 60_000 }]))
      const second = yield* first.restart
      const after = yield* make(second, log)
      yield* second.run(after.plain.addBulk([{ id: "p2", payload: null, delayMs: 60_000 }]))
      const turns = yield* rows(second, "SELECT id, turn FROM durability_jobs WHERE queue = 'plain' ORDER BY seq")
      // p1 was added once k4 (round 3) had started; p2, after the eviction, no sooner.
      expect(turns.map((row) => Number(row.turn))).toEqual([3, 3])
      yield* TestClock.adjust(60_000)
      expect(log).toEqual(["p1", "p2"])
    }))

  it.scoped("Queues transport: one lease out per key; a settle sends the next job of the key at once, an expiry by its end", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_000)
      const sent: Array<{ readonly jobId: string; readonly token: number }> = []
      const binding = {
        sendBatch: (messages: Iterable<{ readonly body: unknown }>) => {
          for (const message of messages) sent.push(message.body as { readonly jobId: string; readonly token: number })
          return Promise.resolve()
        }
      }
      const settle = Effect.gen(function*() {
        for (let i = 0; i < 5; i++) {
          yield* Effect.promise(() => Promise.resolve())
          yield* TestClock.adjust(0)
        }
      })
      const object = yield* TestDurability.make({ scheduler: { objectId: "object-1", alarmMinDelayMs: 1_000 } })
      const jobs = yield* object.run(Jobs.make({
        email: Jobs.externalQueue({
          leaseMs: 10_000,
          maxStalled: 3,
          processing: { queue: binding },
          concurrency: { key: (payload: Payload) => payload.tenant, limit: 1 }
        })
      }))
      yield* object.run(jobs.email.addBulk(["a1", "a2", "a3", "b1"].map((id) => ({ id, payload: { tenant: id.slice(0, 1) } }))))
      yield* settle
      expect(sent.map((envelope) => envelope.jobId)).toEqual(["a1", "b1"])
      expect(yield* jobRow(object, "email", "a2")).toMatchObject({ waiting_key: 1, attempt: 0, leased_until: null })
      // a1's settle makes room: a2 is leased and sent at once.
      const started = yield* object.run(jobs.email.start("a1", 1))
      yield* object.run(jobs.email.complete("a1", started.token, null))
      yield* settle
      expect(sent.map((envelope) => envelope.jobId)).toEqual(["a1", "b1", "a2"])
      // The leases of a2 and b1 expire (their workers died): each key has one job sent again at the lease's end
      // (a2 first: it was due first), never two at once; a3 still waits for its key.
      yield* TestClock.adjust(10_000)
      yield* settle
      expect(sent.map((envelope) => envelope.jobId)).toEqual(["a1", "b1", "a2", "a2", "b1"])
      const leased = yield* rows(object, "SELECT id FROM durability_jobs WHERE leased_until IS NOT NULL ORDER BY id")
      expect(leased.map((row) => row.id)).toEqual(["a2", "b1"])
      expect(yield* jobRow(object, "email", "a3")).toMatchObject({ waiting_key: 1, attempt: 0 })
    }))
})
