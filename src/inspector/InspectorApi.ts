/**
 * `InspectorApi`: the inspector's admin HTTP API as an `@effect/platform` `HttpApi`. One definition
 * gives the routes, the request and answer Schemas, the errors with their statuses, the security
 * schemes and the OpenAPI document. `DurabilityInspector.handler` serves it in a Worker; an Effect
 * program can serve `layer` itself, given a `Backend` (how to reach the objects) and an
 * `Authorization` implementation.
 *
 * Every endpoint is one protocol request (`inspection/protocol.ts`) sent to one object's
 * `inspect` method; the answer's failure becomes the status (NotFound 404, BadRequest 400,
 * Unavailable 503). Reads are GET, actions POST.
 * @packageDocumentation
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BadRequest, NotFound, Unavailable } from "../inspection/errors.js"
import * as P from "../inspection/protocol.js"

// ---------------------------------------------------------------------------------------------
// Errors: every failure's body is `{ _tag, message }`, nothing else (no stack, no internals). An
// inspection's own failures (`BadRequest`, `NotFound`, `Unavailable`) are the protocol's classes, given
// their status here; the others are the HTTP layer's.

export { BadRequest, NotFound, Unavailable }

const errorFields = { message: Schema.String }

/** 401: missing or invalid credentials. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>("durability/inspector/Unauthorized")(
  "Unauthorized",
  errorFields,
  HttpApiSchema.annotations({ status: 401, description: "Missing or invalid credentials." })
) {}

/** 403: the inspector is off, or read-only and the request is an action. */
export class Forbidden extends Schema.TaggedError<Forbidden>("durability/inspector/Forbidden")(
  "Forbidden",
  errorFields,
  HttpApiSchema.annotations({ status: 403, description: "The inspector is off, or read-only and this is an action." })
) {}

/** 413: the request body is over 16 KiB. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>("durability/inspector/PayloadTooLarge")(
  "PayloadTooLarge",
  errorFields,
  HttpApiSchema.annotations({ status: 413, description: "The request body is over 16 KiB." })
) {}

/** 415: an action's body is not `application/json`. */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>("durability/inspector/UnsupportedMediaType")(
  "UnsupportedMediaType",
  errorFields,
  HttpApiSchema.annotations({ status: 415, description: "An action's body must be `application/json`." })
) {}

/** 500: an unexpected error, logged on the server and never described in the answer. */
export class InternalError extends Schema.TaggedError<InternalError>("durability/inspector/InternalError")(
  "InternalError",
  errorFields,
  HttpApiSchema.annotations({ status: 500, description: "An unexpected error (logged on the server, never described here)." })
) {}

/** The errors the API answers with (each is its own status). */
export type InspectorApiError =
  | BadRequest
  | Unauthorized
  | Forbidden
  | NotFound
  | PayloadTooLarge
  | UnsupportedMediaType
  | InternalError
  | Unavailable

// ---------------------------------------------------------------------------------------------
// Security

/**
 * Who may call the API: `Authorization: Bearer <token>`, or a Cloudflare Access JWT in
 * `Cf-Access-Jwt-Assertion`. Either one suffices; the implementation decides both (see `authorization`).
 */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("durability/inspector/Authorization", {
  failure: Schema.Union(Unauthorized, Forbidden),
  security: {
    /** The inspector token, as `Authorization: Bearer <token>`. */
    bearer: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "The inspector token (`DurabilityInspector.handler({ token })`).")
    ),
    /** A Cloudflare Access JWT, in `Cf-Access-Jwt-Assertion`. */
    access: HttpApiSecurity.apiKey({ key: "Cf-Access-Jwt-Assertion", in: "header" }).pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "A Cloudflare Access JWT (`DurabilityInspector.handler({ access })`).")
    )
  }
}) {}

/**
 * Refuses, once the caller is let in, a body that breaks the rules: JSON only, at most 16 KiB. The web
 * handler reads the body (bounded) and hands its verdict in the request's context (`BodyVerdict`), so a
 * caller without credentials learns nothing but 401.
 */
export class RequestGuard extends HttpApiMiddleware.Tag<RequestGuard>()("durability/inspector/RequestGuard", {
  failure: Schema.Union(BadRequest, PayloadTooLarge, UnsupportedMediaType)
}) {}

/** What the web handler found wrong with a request's body (absent: nothing). */
export class BodyVerdict extends Context.Tag("durability/inspector/BodyVerdict")<
  BodyVerdict,
  BadRequest | PayloadTooLarge | UnsupportedMediaType | undefined
>() {}

// ---------------------------------------------------------------------------------------------
// Request pieces, with messages a person can act on (the path names the field).

const message = (text: string) => ({ message: () => ({ message: text, override: true }) })

const ObjectName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)).annotations(
  message("must be an object name of 1 to 256 characters")
)
const QueueName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)).annotations(
  message("must be a queue name of 1 to 256 characters")
)
const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(512)).annotations(
  message("must be 1 to 512 characters")
)
const Limit = Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, P.MAX_PAGE)).annotations(
  message(`must be an integer from 1 to ${P.MAX_PAGE}`)
)
const Cursor = Schema.String.pipe(Schema.maxLength(4_096)).annotations(message("must be a cursor from a previous page"))
const JobStateParam = P.JobState.annotations(message(`must be one of ${P.JobState.literals.join(", ")}`))
const StatusParam = P.OperationStatus.annotations(message(`must be one of ${P.OperationStatus.literals.join(", ")}`))

const Reason = Schema.String.pipe(Schema.maxLength(1_000)).annotations(message("must be a string of at most 1000 characters"))
const Priority = Schema.Int.annotations(message("must be an integer"))
const Ids = Schema.Array(Id).pipe(Schema.maxItems(P.MAX_REDRIVE_IDS)).annotations(
  message(`must be an array of at most ${P.MAX_REDRIVE_IDS} job ids`)
)
const WorkflowName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)).annotations(
  message("must be a workflow name of 1 to 256 characters")
)
const WorkflowStatusParam = P.WorkflowStatus.annotations(message(`must be one of ${P.WorkflowStatus.literals.join(", ")}`))
const EventType = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)).annotations(
  message("must be an event type of 1 to 256 characters")
)
const CapabilityField = P.Capability.annotations(message(`must be one of ${P.Capability.literals.join(", ")}`))
const Before = Schema.Int.pipe(Schema.nonNegative()).annotations(message("must be a time in epoch milliseconds (an integer ≥ 0)"))

const BulkAction = Schema.Literal("cancel", "remove", "retry", "promote", "redrive").annotations(
  message("must be one of cancel, remove, retry, promote, redrive")
)
const States = Schema.Array(P.JobState).pipe(Schema.minItems(1), Schema.maxItems(7)).annotations(
  message(`must be a non-empty array of ${P.JobState.literals.join(", ")}`)
)
const Millis = Schema.Int.pipe(Schema.nonNegative()).annotations(message("must be a number of milliseconds (an integer ≥ 0)"))
const BulkLimit = Schema.Int.pipe(Schema.between(1, P.MAX_BULK_LIMIT)).annotations(message(`must be an integer from 1 to ${P.MAX_BULK_LIMIT}`))
/** A bulk action's body: the action, the filter (the path gives the queue, or none for every queue), the chunk. */
const bulkFields = {
  action: BulkAction,
  states: Schema.optional(States),
  idPrefix: Schema.optional(Id),
  createdBefore: Schema.optional(Before),
  olderThanMs: Schema.optional(Millis),
  reason: Schema.optional(Reason),
  cursor: Schema.optional(Cursor),
  limit: Schema.optional(BulkLimit)
}

const page = { cursor: Schema.optional(Cursor), limit: Schema.optional(Limit) }
const PageParams = Schema.Struct(page)

/** Action bodies: JSON objects, unknown fields refused (a typo must not pass as "nothing to change"). */
const Body = <F extends Schema.Struct.Fields>(fields: F) =>
  Schema.Struct(fields).annotations({
    parseOptions: { onExcessProperty: "error" },
    message: () => "must be a JSON object"
  })
/** No fields: an empty Struct accepts any object, so the refusal of a field is spelled out. */
const Empty = Schema.Struct({}).annotations({ message: () => "must be a JSON object" }).pipe(
  Schema.filter((body) => {
    if (Array.isArray(body)) return "must be a JSON object"
    const [field] = Object.keys(body)
    return field === undefined || `${field}: is unexpected (this action takes no fields)`
  })
)

const ObjectPath = Schema.Struct({ object: ObjectName })
const QueuePath = Schema.Struct({ object: ObjectName, queue: QueueName })
const JobPath = Schema.Struct({ object: ObjectName, queue: QueueName, id: Id })

/** What the API lists at its root: the names of the objects the inspector reaches. */
export const ObjectList = Schema.Struct({ objects: Schema.Array(Schema.Struct({ name: Schema.String })) })
export type ObjectList = typeof ObjectList.Type

// ---------------------------------------------------------------------------------------------
// The API

const objects = HttpApiGroup.make("objects")
  .add(HttpApiEndpoint.get("list", "/api/objects").addSuccess(ObjectList))
  .add(HttpApiEndpoint.get("overview", "/api/objects/:object").setPath(ObjectPath).addSuccess(P.Overview))

const operations = HttpApiGroup.make("operations")
  .add(
    HttpApiEndpoint.get("list", "/api/objects/:object/operations")
      .setPath(ObjectPath)
      .setUrlParams(Schema.Struct({ status: Schema.optional(StatusParam), ...page }))
      .addSuccess(P.OperationPage)
  )
  .add(
    HttpApiEndpoint.post("cancel", "/api/objects/:object/operations/:operation/:id/cancel")
      .setPath(Schema.Struct({ object: ObjectName, operation: Id, id: Id }))
      .setPayload(Empty)
      .addSuccess(P.ActionResult)
  )

const alarms = HttpApiGroup.make("alarms")
  .add(HttpApiEndpoint.get("list", "/api/objects/:object/alarms").setPath(ObjectPath).setUrlParams(PageParams).addSuccess(P.AlarmPage))
  .add(
    HttpApiEndpoint.post("cancel", "/api/objects/:object/alarms/:name/cancel")
      .setPath(Schema.Struct({ object: ObjectName, name: Id }))
      .setPayload(Empty)
      .addSuccess(P.ActionResult)
  )

const log = HttpApiGroup.make("log")
  .add(HttpApiEndpoint.get("view", "/api/objects/:object/log").setPath(ObjectPath).addSuccess(P.RetainedLogView))

const SchedulePath = Schema.Struct({ object: ObjectName, key: Id })
const scheduleAction = <const N extends string>(name: N) =>
  HttpApiEndpoint.post(name, `/api/objects/:object/schedules/:key/${name}`).setPath(SchedulePath).setPayload(Empty).addSuccess(P.ActionResult)

const schedules = HttpApiGroup.make("schedules")
  .add(
    HttpApiEndpoint.get("list", "/api/objects/:object/schedules").setPath(ObjectPath).setUrlParams(PageParams).addSuccess(P.SchedulePage)
  )
  .add(scheduleAction("trigger"))
  .add(scheduleAction("pause"))
  .add(scheduleAction("resume"))

const jobAction = <const N extends string>(name: N) =>
  HttpApiEndpoint.post(name, `/api/objects/:object/queues/:queue/jobs/:id/${name}`)
    .setPath(JobPath)
    .setPayload(Empty)
    .addSuccess(P.ActionResult)
const jobActionWith = <const N extends string, F extends Schema.Struct.Fields>(name: N, fields: F) =>
  HttpApiEndpoint.post(name, `/api/objects/:object/queues/:queue/jobs/:id/${name}`)
    .setPath(JobPath)
    .setPayload(Body(fields))
    .addSuccess(P.ActionResult)
const queueAction = <const N extends string>(name: N) =>
  HttpApiEndpoint.post(name, `/api/objects/:object/queues/:queue/${name}`).setPath(QueuePath).setPayload(Empty).addSuccess(P.ActionResult)

const jobs = HttpApiGroup.make("jobs")
  .add(
    HttpApiEndpoint.get("list", "/api/objects/:object/queues/:queue/jobs")
      .setPath(QueuePath)
      .setUrlParams(Schema.Struct({ state: Schema.optional(JobStateParam), ...page }))
      .addSuccess(P.JobPage)
  )
  .add(HttpApiEndpoint.get("get", "/api/objects/:object/queues/:queue/jobs/:id").setPath(JobPath).addSuccess(P.JobDetail))
  .add(
    HttpApiEndpoint.get("logs", "/api/objects/:object/queues/:queue/jobs/:id/logs")
      .setPath(JobPath)
      .setUrlParams(PageParams)
      .addSuccess(P.LogPage)
  )
  .add(
    HttpApiEndpoint.get("deadLetters", "/api/objects/:object/queues/:queue/dead-letters")
      .setPath(QueuePath)
      .setUrlParams(PageParams)
      .addSuccess(P.DeadLetterPage)
  )
  .add(jobAction("retry"))
  .add(jobAction("remove"))
  .add(jobActionWith("cancel", { reason: Schema.optional(Reason) }))
  .add(jobAction("promote"))
  .add(jobActionWith("priority", { priority: Priority }))
  .add(queueAction("pause"))
  .add(queueAction("resume"))
  .add(
    HttpApiEndpoint.post("redrive", "/api/objects/:object/queues/:queue/dead-letters/redrive")
      .setPath(QueuePath)
      .setPayload(Body({ ids: Schema.optional(Ids) }))
      .addSuccess(P.ActionResult)
  )
  .add(
    // One chunk per request: the answer's cursor, sent back, goes on (see `Jobs.bulk`).
    HttpApiEndpoint.post("bulk", "/api/objects/:object/queues/:queue/bulk")
      .setPath(QueuePath)
      .setPayload(Body(bulkFields))
      .addSuccess(P.BulkResult)
  )
  .add(
    HttpApiEndpoint.post("bulkAll", "/api/objects/:object/jobs/bulk")
      .setPath(ObjectPath)
      .setPayload(Body(bulkFields))
      .addSuccess(P.BulkResult)
  )

const WorkflowPath = Schema.Struct({ object: ObjectName, workflow: WorkflowName })
const InstancePath = Schema.Struct({ object: ObjectName, workflow: WorkflowName, id: Id })
const INSTANCE = "/api/objects/:object/workflows/:workflow/instances/:id"
const instanceAction = <const N extends string>(name: N) =>
  HttpApiEndpoint.post(name, `${INSTANCE}/${name}`).setPath(InstancePath).setPayload(Empty).addSuccess(P.ActionResult)

const workflows = HttpApiGroup.make("workflows")
  .add(
    HttpApiEndpoint.get("list", "/api/objects/:object/workflows/:workflow/instances")
      .setPath(WorkflowPath)
      .setUrlParams(Schema.Struct({ status: Schema.optional(WorkflowStatusParam), ...page }))
      .addSuccess(P.WorkflowPage)
  )
  .add(HttpApiEndpoint.get("get", INSTANCE).setPath(InstancePath).addSuccess(P.WorkflowDetail))
  .add(HttpApiEndpoint.get("steps", `${INSTANCE}/steps`).setPath(InstancePath).setUrlParams(PageParams).addSuccess(P.WorkflowStepPage))
  .add(HttpApiEndpoint.get("events", `${INSTANCE}/events`).setPath(InstancePath).setUrlParams(PageParams).addSuccess(P.WorkflowEventPage))
  .add(instanceAction("pause"))
  .add(instanceAction("resume"))
  .add(instanceAction("terminate"))
  .add(instanceAction("restart"))
  .add(
    // A POST to the events collection sends one: `{ type, payload? }` (any JSON value).
    HttpApiEndpoint.post("sendEvent", `${INSTANCE}/events`)
      .setPath(InstancePath)
      .setPayload(Body({ type: EventType, payload: Schema.optional(Schema.Unknown) }))
      .addSuccess(P.ActionResult)
  )

const maintenance = HttpApiGroup.make("maintenance").add(
  HttpApiEndpoint.post("purge", "/api/objects/:object/purge")
    .setPath(ObjectPath)
    .setPayload(Body({ capability: CapabilityField, before: Before }))
    .addSuccess(P.ActionResult)
)

const fanout = HttpApiGroup.make("fanout").add(
  HttpApiEndpoint.get("deliveries", "/api/objects/:object/fanout")
    .setPath(ObjectPath)
    .setUrlParams(Schema.Struct({ target: Schema.optional(Id), ...page }))
    .addSuccess(P.FanoutDeliveryPage)
)

const meta = HttpApiGroup.make("meta").add(HttpApiEndpoint.get("openapi", "/api/openapi.json").addSuccess(Schema.Unknown))

/** The inspector's HTTP API (paths relative to where it is mounted, e.g. `/_durability`). */
export class InspectorApi extends HttpApi.make("durability-inspector")
  .add(objects)
  .add(operations)
  .add(alarms)
  .add(schedules)
  .add(jobs)
  .add(workflows)
  .add(log)
  .add(fanout)
  .add(maintenance)
  .add(meta)
  .addError(BadRequest.annotations({ description: "The request is malformed; the message names the field." }), { status: 400 })
  .addError(NotFound.annotations({ description: "No such endpoint, object, capability, queue, job, schedule, workflow or instance." }), {
    status: 404
  })
  .addError(PayloadTooLarge)
  .addError(UnsupportedMediaType)
  .addError(InternalError)
  .addError(Unavailable.annotations({ description: "The object did not answer." }), { status: 503 })
  // The last middleware added runs first: who is asking, then what the request carries.
  .middleware(RequestGuard)
  .middleware(Authorization)
  .annotateContext(OpenApi.annotations({
    title: "durability inspector",
    version: "1",
    description: "See and steer a Durable Object's background work: scheduler, operations, named alarms, schedules, job queues, workflows."
  }))
{}

// ---------------------------------------------------------------------------------------------
// What the handlers reach

/** How the handlers reach the objects, and where the API is mounted (the OpenAPI document's server). */
export class Backend extends Context.Tag("durability/inspector/Backend")<Backend, {
  /** Where the API is mounted (`/_durability`); the OpenAPI document's server URL. */
  readonly prefix: string
  /** The names of the objects the inspector lists, in display order (a resolver may reach others). */
  readonly names: Effect.Effect<ReadonlyArray<string>, Unavailable>
  /** Sends one request to one object's `inspect`; `NotFound` for a name it may not reach. */
  readonly inspect: (object: string, request: P.RequestEncoded) => Effect.Effect<P.Answer, NotFound | Unavailable>
}>() {}

type Tag = P.Request["_tag"]
type RequestOf<T extends Tag> = Extract<P.RequestEncoded, { readonly _tag: T }>

const failureOf = (failure: P.Failure): BadRequest | NotFound | Unavailable => {
  switch (failure._tag) {
    case "BadRequest":
      return new BadRequest({ message: failure.message })
    case "NotFound":
      return new NotFound({ message: failure.message })
    case "Unavailable":
      return new Unavailable({ message: failure.message })
  }
}

/**
 * One request to one object. The answer is decoded with its Schema here: an object whose answer
 * does not match is a bug on the server (500), not a bad request.
 */
const ask = <T extends Tag>(object: string, request: RequestOf<T>): Effect.Effect<P.AnswerOf<T>, BadRequest | NotFound | Unavailable, Backend> =>
  Effect.gen(function*() {
    const backend = yield* Backend
    const answer = yield* backend.inspect(object, request)
    if (!answer.ok) return yield* failureOf(answer.failure)
    const schema = P.answers[request._tag as T] as unknown as Schema.Schema<P.AnswerOf<T>, unknown>
    return yield* Effect.orDie(Schema.decodeUnknown(schema)(answer.value))
  })

const objectsLive = HttpApiBuilder.group(InspectorApi, "objects", (handlers) =>
  handlers
    .handle("list", () =>
      Effect.flatMap(Backend, (backend) => Effect.map(backend.names, (names) => ({ objects: names.map((name) => ({ name })) }))))
    .handle("overview", ({ path }) => ask(path.object, { _tag: "Overview" })))

const operationsLive = HttpApiBuilder.group(InspectorApi, "operations", (handlers) =>
  handlers
    .handle("list", ({ path, urlParams }) => ask(path.object, { _tag: "Operations", ...urlParams }))
    .handle("cancel", ({ path }) => ask(path.object, { _tag: "CancelOperation", operation: path.operation, id: path.id })))

const fanoutLive = HttpApiBuilder.group(InspectorApi, "fanout", (handlers) =>
  handlers.handle("deliveries", ({ path, urlParams }) => ask(path.object, { _tag: "FanoutDeliveries", ...urlParams })))

const alarmsLive = HttpApiBuilder.group(InspectorApi, "alarms", (handlers) =>
  handlers
    .handle("list", ({ path, urlParams }) => ask(path.object, { _tag: "Alarms", ...urlParams }))
    .handle("cancel", ({ path }) => ask(path.object, { _tag: "CancelAlarm", name: path.name })))

const logLive = HttpApiBuilder.group(InspectorApi, "log", (handlers) =>
  handlers.handle("view", ({ path }) => ask(path.object, { _tag: "RetainedLog" })))

const schedulesLive = HttpApiBuilder.group(InspectorApi, "schedules", (handlers) =>
  handlers
    .handle("list", ({ path, urlParams }) => ask(path.object, { _tag: "Schedules", ...urlParams }))
    .handle("trigger", ({ path }) => ask(path.object, { _tag: "TriggerSchedule", key: path.key }))
    .handle("pause", ({ path }) => ask(path.object, { _tag: "PauseSchedule", key: path.key }))
    .handle("resume", ({ path }) => ask(path.object, { _tag: "ResumeSchedule", key: path.key })))

const jobsLive = HttpApiBuilder.group(InspectorApi, "jobs", (handlers) =>
  handlers
    .handle("list", ({ path, urlParams }) => ask(path.object, { _tag: "Jobs", queue: path.queue, ...urlParams }))
    .handle("get", ({ path }) => ask(path.object, { _tag: "Job", queue: path.queue, id: path.id }))
    .handle("logs", ({ path, urlParams }) => ask(path.object, { _tag: "JobLogs", queue: path.queue, id: path.id, ...urlParams }))
    .handle("deadLetters", ({ path, urlParams }) => ask(path.object, { _tag: "DeadLetters", queue: path.queue, ...urlParams }))
    .handle("retry", ({ path }) => ask(path.object, { _tag: "RetryJob", queue: path.queue, id: path.id }))
    .handle("remove", ({ path }) => ask(path.object, { _tag: "RemoveJob", queue: path.queue, id: path.id }))
    .handle("cancel", ({ path, payload }) => ask(path.object, { _tag: "CancelJob", queue: path.queue, id: path.id, ...payload }))
    .handle("promote", ({ path }) => ask(path.object, { _tag: "PromoteJob", queue: path.queue, id: path.id }))
    .handle("priority", ({ path, payload }) =>
      ask(path.object, { _tag: "ChangePriority", queue: path.queue, id: path.id, priority: payload.priority }))
    .handle("pause", ({ path }) => ask(path.object, { _tag: "PauseQueue", queue: path.queue }))
    .handle("resume", ({ path }) => ask(path.object, { _tag: "ResumeQueue", queue: path.queue }))
    .handle("redrive", ({ path, payload }) => ask(path.object, { _tag: "RedriveDeadLetters", queue: path.queue, ...payload }))
    .handle("bulk", ({ path, payload }) => ask(path.object, { _tag: "BulkJobs", queue: path.queue, ...payload }))
    .handle("bulkAll", ({ path, payload }) => ask(path.object, { _tag: "BulkJobs", ...payload })))

const workflowsLive = HttpApiBuilder.group(InspectorApi, "workflows", (handlers) =>
  handlers
    .handle("list", ({ path, urlParams }) => ask(path.object, { _tag: "Workflows", workflow: path.workflow, ...urlParams }))
    .handle("get", ({ path }) => ask(path.object, { _tag: "Workflow", workflow: path.workflow, id: path.id }))
    .handle("steps", ({ path, urlParams }) => ask(path.object, { _tag: "WorkflowSteps", workflow: path.workflow, id: path.id, ...urlParams }))
    .handle("events", ({ path, urlParams }) => ask(path.object, { _tag: "WorkflowEvents", workflow: path.workflow, id: path.id, ...urlParams }))
    .handle("pause", ({ path }) => ask(path.object, { _tag: "PauseWorkflow", workflow: path.workflow, id: path.id }))
    .handle("resume", ({ path }) => ask(path.object, { _tag: "ResumeWorkflow", workflow: path.workflow, id: path.id }))
    .handle("terminate", ({ path }) => ask(path.object, { _tag: "TerminateWorkflow", workflow: path.workflow, id: path.id }))
    .handle("restart", ({ path }) => ask(path.object, { _tag: "RestartWorkflow", workflow: path.workflow, id: path.id }))
    .handle("sendEvent", ({ path, payload }) =>
      ask(path.object, {
        _tag: "SendWorkflowEvent",
        workflow: path.workflow,
        id: path.id,
        type: payload.type,
        ...(payload.payload === undefined ? {} : { payload: payload.payload })
      })))

const maintenanceLive = HttpApiBuilder.group(InspectorApi, "maintenance", (handlers) =>
  handlers.handle("purge", ({ path, payload }) =>
    ask(path.object, { _tag: "PurgeBefore", capability: payload.capability, before: payload.before })))

let document: OpenApi.OpenAPISpec | undefined

/** The OpenAPI 3 document of `InspectorApi` (paths relative to the mount prefix, given as the server). */
export const openApi = (prefix: string): OpenApi.OpenAPISpec => {
  document ??= OpenApi.fromApi(InspectorApi)
  return { ...document, servers: [{ url: prefix }] }
}

const metaLive = HttpApiBuilder.group(InspectorApi, "meta", (handlers) =>
  handlers.handle("openapi", () => Effect.map(Backend, (backend) => openApi(backend.prefix))))

// ---------------------------------------------------------------------------------------------
// Errors as the API promises them

/** One line per field (its first issue: an optional field's "or undefined" branch adds nothing), at most 3. */
const describeIssues = (error: HttpApiDecodeError): string => {
  const byField = new Map<string, string>()
  for (const issue of error.issues) {
    const field = issue.path.map(String).join(".")
    if (!byField.has(field)) byField.set(field, field === "" ? issue.message : `${field}: ${issue.message}`)
  }
  const lines = [...byField.values()]
  return lines.slice(0, 3).join("; ") + (lines.length > 3 ? ` (and ${lines.length - 3} more)` : "")
}

const isApiError = (error: unknown): error is InspectorApiError =>
  error instanceof BadRequest || error instanceof Unauthorized || error instanceof Forbidden ||
  error instanceof NotFound || error instanceof PayloadTooLarge || error instanceof UnsupportedMediaType ||
  error instanceof InternalError || error instanceof Unavailable

/**
 * Every failure leaves as one of the API's errors: a request that does not decode becomes
 * `BadRequest` naming the field, an unknown route `NotFound`, and anything unexpected `InternalError`
 * with a fixed message (the cause is logged, never sent).
 */
const errorsLive = HttpApiBuilder.middleware(InspectorApi, (app) =>
  Effect.catchAllCause(app, (cause) => {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error: unknown = failure.value
      if (isApiError(error)) return Effect.fail(error)
      if (error instanceof HttpApiDecodeError) return Effect.fail(new BadRequest({ message: describeIssues(error) }))
      if (typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "RouteNotFound") {
        return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          Effect.fail(new NotFound({ message: `no endpoint ${request.method} ${new URL(request.url, "http://x").pathname}` })))
      }
    }
    if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
    return Effect.zipRight(
      Effect.logError("durability inspector: internal error", cause),
      Effect.fail(new InternalError({ message: "internal error" }))
    )
  }), { withContext: true })

const guardLive = Layer.succeed(
  RequestGuard,
  Effect.flatMap(Effect.serviceOption(BodyVerdict), (verdict) =>
    Option.isSome(verdict) && verdict.value !== undefined ? Effect.fail(verdict.value) : Effect.void)
)

/**
 * The `Authorization` middleware from one decision over the whole request (both headers, the
 * method): each security scheme asks it, and a request's decision is made once.
 */
export const authorization = (
  authorize: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<void, Unauthorized | Forbidden>
): Layer.Layer<Authorization> => {
  const decided = new WeakMap<object, Effect.Effect<void, Unauthorized | Forbidden>>()
  const decide = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    let decision = decided.get(request)
    if (decision === undefined) {
      decision = Effect.runSync(Effect.cached(authorize(request)))
      decided.set(request, decision)
    }
    return decision
  })
  return Layer.succeed(Authorization, Authorization.of({ bearer: () => decide, access: () => decide }))
}

/**
 * Every endpoint's handler, the request guard and the error mapping. Needs `Backend` and
 * `Authorization` (see `authorization`); serve it with `HttpApiBuilder.toWebHandler` or any server.
 */
export const layer: Layer.Layer<HttpApi.Api, never, Backend | Authorization> = HttpApiBuilder.api(InspectorApi).pipe(
  Layer.provide([objectsLive, operationsLive, alarmsLive, schedulesLive, jobsLive, workflowsLive, logLive, fanoutLive, maintenanceLive, metaLive]),
  Layer.provide(guardLive),
  Layer.provide(errorsLive)
)
