/**
 * The inspector's read model: what an object holds and does, and the few actions an operator takes
 * on it, over the wire protocol of `durability/inspector` (`inspection/protocol.ts`).
 *
 * Each capability registers its inspection source in the object's `InspectionRegistry` when it is
 * made, so the inspector sees exactly the capabilities this object made; a request about another is
 * `NotFound`. The overview's scheduler part is the engine's own summary (`Scheduler.summary`). Reads
 * are bounded SQL (pages of at most `MAX_PAGE`, user data as its stored JSON text cut to a bound);
 * actions are the capabilities' own calls, so events, flows and the alarm follow as for any caller.
 *
 * `inspect` is the typed face; `answer` takes a request as it crossed RPC or HTTP and never fails:
 * it answers `{ ok: false, failure }` instead, which survives RPC where a rejection's fields do not.
 * @packageDocumentation
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { InvalidInputError, StorageError } from "../shared/Errors.js"
import * as Codec from "../shared/codec.js"
import { BadRequest, type InspectorError, NotFound, Unavailable } from "../inspection/errors.js"
import { InspectionRegistry } from "../inspection/InspectionRegistry.js"
import * as Protocol from "../inspection/protocol.js"
import type { Source, SourceError } from "../inspection/source.js"
import * as Scheduler from "../engine/Scheduler.js"

export { BadRequest, type InspectorError, NotFound, Unavailable } from "../inspection/errors.js"
/** The wire protocol: request classes (`new Inspector.JobsQuery({ queue })`), answer schemas, bounds. */
export * from "../inspection/protocol.js"

/**
 * The inspector service: answers the inspector's requests about this object's capabilities (what the object's
 * `inspect` method serves).
 */
export interface Inspector {
  /** Answers a decoded request, typed by its tag. */
  readonly inspect: <R extends Protocol.Request>(request: R) => Effect.Effect<Protocol.AnswerOf<R["_tag"]>, InspectorError>
  /** Decodes `encoded` as a request and answers it encoded (plain JSON); a failure is an answer too. */
  readonly answer: (encoded: unknown) => Effect.Effect<Protocol.Answer>
}

/** The `Inspector` service's tag: `make` builds it. */
export const Inspector: Context.Tag<Inspector, Inspector> = Context.GenericTag<Inspector>("durability/Inspector")

type Tag = Protocol.Request["_tag"]

/** Which capability answers each request (`Overview` asks them all; `PurgeBefore` names its own). */
const owners: Record<Exclude<Tag, "Overview" | "PurgeBefore">, Protocol.Capability> = {
  Operations: "operations",
  CancelOperation: "operations",
  Alarms: "alarms",
  CancelAlarm: "alarms",
  RetainedLog: "log",
  Schedules: "schedules",
  TriggerSchedule: "schedules",
  PauseSchedule: "schedules",
  ResumeSchedule: "schedules",
  Jobs: "jobs",
  Job: "jobs",
  JobLogs: "jobs",
  DeadLetters: "jobs",
  RetryJob: "jobs",
  RemoveJob: "jobs",
  CancelJob: "jobs",
  PromoteJob: "jobs",
  ChangePriority: "jobs",
  PauseQueue: "jobs",
  ResumeQueue: "jobs",
  RedriveDeadLetters: "jobs",
  BulkJobs: "jobs",
  Workflows: "workflows",
  Workflow: "workflows",
  WorkflowSteps: "workflows",
  WorkflowEvents: "workflows",
  PauseWorkflow: "workflows",
  ResumeWorkflow: "workflows",
  TerminateWorkflow: "workflows",
  RestartWorkflow: "workflows",
  SendWorkflowEvent: "workflows",
  FanoutDeliveries: "fanout"
}

/** Each request's own schema, by tag: a bad field is reported against it, not against the whole union. */
const requests: ReadonlyMap<string, Schema.Schema.AnyNoContext> = new Map(
  [...Protocol.Query.members, ...Protocol.Action.members].map((schema) => [schema._tag, schema])
)

const isTag = (value: unknown): value is Tag => typeof value === "string" && requests.has(value)

const cut = (message: string) => message.slice(0, Protocol.MESSAGE_CHARS)

/** A capability's refusal is the caller's bad input; a storage failure says no more than that. */
const mapped = (error: SourceError): InspectorError =>
  error instanceof InvalidInputError
    ? new BadRequest({ message: cut(error.message) })
    : error instanceof StorageError
    ? new Unavailable({ message: "The object's storage failed; try again" })
    : error

/** Decodes a request as it crossed RPC or HTTP; the message names the field. */
export const decode = (encoded: unknown): Effect.Effect<Protocol.Request, BadRequest> => {
  const tag = typeof encoded === "object" && encoded !== null ? (encoded as { readonly _tag?: unknown })._tag : undefined
  if (!isTag(tag)) {
    const shown = typeof tag === "string" ? JSON.stringify(tag.slice(0, 60)) : "missing"
    return Effect.fail(new BadRequest({ message: `Unknown request _tag ${shown} (known: ${[...requests.keys()].join(", ")})` }))
  }
  return Effect.mapError(
    Schema.decodeUnknown(requests.get(tag)!)(encoded, { onExcessProperty: "error" }) as Effect.Effect<Protocol.Request, ParseResult.ParseError>,
    (error) => new BadRequest({ message: cut(Codec.describeParseError("request", error)) })
  )
}

/** A table's kind as the inspector names its capability (a helper table, e.g. the jobs' outbox, keeps its own). */
const capabilityOf = (kind: string): string => kind === "namedAlarms" ? "alarms" : kind

/**
 * One piece of stored user data on its way out of the object, as the redaction hook sees it: which
 * capability (and job queue or workflow) it belongs to, which field, and its text (JSON for a payload,
 * result, progress, params or output; the message of a log line or an error), already cut to the
 * answer's bound.
 */
export interface RedactionTarget {
  /** The capability whose record it is. */
  readonly capability: Protocol.Capability
  /** The job queue, for the jobs' answers. */
  readonly queue?: string | undefined
  /** The workflow's name, for the workflows' answers. */
  readonly workflow?: string | undefined
  /**
   * Which of the record's fields. A workflow instance's `params` and `output`, a step's `result` (a wait's
   * received event included) and an event's `payload` are fields of their own names.
   */
  readonly field: "payload" | "result" | "progress" | "params" | "output" | "log" | "error"
  /** The text as the answer would show it. */
  readonly text: string
}

/** `makeWith`'s options. */
export interface InspectorOptions {
  /**
   * Rewrites stored user data before it leaves the object (secrets in payloads, personal data in logs):
   * return the text to show, e.g. `"[redacted]"` or the JSON with some fields masked. Per queue or global:
   * the target says where the text comes from. A hook that throws hides the text (`"[redaction failed]"`).
   */
  readonly redact?: ((target: RedactionTarget) => string) | undefined
}

const JSON_FIELDS = new Set(["payload", "result", "progress", "params", "output"])

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** The encoded answer with every piece of user data passed through `redact` (a new value; the answer is plain JSON). */
const redacted = (value: unknown, redact: (field: RedactionTarget["field"], text: string) => string): unknown => {
  const walk = (node: unknown, key: string | undefined): unknown => {
    if (Array.isArray(node)) return node.map((item) => walk(item, undefined))
    if (!isRecord(node)) return node
    if (key !== undefined && JSON_FIELDS.has(key) && typeof node["json"] === "string") {
      return { ...node, json: redact(key as "payload" | "result" | "progress" | "params" | "output", node["json"]) }
    }
    if ((key === "error" || key === "lastError") && typeof node["message"] === "string" && typeof node["name"] === "string") {
      return { ...node, message: redact("error", node["message"]) }
    }
    if (typeof node["seq"] === "number" && typeof node["at"] === "number" && typeof node["message"] === "string") {
      return { ...node, message: redact("log", node["message"]) }
    }
    const copy: Record<string, unknown> = {}
    for (const [field, child] of Object.entries(node)) copy[field] = walk(child, field)
    return copy
  }
  return walk(value, undefined)
}

/** Builds the `Inspector` from the object's scheduler and the capabilities registered for inspection. */
export const make: Effect.Effect<Inspector, never, Scheduler.Scheduler | InspectionRegistry> = Effect.suspend(() => makeWith({}))

/** `make`, with a redaction hook over the user data that leaves the object. */
export const makeWith = (options: InspectorOptions): Effect.Effect<Inspector, never, Scheduler.Scheduler | InspectionRegistry> => Effect.gen(function*() {
  const scheduler = yield* Scheduler.Scheduler
  const registry = yield* InspectionRegistry

  const sourceOf = (capability: Protocol.Capability): Effect.Effect<Source, NotFound> =>
    Effect.flatMap(registry.sources, (sources) => {
      const found = sources.find((source) => source.capability === capability)
      return found !== undefined
        ? Effect.succeed(found)
        : Effect.fail(
          new NotFound({
            message: `This object has no ${capability} (attached: ${sources.map((source) => source.capability).join(", ") || "none"})`
          })
        )
    })

  const summary = Effect.gen(function*() {
    const { running, ...engine } = yield* scheduler.summary(Protocol.MAX_RUNNING_LISTED)
    const sources = yield* registry.sources
    return {
      ...engine,
      running: running.map(({ key, kind }) => ({ capability: capabilityOf(kind), key })),
      capabilities: sources.map((source) => source.capability)
    } satisfies Protocol.SchedulerSummary
  })

  const overview = Effect.gen(function*() {
    let value: Protocol.Overview = { scheduler: yield* summary }
    for (const source of yield* registry.sources) value = { ...value, ...(yield* source.overview) }
    return value
  })

  const inspect = <R extends Protocol.Request>(request: R): Effect.Effect<Protocol.AnswerOf<R["_tag"]>, InspectorError> => {
    const answered: Effect.Effect<unknown, SourceError> = request._tag === "Overview"
      ? overview
      : Effect.flatMap(
        sourceOf(request._tag === "PurgeBefore" ? request.capability : owners[request._tag]),
        (source) => source.answer(request)
      )
    return Effect.mapError(answered, mapped).pipe(
      Effect.withSpan("Inspector.inspect", { attributes: { request: request._tag } })
    ) as Effect.Effect<Protocol.AnswerOf<R["_tag"]>, InspectorError>
  }

  const answer = (encoded: unknown): Effect.Effect<Protocol.Answer> =>
    Effect.gen(function*() {
      const request = yield* decode(encoded)
      const value = yield* inspect(request)
      const schema = Protocol.answers[request._tag] as Schema.Schema<unknown, unknown>
      const plain = yield* Effect.orDie(Schema.encode(schema)(value))
      const { redact } = options
      if (redact === undefined) return plain
      const capability = request._tag === "Overview" ? undefined : request._tag === "PurgeBefore" ? request.capability : owners[request._tag]
      if (capability === undefined) return plain
      const queue = "queue" in request ? request.queue : undefined
      const workflow = "workflow" in request ? request.workflow : undefined
      return redacted(plain, (field, text) => {
        try {
          const shown = redact({ capability, queue, ...(workflow === undefined ? {} : { workflow }), field, text })
          return typeof shown === "string" ? shown : "[redaction failed]"
        } catch {
          return "[redaction failed]"
        }
      })
    }).pipe(
      Effect.map((value): Protocol.Answer => ({ ok: true, value })),
      Effect.catchAll((error) => Effect.succeed<Protocol.Answer>({ ok: false, failure: { _tag: error._tag, message: error.message } })),
      // A defect is the library's bug, not the caller's: logged, answered without its internals.
      Effect.catchAllDefect((defect) =>
        Effect.as(
          Effect.logError("The inspector failed", defect),
          { ok: false, failure: { _tag: "Unavailable", message: "The inspector failed inside the object; see its logs" } } as const
        )
      )
    )

  return Inspector.of({ inspect, answer })
})

/** The inspector over the object's engine and its registry of inspection sources. */
export const layer: Layer.Layer<Inspector, never, Scheduler.Scheduler | InspectionRegistry> = Layer.effect(Inspector, make)
