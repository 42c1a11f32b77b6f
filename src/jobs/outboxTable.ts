/**
 * The owner of `durability_job_outbox`: the envelopes of a transport queue's leased jobs waiting to
 * be sent to its Cloudflare Queue (key `<job key>#<token>`), as `transport.ts` writes, takes and
 * sends them.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { SerializedError, StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import { OUTBOX } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

const among = (keys: ReadonlyArray<string>) => `key IN (${keys.map(() => "?").join(", ")})`

/** Keys per statement: a send's batch (up to 100) and the other bindings stay under the platform's 100. */
const CHUNK = 64

/** `statement` over `keys` a chunk at a time, the rows of every chunk together. */
const chunked = (keys: ReadonlyArray<string>, statement: (chunk: ReadonlyArray<string>) => Rows): Rows => {
  const chunks: Array<ReadonlyArray<string>> = []
  for (let i = 0; i < keys.length; i += CHUNK) chunks.push(keys.slice(i, i + CHUNK))
  return Effect.map(Effect.forEach(chunks, statement), (rows) => rows.flat())
}

/** Writes an envelope waiting to be sent from `now` (none when one with its key is there already). */
export const put = (storage: StorageService, key: string, queue: string, body: string, generation: string, now: number): Rows =>
  storage.exec(
    `INSERT INTO ${OUTBOX} (key, queue, body, generation_id, status, attempt, next_attempt_at, created_at)
     VALUES (?, ?, ?, ?, 'pending', 0, ?, ?) ON CONFLICT (key) DO NOTHING`,
    [key, queue, body, generation, now, now]
  )

/** When the queue's next waiting envelope is due (`at`, NULL when none waits). */
export const nextAt = (storage: StorageService, queue: string): Rows =>
  storage.exec(`SELECT MIN(next_attempt_at) AS at FROM ${OUTBOX} WHERE queue = ? AND status = 'pending'`, [queue])

/** Per queue among `queues` with a waiting envelope: when its next one is due (`queue`, `at`). */
export const nextAtByQueue = (storage: StorageService, queues: ReadonlyArray<string>): Rows =>
  storage.exec(
    `SELECT queue, MIN(next_attempt_at) AS at FROM ${OUTBOX} WHERE status = 'pending' AND queue IN (${queues.map(() => "?").join(", ")}) GROUP BY queue`,
    queues
  )

/** The queue's first `limit` waiting envelopes due by `now` (`key`, `body`), oldest first. */
export const due = (storage: StorageService, queue: string, now: number, limit: number): Rows =>
  storage.exec(
    `SELECT key, body FROM ${OUTBOX} WHERE queue = ? AND status = 'pending' AND next_attempt_at <= ?
       ORDER BY created_at, key LIMIT ?`,
    [queue, now, limit]
  )

/** Takes the envelopes for a send: one more send counted, due again at `until` (when a send cut short is tried again). */
export const take = (storage: StorageService, keys: ReadonlyArray<string>, until: number): Rows =>
  chunked(keys, (chunk) =>
    storage.exec(`UPDATE ${OUTBOX} SET attempt = attempt + 1, next_attempt_at = ? WHERE ${among(chunk)}`, [until, ...chunk]))

/** Deletes sent envelopes. */
export const remove = (storage: StorageService, keys: ReadonlyArray<string>): Rows =>
  chunked(keys, (chunk) => storage.exec(`DELETE FROM ${OUTBOX} WHERE ${among(chunk)}`, chunk))

/**
 * A send of the waiting envelopes among `keys` failed with `error`: each is given up (`failed`) when
 * `final` or past `maxSends` sends, or due again after 1 s from `now`, doubling per send up to a
 * minute. Returns each one's `key`, `status` and `attempt`.
 */
export const sendFailed = (
  storage: StorageService,
  keys: ReadonlyArray<string>,
  error: SerializedError,
  final: boolean,
  maxSends: number,
  now: number
): Rows =>
  chunked(keys, (chunk) =>
    storage.exec(
      `UPDATE ${OUTBOX} SET last_error = ?, last_error_name = ?,
         status = CASE WHEN ? = 1 OR attempt >= ? THEN 'failed' ELSE status END,
         next_attempt_at = CASE WHEN ? = 1 OR attempt >= ? THEN next_attempt_at ELSE ? + MIN(60000, 1000 * (1 << (attempt - 1))) END
       WHERE status = 'pending' AND ${among(chunk)} RETURNING key, status, attempt`,
      [error.message, error.name, final ? 1 : 0, maxSends, final ? 1 : 0, maxSends, now, ...chunk]
    ))
