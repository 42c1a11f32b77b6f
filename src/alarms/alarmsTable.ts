/**
 * The owner of `durability_alarms`: every statement on an occurrence's row, reads included (the
 * schema is `schema.ts`). The end of an occurrence's attempt is fenced by `CURRENT_ATTEMPT`.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Execution } from "../engine/DurableTable.js"
import type { StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as Text from "../inspection/text.js"
import { TABLE } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** The fence of an attempt's end: this attempt of this occurrence, still pending (bindings: name, generation, attempt). */
const CURRENT_ATTEMPT = "name = ? AND generation_id = ? AND status = 'pending' AND attempt = ?"

/** The occurrence stored for `name`, if any. */
export const read = (storage: StorageService, name: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT * FROM ${TABLE} WHERE name = ?`, [name]), ([row]) => row)

/** Whether an occurrence is stored for `name`. */
export const exists = (storage: StorageService, name: string): Effect.Effect<boolean, StorageError> =>
  Effect.map(storage.exec(`SELECT name FROM ${TABLE} WHERE name = ?`, [name]), ([row]) => row !== undefined)

/**
 * The first `take` occurrences, soonest first, after the keyset cursor `after` (`next_attempt_at`,
 * then `name`), in `statuses` (all when undefined).
 */
export const soonest = (
  storage: StorageService,
  statuses: ReadonlyArray<string> | undefined,
  after: { readonly at: number; readonly key: string } | undefined,
  take: number
): Rows =>
  storage.exec(
    `SELECT * FROM ${TABLE} WHERE 1 = 1${statuses === undefined ? "" : ` AND status IN (${statuses.map(() => "?").join(", ")})`}${
      after === undefined ? "" : " AND (next_attempt_at > ? OR (next_attempt_at = ? AND name > ?))"
    }
     ORDER BY next_attempt_at, name LIMIT ?`,
    [...(statuses ?? []), ...(after === undefined ? [] : [after.at, after.at, after.key]), take]
  )

/** A new occurrence of `name` at `at` (a new generation, attempt 0, its payload or NULL), replacing the stored one. */
export const schedule = (
  storage: StorageService,
  name: string,
  generation: string,
  at: number,
  now: number,
  payload: string | null
): Rows =>
  storage.exec(
    `INSERT INTO ${TABLE}
       (name, generation_id, status, scheduled_at, next_attempt_at, attempt, last_error, last_error_name, created_at, payload)
     VALUES (?, ?, 'pending', ?, ?, 0, NULL, NULL, ?, ?)
     ON CONFLICT (name) DO UPDATE SET generation_id = excluded.generation_id, status = 'pending',
       scheduled_at = excluded.scheduled_at, next_attempt_at = excluded.next_attempt_at, attempt = 0,
       last_error = NULL, last_error_name = NULL, created_at = excluded.created_at, payload = excluded.payload`,
    [name, generation, at, at, now, payload]
  )

/** Deletes the occurrence of `name`; returns its `status`, `attempt` and `generation_id` when there was one. */
export const remove = (storage: StorageService, name: string): Rows =>
  storage.exec(`DELETE FROM ${TABLE} WHERE name = ? RETURNING status, attempt, generation_id`, [name])

/** The attempt's success deletes only the occurrence that ran, never its replacement; returns its name when it did. */
export const complete = (storage: StorageService, attempt: Pick<Execution, "key" | "generation" | "attempt">): Rows =>
  storage.exec(
    `DELETE FROM ${TABLE}
     WHERE ${CURRENT_ATTEMPT} RETURNING name`,
    [attempt.key, attempt.generation, attempt.attempt]
  )

/** The first `take` occurrences after the keyset cursor `after` (`created_at`, then `name`), in the order they were scheduled, `columns` selected. */
export const page = (
  storage: StorageService,
  columns: string,
  after: { readonly at: number; readonly key: string } | undefined,
  take: number
): Rows =>
  storage.exec(
    `SELECT ${columns}
     FROM ${TABLE}${after === undefined ? "" : " WHERE created_at > ? OR (created_at = ? AND name > ?)"}
     ORDER BY created_at, name LIMIT ?`,
    [...(after === undefined ? [] : [after.at, after.at, after.key]), take]
  )

/** How many occurrences have failed (`failed`) or not (`pending`), each counted up to the inspector's cap. */
export const cappedCounts = (storage: StorageService): Effect.Effect<{ readonly pending: number; readonly failed: number }, StorageError> =>
  Effect.gen(function*() {
    const [pending] = yield* storage.exec(Text.cappedCount(TABLE, "status = 'pending'"), [])
    const [failed] = yield* storage.exec(Text.cappedCount(TABLE, "status = 'failed'"), [])
    return { pending: Number(pending?.n ?? 0), failed: Number(failed?.n ?? 0) }
  })
