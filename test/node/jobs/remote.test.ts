/**
 * The remote half on Effect's clock: the jobs protocol's object side (`serve`: cancel answered
 * `"canceled"` from version 2, `"stale"` to version 1), a canceled job refusing its worker's writes,
 * a shard's page in one read, and the Effect `JobsConsumer` under `TestClock` (heartbeat timing, the
 * lease's end, cancellation interrupting the handler, a stale complete refused), against a synchronous
 * fake client and against a real in-memory object through `serve`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Either, Fiber, Ref, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as JobsConsumer from "../../../src/jobs/JobsConsumer.js"
import * as Protocol from "../../../src/jobs/JobsProtocol.js"
import * as QueueCalls from "../../../src/jobs/queue.js"
import { serve } from "../../../src/jobs/serve.js"
import { StaleLeaseError } from "../../../src/shared/Errors.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { dump, jobRow } from "./support.js"

const setup = Effect.gen(function*() {
  yield* TestClock.setTime(1_000)
  const object = yield* TestDurability.make({ scheduler: { alarmMinDelayMs: 1_000 } })
  const jobs = yield* object.run(Jobs.make({
    email: Jobs.externalQueue<{ readonly to: string }, { readonly sent: string }>({ leaseMs: 3_000 })
  }))
  return { object, jobs }
})

const QUEUES = new Set(["email"])

describe("cancel reaches a lease held outside the object", () => {
  it.scoped("heartbeat and log are refused as canceled (fenced by the token); a late complete is stale; nothing is written", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup
      yield* object.run(jobs.email.add({ id: "j", payload: { to: "ann" } }))
      const [lease] = yield* object.run(jobs.email.lease())
      expect(yield* object.run(jobs.email.cancel("j", "user asked"))).toBe(true)
      const before = yield* dump(object)
      const beat = yield* Effect.flip(object.run(jobs.email.heartbeat("j", lease!.token, { progress: 50 })))
      expect(beat).toBeInstanceOf(StaleLeaseError)
      expect(beat).toMatchObject({ _tag: "StaleLeaseError", token: lease!.token, canceled: { reason: "user asked" } })
      expect(beat.message).toContain("was canceled (user asked)")
      const logged = yield* Effect.flip(object.run(jobs.email.log("j", lease!.token, "late line")))
      expect(logged).toMatchObject({ _tag: "StaleLeaseError", canceled: { reason: "user asked" } })
      // Another token than the one that held the job when it was canceled: plain stale.
      const other = yield* Effect.flip(object.run(jobs.email.heartbeat("j", lease!.token + 1)))
      expect(other).toMatchObject({ _tag: "StaleLeaseError" })
      expect((other as StaleLeaseError).canceled).toBeUndefined()
      const late = yield* Effect.flip(object.run(jobs.email.complete("j", lease!.token, { sent: "late" })))
      expect(late).toMatchObject({ _tag: "StaleLeaseError" })
      expect((late as StaleLeaseError).canceled).toBeUndefined()
      expect(yield* dump(object)).toEqual(before)
      expect(yield* jobRow(object, "email", "j")).toMatchObject({ status: "canceled", result: null, cancel_reason: "user asked" })
    }))

  it.scoped("serve answers a canceled lease \"canceled\" to version 2 and \"stale\" to version 1", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup
      yield* object.run(jobs.email.add({ id: "j", payload: { to: "ann" } }))
      const [lease] = yield* object.run(jobs.email.lease())
      const call = (v: number, op: "heartbeat" | "log" | "complete") =>
        object.run(serve(
          jobs,
          Protocol.decodeCall(
            { v, op, queue: "email", id: "j", token: lease!.token, ...(op === "log" ? { message: "x" } : op === "complete" ? { result: { sent: "x" } } : {}) },
            QUEUES
          )
        ))
      expect(yield* call(2, "heartbeat")).toEqual({ status: "ok", leaseUntil: 4_000 })
      yield* object.run(jobs.email.cancel("j", "no longer needed"))
      expect(yield* call(2, "heartbeat")).toMatchObject({ status: "canceled", reason: "no longer needed" })
      expect(yield* call(2, "log")).toMatchObject({ status: "canceled", reason: "no longer needed" })
      expect(yield* call(1, "heartbeat")).toMatchObject({ status: "stale" })
      expect(yield* call(2, "complete")).toMatchObject({ status: "stale" })
    }))
})

describe("a shard's page for the router", () => {
  it.scoped("is one read of the jobs table, each item with the cursor after it", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup
      for (let i = 0; i < 7; i++) yield* object.run(jobs.email.add({ id: `j${i}`, payload: { to: `${i}` } }))
      const pageReads = () => object.storage.statements.filter((sql) => sql.includes("AND seq > ?")).length
      const before = pageReads()
      const first = yield* object.run(QueueCalls.shardPage(jobs.email as QueueCalls.Queue<unknown, unknown>, { limit: 5 }))
      // Was one list call per item (5 reads); now one for the page.
      expect(pageReads() - before).toBe(1)
      expect(first.more).toBe(true)
      expect(first.items.map((item) => item.info.id)).toEqual(["j0", "j1", "j2", "j3", "j4"])
      // Any item's cursor reads on right after it.
      const after = first.items[2]!.after
      const rest = yield* object.run(jobs.email.list({ limit: 10, cursor: after! }))
      expect(rest.items.map((info) => info.id)).toEqual(["j3", "j4", "j5", "j6"])
      const last = yield* object.run(QueueCalls.shardPage(jobs.email as QueueCalls.Queue<unknown, unknown>, { limit: 5, cursor: first.items[4]!.after! }))
      expect(last).toMatchObject({ more: false })
      expect(last.items.map((item) => [item.info.id, item.after])).toEqual([["j5", expect.any(String)], ["j6", undefined]])
    }))
})

// ---------------------------------------------------------------------------------------------
// The Effect consumer under TestClock

const LEASE_MS = 3_000

type Answer = (call: Protocol.Versioned<Protocol.LeaseCall>, now: number) => Protocol.LeaseAnswer | "unreachable"

const normal: Answer = (call, now) => {
  switch (call.op) {
    case "start":
      return { status: "started", token: 8, payload: { to: "ann" }, attempt: 1, leaseUntil: now + LEASE_MS, leaseMs: LEASE_MS, idempotencyKey: "k" }
    case "heartbeat":
      return { status: "ok", leaseUntil: now + LEASE_MS }
    default:
      return { status: "ok" }
  }
}

/** A synchronous fake client (TestClock sees every sleep): records each call with the clock's time. */
const fakeClient = (answer: Answer) => {
  const calls: Array<{ readonly at: number; readonly call: Protocol.Versioned<Protocol.LeaseCall> }> = []
  const client: JobsConsumer.ClientShape = {
    resolve: () =>
      Either.right((call) =>
        Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) => {
          calls.push({ at: now, call })
          const answered = answer(call, now)
          return answered === "unreachable"
            ? Effect.fail(new JobsConsumer.ObjectUnreachableError({ message: "Network connection lost.", cause: new Error("Network connection lost.") }))
            : Effect.succeed(answered)
        })
      )
  }
  return { client, calls, ops: () => calls.map(({ call }) => call.op), beats: () => calls.filter(({ call }) => call.op === "heartbeat").map(({ at }) => at) }
}

const message = () => {
  const outcomes: Array<string> = []
  return {
    id: "m1",
    body: { v: 1, object: "obj-1", queue: "email", jobId: "j1", token: 7 },
    attempts: 1,
    outcomes,
    ack: () => void outcomes.push("ack"),
    retry: (options?: { readonly delaySeconds?: number }) => void outcomes.push(`retry:${options?.delaySeconds}`)
  }
}

const batchOf = (...messages: ReadonlyArray<ReturnType<typeof message>>) => ({ queue: "jobs-transport", messages })

describe("JobsConsumer under TestClock", () => {
  it.scoped("heartbeats every leaseMs / 3 on the clock, and stop once the handler's outcome is sent", () =>
    Effect.gen(function*() {
      const fake = fakeClient(normal)
      const release = yield* Deferred.make<string>()
      const consume = JobsConsumer.consume<unknown>({ handlers: { email: () => Deferred.await(release) }, log: () => undefined })
      const one = message()
      const fiber = yield* Effect.fork(Effect.provideService(consume(batchOf(one), {}), JobsConsumer.Client, fake.client))
      yield* TestClock.adjust(999)
      expect(fake.ops()).toEqual(["start"])
      yield* TestClock.adjust(1)
      expect(fake.beats()).toEqual([1_000])
      yield* TestClock.adjust(9_000)
      // At 1 s, 2 s, … 10 s: the lease never ends while the object answers.
      expect(fake.beats()).toEqual([1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 7_000, 8_000, 9_000, 10_000])
      expect(fake.calls.find(({ call }) => call.op === "heartbeat")?.call).toMatchObject({ v: Protocol.VERSION, token: 8, extendMs: LEASE_MS })
      yield* Deferred.succeed(release, "sent")
      yield* Fiber.join(fiber)
      expect(fake.ops().at(-1)).toBe("complete")
      expect(fake.calls.at(-1)?.call).toMatchObject({ op: "complete", token: 8, result: "sent" })
      const count = fake.calls.length
      yield* TestClock.adjust(10_000)
      expect(fake.calls).toHaveLength(count)
      expect(Chunk.toReadonlyArray(yield* TestClock.sleeps())).toEqual([])
      expect(one.outcomes).toEqual(["ack"])
    }))

  it.scoped("heartbeats that cannot reach the object: the handler is interrupted when the lease ends, nothing is settled", () =>
    Effect.gen(function*() {
      const fake = fakeClient((call, now) => call.op === "heartbeat" ? "unreachable" : normal(call, now))
      const interrupted = yield* Ref.make(false)
      let signal: AbortSignal | undefined
      const consume = JobsConsumer.consume<unknown>({
        handlers: { email: (job) => Effect.onInterrupt(Effect.sync(() => (signal = job.signal)).pipe(Effect.zipRight(Effect.never)), () => Ref.set(interrupted, true)) },
        log: () => undefined
      })
      const one = message()
      const fiber = yield* Effect.fork(Effect.provideService(consume(batchOf(one), {}), JobsConsumer.Client, fake.client))
      yield* TestClock.adjust(LEASE_MS - 1)
      expect(yield* Ref.get(interrupted)).toBe(false)
      expect(fake.beats()).toEqual([1_000, 2_000])
      yield* TestClock.adjust(1)
      yield* Fiber.join(fiber)
      expect(yield* Ref.get(interrupted)).toBe(true)
      expect(signal?.aborted).toBe(true)
      expect((signal?.reason as Error).name).toBe("StaleLeaseError")
      expect((signal?.reason as Error).message).toContain("before a heartbeat reached the object")
      expect(fake.ops().filter((op) => op === "complete" || op === "fail")).toEqual([])
      expect(one.outcomes).toEqual(["ack"])
    }))

  it.scoped("a heartbeat answered \"canceled\" interrupts the handler; its signal's reason is JobCanceledError; nothing more is sent", () =>
    Effect.gen(function*() {
      let canceled = false
      const fake = fakeClient((call, now) =>
        call.op === "heartbeat" && canceled ? { status: "canceled", message: "Job \"j1\" was canceled (user asked)", reason: "user asked" } : normal(call, now)
      )
      const interrupted = yield* Ref.make(false)
      const seen: Array<JobsConsumer.QueuedJob<never>> = []
      const consume = JobsConsumer.consume<unknown>({
        handlers: {
          email: (job) => Effect.onInterrupt(Effect.sync(() => seen.push(job)).pipe(Effect.zipRight(Effect.never)), () => Ref.set(interrupted, true))
        },
        log: () => undefined
      })
      const one = message()
      const fiber = yield* Effect.fork(Effect.provideService(consume(batchOf(one), {}), JobsConsumer.Client, fake.client))
      yield* TestClock.adjust(1_000)
      expect(yield* Ref.get(interrupted)).toBe(false)
      canceled = true
      yield* TestClock.adjust(1_000)
      yield* Fiber.join(fiber)
      expect(yield* Ref.get(interrupted)).toBe(true)
      const [job] = seen
      expect(job!.signal.aborted).toBe(true)
      expect(job!.signal.reason).toMatchObject({ name: "JobCanceledError", message: "Job \"j1\" was canceled (user asked)" })
      expect(fake.ops()).toEqual(["start", "heartbeat", "heartbeat"])
      expect(one.outcomes).toEqual(["ack"])
      // A late write is refused here, without a call; it says the job was canceled.
      const late = yield* Effect.flip(job!.progress(90))
      expect(late).toMatchObject({ _tag: "StaleLeaseError", canceled: { reason: "user asked" } })
      expect(fake.calls).toHaveLength(3)
      yield* TestClock.adjust(10_000)
      expect(fake.calls).toHaveLength(3)
    }))

  it.scoped("a complete answered stale is final: acked, not retried", () =>
    Effect.gen(function*() {
      const fake = fakeClient((call, now) => call.op === "complete" ? { status: "stale", message: "leased again" } : normal(call, now))
      const consume = JobsConsumer.consume<unknown>({ handlers: { email: () => Effect.succeed("done") }, log: () => undefined })
      const one = message()
      yield* Effect.provideService(consume(batchOf(one), {}), JobsConsumer.Client, fake.client)
      expect(fake.ops()).toEqual(["start", "complete"])
      expect(one.outcomes).toEqual(["ack"])
    }))
})

describe("JobsConsumer against an object (serve), under TestClock", () => {
  /** A client whose calls run `serve` on the object, as its RPC method would. */
  const objectClient = (object: TestDurability.TestObject, jobs: Parameters<typeof serve>[0]): JobsConsumer.ClientShape => ({
    resolve: () =>
      Either.right((call) =>
        Effect.mapError(
          object.run(Effect.suspend(() => serve(jobs, Protocol.decodeCall(call, QUEUES)))),
          (cause) => new JobsConsumer.ObjectUnreachableError({ message: String(cause), cause })
        ) as Effect.Effect<Protocol.LeaseAnswer, JobsConsumer.ObjectUnreachableError>
      )
  })

  it.scoped("a job canceled while its handler runs outside the object: the next heartbeat interrupts the handler; the job stays canceled", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup
      yield* object.run(jobs.email.add({ id: "j", payload: { to: "ann" } }))
      const [lease] = yield* object.run(jobs.email.lease({ leaseMs: 3_000 }))
      const running = yield* Deferred.make<void>()
      const interrupted = yield* Ref.make(false)
      const consume = JobsConsumer.consume<unknown>({
        handlers: {
          email: () => Effect.onInterrupt(Effect.zipRight(Deferred.succeed(running, undefined), Effect.never), () => Ref.set(interrupted, true))
        },
        log: () => undefined
      })
      const one = { ...message(), body: { v: 1, object: "obj", queue: "email", jobId: "j", token: lease!.token } }
      const fiber = yield* Effect.fork(Effect.provideService(consume(batchOf(one), {}), JobsConsumer.Client, objectClient(object, jobs)))
      yield* Deferred.await(running)
      // The first beat extends the lease on the object.
      yield* TestClock.adjust(1_000)
      expect(yield* jobRow(object, "email", "j")).toMatchObject({ status: "pending", leased_until: 1_000 + 1_000 + 3_000 })
      expect(yield* object.run(jobs.email.cancel("j", "user asked"))).toBe(true)
      expect(yield* Ref.get(interrupted)).toBe(false)
      yield* TestClock.adjust(1_000)
      yield* Fiber.join(fiber)
      expect(yield* Ref.get(interrupted)).toBe(true)
      expect(one.outcomes).toEqual(["ack"])
      expect(yield* object.run(jobs.email.get("j"))).toMatchObject({ state: "canceled" })
      expect(yield* jobRow(object, "email", "j")).toMatchObject({ status: "canceled", result: null })
    }))
})

describe("cancel reaches a lease held outside the object: the promise face", () => {
  it("DurabilityJobs: heartbeat after cancel rejects with StaleLeaseError whose canceled names the reason; complete is stale", async () => {
    const { DurabilityJobs, StaleLeaseError: PromiseStaleLeaseError } = await import("../../../src/index.js")
    const { memoryContext } = await import("../support/promise.js")
    const jobs = new DurabilityJobs({ context: await memoryContext(), log: () => undefined, queues: { email: { processing: "external", leaseMs: 5_000 } } })
    await jobs.email.add({ id: "a", payload: { to: "x" } })
    const [lease] = await jobs.email.lease()
    expect(await jobs.email.cancel("a", "unsubscribed")).toBe(true)
    const beat = await jobs.email.heartbeat("a", lease!.token).catch((error: unknown) => error)
    expect(beat).toBeInstanceOf(PromiseStaleLeaseError)
    expect((beat as InstanceType<typeof PromiseStaleLeaseError>).canceled).toEqual({ reason: "unsubscribed" })
    const late = await jobs.email.complete("a", lease!.token, { sent: true }).catch((error: unknown) => error)
    expect(late).toBeInstanceOf(PromiseStaleLeaseError)
    expect((late as InstanceType<typeof PromiseStaleLeaseError>).canceled).toBeUndefined()
    expect(await jobs.email.get("a")).toMatchObject({ state: "canceled" })
  })
})

describe("Jobs.serve (the Effect face's serve)", () => {
  it.scoped("answers protocol calls; a call that does not decode fails with InvalidInputError naming the field, storage unchanged", () =>
    Effect.gen(function*() {
      const { jobs, object } = yield* setup
      expect(yield* object.run(Jobs.serve(jobs, { v: 2, op: "add", queue: "email", job: { id: "a", payload: { to: "ann" } } }))).toMatchObject({
        id: "a",
        state: "waiting"
      })
      const before = yield* dump(object)
      const refused = yield* Effect.flip(object.run(Jobs.serve(jobs, { v: 2, op: "page", queue: "email", page: { limit: 0 } })))
      expect(refused).toMatchObject({ _tag: "InvalidInputError", field: "page.limit", kind: "range" })
      const unknown = yield* Effect.flip(object.run(Jobs.serve(jobs, { v: 2, op: "add", queue: "sms", job: { payload: 1 } })))
      expect(unknown).toMatchObject({ _tag: "InvalidInputError", field: "queue" })
      const version = yield* Effect.flip(object.run(Jobs.serve(jobs, { v: 9, op: "counts", queue: "email" })))
      expect(version.message).toContain("must have v: 1 or 2")
      expect(yield* dump(object)).toEqual(before)
      const page = yield* object.run(Jobs.serve(jobs, { v: 2, op: "page", queue: "email", page: { limit: 10 } }))
      expect(page).toMatchObject({ items: [{ info: { id: "a" } }], more: false })
    }))
})

describe("JobsConsumer.Client.layer over a namespace", () => {
  it.live("reaches the envelope's object through its jobsCall method and completes the job", () =>
    Effect.gen(function*() {
      const calls: Array<Record<string, unknown>> = []
      const namespace = {
        idFromString: (id: string) => ({ id }),
        get: () => ({
          jobsCall: (call: Record<string, unknown>) => {
            calls.push(call)
            return Promise.resolve(call.op === "start" ? normal(call as never, Date.now()) : { status: "ok" })
          }
        })
      }
      const consume = JobsConsumer.consume<unknown>({ handlers: { email: (job) => Effect.succeed(`sent to ${(job.payload as { to: string }).to}`) }, log: () => undefined })
      const one = message()
      yield* consume(batchOf(one), {}).pipe(Effect.provide(JobsConsumer.Client.layer(namespace)))
      expect(calls.map((call) => [call.op, call.token])).toEqual([["start", 7], ["complete", 8]])
      expect(calls[1]).toMatchObject({ v: Protocol.VERSION, queue: "email", id: "j1", result: "sent to ann" })
      expect(one.outcomes).toEqual(["ack"])
    }))
})
