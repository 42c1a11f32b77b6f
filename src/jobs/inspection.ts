/**
 * The job queues' inspection source: per queue its processing, pause flag and counts; pages of jobs
 * (by state, in the order they were added), one job with its logs and children, logs, dead letters;
 * and the queues' own calls as actions, so events, flows and the wake-up follow as for any caller.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { InvalidInputError, StorageError } from "../shared/Errors.js"
import type { Row } from "../engine/StorageService.js"
import type { BulkAction, BulkOptions, BulkResult, JobFilter } from "./bulk.js"
import { type Core, executingIn, type QueueRuntime } from "./core.js"
import * as DeadLettersTable from "./deadLettersTable.js"
import * as Flow from "./flow.js"
import * as JobsTable from "./jobsTable.js"
import * as LogsTable from "./logsTable.js"
import * as Rows from "./rows.js"
import * as ListQuery from "../engine/listQuery.js"
import { BadRequest, NotFound } from "../inspection/errors.js"
import * as P from "../inspection/protocol.js"
import type { Source, SourceError } from "../inspection/source.js"
import * as Text from "../inspection/text.js"

/** The calls of one queue the actions use (as `Jobs` makes them: ids checked, events told). */
export interface QueueCalls {
  readonly retry: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly remove: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly cancel: (id: string, reason?: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly promote: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly changePriority: (id: string, priority: number) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly pause: Effect.Effect<void, StorageError>
  readonly resume: Effect.Effect<void, StorageError>
  readonly isPaused: Effect.Effect<boolean, StorageError>
  readonly deadLetters: {
    readonly redrive: (options?: { readonly ids?: ReadonlyArray<string> | undefined }) => Effect.Effect<number, InvalidInputError | StorageError>
  }
}

/**
 * Rows a page of one state reads at most: a state rare among its status's jobs (delayed among 100 000
 * waiting) answers a short page with a cursor instead of reading the whole queue for it.
 */
const EXAMINED_PER_PAGE = 1_000

const columns = (bound: number) =>
  `key, queue, id, seq, status, attempt, priority, created_at, next_attempt_at, started_at, finished_at, leased_until, parent_key,
   ${Text.messageOf("last_error")}, last_error_name, ${Text.headOf("payload", bound)}, ${Text.headOf("result", bound)},
   ${Text.headOf("progress", bound)}`

const processingOf = (queue: QueueRuntime): P.QueueSummary["processing"] =>
  queue.options.external === undefined ? "inline" : queue.options.external.transport === undefined ? "external" : "queue"

const itemOf = (core: Core, queue: QueueRuntime, row: Row, now: number, bound: number): P.JobItem => {
  const error = Text.errorOf(row.last_error_name, row.last_error)
  const parentKey = row.parent_key === null || row.parent_key === undefined ? undefined : String(row.parent_key)
  const separator = parentKey?.indexOf("/") ?? -1
  return {
    id: String(row.id),
    queue: queue.name,
    state: Rows.stateOf(row, now, core.handle.executing(String(row.key))),
    attempt: Number(row.attempt),
    maxAttempts: queue.maxAttempts,
    priority: Number(row.priority),
    progress: row.progress === null || row.progress === undefined ? { json: "0", truncated: false } : Text.jsonOf(row, "progress", bound),
    createdAt: Number(row.created_at),
    runAt: Number(row.next_attempt_at),
    ...(row.started_at === null || row.started_at === undefined ? {} : { startedAt: Number(row.started_at) }),
    ...(row.finished_at === null || row.finished_at === undefined ? {} : { finishedAt: Number(row.finished_at) }),
    payload: Text.jsonOf(row, "payload", bound),
    ...(row.result === null || row.result === undefined ? {} : { result: Text.jsonOf(row, "result", bound) }),
    ...(error === undefined ? {} : { error }),
    ...(parentKey === undefined || separator < 0
      ? {}
      : { parent: { queue: parentKey.slice(0, separator), id: parentKey.slice(separator + 1) } })
  }
}

/** A `seq` cursor as `Jobs.list` writes them. */
const seqCursor = (cursor: string | undefined): Effect.Effect<number, BadRequest> => {
  if (cursor === undefined) return Effect.succeed(0)
  const after = Number(cursor)
  return /^\d+$/.test(cursor) && Number.isSafeInteger(after)
    ? Effect.succeed(after)
    : Effect.fail(new BadRequest({ message: `cursor must be a cursor returned by the previous page, got ${JSON.stringify(cursor.slice(0, 40))}` }))
}

export const source = (
  core: Core,
  calls: ReadonlyMap<string, QueueCalls>,
  purgeBefore: (before: number) => Effect.Effect<number, InvalidInputError | StorageError>,
  bulk: (action: BulkAction, filter: JobFilter, options?: BulkOptions) => Effect.Effect<BulkResult, InvalidInputError | StorageError>
): Source => {
  const { storage } = core

  const queueOf = (name: string): Effect.Effect<{ readonly queue: QueueRuntime; readonly calls: QueueCalls }, NotFound> => {
    const queue = core.queues.get(name)
    const found = calls.get(name)
    return queue === undefined || found === undefined
      ? Effect.fail(new NotFound({ message: `No queue ${JSON.stringify(name)} in this object (queues: ${[...core.queues.keys()].join(", ") || "none"})` }))
      : Effect.succeed({ queue, calls: found })
  }

  const rowOf = (queue: QueueRuntime, id: string, select: string) =>
    Effect.flatMap(
      JobsTable.read(storage, Flow.keyOf(queue.name, id), select),
      (row) => row === undefined ? Effect.fail(new NotFound({ message: `No job ${JSON.stringify(id)} in queue ${JSON.stringify(queue.name)}` })) : Effect.succeed(row)
    )

  // Capped counts (`COUNT_CAP`), not `queue.counts()`: that one is exact, so it reads every job of the queue.
  const overview = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const queues: Array<P.QueueSummary> = []
    for (const queue of core.queues.values()) {
      const executing = executingIn(core, queue.name)
      const counts = yield* JobsTable.cappedStateCounts(storage, queue.name, now, executing)
      queues.push({
        name: queue.name,
        processing: processingOf(queue),
        paused: queue.paused,
        counts,
        deadLetters: yield* DeadLettersTable.cappedCount(storage, queue.name),
        rates: {
          windowMs: P.RATE_WINDOW_MS,
          completed: yield* JobsTable.cappedFinishedSince(storage, queue.name, "completed", now - P.RATE_WINDOW_MS),
          failed: yield* JobsTable.cappedFinishedSince(storage, queue.name, "failed", now - P.RATE_WINDOW_MS)
        }
      })
    }
    return { jobs: { queues } }
  })

  const jobs = (request: P.JobsQuery) =>
    Effect.gen(function*() {
      const { queue } = yield* queueOf(request.queue)
      const after = yield* seqCursor(request.cursor)
      const limit = request.limit ?? P.DEFAULT_PAGE
      const now = yield* Clock.currentTimeMillis
      const item = (row: Row) => itemOf(core, queue, row, now, P.LIST_JSON_CHARS)
      if (request.state === undefined) {
        const rows = yield* JobsTable.page(storage, {
          columns: columns(P.LIST_JSON_CHARS),
          queue: queue.name,
          after,
          states: [],
          now,
          active: executingIn(core, queue.name),
          take: limit + 1
        })
        return ListQuery.page(rows, limit, item, seqAfter)
      }
      const examined = yield* JobsTable.examinedPage(storage, {
        columns: columns(P.LIST_JSON_CHARS),
        queue: queue.name,
        after,
        state: request.state,
        now,
        active: executingIn(core, queue.name),
        examine: EXAMINED_PER_PAGE
      })
      const matched = examined.filter((row) => Number(row.matched) === 1)
      if (matched.length > limit) return ListQuery.page(matched, limit, item, seqAfter)
      const last = examined[examined.length - 1]
      // Every row it may read was read: a short page, and where to read on from (more may match there).
      return examined.length === EXAMINED_PER_PAGE && last !== undefined
        ? { items: matched.map(item), cursor: seqAfter(last) }
        : { items: matched.map(item) }
    })

  const job = (request: P.JobQuery) =>
    Effect.gen(function*() {
      const { queue } = yield* queueOf(request.queue)
      const row = yield* rowOf(queue, request.id, columns(P.DETAIL_JSON_CHARS))
      const now = yield* Clock.currentTimeMillis
      const key = String(row.key)
      const lines = yield* LogsTable.page(storage, key, undefined, P.DETAIL_LOG_LINES, Text.messageOf("message"))
      const logTotal = yield* LogsTable.count(storage, key)
      const children = yield* JobsTable.children(storage, key, P.DETAIL_CHILDREN)
      const childTotal = yield* JobsTable.childCount(storage, key)
      return {
        job: itemOf(core, queue, row, now, P.DETAIL_JSON_CHARS),
        logs: { items: lines.map(lineOf), total: logTotal },
        children: {
          items: children.map((child) => ({
            queue: String(child.queue),
            id: String(child.id),
            state: Rows.stateOf(child, now, core.handle.executing(String(child.key)))
          })),
          total: childTotal
        }
      }
    })

  const logs = (request: P.JobLogsQuery) =>
    Effect.gen(function*() {
      const { queue } = yield* queueOf(request.queue)
      const row = yield* rowOf(queue, request.id, "key")
      const after = yield* seqCursor(request.cursor)
      const limit = request.limit ?? P.DEFAULT_PAGE
      const rows = yield* LogsTable.page(storage, String(row.key), after, limit + 1, Text.messageOf("message"))
      return ListQuery.page(rows, limit, lineOf, seqAfter)
    })

  const deadLetters = (request: P.DeadLettersQuery) =>
    Effect.gen(function*() {
      const { queue } = yield* queueOf(request.queue)
      // The keyset of `deadLetters.list`: `<failedAt>:<id>` cursors.
      const { after, limit } = yield* ListQuery.parse({ cursor: request.cursor, limit: request.limit }, P.DEFAULT_PAGE, P.MAX_PAGE, [])
      const rows = yield* DeadLettersTable.page(
        storage,
        `queue, id, attempts, error_name, ${Text.messageOf("error_message")}, failed_at, ${Text.headOf("payload", P.LIST_JSON_CHARS)}`,
        queue.name,
        after,
        limit + 1
      )
      return ListQuery.page(rows, limit, (row): P.DeadLetterItem => ({
        id: String(row.id),
        queue: queue.name,
        payload: Text.jsonOf(row, "payload", P.LIST_JSON_CHARS),
        attempts: Number(row.attempts),
        error: Text.errorOf(row.error_name, row.error_message) ?? { name: "Error", message: "" },
        failedAt: Number(row.failed_at)
      }), (last) => ListQuery.cursor(Number(last.failed_at), String(last.id)))
    })

  /** A call on one existing job: `changed` is 1 when it did something. */
  const onJob = (
    request: { readonly queue: string; readonly id: string },
    call: (calls: QueueCalls, id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  ) =>
    Effect.gen(function*() {
      const found = yield* queueOf(request.queue)
      yield* rowOf(found.queue, request.id, "key")
      return { changed: (yield* call(found.calls, request.id)) ? 1 : 0 }
    })

  const setPaused = (name: string, paused: boolean) =>
    Effect.gen(function*() {
      const { calls } = yield* queueOf(name)
      if ((yield* calls.isPaused) === paused) return { changed: 0 }
      yield* paused ? calls.pause : calls.resume
      return { changed: 1 }
    })

  /** One chunk of `Jobs.bulk`: an unknown queue is `NotFound`, as for every request naming one. */
  const bulkJobs = (request: P.BulkJobs) =>
    Effect.gen(function*() {
      if (request.queue !== undefined) yield* queueOf(request.queue)
      const { action, createdBefore, cursor, idPrefix, limit, olderThanMs, queue, reason, states } = request
      const result = yield* bulk(action, {
        ...(queue === undefined ? { allQueues: true } : { queue }),
        ...(states === undefined ? {} : { states }),
        ...(idPrefix === undefined ? {} : { idPrefix }),
        ...(createdBefore === undefined ? {} : { createdBefore }),
        ...(olderThanMs === undefined ? {} : { olderThanMs })
      }, {
        ...(cursor === undefined ? {} : { cursor }),
        ...(limit === undefined ? {} : { limit }),
        ...(reason === undefined ? {} : { reason })
      })
      const { affected, ...rest } = result
      return { changed: affected, ...rest }
    })

  const answer = (request: P.Request): Effect.Effect<unknown, SourceError> => {
    switch (request._tag) {
      case "Jobs":
        return jobs(request)
      case "Job":
        return job(request)
      case "JobLogs":
        return logs(request)
      case "DeadLetters":
        return deadLetters(request)
      case "RetryJob":
        return onJob(request, (calls, id) => calls.retry(id))
      case "RemoveJob":
        return onJob(request, (calls, id) => calls.remove(id))
      case "CancelJob":
        return onJob(request, (calls, id) => calls.cancel(id, request.reason))
      case "PromoteJob":
        return onJob(request, (calls, id) => calls.promote(id))
      case "ChangePriority":
        return onJob(request, (calls, id) => calls.changePriority(id, request.priority))
      case "PauseQueue":
        return setPaused(request.queue, true)
      case "ResumeQueue":
        return setPaused(request.queue, false)
      case "RedriveDeadLetters":
        return Effect.flatMap(queueOf(request.queue), ({ calls }) =>
          Effect.map(calls.deadLetters.redrive(request.ids === undefined ? {} : { ids: request.ids }), (changed) => ({ changed })))
      case "PurgeBefore":
        return Effect.map(purgeBefore(request.before), (changed) => ({ changed }))
      case "BulkJobs":
        return bulkJobs(request)
      default:
        return Effect.fail(new BadRequest({ message: `The jobs capability does not answer ${request._tag}` }))
    }
  }

  return { capability: "jobs", overview, answer }
}

/** A `seq` cursor, as `Jobs.list` and `logs` write them. */
const seqAfter = (last: Row): string => String(last.seq)

const lineOf = (row: Row) => ({ seq: Number(row.seq), at: Number(row.at), message: String(row.message) })
