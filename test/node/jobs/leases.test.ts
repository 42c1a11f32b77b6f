/**
 * External queues (`processing: "external"`): due jobs wait for `lease`; a lease counts an attempt and
 * gives a fencing token that grows with every lease of the job; every write of its holder is
 * conditional on that token (a stale one gets `StaleLeaseError` and changes nothing); an expired
 * lease is reclaimed at its end by the scheduler (back to waiting, or failed past `maxStalled`);
 * priorities, concurrency, rate limits, pause, retries, flows and dead letters hold as for inline queues.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { StaleLeaseError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { jobRow, recorder, rows } from "./support.js"

const setup = (
  options: {
    readonly maxStalled?: number
    readonly deadLetter?: boolean
    readonly concurrency?: number
    readonly rateLimit?: { readonly capacity: number; readonly refillPerSecond: number }
  } = {}
) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(1_000)
    const object = yield* TestDurability.make({ scheduler: { alarmMinDelayMs: 1_000 } })
    const events = recorder()
    const jobs = yield* object.run(Jobs.make({
      email: Jobs.externalQueue<{ readonly to: string }, { readonly messageId: string }>({
        leaseMs: 10_000,
        retries: { maxAttempts: 3, delay: () => 2_000 },
        ...options
      })
    }, { onLifecycleEvent: events.hook }))
    return { object, jobs, events }
  })

describe("external queues: leases", () => {
  it.scoped("due jobs wait for a lease (nothing runs them here); a lease takes them by priority, counts an attempt, gives a token", () =>
    Effect.gen(function*() {
      const { events, jobs, object } = yield* setup()
      yield* object.run(jobs.email.add({ id: "low", payload: { to: "a" } }))
      yield* object.run(jobs.email.add({ id: "high", payload: { to: "b" }, priority: 5 }))
      yield* object.run(jobs.email.add({ id: "later", payload: { to: "c" }, delayMs: 60_000 }))
      yield* TestClock.adjust(5_000)
      // Not run, not woken for: they wait for a worker.
      expect(object.storage.alarmAt).toBeNull()
      expect(yield* object.run(jobs.email.counts)).toMatchObject({ waiting: 2, delayed: 1, active: 0 })
      const leased = yield* object.run(jobs.email.lease({ limit: 5, workerId: "w1" }))
      expect(leased.map((job) => [job.id, job.attempt, job.token, job.leaseUntil])).toEqual([["high", 1, 1, 16_000], ["low", 1, 1, 16_000]])
      expect(leased[0]!.payload).toEqual({ to: "b" })
      expect(leased[0]!.idempotencyKey).toMatch(/^durability-job:v1:/)
      expect(yield* object.run(jobs.email.counts)).toMatchObject({ waiting: 0, delayed: 1, active: 2 })
      expect(yield* jobRow(object, "email", "high")).toMatchObject({ attempt: 1, lease_token: 1, leased_until: 16_000, worker_id: "w1", started_at: 6_000 })
      // The lease's end is armed: its reclaim needs no polling.
      expect(object.storage.alarmAt).toBe(16_000)
      expect(yield* object.run(jobs.email.lease({ limit: 5 }))).toEqual([])
      yield* object.run(jobs.email.complete("high", leased[0]!.token, { messageId: "m1" }))
      const done = yield* object.run(jobs.email.get("high"))
      expect(done).toMatchObject({ state: "completed", result: { messageId: "m1" }, attempt: 1 })
      expect(events.of("started").map((event) => event.id)).toEqual(["high", "low"])
      expect(events.of("completed").map((event) => event.id)).toEqual(["high"])
    }))

  it.scoped("a stale token is refused on every write and changes nothing", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup()
      yield* object.run(jobs.email.add({ id: "j", payload: { to: "a" } }))
      const [first] = yield* object.run(jobs.email.lease())
      // The lease expires unrenewed: the scheduler reclaims it at its end (attempt counted), a new worker leases it.
      yield* TestClock.adjust(10_000)
      expect(yield* jobRow(object, "email", "j")).toMatchObject({ status: "pending", leased_until: null, stalled: 1, attempt: 1 })
      const [second] = yield* object.run(jobs.email.lease({ workerId: "w2" }))
      expect([second!.attempt, second!.token]).toEqual([2, 2])
      const before = yield* rows(object, "SELECT * FROM durability_jobs")
      const stale = first!.token
      for (
        const call of [
          jobs.email.heartbeat("j", stale, { progress: 50 }),
          jobs.email.log("j", stale, "still here"),
          jobs.email.complete("j", stale, { messageId: "late" }),
          jobs.email.fail("j", stale, "late failure")
        ] as const
      ) {
        const error = yield* Effect.flip(object.run(call as Effect.Effect<unknown, unknown>))
        expect(error).toBeInstanceOf(StaleLeaseError)
        expect((error as StaleLeaseError).message).toContain(`with token ${stale} no longer holds the job`)
      }
      expect(yield* rows(object, "SELECT * FROM durability_jobs")).toEqual(before)
      expect(yield* rows(object, "SELECT * FROM durability_job_logs")).toEqual([])
      yield* object.run(jobs.email.complete("j", second!.token, { messageId: "m2" }))
      expect(yield* object.run(jobs.email.get("j"))).toMatchObject({ state: "completed", result: { messageId: "m2" }, attempt: 2 })
      // Settled: the token that completed it is stale too.
      expect(yield* Effect.flip(object.run(jobs.email.complete("j", second!.token, { messageId: "again" })))).toBeInstanceOf(StaleLeaseError)
    }))

  it.scoped("heartbeats extend the lease and store progress; logs land; past maxStalled expiries the job fails for good", () =>
    Effect.gen(function*() {
      const { events, jobs, object } = yield* setup({ maxStalled: 1, deadLetter: true })
      yield* object.run(jobs.email.add({ id: "j", payload: { to: "a" } }))
      const [job] = yield* object.run(jobs.email.lease())
      yield* TestClock.adjust(8_000)
      expect(yield* object.run(jobs.email.heartbeat("j", job!.token, { progress: 40, extendMs: 20_000 }))).toEqual({ leaseUntil: 29_000 })
      yield* object.run(jobs.email.log("j", job!.token, "rendered"))
      yield* TestClock.adjust(15_000)
      expect(yield* object.run(jobs.email.get("j"))).toMatchObject({ state: "active", progress: 40 })
      expect((yield* object.run(jobs.email.logs("j"))).items.map((line) => line.message)).toEqual(["rendered"])
      // Expires at 29 s: back to waiting (1 stall); leased and left to expire again: the second stall fails it.
      yield* TestClock.setTime(29_000)
      expect(yield* jobRow(object, "email", "j")).toMatchObject({ status: "pending", stalled: 1, leased_until: null })
      const [again] = yield* object.run(jobs.email.lease())
      expect(again!.attempt).toBe(2)
      yield* TestClock.adjust(10_000)
      const failed = yield* object.run(jobs.email.get("j"))
      expect(failed).toMatchObject({ state: "failed", attempt: 2, error: { name: "JobStalledError" } })
      expect(failed?.error?.message).toContain("stalled: its lease expired 2 times (maxStalled 1)")
      expect((yield* object.run(jobs.email.deadLetters.list())).items.map((letter) => letter.id)).toEqual(["j"])
      expect(events.of("failed").map((event) => event.error.name)).toEqual(["JobStalledError"])
    }))

  it.scoped("fail: retried under the policy from its retry time (leased again then); retryable false or spent attempts fail for good", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup()
      yield* object.run(jobs.email.add({ id: "r", payload: { to: "a" } }))
      yield* object.run(jobs.email.add({ id: "n", payload: { to: "b" } }))
      const leased = yield* object.run(jobs.email.lease({ limit: 2 }))
      yield* object.run(jobs.email.fail("r", leased[0]!.token, { name: "BusyError", message: "421 busy" }))
      yield* object.run(jobs.email.fail("n", leased[1]!.token, "550 no such user", { retryable: false }))
      expect(yield* object.run(jobs.email.get("r"))).toMatchObject({ state: "delayed", attempt: 1, error: { name: "BusyError", message: "421 busy" } })
      expect(yield* object.run(jobs.email.get("n"))).toMatchObject({ state: "failed", attempt: 1, error: { name: "Error", message: "550 no such user" } })
      expect(yield* object.run(jobs.email.lease())).toEqual([])
      yield* TestClock.adjust(2_000)
      for (const attempt of [2, 3]) {
        const [job] = yield* object.run(jobs.email.lease())
        expect(job!.attempt).toBe(attempt)
        yield* object.run(jobs.email.fail("r", job!.token, "421 busy"))
        yield* TestClock.adjust(2_000)
      }
      expect(yield* object.run(jobs.email.get("r"))).toMatchObject({ state: "failed", attempt: 3 })
    }))

  it.scoped("concurrency caps the leases out at once; rate limits and pause hold on the lease path", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup({ concurrency: 2, rateLimit: { capacity: 3, refillPerSecond: 1 } })
      for (let i = 1; i <= 6; i++) yield* object.run(jobs.email.add({ id: `j${i}`, payload: { to: `${i}` } }))
      const first = yield* object.run(jobs.email.lease({ limit: 10 }))
      expect(first.map((job) => job.id)).toEqual(["j1", "j2"])
      yield* object.run(jobs.email.complete("j1", first[0]!.token, { messageId: "1" }))
      yield* object.run(jobs.email.complete("j2", first[1]!.token, { messageId: "2" }))
      // One token left of the bucket's 3.
      const second = yield* object.run(jobs.email.lease({ limit: 10 }))
      expect(second.map((job) => job.id)).toEqual(["j3"])
      yield* object.run(jobs.email.complete("j3", second[0]!.token, { messageId: "3" }))
      expect(yield* object.run(jobs.email.lease({ limit: 10 }))).toEqual([])
      yield* TestClock.adjust(1_000)
      yield* object.run(jobs.email.pause)
      expect(yield* object.run(jobs.email.lease({ limit: 10 }))).toEqual([])
      yield* object.run(jobs.email.resume)
      expect((yield* object.run(jobs.email.lease({ limit: 10 }))).map((job) => job.id)).toEqual(["j4"])
    }))

  it.scoped("a lease survives an eviction: the worker completes it on the next instance; an unrenewed one is reclaimed by the alarm", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup()
      yield* object.run(jobs.email.add({ id: "kept", payload: { to: "a" } }))
      yield* object.run(jobs.email.add({ id: "lost", payload: { to: "b" } }))
      const leased = yield* object.run(jobs.email.lease({ limit: 2 }))
      const next = yield* object.restart
      const again = yield* next.run(Jobs.make({ email: Jobs.externalQueue<{ readonly to: string }, { readonly messageId: string }>({ leaseMs: 10_000 }) }))
      yield* next.run(again.email.complete("kept", leased[0]!.token, { messageId: "k" }))
      expect(yield* next.run(again.email.get("kept"))).toMatchObject({ state: "completed" })
      yield* TestClock.adjust(10_000)
      expect(yield* jobRow(next, "email", "lost")).toMatchObject({ status: "pending", leased_until: null, stalled: 1, attempt: 1 })
      expect((yield* next.run(again.email.lease())).map((job) => [job.id, job.attempt, job.token])).toEqual([["lost", 2, 2]])
    }))

  it.scoped("an inline queue is not leased; bad arguments are typed errors naming the field", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        inline: Jobs.queue({ handler: () => Effect.void }),
        ext: Jobs.externalQueue({})
      }))
      const cases: Array<[Effect.Effect<unknown, unknown>, string, string]> = [
        [jobs.inline.lease(), "queue", `Queue "inline" is processed inline`],
        [jobs.ext.lease({ limit: 0 }), "limit", "limit must be an integer from 1 to 100"],
        [jobs.ext.lease({ leaseMs: 10 }), "leaseMs", "leaseMs must be an integer from 1000"],
        [jobs.ext.heartbeat("x", 0), "token", "token must be the positive integer a lease returned"],
        [jobs.ext.fail("x", 1, 42 as never), "error", "error must be a string or an object with a message"],
        [jobs.ext.complete("x", 1, { at: new Date(0) }), "result", "result must be JSON-serializable"]
      ]
      for (const [call, field, text] of cases) {
        const error = yield* Effect.flip(object.run(call))
        expect(error).toMatchObject({ _tag: "InvalidInputError", field })
        expect((error as { message: string }).message).toContain(text)
      }
      const badOption = yield* Effect.flip(object.run(Jobs.make({ q: Jobs.queue({ handler: () => Effect.void, leaseMs: 5_000 }) })))
      expect(badOption.message).toContain(`apply to processing: "external" only`)
    }))
})

describe("external queues: the promise face", () => {
  it("DurabilityJobs: an external queue with no handler; lease, heartbeat, complete; StaleLeaseError keeps its name", async () => {
    const { DurabilityJobs, StaleLeaseError: PromiseStaleLeaseError } = await import("../../../src/index.js")
    const { memoryContext } = await import("../support/promise.js")
    const context = await memoryContext()
    const jobs = new DurabilityJobs({
      context,
      log: () => undefined,
      queues: { email: { processing: "external", leaseMs: 5_000, maxStalled: 2 } }
    })
    await jobs.email.add({ id: "a", payload: { to: "x" } })
    const [lease] = await jobs.email.lease({ workerId: "w" })
    expect(lease).toMatchObject({ id: "a", attempt: 1, token: 1, payload: { to: "x" } })
    expect((await jobs.email.heartbeat("a", lease!.token, { progress: 10 })).leaseUntil).toBeGreaterThanOrEqual(lease!.leaseUntil)
    await jobs.email.log("a", lease!.token, "working")
    await jobs.email.complete("a", lease!.token, { sent: true })
    expect(await jobs.email.get("a")).toMatchObject({ state: "completed", result: { sent: true }, progress: 10 })
    const stale = await jobs.email.complete("a", lease!.token, { sent: true }).catch((error: unknown) => error)
    expect(stale).toBeInstanceOf(PromiseStaleLeaseError)
    expect((stale as Error).name).toBe("StaleLeaseError")
    const another = await memoryContext()
    expect(() => new DurabilityJobs({ context: another, queues: { q: { processing: "external", handler: async () => 1 } } })).toThrow(
      "queues.q.handler is not used by an external queue"
    )
  })
})

describe("external queues: flows and retention", () => {
  it.scoped("an inline parent waits for its external children; their completions release it with their values; retention trims", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make()
      const reports: Array<unknown> = []
      const jobs = yield* object.run(Jobs.make({
        report: Jobs.queue({
          handler: () =>
            Effect.flatMap(Jobs.CurrentJob, ({ job }) => Effect.map(job.childrenValues, (values) => void reports.push(values)))
        }),
        render: Jobs.externalQueue<{ readonly page: number }, { readonly url: string }>({ removeOnComplete: { count: 1 } })
      }))
      yield* object.run(jobs.flow({
        queue: "report",
        id: "r",
        payload: {},
        children: [{ queue: "render", id: "p1", payload: { page: 1 } }, { queue: "render", id: "p2", payload: { page: 2 } }]
      }))
      const leased = yield* object.run(jobs.render.lease({ limit: 2 }))
      expect(leased.map((job) => job.id)).toEqual(["p1", "p2"])
      yield* object.run(jobs.render.complete("p1", leased[0]!.token, { url: "/1" }))
      yield* TestClock.adjust(0)
      expect(reports).toEqual([])
      yield* object.run(jobs.render.complete("p2", leased[1]!.token, { url: "/2" }))
      yield* TestClock.adjust(0)
      expect(reports).toEqual([{
        p1: { queue: "render", state: "completed", result: { url: "/1" } },
        p2: { queue: "render", state: "completed", result: { url: "/2" } }
      }])
      expect(yield* object.run(jobs.report.get("r"))).toMatchObject({ state: "completed" })
      // Children are kept until their parent ran; then `removeOnComplete: { count: 1 }` holds.
      yield* object.run(jobs.render.add({ id: "p3", payload: { page: 3 } }))
      const [third] = yield* object.run(jobs.render.lease())
      yield* object.run(jobs.render.complete("p3", third!.token, { url: "/3" }))
      expect(yield* rows(object, "SELECT id FROM durability_jobs WHERE queue = 'render' AND status = 'completed'")).toEqual([{ id: "p3" }])
    }))
})

describe("external queues: a last lease that expires", () => {
  it.scoped("fails the job for its spent attempts and leaves no lease on it", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_000)
      const object = yield* TestDurability.make({ scheduler: { alarmMinDelayMs: 1_000 } })
      const jobs = yield* object.run(Jobs.make({
        q: Jobs.externalQueue({ leaseMs: 10_000, maxStalled: 5, retries: { maxAttempts: 2 } })
      }))
      yield* object.run(jobs.q.add({ id: "j", payload: null }))
      yield* object.run(jobs.q.lease())
      yield* TestClock.adjust(10_000)
      yield* object.run(jobs.q.lease())
      yield* TestClock.adjust(10_000)
      expect(yield* jobRow(object, "q", "j")).toMatchObject({
        status: "failed",
        attempt: 2,
        stalled: 2,
        leased_until: null,
        worker_id: null,
        last_error_name: "DurableAttemptsExhaustedError"
      })
    }))
})

describe("external queues: a lease shorter than alarmMinDelayMs", () => {
  it.scoped("is reclaimed at its end by the early timer, not at the physical alarm's floor", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(0)
      const object = yield* TestDurability.make() // alarmMinDelayMs 15 000
      const jobs = yield* object.run(Jobs.make({ q: Jobs.externalQueue({ leaseMs: 1_000 }) }))
      yield* object.run(jobs.q.add({ id: "j", payload: null }))
      yield* object.run(jobs.q.lease())
      yield* TestClock.adjust(999)
      expect(yield* jobRow(object, "q", "j")).toMatchObject({ leased_until: 1_000, stalled: 0 })
      yield* TestClock.adjust(1)
      expect(yield* jobRow(object, "q", "j")).toMatchObject({ leased_until: null, stalled: 1 })
      expect((yield* object.run(jobs.q.lease())).map((job) => job.attempt)).toEqual([2])
    }))
})
