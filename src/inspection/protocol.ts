/**
 * What an inspector may ask an object and what it answers, as Schemas: the one wire shape shared by
 * `DurabilityScheduler.inspect` (RPC from the Worker), the `Inspector` service and the admin HttpApi.
 *
 * Everything here is plain JSON so it crosses RPC and HTTP alike. User data (payloads, results,
 * progress) travels as its stored JSON text, cut to a bound, never decoded: an inspector shows what
 * is stored, and a schema that no longer decodes an old row must not hide it. Errors carry a name
 * and a message, never a stack.
 * @internal
 */
import * as Schema from "effect/Schema"

// Bounds: every answer is bounded whatever the object holds (`limits.ts`, which the capabilities'
// sources read without linking these Schemas).
export {
  COUNT_CAP,
  DEFAULT_PAGE,
  DETAIL_CHILDREN,
  DETAIL_EVENTS,
  DETAIL_JSON_CHARS,
  DETAIL_LOG_LINES,
  DETAIL_STEPS,
  LIST_JSON_CHARS,
  MAX_BULK_LIMIT,
  MAX_PAGE,
  MAX_REDRIVE_IDS,
  MAX_RUNNING_LISTED,
  MESSAGE_CHARS,
  RATE_WINDOW_MS
} from "./limits.js"
import { MAX_BULK_LIMIT, MAX_PAGE, MAX_REDRIVE_IDS } from "./limits.js"

// ---------------------------------------------------------------------------------------------
// Pieces

/** A stored JSON value as text, cut at a bound (`truncated` then says so). */
export const JsonText = Schema.Struct({ json: Schema.String, truncated: Schema.Boolean })
export type JsonText = typeof JsonText.Type

/** An error as an inspector shows it: its name and message, never its stack. */
export const ErrorView = Schema.Struct({ name: Schema.String, message: Schema.String })
export type ErrorView = typeof ErrorView.Type

const Millis = Schema.Number
const NullableMillis = Schema.NullOr(Schema.Number)
const Cursor = Schema.optional(Schema.String)
const Limit = Schema.optional(Schema.Int.pipe(Schema.between(1, MAX_PAGE)))

/** A job's state as an inspector shows it (the same states as `Jobs.JobState`). */
export const JobState = Schema.Literal("waiting", "delayed", "active", "waiting-children", "completed", "failed", "canceled")
export type JobState = typeof JobState.Type
/** Jobs of one queue counted by state. */
export const JobCounts = Schema.Record({ key: JobState, value: Schema.Number })

/** An operation record's status: pending until its handler succeeds or fails for good. */
export const OperationStatus = Schema.Literal("pending", "completed", "failed")
export type OperationStatus = typeof OperationStatus.Type

/** A workflow instance's status as an inspector shows it (the same as `WorkflowInstanceStatus`). */
export const WorkflowStatus = Schema.Literal("queued", "running", "paused", "waiting", "complete", "errored", "terminated")
export type WorkflowStatus = typeof WorkflowStatus.Type
/** One workflow's instances counted by status. */
export const WorkflowCounts = Schema.Record({ key: WorkflowStatus, value: Schema.Number })

/** The capabilities an object can attach, each a part of the inspector (and of `PurgeBefore`). */
export const Capability = Schema.Literal("operations", "alarms", "jobs", "schedules", "workflows", "log", "fanout")
export type Capability = typeof Capability.Type

// ---------------------------------------------------------------------------------------------
// Answers

/**
 * What an inspector shows of the scheduler: its alarm, timer, permits and running work, to tell a stuck
 * object from an idle one.
 */
export const SchedulerSummary = Schema.Struct({
  objectId: Schema.NullOr(Schema.String),
  /** The physical alarm as this instance knows it (null: none set). */
  physicalAlarm: NullableMillis,
  /** The in-memory early timer (null: not armed). */
  earlyTimer: NullableMillis,
  permits: Schema.Struct({ capacity: Schema.Number, available: Schema.Number, waiting: Schema.Number }),
  /** Executions in this isolate now: the count, and the first `MAX_RUNNING_LISTED` of them. */
  runningCount: Schema.Number,
  running: Schema.Array(Schema.Struct({ capability: Schema.String, key: Schema.String })),
  /** The capabilities attached to this scheduler, in attach order. */
  capabilities: Schema.Array(Capability),
  now: Millis
})
export type SchedulerSummary = typeof SchedulerSummary.Type

/**
 * A queue's jobs finished over the last `windowMs` (`RATE_WINDOW_MS`), counted from storage by their
 * `finished_at`: durable, so an eviction does not reset them, each stopping at `COUNT_CAP`. Jobs already
 * removed (retention, `clean`) are not counted. Per minute: `completed / (windowMs / 60 000)`.
 */
export const QueueRates = Schema.Struct({
  windowMs: Schema.Number,
  completed: Schema.Number,
  failed: Schema.Number
})
export type QueueRates = typeof QueueRates.Type

/**
 * One job queue in the overview: how it processes, whether it is paused, its jobs by state, its dead
 * letters and its recent rates.
 */
export const QueueSummary = Schema.Struct({
  name: Schema.String,
  processing: Schema.Literal("inline", "external", "queue"),
  paused: Schema.Boolean,
  /** By state, each stopping at `COUNT_CAP` (like every count of the overview). */
  counts: JobCounts,
  deadLetters: Schema.Number,
  /** Jobs completed and failed over the last few minutes (see `QueueRates`). */
  rates: QueueRates
})
export type QueueSummary = typeof QueueSummary.Type

/** One workflow in the overview: its name and its instances by status. */
export const WorkflowSummary = Schema.Struct({
  name: Schema.String,
  /** By status, each stopping at `COUNT_CAP` (like every count of the overview). */
  counts: WorkflowCounts
})
export type WorkflowSummary = typeof WorkflowSummary.Type

/**
 * The first page of an inspector: the scheduler and counts for each attached capability (absent: not
 * attached).
 */
export const Overview = Schema.Struct({
  scheduler: SchedulerSummary,
  operations: Schema.optional(Schema.Struct({ counts: Schema.Record({ key: OperationStatus, value: Schema.Number }) })),
  alarms: Schema.optional(Schema.Struct({ pending: Schema.Number, failed: Schema.Number })),
  schedules: Schema.optional(Schema.Struct({ active: Schema.Number, paused: Schema.Number, ended: Schema.Number })),
  jobs: Schema.optional(Schema.Struct({ queues: Schema.Array(QueueSummary) })),
  /** Every workflow the object defines, in definition order. */
  workflows: Schema.optional(Schema.Struct({ definitions: Schema.Array(WorkflowSummary) })),
  /** The retained log's window, its stored bytes, and how many consumers, cold segments and held leases it has. */
  log: Schema.optional(Schema.Struct({
    oldestOffset: Schema.Number,
    hotOffset: Schema.Number,
    nextOffset: Schema.Number,
    bytes: Schema.Number,
    consumers: Schema.Number,
    segments: Schema.Number,
    leasesHeld: Schema.Number
  })),
  /** Fanout's deliveries still stored, by target (each count stopping at `COUNT_CAP`). */
  fanout: Schema.optional(Schema.Struct({ targets: Schema.Array(Schema.Struct({ target: Schema.String, pending: Schema.Number })) }))
})
export type Overview = typeof Overview.Type

/** One fanout delivery still stored: its message, target, phase and attempts. */
export const FanoutDeliveryItem = Schema.Struct({
  messageId: Schema.String,
  target: Schema.String,
  /** `delivery`: to its consumer; `dead_letter`: only its write to the DLQ is left. */
  phase: Schema.Literal("delivery", "dead_letter"),
  attempt: Schema.Number,
  nextAttemptAt: Millis,
  error: Schema.optional(ErrorView)
})
export type FanoutDeliveryItem = typeof FanoutDeliveryItem.Type

/** One operation record in a list. */
export const OperationItem = Schema.Struct({
  id: Schema.String,
  operation: Schema.String,
  status: OperationStatus,
  attempt: Schema.Number,
  nextAttemptAt: NullableMillis,
  createdAt: Millis,
  payload: JsonText,
  result: Schema.optional(JsonText),
  error: Schema.optional(ErrorView)
})
export type OperationItem = typeof OperationItem.Type

/** One named alarm in a list. */
export const AlarmItem = Schema.Struct({
  name: Schema.String,
  status: Schema.Literal("pending", "failed"),
  scheduledTime: Millis,
  nextAttemptAt: Millis,
  attempt: Schema.Number,
  error: Schema.optional(ErrorView),
  createdAt: Millis
})
export type AlarmItem = typeof AlarmItem.Type

const RunView = Schema.Struct({
  scheduledTime: Millis,
  manual: Schema.Boolean,
  runNumber: Schema.Number
})

/** One schedule in a list. */
export const ScheduleItem = Schema.Struct({
  key: Schema.String,
  schedule: Schema.String,
  /** E.g. `cron "0 9 * * 1-5" in Europe/Lisbon`. */
  description: Schema.String,
  status: Schema.Literal("active", "paused", "ended"),
  nextRunAt: NullableMillis,
  currentRun: Schema.NullOr(Schema.extend(RunView, Schema.Struct({ attempt: Schema.Number, nextAttemptAt: Millis, error: Schema.NullOr(ErrorView) }))),
  lastRun: Schema.NullOr(Schema.extend(RunView, Schema.Struct({ outcome: Schema.Literal("completed", "failed"), settledAt: Millis, error: Schema.NullOr(ErrorView) }))),
  runCount: Schema.Number,
  missedCount: Schema.Number,
  payload: JsonText,
  createdAt: Millis
})
export type ScheduleItem = typeof ScheduleItem.Type

const JobRef = Schema.Struct({ queue: Schema.String, id: Schema.String })

/** One job in a list (and the head of its detail). */
export const JobItem = Schema.Struct({
  id: Schema.String,
  queue: Schema.String,
  state: JobState,
  attempt: Schema.Number,
  maxAttempts: Schema.Number,
  priority: Schema.Number,
  progress: JsonText,
  createdAt: Millis,
  runAt: Millis,
  startedAt: Schema.optional(Millis),
  finishedAt: Schema.optional(Millis),
  payload: JsonText,
  result: Schema.optional(JsonText),
  error: Schema.optional(ErrorView),
  parent: Schema.optional(JobRef)
})
export type JobItem = typeof JobItem.Type

/** One line a job's handler logged with `Jobs.log`, numbered in the order written. */
export const LogLine = Schema.Struct({ seq: Schema.Number, at: Millis, message: Schema.String })

/** One job with its logs and children, for the detail view. */
export const JobDetail = Schema.Struct({
  job: JobItem,
  /** The oldest `DETAIL_LOG_LINES` kept lines; `total` counts all kept. */
  logs: Schema.Struct({ items: Schema.Array(LogLine), total: Schema.Number }),
  /** Its children with their states: the first `DETAIL_CHILDREN`, and how many in all. */
  children: Schema.Struct({ items: Schema.Array(Schema.extend(JobRef, Schema.Struct({ state: Schema.NullOr(JobState) }))), total: Schema.Number })
})
export type JobDetail = typeof JobDetail.Type

/** One dead letter: a job that failed for good and was moved out of its queue, kept for a redrive. */
export const DeadLetterItem = Schema.Struct({
  id: Schema.String,
  queue: Schema.String,
  payload: JsonText,
  attempts: Schema.Number,
  error: ErrorView,
  failedAt: Millis
})
export type DeadLetterItem = typeof DeadLetterItem.Type

/** One workflow instance in a list (and the head of its detail). */
export const WorkflowItem = Schema.Struct({
  workflow: Schema.String,
  id: Schema.String,
  status: WorkflowStatus,
  /** What it was created with. */
  params: JsonText,
  /** Its handler's return value, once complete. */
  output: Schema.optional(JsonText),
  /** Why it errored or was terminated. */
  error: Schema.optional(ErrorView),
  /** What it waits for while waiting: `event:<type>`, `child:<workflow>/<id>`. */
  waitingFor: Schema.Array(Schema.String),
  /** When it wakes, while waiting with a time (a sleep, a retry, a wait's timeout). */
  wakeAt: NullableMillis,
  /** The parent's `<workflow>/<id>`, for a child. */
  parent: Schema.NullOr(Schema.String),
  createdAt: Millis,
  updatedAt: Millis,
  /** When its first run started (null: still queued). */
  startedAt: NullableMillis,
  endedAt: NullableMillis
})
export type WorkflowItem = typeof WorkflowItem.Type

/** One step of an instance's timeline, in call order. */
export const WorkflowStepItem = Schema.Struct({
  /** Its position in call order, 1-based. */
  position: Schema.Number,
  name: Schema.String,
  kind: Schema.Literal("do", "sleep", "event", "child"),
  status: Schema.Literal("running", "retrying", "waiting", "completed", "failed"),
  /** Attempts taken (a `do` step). */
  attempt: Schema.Number,
  /** What it stored: a `do`'s value, the event a wait received (`{ type, payload, timestamp }`), a child's output. */
  result: Schema.optional(JsonText),
  error: Schema.optional(ErrorView),
  /** The child it runs (`<workflow>/<id>`), for a `child` step not yet completed. */
  child: Schema.optional(Schema.String),
  /** When a sleep ends, a retry is due or a wait times out. */
  wakeAt: NullableMillis,
  startedAt: Millis,
  endedAt: NullableMillis
})
export type WorkflowStepItem = typeof WorkflowStepItem.Type

/** One event sent to an instance: kept until the first wait of its type consumes it. */
export const WorkflowEventItem = Schema.Struct({
  /** Its number in the object, in the order events were sent. */
  id: Schema.Number,
  type: Schema.String,
  payload: JsonText,
  sentAt: Millis,
  /** The position of the wait step that consumed it (null: unconsumed, waiting for a wait of its type). */
  consumedBy: Schema.NullOr(Schema.Number)
})
export type WorkflowEventItem = typeof WorkflowEventItem.Type

/** One workflow instance with its timeline: its steps and the events sent to it. */
export const WorkflowDetail = Schema.Struct({
  instance: WorkflowItem,
  /** The first `DETAIL_STEPS` steps in call order; `total` counts them all (up to `COUNT_CAP`). */
  steps: Schema.Struct({ items: Schema.Array(WorkflowStepItem), total: Schema.Number }),
  /** The oldest `DETAIL_EVENTS` events; `total` counts them all (up to `COUNT_CAP`). */
  events: Schema.Struct({ items: Schema.Array(WorkflowEventItem), total: Schema.Number })
})
export type WorkflowDetail = typeof WorkflowDetail.Type

/** A page: `cursor` is present when more may follow (pass it back for the next page). */
export const Page = <A, I>(item: Schema.Schema<A, I>) =>
  Schema.Struct({ items: Schema.Array(item), cursor: Schema.optional(Schema.String) })

/** A page of operation records. */
export const OperationPage = Page(OperationItem)
/** A page of named alarms. */
export const AlarmPage = Page(AlarmItem)
/** A page of schedules. */
export const SchedulePage = Page(ScheduleItem)
/** A page of jobs. */
export const JobPage = Page(JobItem)
/** A page of a job's log lines. */
export const LogPage = Page(LogLine)
/** A page of a queue's dead letters. */
export const DeadLetterPage = Page(DeadLetterItem)
/** A page of a workflow's instances, newest first. */
export const WorkflowPage = Page(WorkflowItem)
/** A page of an instance's steps, in call order. */
export const WorkflowStepPage = Page(WorkflowStepItem)
/** A page of the events sent to an instance, oldest first. */
export const WorkflowEventPage = Page(WorkflowEventItem)
/** A page of fanout deliveries, soonest due first. */
export const FanoutDeliveryPage = Page(FanoutDeliveryItem)

// ---------------------------------------------------------------------------------------------
// Reads

const QueueName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))
const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(512))
const WorkflowName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))
const WorkflowRef = { workflow: WorkflowName, id: Id }

/** Read the overview (`Overview`). */
export class OverviewQuery extends Schema.TaggedClass<OverviewQuery>()("Overview", {}) {}
/** List operation records, optionally of one status. */
export class OperationsQuery extends Schema.TaggedClass<OperationsQuery>()("Operations", {
  status: Schema.optional(OperationStatus),
  cursor: Cursor,
  limit: Limit
}) {}
/** List named alarms. */
export class AlarmsQuery extends Schema.TaggedClass<AlarmsQuery>()("Alarms", { cursor: Cursor, limit: Limit }) {}
/** List fanout's stored deliveries, optionally of one target (read-only). */
export class FanoutDeliveriesQuery extends Schema.TaggedClass<FanoutDeliveriesQuery>()("FanoutDeliveries", {
  target: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(512))),
  cursor: Cursor,
  limit: Limit
}) {}
/** List schedules. */
export class SchedulesQuery extends Schema.TaggedClass<SchedulesQuery>()("Schedules", { cursor: Cursor, limit: Limit }) {}
/** List one queue's jobs, optionally of one state. */
export class JobsQuery extends Schema.TaggedClass<JobsQuery>()("Jobs", {
  queue: QueueName,
  state: Schema.optional(JobState),
  cursor: Cursor,
  limit: Limit
}) {}
/** Read one job's detail (`JobDetail`). */
export class JobQuery extends Schema.TaggedClass<JobQuery>()("Job", { queue: QueueName, id: Id }) {}
/** Page through one job's log lines. */
export class JobLogsQuery extends Schema.TaggedClass<JobLogsQuery>()("JobLogs", {
  queue: QueueName,
  id: Id,
  cursor: Cursor,
  limit: Limit
}) {}
/** List one queue's dead letters. */
export class DeadLettersQuery extends Schema.TaggedClass<DeadLettersQuery>()("DeadLetters", {
  queue: QueueName,
  cursor: Cursor,
  limit: Limit
}) {}

/** List one workflow's instances, newest first, optionally of one status. */
export class WorkflowsQuery extends Schema.TaggedClass<WorkflowsQuery>()("Workflows", {
  workflow: WorkflowName,
  status: Schema.optional(WorkflowStatus),
  cursor: Cursor,
  limit: Limit
}) {}
/** Read one workflow instance with its timeline (`WorkflowDetail`). */
export class WorkflowQuery extends Schema.TaggedClass<WorkflowQuery>()("Workflow", WorkflowRef) {}
/** Page through one instance's steps (past the detail's first `DETAIL_STEPS`). */
export class WorkflowStepsQuery extends Schema.TaggedClass<WorkflowStepsQuery>()("WorkflowSteps", {
  ...WorkflowRef,
  cursor: Cursor,
  limit: Limit
}) {}
/** Page through the events sent to one instance (past the detail's first `DETAIL_EVENTS`). */
export class WorkflowEventsQuery extends Schema.TaggedClass<WorkflowEventsQuery>()("WorkflowEvents", {
  ...WorkflowRef,
  cursor: Cursor,
  limit: Limit
}) {}

// ---------------------------------------------------------------------------------------------
// Actions: each answers `{ changed }`, how many records it changed (0: nothing to do, e.g. a
// retry of a job that is not failed). Purge and redrive say how many records.

/** Retry a failed job. */
export class RetryJob extends Schema.TaggedClass<RetryJob>()("RetryJob", { queue: QueueName, id: Id }) {}
/** Delete a job. */
export class RemoveJob extends Schema.TaggedClass<RemoveJob>()("RemoveJob", { queue: QueueName, id: Id }) {}
/** Cancel a job (`reason` is kept with it). */
export class CancelJob extends Schema.TaggedClass<CancelJob>()("CancelJob", {
  queue: QueueName,
  id: Id,
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(1_000)))
}) {}
/** Start a delayed job now. */
export class PromoteJob extends Schema.TaggedClass<PromoteJob>()("PromoteJob", { queue: QueueName, id: Id }) {}
/** Change a job's priority (higher starts first). */
export class ChangePriority extends Schema.TaggedClass<ChangePriority>()("ChangePriority", {
  queue: QueueName,
  id: Id,
  priority: Schema.Int
}) {}
/** Pause a queue: none of its jobs starts until it is resumed. */
export class PauseQueue extends Schema.TaggedClass<PauseQueue>()("PauseQueue", { queue: QueueName }) {}
/** Resume a paused queue. */
export class ResumeQueue extends Schema.TaggedClass<ResumeQueue>()("ResumeQueue", { queue: QueueName }) {}
/** Move dead letters back into their queue to run again. */
export class RedriveDeadLetters extends Schema.TaggedClass<RedriveDeadLetters>()("RedriveDeadLetters", {
  queue: QueueName,
  /** Absent: every dead letter (oldest first, up to the queue's redrive bound). */
  ids: Schema.optional(Schema.Array(Id).pipe(Schema.maxItems(MAX_REDRIVE_IDS)))
}) {}
/**
 * One chunk of a bulk action on the jobs matching a filter (`Jobs.bulk`): of `queue`, or of every queue
 * when it is absent. Answers `BulkResult`; pass its `cursor` back (same action and filter) until `done`.
 */
export class BulkJobs extends Schema.TaggedClass<BulkJobs>()("BulkJobs", {
  action: Schema.Literal("cancel", "remove", "retry", "promote", "redrive"),
  /** Absent: the jobs of every queue. */
  queue: Schema.optional(QueueName),
  states: Schema.optional(Schema.Array(JobState).pipe(Schema.minItems(1), Schema.maxItems(7))),
  idPrefix: Schema.optional(Id),
  /** Epoch milliseconds: jobs created strictly before it. */
  createdBefore: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  /** Jobs created (dead letters failed) at least this many milliseconds ago. */
  olderThanMs: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  /** Canceled jobs keep it. */
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(1_000))),
  cursor: Schema.optional(Schema.String.pipe(Schema.maxLength(4_096))),
  /** Jobs changed at most in this chunk (default 100). */
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, MAX_BULK_LIMIT)))
}) {}
/** Run a schedule once now, outside its timing. */
export class TriggerSchedule extends Schema.TaggedClass<TriggerSchedule>()("TriggerSchedule", { key: Id }) {}
/** Pause a schedule: it does not run until it is resumed. */
export class PauseSchedule extends Schema.TaggedClass<PauseSchedule>()("PauseSchedule", { key: Id }) {}
/** Resume a paused schedule. */
export class ResumeSchedule extends Schema.TaggedClass<ResumeSchedule>()("ResumeSchedule", { key: Id }) {}
/** Cancel an operation record. */
export class CancelOperation extends Schema.TaggedClass<CancelOperation>()("CancelOperation", { operation: Id, id: Id }) {}
/** Cancel a pending named alarm. */
export class CancelAlarm extends Schema.TaggedClass<CancelAlarm>()("CancelAlarm", { name: Id }) {}
/** Pause a workflow instance: its running step finishes, nothing new starts until it is resumed. */
export class PauseWorkflow extends Schema.TaggedClass<PauseWorkflow>()("PauseWorkflow", WorkflowRef) {}
/** Resume a paused workflow instance. */
export class ResumeWorkflow extends Schema.TaggedClass<ResumeWorkflow>()("ResumeWorkflow", WorkflowRef) {}
/** End a workflow instance as terminated (its running step's signal is aborted). */
export class TerminateWorkflow extends Schema.TaggedClass<TerminateWorkflow>()("TerminateWorkflow", WorkflowRef) {}
/** Start a workflow instance over from its first step (its steps and events are deleted). */
export class RestartWorkflow extends Schema.TaggedClass<RestartWorkflow>()("RestartWorkflow", WorkflowRef) {}
/** Send a workflow instance an event: kept until the first wait of its type consumes it. */
export class SendWorkflowEvent extends Schema.TaggedClass<SendWorkflowEvent>()("SendWorkflowEvent", {
  ...WorkflowRef,
  type: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)),
  /** Any JSON value (the workflows' own bound on its size applies). */
  payload: Schema.optional(Schema.Unknown)
}) {}
/** Delete one capability's records created before a time, to reclaim storage. */
export class PurgeBefore extends Schema.TaggedClass<PurgeBefore>()("PurgeBefore", {
  capability: Capability,
  /** Epoch milliseconds: records created strictly before it are deleted. */
  before: Schema.Int.pipe(Schema.nonNegative())
}) {}

/** What every action answers: how many records it changed (0: nothing to do). */
export const ActionResult = Schema.Struct({ changed: Schema.Number })
export type ActionResult = typeof ActionResult.Type

/**
 * What a bulk action's chunk answers: jobs `changed` (as every action), `matched` and rows `examined`, and
 * whether the run is over (`done`) or where it goes on from (`cursor`).
 */
export const BulkResult = Schema.Struct({
  changed: Schema.Number,
  matched: Schema.Number,
  examined: Schema.Number,
  done: Schema.Boolean,
  cursor: Schema.optional(Schema.String)
})
export type BulkResult = typeof BulkResult.Type

/** The retained log: its window, each consumer's cursor and lag, the first cold segments, the first held leases. */
export class RetainedLogQuery extends Schema.TaggedClass<RetainedLogQuery>()("RetainedLog", {}) {}

/** What `RetainedLog` answers (each list at most `MAX_PAGE` long, oldest first). */
export const RetainedLogView = Schema.Struct({
  oldestOffset: Schema.Number,
  hotOffset: Schema.Number,
  nextOffset: Schema.Number,
  /** UTF-8 bytes of the records still in the object. */
  bytes: Schema.Number,
  consumers: Schema.Array(Schema.Struct({ consumer: Schema.String, offset: Schema.Number, lag: Schema.Number, committedAt: Millis })),
  segments: Schema.Struct({
    count: Schema.Number,
    bytes: Schema.Number,
    first: Schema.Array(Schema.Struct({
      firstOffset: Schema.Number,
      lastOffset: Schema.Number,
      locator: Schema.String,
      bytes: Schema.Number,
      flushedAt: Millis
    }))
  }),
  leases: Schema.Array(Schema.Struct({
    consumer: Schema.String,
    batchId: Schema.String,
    firstOffset: Schema.Number,
    lastOffset: Schema.Number,
    state: Schema.Literal("active", "pending"),
    attempt: Schema.Number,
    expiresAt: Millis
  }))
})
export type RetainedLogView = typeof RetainedLogView.Type

// ---------------------------------------------------------------------------------------------
// The request and its answer

/** The read requests, which change nothing. */
export const Query = Schema.Union(
  OverviewQuery,
  OperationsQuery,
  AlarmsQuery,
  SchedulesQuery,
  JobsQuery,
  JobQuery,
  JobLogsQuery,
  DeadLettersQuery,
  WorkflowsQuery,
  WorkflowQuery,
  WorkflowStepsQuery,
  WorkflowEventsQuery,
  RetainedLogQuery,
  FanoutDeliveriesQuery
)
export type Query = typeof Query.Type

/** The action requests, which change records and answer `ActionResult`. */
export const Action = Schema.Union(
  RetryJob,
  RemoveJob,
  CancelJob,
  PromoteJob,
  ChangePriority,
  PauseQueue,
  ResumeQueue,
  RedriveDeadLetters,
  BulkJobs,
  TriggerSchedule,
  PauseSchedule,
  ResumeSchedule,
  CancelOperation,
  CancelAlarm,
  PauseWorkflow,
  ResumeWorkflow,
  TerminateWorkflow,
  RestartWorkflow,
  SendWorkflowEvent,
  PurgeBefore
)
export type Action = typeof Action.Type

/** Everything an inspector may ask an object: a read or an action, told apart by `_tag`. */
export const Request = Schema.Union(Query, Action)
export type Request = typeof Request.Type
/** The encoded request, as it crosses RPC and HTTP (plain objects with `_tag`). */
export type RequestEncoded = typeof Request.Encoded

/**
 * What `inspect` answers over RPC: never a rejection (a rejected RPC loses its error's fields), but
 * the value or a failure the HTTP side maps to a status. `NotFound`: the object has no such
 * capability, queue, job or schedule; `BadRequest`: the request did not decode, or the capability
 * refused an input (its message names the field).
 */
export const Failure = Schema.Struct({
  /**
   * Which failure: no such capability or record, a request that did not decode or was refused, or an object
   * that could not answer (its storage or the inspector failed; try again).
   */
  _tag: Schema.Literal("NotFound", "BadRequest", "Unavailable"),
  /** What went wrong, for a person (it names the field of a refused input). */
  message: Schema.String
})
export type Failure = typeof Failure.Type

/**
 * What `inspect` answers over RPC: the value (`AnswerOf` its request's tag) or a `Failure`, never a
 * rejection.
 */
export type Answer =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly failure: Failure }

/** The answer's schema for each request tag. */
export const answers = {
  Overview,
  Operations: OperationPage,
  Alarms: AlarmPage,
  Schedules: SchedulePage,
  Jobs: JobPage,
  Job: JobDetail,
  JobLogs: LogPage,
  DeadLetters: DeadLetterPage,
  RetryJob: ActionResult,
  RemoveJob: ActionResult,
  CancelJob: ActionResult,
  PromoteJob: ActionResult,
  ChangePriority: ActionResult,
  PauseQueue: ActionResult,
  ResumeQueue: ActionResult,
  RedriveDeadLetters: ActionResult,
  BulkJobs: BulkResult,
  TriggerSchedule: ActionResult,
  PauseSchedule: ActionResult,
  ResumeSchedule: ActionResult,
  CancelOperation: ActionResult,
  CancelAlarm: ActionResult,
  Workflows: WorkflowPage,
  Workflow: WorkflowDetail,
  WorkflowSteps: WorkflowStepPage,
  WorkflowEvents: WorkflowEventPage,
  PauseWorkflow: ActionResult,
  ResumeWorkflow: ActionResult,
  TerminateWorkflow: ActionResult,
  RestartWorkflow: ActionResult,
  SendWorkflowEvent: ActionResult,
  RetainedLog: RetainedLogView,
  PurgeBefore: ActionResult,
  FanoutDeliveries: FanoutDeliveryPage
} as const satisfies Record<Request["_tag"], Schema.Schema.Any>

/** The answer to a request of tag `T`. */
export type AnswerOf<T extends Request["_tag"]> = Schema.Schema.Type<(typeof answers)[T]>
