/**
 * The workflows' inspection source: per workflow its instances by public status (capped counts from the
 * state index), pages of instances (newest first, the keyset of `Workflows.list`), one instance with its
 * timeline (steps in call order, events with what consumed them), and pause, resume, terminate, restart,
 * send an event and purge through the capability's own calls, so timers, waiters and the alarm follow as
 * for any caller.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { InvalidInputError, StorageError, WorkflowFinishedError, WorkflowNotFoundError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as ListQuery from "../engine/listQuery.js"
import { BadRequest, NotFound } from "../inspection/errors.js"
import * as Limits from "../inspection/limits.js"
import type * as P from "../inspection/protocol.js"
import type { Source, SourceError } from "../inspection/source.js"
import * as Text from "../inspection/text.js"
import * as Json from "../shared/json.js"
import * as EventsTable from "./eventsTable.js"
import * as InstancesTable from "./instancesTable.js"
import * as Participant from "./participant.js"
import * as StepsTable from "./stepsTable.js"

type Live = InvalidInputError | StorageError | WorkflowNotFoundError | WorkflowFinishedError

/** The capability's calls the actions use (as `Workflows` makes them: inputs checked, timers and waiters told). */
export interface Calls {
  readonly pause: (workflow: string, id: string) => Effect.Effect<void, Live>
  readonly resume: (workflow: string, id: string) => Effect.Effect<void, Live>
  readonly terminate: (workflow: string, id: string) => Effect.Effect<void, Live>
  readonly restart: (workflow: string, id: string) => Effect.Effect<void, Exclude<Live, WorkflowFinishedError>>
  readonly sendEvent: (workflow: string, id: string, event: { readonly type: string; readonly payload?: unknown }) => Effect.Effect<void, Live>
  readonly purgeBefore: (before: number) => Effect.Effect<number, InvalidInputError | StorageError>
}

const STATUSES: ReadonlyArray<P.WorkflowStatus> = ["queued", "running", "paused", "waiting", "complete", "errored", "terminated"]

const instanceColumns = (bound: number) =>
  `key, workflow, instance_id, status, paused, waiting, wake_at, parent, started_at, ended_at, created_at, updated_at,
   last_error_name, ${Text.messageOf("last_error")}, ${Text.headOf("params", bound)}, ${Text.headOf("output", bound)}`

// Steps and events show list-sized heads even in the detail: a timeline of 100 steps must stay bounded.
const STEP_COLUMNS = `seq, name, kind, status, attempt, error_name, ${Text.messageOf("error_message")}, wake_at, started_at, ended_at,
  ${Text.headOf("result", Limits.LIST_JSON_CHARS)}`
const EVENT_COLUMNS = `id, type, sent_at, consumed_seq, ${Text.headOf("payload", Limits.LIST_JSON_CHARS)}`

const nullableNumber = (value: unknown): number | null => value === null || value === undefined ? null : Number(value)

const itemOf = (row: Row, bound: number): P.WorkflowItem => {
  const ended = row.status === "failed" || row.status === "terminated"
  const error = ended ? Text.errorOf(row.last_error_name, row.last_error ?? "") : undefined
  return {
    workflow: String(row.workflow),
    id: String(row.instance_id),
    status: InstancesTable.statusOf(row),
    params: Text.jsonOf(row, "params", bound),
    ...(row.status === "complete" && row.output !== null ? { output: Text.jsonOf(row, "output", bound) } : {}),
    ...(error === undefined ? {} : { error }),
    waitingFor: Participant.waitingOf(row),
    wakeAt: nullableNumber(row.wake_at),
    parent: row.parent === null ? null : String(row.parent),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    startedAt: nullableNumber(row.started_at),
    endedAt: nullableNumber(row.ended_at)
  }
}

/** A child step not yet completed stores its child's key as its result (JSON): shown as a reference, not a value. */
const childOf = (row: Row): string | undefined => {
  if (row.kind !== "child" || row.status === "completed" || row.result === null) return undefined
  try {
    const key = Json.decode(String(row.result))
    return typeof key === "string" ? key : undefined
  } catch {
    return undefined
  }
}

const stepOf = (row: Row): P.WorkflowStepItem => {
  const error = Text.errorOf(row.error_name, row.error_message)
  const child = childOf(row)
  return {
    position: Number(row.seq),
    name: String(row.name),
    kind: String(row.kind) as P.WorkflowStepItem["kind"],
    status: String(row.status) as P.WorkflowStepItem["status"],
    attempt: Number(row.attempt),
    ...(row.result === null || child !== undefined ? {} : { result: Text.jsonOf(row, "result", Limits.LIST_JSON_CHARS) }),
    ...(error === undefined ? {} : { error }),
    ...(child === undefined ? {} : { child }),
    wakeAt: nullableNumber(row.wake_at),
    startedAt: Number(row.started_at),
    endedAt: nullableNumber(row.ended_at)
  }
}

const eventOf = (row: Row): P.WorkflowEventItem => ({
  id: Number(row.id),
  type: String(row.type),
  payload: Text.jsonOf(row, "payload", Limits.LIST_JSON_CHARS),
  sentAt: Number(row.sent_at),
  consumedBy: nullableNumber(row.consumed_seq)
})

/** A number cursor (a step's position, an event's id), as these pages write them. */
const numberCursor = (cursor: string | undefined): Effect.Effect<number, BadRequest> => {
  if (cursor === undefined) return Effect.succeed(0)
  const after = Number(cursor)
  return /^\d+$/.test(cursor) && Number.isSafeInteger(after)
    ? Effect.succeed(after)
    : Effect.fail(new BadRequest({ message: `cursor must be a cursor returned by the previous page, got ${JSON.stringify(cursor.slice(0, 40))}` }))
}

export const source = (storage: StorageService, names: ReadonlyArray<string>, calls: Calls): Source => {
  const workflowOf = (name: string): Effect.Effect<string, NotFound> =>
    names.includes(name)
      ? Effect.succeed(name)
      : Effect.fail(new NotFound({ message: `No workflow ${JSON.stringify(name)} in this object (workflows: ${names.join(", ") || "none"})` }))

  const rowOf = (request: { readonly workflow: string; readonly id: string }, columns: string) =>
    Effect.gen(function*() {
      const workflow = yield* workflowOf(request.workflow)
      const row = yield* InstancesTable.readColumns(storage, InstancesTable.keyOf(workflow, request.id), columns)
      if (row === undefined) {
        return yield* new NotFound({ message: `No instance ${JSON.stringify(request.id)} of workflow ${JSON.stringify(workflow)}` })
      }
      return row
    })

  // Capped counts (`COUNT_CAP`) per workflow, each a range of the state index: bounded whatever the table holds.
  const overview = Effect.gen(function*() {
    const definitions: Array<P.WorkflowSummary> = []
    for (const name of names) {
      const counts = yield* InstancesTable.cappedCounts(storage, name, Limits.COUNT_CAP)
      definitions.push({ name, counts: Object.fromEntries(STATUSES.map((status) => [status, counts[status] ?? 0])) as P.WorkflowSummary["counts"] })
    }
    return { workflows: { definitions } }
  })

  const instances = (request: P.WorkflowsQuery) =>
    Effect.gen(function*() {
      const workflow = yield* workflowOf(request.workflow)
      // The keyset of `Workflows.list`: `<createdAt>:<key>` cursors.
      const query = yield* ListQuery.parse(
        { status: request.status, cursor: request.cursor, limit: request.limit },
        Limits.DEFAULT_PAGE,
        Limits.MAX_PAGE,
        STATUSES
      )
      const rows = yield* InstancesTable.page(storage, workflow, query.statuses, query.after, query.limit + 1, instanceColumns(Limits.LIST_JSON_CHARS))
      return ListQuery.page(rows, query.limit, (row) => itemOf(row, Limits.LIST_JSON_CHARS), (last) => ListQuery.cursor(Number(last.created_at), String(last.key)))
    })

  const detail = (request: P.WorkflowQuery) =>
    Effect.gen(function*() {
      const row = yield* rowOf(request, instanceColumns(Limits.DETAIL_JSON_CHARS))
      const key = String(row.key)
      const steps = yield* StepsTable.pageColumns(storage, key, 1, Limits.DETAIL_STEPS, STEP_COLUMNS)
      const events = yield* EventsTable.page(storage, key, 0, Limits.DETAIL_EVENTS, EVENT_COLUMNS)
      return {
        instance: itemOf(row, Limits.DETAIL_JSON_CHARS),
        steps: { items: steps.map(stepOf), total: yield* StepsTable.cappedCount(storage, key, Limits.COUNT_CAP) },
        events: { items: events.map(eventOf), total: yield* EventsTable.cappedCount(storage, key, Limits.COUNT_CAP) }
      }
    })

  const steps = (request: P.WorkflowStepsQuery) =>
    Effect.gen(function*() {
      const row = yield* rowOf(request, "key")
      const after = yield* numberCursor(request.cursor)
      const limit = request.limit ?? Limits.DEFAULT_PAGE
      const rows = yield* StepsTable.pageColumns(storage, String(row.key), after + 1, limit + 1, STEP_COLUMNS)
      return ListQuery.page(rows, limit, stepOf, (last) => String(last.seq))
    })

  const events = (request: P.WorkflowEventsQuery) =>
    Effect.gen(function*() {
      const row = yield* rowOf(request, "key")
      const after = yield* numberCursor(request.cursor)
      const limit = request.limit ?? Limits.DEFAULT_PAGE
      const rows = yield* EventsTable.page(storage, String(row.key), after, limit + 1, EVENT_COLUMNS)
      return ListQuery.page(rows, limit, eventOf, (last) => String(last.id))
    })

  /**
   * A call on one existing instance, when `applies` says it would change it (`changed: 0` otherwise, as a
   * retry of a job that is not failed). An instance that ended or went away meanwhile is the same answer.
   */
  const onInstance = (
    request: { readonly workflow: string; readonly id: string },
    applies: (row: Row) => boolean,
    call: (workflow: string, id: string) => Effect.Effect<void, Live>
  ) =>
    Effect.gen(function*() {
      const row = yield* rowOf(request, "key, status, paused")
      if (!applies(row)) return { changed: 0 }
      return yield* call(request.workflow, request.id).pipe(
        Effect.as({ changed: 1 }),
        Effect.catchTags({
          WorkflowNotFoundError: (error) => Effect.fail(new NotFound({ message: error.message })),
          WorkflowFinishedError: () => Effect.succeed({ changed: 0 })
        })
      )
    })

  const live = (row: Row) => !Participant.isEnded(row.status)

  const sendEvent = (request: P.SendWorkflowEvent) =>
    Effect.gen(function*() {
      yield* rowOf(request, "key")
      return yield* calls.sendEvent(request.workflow, request.id, { type: request.type, payload: request.payload }).pipe(
        Effect.as({ changed: 1 }),
        Effect.catchTags({
          WorkflowNotFoundError: (error) => Effect.fail(new NotFound({ message: error.message })),
          // An event to an ended instance would never be read: refused, not dropped in silence.
          WorkflowFinishedError: (error) => Effect.fail(new BadRequest({ message: `${error.message}: it takes no more events` }))
        })
      )
    })

  const answer = (request: P.Request): Effect.Effect<unknown, SourceError> => {
    switch (request._tag) {
      case "Workflows":
        return instances(request)
      case "Workflow":
        return detail(request)
      case "WorkflowSteps":
        return steps(request)
      case "WorkflowEvents":
        return events(request)
      case "PauseWorkflow":
        return onInstance(request, (row) => live(row) && Number(row.paused) === 0, calls.pause)
      case "ResumeWorkflow":
        return onInstance(request, (row) => live(row) && Number(row.paused) === 1, calls.resume)
      case "TerminateWorkflow":
        return onInstance(request, live, calls.terminate)
      case "RestartWorkflow":
        return onInstance(request, () => true, calls.restart)
      case "SendWorkflowEvent":
        return sendEvent(request)
      case "PurgeBefore":
        return Effect.map(calls.purgeBefore(request.before), (changed) => ({ changed }))
      default:
        return Effect.fail(new BadRequest({ message: `The workflows capability does not answer ${request._tag}` }))
    }
  }

  return { capability: "workflows", overview, answer }
}
