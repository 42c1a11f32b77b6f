/**
 * The owner of `durability_calls`: every statement on a call's row, reads included (the schema is
 * `schema.ts`). A writer of a call's attempt is fenced by `CURRENT`: this generation, still pending.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Execution } from "../engine/DurableTable.js"
import type { SerializedError, StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as TableSql from "../engine/tableSql.js"
import * as Text from "../inspection/text.js"
import { TABLE } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** The fence of a writer of the call: this generation, still pending (bindings: id, generation). */
const CURRENT = "id = ? AND generation_id = ? AND status = 'pending'"

/** Which attempt an end is of. */
type Attempt = Pick<Execution, "key" | "generation" | "attempt">

/** A call's step memo is written under this (`StepMemo.runner`; bindings: id, generation). */
export const IS_CURRENT = `SELECT 1 FROM ${TABLE} WHERE ${CURRENT}`

/** The call stored under `id` (any operation's), if any. */
export const read = (storage: StorageService, id: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT * FROM ${TABLE} WHERE id = ?`, [id]), ([row]) => row)

/** The operation and payload of the call stored under `id` (`operation`, `payload`), if any. */
export const operationOf = (storage: StorageService, id: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT operation, payload FROM ${TABLE} WHERE id = ?`, [id]), ([row]) => row)

/** Inserts a pending call, unless its id is taken; returns its id when inserted. */
export const insert = (
  storage: StorageService,
  call: {
    readonly id: string
    readonly operation: string
    readonly payload: string
    readonly at: number
    readonly generation: string
    readonly createdAt: number
  }
): Rows =>
  storage.exec(
    `INSERT INTO ${TABLE} (id, operation, payload, status, attempt, next_attempt_at, generation_id, created_at)
     VALUES (?, ?, ?, 'pending', 0, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id`,
    [call.id, call.operation, call.payload, call.at, call.generation, call.createdAt]
  )

/** The attempt's success: `completed` with its result; returns its id when it ended. */
export const complete = (storage: StorageService, attempt: Attempt, result: string, settledAt: number): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET status = 'completed', result = ?, completed_at = ?,
       last_error = NULL, last_error_name = NULL
     WHERE ${CURRENT} AND attempt = ? RETURNING id`,
    [result, settledAt, attempt.key, attempt.generation, attempt.attempt]
  )

/** Many attempts' successes at once (`TableSql.completed`), each as `complete`; returns the ids that ended. */
export const completeMany = (
  storage: StorageService,
  items: ReadonlyArray<{ readonly execution: Attempt; readonly value: string; readonly settledAt: number }>
): Effect.Effect<ReadonlyArray<string>, StorageError> => {
  const set = "status = 'completed', result = v.result, completed_at = v.at, last_error = NULL, last_error_name = NULL"
  const { bindings, sql } = TableSql.completed(TABLE, "id", set, items)
  return Effect.map(storage.exec(sql, bindings), (rows) => rows.map((row) => String(row.key)))
}

/** A pending call of this generation fails with `error` (a cancel); returns its attempt when it did. */
export const cancel = (storage: StorageService, id: string, generation: string, error: SerializedError, at: number): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET status = 'failed', last_error = ?, last_error_name = ?, completed_at = ?
     WHERE ${CURRENT} RETURNING attempt`,
    [error.message, error.name, at, id, generation]
  )

/**
 * A call that failed for good runs again: pending now, attempts from zero, a new generation (its old
 * attempts' late ends match nothing; the memo trigger drops its steps); returns its id when it did.
 */
export const retry = (storage: StorageService, operation: string, id: string, generation: string, at: number): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET status = 'pending', attempt = 0, next_attempt_at = ?, generation_id = ?,
       result = NULL, completed_at = NULL, last_error = NULL, last_error_name = NULL
     WHERE id = ? AND operation = ? AND status = 'failed' RETURNING id`,
    [at, generation, id, operation]
  )

type After = { readonly at: number; readonly key: string } | undefined

const AFTER = " AND (created_at > ? OR (created_at = ? AND id > ?))"

const afterBindings = (after: After) => after === undefined ? [] : [after.at, after.at, after.key]

/** The operation's first `take` calls after the keyset cursor `after`, in `statuses` (all when undefined), in registration order. */
export const pageOf = (
  storage: StorageService,
  operation: string,
  statuses: ReadonlyArray<string> | undefined,
  after: After,
  take: number
): Rows =>
  storage.exec(
    `SELECT * FROM ${TABLE} WHERE operation = ?${statuses === undefined ? "" : ` AND status IN (${statuses.map(() => "?").join(", ")})`}${
      after === undefined ? "" : AFTER
    }
     ORDER BY created_at, id LIMIT ?`,
    [operation, ...(statuses ?? []), ...afterBindings(after), take]
  )

/** Every operation's first `take` calls after the keyset cursor `after`, in `status` (all when undefined), in registration order, `columns` selected. */
export const page = (
  storage: StorageService,
  columns: string,
  status: string | undefined,
  after: After,
  take: number
): Rows =>
  storage.exec(
    `SELECT ${columns}
     FROM ${TABLE} WHERE 1 = 1${status === undefined ? "" : " AND status = ?"}
       ${after === undefined ? "" : AFTER}
     ORDER BY created_at, id LIMIT ?`,
    [...(status === undefined ? [] : [status]), ...afterBindings(after), take]
  )

/** How many calls are in `status`, counted up to the inspector's cap. */
export const cappedCount = (storage: StorageService, status: string): Effect.Effect<number, StorageError> =>
  Effect.map(storage.exec(Text.cappedCount(TABLE, "status = ?"), [status]), ([row]) => Number(row?.n ?? 0))
