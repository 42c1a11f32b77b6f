/**
 * The owner of `durability_job_dead_letters`: the last failure of each job that failed for good in
 * a queue with `deadLetter`, kept until it is redriven (or retried).
 * @internal
 */
import * as Effect from "effect/Effect"
import type { SerializedError, StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as Text from "../inspection/text.js"
import { DEAD_LETTERS } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** Stores the job's dead letter (replacing one of an earlier failure of the same id). */
export const put = (
  storage: StorageService,
  letter: {
    readonly queue: string
    readonly id: string
    readonly payload: string
    readonly attempts: number
    readonly error: SerializedError
    readonly failedAt: number
  }
): Rows =>
  storage.exec(
    `INSERT INTO ${DEAD_LETTERS} (queue, id, payload, attempts, error_name, error_message, failed_at)
     VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (queue, id) DO UPDATE SET payload = excluded.payload, attempts = excluded.attempts,
       error_name = excluded.error_name, error_message = excluded.error_message, failed_at = excluded.failed_at`,
    [letter.queue, letter.id, letter.payload, letter.attempts, letter.error.name, letter.error.message, letter.failedAt]
  )

export const remove = (storage: StorageService, queue: string, id: string): Rows =>
  storage.exec(`DELETE FROM ${DEAD_LETTERS} WHERE queue = ? AND id = ?`, [queue, id])

export const read = (storage: StorageService, queue: string, id: string): Rows =>
  storage.exec(`SELECT * FROM ${DEAD_LETTERS} WHERE queue = ? AND id = ?`, [queue, id])

/** The queue's first `limit` dead letters, oldest failure first. */
export const oldest = (storage: StorageService, queue: string, limit: number): Rows =>
  storage.exec(`SELECT * FROM ${DEAD_LETTERS} WHERE queue = ? ORDER BY failed_at, id LIMIT ?`, [queue, limit])

/**
 * The queue's dead letters after the keyset cursor `after` (`failed_at`, then `id`), oldest failure
 * first: the first `take` of them, `columns` selected.
 */
export const page = (
  storage: StorageService,
  columns: string,
  queue: string,
  after: { readonly at: number; readonly key: string } | undefined,
  take: number
): Rows =>
  storage.exec(
    `SELECT ${columns} FROM ${DEAD_LETTERS} WHERE queue = ?${after === undefined ? "" : " AND (failed_at > ? OR (failed_at = ? AND id > ?))"}
     ORDER BY failed_at, id LIMIT ?`,
    [queue, ...(after === undefined ? [] : [after.at, after.at, after.key]), take]
  )

/**
 * A bulk redrive's window: at most `take` of the queue's dead letters after the keyset `after` (`failed_at`, then
 * `id`) that failed by `upTo`, oldest failure first (`queue`, `id`, `failed_at` only: a payload is read once chosen).
 */
export const bulkWindow = (
  storage: StorageService,
  queue: string,
  after: { readonly at: number; readonly id: string } | undefined,
  upTo: number,
  take: number
): Rows =>
  storage.exec(
    `SELECT queue, id, failed_at FROM ${DEAD_LETTERS} WHERE queue = ? AND failed_at <= ?${
      after === undefined ? "" : " AND (failed_at > ? OR (failed_at = ? AND id > ?))"
    } ORDER BY failed_at, id LIMIT ?`,
    [queue, upTo, ...(after === undefined ? [] : [after.at, after.at, after.id]), take]
  )

/** How many dead letters the queue has, counted up to the inspector's cap. */
export const cappedCount = (storage: StorageService, queue: string): Effect.Effect<number, StorageError> =>
  Effect.map(storage.exec(Text.cappedCount(DEAD_LETTERS, "queue = ?"), [queue]), ([row]) => Number(row?.n ?? 0))
