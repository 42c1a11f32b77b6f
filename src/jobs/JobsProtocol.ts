/**
 * The jobs protocol: what crosses between a Durable Object's job queues and the code that reaches them
 * from outside (a `JobsRouter` adding and listing across shards, a `JobsConsumer` working leased jobs,
 * the Cloudflare Queues envelope), as Schemas. One definition, decoded on arrival by the object
 * (`DurabilityJobs.serve`) and by the consumer (the envelope, the answers), instead of shapes written
 * twice and checked by hand.
 *
 * Versioning: every call carries `v`. An object accepts every version in `VERSIONS`; a sender uses
 * `VERSION`. A version adds answers, never changes one, and the object answers an older version as
 * that version did, so consumers and routers may be deployed after the objects (never before):
 *
 * - 1: the first protocol.
 * - 2: a lease's `heartbeat` and `log` answer `{ status: "canceled" }` once the job was canceled
 *   under that lease (version 1 callers get `"stale"` for it, as before).
 *
 * A new call kind is additive, not a version: no existing answer changes, and an object that does not
 * know the op refuses it (a TypeError naming `op`) without executing anything. `event` and `bulk` (a
 * router's fan-out of `jobs.event` and `jobs.bulk`) came this way, under version 2.
 *
 * The envelope a transport queue sends has its own version (`ENVELOPE_VERSION`), unchanged.
 * @packageDocumentation
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { shown } from "../shared/validate.js"
import { JOB_STATES } from "./types.js"

/** The version of the calls this release sends. */
export const VERSION = 2
/** The versions of calls an object of this release answers (oldest first). */
export const VERSIONS: ReadonlyArray<number> = [1, 2]
/** The version of the answers that carry `"canceled"`: a caller of an older one is answered `"stale"` instead. */
export const CANCELED_SINCE = 2
/** The version of the envelope a transport queue sends to its Cloudflare Queue. */
export const ENVELOPE_VERSION = 1
/** The most items one shard's page may hold. */
export const MAX_PAGE = 1_000

// ---------------------------------------------------------------------------------------------
// Pieces

const NonEmptyString = Schema.String.pipe(Schema.minLength(1))
/** A lease's fencing token: a positive integer that grows with every lease of a job. */
export const Token = Schema.Int.pipe(Schema.greaterThanOrEqualTo(1))

/** An error as it crosses the wire: its name (default `"Error"`) and message, never a stack. */
export const WireError = Schema.Struct({ name: Schema.optional(Schema.String), message: Schema.String })
/** An error as it crosses the wire. */
export type WireError = typeof WireError.Type

/** A job's state, as a page call filters by it. */
export const JobState = Schema.Literal(...JOB_STATES)

// ---------------------------------------------------------------------------------------------
// The envelope

/** The message body a transport queue sends for each leased job. */
export const Envelope = Schema.Struct({
  /** The envelope's format version, so a consumer can refuse one it does not know. */
  v: Schema.Literal(ENVELOPE_VERSION),
  /** The owning object's id (`ctx.id.toString()`). */
  object: NonEmptyString,
  /** The job's queue on the object. */
  queue: NonEmptyString,
  /** The job's id. */
  jobId: NonEmptyString,
  /** The lease's fencing token (single use: `start` takes the next one). */
  token: Token,
  /** Only when the queue opted in (`includePayload`); the consumer uses the payload `start` returns. */
  payload: Schema.optional(Schema.Unknown)
})
/** The message body a transport queue sends for each leased job. */
export type Envelope = typeof Envelope.Type

// ---------------------------------------------------------------------------------------------
// Calls about a lease (a consumer's)

const leaseFields = { queue: Schema.String, id: Schema.String, token: Token }

/** A consumer's first call about an envelope: the job, and this delivery's own token. */
export const Start = Schema.Struct({ op: Schema.Literal("start"), ...leaseFields })
/** Extends the lease (never shortens it), storing the job's progress if given. */
export const Heartbeat = Schema.Struct({
  op: Schema.Literal("heartbeat"),
  ...leaseFields,
  extendMs: Schema.optional(Schema.Number),
  progress: Schema.optional(Schema.Unknown)
})
/** Appends a line to the job's log. */
export const Log = Schema.Struct({ op: Schema.Literal("log"), ...leaseFields, message: Schema.String })
/** Completes the job with the handler's result. */
export const Complete = Schema.Struct({ op: Schema.Literal("complete"), ...leaseFields, result: Schema.Unknown })
/** Fails the attempt (`undelivered`: for good, the message never reached a handler). */
export const Fail = Schema.Struct({
  op: Schema.Literal("fail", "undelivered"),
  ...leaseFields,
  error: WireError,
  retryable: Schema.optional(Schema.Boolean)
})
/** A consumer's call about a leased job; each is answered with a `LeaseAnswer`, a stale token included. */
export const LeaseCall = Schema.Union(Start, Heartbeat, Log, Complete, Fail)
/** A consumer's call about a leased job. */
export type LeaseCall = typeof LeaseCall.Type
/** A lease call's operation. */
export type LeaseOp = LeaseCall["op"]
/** The operations of lease calls. */
export const LEASE_OPS: ReadonlySet<string> = new Set(["start", "heartbeat", "log", "complete", "fail", "undelivered"])

/** The token no longer holds the job (expired, reclaimed, leased again, settled, removed): nothing was written. */
export const Stale = Schema.Struct({ status: Schema.Literal("stale"), message: Schema.String })
/** (Version 2) The job was canceled while this token held it: stop, nothing was written. */
export const Canceled = Schema.Struct({ status: Schema.Literal("canceled"), message: Schema.String, reason: Schema.String })
/** Done; a heartbeat tells the lease's new end. */
export const Ok = Schema.Struct({ status: Schema.Literal("ok"), leaseUntil: Schema.optional(Schema.Number) })
/** `start`'s answer: the job, and the token of this delivery (the envelope's is spent). */
export const Started = Schema.Struct({
  status: Schema.Literal("started"),
  token: Token,
  payload: Schema.Unknown,
  attempt: Schema.Number,
  leaseUntil: Schema.Number,
  leaseMs: Schema.Number.pipe(Schema.positive()),
  idempotencyKey: Schema.String
})
/** What the object answers a lease call. */
export const LeaseAnswer = Schema.Union(Stale, Canceled, Ok, Started)
/** What the object answers a lease call. */
export type LeaseAnswer = typeof LeaseAnswer.Type

// ---------------------------------------------------------------------------------------------
// Calls of a router (to one shard)

/** A shard's page call: up to `limit` items from the shard's own cursor. */
export const PageCall = Schema.Struct({
  states: Schema.optional(Schema.Array(JobState)),
  cursor: Schema.optional(Schema.String),
  limit: Schema.Int.pipe(Schema.between(1, MAX_PAGE))
})
/** A shard's page call. */
export type PageCall = typeof PageCall.Type

const AnyObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** Adds one job (the router chose its id). */
export const Add = Schema.Struct({ op: Schema.Literal("add"), queue: Schema.String, job: AnyObject })
/** Adds the shard's part of a bulk add, in one transaction. */
export const AddBulk = Schema.Struct({ op: Schema.Literal("addBulk"), queue: Schema.String, jobs: Schema.Array(Schema.Unknown) })
/** Reads one job. */
export const Get = Schema.Struct({ op: Schema.Literal("get"), queue: Schema.String, id: Schema.String })
/** One page of the shard's jobs, each item with the shard's cursor just after it. */
export const Page = Schema.Struct({ op: Schema.Literal("page"), queue: Schema.String, page: PageCall })
/** Counts, pause and resume of the shard's queue. */
export const QueueOp = Schema.Struct({ op: Schema.Literal("counts", "pause", "resume"), queue: Schema.String })
/** A whole flow, to the shard of its root. */
export const Flow = Schema.Struct({ op: Schema.Literal("flow"), root: AnyObject })

/** An event for every queue of the shard (`jobs.event(key)`): answers how many jobs it canceled. */
export const Event = Schema.Struct({ op: Schema.Literal("event"), key: Schema.String })
/**
 * One bounded chunk of a bulk run on the shard (`jobs.bulk(action, filter, options)`), times in
 * milliseconds; the shard checks the action, filter and options itself, naming the field.
 */
export const Bulk = Schema.Struct({
  op: Schema.Literal("bulk"),
  action: Schema.String,
  filter: AnyObject,
  options: Schema.optional(AnyObject)
})

/** Any call an object's `serve` answers, without its version. */
export const Call = Schema.Union(Add, AddBulk, Get, Page, QueueOp, Flow, Event, Bulk, Start, Heartbeat, Log, Complete, Fail)
/** Any call an object's `serve` answers, without its version. */
export type Call = typeof Call.Type

/** One item of a shard's page, with the shard's list cursor just after it (absent: it was the shard's last). */
export interface PageItem<T> {
  /** The job. */
  readonly info: T
  /** The shard's list cursor just after this job; absent when it is the shard's last. */
  readonly after?: string
}

/** A shard's page: up to `limit` items from its position; `more` when the shard has items past them. */
export interface ShardPage<T> {
  /** Up to `limit` jobs in the shard's order, each with its cursor. */
  readonly items: ReadonlyArray<PageItem<T>>
  /** Whether the shard has jobs past these. */
  readonly more: boolean
}

// ---------------------------------------------------------------------------------------------
// Decoding, with the field's name in the message

// Calls about the whole object rather than one of its queues.
const OBJECT_OPS: ReadonlyArray<string> = ["flow", "event", "bulk"]
const OPS = ["flow", "event", "bulk", "add", "addBulk", "get", "page", "counts", "pause", "resume", ...LEASE_OPS]
type ParseOptions = { readonly onExcessProperty: "preserve" }

// What each field must be, as its refusal says it.
const EXPECTED: Readonly<Record<string, string>> = {
  queue: "a string",
  job: "an object",
  jobs: "an array",
  id: "a string",
  token: "the positive integer of the lease",
  page: "an object",
  "page.limit": `an integer from 1 to ${MAX_PAGE}`,
  "page.cursor": "a string",
  "page.states": `a non-empty array of ${JOB_STATES.join(", ")}`,
  root: "an object",
  key: "a string",
  action: "a string",
  filter: "an object",
  options: "an object",
  error: "an object { name?, message }",
  "error.message": "a string",
  "error.name": "a string",
  message: "a string",
  extendMs: "a number",
  retryable: "a boolean"
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const valueAt = (value: unknown, path: ReadonlyArray<PropertyKey>): unknown =>
  path.reduce<unknown>((at, key) => (isObject(at) ? at[key as string] : undefined), value)

/** A refusal naming the first field that does not decode: a RangeError for a value out of its range, else a TypeError. */
const refusal = (input: unknown, error: ParseResult.ParseError): TypeError | RangeError => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  const path = (issue?.path ?? []).filter((key) => typeof key === "string")
  const field = path.join(".")
  const expected = EXPECTED[field]
  const actual = valueAt(input, path)
  const message = expected === undefined
    ? `${field || "the call"}: ${issue?.message ?? "does not decode"}`
    : `${field} must be ${expected}, got ${shown(actual)}`
  return issue?._tag === "Refinement" && typeof actual === "number" ? new RangeError(message) : new TypeError(message)
}

// Decoded by its op's own Schema, so a refusal names the field, not the union's members.
const BY_OP: Readonly<Record<string, (input: unknown, options: ParseOptions) => Either.Either<Call, ParseResult.ParseError>>> = {
  add: Schema.decodeUnknownEither(Add),
  addBulk: Schema.decodeUnknownEither(AddBulk),
  get: Schema.decodeUnknownEither(Get),
  page: Schema.decodeUnknownEither(Page),
  counts: Schema.decodeUnknownEither(QueueOp),
  pause: Schema.decodeUnknownEither(QueueOp),
  resume: Schema.decodeUnknownEither(QueueOp),
  flow: Schema.decodeUnknownEither(Flow),
  event: Schema.decodeUnknownEither(Event),
  bulk: Schema.decodeUnknownEither(Bulk),
  start: Schema.decodeUnknownEither(Start),
  heartbeat: Schema.decodeUnknownEither(Heartbeat),
  log: Schema.decodeUnknownEither(Log),
  complete: Schema.decodeUnknownEither(Complete),
  fail: Schema.decodeUnknownEither(Fail),
  undelivered: Schema.decodeUnknownEither(Fail)
}

/** A call with its version, as the object decoded it. */
export type Versioned<C> = C & { readonly v: number }

/**
 * A call as it arrived at an object with `queues`, or the TypeError (RangeError for a value out of its
 * range) naming what is wrong. The queue's own checks (of the job, its options) come after.
 */
export const decodeCall = (call: unknown, queues: ReadonlySet<string>): Versioned<Call> => {
  if (!isObject(call)) throw new TypeError(`A jobs call must be an object, got ${shown(call)}`)
  if (typeof call.v !== "number" || !VERSIONS.includes(call.v)) {
    throw new TypeError(`A jobs call must have v: ${VERSIONS.join(" or ")} (this object's protocol versions), got ${shown(call.v)}`)
  }
  const op = call.op
  if (typeof op !== "string" || !OPS.includes(op)) throw new TypeError(`op must be one of ${OPS.join(", ")}, got ${shown(op)}`)
  if (!OBJECT_OPS.includes(op) && (typeof call.queue !== "string" || !queues.has(call.queue))) {
    throw new TypeError(
      `Unknown queue ${shown(call.queue)}: this object's queues are ${[...queues].map((name) => JSON.stringify(name)).join(", ")}`
    )
  }
  if (op === "page" && isObject(call.page) && Array.isArray(call.page.states) && call.page.states.length === 0) {
    throw new TypeError(`page.states must be ${EXPECTED["page.states"]}, got an empty array`)
  }
  const decoded = BY_OP[op]!(call, { onExcessProperty: "preserve" })
  if (Either.isLeft(decoded)) throw refusal(call, decoded.left)
  // The decoded call keeps the fields as sent (excess ones preserved): the queue checks them next.
  return { ...decoded.right, v: call.v }
}

const decodeEnvelopeEither = Schema.decodeUnknownEither(Envelope)

/** The envelope, or what is wrong with the message body (named by field). */
export const decodeEnvelope = (body: unknown): Either.Either<Envelope, string> => {
  if (!isObject(body)) return Either.left(`the message body must be a job envelope object, got ${shown(body)}`)
  if (body.v !== ENVELOPE_VERSION) return Either.left(`v must be ${ENVELOPE_VERSION}, got ${shown(body.v)}`)
  return Either.mapLeft(decodeEnvelopeEither(body, { onExcessProperty: "preserve" }), (error) => {
    const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
    const field = String(issue?.path[0] ?? "body")
    const expected = field === "token" ? "a positive integer" : "a non-empty string"
    return `${field} must be ${expected}, got ${shown(body[field])}`
  })
}

const decodeAnswerEither = Schema.decodeUnknownEither(LeaseAnswer)

/** The object's answer to a lease call, or undefined when it is not one (an object older than the protocol). */
export const decodeLeaseAnswer = (answer: unknown): LeaseAnswer | undefined => {
  const decoded = decodeAnswerEither(answer, { onExcessProperty: "preserve" })
  return Either.isRight(decoded) ? decoded.right : undefined
}
