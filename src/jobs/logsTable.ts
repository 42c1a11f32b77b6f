/**
 * The owner of `durability_job_logs`: a job's log lines, numbered from 1 per job. A line is written
 * only while its job meets a condition of the jobs' table (`JobsTable.holding`); the lines go with
 * their job (a trigger of the schema deletes them).
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import type * as JobsTable from "./jobsTable.js"
import { LOGS } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** Appends `message` as the job's next line while `held` (`JobsTable.holding`) is true; returns its `seq`, if appended. */
export const append = (storage: StorageService, key: string, message: string, at: number, held: JobsTable.Condition): Rows =>
  storage.exec(
    `INSERT INTO ${LOGS} (key, seq, at, message)
       SELECT ?, next, ?, ? FROM (SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM ${LOGS} WHERE key = ?)
       WHERE ${held.sql} RETURNING seq`,
    [key, at, message, key, ...held.bindings]
  )

/** Deletes the job's lines up to `seq` (the oldest). */
export const trim = (storage: StorageService, key: string, seq: number): Rows =>
  storage.exec(`DELETE FROM ${LOGS} WHERE key = ? AND seq <= ?`, [key, seq])

/** The job's lines (`seq`, `at`, `message`) in order, `limit` of them from `offset`. */
export const lines = (storage: StorageService, key: string, limit: number, offset: number): Rows =>
  storage.exec(`SELECT seq, at, message FROM ${LOGS} WHERE key = ? ORDER BY seq LIMIT ? OFFSET ?`, [key, limit, offset])

/**
 * The job's first `take` lines after `after` (all when undefined), in order: `seq`, `at`, and `message`
 * selected as given (a bounded head of it, for the inspector).
 */
export const page = (storage: StorageService, key: string, after: number | undefined, take: number, message: string): Rows =>
  storage.exec(
    `SELECT seq, at, ${message} FROM ${LOGS} WHERE key = ?${after === undefined ? "" : " AND seq > ?"} ORDER BY seq LIMIT ?`,
    [key, ...(after === undefined ? [] : [after]), take]
  )

/** How many lines the job has. */
export const count = (storage: StorageService, key: string): Effect.Effect<number, StorageError> =>
  Effect.map(storage.exec(`SELECT COUNT(*) AS n FROM ${LOGS} WHERE key = ?`, [key]), ([row]) => Number(row?.n ?? 0))
