/**
 * The Cloudflare Queues transport in workerd with real delivery: `QueuesJobsObject`'s `email` queue
 * (`processing: { queue: env.JOBS_QUEUE }`) leases its due jobs and sends their envelopes; the test
 * worker's `queue` handler runs `jobsConsumer` on them (wrangler.toml: batch 10, timeout 1 s,
 * max_retries 2, a dead-letter queue with `jobsDeadLetterConsumer`). What the handler did and what
 * became of each message are recorded in the owning object; the scenarios poll them (no fixed sleeps)
 * and end with every message settled and the object's alarm gone.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import type { DurableJobInfo } from "../../src/index.js"
import { BATCH_TIMEOUT_MS, type QueuedWork, TRANSPORT } from "./objects/QueuesJobsObject.js"
import { IDLE, type Idleness, isIdle } from "./objects/idle.js"
import { waitFor } from "./support/jobs.js"

// Local delivery waits for the batch timeout (1 s) after each send; a retry is a new lease and a new message.
// A bound on a few deliveries in a row, not a premise: the scenarios poll for what they wait on.
const DELIVERY_MS = 10_000
// What waits for a lease to end (or to be extended past its end) waits a lease first, then deliveries.
const LEASE_MS = TRANSPORT.leaseMs + DELIVERY_MS
// Only ends a hung test: each scenario's own waits (a few of the bounds above) fail first, with a message.
const TEST_MS = 60_000

const fresh = () => {
  const id = env.QUEUES_JOBS_OBJECT.newUniqueId()
  const stub = env.QUEUES_JOBS_OBJECT.get(id)
  const work = (fields: Omit<QueuedWork, "owner"> = {}): QueuedWork => ({ owner: id.toString(), ...fields })
  return { id, stub, work }
}

type Stub = ReturnType<typeof fresh>["stub"]

const TERMINAL = new Set(["completed", "failed", "canceled"])

/** Waits until the job finished; its info then. */
const finished = (stub: Stub, id: string): Promise<DurableJobInfo<QueuedWork> | undefined> =>
  waitFor(
    () => stub.info(id) as Promise<DurableJobInfo<QueuedWork> | undefined>,
    (info) => info !== undefined && TERMINAL.has(info.state),
    DELIVERY_MS
  )

/** Every message acked (none left to redeliver into the next test) and nothing armed. */
const expectSettled = async (stub: Stub, messages: number) => {
  const deliveries = await waitFor(() => stub.deliveries(), (list) => list.length >= messages, DELIVERY_MS)
  expect(deliveries.map((delivery) => delivery.outcome)).toEqual(deliveries.map(() => "ack"))
  await expectIdle(stub)
}

/**
 * No alarm, none being delivered (inside a delivery the platform already reports none), and nothing due later
 * (unfinished jobs, engine timers): a scenario that ended with work still due had an alarm delivered into the
 * pool's storage isolation after it (a `.sqlite-shm` side file).
 */
const expectIdle = async (stub: Stub) => {
  const quiet = (state: Idleness & { readonly due: number }) => isIdle(state) && state.due === 0
  expect(await waitFor(() => stub.idle(), quiet, DELIVERY_MS)).toEqual({ ...IDLE, due: 0 })
}

describe("jobs through Cloudflare Queues", () => {
  it("a job added to a transport queue is leased, sent, consumed and completed", async () => {
    const { stub, work } = fresh()
    expect(await stub.add("welcome", work({ tag: "w" }))).toEqual({ id: "welcome", state: "waiting", deduplicated: false })
    const info = await finished(stub, "welcome")
    expect(info).toMatchObject({ id: "welcome", state: "completed", attempt: 1, result: { tag: "w", attempt: 1 } })
    // The envelope carried the lease's token 1; `start` took it and gave this delivery token 2.
    expect((await stub.calls()).map(({ attempt, id, token }) => ({ id, attempt, token }))).toEqual([{ id: "welcome", attempt: 1, token: 2 }])
    expect((await stub.logs("welcome")).items.map((line) => line.message)).toEqual(["attempt 1 with token 2"])
    expect((await stub.leaseRows()).map(({ id, lease_token, status }) => ({ id, status, lease_token }))).toEqual([
      { id: "welcome", status: "completed", lease_token: 2 }
    ])
    await expectSettled(stub, 1)
    expect((await stub.deliveries()).map(({ job_id, queue_name, token }) => ({ job_id, queue_name, token }))).toEqual([
      { job_id: "welcome", queue_name: "durability-test-jobs", token: 1 }
    ])
  }, TEST_MS)

  it("a handler that throws is retried by the object's policy (a new lease, a new message) and completes", async () => {
    const { stub, work } = fresh()
    await stub.add("flaky", work({ tag: "f", failTimes: 1 }))
    const info = await finished(stub, "flaky")
    expect(info).toMatchObject({ state: "completed", attempt: 2, result: { tag: "f", attempt: 2 } })
    expect((await stub.calls()).map(({ attempt, token }) => ({ attempt, token }))).toEqual([{ attempt: 1, token: 2 }, { attempt: 2, token: 4 }])
    await expectSettled(stub, 2)
    // Both messages acked: the retry was the object's, not Queues' (each lease's envelope: tokens 1 and 3).
    expect((await stub.deliveries()).map((delivery) => delivery.token)).toEqual([1, 3])
  }, TEST_MS)

  it("the same message delivered twice is harmless: the second start is stale and acked", async () => {
    const { id, stub, work } = fresh()
    await stub.add("twice", work({ tag: "t" }))
    const first = await finished(stub, "twice")
    expect(first).toMatchObject({ state: "completed", result: { tag: "t", attempt: 1 } })
    await expectSettled(stub, 1)
    // The same envelope again, by hand, as Queues' at-least-once delivery may.
    await env.JOBS_QUEUE.send({ v: 1, object: id.toString(), queue: "email", jobId: "twice", token: 1 }, { contentType: "json" })
    const deliveries = await waitFor(() => stub.deliveries(), (list) => list.length === 2, DELIVERY_MS)
    expect(deliveries.map(({ outcome, token }) => ({ outcome, token }))).toEqual([{ outcome: "ack", token: 1 }, { outcome: "ack", token: 1 }])
    expect(await stub.calls()).toHaveLength(1)
    expect(await stub.info("twice")).toEqual(first)
    await expectSettled(stub, 2)
  }, TEST_MS)

  it("a stale worker (its token superseded) is fenced on every write", async () => {
    const { stub, work } = fresh()
    // Attempt 1 (envelope token 1, started as 2) fails; attempt 2 (envelope 3, started as 4) holds until the gate opens.
    await stub.add("fenced", work({ tag: "n", failTimes: 1, hold: "fence", holdAttempt: 2 }))
    await waitFor(() => stub.calls(), (calls) => calls.some((call) => call.attempt === 2), DELIVERY_MS)
    const before = await (stub.info("fenced") as Promise<DurableJobInfo<QueuedWork> | undefined>)
    const logsBefore = await stub.logs("fenced")
    expect(before).toMatchObject({ state: "active", attempt: 2 })
    const stale = (op: string, fields: Readonly<Record<string, unknown>> = {}) =>
      stub.jobsCall({ v: 1, op, queue: "email", id: "fenced", token: 1, ...fields })
    const writes = [
      await stale("start"),
      await stale("heartbeat", { extendMs: 60_000, progress: 99 }),
      await stale("log", { message: "from the past" }),
      await stale("complete", { result: { stale: true } }),
      await stale("fail", { error: { name: "Error", message: "stale failure" }, retryable: false }),
      await stale("undelivered", { error: { name: "QueueDeliveryError", message: "stale" } })
    ]
    for (const answer of writes) expect(answer).toMatchObject({ status: "stale", message: expect.stringContaining("token 1") })
    // Nothing changed but what the holder's own heartbeats move (runAt is its lease's end): each extends the lease to
    // its time + leaseMs, never more (the stale heartbeat asked for a minute).
    const { runAt: runAtBefore, ...restBefore } = before!
    const { runAt, ...rest } = (await (stub.info("fenced") as Promise<DurableJobInfo<QueuedWork> | undefined>))!
    expect(rest).toEqual(restBefore)
    expect(runAt).toBeGreaterThanOrEqual(runAtBefore)
    expect(runAt).toBeLessThanOrEqual(Date.now() + TRANSPORT.leaseMs)
    expect(await stub.logs("fenced")).toEqual(logsBefore)
    expect((await stub.leaseRows()).map((row) => row.lease_token)).toEqual([4])

    await stub.open("fence")
    expect(await finished(stub, "fenced")).toMatchObject({ state: "completed", attempt: 2, result: { tag: "n", attempt: 2 } })
    // Settled: the token that held it is stale too.
    expect(await stub.jobsCall({ v: 1, op: "complete", queue: "email", id: "fenced", token: 4, result: { again: true } })).toMatchObject({ status: "stale" })
    expect(await stub.info("fenced")).toMatchObject({ result: { tag: "n", attempt: 2 } })
    await expectSettled(stub, 2)
  }, TEST_MS)

  it("heartbeats keep a job leased past leaseMs: it completes on its first attempt", async () => {
    const { stub, work } = fresh()
    await stub.add("long", work({ tag: "g", hold: "long" }))
    await waitFor(() => stub.calls(), (calls) => calls.length === 1, DELIVERY_MS)
    const [leased] = await stub.leaseRows()
    const first = leased!.leased_until!
    // Extended by heartbeats until the lease's first end has passed by more than a whole lease (the first heartbeat's
    // margin is TRANSPORT.leaseMs's derivation).
    const later = await waitFor(() => stub.leaseRows(), ([row]) => (row?.leased_until ?? 0) > first + TRANSPORT.leaseMs, LEASE_MS)
    expect(later[0]).toMatchObject({ status: "pending", attempt: 1, lease_token: 2 })
    await stub.open("long")
    expect(await finished(stub, "long")).toMatchObject({ state: "completed", attempt: 1, result: { tag: "g", attempt: 1 } })
    expect(await stub.calls()).toHaveLength(1)
    await expectSettled(stub, 1)
  }, TEST_MS)

  it("a job canceled while its consumer runs it: the next heartbeat answers canceled, the handler's signal aborts with JobCanceledError, the consumer acks", async () => {
    const { stub, work } = fresh()
    // Its gate never opens: only the lost lease ends the consumer's work.
    await stub.add("dropped", work({ tag: "d", hold: "never" }))
    await waitFor(() => stub.calls(), (calls) => calls.length === 1, DELIVERY_MS)
    expect(await stub.cancel("dropped")).toBe(true)
    const deliveries = await waitFor(() => stub.deliveries(), (list) => list.length === 1, DELIVERY_MS)
    expect(deliveries.map((delivery) => delivery.outcome)).toEqual(["ack"])
    // The delivery's token (2): its heartbeat was answered "canceled" (protocol version 2), and the handler saw it.
    expect(await stub.aborts()).toEqual([{ id: "dropped", token: 2, reason: "JobCanceledError" }])
    // Fenced by the token: version 2 callers are told it was canceled, version 1 callers that it is stale; a late
    // complete is refused as stale and writes nothing.
    expect(await stub.jobsCall({ v: 2, op: "heartbeat", queue: "email", id: "dropped", token: 2 })).toMatchObject({ status: "canceled" })
    expect(await stub.jobsCall({ v: 1, op: "heartbeat", queue: "email", id: "dropped", token: 2 })).toMatchObject({ status: "stale" })
    expect(await stub.jobsCall({ v: 2, op: "heartbeat", queue: "email", id: "dropped", token: 1 })).toMatchObject({ status: "stale" })
    expect(await stub.jobsCall({ v: 2, op: "complete", queue: "email", id: "dropped", token: 2, result: { late: true } })).toMatchObject({ status: "stale" })
    const info = (await stub.info("dropped")) as DurableJobInfo<QueuedWork> | undefined
    expect(info).toMatchObject({ state: "canceled", attempt: 1 })
    expect(info?.result).toBeUndefined()
    await expectSettled(stub, 1)
  }, TEST_MS)

  it("the Effect consumer (JobsConsumer): a job completes; a job canceled while its handler runs has the handler interrupted", async () => {
    const { stub, work } = fresh()
    await stub.add("fx-done", work({ tag: "e" }), "effectful")
    const done = () => stub.info("fx-done", "effectful") as Promise<DurableJobInfo<QueuedWork> | undefined>
    expect(await waitFor(done, (info) => info?.state === "completed", DELIVERY_MS)).toMatchObject({
      result: { tag: "e", attempt: 1 }
    })
    await stub.add("fx-dropped", work({ tag: "x", hold: "never" }), "effectful")
    await waitFor(() => stub.calls(), (calls) => calls.some((call) => call.id === "fx-dropped"), DELIVERY_MS)
    expect(await stub.cancel("fx-dropped", "effectful")).toBe(true)
    const deliveries = await waitFor(() => stub.deliveries(), (list) => list.length === 2, DELIVERY_MS)
    expect(deliveries.map(({ job_id, outcome }) => ({ job_id, outcome }))).toEqual([
      { job_id: "fx-done", outcome: "ack" },
      { job_id: "fx-dropped", outcome: "ack" }
    ])
    // Interrupted at the heartbeat answered "canceled", with the signal aborted by JobCanceledError.
    expect(await stub.aborts()).toEqual([{ id: "fx-dropped", token: 2, reason: "interrupted:JobCanceledError" }])
    expect(await stub.info("fx-dropped", "effectful")).toMatchObject({ state: "canceled", attempt: 1 })
    await expectSettled(stub, 2)
  }, TEST_MS)

  it("an object its consumer cannot reach: Queues retries, then the dead-letter consumer records the job undelivered", async () => {
    const { stub, work } = fresh()
    // The lossy queue's start always throws, as an unreachable object's RPC does.
    await stub.add("lost", work({ tag: "l" }), "lossy")
    const info = await waitFor(() => stub.info("lost", "lossy") as Promise<DurableJobInfo<QueuedWork> | undefined>, (job) => job?.state === "failed", 20_000)
    expect(info).toMatchObject({
      state: "failed",
      attempt: 1,
      error: { name: "QueueDeliveryError", message: expect.stringContaining("exhausted the queue's max_retries") }
    })
    expect(await stub.deadLetterIds("lossy")).toEqual(["lost"])
    expect(await stub.calls()).toEqual([])
    // max_retries = 2: three deliveries retried on the queue, then one acked on its dead-letter queue.
    const deliveries = await waitFor(() => stub.deliveries(), (list) => list.length >= 4, DELIVERY_MS)
    expect(deliveries.map(({ outcome, queue_name }) => [queue_name, outcome])).toEqual([
      ["durability-test-jobs", "retry"],
      ["durability-test-jobs", "retry"],
      ["durability-test-jobs", "retry"],
      ["durability-test-jobs-dlq", "ack"]
    ])
    await expectIdle(stub)
  }, TEST_MS)
})

describe("jobs through Cloudflare Queues: pause, rate limits, an interrupted send", () => {
  it("a paused transport queue leases and sends nothing; resume sends its jobs", async () => {
    const { stub, work } = fresh()
    await stub.pauseQueue("email")
    await stub.add("held", work({ tag: "h" }))
    // Longer than a local delivery (the batch timeout): nothing was leased or sent, nothing wakes the object. (Only
    // a slower machine than this margin could make the check pass without meaning, never fail it.)
    await new Promise((resolve) => setTimeout(resolve, BATCH_TIMEOUT_MS + 500))
    expect(await stub.deliveries()).toEqual([])
    expect((await stub.leaseRows()).map(({ lease_token, status }) => ({ status, lease_token }))).toEqual([{ status: "pending", lease_token: 0 }])
    expect(await stub.alarmAt()).toBeNull()
    await stub.resumeQueue("email")
    expect(await finished(stub, "held")).toMatchObject({ state: "completed", attempt: 1 })
    await expectSettled(stub, 1)
  }, TEST_MS)

  it("rate limits hold on the transport path: one lease a second, whatever the consumer does", async () => {
    const { stub, work } = fresh()
    for (const id of ["r1", "r2", "r3"]) await stub.add(id, work({ tag: id }), "limited")
    for (const id of ["r1", "r2", "r3"]) {
      const info = () => stub.info(id, "limited") as Promise<DurableJobInfo<QueuedWork> | undefined>
      expect(await waitFor(info, (job) => job?.state === "completed", DELIVERY_MS)).toMatchObject({ attempt: 1 })
    }
    const started = (await stub.leaseRows()).length
    expect(started).toBe(3)
    // The leases (claims) are a second apart: the bucket of 1 refills at 1 a second.
    const infos = await stub.infos("limited") as ReadonlyArray<DurableJobInfo<QueuedWork>>
    const claims = infos.map((info) => info.startedAt ?? 0).sort((a, b) => a - b)
    expect(claims[1]! - claims[0]!).toBeGreaterThanOrEqual(990)
    expect(claims[2]! - claims[1]!).toBeGreaterThanOrEqual(990)
    await expectSettled(stub, 3)
  }, TEST_MS)

  it("a concurrency by key holds on the transport path: one lease out per key, the next sent once it settles", async () => {
    const { stub, work } = fresh()
    await stub.add("k1", work({ tag: "t", hold: "k1-go" }), "keyed")
    await stub.add("k2", work({ tag: "t" }), "keyed")
    await stub.add("o1", work({ tag: "other" }), "keyed")
    // k1 and o1 are sent and run; k2 waits for its key, neither leased nor counted.
    await waitFor(() => stub.calls(), (calls) => ["k1", "o1"].every((id) => calls.some((call) => call.id === id)), DELIVERY_MS)
    const k2 = (await stub.leaseRows()).find((row) => row.id === "k2")
    expect(k2).toMatchObject({ attempt: 0, leased_until: null, waiting_key: 1 })
    await stub.open("k1-go")
    const info = (id: string) => () => stub.info(id, "keyed") as Promise<DurableJobInfo<QueuedWork> | undefined>
    const k1Done = await waitFor(info("k1"), (job) => job?.state === "completed", DELIVERY_MS)
    const k2Done = await waitFor(info("k2"), (job) => job?.state === "completed", DELIVERY_MS)
    expect(k2Done).toMatchObject({ attempt: 1 })
    // k2 was leased (its claim) once k1 had settled, not before.
    expect(k2Done!.startedAt!).toBeGreaterThanOrEqual(k1Done!.finishedAt!)
    await expectSettled(stub, 3)
  }, TEST_MS)

  it("an object reset between its lease and the send: the envelope stays in the outbox and is sent after the reset", async () => {
    const { id, stub: first, work } = fresh()
    await first.failSends()
    await first.add("kept", work({ tag: "k" }), "outboxed")
    // Leased (token 1) and its send refused: the envelope waits in the outbox for its retry.
    const [pending] = await waitFor(() => first.outboxRows(), ([row]) => Number(row?.attempt ?? 0) >= 1, DELIVERY_MS)
    expect(pending).toMatchObject({ key: "outboxed/kept#1", last_error: "Queues unavailable (simulated)" })
    await expect(runInDurableObject(first, (_instance, state) => state.abort("reset by the scenario"))).rejects.toThrow()
    // The new instance's producer works: the scheduler sends the stored envelope (no new lease).
    const stub = env.QUEUES_JOBS_OBJECT.get(id)
    const kept = () => stub.info("kept", "outboxed") as Promise<DurableJobInfo<QueuedWork> | undefined>
    expect(await waitFor(kept, (info) => info?.state === "completed", DELIVERY_MS)).toMatchObject({
      attempt: 1,
      result: { tag: "k", attempt: 1 }
    })
    expect((await stub.deliveries()).map((delivery) => delivery.token)).toEqual([1])
    expect(await stub.outboxRows()).toEqual([])
    await expectSettled(stub, 1)
  }, TEST_MS)

  it("a consumer cut off mid-job: its calls fail (the message is retried, then stale), the lease ends unextended, the job is sent again and completes once", async () => {
    const { stub, work } = fresh()
    // Attempt 1 holds until "cut" opens; nothing its consumer sends after `start` reaches the object.
    await stub.add("cut", work({ tag: "c", hold: "cut" }), "severed")
    const severed = () => stub.info("cut", "severed") as Promise<DurableJobInfo<QueuedWork> | undefined>
    await waitFor(() => stub.calls(), (calls) => calls.length === 1, DELIVERY_MS)
    // Its first call after `start` cannot reach the object: the consumer asks Queues to redeliver, and the
    // redelivery's `start` is stale (the token was taken). The lease (TRANSPORT.leaseMs) ends unextended and is reclaimed.
    await waitFor(() => stub.leaseRows(), ([row]) => Number(row?.attempt ?? 0) >= 2, LEASE_MS)
    await stub.open("severed-reachable")
    await stub.open("cut")
    const done = await waitFor(severed, (info) => info?.state === "completed", DELIVERY_MS)
    // Completed once, by the attempt that held the lease then.
    expect(done?.attempt).toBeGreaterThanOrEqual(2)
    expect(done?.result).toEqual({ tag: "c", attempt: done?.attempt })
    const attempts = (await stub.calls()).map(({ attempt }) => attempt)
    expect(attempts[0]).toBe(1)
    expect(attempts.every((attempt, index) => index === 0 || attempt > attempts[index - 1]!)).toBe(true)
    // Idle at the end: every message (the retried one included, on its redelivery) finally acked.
    const acked = (list: ReadonlyArray<{ readonly message_id: string; readonly outcome: string }>) =>
      list.length >= 2 && list.every((delivery) => list.some((other) => other.message_id === delivery.message_id && other.outcome === "ack"))
    const outcomes = await waitFor(() => stub.deliveries(), acked, DELIVERY_MS)
    expect(outcomes.some((delivery) => delivery.outcome === "retry")).toBe(true)
    await expectIdle(stub)
  }, TEST_MS)
})
