/**
 * The owner of `durability_workflow_steps`: an instance's steps in call order. Every write of a run is
 * fenced to its instance's generation while it runs, so a terminated or restarted run leaves nothing.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, SqlValue, StorageService } from "../engine/StorageService.js"
import { LIVE_RUN } from "./instancesTable.js"
import { STEPS } from "./schema.js"

export type Kind = "do" | "sleep" | "event" | "child"
export type Status = "running" | "retrying" | "waiting" | "completed" | "failed"

export interface Step {
  readonly seq: number
  readonly name: string
  readonly kind: Kind
  readonly status: Status
  readonly attempt: number
  readonly result: string | null
  readonly errorName: string | null
  readonly errorMessage: string | null
  readonly wakeAt: number | null
  readonly startedAt: number
  readonly endedAt: number | null
}

export const fromRow = (row: Row): Step => ({
  seq: Number(row.seq),
  name: String(row.name),
  kind: String(row.kind) as Kind,
  status: String(row.status) as Status,
  attempt: Number(row.attempt),
  result: row.result === null ? null : String(row.result),
  errorName: row.error_name === null ? null : String(row.error_name),
  errorMessage: row.error_message === null ? null : String(row.error_message),
  wakeAt: row.wake_at === null ? null : Number(row.wake_at),
  startedAt: Number(row.started_at),
  endedAt: row.ended_at === null ? null : Number(row.ended_at)
})

/** The instance's steps, in order. */
export const all = (storage: StorageService, key: string): Effect.Effect<ReadonlyArray<Step>, StorageError> =>
  Effect.map(storage.exec(`SELECT * FROM ${STEPS} WHERE instance = ? ORDER BY seq`, [key]), (rows) => rows.map(fromRow))

/** A page of the instance's steps, from `from` (a sequence number). */
export const page = (storage: StorageService, key: string, from: number, take: number): Effect.Effect<ReadonlyArray<Step>, StorageError> =>
  Effect.map(
    storage.exec(`SELECT * FROM ${STEPS} WHERE instance = ? AND seq >= ? ORDER BY seq LIMIT ?`, [key, from, take]),
    (rows) => rows.map(fromRow)
  )

export const count = (storage: StorageService, key: string): Effect.Effect<number, StorageError> =>
  Effect.map(storage.exec(`SELECT COUNT(*) AS n FROM ${STEPS} WHERE instance = ?`, [key]), ([row]) => Number(row?.n ?? 0))

/** The run that writes: its instance's key and generation. */
export interface Fence {
  readonly key: string
  readonly generation: string
}

const fenced = (fence: Fence): ReadonlyArray<SqlValue> => [fence.key, fence.generation]

/** Writes the step at `seq` as given (inserted or replaced), while the run is current; returns whether it was. */
export const put = (
  storage: StorageService,
  fence: Fence,
  step: Step
): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(
      `INSERT INTO ${STEPS} (instance, seq, name, kind, status, attempt, result, error_name, error_message, wake_at,
         started_at, ended_at)
       SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE ${LIVE_RUN}
       ON CONFLICT (instance, seq) DO UPDATE SET status = excluded.status, attempt = excluded.attempt,
         result = excluded.result, error_name = excluded.error_name, error_message = excluded.error_message,
         wake_at = excluded.wake_at, ended_at = excluded.ended_at
       RETURNING seq`,
      [
        fence.key,
        step.seq,
        step.name,
        step.kind,
        step.status,
        step.attempt,
        step.result,
        step.errorName,
        step.errorMessage,
        step.wakeAt,
        step.startedAt,
        step.endedAt,
        ...fenced(fence)
      ]
    ),
    (rows) => rows.length > 0
  )

/** Deletes the step at `seq`, while the run is current. */
export const remove = (storage: StorageService, fence: Fence, seq: number): Effect.Effect<void, StorageError> =>
  Effect.asVoid(storage.exec(`DELETE FROM ${STEPS} WHERE instance = ? AND seq = ? AND ${LIVE_RUN}`, [fence.key, seq, ...fenced(fence)]))

export const deleteAll = (storage: StorageService, key: string): Effect.Effect<void, StorageError> =>
  Effect.asVoid(storage.exec(`DELETE FROM ${STEPS} WHERE instance = ?`, [key]))

/** A page of the instance's steps from `from`, with `columns` as the caller reads them (bounded heads, for the inspector). */
export const pageColumns = (storage: StorageService, key: string, from: number, take: number, columns: string): Effect.Effect<ReadonlyArray<Row>, StorageError> =>
  storage.exec(`SELECT ${columns} FROM ${STEPS} WHERE instance = ? AND seq >= ? ORDER BY seq LIMIT ?`, [key, from, take])

/** How many steps the instance holds, stopping at `cap`. */
export const cappedCount = (storage: StorageService, key: string, cap: number): Effect.Effect<number, StorageError> =>
  Effect.map(
    storage.exec(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${STEPS} WHERE instance = ? LIMIT ${cap})`, [key]),
    ([row]) => Number(row?.n ?? 0)
  )
