/**
 * The Cloudflare Queues transport of an external queue (`processing: { queue }`): a due job is leased by
 * the object itself and its envelope `{ v, object, queue, jobId, token }` written to the outbox in the
 * lease's transaction, then sent with `sendBatch` (batched); a failed send is retried by the scheduler,
 * one cut by an eviction is sent after it; a consumer's `start` with a stale token is refused.
 * The producer is a fake (fault injection); its promises resolve at once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { StaleLeaseError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { jobRow, rows } from "./support.js"

interface Sent {
  readonly v: number
  readonly object: string
  readonly queue: string
  readonly jobId: string
  readonly token: number
  readonly payload?: unknown
}

const producer = () => {
  const batches: Array<ReadonlyArray<Sent>> = []
  let failures = 0
  return {
    batches,
    failNext: (count: number) => void (failures = count),
    binding: {
      sendBatch: (messages: Iterable<{ readonly body: unknown }>) => {
        if (failures > 0) {
          failures--
          return Promise.reject(new Error("queue unavailable"))
        }
        batches.push([...messages].map((message) => message.body as Sent))
        return Promise.resolve()
      }
    }
  }
}

/** Lets fibers waiting on the fake producer's (already settled) promises go on. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 5; i++) {
    yield* Effect.promise(() => Promise.resolve())
    yield* TestClock.adjust(0)
  }
})

const setup = (options: { readonly includePayload?: boolean; readonly concurrency?: number } = {}) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(1_000)
    const queue = producer()
    const object = yield* TestDurability.make({ scheduler: { objectId: "object-1", alarmMinDelayMs: 1_000 } })
    const make = (target: TestDurability.TestObject) =>
      target.run(Jobs.make({
        email: Jobs.externalQueue<{ readonly to: string }, { readonly sent: boolean }>({
          leaseMs: 10_000,
          processing: { queue: queue.binding, ...(options.includePayload === undefined ? {} : { includePayload: options.includePayload }) },
          ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency })
        })
      }))
    return { object, queue, jobs: yield* make(object), make }
  })

describe("external queues: the Cloudflare Queues transport", () => {
  it.scoped("due jobs are leased by the object and their envelopes sent in one batch; start, complete; a repeated envelope is stale", () =>
    Effect.gen(function*() {
      const { jobs, object, queue } = yield* setup()
      for (const id of ["a", "b", "c"]) yield* object.run(jobs.email.add({ id, payload: { to: id } }))
      yield* object.run(jobs.email.add({ id: "later", payload: { to: "later" }, delayMs: 5_000 }))
      yield* settle
      const sent = queue.batches.flat()
      expect(sent.map((envelope) => [envelope.object, envelope.queue, envelope.jobId, envelope.token])).toEqual([
        ["object-1", "email", "a", 1],
        ["object-1", "email", "b", 1],
        ["object-1", "email", "c", 1]
      ])
      expect(sent[0]).not.toHaveProperty("payload")
      expect(yield* object.run(jobs.email.counts)).toMatchObject({ active: 3, delayed: 1 })
      expect(yield* rows(object, "SELECT * FROM durability_job_outbox")).toEqual([])
      // `start` is single use: it takes the envelope's token and gives this delivery its own.
      const started = yield* object.run(jobs.email.start("a", 1))
      expect(started).toMatchObject({ token: 2, payload: { to: "a" }, attempt: 1, leaseUntil: 11_000, leaseMs: 10_000 })
      expect(yield* Effect.flip(object.run(jobs.email.start("a", 1)))).toBeInstanceOf(StaleLeaseError)
      yield* object.run(jobs.email.complete("a", started.token, { sent: true }))
      expect(yield* Effect.flip(object.run(jobs.email.start("a", started.token)))).toBeInstanceOf(StaleLeaseError)
      // The delayed job is sent at its time.
      yield* TestClock.adjust(5_000)
      yield* settle
      expect(queue.batches.flat().map((envelope) => envelope.jobId)).toEqual(["a", "b", "c", "later"])
    }))

  it.scoped("a failed send is retried by the scheduler; an unstarted lease expires and the job is sent again with a new token", () =>
    Effect.gen(function*() {
      const { jobs, object, queue } = yield* setup({ includePayload: true })
      queue.failNext(2)
      yield* object.run(jobs.email.add({ id: "a", payload: { to: "x" } }))
      yield* settle
      expect(queue.batches).toEqual([])
      expect(yield* rows(object, "SELECT attempt, last_error FROM durability_job_outbox")).toEqual([{ attempt: 1, last_error: "queue unavailable" }])
      yield* TestClock.adjust(1_000)
      yield* settle
      yield* TestClock.adjust(2_000)
      yield* settle
      expect(queue.batches.flat()).toEqual([{ v: 1, object: "object-1", queue: "email", jobId: "a", token: 1, payload: { to: "x" } }])
      // Nobody started it: the lease ends, the job is reclaimed and sent again, token 2.
      yield* TestClock.setTime(11_000)
      yield* settle
      expect(queue.batches.flat().map((envelope) => envelope.token)).toEqual([1, 2])
      expect(yield* jobRow(object, "email", "a")).toMatchObject({ attempt: 2, lease_token: 2, stalled: 1 })
    }))

  it.scoped("an eviction between the lease and the send: the outbox sends it after the restart", () =>
    Effect.gen(function*() {
      const { jobs, make, object, queue } = yield* setup()
      queue.failNext(1)
      yield* object.run(jobs.email.add({ id: "a", payload: { to: "x" } }))
      yield* settle
      expect(queue.batches).toEqual([])
      const next = yield* object.restart
      yield* make(next)
      yield* TestClock.adjust(2_000)
      yield* settle
      expect(queue.batches.flat().map((envelope) => [envelope.jobId, envelope.token])).toEqual([["a", 1]])
    }))

  it.scoped("concurrency: at most that many leases out; a settle sends the next job at once", () =>
    Effect.gen(function*() {
      const { jobs, object, queue } = yield* setup({ concurrency: 1 })
      yield* object.run(jobs.email.add({ id: "a", payload: { to: "a" } }))
      yield* object.run(jobs.email.add({ id: "b", payload: { to: "b" } }))
      yield* settle
      expect(queue.batches.flat().map((envelope) => envelope.jobId)).toEqual(["a"])
      const started = yield* object.run(jobs.email.start("a", 1))
      yield* object.run(jobs.email.complete("a", started.token, { sent: true }))
      yield* settle
      expect(queue.batches.flat().map((envelope) => envelope.jobId)).toEqual(["a", "b"])
    }))

  it.scoped("a burst of 150 due jobs goes out in sendBatch calls of at most 100, each envelope once, none left behind", () =>
    Effect.gen(function*() {
      const { jobs, object, queue } = yield* setup()
      const ids = Array.from({ length: 150 }, (_, i) => `j${String(i).padStart(3, "0")}`)
      // The queue refuses every send while the jobs come due, so all 150 envelopes wait; once it is back, the
      // retries come due together (after at most a minute): 150 at once, more than one sendBatch takes.
      queue.failNext(1_000)
      for (let i = 0; i < ids.length; i += 50) {
        yield* object.run(jobs.email.addBulk(ids.slice(i, i + 50).map((id) => ({ id, payload: { to: id } }))))
        yield* settle
      }
      expect(queue.batches).toEqual([])
      expect(Number((yield* rows(object, "SELECT COUNT(*) AS n FROM durability_job_outbox"))[0]?.n)).toBe(150)
      queue.failNext(0)
      yield* TestClock.adjust(9_000)
      for (let round = 0; round < 20 && queue.batches.flat().length < ids.length; round++) {
        yield* TestClock.adjust(1_000)
        yield* settle
      }
      expect(queue.batches.some((batch) => batch.length === 100)).toBe(true)
      expect(queue.batches.every((batch) => batch.length <= 100)).toBe(true)
      expect(queue.batches.flat().map((envelope) => envelope.jobId).sort()).toEqual(ids)
      expect(yield* rows(object, "SELECT key FROM durability_job_outbox")).toEqual([])
    }))

  it.scoped("a transport queue needs the object's id", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const error = yield* Effect.flip(object.run(Jobs.make({ q: Jobs.externalQueue({ processing: { queue: producer().binding } }) })))
      expect(error.message).toContain("needs this object's id")
    }))
})
