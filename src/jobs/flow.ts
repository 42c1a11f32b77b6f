/**
 * What a job's end changes around it, inside the transaction that ends it: its parent's counter
 * (released when the last child finished, failed when a child failed with `onFailure: "fail"`),
 * the siblings that had not started (canceled with a failed parent), its dead letter, and the
 * queue's retention bound. Each step records the events to tell and the keys whose waiters to wake
 * once the transaction committed.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { PendingRecord } from "../engine/DurableTable.js"
import type { SerializedError, StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as DeadLettersTable from "./deadLettersTable.js"
import * as JobsTable from "./jobsTable.js"
import type * as Options from "./options.js"
import type { JobEventDraft } from "./types.js"

export interface Changes {
  readonly pending: Array<PendingRecord>
  readonly events: Array<JobEventDraft>
  /** Keys whose waiters learn the job finished (or is gone). */
  readonly finished: Array<string>
}

export const changes = (): Changes => ({ pending: [], events: [], finished: [] })

export interface Context {
  readonly storage: StorageService
  readonly queueOf: (queue: string) => Options.Resolved | undefined
}

export const keyOf = (queue: string, id: string): string => `${queue}/${id}`

/** Deepest flow the library walks (a parent chain longer than this is not a flow anyone builds). */
const MAX_DEPTH = 64

/** A child ended (`ok`: completed; otherwise failed or canceled): its parent learns it. */
export const childEnded = (
  context: Context,
  out: Changes,
  child: { readonly parentKey: string; readonly onFailure: string; readonly queue: string; readonly id: string },
  outcome: { readonly ok: true } | { readonly ok: false; readonly error: SerializedError },
  at: number,
  depth = 0
): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const { storage } = context
    if (outcome.ok || child.onFailure === "ignore") {
      const [parent] = yield* JobsTable.childFinished(storage, child.parentKey, at)
      if (parent?.status === "pending") out.pending.push({ key: child.parentKey, at: Number(parent.next_attempt_at), start: true })
      return
    }
    const error: SerializedError = {
      name: "ChildJobFailedError",
      message: `Child job "${child.id}" of queue "${child.queue}" failed: ${outcome.error.name}: ${outcome.error.message}`
    }
    const [parent] = yield* JobsTable.failWaiting(storage, child.parentKey, error, at)
    if (parent === undefined) return
    yield* failed(context, out, parent, error, at, depth + 1, true)
    yield* cancelNotStarted(context, out, child.parentKey, at, "its parent failed")
  })

/**
 * A job failed for good (`row` as it is now): its dead letter, its event, and its parent's turn.
 * Retention of failed jobs is the caller's (it runs once per transaction).
 */
export const failed = (
  context: Context,
  out: Changes,
  row: Row,
  error: SerializedError,
  at: number,
  depth: number,
  /** False for the job whose own settle tells its end. */
  tellSelf: boolean
): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const queue = String(row.queue)
    const id = String(row.id)
    if (tellSelf) {
      out.events.push({ type: "failed", queue, id, error })
      out.finished.push(String(row.key))
    }
    if (context.queueOf(queue)?.deadLetter === true) {
      yield* DeadLettersTable.put(context.storage, {
        queue,
        id,
        payload: String(row.payload),
        attempts: Number(row.attempt),
        error,
        failedAt: at
      })
      out.events.push({ type: "dead_lettered", queue, id, error })
    }
    yield* childEndedOf(context, out, row, { ok: false, error }, at, depth)
  })

/** A job was canceled (`row` as it is now): its event, its not-started descendants, and its parent's turn. */
export const canceled = (
  context: Context,
  out: Changes,
  row: Row,
  reason: string,
  at: number,
  tellSelf: boolean
): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const queue = String(row.queue)
    const id = String(row.id)
    if (tellSelf) {
      out.events.push({ type: "canceled", queue, id, reason })
      out.finished.push(String(row.key))
    }
    yield* cancelNotStarted(context, out, String(row.key), at, "its parent was canceled")
    yield* childEndedOf(context, out, row, {
      ok: false,
      error: { name: "JobCanceledError", message: `Job "${id}" of queue "${queue}" was canceled: ${reason}` }
    }, at, 0)
  })

/** A job completed (`row` as it is now): its parent's turn. */
export const completed = (context: Context, out: Changes, row: Row, at: number): Effect.Effect<void, StorageError> =>
  childEndedOf(context, out, row, { ok: true }, at, 0)

export const childEndedOf = (
  context: Context,
  out: Changes,
  row: Row,
  outcome: { readonly ok: true } | { readonly ok: false; readonly error: SerializedError },
  at: number,
  depth = 0
): Effect.Effect<void, StorageError> => {
  if (row.parent_key === null || row.parent_key === undefined || depth > MAX_DEPTH) return Effect.void
  return childEnded(context, out, {
    parentKey: String(row.parent_key),
    onFailure: String(row.on_failure),
    queue: String(row.queue),
    id: String(row.id)
  }, outcome, at, depth)
}

/**
 * Cancels the descendants of `rootKey` that never started (attempt 0: a started job keeps its
 * run, and its end finds its parent already decided).
 */
export const cancelNotStarted = (
  context: Context,
  out: Changes,
  rootKey: string,
  at: number,
  reason: string
): Effect.Effect<void, StorageError> =>
  Effect.map(
    JobsTable.cancelNotStarted(context.storage, rootKey, at, reason),
    (rows) => {
      for (const row of rows) {
        out.events.push({ type: "canceled", queue: String(row.queue), id: String(row.id), reason })
        out.finished.push(String(row.key))
      }
    }
  )

/**
 * Keeps `status` jobs of `queue` within `retention`: older than `ageMs`, and beyond the newest
 * `count`. `known` is the caller's count of such jobs (undefined: counted here); returns the count after.
 */
export const trim = (
  context: Context,
  out: Changes,
  queue: string,
  status: "completed" | "failed",
  retention: Options.Retention<number>,
  at: number,
  known: number | undefined
): Effect.Effect<number | undefined, StorageError> =>
  Effect.gen(function*() {
    const { storage } = context
    const removed: Array<Row> = []
    if (retention.ageMs !== undefined) {
      removed.push(
        ...(yield* JobsTable.removeFinishedBefore(storage, queue, status, at - retention.ageMs))
      )
    }
    let count = known === undefined ? undefined : known - removed.length
    if (retention.count !== undefined) {
      if (count === undefined) {
        count = yield* JobsTable.countInStatus(storage, queue, status)
      }
      if (count > retention.count) {
        const over = yield* JobsTable.removeOldestFinished(storage, queue, status, count - retention.count)
        removed.push(...over)
        count -= over.length
      }
    }
    for (const row of removed) {
      out.events.push({ type: "removed", queue, id: String(row.id), reason: "retention" })
    }
    return count
  })
