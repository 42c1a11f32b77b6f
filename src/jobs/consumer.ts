/**
 * The promise face of the Cloudflare Queues consumer of job queues with `processing: { queue }`
 * (`jobsConsumer`, `jobsDeadLetterConsumer`): the Effect program of `JobsConsumer`, run once per batch,
 * with handlers that are plain functions given an `AbortSignal` and promise-returning writes.
 * See `JobsConsumer` for what it does with each message.
 *
 * Structural types only (no workers-types globals): the same module runs under Node in the tests.
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import { shown } from "../shared/validate.js"
import * as JobsConsumer from "./JobsConsumer.js"
import * as Protocol from "./JobsProtocol.js"
import { consoleSink } from "../engine/Logging.js"

export { JobCanceledError, StaleLeaseError } from "./leaseErrors.js"

export const ENVELOPE_VERSION = Protocol.ENVELOPE_VERSION

/** A message body the object sends for each leased job (`JobsProtocol.Envelope`). */
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

/** What a consumer's handler is called with: one leased job of the owning object. */
export interface DurableQueuedJob<P = unknown> extends JobsConsumer.LeasedJob<P> {
  /** Stores the job's progress on the object and extends the lease; rejects with the signal's reason once the lease is lost. */
  progress(value: unknown): Promise<void>
  /** Appends a line to the job's log on the object; rejects with the signal's reason once the lease is lost. */
  log(message: string): Promise<void>
}

/** A queue's handler (given the Worker's `env` too): its return value completes the job; a throw fails the attempt. */
export type DurableQueuedJobHandler<P = unknown, Env = unknown> = (job: DurableQueuedJob<P>, env: Env) => unknown

// Method syntax makes the job parameter bivariant, so a handler annotated with its payload type fits the map.
type AnyQueuedJobHandler<Env> = { handle(job: DurableQueuedJob<never>, env: Env): unknown }["handle"]

/** The part of a Durable Object namespace the consumer uses (any `DurableObjectNamespace` fits). */
export type DurableJobsNamespace = JobsConsumer.Namespace

/** The part of a Queues message the consumer uses (a `Message` fits). */
export type DurableQueueMessage = JobsConsumer.QueueMessage

/** The part of a Queues batch the consumer uses (a `MessageBatch` fits). */
export type DurableQueueBatch = JobsConsumer.QueueBatch

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

export const DEFAULT_METHOD = JobsConsumer.DEFAULT_METHOD
export const DEFAULT_RETRY_DELAY_SECONDS = JobsConsumer.DEFAULT_RETRY_DELAY_SECONDS
/** Queues' longest delay (12 h). */
export const MAX_RETRY_DELAY_SECONDS = JobsConsumer.MAX_RETRY_DELAY_SECONDS
/** The name of the error a job is failed with when its message never reached a handler. */
export const DELIVERY_ERROR = JobsConsumer.DELIVERY_ERROR

/** The envelope, or what is wrong with the body. */
export const parseEnvelope = (body: unknown): DurableJobEnvelope | string => {
  const decoded = Protocol.decodeEnvelope(body)
  return decoded._tag === "Left" ? decoded.left : decoded.right as DurableJobEnvelope
}

const settingsOf = <Env>(options: CommonOptions<Env>, name: string) => {
  if (typeof options !== "object" || options === null) throw new TypeError(`${name} needs an options object`)
  if (typeof options.namespace !== "function") {
    throw new TypeError(`namespace must be a function of env returning a Durable Object namespace, got ${shown(options.namespace)}`)
  }
  if (options.method !== undefined && !(typeof options.method === "string" && options.method.length > 0)) {
    throw new TypeError(`method must be a non-empty string, got ${shown(options.method)}`)
  }
  return JobsConsumer.settingsOf({ ...options, log: options.log ?? consoleSink }, name)
}

/** A write of the handler: once the lease is lost, it rejects with the signal's reason, without a call. */
const writer = (lease: JobsConsumer.LeaseHandle, run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>) =>
(body: Parameters<JobsConsumer.LeaseHandle["write"]>[0]): Promise<void> =>
  run(Effect.asVoid(lease.write(body))).catch((error: unknown) => {
    if (lease.signal.aborted) throw lease.signal.reason
    const tagged = error as { readonly _tag?: unknown }
    throw tagged._tag === "ObjectUnreachableError" ? (error as JobsConsumer.ObjectUnreachableError).cause : error
  })

const jobOf = (lease: JobsConsumer.LeaseHandle, run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>): DurableQueuedJob<unknown> => {
  const write = writer(lease, run)
  return JobsConsumer.leasedJob(lease, {
    progress: (value: unknown) => write({ op: "heartbeat", extendMs: lease.started.leaseMs, progress: value }),
    log: async (message: string) => {
      if (typeof message !== "string") throw new TypeError(`message must be a string, got ${shown(message)}`)
      await write({ op: "log", message })
    }
  })
}

/**
 * A Queues consumer for the envelopes of job queues with `processing: { queue }`: per message (the
 * batch's messages concurrently), `start` on the owning object, the queue's handler with automatic
 * heartbeats every `leaseMs / 3`, then `complete` or `fail`, and `ack`. A job canceled while its
 * handler runs has the handler's signal aborted with `JobCanceledError` at the next heartbeat. See
 * docs/workers-and-queues.md, "Processing jobs in a Queues consumer".
 */
export const jobsConsumer = <Env>(options: DurableJobsConsumerOptions<Env>): DurableQueueHandler<Env> => {
  const settings = settingsOf(options, "jobsConsumer")
  const handlers = options.handlers as unknown
  if (typeof handlers !== "object" || handlers === null || Array.isArray(handlers)) {
    throw new TypeError(`handlers must be an object of functions by queue name, got ${shown(handlers)}`)
  }
  for (const [name, handler] of Object.entries(handlers)) {
    if (typeof handler !== "function") throw new TypeError(`handlers.${name} must be a function, got ${shown(handler)}`)
  }
  const run = JobsConsumer.runPromiseWith(Runtime.defaultRuntime)
  const map = Object.fromEntries(
    Object.entries({ ...(handlers as DurableJobsConsumerOptions<Env>["handlers"]) }).map(([name, handler]) => [
      name,
      (lease: JobsConsumer.LeaseHandle, env: Env) =>
        // The handler's own throw (not a wrapper), so its name reaches the object.
        Effect.tryPromise({
          try: () => Promise.resolve().then(() => (handler as DurableQueuedJobHandler<unknown, Env>)(jobOf(lease, run), env)),
          catch: (error) => error
        })
    ])
  )
  return (batch, env) =>
    run(JobsConsumer.consumeWith(settings, () => JobsConsumer.fromNamespace(options.namespace(env), options.method), map)(batch, env))
}

/**
 * A consumer of the dead-letter queue of a transport queue: each envelope exhausted Queues' retries
 * without reaching its object; this records it on the job (`undelivered`: a failure with a
 * `QueueDeliveryError`, into the object's dead letters), then acks.
 */
export const jobsDeadLetterConsumer = <Env>(options: DurableJobsDeadLetterConsumerOptions<Env>): DurableQueueHandler<Env> => {
  const settings = settingsOf(options, "jobsDeadLetterConsumer")
  const run = JobsConsumer.runPromiseWith(Runtime.defaultRuntime)
  return (batch, env) => run(JobsConsumer.deadLettersWith(settings, () => JobsConsumer.fromNamespace(options.namespace(env), options.method))(batch))
}

