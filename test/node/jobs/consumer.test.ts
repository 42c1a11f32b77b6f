/**
 * The Queues consumer of transport queues (`jobsConsumer`, `jobsDeadLetterConsumer`) against a fake
 * namespace, stub and batch: what it calls on the object, when it acks and when it retries, the
 * heartbeat cadence and the lost lease under vitest's fake timers (no real waiting), and malformed
 * messages. The object's side (leases, fencing) is tested in leases.test.ts and in workerd.
 */
import { afterEach, beforeEach, describe, expect, it } from "@effect/vitest"
import { Context, Effect } from "effect"
import { vi } from "vitest"
import { type DurableQueuedJob, jobsConsumer, jobsDeadLetterConsumer, NonRetryableError } from "../../../src/index.js"
import * as JobsConsumer from "../../../src/jobs/JobsConsumer.js"

type Call = Readonly<Record<string, unknown>> & { readonly op: string }
type Answer = (call: Call) => unknown

const LEASE_MS = 3_000
const START = 1_000_000

/** The object's default answers: a started lease of LEASE_MS, heartbeats extend it, writes succeed. */
const normal: Answer = (call) => {
  switch (call.op) {
    case "start":
      return { status: "started", token: 8, payload: { to: "ann" }, attempt: 2, leaseUntil: Date.now() + LEASE_MS, leaseMs: LEASE_MS, idempotencyKey: "idem-1" }
    case "heartbeat":
      return { status: "ok", leaseUntil: Date.now() + Number(call.extendMs ?? LEASE_MS) }
    default:
      return { status: "ok" }
  }
}

/** Objects by id string ("obj-…"); any other id is refused as `idFromString` refuses a foreign one. */
const fakeObjects = (answer: Answer = normal) => {
  const calls: Array<Call & { readonly object: string }> = []
  const namespace = {
    idFromString: (id: string) => {
      if (!id.startsWith("obj-")) throw new TypeError(`Invalid Durable Object ID: ${id}`)
      return { id }
    },
    get: (id: { readonly id: string }) => ({
      jobsCall: async (call: Call) => {
        calls.push({ ...call, object: id.id })
        return answer(call)
      }
    })
  }
  return { calls, namespace, ops: () => calls.map((call) => call.op) }
}

interface FakeMessage {
  readonly id: string
  readonly body: unknown
  readonly attempts: number
  readonly outcomes: Array<string>
  ack(): void
  retry(options?: { readonly delaySeconds?: number }): void
}

const messageOf = (body: unknown, id = "m1"): FakeMessage => {
  const outcomes: Array<string> = []
  return {
    id,
    body,
    attempts: 1,
    outcomes,
    ack: () => void outcomes.push("ack"),
    retry: (options) => void outcomes.push(`retry:${options?.delaySeconds}`)
  }
}

const envelope = (fields: Readonly<Record<string, unknown>> = {}) => ({ v: 1, object: "obj-1", queue: "email", jobId: "j1", token: 7, ...fields })

const batchOf = (...messages: ReadonlyArray<FakeMessage>) => ({ queue: "durability-test-jobs", messages })

interface Env {
  readonly objects: ReturnType<typeof fakeObjects>["namespace"]
}

const deferred = <A = void>() => {
  let resolve!: (value: A) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<A>((ok, fail) => {
    resolve = ok
    reject = fail
  })
  return { promise, resolve, reject }
}

/** Lets every settled promise's callbacks run (no timer advances). */
const flush = () => vi.advanceTimersByTimeAsync(0)

beforeEach(() => {
  vi.useFakeTimers({ now: START })
})

afterEach(() => {
  vi.useRealTimers()
})

const setup = (answer?: Answer, handlers?: Readonly<Record<string, (job: DurableQueuedJob<{ to: string }>) => unknown>>) => {
  const objects = fakeObjects(answer)
  const logged: Array<Readonly<Record<string, unknown>>> = []
  const handled: Array<DurableQueuedJob<{ to: string }>> = []
  const consumer = jobsConsumer({
    namespace: (env: Env) => env.objects,
    handlers: handlers ?? { email: (job: DurableQueuedJob<{ to: string }>) => (handled.push(job), { sent: job.payload.to }) },
    log: (entry) => void logged.push(entry)
  })
  const env: Env = { objects: objects.namespace }
  return { objects, logged, handled, consumer, env }
}

describe("jobsConsumer: outcomes", () => {
  it("a stale start is acked and runs no handler", async () => {
    const { consumer, env, handled, objects } = setup((call) => call.op === "start" ? { status: "stale", message: "leased again" } : normal(call))
    const message = messageOf(envelope())
    await consumer(batchOf(message), env)
    expect(objects.calls).toEqual([{ v: 2, op: "start", queue: "email", id: "j1", token: 7, object: "obj-1" }])
    expect(handled).toEqual([])
    expect(message.outcomes).toEqual(["ack"])
  })

  it("a handler's value completes the job, then the message is acked", async () => {
    const { consumer, env, handled, objects } = setup()
    const message = messageOf(envelope())
    await consumer(batchOf(message), env)
    expect(objects.ops()).toEqual(["start", "complete"])
    // After `start`, the calls carry the token it gave this delivery (8), not the envelope's (7).
    expect(objects.calls[1]).toEqual({ v: 2, op: "complete", queue: "email", id: "j1", token: 8, result: { sent: "ann" }, object: "obj-1" })
    expect(message.outcomes).toEqual(["ack"])
    const [job] = handled
    expect(job).toMatchObject({
      id: "j1",
      queue: "email",
      object: "obj-1",
      payload: { to: "ann" },
      attempt: 2,
      idempotencyKey: "idem-1",
      token: 8,
      leaseUntil: START + LEASE_MS
    })
    expect(job!.signal.aborted).toBe(false)
  })

  it("a throw fails the attempt (retryable: false for NonRetryableError), then acks", async () => {
    const { consumer, env, objects } = setup(undefined, {
      email: (job) => {
        if (job.payload.to === "ann") throw new NonRetryableError("550 mailbox unavailable")
        throw new RangeError("try later")
      }
    })
    const first = messageOf(envelope())
    await consumer(batchOf(first), env)
    expect(objects.calls[1]).toMatchObject({ op: "fail", error: { name: "NonRetryableError", message: "550 mailbox unavailable" }, retryable: false })
    expect(first.outcomes).toEqual(["ack"])

    const other = setup((call) => call.op === "start" ? { ...(normal(call) as object), payload: { to: "bob" } } : normal(call), {
      email: () => Promise.reject(new RangeError("try later"))
    })
    const second = messageOf(envelope())
    await other.consumer(batchOf(second), other.env)
    const fail = other.objects.calls[1]!
    expect(fail).toMatchObject({ op: "fail", error: { name: "RangeError", message: "try later" } })
    // The object's retry policy decides.
    expect("retryable" in fail).toBe(false)
    expect(second.outcomes).toEqual(["ack"])
  })

  it("the handler is given the Worker's env", async () => {
    const objects = fakeObjects()
    const seen: Array<unknown> = []
    const consumer = jobsConsumer({
      namespace: (env: Env & { readonly API_KEY: string }) => env.objects,
      handlers: { email: (_job: DurableQueuedJob, env: { readonly API_KEY: string }) => void seen.push(env.API_KEY) },
      log: () => {}
    })
    await consumer(batchOf(messageOf(envelope())), { objects: objects.namespace, API_KEY: "k-1" })
    expect(seen).toEqual(["k-1"])
  })

  it("a thrown non-Error is sent as an Error with its text", async () => {
    const { consumer, env, objects } = setup(undefined, { email: () => Promise.reject("plain text") })
    await consumer(batchOf(messageOf(envelope())), env)
    expect(objects.calls[1]).toMatchObject({ op: "fail", error: { name: "Error", message: "plain text" } })
  })

  it("a stale complete or fail is acked (another holder has the job; nothing was written)", async () => {
    const { consumer, env, objects } = setup((call) => call.op === "complete" ? { status: "stale", message: "reclaimed" } : normal(call))
    const message = messageOf(envelope())
    await consumer(batchOf(message), env)
    expect(objects.ops()).toEqual(["start", "complete"])
    expect(message.outcomes).toEqual(["ack"])
  })

  it("a result the object refuses (TypeError/RangeError) fails the attempt with the refusal", async () => {
    const { consumer, env, objects } = setup((call) => {
      if (call.op === "complete") throw new RangeError("result is larger than 64 KiB")
      return normal(call)
    })
    const message = messageOf(envelope())
    await consumer(batchOf(message), env)
    expect(objects.ops()).toEqual(["start", "complete", "fail"])
    expect(objects.calls[2]).toMatchObject({ error: { name: "RangeError", message: "result is larger than 64 KiB" } })
    expect(message.outcomes).toEqual(["ack"])
  })

  it("progress and log go to the object under the token, extending the lease", async () => {
    const { consumer, env, objects } = setup(undefined, {
      email: async (job) => {
        await job.progress({ step: 1 })
        await job.log("rendered")
        return "done"
      }
    })
    await consumer(batchOf(messageOf(envelope())), env)
    expect(objects.calls.map(({ object: _o, ...call }) => call)).toEqual([
      { v: 2, op: "start", queue: "email", id: "j1", token: 7 },
      { v: 2, op: "heartbeat", queue: "email", id: "j1", token: 8, extendMs: LEASE_MS, progress: { step: 1 } },
      { v: 2, op: "log", queue: "email", id: "j1", token: 8, message: "rendered" },
      { v: 2, op: "complete", queue: "email", id: "j1", token: 8, result: "done" }
    ])
  })

  it("a batch's messages run concurrently, each acked on its own", async () => {
    const gate = deferred()
    const order: Array<string> = []
    const { consumer, env, objects } = setup(undefined, {
      email: async (job) => {
        order.push(`start ${job.id}`)
        // j1 waits for j2, so the batch only ends if both run at once.
        if (job.id === "j1") await gate.promise
        else gate.resolve()
        order.push(`end ${job.id}`)
        return job.id
      }
    })
    const one = messageOf(envelope(), "m1")
    const two = messageOf(envelope({ jobId: "j2", object: "obj-2" }), "m2")
    await consumer(batchOf(one, two), env)
    expect(order).toEqual(["start j1", "start j2", "end j2", "end j1"])
    expect(objects.calls.filter((call) => call.op === "complete").map((call) => [call.object, call.result]).sort()).toEqual([["obj-1", "j1"], ["obj-2", "j2"]])
    expect([one.outcomes, two.outcomes]).toEqual([["ack"], ["ack"]])
  })
})

describe("jobsConsumer: heartbeats and the lost lease", () => {
  it("heartbeats every leaseMs / 3, each extending by leaseMs, and stop when the job settles", async () => {
    const done = deferred<string>()
    const seen: Array<number> = []
    const { consumer, env, objects } = setup(undefined, {
      email: (job) => {
        seen.push(job.leaseUntil)
        return done.promise
      }
    })
    const message = messageOf(envelope())
    const running = consumer(batchOf(message), env)
    await flush()
    expect(objects.ops()).toEqual(["start"])
    await vi.advanceTimersByTimeAsync(999)
    expect(objects.ops()).toEqual(["start"])
    await vi.advanceTimersByTimeAsync(1)
    expect(objects.ops()).toEqual(["start", "heartbeat"])
    expect(objects.calls[1]).toMatchObject({ extendMs: LEASE_MS })
    await vi.advanceTimersByTimeAsync(9_000)
    // At 1 s, 2 s, … 10 s: the lease never ends while the object answers.
    expect(objects.ops().filter((op) => op === "heartbeat")).toHaveLength(10)
    done.resolve("sent")
    await running
    expect(objects.ops().slice(-1)).toEqual(["complete"])
    const count = objects.calls.length
    await vi.advanceTimersByTimeAsync(10_000)
    expect(objects.calls).toHaveLength(count)
    expect(message.outcomes).toEqual(["ack"])
    expect(seen).toEqual([START + LEASE_MS])
    expect(vi.getTimerCount()).toBe(0)
  })

  it("the job's leaseUntil follows the heartbeats", async () => {
    const done = deferred()
    let job: DurableQueuedJob<{ to: string }> | undefined
    const { consumer, env } = setup(undefined, {
      email: (received) => {
        job = received
        return done.promise
      }
    })
    const running = consumer(batchOf(messageOf(envelope())), env)
    await vi.advanceTimersByTimeAsync(2_000)
    expect(job!.leaseUntil).toBe(START + 2_000 + LEASE_MS)
    done.resolve()
    await running
  })

  it("a stale heartbeat aborts the signal with StaleLeaseError; nothing more is sent; the message is acked", async () => {
    let beats = 0
    let job: DurableQueuedJob<{ to: string }> | undefined
    const never = deferred()
    const { consumer, env, objects } = setup((call) => {
      if (call.op === "heartbeat" && ++beats === 2) return { status: "stale", message: "The lease of job \"j1\" … no longer holds the job" }
      return normal(call)
    }, {
      email: (received) => {
        job = received
        // Ignores its signal: the consumer does not wait for it once the lease is lost.
        return never.promise
      }
    })
    const message = messageOf(envelope())
    const running = consumer(batchOf(message), env)
    await vi.advanceTimersByTimeAsync(2_000)
    await running
    expect(job!.signal.aborted).toBe(true)
    const reason = job!.signal.reason as Error
    expect(reason.name).toBe("StaleLeaseError")
    expect(reason.message).toContain("no longer holds the job")
    expect(objects.ops()).toEqual(["start", "heartbeat", "heartbeat"])
    expect(message.outcomes).toEqual(["ack"])
    await vi.advanceTimersByTimeAsync(10_000)
    expect(objects.calls).toHaveLength(3)
    // A late write of the handler is refused here, without a call.
    await expect(job!.progress(50)).rejects.toMatchObject({ name: "StaleLeaseError" })
    await expect(job!.log("late")).rejects.toMatchObject({ name: "StaleLeaseError" })
    expect(objects.calls).toHaveLength(3)
    never.resolve()
  })

  it("a stale answer to the handler's own progress rejects it and aborts the signal", async () => {
    const { consumer, env, objects } = setup((call) => call.op === "heartbeat" ? { status: "stale", message: "settled elsewhere" } : normal(call), {
      email: async (job) => {
        await job.progress(10)
        return "unreachable"
      }
    })
    const message = messageOf(envelope())
    await consumer(batchOf(message), env)
    expect(objects.ops()).toEqual(["start", "heartbeat"])
    expect(message.outcomes).toEqual(["ack"])
  })

  it("heartbeats that cannot reach the object: the signal is aborted when the lease ends", async () => {
    let job: DurableQueuedJob<{ to: string }> | undefined
    const { consumer, env, objects } = setup((call) => {
      if (call.op === "heartbeat") throw new Error("Network connection lost.")
      return normal(call)
    }, {
      email: (received) => {
        job = received
        return new Promise((_, reject) => received.signal.addEventListener("abort", () => reject(received.signal.reason)))
      }
    })
    const message = messageOf(envelope())
    const running = consumer(batchOf(message), env)
    await vi.advanceTimersByTimeAsync(LEASE_MS - 1)
    expect(job!.signal.aborted).toBe(false)
    // Beats at 1 s and 2 s failed; it keeps trying until the lease's end.
    expect(objects.ops()).toEqual(["start", "heartbeat", "heartbeat"])
    await vi.advanceTimersByTimeAsync(1)
    await running
    expect(job!.signal.aborted).toBe(true)
    expect((job!.signal.reason as Error).name).toBe("StaleLeaseError")
    expect((job!.signal.reason as Error).message).toContain("before a heartbeat reached the object")
    // The object judges the lease: nothing is settled from here, it reclaims the job at its end.
    expect(objects.ops().filter((op) => op === "complete" || op === "fail")).toEqual([])
    expect(message.outcomes).toEqual(["ack"])
  })
})

describe("jobsConsumer: an unreachable object", () => {
  it("a start that throws retries the message with retryDelaySeconds (default 5) and runs nothing", async () => {
    const { consumer, env, handled, logged } = setup(() => {
      throw new Error("Durable Object is overloaded.")
    })
    const message = messageOf(envelope())
    await consumer(batchOf(message), env)
    expect(message.outcomes).toEqual(["retry:5"])
    expect(handled).toEqual([])
    expect(logged).toMatchObject([{ level: "WARN", event: "durability.consumer.unreachable", jobId: "j1", queue: "email", messageId: "m1" }])
    expect(String(logged[0]!.message)).toContain("Durable Object is overloaded.")
  })

  it("a custom retryDelaySeconds and method", async () => {
    const calls: Array<unknown> = []
    const namespace = {
      idFromString: (id: string) => id,
      get: () => ({ work: async (call: unknown) => (calls.push(call), { status: "stale", message: "old" }) })
    }
    const consumer = jobsConsumer({ namespace: () => namespace, method: "work", handlers: { email: () => 1 }, retryDelaySeconds: 30, log: () => {} })
    const ok = messageOf(envelope())
    await consumer(batchOf(ok), {})
    expect(ok.outcomes).toEqual(["ack"])
    expect(calls).toHaveLength(1)

    const missing = jobsConsumer({ namespace: () => namespace, method: "absent", handlers: { email: () => 1 }, retryDelaySeconds: 30, log: () => {} })
    const retried = messageOf(envelope())
    await missing(batchOf(retried), {})
    expect(retried.outcomes).toEqual(["retry:30"])
  })

  it("a complete that cannot reach the object retries the message (the object reclaims the lease at its end)", async () => {
    const { consumer, env, objects } = setup((call) => {
      if (call.op === "complete") throw new Error("Network connection lost.")
      return normal(call)
    })
    const message = messageOf(envelope())
    await consumer(batchOf(message), env)
    expect(objects.ops()).toEqual(["start", "complete"])
    expect(message.outcomes).toEqual(["retry:5"])
  })

  it("a namespace(env) that is not a namespace retries the message (a misconfiguration drops nothing)", async () => {
    const logged: Array<Readonly<Record<string, unknown>>> = []
    const consumer = jobsConsumer({ namespace: (env: { readonly MAILER?: never }) => env.MAILER!, handlers: { email: () => 1 }, log: (entry) => void logged.push(entry) })
    const message = messageOf(envelope())
    await consumer(batchOf(message), {})
    expect(message.outcomes).toEqual(["retry:5"])
    expect(logged).toMatchObject([{ level: "ERROR", event: "durability.consumer.failed", message: expect.stringContaining("namespace(env) must return a Durable Object namespace") }])
  })

  it("an answer that is not a status (an older object) retries the message", async () => {
    const { consumer, env, handled } = setup(() => ({ whatever: true }))
    const message = messageOf(envelope())
    await consumer(batchOf(message), env)
    expect(message.outcomes).toEqual(["retry:5"])
    expect(handled).toEqual([])
  })
})

describe("jobsConsumer: messages it cannot run", () => {
  it("malformed envelopes are acked without a call, each reported", async () => {
    const { consumer, env, logged, objects } = setup()
    const bodies: ReadonlyArray<unknown> = [
      "text",
      null,
      [1],
      envelope({ v: 2 }),
      envelope({ object: "" }),
      envelope({ queue: 3 }),
      envelope({ jobId: undefined }),
      envelope({ token: 0 }),
      envelope({ token: 1.5 }),
      envelope({ object: "not-an-id-of-this-namespace" })
    ]
    const messages = bodies.map((body, i) => messageOf(body, `m${i}`))
    await consumer(batchOf(...messages), env)
    expect(objects.calls).toEqual([])
    expect(messages.map((message) => message.outcomes)).toEqual(bodies.map(() => ["ack"]))
    expect(logged.map((entry) => [entry.event, entry.messageId])).toEqual(bodies.map((_, i) => ["durability.consumer.malformed", `m${i}`]))
    expect(logged.map((entry) => String(entry.message))).toEqual([
      expect.stringContaining("must be a job envelope object"),
      expect.stringContaining("must be a job envelope object"),
      expect.stringContaining("must be a job envelope object"),
      expect.stringContaining("v must be 1"),
      expect.stringContaining("object must be a non-empty string"),
      expect.stringContaining("queue must be a non-empty string"),
      expect.stringContaining("jobId must be a non-empty string"),
      expect.stringContaining("token must be a positive integer"),
      expect.stringContaining("token must be a positive integer"),
      expect.stringContaining("object is not an id of this namespace")
    ])
  })

  it("a queue without a handler: the job is recorded undelivered (terminal, redrivable), nothing started, acked", async () => {
    const { consumer, env, logged, objects } = setup()
    const message = messageOf(envelope({ queue: "sms" }))
    await consumer(batchOf(message), env)
    expect(objects.calls).toEqual([{
      v: 2,
      op: "undelivered",
      queue: "sms",
      id: "j1",
      token: 7,
      object: "obj-1",
      error: { name: "QueueDeliveryError", message: expect.stringContaining("has no handler for queue \"sms\" (its handlers: \"email\")") }
    }])
    expect(message.outcomes).toEqual(["ack"])
    expect(logged).toMatchObject([{ level: "ERROR", event: "durability.consumer.no_handler" }])
  })

  it("an inherited name is not a handler", async () => {
    const { consumer, env, objects } = setup()
    await consumer(batchOf(messageOf(envelope({ queue: "toString" }))), env)
    expect(objects.ops()).toEqual(["undelivered"])
  })

  it("refuses bad options by name", () => {
    const namespace = (env: Env) => env.objects
    expect(() => jobsConsumer({ namespace: "MAILER" as never, handlers: {} })).toThrow(/^namespace must be a function/)
    expect(() => jobsConsumer({ namespace, handlers: null as never })).toThrow(/^handlers must be an object/)
    expect(() => jobsConsumer({ namespace, handlers: { email: 1 as never } })).toThrow(/^handlers\.email must be a function/)
    expect(() => jobsConsumer({ namespace, handlers: {}, method: "" })).toThrow(/^method must be a non-empty string/)
    expect(() => jobsConsumer({ namespace, handlers: {}, retryDelaySeconds: -1 })).toThrow(RangeError)
    expect(() => jobsConsumer({ namespace, handlers: {}, retryDelaySeconds: 43_201 })).toThrow(/^retryDelaySeconds must be an integer from 0 to 43200/)
    expect(() => jobsDeadLetterConsumer({ namespace, log: "console" as never })).toThrow(/^log must be a function/)
  })
})

describe("jobsDeadLetterConsumer", () => {
  it("records each envelope as undelivered with a QueueDeliveryError, then acks", async () => {
    const objects = fakeObjects()
    const consumer = jobsDeadLetterConsumer({ namespace: (env: Env) => env.objects, log: () => {} })
    const message = messageOf(envelope({ payload: { to: "ann" } }))
    await consumer({ queue: "durability-test-jobs-dlq", messages: [message] }, { objects: objects.namespace })
    expect(objects.calls).toEqual([{
      v: 2,
      op: "undelivered",
      queue: "email",
      id: "j1",
      token: 7,
      object: "obj-1",
      error: { name: "QueueDeliveryError", message: expect.stringContaining("exhausted the queue's max_retries") }
    }])
    expect(message.outcomes).toEqual(["ack"])
  })

  it("a stale answer is acked too (the job moved on); an unreachable object retries; a malformed body is acked", async () => {
    let reachable = false
    const objects = fakeObjects((call) => {
      if (!reachable) throw new Error("Network connection lost.")
      return { status: "stale", message: `token ${String(call.token)} is old` }
    })
    const logged: Array<Readonly<Record<string, unknown>>> = []
    const consumer = jobsDeadLetterConsumer({ namespace: (env: Env) => env.objects, retryDelaySeconds: 60, log: (entry) => void logged.push(entry) })
    const env = { objects: objects.namespace }
    const first = messageOf(envelope())
    const malformed = messageOf({ v: 1 }, "m2")
    await consumer({ queue: "dlq", messages: [first, malformed] }, env)
    expect(first.outcomes).toEqual(["retry:60"])
    expect(malformed.outcomes).toEqual(["ack"])
    expect(logged.map((entry) => entry.event).sort()).toEqual(["durability.consumer.malformed", "durability.consumer.unreachable"])
    reachable = true
    const again = messageOf(envelope())
    await consumer({ queue: "dlq", messages: [again] }, env)
    expect(again.outcomes).toEqual(["ack"])
    expect(objects.ops()).toEqual(["undelivered", "undelivered"])
  })
})

describe("JobsConsumer (the Effect face)", () => {
  it("handlers are Effects run with the program's services; success completes, a failure fails with its own name", async () => {
    class Mailer extends Context.Tag("test/Mailer")<Mailer, { readonly send: (to: string) => Effect.Effect<string, Error> }>() {}
    const objects = fakeObjects()
    const consume = JobsConsumer.make<Env, Mailer>({
      namespace: (env: Env) => env.objects,
      handlers: {
        email: (job: JobsConsumer.QueuedJob<{ readonly to: string }>) => Effect.flatMap(Mailer, (mailer) => mailer.send(job.payload.to))
      },
      log: () => undefined
    })
    const run = (send: (to: string) => Effect.Effect<string, Error>) => {
      const message = messageOf(envelope())
      const done = Effect.runPromise(Effect.provideService(consume(batchOf(message), { objects: objects.namespace }), Mailer, { send }))
      return { message, done }
    }
    const ok = run((to) => Effect.succeed(`sent to ${to}`))
    await flush()
    await ok.done
    expect(objects.calls.at(-1)).toMatchObject({ op: "complete", token: 8, result: "sent to ann" })
    expect(ok.message.outcomes).toEqual(["ack"])
    const failing = run(() => Effect.fail(Object.assign(new Error("421 busy"), { name: "BusyError" })))
    await flush()
    await failing.done
    expect(objects.calls.at(-1)).toMatchObject({ op: "fail", error: { name: "BusyError", message: "421 busy" } })
    expect(failing.message.outcomes).toEqual(["ack"])
  })
})
