/**
 * The owner of `durability_schedules`: every statement on a schedule's row, reads included (the
 * schema is `schema.ts`). The end of a run's attempt is fenced by `CURRENT_ATTEMPT`, a run's step
 * memos by `CURRENT`.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Execution } from "../engine/DurableTable.js"
import type { SerializedError, StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as Text from "../inspection/text.js"
import { TABLE } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** The fence of a writer of the schedule's run: this generation, still pending (bindings: key, generation). */
const CURRENT = "key = ? AND generation_id = ? AND status = 'pending'"
/** The fence of an attempt's end: this attempt of this generation (bindings: key, generation, attempt). */
const CURRENT_ATTEMPT = `${CURRENT} AND attempt = ?`

/** A run's step memo is written under this (`StepMemo.runner`; bindings: key, generation). */
export const IS_CURRENT = `SELECT 1 FROM ${TABLE} WHERE ${CURRENT}`

/**
 * What the engine may claim: a run in progress (a paused schedule's too: it finishes its retries). A
 * schedule waiting for its next run (a paused one only for a manual run, `trigger`) waits on its slot
 * timer (`slots.ts`), not as a record.
 */
export const CLAIMABLE = "run_slot IS NOT NULL"

/** A schedule waiting for its slot timer (`Slots.waits` in SQL): pending, no run in progress, not paused (or a manual run asked). */
const WAITING = "status = 'pending' AND run_slot IS NULL AND (paused = 0 OR manual_at IS NOT NULL)"

/** The schedule stored under the row key `key` (`<schedule>/<key>`), if any. */
export const read = (storage: StorageService, key: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT * FROM ${TABLE} WHERE key = ?`, [key]), ([row]) => row)

/** Whether a schedule is stored under the row key `key`. */
export const exists = (storage: StorageService, key: string): Effect.Effect<boolean, StorageError> =>
  Effect.map(storage.exec(`SELECT key FROM ${TABLE} WHERE key = ?`, [key]), ([row]) => row !== undefined)

/** The schedule under `key` while it is at `generation`, if it is. */
export const readGeneration = (storage: StorageService, key: string, generation: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT * FROM ${TABLE} WHERE key = ? AND generation_id = ?`, [key, generation]), ([row]) => row)

/** Whether this attempt of the schedule's run is still the current one (it may end). */
export const isCurrentAttempt = (storage: StorageService, attempt: Pick<Execution, "key" | "generation" | "attempt">): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(`SELECT 1 AS matched FROM ${TABLE} WHERE ${CURRENT_ATTEMPT}`, [attempt.key, attempt.generation, attempt.attempt]),
    (rows) => rows.length > 0
  )

/** How many schedules wait for their slot timers. */
export const countWaiting = (storage: StorageService): Effect.Effect<number, StorageError> =>
  Effect.map(storage.exec(`SELECT COUNT(*) AS n FROM ${TABLE} WHERE ${WAITING}`), ([counted]) => Number(counted?.n ?? 0))

/** The schedules waiting for their slot timers (`key`, `next_attempt_at`). */
export const waiting = (storage: StorageService): Rows =>
  storage.exec(`SELECT key, next_attempt_at FROM ${TABLE} WHERE ${WAITING}`)

/** Handler `schedule`'s first `take` schedules after the keyset cursor `after` (`created_at`, then `key`), oldest first. */
export const pageOf = (
  storage: StorageService,
  schedule: string,
  after: { readonly at: number; readonly key: string } | undefined,
  take: number
): Rows =>
  storage.exec(
    after === undefined
      ? `SELECT * FROM ${TABLE} WHERE schedule = ? ORDER BY created_at, key LIMIT ?`
      : `SELECT * FROM ${TABLE} WHERE schedule = ? AND (created_at > ? OR (created_at = ? AND key > ?))
           ORDER BY created_at, key LIMIT ?`,
    after === undefined ? [schedule, take] : [schedule, after.at, after.at, after.key, take]
  )

/** Every handler's first `take` schedules after the row key `after`, by row key, `columns` selected. */
export const page = (storage: StorageService, columns: string, after: string | undefined, take: number): Rows =>
  storage.exec(
    `SELECT ${columns} FROM ${TABLE}${after === undefined ? "" : " WHERE key > ?"} ORDER BY key LIMIT ?`,
    [...(after === undefined ? [] : [after]), take]
  )

/** How many schedules have ended, and how many of the others are paused or active, each counted up to the inspector's cap. */
export const cappedCounts = (
  storage: StorageService
): Effect.Effect<{ readonly ended: number; readonly paused: number; readonly active: number }, StorageError> =>
  Effect.gen(function*() {
    const [ended] = yield* storage.exec(Text.cappedCount(TABLE, "status = 'ended'"), [])
    // Index ranges (`status_paused_idx`), whichever of paused and active is rare.
    const [paused] = yield* storage.exec(Text.cappedCount(TABLE, "status IN ('pending', 'failed') AND paused = 1"), [])
    const [active] = yield* storage.exec(Text.cappedCount(TABLE, "status IN ('pending', 'failed') AND paused = 0"), [])
    return { ended: Number(ended?.n ?? 0), paused: Number(paused?.n ?? 0), active: Number(active?.n ?? 0) }
  })

/** A schedule's row as `upsert` writes it. */
export interface Stored {
  readonly key: string
  readonly schedule: string
  readonly scheduleKey: string
  /** Taken only by a new row: an updated one keeps its generation (and any run in progress). */
  readonly generation: string
  readonly status: string
  readonly nextAttemptAt: number
  readonly timing: string
  readonly anchorAt: number
  readonly startAt: number | null
  readonly endAt: number | null
  readonly runLimit: number | null
  readonly catchUp: string
  readonly overlap: string
  readonly graceMs: number
  readonly payload: string
  readonly slotAt: number | null
  readonly now: number
  /** An updated row keeps the time its overlap started waiting (its timing is the same). */
  readonly keepWaited: boolean
}

/** The schedule's row: inserted with a new generation, or updated in place (its generation and any run in progress kept). */
export const store = (storage: StorageService, row: Stored): Rows =>
  storage.exec(
    `INSERT INTO ${TABLE} (key, schedule, schedule_key, generation_id, status, attempt, next_attempt_at, timing,
       anchor_at, start_at, end_at, run_limit, catch_up, overlap, grace_ms, payload, slot_at, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (key) DO UPDATE SET status = excluded.status, next_attempt_at = excluded.next_attempt_at,
       timing = excluded.timing, anchor_at = excluded.anchor_at, start_at = excluded.start_at,
       end_at = excluded.end_at, run_limit = excluded.run_limit, catch_up = excluded.catch_up,
       overlap = excluded.overlap, grace_ms = excluded.grace_ms, payload = excluded.payload,
       slot_at = excluded.slot_at, waited_at = CASE WHEN ? = 1 THEN waited_at ELSE NULL END,
       updated_at = excluded.updated_at`,
    [
      row.key,
      row.schedule,
      row.scheduleKey,
      row.generation,
      row.status,
      row.nextAttemptAt,
      row.timing,
      row.anchorAt,
      row.startAt,
      row.endAt,
      row.runLimit,
      row.catchUp,
      row.overlap,
      row.graceMs,
      row.payload,
      row.slotAt,
      row.now,
      row.now,
      row.keepWaited ? 1 : 0
    ]
  )

/** Deletes the schedule; returns its key when there was one. */
export const remove = (storage: StorageService, key: string): Rows =>
  storage.exec(`DELETE FROM ${TABLE} WHERE key = ? RETURNING key`, [key])

/** Pauses a running schedule; returns its key when it was running. */
export const pause = (storage: StorageService, key: string): Rows =>
  storage.exec(`UPDATE ${TABLE} SET paused = 1 WHERE key = ? AND paused = 0 RETURNING key`, [key])

/** Resumes a paused schedule; returns its key when it was paused. */
export const resume = (storage: StorageService, key: string): Rows =>
  storage.exec(`UPDATE ${TABLE} SET paused = 0 WHERE key = ? AND paused = 1 RETURNING key`, [key])

/**
 * Asks for one run at `now` (pending again, even when ended): a request made while a manual run is
 * active asks for another; one not started yet is the same run. Returns its key when stored.
 */
export const trigger = (storage: StorageService, key: string, now: number): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET
       manual_at = CASE WHEN manual_at IS NULL OR (run_manual = 1 AND manual_at = run_slot) THEN ? ELSE manual_at END,
       next_attempt_at = CASE WHEN run_slot IS NOT NULL THEN next_attempt_at
         WHEN status = 'ended' THEN ? ELSE MIN(next_attempt_at, ?) END,
       status = 'pending'
     WHERE key = ? RETURNING key`,
    [now, now, now, key]
  )

/**
 * In the transaction of a write that found it due (or of its slot timer's fire): the schedule at
 * `generation` starts the run of `slot` (`manual`: a triggered one) at `now`, its cursor at `cursor`,
 * `missed` slots counted.
 */
export const startRun = (
  storage: StorageService,
  key: string,
  generation: string,
  run: { readonly slot: number; readonly manual: boolean; readonly cursor: number | null; readonly missed: number },
  now: number
): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET run_slot = ?, run_manual = ?, run_started_at = ?, slot_at = ?,
       started_slot = CASE WHEN ? = 1 THEN started_slot ELSE ? END,
       waited_at = CASE WHEN ? = 1 THEN waited_at ELSE NULL END, missed_count = missed_count + ?,
       run_number = run_number + 1, scheduled_runs = scheduled_runs + ?, last_error = NULL, last_error_name = NULL
     WHERE key = ? AND generation_id = ?`,
    [
      run.slot,
      run.manual ? 1 : 0,
      now,
      run.cursor,
      run.manual ? 1 : 0,
      run.slot,
      run.manual ? 1 : 0,
      run.missed,
      run.manual ? 0 : 1,
      key,
      generation
    ]
  )

/**
 * As `startRun`, when the schedule at `generation` starts no run: it waits until `at` with its cursor
 * at `cursor` (`missed` slots counted), or ends (`at` null).
 */
export const moveOn = (
  storage: StorageService,
  key: string,
  generation: string,
  next: { readonly cursor: number | null; readonly missed: number; readonly at: number | null },
  now: number
): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET slot_at = ?, missed_count = missed_count + ?, next_attempt_at = ?,
       status = CASE WHEN ? = 1 THEN 'ended' ELSE status END
     WHERE key = ? AND generation_id = ?`,
    [next.cursor, next.missed, next.at ?? now, next.at === null ? 1 : 0, key, generation]
  )

/**
 * In the settle's transaction: the schedule at `generation` goes on after its run (its `outcome` at
 * `settledAt`, with `error` when it failed) with a fresh generation and attempt 0, `pending` until
 * `at` or `ended` (`at` null).
 */
export const advance = (
  storage: StorageService,
  key: string,
  generation: string,
  next: {
    readonly generation: string
    readonly at: number | null
    readonly cursor: number | null
    readonly waitedAt: number | null
    readonly manualAt: number | null
    readonly missed: number
    readonly outcome: string
    readonly settledAt: number
    readonly error: SerializedError | undefined
  }
): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET generation_id = ?, status = ?, attempt = 0, next_attempt_at = ?, slot_at = ?, waited_at = ?,
       manual_at = ?, missed_count = missed_count + ?, run_slot = NULL, run_manual = 0, run_started_at = NULL,
       run_count = run_count + CASE WHEN run_slot IS NULL THEN 0 ELSE 1 END,
       last_slot = COALESCE(run_slot, last_slot), last_manual = CASE WHEN run_slot IS NULL THEN last_manual ELSE run_manual END,
       last_run_number = CASE WHEN run_slot IS NULL THEN last_run_number ELSE run_number END,
       last_outcome = ?, last_settled_at = ?, last_run_error = ?, last_run_error_name = ?,
       last_error = NULL, last_error_name = NULL
     WHERE key = ? AND generation_id = ?`,
    [
      next.generation,
      next.at === null ? "ended" : "pending",
      next.at ?? next.settledAt,
      next.cursor,
      next.waitedAt,
      next.manualAt,
      next.missed,
      next.outcome,
      next.settledAt,
      next.error?.message ?? null,
      next.error?.name ?? null,
      key,
      generation
    ]
  )
