/**
 * The Cloudflare Queues consumer of job queues with `processing: { queue }`: the object leases each due
 * job and sends a small envelope; `jobsConsumer` runs it in a Queues consumer Worker and settles it on
 * the owning object over RPC, through the method that hands calls to `DurabilityJobs.serve`.
 *
 * Attempts, retries and dead letters belong to the object: once the object has the outcome, the
 * message is acked, whatever it was. Queues' own retries (`message.retry`) are used only while the
 * object cannot be reached, so `max_retries` and the dead-letter queue cover delivery, not the job.
 * Every write of the worker carries the lease's fencing token; a stale answer is final: the handler's
 * signal is aborted and nothing more is sent for that lease.
 *
 * Structural types only (no workers-types globals): the same module runs under Node in the tests.
 * Effect-free: the promise face exports it as it is (`facade/jobsConsumer.ts`), and `JobsConsumer`
 * runs Effect handlers through it.
 * @internal
 */
import { consoleSink, type Sink } from "../engine/Logging.js"
import { shown } from "../shared/validate.js"

/**
 * A lease's token no longer holds its job (expired, reclaimed, leased again, settled); nothing was
 * written. A plain `Error` named like the Effect face's tag (`Errors.StaleLeaseError`): it is what
 * a queued job's signal is aborted with and its writes reject with, on either face. The promise
 * face exports this class (`facade/errors.ts`).
 */
export class StaleLeaseError extends Error {
  /** Always `"StaleLeaseError"`, so the error can be told apart after it crossed an RPC or a `catch`. */
  override readonly name = "StaleLeaseError" as const
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super(message, options)
  }
}

// ---------------------------------------------------------------------------------------------
// The wire (fixed by the object side: the envelope it sends and the calls `serve` answers)

export const ENVELOPE_VERSION = 1
const CALL_VERSION = 1

/** A message body the object sends for each leased job. */
export interface DurableJobEnvelope {
  /** The envelope's format version, so a consumer can refuse one it does not know. */
  readonly v: typeof ENVELOPE_VERSION
  /** The owning object's id (`ctx.id.toString()`). */
  readonly object: string
  /** The job's queue on the object. */
  readonly queue: string
  /** The job's id. */
  readonly jobId: string
  /** The lease's fencing token. */
  readonly token: number
  /** Only when the queue opted in (`includePayload`); the consumer uses the payload `start` returns. */
  readonly payload?: unknown
}

interface WireError {
  readonly name: string
  readonly message: string
}

type LeaseCall =
  | { readonly op: "start" }
  | { readonly op: "heartbeat"; readonly extendMs?: number; readonly progress?: unknown }
  | { readonly op: "log"; readonly message: string }
  | { readonly op: "complete"; readonly result: unknown }
  | { readonly op: "fail"; readonly error: WireError; readonly retryable?: boolean }
  | { readonly op: "undelivered"; readonly error: WireError }

type Stale = { readonly status: "stale"; readonly message: string }
type Started = {
  readonly status: "started"
  /** This delivery's own token: `start` takes the envelope's (single use), so a duplicate delivery is stale. */
  readonly token: number
  readonly payload: unknown
  readonly attempt: number
  readonly leaseUntil: number
  readonly leaseMs: number
  readonly idempotencyKey: string
}
type Answer = Stale | { readonly status: "ok"; readonly leaseUntil?: number } | Started

// ---------------------------------------------------------------------------------------------
// Public types

/** What a consumer's handler is called with: one leased job of the owning object. */
export interface DurableQueuedJob<P = unknown> {
  /** The job's id. */
  readonly id: string
  /** The job's queue on the owning object. */
  readonly queue: string
  /** The owning object's id (`namespace.idFromString(job.object)` reaches it). */
  readonly object: string
  /** The job's payload, as the object stored it. */
  readonly payload: P
  /** 1-based; already counted by the object when the job was leased. */
  readonly attempt: number
  /** Stable for the job across its attempts: pass it to the provider you call. */
  readonly idempotencyKey: string
  /** The lease's fencing token (every write of this consumer carries it). */
  readonly token: number
  /** Aborted with a `StaleLeaseError` once the lease is lost (the object said so, or it ended unextended). */
  readonly signal: AbortSignal
  /** When the lease ends unless a heartbeat extends it (epoch ms; heartbeats move it). */
  readonly leaseUntil: number
  /** Stores the job's progress on the object and extends the lease; `StaleLeaseError` once the lease is lost. */
  progress(value: unknown): Promise<void>
  /** Appends a line to the job's log on the object; `StaleLeaseError` once the lease is lost. */
  log(message: string): Promise<void>
}

/** A queue's handler (given the Worker's `env` too): its return value completes the job; a throw fails the attempt. */
export type DurableQueuedJobHandler<P = unknown, Env = unknown> = (job: DurableQueuedJob<P>, env: Env) => unknown

// Method syntax makes the job parameter bivariant, so a handler annotated with its payload type fits the map.
type AnyQueuedJobHandler<Env> = { handle(job: DurableQueuedJob<never>, env: Env): unknown }["handle"]

/** The part of a Durable Object namespace the consumer uses (any `DurableObjectNamespace` fits). */
export interface DurableJobsNamespace {
  /** The object's id from its string form (`DurableObjectNamespace.idFromString`). */
  idFromString(id: string): unknown
  /** The object's stub for an id (`DurableObjectNamespace.get`). */
  get(id: never): unknown
}

/** The part of a Queues message the consumer uses (a `Message` fits). */
export interface DurableQueueMessage {
  /** The message's id. */
  readonly id: string
  /** The message body: a `DurableJobEnvelope`. */
  readonly body: unknown
  /** How many times Queues has delivered the message. */
  readonly attempts: number
  /** Marks the message handled: Queues does not deliver it again. */
  ack(): void
  /** Asks Queues to deliver the message again, after `delaySeconds`. */
  retry(options?: { readonly delaySeconds?: number }): void
}

/** The part of a Queues batch the consumer uses (a `MessageBatch` fits). */
export interface DurableQueueBatch {
  /** The Queues queue's name. */
  readonly queue: string
  /** The batch's messages. */
  readonly messages: ReadonlyArray<DurableQueueMessage>
}

/** A Queues consumer: `export default { queue: jobsConsumer({ ... }) }`. */
export type DurableQueueHandler<Env> = (batch: DurableQueueBatch, env: Env, ctx?: unknown) => Promise<void>

interface CommonOptions<Env> {
  /** The owning objects' namespace (`(env: Env) => env.MAILER`). */
  readonly namespace: (env: Env) => DurableJobsNamespace
  /** The objects' method that hands a call to `DurabilityJobs.serve` (default `"jobsCall"`). */
  readonly method?: string | undefined
  /** How long Queues waits before redelivering while the object cannot be reached (s, 0 to 43 200; default 5). */
  readonly retryDelaySeconds?: number | undefined
  /**
   * Where the consumer's diagnostics go, one object each (`{ level, message, event, ... }`): malformed
   * messages (acked), an unreachable object (retried), a queue without a handler. Default: the console.
   */
  readonly log?: ((entry: Readonly<Record<string, unknown>>) => void) | undefined
}

/** `jobsConsumer`'s options: the owning objects' namespace, and one handler per queue. */
export interface DurableJobsConsumerOptions<Env> extends CommonOptions<Env> {
  /** One handler per queue name of the envelopes (the object's queue names). */
  readonly handlers: Readonly<Record<string, AnyQueuedJobHandler<Env>>>
}

/** `jobsDeadLetterConsumer`'s options: the owning objects' namespace, and how to reach them. */
export type DurableJobsDeadLetterConsumerOptions<Env> = CommonOptions<Env>

// ---------------------------------------------------------------------------------------------
// Options and envelopes

export const DEFAULT_METHOD = "jobsCall"
export const DEFAULT_RETRY_DELAY_SECONDS = 5
/** Queues' longest delay (12 h). */
export const MAX_RETRY_DELAY_SECONDS = 43_200

/** The name of the error a job is failed with when its message never reached a handler. */
export const DELIVERY_ERROR = "QueueDeliveryError"

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const nonEmpty = (value: unknown): value is string => typeof value === "string" && value.length > 0

/** The envelope, or what is wrong with the body. */
export const parseEnvelope = (body: unknown): DurableJobEnvelope | string => {
  if (!isObject(body)) return `the message body must be a job envelope object, got ${shown(body)}`
  if (body.v !== ENVELOPE_VERSION) return `v must be ${ENVELOPE_VERSION}, got ${shown(body.v)}`
  for (const field of ["object", "queue", "jobId"] as const) {
    if (!nonEmpty(body[field])) return `${field} must be a non-empty string, got ${shown(body[field])}`
  }
  const token = body.token
  if (!(typeof token === "number" && Number.isSafeInteger(token) && token >= 1)) return `token must be a positive integer, got ${shown(token)}`
  return body as unknown as DurableJobEnvelope
}

interface Settings<Env> {
  readonly namespace: (env: Env) => DurableJobsNamespace
  readonly method: string
  readonly retryDelaySeconds: number
  readonly log: Sink
}

const settingsOf = <Env>(options: CommonOptions<Env>, name: string): Settings<Env> => {
  if (!isObject(options)) throw new TypeError(`${name} needs an options object`)
  if (typeof options.namespace !== "function") {
    throw new TypeError(`namespace must be a function of env returning a Durable Object namespace, got ${shown(options.namespace)}`)
  }
  if (options.method !== undefined && !nonEmpty(options.method)) throw new TypeError(`method must be a non-empty string, got ${shown(options.method)}`)
  const delay = options.retryDelaySeconds ?? DEFAULT_RETRY_DELAY_SECONDS
  if (!(typeof delay === "number" && Number.isSafeInteger(delay) && delay >= 0 && delay <= MAX_RETRY_DELAY_SECONDS)) {
    throw new RangeError(`retryDelaySeconds must be an integer from 0 to ${MAX_RETRY_DELAY_SECONDS}, got ${shown(delay)}`)
  }
  if (options.log !== undefined && typeof options.log !== "function") throw new TypeError(`log must be a function, got ${shown(options.log)}`)
  const sink = options.log ?? consoleSink
  return {
    namespace: options.namespace,
    method: options.method ?? DEFAULT_METHOD,
    retryDelaySeconds: delay,
    log: (entry) => {
      try {
        sink(entry)
      } catch {
        // A broken sink must not change what happens to the message.
      }
    }
  }
}

/** An error as it crosses to the object: its name and message. */
const wireError = (error: unknown): WireError => {
  if (isObject(error) || error instanceof Error) {
    const { message, name } = error as { readonly name?: unknown; readonly message?: unknown }
    if (typeof message === "string") return { name: typeof name === "string" && name.length > 0 ? name : "Error", message }
  }
  return { name: "Error", message: String(error) }
}

const describe = (error: unknown) => {
  const { name, message } = wireError(error)
  return `${name}: ${message}`
}

// Refusals of a value (not of the connection): retrying the message cannot help.
const REFUSALS = new Set(["TypeError", "RangeError", "DataCloneError"])

// ---------------------------------------------------------------------------------------------
// One message

type Call = ((call: LeaseCall) => Promise<Answer>) & {
  /** From `start` on, the calls carry the token `start` gave this delivery (a duplicate's is stale). */
  readonly adopt: (token: number) => void
}

type Namespace = { idFromString(id: string): unknown; get(id: unknown): Record<string, unknown> }

/** The namespace of `env` (a misconfiguration throws: the message is retried, not dropped). */
const namespaceOf = <Env>(settings: Settings<Env>, env: Env): Namespace => {
  const namespace = settings.namespace(env) as unknown as Namespace
  if (!isObject(namespace) || typeof namespace.idFromString !== "function" || typeof namespace.get !== "function") {
    throw new TypeError(`namespace(env) must return a Durable Object namespace (with idFromString and get), got ${shown(namespace)}`)
  }
  return namespace
}

/** The envelope's object as a caller of its lease ops; throws when the object id is not of this namespace. */
const callerOf = <Env>(settings: Settings<Env>, namespace: Namespace, envelope: DurableJobEnvelope): Call => {
  const stub = namespace.get(namespace.idFromString(envelope.object))
  const { jobId, queue } = envelope
  let token = envelope.token
  const caller = async (call: LeaseCall): Promise<Answer> => {
    const methods = stub as unknown as Record<string, (call: unknown) => Promise<unknown>>
    if (typeof methods[settings.method] !== "function") throw new TypeError(`The job's object has no method ${JSON.stringify(settings.method)}`)
    // Called on the stub itself: on an RPC stub, `method.call(stub, …)` would be an RPC call of a method named "call".
    const answer: unknown = await methods[settings.method]!({ v: CALL_VERSION, queue, id: jobId, token, ...call })
    if (!isObject(answer) || (answer.status !== "ok" && answer.status !== "stale" && answer.status !== "started")) {
      throw new TypeError(`The object answered ${call.op} with ${shown(answer)}, not a status (is its durability version older than the consumer's?)`)
    }
    return answer as unknown as Answer
  }
  return Object.assign(caller, { adopt: (next: number) => void (token = next) })
}

interface Context<Env> {
  readonly settings: Settings<Env>
  readonly message: DurableQueueMessage
  readonly batch: DurableQueueBatch
}

const report = <Env>(context: Context<Env>, level: "WARN" | "ERROR", event: string, message: string, extra: Record<string, unknown> = {}) =>
  context.settings.log({ level, message, event, queueName: context.batch.queue, messageId: context.message.id, ...extra })

const retry = <Env>(context: Context<Env>, error: unknown, envelope: DurableJobEnvelope) => {
  report(
    context,
    "WARN",
    "durability.consumer.unreachable",
    `Job "${envelope.jobId}" of queue "${envelope.queue}": the object could not be reached (${describe(error)}); ` +
      `Queues delivers the message again in ${context.settings.retryDelaySeconds}s (delivery ${context.message.attempts})`,
    { jobId: envelope.jobId, queue: envelope.queue }
  )
  context.message.retry({ delaySeconds: context.settings.retryDelaySeconds })
}

/** The envelope and its object, or null once the message was acked as malformed. */
const open = <Env>(context: Context<Env>, env: Env): { readonly envelope: DurableJobEnvelope; readonly call: Call } | null => {
  const envelope = parseEnvelope(context.message.body)
  let problem = typeof envelope === "string" ? envelope : undefined
  let call: Call | undefined
  if (typeof envelope !== "string") {
    const namespace = namespaceOf(context.settings, env)
    try {
      call = callerOf(context.settings, namespace, envelope)
    } catch (error) {
      problem = `object is not an id of this namespace (${describe(error)})`
    }
  }
  if (problem !== undefined || call === undefined || typeof envelope === "string") {
    // Nothing can ever deliver it (no object to tell): Queues' retries would only delay the same outcome.
    report(context, "WARN", "durability.consumer.malformed", `A message that is not a job envelope was acked and dropped: ${problem}`)
    context.message.ack()
    return null
  }
  return { envelope, call }
}

/** The lease of one started job: its heartbeats, its local end, and the signal aborted when it is lost. */
class Lease {
  readonly controller = new AbortController()
  leaseUntil: number
  #done = false
  #beat: ReturnType<typeof setTimeout> | undefined
  #end: ReturnType<typeof setTimeout> | undefined

  constructor(readonly envelope: DurableJobEnvelope, readonly call: Call, readonly leaseMs: number, leaseUntil: number) {
    this.leaseUntil = leaseUntil
    this.#armEnd()
    this.#scheduleBeat()
  }

  get lost(): boolean {
    return this.controller.signal.aborted
  }

  /** No more heartbeats or local expiry: the outcome is being sent (or the lease is gone). */
  stop(): void {
    this.#done = true
    if (this.#beat !== undefined) clearTimeout(this.#beat)
    if (this.#end !== undefined) clearTimeout(this.#end)
  }

  lose(message: string): void {
    if (this.lost) return
    this.stop()
    this.controller.abort(new StaleLeaseError(message))
  }

  /** A write under the lease: a stale answer loses the lease and rejects with `StaleLeaseError`. */
  async write(call: LeaseCall): Promise<Answer> {
    if (this.lost) throw this.controller.signal.reason
    const answer = await this.call(call)
    if (answer.status === "stale") {
      this.lose(answer.message)
      throw this.controller.signal.reason
    }
    if (typeof answer.leaseUntil === "number") this.extended(answer.leaseUntil)
    return answer
  }

  extended(leaseUntil: number): void {
    this.leaseUntil = Math.max(this.leaseUntil, leaseUntil)
    if (!this.#done) this.#armEnd()
  }

  // The object is the judge of the lease; this only aborts the signal when no heartbeat got through
  // before its end (an unreachable object), so the handler can stop work that no longer counts.
  #armEnd(): void {
    if (this.#end !== undefined) clearTimeout(this.#end)
    this.#end = setTimeout(() => {
      this.lose(
        `The lease of job "${this.envelope.jobId}" of queue "${this.envelope.queue}" with token ${this.envelope.token} ` +
          `ended at ${new Date(this.leaseUntil).toISOString()} before a heartbeat reached the object`
      )
    }, Math.max(0, this.leaseUntil - Date.now()))
  }

  #scheduleBeat(): void {
    // A chain of timeouts, not an interval: a slow heartbeat never overlaps the next.
    this.#beat = setTimeout(() => void this.#heartbeat(), Math.max(1, Math.floor(this.leaseMs / 3)))
  }

  async #heartbeat(): Promise<void> {
    if (this.#done) return
    try {
      await this.write({ op: "heartbeat", extendMs: this.leaseMs })
    } catch {
      // Stale: the lease is lost (write aborted the signal). Unreachable: the next beat or the lease's end decides.
    }
    if (!this.#done) this.#scheduleBeat()
  }
}

const jobOf = (envelope: DurableJobEnvelope, started: Started, lease: Lease): DurableQueuedJob<unknown> => ({
  id: envelope.jobId,
  queue: envelope.queue,
  object: envelope.object,
  payload: started.payload,
  attempt: started.attempt,
  idempotencyKey: started.idempotencyKey,
  token: envelope.token,
  signal: lease.controller.signal,
  get leaseUntil() {
    return lease.leaseUntil
  },
  progress: async (value) => void (await lease.write({ op: "heartbeat", extendMs: lease.leaseMs, progress: value })),
  log: async (message) => {
    if (typeof message !== "string") throw new TypeError(`message must be a string, got ${shown(message)}`)
    await lease.write({ op: "log", message })
  }
})

const isStarted = (answer: Answer): answer is Started =>
  answer.status === "started" && typeof answer.leaseMs === "number" && answer.leaseMs > 0 && typeof answer.leaseUntil === "number" &&
  typeof answer.token === "number"

/** Sends the handler's outcome; a result the object (or RPC) refuses fails the attempt with the refusal. */
const settle = async (lease: Lease, outcome: { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown }) => {
  const fail = (error: unknown) => {
    const wire = wireError(error)
    return lease.call({ op: "fail", error: wire, ...(wire.name === "NonRetryableError" ? { retryable: false } : {}) })
  }
  if (!outcome.ok) return fail(outcome.error)
  try {
    return await lease.call({ op: "complete", result: outcome.value })
  } catch (error) {
    if (!REFUSALS.has(wireError(error).name)) throw error
    return fail(error)
  }
}

const runMessage = async <Env>(context: Context<Env>, env: Env, handlers: DurableJobsConsumerOptions<Env>["handlers"]) => {
  const opened = open(context, env)
  if (opened === null) return
  const { call, envelope } = opened
  const handler = Object.hasOwn(handlers, envelope.queue) ? handlers[envelope.queue] : undefined
  if (handler === undefined) {
    // A deploy without this queue's handler: the job fails for good into the object's dead letters,
    // where it is visible and can be redriven once the handler is deployed. Nothing is started.
    const message = `The Queues consumer of "${context.batch.queue}" has no handler for queue "${envelope.queue}" ` +
      `(its handlers: ${Object.keys(handlers).map((name) => JSON.stringify(name)).join(", ") || "none"})`
    try {
      await call({ op: "undelivered", error: { name: DELIVERY_ERROR, message } })
    } catch (error) {
      return retry(context, error, envelope)
    }
    report(context, "ERROR", "durability.consumer.no_handler", message, { jobId: envelope.jobId, queue: envelope.queue })
    return context.message.ack()
  }
  let started: Answer
  try {
    started = await call({ op: "start" })
  } catch (error) {
    return retry(context, error, envelope)
  }
  // Stale: a duplicate delivery, or the job was reclaimed, settled, canceled or removed since it was sent.
  if (started.status === "stale") return context.message.ack()
  if (!isStarted(started)) {
    return retry(context, new TypeError(`The object answered start with ${shown(started)}`), envelope)
  }
  call.adopt(started.token)
  const held = { ...envelope, token: started.token }
  const lease = new Lease(held, call, started.leaseMs, started.leaseUntil)
  const signal = lease.controller.signal
  const lost = new Promise<"lost">((resolve) => {
    if (signal.aborted) resolve("lost")
    else signal.addEventListener("abort", () => resolve("lost"), { once: true })
  })
  const ran = Promise.resolve()
    .then(() => (handler as (job: DurableQueuedJob<unknown>, env: Env) => unknown)(jobOf(held, started, lease), env))
    .then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))
  // A lost lease is final: the handler's late outcome would be refused anyway, so nothing more is sent.
  const outcome = await Promise.race([ran, lost])
  if (outcome === "lost" || lease.lost) {
    lease.stop()
    return context.message.ack()
  }
  lease.stop()
  try {
    await settle(lease, outcome)
  } catch (error) {
    // The lease stays with this token until it ends; the object reclaims the job then.
    return retry(context, error, envelope)
  }
  // "ok" or "stale": the object has the outcome, or another holder does.
  context.message.ack()
}

const eachMessage = <Env>(
  settings: Settings<Env>,
  batch: DurableQueueBatch,
  run: (context: Context<Env>) => Promise<void>
): Promise<void> =>
  Promise.all(batch.messages.map(async (message) => {
    const context: Context<Env> = { settings, message, batch }
    try {
      await run(context)
    } catch (error) {
      // Never throw from the batch: locally, a throwing handler has its explicit acks ignored.
      report(context, "ERROR", "durability.consumer.failed", `The consumer failed on a message: ${describe(error)}`)
      message.retry({ delaySeconds: settings.retryDelaySeconds })
    }
  })).then(() => undefined)

/**
 * A Queues consumer for the envelopes of job queues with `processing: { queue }`: per message (the
 * batch's messages concurrently), `start` on the owning object, the queue's handler with automatic
 * heartbeats every `leaseMs / 3`, then `complete` or `fail`, and `ack`. See docs/workers-and-queues.md, "Processing
 * jobs in a Queues consumer".
 */
export const jobsConsumer = <Env>(options: DurableJobsConsumerOptions<Env>): DurableQueueHandler<Env> => {
  const settings = settingsOf(options, "jobsConsumer")
  const handlers = options.handlers as unknown
  if (!isObject(handlers)) throw new TypeError(`handlers must be an object of functions by queue name, got ${shown(handlers)}`)
  for (const [name, handler] of Object.entries(handlers)) {
    if (typeof handler !== "function") throw new TypeError(`handlers.${name} must be a function, got ${shown(handler)}`)
  }
  const map = { ...handlers } as DurableJobsConsumerOptions<Env>["handlers"]
  return (batch, env) => eachMessage(settings, batch, (context) => runMessage(context, env, map))
}

/**
 * A consumer of the dead-letter queue of a transport queue: each envelope exhausted Queues' retries
 * without reaching its object; this records it on the job (`undelivered`: a failure with a
 * `QueueDeliveryError`, into the object's dead letters), then acks.
 */
export const jobsDeadLetterConsumer = <Env>(options: DurableJobsDeadLetterConsumerOptions<Env>): DurableQueueHandler<Env> => {
  const settings = settingsOf(options, "jobsDeadLetterConsumer")
  return (batch, env) =>
    eachMessage(settings, batch, async (context) => {
      const opened = open(context, env)
      if (opened === null) return
      const { call, envelope } = opened
      const message = `The message of job "${envelope.jobId}" of queue "${envelope.queue}" (token ${envelope.token}) ` +
        `exhausted the queue's max_retries without reaching its object, and was dead-lettered to "${batch.queue}"`
      try {
        await call({ op: "undelivered", error: { name: DELIVERY_ERROR, message } })
      } catch (error) {
        return retry(context, error, envelope)
      }
      context.message.ack()
    })
}
