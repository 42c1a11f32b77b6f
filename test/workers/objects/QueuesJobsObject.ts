/**
 * `QueuesJobsObject`: a job queue delivered through Cloudflare Queues, as an application writes it: a
 * `DurableObject` whose `email` queue has `processing: { queue: env.JOBS_QUEUE }` and the method the
 * consumer calls (`jobsCall`). The test worker's `queue` handler (`queuesJobsQueueHandler` below) runs
 * `jobsConsumer` / `jobsDeadLetterConsumer` against it, and records in the owning object what the
 * handler did (`consumer_calls`) and what became of each message (`deliveries`), so the scenarios read
 * them over RPC.
 *
 * The handler's behaviour comes from the payload: it fails attempts up to `failTimes`, and an attempt
 * numbered `holdAttempt` waits until the test opens the gate `hold` (a durable flag; polled).
 */
import { DurableObject } from "cloudflare:workers"
import { Effect } from "effect"
import { JobsConsumer } from "../../../src/effect.js"
import { Deliveries, type Idleness } from "./idle.js"
import {
  type AlarmInvocationInfo,
  DurabilityJobs,
  type DurableJobInfo,
  type DurableJobLogs,
  type DurableQueuedJob,
  jobsConsumer,
  jobsDeadLetterConsumer
} from "../../../src/index.js"

/** wrangler.toml's `max_batch_timeout`: locally a message is delivered that long after its send. */
export const BATCH_TIMEOUT_MS = 1_000

/**
 * What else a delivery may take on a saturated machine, beside the batch timeout, until the consumer's `start`
 * reaches the object: the outbox's send, the broker's dispatch, the RPC.
 */
export const DELIVERY_SLACK_MS = 2_000

export const TRANSPORT = {
  queue: "durability-test-jobs",
  deadLetterQueue: "durability-test-jobs-dlq",
  /**
   * A lease runs from the object's claim, not from the consumer's `start`: the consumer's first heartbeat goes out
   * leaseMs / 3 after a start that comes a delivery (batch timeout + slack) after the claim, and must land before
   * the claim's lease ends. delivery + leaseMs / 3 <= leaseMs gives leaseMs = 1.5 × delivery = 4.5 s; each later
   * heartbeat then has 2 × leaseMs / 3 = 3 s to land. At 2 s a delivery had 333 ms beyond its batch timeout.
   */
  leaseMs: (3 * (BATCH_TIMEOUT_MS + DELIVERY_SLACK_MS)) / 2,
  maxAttempts: 3,
  retryDelayMs: 50
} as const

export interface QueuedWork {
  /** The owning object's id (the handler records its calls there). */
  readonly owner: string
  readonly tag?: string
  readonly failTimes?: number
  readonly hold?: string
  readonly holdAttempt?: number
}

export type QueueName = "email" | "lossy" | "limited" | "outboxed" | "severed" | "effectful" | "keyed"

export interface QueuesEnv {
  readonly JOBS_QUEUE: Queue
  readonly QUEUES_JOBS_OBJECT: DurableObjectNamespace<QueuesJobsObject>
}

export interface ConsumerCall {
  readonly seq: number
  readonly id: string
  readonly attempt: number
  readonly token: number
  /** `Date.now()` in the consumer when its handler started. */
  readonly at: number
}

export interface Delivery {
  readonly seq: number
  readonly message_id: string
  readonly job_id: string
  readonly token: number
  readonly queue_name: string
  readonly outcome: string
}

export interface LeaseRow {
  readonly id: string
  readonly status: string
  readonly attempt: number
  readonly lease_token: number
  readonly leased_until: number | null
  /** Waits for its key (a concurrency by key). */
  readonly waiting_key: number
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS consumer_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, attempt INTEGER NOT NULL, token INTEGER NOT NULL,
    at INTEGER NOT NULL DEFAULT 0
  );
  CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL, job_id TEXT NOT NULL, token INTEGER NOT NULL,
    queue_name TEXT NOT NULL, outcome TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS gates (name TEXT PRIMARY KEY);
  CREATE TABLE IF NOT EXISTS aborts (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, token INTEGER NOT NULL, reason TEXT NOT NULL);
`

export class QueuesJobsObject extends DurableObject<QueuesEnv> {
  private readonly deliveriesInFlight = new Deliveries()
  readonly records = this.ctx.storage.sql.exec(CREATE)

  readonly jobs = new DurabilityJobs({
    context: this.ctx,
    // Not on the console: the test pool hangs when an instance it reset writes to it.
    log: () => {},
    // A retried send after a reset is woken by the alarm: a second, not the default 15.
    alarmMinDelayMs: 1_000,
    retries: { maxAttempts: TRANSPORT.maxAttempts, delay: () => TRANSPORT.retryDelayMs },
    queues: {
      email: { processing: { queue: this.env.JOBS_QUEUE }, leaseMs: TRANSPORT.leaseMs, deadLetter: true },
      // Its consumer's `start` always fails as if the object could not be reached (see jobsCall); a lease
      // long enough to outlast Queues' retries, so the dead-letter consumer still holds the token.
      lossy: { processing: { queue: this.env.JOBS_QUEUE }, leaseMs: 60_000, deadLetter: true },
      // One lease a second: the rate limit on the transport path.
      limited: { processing: { queue: this.env.JOBS_QUEUE }, leaseMs: TRANSPORT.leaseMs, rateLimit: { capacity: 1, refillPerSecond: 1 } },
      // Its consumer is cut off after `start` until the gate "severed-reachable" opens (see jobsCall).
      severed: { processing: { queue: this.env.JOBS_QUEUE }, leaseMs: TRANSPORT.leaseMs },
      // One lease out per `tag` (a concurrency by key): the next job of a tag is sent once the one out settles.
      keyed: {
        processing: { queue: this.env.JOBS_QUEUE },
        leaseMs: TRANSPORT.leaseMs,
        concurrency: { key: (payload: QueuedWork) => payload.tag ?? "none", limit: 1 }
      },
      // Its sends fail until this instance is reset (`failSends`): an outbox whose send was interrupted.
      outboxed: { processing: { queue: this.flakyProducer() }, leaseMs: 60_000 },
      // Consumed by the Effect consumer (`JobsConsumer`): its handler is an Effect, interrupted when the lease is lost.
      effectful: { processing: { queue: this.env.JOBS_QUEUE }, leaseMs: TRANSPORT.leaseMs }
    }
  })

  #sendsFail = false

  /** The producer of `outboxed`: refuses every batch while `failSends` holds (in memory: a reset ends it). */
  private flakyProducer() {
    return {
      sendBatch: (messages: Iterable<MessageSendRequest>) =>
        this.#sendsFail ? Promise.reject(new Error("Queues unavailable (simulated)")) : this.env.JOBS_QUEUE.sendBatch(messages)
    }
  }

  failSends(): void {
    this.#sendsFail = true
  }

  pauseQueue(queue: QueueName): Promise<void> {
    return this.jobs[queue].pause()
  }

  resumeQueue(queue: QueueName): Promise<void> {
    return this.jobs[queue].resume()
  }

  outboxRows(): ReadonlyArray<Record<string, SqlStorageValue>> {
    return this.ctx.storage.sql.exec("SELECT key, attempt, last_error FROM durability_job_outbox ORDER BY key").toArray()
  }

  /** The consumer's entry point. */
  jobsCall(call: unknown): Promise<unknown> {
    const { op, queue } = call as { readonly op?: unknown; readonly queue?: unknown }
    if (queue === "lossy" && op === "start") throw new Error("The object could not be reached (simulated)")
    // A consumer cut off mid-job (its Worker killed, its network gone): nothing it sends after `start` arrives.
    if (queue === "severed" && op !== "start" && !this.isOpen("severed-reachable")) {
      throw new Error("The consumer was cut off (simulated)")
    }
    return DurabilityJobs.serve(this.jobs, call)
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.deliveriesInFlight.around(() => this.jobs.alarm(info))
  }

  /**
   * The alarm, the `alarm()` deliveries running (see idle.ts), and the work still due some time: unfinished
   * jobs and engine timers (a lease's end, the outbox). A scenario ends when all are none: the alarm alone can
   * read null for a moment while the engine moves it.
   */
  async idle(): Promise<Idleness & { readonly due: number }> {
    const idleness = await this.deliveriesInFlight.idleness(this.ctx.storage)
    const count = (query: string) => Number(this.ctx.storage.sql.exec<{ n: number }>(query).one().n)
    const timers = this.ctx.storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 'durability_timers'").toArray().length > 0
      ? count("SELECT COUNT(*) AS n FROM durability_timers")
      : 0
    return { ...idleness, due: timers + count("SELECT COUNT(*) AS n FROM durability_jobs WHERE status IN ('pending', 'waiting_children')") }
  }

  add(id: string, work: QueuedWork, queue: QueueName = "email") {
    return this.jobs[queue].add({ id, payload: work })
  }

  infos(queue: QueueName): Promise<ReadonlyArray<DurableJobInfo<QueuedWork>>> {
    return this.jobs[queue].list({ limit: 100 }).then((page) => page.items as ReadonlyArray<DurableJobInfo<QueuedWork>>)
  }

  info(id: string, queue: QueueName = "email"): Promise<DurableJobInfo<QueuedWork> | undefined> {
    return this.jobs[queue].get(id) as Promise<DurableJobInfo<QueuedWork> | undefined>
  }

  cancel(id: string, queue: QueueName = "email"): Promise<boolean> {
    return this.jobs[queue].cancel(id, "canceled by the scenario")
  }

  logs(id: string): Promise<DurableJobLogs> {
    return this.jobs.email.logs(id)
  }

  deadLetterIds(queue: QueueName = "email"): Promise<ReadonlyArray<string>> {
    return this.jobs[queue].deadLetters.list().then((page) => page.items.map((item) => item.id))
  }

  leaseRows(): ReadonlyArray<LeaseRow> {
    return this.ctx.storage.sql.exec(
      "SELECT id, status, attempt, lease_token, leased_until, waiting_key FROM durability_jobs ORDER BY seq"
    )
      .toArray() as unknown as ReadonlyArray<LeaseRow>
  }

  // --- written by the consumer side (the test worker's queue handler)

  noteCall(id: string, attempt: number, token: number): void {
    this.ctx.storage.sql.exec("INSERT INTO consumer_calls (id, attempt, token, at) VALUES (?, ?, ?, ?)", id, attempt, token, Date.now())
  }

  noteDelivery(messageId: string, jobId: string, token: number, queueName: string, outcome: string): void {
    this.ctx.storage.sql.exec(
      "INSERT INTO deliveries (message_id, job_id, token, queue_name, outcome) VALUES (?, ?, ?, ?, ?)",
      messageId,
      jobId,
      token,
      queueName,
      outcome
    )
  }

  noteAbort(id: string, token: number, reason: string): void {
    this.ctx.storage.sql.exec("INSERT INTO aborts (id, token, reason) VALUES (?, ?, ?)", id, token, reason)
  }

  /** The handlers' signals the consumer aborted, with their reason's name. */
  aborts(): ReadonlyArray<{ readonly id: string; readonly token: number; readonly reason: string }> {
    return this.ctx.storage.sql.exec("SELECT id, token, reason FROM aborts ORDER BY seq").toArray() as unknown as ReadonlyArray<{
      readonly id: string
      readonly token: number
      readonly reason: string
    }>
  }

  calls(): ReadonlyArray<ConsumerCall> {
    return this.ctx.storage.sql.exec("SELECT * FROM consumer_calls ORDER BY seq").toArray() as unknown as ReadonlyArray<ConsumerCall>
  }

  deliveries(): ReadonlyArray<Delivery> {
    return this.ctx.storage.sql.exec("SELECT * FROM deliveries ORDER BY seq").toArray() as unknown as ReadonlyArray<Delivery>
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  open(name: string): void {
    this.ctx.storage.sql.exec("INSERT OR IGNORE INTO gates (name) VALUES (?)", name)
  }

  isOpen(name: string): boolean {
    return this.ctx.storage.sql.exec("SELECT name FROM gates WHERE name = ?", name).toArray().length > 0
  }
}

const ownerOf = (env: QueuesEnv, id: string) => env.QUEUES_JOBS_OBJECT.get(env.QUEUES_JOBS_OBJECT.idFromString(id))

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// Signals the consumer aborted during a batch, by message body's job id: recorded in the owner once the batch is done
// (the consumer does not wait for a handler whose lease it lost, so the handler cannot be relied on to record it).
const aborted = new Map<string, { readonly token: number; readonly reason: string }>()

/** The test handler of both queues (see the module). */
const work = async (job: DurableQueuedJob<QueuedWork>, env: QueuesEnv) => {
  const owner = ownerOf(env, job.object)
  job.signal.addEventListener("abort", () => {
    aborted.set(job.id, { token: job.token, reason: (job.signal.reason as Error).name })
  }, { once: true })
  await owner.noteCall(job.id, job.attempt, job.token)
  await job.log(`attempt ${job.attempt} with token ${job.token}`)
  if (job.payload.hold !== undefined && job.attempt === (job.payload.holdAttempt ?? 1)) {
    while (!(await owner.isOpen(job.payload.hold))) {
      if (job.signal.aborted) throw job.signal.reason
      await pause(20)
    }
  }
  if (job.attempt <= (job.payload.failTimes ?? 0)) throw new Error(`${job.id} failed on attempt ${job.attempt}`)
  return { tag: job.payload.tag ?? null, attempt: job.attempt }
}

const consumer = jobsConsumer({
  namespace: (env: QueuesEnv) => env.QUEUES_JOBS_OBJECT,
  // Redeliveries at once: the scenarios wait on them.
  retryDelaySeconds: 0,
  log: () => {},
  handlers: {
    email: (job: DurableQueuedJob<QueuedWork>, env: QueuesEnv) => work(job, env),
    lossy: (job: DurableQueuedJob<QueuedWork>, env: QueuesEnv) => work(job, env),
    limited: (job: DurableQueuedJob<QueuedWork>, env: QueuesEnv) => work(job, env),
    outboxed: (job: DurableQueuedJob<QueuedWork>, env: QueuesEnv) => work(job, env),
    severed: (job: DurableQueuedJob<QueuedWork>, env: QueuesEnv) => work(job, env),
    keyed: (job: DurableQueuedJob<QueuedWork>, env: QueuesEnv) => work(job, env)
  }
})

// The `effectful` queue's consumer: the same work as an Effect; an interruption is recorded with the signal's reason.
const effectful = JobsConsumer.make({
  namespace: (env: QueuesEnv) => env.QUEUES_JOBS_OBJECT,
  retryDelaySeconds: 0,
  log: () => {},
  handlers: {
    effectful: (job: JobsConsumer.QueuedJob<QueuedWork>, env: QueuesEnv) =>
      Effect.onInterrupt(
        Effect.gen(function*() {
          const owner = ownerOf(env, job.object)
          yield* Effect.promise(() => owner.noteCall(job.id, job.attempt, job.token))
          yield* job.log(`attempt ${job.attempt} with token ${job.token}`)
          if (job.payload.hold !== undefined) {
            while (!(yield* Effect.promise(() => owner.isOpen(job.payload.hold!)))) yield* Effect.sleep(20)
          }
          return { tag: job.payload.tag ?? null, attempt: job.attempt }
        }),
        () => Effect.sync(() => aborted.set(job.id, { token: job.token, reason: `interrupted:${(job.signal.reason as Error).name}` }))
      )
  }
})

const deadLetters = jobsDeadLetterConsumer({ namespace: (env: QueuesEnv) => env.QUEUES_JOBS_OBJECT, retryDelaySeconds: 0, log: () => {} })

/**
 * The test worker's `queue` handler: the consumer (or the dead-letter consumer) of the batch's queue,
 * with each message's ack or retry recorded in its owning object afterwards.
 */
export const queuesJobsQueueHandler = async (batch: MessageBatch, env: QueuesEnv): Promise<void> => {
  const outcomes = new Map<string, string>()
  const watched = {
    queue: batch.queue,
    messages: batch.messages.map((message) => ({
      id: message.id,
      body: message.body,
      attempts: message.attempts,
      ack: () => {
        outcomes.set(message.id, "ack")
        message.ack()
      },
      retry: (options?: { readonly delaySeconds?: number }) => {
        outcomes.set(message.id, "retry")
        message.retry(options?.delaySeconds === undefined ? undefined : { delaySeconds: options.delaySeconds })
      }
    }))
  }
  if (batch.queue === TRANSPORT.deadLetterQueue) await deadLetters(watched, env)
  else {
    const isEffectful = (message: { readonly body: unknown }) => (message.body as { readonly queue?: unknown } | null)?.queue === "effectful"
    await Promise.all([
      consumer({ ...watched, messages: watched.messages.filter((message) => !isEffectful(message)) }, env),
      Effect.runPromise(effectful({ ...watched, messages: watched.messages.filter(isEffectful) }, env))
    ])
  }
  await Promise.all(batch.messages.map(async (message) => {
    const body = message.body as { readonly object?: unknown; readonly jobId?: unknown; readonly token?: unknown } | null
    if (typeof body?.object !== "string" || typeof body.jobId !== "string") return
    const abort = aborted.get(body.jobId)
    aborted.delete(body.jobId)
    if (abort !== undefined) await ownerOf(env, body.object).noteAbort(body.jobId, abort.token, abort.reason)
    await ownerOf(env, body.object).noteDelivery(message.id, body.jobId, Number(body.token), batch.queue, outcomes.get(message.id) ?? "none")
  }))
}
