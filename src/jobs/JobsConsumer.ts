/**
 * The Cloudflare Queues consumer of external job queues (`processing: { queue }`) as an Effect program:
 * per message, `start` on the owning object with the envelope's token, the queue's handler with
 * heartbeats every `leaseMs / 3` (on Effect's `Clock`), then `complete` or `fail`, and `ack`. The
 * promise face (`DurabilityJobs.consumer`, `jobsConsumer`) runs this same program.
 *
 * Attempts, retries and dead letters belong to the object: once the object has the outcome, the
 * message is acked, whatever it was. Queues' own retries (`message.retry`) are used only while the
 * object cannot be reached, so `max_retries` and the dead-letter queue cover delivery, not the job.
 * Every write carries the lease's fencing token. A lost lease is final: a stale answer, a lease that
 * ended before a heartbeat got through, or (protocol version 2) a heartbeat answered `"canceled"`
 * because the job was canceled: the handler's signal is aborted (an Effect handler is interrupted),
 * nothing more is sent for that lease, and a late write is refused.
 *
 * ```ts
 * const consume = JobsConsumer.make({ namespace: (env: Env) => env.MAILER, handlers: { email: (job) => send(job.payload) } })
 * export default { queue: (batch, env) => runtime.runPromise(consume(batch, env)) }
 * ```
 * @packageDocumentation
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Runtime from "effect/Runtime"
import { StaleLeaseError } from "../shared/Errors.js"
import { shown } from "../shared/validate.js"
import * as Protocol from "./JobsProtocol.js"
import { JobCanceledError as PlainCanceled, StaleLeaseError as PlainStale } from "./leaseErrors.js"

/** An envelope a transport queue sends for each leased job (`JobsProtocol.Envelope`). */
export type Envelope = Protocol.Envelope

// ---------------------------------------------------------------------------------------------
// Messages and batches (structural: no workers-types globals, so the module runs under Node too)

/** The part of a Queues message the consumer uses (a `Message` fits). */
export interface QueueMessage {
  /** The message's id. */
  readonly id: string
  /** The message body: an `Envelope`. */
  readonly body: unknown
  /** How many times Queues has delivered the message. */
  readonly attempts: number
  /** Marks the message handled: Queues does not deliver it again. */
  ack(): void
  /** Asks Queues to deliver the message again, after `delaySeconds`. */
  retry(options?: { readonly delaySeconds?: number }): void
}

/** The part of a Queues batch the consumer uses (a `MessageBatch` fits). */
export interface QueueBatch {
  /** The Queues queue's name. */
  readonly queue: string
  /** The batch's messages. */
  readonly messages: ReadonlyArray<QueueMessage>
}

/** The part of a Durable Object namespace the consumer uses (any `DurableObjectNamespace` fits). */
export interface Namespace {
  /** The object's id from its string form (`DurableObjectNamespace.idFromString`). */
  idFromString(id: string): unknown
  /** The object's stub for an id (`DurableObjectNamespace.get`). */
  get(id: never): unknown
}

// ---------------------------------------------------------------------------------------------
// The client: how the consumer reaches an envelope's object

/** The object could not be reached, or answered with something that is not a protocol answer: the message is retried. */
export class ObjectUnreachableError extends Data.TaggedError("ObjectUnreachableError")<{
  readonly message: string
  /** What the call failed with (an RPC error, a `TypeError` the object threw, …). */
  readonly cause: unknown
}> {}

/** One object's lease calls (the envelope's `queue`, `id` and token are added by the consumer). */
export type ObjectCaller = (call: Protocol.Versioned<Protocol.LeaseCall>) => Effect.Effect<Protocol.LeaseAnswer, ObjectUnreachableError>

/** How the consumer reaches the objects of its envelopes. */
export interface ClientShape {
  /** The caller of the object `id` (an envelope's `object`), or why it is not an object of this client (the message is dropped). */
  readonly resolve: (id: string) => Either.Either<ObjectCaller, string>
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * An error as it crosses to the object: its name (an Effect error's tag) and message.
 * @internal
 */
export const wireError = (error: unknown): { readonly name: string; readonly message: string } => {
  if (isObject(error) || error instanceof Error) {
    const { _tag, message, name } = error as { readonly _tag?: unknown; readonly name?: unknown; readonly message?: unknown }
    const named = typeof _tag === "string" && _tag.length > 0 ? _tag : typeof name === "string" && name.length > 0 ? name : "Error"
    if (typeof message === "string") return { name: named, message }
  }
  return { name: "Error", message: String(error) }
}

const describe = (error: unknown) => {
  const { message, name } = wireError(error)
  return `${name}: ${message}`
}

/** The default method of the objects that hands a call to `DurabilityJobs.serve`. */
export const DEFAULT_METHOD = "jobsCall"

/**
 * The client of a Durable Object namespace: each call goes to the object's `method` (default
 * `"jobsCall"`) over RPC, and its answer is decoded as the protocol's.
 */
export const fromNamespace = (namespace: Namespace, method: string = DEFAULT_METHOD): ClientShape => {
  const space = namespace as unknown as { idFromString(id: string): unknown; get(id: unknown): Record<string, unknown> }
  if (!isObject(space) || typeof space.idFromString !== "function" || typeof space.get !== "function") {
    throw new TypeError(`namespace(env) must return a Durable Object namespace (with idFromString and get), got ${shown(namespace)}`)
  }
  return {
    resolve: (id) => {
      let stub: Record<string, unknown>
      try {
        stub = space.get(space.idFromString(id))
      } catch (error) {
        return Either.left(`object is not an id of this namespace (${describe(error)})`)
      }
      return Either.right((call) =>
        Effect.flatMap(
          Effect.tryPromise({
            try: async () => {
              const methods = stub as unknown as Record<string, (call: unknown) => Promise<unknown>>
              if (typeof methods[method] !== "function") throw new TypeError(`The job's object has no method ${JSON.stringify(method)}`)
              // Called on the stub itself: on an RPC stub, `method.call(stub, …)` would be an RPC call of a method named "call".
              return await methods[method]!(call)
            },
            catch: (cause) => new ObjectUnreachableError({ message: describe(cause), cause })
          }),
          (answer) => {
            const decoded = Protocol.decodeLeaseAnswer(answer)
            if (decoded !== undefined) return Effect.succeed(decoded)
            const cause = new TypeError(
              `The object answered ${call.op} with ${shown(answer)}, not a status (is its durability version older than the consumer's?)`
            )
            return Effect.fail(new ObjectUnreachableError({ message: describe(cause), cause }))
          }
        )
      )
    }
  }
}

/** How the consumer reaches the objects of its envelopes: `Client.layer(namespace)`, or a fake in tests. */
export class Client extends Context.Tag("durability/JobsConsumer/Client")<Client, ClientShape>() {
  /** The client of a Durable Object namespace (see `fromNamespace`). */
  static readonly layer = (namespace: Namespace, method?: string): Layer.Layer<Client> =>
    Layer.sync(Client, () => fromNamespace(namespace, method))
}

// ---------------------------------------------------------------------------------------------
// Jobs, handlers, options

/** One leased job of the owning object, as both faces' consumer handlers see it (their writes apart). */
export interface LeasedJob<P = unknown> {
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
  /**
   * Aborted once the lease is lost: with a `StaleLeaseError` (the object said so, or it ended unextended), or a
   * `JobCanceledError` when the job was canceled (the next heartbeat tells). An Effect handler is interrupted then.
   */
  readonly signal: AbortSignal
  /** When the lease ends unless a heartbeat extends it (epoch ms; heartbeats move it). */
  readonly leaseUntil: number
}

/** What an Effect handler is given: one leased job of the owning object. */
export interface QueuedJob<P = unknown> extends LeasedJob<P> {
  /** Stores the job's progress on the object and extends the lease; `StaleLeaseError` once the lease is lost (`canceled` set after a cancel). */
  progress(value: unknown): Effect.Effect<void, StaleLeaseError | ObjectUnreachableError>
  /** Appends a line to the job's log on the object; `StaleLeaseError` once the lease is lost. */
  log(message: string): Effect.Effect<void, StaleLeaseError | ObjectUnreachableError>
}

// Method syntax makes the job parameter bivariant, so a handler annotated with its payload type fits the map.
type AnyHandler<Env, R> = { handle(job: QueuedJob<never>, env: Env): Effect.Effect<unknown, unknown, R> }["handle"]

/** What the consumer reports (`{ level, message, event, queueName, messageId, ... }`). */
export type Report = (entry: Readonly<Record<string, unknown>>) => void

/** The consumer's settings shared by `make`, `consume` and the dead-letter consumer. */
export interface CommonOptions {
  /** How long Queues waits before redelivering while the object cannot be reached (s, 0 to 43 200; default 5). */
  readonly retryDelaySeconds?: number | undefined
  /**
   * Where the consumer's diagnostics go, one object each (`{ level, message, event, ... }`): malformed
   * messages (acked), an unreachable object (retried), a queue without a handler. Default: Effect's logger.
   */
  readonly log?: Report | undefined
}

/** `consume`'s options: one Effect handler per queue (the objects are reached through the `Client` service). */
export interface ConsumeOptions<Env, R> extends CommonOptions {
  /** One handler per queue name of the envelopes: its success completes the job, its failure fails the attempt. */
  readonly handlers: Readonly<Record<string, AnyHandler<Env, R>>>
}

/** `make`'s options: the owning objects' namespace, and one Effect handler per queue. */
export interface Options<Env, R> extends ConsumeOptions<Env, R> {
  /** The owning objects' namespace (`(env: Env) => env.MAILER`). */
  readonly namespace: (env: Env) => Namespace
  /** The objects' method that hands a call to `DurabilityJobs.serve` (default `"jobsCall"`). */
  readonly method?: string | undefined
}

/** `deadLetters`' options: the owning objects' namespace, and how to reach them. */
export type DeadLetterOptions<Env> = Omit<Options<Env, never>, "handlers">

/** How long Queues waits before redelivering a message whose object could not be reached, when `retryDelaySeconds` is not given (s). */
export const DEFAULT_RETRY_DELAY_SECONDS = 5
/** Queues' longest delay (12 h). */
export const MAX_RETRY_DELAY_SECONDS = 43_200
/** The name of the error a job is failed with when its message never reached a handler. */
export const DELIVERY_ERROR = "QueueDeliveryError"

// Refusals of a value (not of the connection): retrying the message cannot help.
const REFUSALS = new Set(["TypeError", "RangeError", "DataCloneError"])

/**
 * The settings every consumer checks the same way (a bad option throws at once: it is a deploy's mistake).
 * @internal
 */
export interface Settings {
  /** How long Queues waits before redelivering while the object cannot be reached (s). */
  readonly retryDelaySeconds: number
  /** Reports one diagnostic (to the `log` option, else Effect's logger). */
  readonly report: (entry: Readonly<Record<string, unknown>> & { readonly level: "WARN" | "ERROR"; readonly message: string }) => Effect.Effect<void>
}

/**
 * Checks the common options (`name`: the constructor, for the message).
 * @internal
 */
export const settingsOf = (options: CommonOptions, name: string): Settings => {
  if (!isObject(options)) throw new TypeError(`${name} needs an options object`)
  const delay = options.retryDelaySeconds ?? DEFAULT_RETRY_DELAY_SECONDS
  if (!(typeof delay === "number" && Number.isSafeInteger(delay) && delay >= 0 && delay <= MAX_RETRY_DELAY_SECONDS)) {
    throw new RangeError(`retryDelaySeconds must be an integer from 0 to ${MAX_RETRY_DELAY_SECONDS}, got ${shown(delay)}`)
  }
  if (options.log !== undefined && typeof options.log !== "function") throw new TypeError(`log must be a function, got ${shown(options.log)}`)
  const sink = options.log
  return {
    retryDelaySeconds: delay,
    report: (entry) =>
      sink === undefined
        ? (entry.level === "ERROR" ? Effect.logError(entry.message) : Effect.logWarning(entry.message)).pipe(Effect.annotateLogs(entry))
        // A broken sink must not change what happens to the message.
        : Effect.sync(() => {
          try {
            sink(entry)
          } catch {
            // Ignored: see above.
          }
        })
  }
}

const checkHandlers = (handlers: unknown): void => {
  if (!isObject(handlers)) throw new TypeError(`handlers must be an object of functions by queue name, got ${shown(handlers)}`)
  for (const [name, handler] of Object.entries(handlers)) {
    if (typeof handler !== "function") throw new TypeError(`handlers.${name} must be a function, got ${shown(handler)}`)
  }
}

const checkNamespace = (options: { readonly namespace?: unknown; readonly method?: unknown }) => {
  if (typeof options.namespace !== "function") {
    throw new TypeError(`namespace must be a function of env returning a Durable Object namespace, got ${shown(options.namespace)}`)
  }
  if (options.method !== undefined && !(typeof options.method === "string" && options.method.length > 0)) {
    throw new TypeError(`method must be a non-empty string, got ${shown(options.method)}`)
  }
}

// ---------------------------------------------------------------------------------------------
// One message

interface MessageContext {
  readonly settings: Settings
  readonly message: QueueMessage
  readonly batch: QueueBatch
}

const report = (context: MessageContext, level: "WARN" | "ERROR", event: string, message: string, extra: Record<string, unknown> = {}) =>
  context.settings.report({ level, message, event, queueName: context.batch.queue, messageId: context.message.id, ...extra })

const retry = (context: MessageContext, error: unknown, envelope: Envelope) =>
  Effect.zipRight(
    report(
      context,
      "WARN",
      "durability.consumer.unreachable",
      `Job "${envelope.jobId}" of queue "${envelope.queue}": the object could not be reached (${describe(causeOf(error))}); ` +
        `Queues delivers the message again in ${context.settings.retryDelaySeconds}s (delivery ${context.message.attempts})`,
      { jobId: envelope.jobId, queue: envelope.queue }
    ),
    Effect.sync(() => context.message.retry({ delaySeconds: context.settings.retryDelaySeconds }))
  )

const causeOf = (error: unknown) => error instanceof ObjectUnreachableError ? error.cause : error

const ack = (context: MessageContext) => Effect.sync(() => context.message.ack())

/** A caller of the envelope's object that adds its queue, job, and the token it holds. */
type Caller = (call: Protocol.LeaseCall extends infer C ? C extends unknown ? Omit<C, "queue" | "id" | "token"> : never : never) => Effect.Effect<
  Protocol.LeaseAnswer,
  ObjectUnreachableError
>

const callerOf = (object: ObjectCaller, envelope: Envelope, token: number): Caller => (call) =>
  object({ v: Protocol.VERSION, queue: envelope.queue, id: envelope.jobId, token, ...call } as Protocol.Versioned<Protocol.LeaseCall>)

/** The envelope and its object's caller, or null once the message was acked as malformed. */
const open = (context: MessageContext, client: ClientShape) =>
  Effect.gen(function*() {
    const envelope = Protocol.decodeEnvelope(context.message.body)
    const object = Either.isRight(envelope) ? client.resolve(envelope.right.object) : undefined
    if (Either.isLeft(envelope) || object === undefined || Either.isLeft(object)) {
      const problem = Either.isLeft(envelope) ? envelope.left : object !== undefined && Either.isLeft(object) ? object.left : "no object"
      // Nothing can ever deliver it (no object to tell): Queues' retries would only delay the same outcome.
      yield* report(context, "WARN", "durability.consumer.malformed", `A message that is not a job envelope was acked and dropped: ${problem}`)
      yield* ack(context)
      return null
    }
    return { envelope: envelope.right, object: object.right }
  })

/**
 * A held lease: the running handler's view of it (its signal, its end, its writes).
 * @internal
 */
export interface LeaseHandle {
  /** The envelope, with the token this delivery holds. */
  readonly envelope: Envelope
  /** `start`'s answer. */
  readonly started: typeof Protocol.Started.Type
  /** Aborted when the lease is lost (the reason: a plain `StaleLeaseError`, or `JobCanceledError` after a cancel). */
  readonly signal: AbortSignal
  /** The lease's end as last known (epoch ms). */
  readonly leaseUntil: Effect.Effect<number>
  /** The lease's end as last known, read synchronously. */
  readonly leaseUntilNow: () => number
  /** A write under the lease: a stale or canceled answer loses the lease and fails with `StaleLeaseError`. */
  readonly write: (call: Parameters<Caller>[0]) => Effect.Effect<Protocol.LeaseAnswer, StaleLeaseError | ObjectUnreachableError>
}

interface Held extends LeaseHandle {
  /** Completes with the loss when the lease is lost. */
  readonly lost: Deferred.Deferred<StaleLeaseError>
  readonly lose: (loss: StaleLeaseError) => Effect.Effect<void>
}

const lossOf = (envelope: Envelope, answer: { readonly status: "stale" | "canceled"; readonly message: string; readonly reason?: string }) =>
  new StaleLeaseError({
    queue: envelope.queue,
    id: envelope.jobId,
    token: envelope.token,
    message: answer.message,
    ...(answer.status === "canceled" ? { canceled: { reason: answer.reason ?? "" } } : {})
  })

/** The signal's reason for a loss: what a promise handler sees (`JobCanceledError` after a cancel). */
const abortReason = (loss: StaleLeaseError): Error =>
  loss.canceled === undefined ? new PlainStale(loss.message, { cause: loss }) : new PlainCanceled(loss.message, { cause: loss })

const hold = (envelope: Envelope, call: Caller, started: typeof Protocol.Started.Type) =>
  Effect.gen(function*() {
    const controller = new AbortController()
    const lost = yield* Deferred.make<StaleLeaseError>()
    const until = yield* Ref.make(started.leaseUntil)
    let known = started.leaseUntil
    const lose = (loss: StaleLeaseError) =>
      Effect.flatMap(Deferred.succeed(lost, loss), (first) => Effect.sync(() => first && controller.abort(abortReason(loss))))
    const held: Held = {
      envelope,
      started,
      signal: controller.signal,
      leaseUntil: Ref.get(until),
      leaseUntilNow: () => known,
      lost,
      lose,
      write: (body) =>
        Effect.gen(function*() {
          const gone = yield* Deferred.poll(lost)
          if (gone !== undefined && gone._tag === "Some") return yield* Effect.flatMap(gone.value, Effect.fail)
          const answer = yield* call(body)
          if (answer.status === "stale" || answer.status === "canceled") {
            const loss = lossOf(envelope, answer)
            yield* lose(loss)
            return yield* Effect.fail(loss)
          }
          if (answer.status === "ok" && answer.leaseUntil !== undefined) {
            const next = answer.leaseUntil
            known = yield* Ref.updateAndGet(until, (current) => Math.max(current, next))
          }
          return answer
        })
    }
    return held
  })

// A chain of sleeps, not an interval: a slow heartbeat never overlaps the next.
const heartbeats = (held: Held) =>
  Effect.forever(
    Effect.zipRight(
      Effect.sleep(Math.max(1, Math.floor(held.started.leaseMs / 3))),
      // Stale or canceled: the lease is lost (write lost it). Unreachable: the next beat or the lease's end decides.
      Effect.ignore(held.write({ op: "heartbeat", extendMs: held.started.leaseMs }))
    )
  )

// The object is the judge of the lease; this only ends it here when no heartbeat got through before
// its end (an unreachable object), so the handler can stop work that no longer counts.
const leaseEnd = (held: Held): Effect.Effect<void> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const until = yield* held.leaseUntil
    if (now < until) return yield* Effect.zipRight(Effect.sleep(until - now), leaseEnd(held))
    const { envelope } = held
    yield* held.lose(
      new StaleLeaseError({
        queue: envelope.queue,
        id: envelope.jobId,
        token: envelope.token,
        message: `The lease of job "${envelope.jobId}" of queue "${envelope.queue}" with token ${envelope.token} ` +
          `ended at ${new Date(until).toISOString()} before a heartbeat reached the object`
      })
    )
  })

/** Sends the handler's outcome; a result the object (or RPC) refuses fails the attempt with the refusal. */
const settle = (call: Caller, outcome: Exit.Exit<unknown, unknown>) => {
  const fail = (error: unknown) => {
    const wire = wireError(error)
    return call({ op: "fail", error: wire, ...(wire.name === "NonRetryableError" ? { retryable: false } : {}) })
  }
  if (Exit.isFailure(outcome)) {
    return fail(Cause.isInterruptedOnly(outcome.cause) ? new Error("The handler was interrupted") : Cause.squash(outcome.cause))
  }
  return Effect.catchIf(call({ op: "complete", result: outcome.value }), (error) => REFUSALS.has(wireError(error.cause).name), (error) =>
    fail(error.cause))
}

/**
 * A handler of the core: given the held lease, the Worker's env.
 * @internal
 */
export type LeaseHandler<Env, R> = (lease: LeaseHandle, env: Env) => Effect.Effect<unknown, unknown, R>

const runMessage = <Env, R>(
  context: MessageContext,
  client: ClientShape,
  env: Env,
  handlers: Readonly<Record<string, LeaseHandler<Env, R>>>
): Effect.Effect<void, never, R> =>
  Effect.gen(function*() {
    const opened = yield* open(context, client)
    if (opened === null) return
    const { envelope, object } = opened
    const call = callerOf(object, envelope, envelope.token)
    const handler = Object.hasOwn(handlers, envelope.queue) ? handlers[envelope.queue] : undefined
    if (handler === undefined) {
      // A deploy without this queue's handler: the job fails for good into the object's dead letters,
      // where it is visible and can be redriven once the handler is deployed. Nothing is started.
      const message = `The Queues consumer of "${context.batch.queue}" has no handler for queue "${envelope.queue}" ` +
        `(its handlers: ${Object.keys(handlers).map((name) => JSON.stringify(name)).join(", ") || "none"})`
      const sent = yield* Effect.either(call({ op: "undelivered", error: { name: DELIVERY_ERROR, message } }))
      if (Either.isLeft(sent)) return yield* retry(context, sent.left, envelope)
      yield* report(context, "ERROR", "durability.consumer.no_handler", message, { jobId: envelope.jobId, queue: envelope.queue })
      return yield* ack(context)
    }
    const answer = yield* Effect.either(call({ op: "start" }))
    if (Either.isLeft(answer)) return yield* retry(context, answer.left, envelope)
    const started = answer.right
    // Stale: a duplicate delivery, or the job was reclaimed, settled, canceled or removed since it was sent.
    if (started.status === "stale" || started.status === "canceled") return yield* ack(context)
    if (started.status !== "started") {
      return yield* retry(context, new TypeError(`The object answered start with ${shown(started)}`), envelope)
    }
    const held = { ...envelope, token: started.token }
    const heldCall = callerOf(object, envelope, started.token)
    const lease = yield* hold(held, heldCall, started)
    // The beats and the lease's end run beside the handler and stop with it (the scope), before the outcome is sent.
    const outcome = yield* Effect.scoped(
      Effect.gen(function*() {
        yield* Effect.forkScoped(heartbeats(lease))
        yield* Effect.forkScoped(leaseEnd(lease))
        // A lost lease is final: the handler is interrupted (a promise handler: its signal is aborted) and nothing more is sent.
        return yield* Effect.raceFirst(
          Effect.map(Effect.exit(Effect.suspend(() => handler(lease, env))), (exit) => ({ ran: exit })),
          Effect.as(Deferred.await(lease.lost), null)
        )
      })
    )
    if (outcome === null || (yield* Deferred.isDone(lease.lost))) return yield* ack(context)
    const sent = yield* Effect.either(settle(heldCall, outcome.ran))
    // Unreachable: the lease stays with this token until it ends; the object reclaims the job then.
    if (Either.isLeft(sent)) return yield* retry(context, sent.left, envelope)
    // "ok", "stale" or "canceled": the object has the outcome, or another holder does, or it was canceled.
    yield* ack(context)
  })

const eachMessage = <R>(
  settings: Settings,
  batch: QueueBatch,
  run: (context: MessageContext) => Effect.Effect<void, never, R>
): Effect.Effect<void, never, R> =>
  Effect.forEach(
    batch.messages,
    (message) => {
      const context: MessageContext = { settings, message, batch }
      return Effect.catchAllCause(Effect.withSpan(run(context), "JobsConsumer.message", { attributes: { messageId: message.id } }), (cause) =>
        // Never fail the batch: locally, a throwing handler has its explicit acks ignored.
        Effect.zipRight(
          report(context, "ERROR", "durability.consumer.failed", `The consumer failed on a message: ${describe(Cause.squash(cause))}`),
          Effect.sync(() => message.retry({ delaySeconds: settings.retryDelaySeconds }))
        ))
    },
    { concurrency: "unbounded", discard: true }
  )

/**
 * The core both faces run: consumes one batch with `handlers` of the held lease, reaching the objects
 * through `client` (made per message, so a misconfigured namespace retries the message).
 * @internal
 */
export const consumeWith = <Env, R>(
  settings: Settings,
  client: () => ClientShape,
  handlers: Readonly<Record<string, LeaseHandler<Env, R>>>
) =>
(batch: QueueBatch, env: Env): Effect.Effect<void, never, R> =>
  eachMessage(settings, batch, (context) => Effect.flatMap(made(client), (made) => runMessage(context, made, env, handlers)))

// A namespace that is not one (a misconfiguration) is a defect of the message: reported and retried, never dropped.
const made = (client: () => ClientShape) => Effect.suspend(() => Effect.succeed(client()))

/**
 * The dead-letter core: records each envelope as undelivered (`QueueDeliveryError`), then acks.
 * @internal
 */
export const deadLettersWith = (settings: Settings, client: () => ClientShape) => (batch: QueueBatch): Effect.Effect<void> =>
  eachMessage(settings, batch, (context) =>
    Effect.gen(function*() {
      const opened = yield* open(context, yield* made(client))
      if (opened === null) return
      const { envelope, object } = opened
      const message = `The message of job "${envelope.jobId}" of queue "${envelope.queue}" (token ${envelope.token}) ` +
        `exhausted the queue's max_retries without reaching its object, and was dead-lettered to "${batch.queue}"`
      const sent = yield* Effect.either(callerOf(object, envelope, envelope.token)({ op: "undelivered", error: { name: DELIVERY_ERROR, message } }))
      if (Either.isLeft(sent)) return yield* retry(context, sent.left, envelope)
      yield* ack(context)
    }))

/** The Effect face's job over a held lease. */
/**
 * A held lease as a job, with each face's own writes (`progress`, `log`); `leaseUntil` follows the heartbeats.
 * @internal
 */
export const leasedJob = <Writes extends object>(lease: LeaseHandle, writes: Writes): LeasedJob<never> & Writes => ({
  id: lease.envelope.jobId,
  queue: lease.envelope.queue,
  object: lease.envelope.object,
  payload: lease.started.payload as never,
  attempt: lease.started.attempt,
  idempotencyKey: lease.started.idempotencyKey,
  token: lease.envelope.token,
  signal: lease.signal,
  get leaseUntil() {
    return lease.leaseUntilNow()
  },
  ...writes
})

const queuedJob = (lease: LeaseHandle): QueuedJob<never> =>
  leasedJob(lease, {
    progress: (value: unknown) => Effect.asVoid(lease.write({ op: "heartbeat", extendMs: lease.started.leaseMs, progress: value })),
    log: (message: string) =>
      typeof message === "string"
        ? Effect.asVoid(lease.write({ op: "log", message }))
        : Effect.die(new TypeError(`message must be a string, got ${shown(message)}`))
  })

const effectHandlers = <Env, R>(handlers: Readonly<Record<string, AnyHandler<Env, R>>>): Record<string, LeaseHandler<Env, R>> =>
  Object.fromEntries(Object.entries(handlers).map(([name, handler]) => [name, (lease: LeaseHandle, env: Env) => handler(queuedJob(lease), env)]))

/**
 * The consumer over the `Client` service: consumes one batch with the services `R` of the program it
 * runs in. Never fails. Heartbeats and the lease's end are on Effect's `Clock` (a `TestClock` drives them).
 */
export const consume = <Env, R = never>(options: ConsumeOptions<Env, R>) => {
  const settings = settingsOf(options, "JobsConsumer.consume")
  checkHandlers(options.handlers)
  const handlers = effectHandlers({ ...options.handlers })
  return (batch: QueueBatch, env: Env): Effect.Effect<void, never, R | Client> =>
    Effect.flatMap(Client, (client) => consumeWith(settings, () => client, handlers)(batch, env))
}

/** The consumer of an objects' namespace: consumes one batch with the services `R` of the program it runs in. Never fails. */
export const make = <Env, R = never>(options: Options<Env, R>) => {
  const settings = settingsOf(options, "JobsConsumer.make")
  checkNamespace(options)
  checkHandlers(options.handlers)
  const handlers = effectHandlers({ ...options.handlers })
  return (batch: QueueBatch, env: Env): Effect.Effect<void, never, R> =>
    consumeWith(settings, () => fromNamespace(options.namespace(env), options.method), handlers)(batch, env)
}

/** The consumer of the dead-letter queue: the jobs Queues gave up on are failed (`QueueDeliveryError`). */
export const deadLetters = <Env>(options: DeadLetterOptions<Env>) => {
  const settings = settingsOf(options, "JobsConsumer.deadLetters")
  checkNamespace(options)
  return (batch: QueueBatch, env: Env): Effect.Effect<void> =>
    deadLettersWith(settings, () => fromNamespace(options.namespace(env), options.method))(batch)
}

/**
 * Runs `effect` on `runtime` as a promise that rejects with the failure itself (not a `FiberFailure`).
 * @internal
 */
export const runPromiseWith = <R>(runtime: Runtime.Runtime<R>) => <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> =>
  Runtime.runPromiseExit(runtime)(effect).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  })
