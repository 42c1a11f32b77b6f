/**
 * The owner of `durability_jobs`, and of `durability_job_dedup` (a dedup key is written with the job
 * it points to, in `add`'s transaction): every statement on a job's row, reads included. The other
 * modules of the jobs (and their inspection source) call these; the schema is `schema.ts`.
 *
 * Writes of a job's own handler are fenced by `CURRENT` (this generation, unfinished); a lease
 * holder's by `LEASE_HELD` (its token, its lease not expired).
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Execution, LeaseState } from "../engine/DurableTable.js"
import type { SerializedError, StorageError } from "../shared/Errors.js"
import type { Row, SqlValue, StorageService } from "../engine/StorageService.js"
import { COUNT_CAP } from "../inspection/limits.js"
import * as TableSql from "../engine/tableSql.js"
import * as Text from "../inspection/text.js"
import * as QueuesTable from "./queuesTable.js"
import { DEDUP, JOBS } from "./schema.js"
import type { JobState } from "./types.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** A condition on a job's row, with its bindings. */
export interface Condition {
  readonly sql: string
  readonly bindings: ReadonlyArray<SqlValue>
}

/** The record under a key, at a generation, is unfinished (bindings: generation). */
const UNFINISHED = "generation_id = ? AND status = 'pending'"
/** The fence of a writer of the job: this generation, unfinished (bindings: key, generation). */
const CURRENT = `key = ? AND ${UNFINISHED}`
/** The fence of an attempt's end: this attempt of this generation (bindings: key, generation, attempt). */
const CURRENT_ATTEMPT = `${CURRENT} AND attempt = ?`
/** A lease (bindings: its token, now) still holds the job: its token, not expired. */
const LEASED = "lease_token = ? AND leased_until IS NOT NULL AND leased_until >= ?"
/** The condition every lease-holder's write carries: this token, its lease not expired, the job unfinished. */
const LEASE_HELD = `${LEASED} AND status = 'pending'`

/** Which attempt an end is of. */
type Attempt = Pick<Execution, "key" | "generation" | "attempt">

/** This generation of the job is unfinished: what its handler's writes (progress, log lines) are conditional on. */
export const unfinished = (generation: string): Condition => ({ sql: UNFINISHED, bindings: [generation] })

/** The lease of `token` holds the job at `now`: what a worker's writes are conditional on. */
export const leaseHeld = (token: number, now: number): Condition => ({ sql: LEASE_HELD, bindings: [token, now] })

/** `condition` holds for the job under `key`: a condition of another table's statement (a log line's insert). */
export const holding = (key: string, condition: Condition): Condition => ({
  sql: `EXISTS (SELECT 1 FROM ${JOBS} WHERE key = ? AND ${condition.sql})`,
  bindings: [key, ...condition.bindings]
})

/** A job's step memo is written under this (`StepMemo.runner`; bindings: key, generation). */
export const IS_CURRENT = `SELECT 1 FROM ${JOBS} WHERE ${CURRENT}`

/**
 * Start order: higher priority first, then the earlier round (`turn`: a queue with keys gives each key's jobs
 * successive rounds; 0 in objects without keys), then first added.
 */
export const START_ORDER = "priority DESC, turn, seq"

/** The columns a job's place among those waiting for its queue's slot is read from (`core.rankOf`). */
export const RANK_COLUMNS = "priority, turn, seq"

/**
 * What the engine may claim: a job of a running inline queue, or of a transport's queue (its admission
 * leases it). A leased job waits for its worker (its lease's timer ends it); an external queue's jobs
 * that are not leased wait for `lease`: they neither wake the object nor start here.
 */
export const claimable = (externalQueues: ReadonlyArray<string>, leasing: boolean): string =>
  externalQueues.length === 0
    ? leasing ? `leased_until IS NULL AND ${QueuesTable.NOT_PAUSED}` : QueuesTable.NOT_PAUSED
    : `leased_until IS NULL AND queue NOT IN (${externalQueues.map((name) => `'${name.replaceAll("'", "''")}'`).join(", ")}) AND ${QueuesTable.NOT_PAUSED}`

const placeholders = (values: ReadonlyArray<unknown>) => values.map(() => "?").join(", ")

const countOf = (rows: Rows): Effect.Effect<number, StorageError> => Effect.map(rows, ([row]) => Number(row?.n ?? 0))

// One job, and the last insertion order.

/** The stored job under `key` (`columns` of it; all by default), if any. */
export const read = (storage: StorageService, key: string, columns = "*"): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT ${columns} FROM ${JOBS} WHERE key = ?`, [key]), ([row]) => row)

/** The largest insertion order stored (0 when no job is). */
export const lastSeq = (storage: StorageService): Effect.Effect<number, StorageError> =>
  Effect.map(storage.exec(`SELECT MAX(seq) AS seq FROM ${JOBS}`), ([last]) => Number(last?.seq ?? 0))

// A job's children.

/** The children's queues, ids and what their states are read from, in the order they were added. */
export const childIds = (storage: StorageService, parentKey: string): Rows =>
  storage.exec(
    `SELECT key, queue, id, status, next_attempt_at, leased_until FROM ${JOBS} WHERE parent_key = ? ORDER BY seq`,
    [parentKey]
  )

/** What a parent's handler reads of its children (`childrenValues`). */
export const childValues = (storage: StorageService, parentKey: string): Rows =>
  storage.exec(
    `SELECT queue, id, status, next_attempt_at, result, last_error, last_error_name FROM ${JOBS} WHERE parent_key = ?`,
    [parentKey]
  )

/** The first `take` children, in the order they were added, with what their states are read from. */
export const children = (storage: StorageService, parentKey: string, take: number): Rows =>
  storage.exec(
    `SELECT key, queue, id, status, next_attempt_at, leased_until FROM ${JOBS} WHERE parent_key = ? ORDER BY seq LIMIT ?`,
    [parentKey, take]
  )

export const childCount = (storage: StorageService, parentKey: string): Effect.Effect<number, StorageError> =>
  countOf(storage.exec(`SELECT COUNT(*) AS n FROM ${JOBS} WHERE parent_key = ?`, [parentKey]))

// Adding jobs.

/** A job to insert: `pending`, or `waiting_children` with children to wait for. */
export interface NewJob {
  readonly key: string
  readonly queue: string
  readonly id: string
  readonly generation: string
  readonly status: "pending" | "waiting_children"
  readonly at: number
  readonly priority: number
  readonly seq: number
  readonly payload: string
  readonly group: string | null
  /** Its key under its queue's concurrency by key (`KeyedConcurrency`). */
  readonly concurrencyKey: string | null
  /**
   * In an object with keys, the round it starts at the soonest (the round being started now): its key's next
   * round when it has a key. Undefined elsewhere (round 0).
   */
  readonly floor: number | undefined
  readonly parentKey: string | null
  readonly onFailure: string
  readonly children: number
  readonly createdAt: number
}

const INSERT = `INSERT INTO ${JOBS} (key, queue, id, generation_id, status, attempt, next_attempt_at, run_at, priority, seq,
    payload, group_key, concurrency_key, parent_key, on_failure, children_pending, created_at)
  VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (key) DO NOTHING RETURNING key`

/** `INSERT` with the job's round: its key's next (after the last stored), not before `floor` (bindings at the end). */
const INSERT_ROUND = `INSERT INTO ${JOBS} (key, queue, id, generation_id, status, attempt, next_attempt_at, run_at, priority, seq,
    payload, group_key, concurrency_key, parent_key, on_failure, children_pending, created_at, turn)
  VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
    MAX(?, COALESCE((SELECT MAX(turn) + 1 FROM ${JOBS} WHERE queue = ? AND concurrency_key = ?), 0)))
  ON CONFLICT (key) DO NOTHING RETURNING key`

/** Inserts the job, unless its key is taken; true when inserted. */
export const insert = (storage: StorageService, job: NewJob): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(job.floor === undefined ? INSERT : INSERT_ROUND, [
      job.key,
      job.queue,
      job.id,
      job.generation,
      job.status,
      job.at,
      job.at,
      job.priority,
      job.seq,
      job.payload,
      job.group,
      job.concurrencyKey,
      job.parentKey,
      job.onFailure,
      job.children,
      job.createdAt,
      ...(job.floor === undefined ? [] : [job.floor, job.queue, job.concurrencyKey])
    ]),
    (rows) => rows.length > 0
  )

/** The last round given to a job without a key (0 when none): rounds never go back for them, so they keep their order. */
export const lastKeylessRound = (storage: StorageService): Effect.Effect<number, StorageError> =>
  Effect.map(
    storage.exec(`SELECT MAX(turn) AS turn FROM ${JOBS} WHERE concurrency_key IS NULL AND turn > 0`),
    ([row]) => Number(row?.turn ?? 0)
  )

/** A dead letter's job added again (`redrive` of a job removed since it failed), unless its key is taken. */
export const insertRedriven = (
  storage: StorageService,
  job: {
    readonly key: string
    readonly queue: string
    readonly id: string
    readonly generation: string
    readonly at: number
    readonly seq: number
    readonly payload: string
    readonly concurrencyKey: string | null
    /** Its round (the round being started now, in an object with keys). */
    readonly turn: number
  }
): Rows =>
  storage.exec(
    `INSERT INTO ${JOBS} (key, queue, id, generation_id, status, attempt, next_attempt_at, run_at, priority, seq, payload, created_at,
       concurrency_key, turn)
     VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, 0, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key`,
    [job.key, job.queue, job.id, job.generation, job.at, job.at, job.seq, job.payload, job.at, job.concurrencyKey, job.turn]
  )

/** The job holding the queue's dedup key (`job_id`, `expires_at`), if one is stored. */
export const dedupHolder = (storage: StorageService, queue: string, dedupKey: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT job_id, expires_at FROM ${DEDUP} WHERE queue = ? AND dedup_key = ?`, [queue, dedupKey]), ([row]) => row)

/** The queue's dedup key points to `jobId` until `expiresAt` (`null`: while that job is unfinished). */
export const keepDedup = (storage: StorageService, queue: string, dedupKey: string, jobId: string, expiresAt: number | null): Rows =>
  storage.exec(
    `INSERT INTO ${DEDUP} (queue, dedup_key, job_id, expires_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (queue, dedup_key) DO UPDATE SET job_id = excluded.job_id, expires_at = excluded.expires_at`,
    [queue, dedupKey, jobId, expiresAt]
  )

/**
 * A dedup `replace`: the waiting job takes the new payload, time, priority, group and concurrency key (due at
 * its new time, it no longer waits for its old key).
 */
export const replace = (
  storage: StorageService,
  key: string,
  job: {
    readonly payload: string
    readonly at: number
    readonly priority: number
    readonly group: string | null
    readonly concurrencyKey: string | null
  }
): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET payload = ?, next_attempt_at = ?, run_at = ?, priority = ?, group_key = ?, concurrency_key = ?, waiting_key = 0
     WHERE key = ?`,
    [job.payload, job.at, job.at, job.priority, job.group, job.concurrencyKey, key]
  )

// A job's run (the engine's participant).

/** Stores a running job's progress, while its generation is unfinished; returns its key when stored. */
export const setProgress = (storage: StorageService, key: string, generation: string, progress: string): Rows =>
  storage.exec(`UPDATE ${JOBS} SET progress = ? WHERE ${CURRENT} RETURNING key`, [progress, key, generation])

/** The attempt's success: `completed` (`canceled` when a cancel was asked meanwhile) with its result; returns its key when it ended. */
export const complete = (storage: StorageService, attempt: Attempt, result: string, settledAt: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'completed' END,
       result = ?, finished_at = ?, last_error = NULL, last_error_name = NULL
     WHERE ${CURRENT_ATTEMPT} RETURNING key`,
    [result, settledAt, attempt.key, attempt.generation, attempt.attempt]
  )

/** Many attempts' successes at once (`TableSql.completed`), each as `complete`; returns the keys that ended. */
export const completeMany = (
  storage: StorageService,
  items: ReadonlyArray<{ readonly execution: Attempt; readonly value: string; readonly settledAt: number }>
): Effect.Effect<ReadonlyArray<string>, StorageError> => {
  const set = "status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'completed' END, result = v.result, " +
    "finished_at = v.at, last_error = NULL, last_error_name = NULL"
  const { bindings, sql } = TableSql.completed(JOBS, "key", set, items)
  return Effect.map(storage.exec(sql, bindings), (rows) => rows.map((row) => String(row.key)))
}

/**
 * A job the engine settled as failed: its end's time, `canceled` when a cancel was asked meanwhile,
 * and no lease any more (its last lease expired: exhausted). Returns the row.
 */
export const finishFailed = (storage: StorageService, key: string, at: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET finished_at = ?, status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE status END,
       leased_until = NULL, worker_id = NULL
     WHERE key = ? AND status = 'failed' RETURNING *`,
    [at, key]
  )

/**
 * An empty rate-limit bucket: the queue's pending jobs due before `at` (of `group`, when a group's
 * bucket; but not those of `running`) wait until then.
 */
export const holdUntil = (
  storage: StorageService,
  queue: string,
  at: number,
  group: string | undefined,
  running: ReadonlyArray<string>
): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET next_attempt_at = ? WHERE queue = ? AND status = 'pending' AND next_attempt_at < ?${
      group === undefined ? "" : " AND group_key = ?"
    }${running.length === 0 ? "" : ` AND key NOT IN (${placeholders(running)})`}`,
    [at, queue, at, ...(group === undefined ? [] : [group]), ...running]
  )

/**
 * Keys of the queue's pending jobs due by `now`, or waiting for `until` (a batch's wait), at most `take`: how
 * many would join a batch.
 */
export const batchable = (storage: StorageService, queue: string, now: number, until: number, take: number): Rows =>
  storage.exec(
    `SELECT key FROM ${JOBS} WHERE queue = ? AND status = 'pending' AND (next_attempt_at <= ? OR next_attempt_at = ?) LIMIT ?`,
    [queue, now, until, take]
  )

/** Moves the queue's pending jobs waiting for `until` (a batch's wait) to `now`. */
export const releaseHeld = (storage: StorageService, queue: string, until: number, now: number): Rows =>
  storage.exec(`UPDATE ${JOBS} SET next_attempt_at = ? WHERE queue = ? AND status = 'pending' AND next_attempt_at = ?`, [now, queue, until])

// Leases.

/** Every pending job with a lease out. */
export const leased = (storage: StorageService): Rows =>
  storage.exec(`SELECT * FROM ${JOBS} WHERE status = 'pending' AND leased_until IS NOT NULL`)

/** How many of the queue's jobs have a lease out (`n`). */
export const leasedCount = (storage: StorageService, queue: string): Rows =>
  storage.exec(`SELECT COUNT(*) AS n FROM ${JOBS} WHERE queue = ? AND status = 'pending' AND leased_until IS NOT NULL`, [queue])

/** How many of the queue's jobs have a lease out (`n`), and when the first of those leases ends (`soonest`). */
export const leasedSummary = (storage: StorageService, queue: string): Rows =>
  storage.exec(
    `SELECT COUNT(*) AS n, MIN(leased_until) AS soonest FROM ${JOBS} WHERE queue = ? AND status = 'pending' AND leased_until IS NOT NULL`,
    [queue]
  )

/** The queue's first `take` jobs due by `now` and not leased (`key`, `group_key`, `concurrency_key`, `turn`, `next_attempt_at`), in start order. */
export const leasable = (storage: StorageService, queue: string, now: number, take: number): Rows =>
  storage.exec(
    `SELECT key, group_key, concurrency_key, turn, next_attempt_at FROM ${JOBS} WHERE queue = ? AND status = 'pending' AND leased_until IS NULL AND next_attempt_at <= ?
     ORDER BY ${START_ORDER} LIMIT ?`,
    [queue, now, take]
  )

/** A job's lease state, written with the engine's claim (`TableHandle.lease`): a new token, until `until`, to `workerId`. */
export const leaseState = (until: number, workerId: string | null): LeaseState => ({
  columns: "lease_token = lease_token + 1, leased_until = ?, next_attempt_at = ?, worker_id = ?",
  bindings: [until, until, workerId]
})

/** A transport's job's lease state (a new token, until `until`), no longer waiting for a slot. */
export const transportLeaseState = (until: number): LeaseState => ({
  columns: "lease_token = lease_token + 1, leased_until = ?, next_attempt_at = ?, waiting_slot = 0, waiting_key = 0",
  bindings: [until, until]
})

/** While `token`'s lease holds: extends it to `until` (never shortens it) and stores `progress` if given. */
export const extendLease = (
  storage: StorageService,
  key: string,
  token: number,
  now: number,
  until: number,
  progress: string | null
): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET leased_until = MAX(leased_until, ?), next_attempt_at = MAX(leased_until, ?),
       progress = COALESCE(?, progress)
     WHERE key = ? AND ${LEASE_HELD} RETURNING leased_until`,
    [until, until, progress, key, token, now]
  )

/** In the settle's transaction: the lease of `token` on this attempt is consumed; returns the key when it held. */
export const consumeLease = (storage: StorageService, attempt: Attempt, token: number, now: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET leased_until = NULL, worker_id = NULL
     WHERE ${CURRENT_ATTEMPT} AND ${LEASED} RETURNING key`,
    [attempt.key, attempt.generation, attempt.attempt, token, now]
  )

/** A consumer's delivery starts: while `token`'s lease holds, the job takes the next token; returns the row. */
export const startDelivery = (storage: StorageService, key: string, token: number, now: number): Rows =>
  storage.exec(`UPDATE ${JOBS} SET lease_token = lease_token + 1 WHERE key = ? AND ${LEASE_HELD} RETURNING *`, [key, token, now])

/** An expired lease is counted as a stall (`stalled`), its worker gone. */
export const countStall = (storage: StorageService, key: string, generation: string, stalled: number): Rows =>
  storage.exec(`UPDATE ${JOBS} SET worker_id = NULL, stalled = ? WHERE key = ? AND generation_id = ?`, [stalled, key, generation])

/** An expired lease is released: the job waits again from `now`, its stalls counted. */
export const releaseLease = (storage: StorageService, key: string, generation: string, stalled: number, now: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET leased_until = NULL, worker_id = NULL, stalled = ?, next_attempt_at = ? WHERE key = ? AND generation_id = ?`,
    [stalled, now, key, generation]
  )

/** A transport's job at its queue's concurrency waits for a lease to end. */
export const waitForSlot = (storage: StorageService, key: string, generation: string): Rows =>
  storage.exec(`UPDATE ${JOBS} SET waiting_slot = 1 WHERE key = ? AND generation_id = ?`, [key, generation])

/** The first job (in start order) the queue held back at its concurrency is due at `now`; returns its key. */
export const freeSlot = (storage: StorageService, queue: string, now: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET next_attempt_at = ?, waiting_slot = 0 WHERE key = (
       SELECT key FROM ${JOBS} WHERE queue = ? AND status = 'pending' AND waiting_slot = 1 AND leased_until IS NULL
       ORDER BY ${START_ORDER} LIMIT 1
     ) RETURNING key`,
    [now, queue]
  )

// Concurrency by key (see `keyed.ts`).

/** How many of the queue's jobs with key `concurrencyKey` have a lease out (`n`), and when the first ends (`soonest`). */
export const leasedOfKey = (storage: StorageService, queue: string, concurrencyKey: string): Rows =>
  storage.exec(
    `SELECT COUNT(*) AS n, MIN(leased_until) AS soonest FROM ${JOBS}
     WHERE queue = ? AND concurrency_key = ? AND leased_until IS NOT NULL AND status = 'pending'`,
    [queue, concurrencyKey]
  )

/** The queue's leases out by key (`concurrency_key`, `n`). */
export const leasedByKey = (storage: StorageService, queue: string): Rows =>
  storage.exec(
    `SELECT concurrency_key, COUNT(*) AS n FROM ${JOBS}
     WHERE queue = ? AND leased_until IS NOT NULL AND status = 'pending' AND concurrency_key IS NOT NULL GROUP BY concurrency_key`,
    [queue]
  )

/** The job waits for a running job of its key to end (or for `at`, when it looks again), its attempt not counted. */
export const waitForKey = (storage: StorageService, key: string, generation: string): Rows =>
  storage.exec(`UPDATE ${JOBS} SET waiting_key = 1 WHERE key = ? AND ${UNFINISHED}`, [key, generation])

/** The first job (in start order) waiting for its key is due at `now`; returns its key. */
export const freeKey = (storage: StorageService, queue: string, concurrencyKey: string, now: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET next_attempt_at = ?, waiting_key = 0 WHERE key = (
       SELECT key FROM ${JOBS} WHERE queue = ? AND concurrency_key = ? AND waiting_key = 1 AND status = 'pending'
       ORDER BY ${START_ORDER} LIMIT 1
     ) RETURNING key`,
    [now, queue, concurrencyKey]
  )

/** The job no longer waits for its key (it was admitted or leased). */
export const keyAdmitted = (storage: StorageService, key: string): Rows =>
  storage.exec(`UPDATE ${JOBS} SET waiting_key = 0 WHERE key = ? AND waiting_key = 1`, [key])

// Flows: a job's end, told to its parent and its descendants.

/** A child finished: its parent counts it, and is pending (due no earlier than `at`) once the last one did. */
export const childFinished = (storage: StorageService, parentKey: string, at: number): Rows =>
  // SET sees the row as it was: the last child to finish releases the parent.
  storage.exec(
    `UPDATE ${JOBS} SET children_pending = children_pending - 1,
       status = CASE WHEN children_pending <= 1 THEN 'pending' ELSE status END,
       next_attempt_at = CASE WHEN children_pending <= 1 THEN MAX(next_attempt_at, ?) ELSE next_attempt_at END
     WHERE key = ? AND status = 'waiting_children' RETURNING status, next_attempt_at`,
    [at, parentKey]
  )

/** A parent still waiting for its children fails with `error`; returns its row. */
export const failWaiting = (storage: StorageService, parentKey: string, error: SerializedError, at: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET status = 'failed', last_error = ?, last_error_name = ?, finished_at = ?
     WHERE key = ? AND status = 'waiting_children' RETURNING *`,
    [error.message, error.name, at, parentKey]
  )

/** Cancels the descendants of `rootKey` that never started (attempt 0); returns their keys, queues and ids. */
export const cancelNotStarted = (storage: StorageService, rootKey: string, at: number, reason: string): Rows =>
  storage.exec(
    `WITH RECURSIVE doomed(key) AS (
       SELECT key FROM ${JOBS} WHERE parent_key = ? AND status IN ('pending', 'waiting_children') AND attempt = 0
       UNION SELECT j.key FROM ${JOBS} j JOIN doomed d ON j.parent_key = d.key
         WHERE j.status IN ('pending', 'waiting_children') AND j.attempt = 0
     )
     UPDATE ${JOBS} SET status = 'canceled', finished_at = ?, cancel_reason = ?
     WHERE key IN (SELECT key FROM doomed) RETURNING key, queue, id`,
    [rootKey, at, reason]
  )

// Retention and cleaning.

/** A child whose parent has not run yet keeps its row: the parent reads its value (`childrenValues`). */
const PARENT_DONE = `(j.parent_key IS NULL OR NOT EXISTS (
  SELECT 1 FROM ${JOBS} p WHERE p.key = j.parent_key AND p.status IN ('pending', 'waiting_children')
))`

/** Deletes the queue's `status` jobs finished before `before` (whose parents are done); returns their ids. */
export const removeFinishedBefore = (storage: StorageService, queue: string, status: string, before: number): Rows =>
  storage.exec(
    `DELETE FROM ${JOBS} WHERE key IN (
       SELECT key FROM ${JOBS} j WHERE queue = ? AND status = ? AND finished_at < ? AND ${PARENT_DONE}
     ) RETURNING id`,
    [queue, status, before]
  )

/** Deletes the queue's `count` first finished `status` jobs (whose parents are done); returns their ids. */
export const removeOldestFinished = (storage: StorageService, queue: string, status: string, count: number): Rows =>
  storage.exec(
    `DELETE FROM ${JOBS} WHERE key IN (
       SELECT key FROM ${JOBS} j WHERE queue = ? AND status = ? AND ${PARENT_DONE} ORDER BY finished_at, seq LIMIT ?
     ) RETURNING id`,
    [queue, status, count]
  )

/** How many of the queue's jobs are in `status`. */
export const countInStatus = (storage: StorageService, queue: string, status: string): Effect.Effect<number, StorageError> =>
  countOf(storage.exec(`SELECT COUNT(*) AS n FROM ${JOBS} WHERE queue = ? AND status = ?`, [queue, status]))

/** When the first of the queue's `status` jobs finished (`at`, NULL when none). */
export const oldestFinished = (storage: StorageService, queue: string, status: string): Rows =>
  storage.exec(`SELECT MIN(finished_at) AS at FROM ${JOBS} WHERE queue = ? AND status = ?`, [queue, status])

/** Deletes up to `limit` of the queue's jobs in `states` finished by `before`, first finished first; returns their ids. */
export const clean = (storage: StorageService, queue: string, states: ReadonlyArray<string>, before: number, limit: number): Rows =>
  storage.exec(
    `DELETE FROM ${JOBS} WHERE key IN (
       SELECT key FROM ${JOBS} WHERE queue = ? AND status IN (${placeholders(states)}) AND finished_at <= ?
       ORDER BY finished_at LIMIT ?
     ) RETURNING id`,
    [queue, ...states, before, limit]
  )

// Managing one job.

/** A cancel asked while the job executes here: its end becomes `canceled`. */
export const requestCancel = (storage: StorageService, key: string, reason: string): Rows =>
  storage.exec(`UPDATE ${JOBS} SET cancel_requested = 1, cancel_reason = ? WHERE key = ?`, [reason, key])

/** The event key whose arrival cancels the job (`cancelOn`), or none. */
export const setCancelOn = (storage: StorageService, key: string, cancelOn: string | null): Rows =>
  storage.exec(`UPDATE ${JOBS} SET cancel_on = ? WHERE key = ?`, [cancelOn, key])

/** The unfinished jobs an event cancels (`key`), through the partial index on `cancel_on`. */
export const cancelOnMatches = (storage: StorageService, event: string): Rows =>
  storage.exec(
    `SELECT key, queue, id FROM ${JOBS} WHERE cancel_on = ? AND status IN ('pending', 'waiting_children') ORDER BY seq`,
    [event]
  )

/** An unfinished job is `canceled` at `at`; returns its row. */
export const cancel = (storage: StorageService, key: string, reason: string, at: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET status = 'canceled', finished_at = ?, cancel_reason = ?
     WHERE key = ? AND status IN ('pending', 'waiting_children') RETURNING *`,
    [at, reason, key]
  )

/** Unfinished jobs whose cancel was asked (`key`, `cancel_reason`). */
export const cancelsAsked = (storage: StorageService): Rows =>
  storage.exec(`SELECT key, cancel_reason FROM ${JOBS} WHERE cancel_requested = 1 AND status IN ('pending', 'waiting_children')`)

/** Deletes the job with its descendants; returns their rows. */
export const removeTree = (storage: StorageService, key: string): Rows =>
  storage.exec(
    `WITH RECURSIVE doomed(key) AS (
       SELECT ? UNION SELECT j.key FROM ${JOBS} j JOIN doomed d ON j.parent_key = d.key
     )
     DELETE FROM ${JOBS} WHERE key IN (SELECT key FROM doomed) RETURNING *`,
    [key]
  )

/** A pending job due after `now` and not leased (a leased job's time is its lease's end) is due at `now`; returns its key. */
export const promote = (storage: StorageService, key: string, now: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET next_attempt_at = ?, run_at = ? WHERE key = ? AND status = 'pending' AND next_attempt_at > ?
       AND leased_until IS NULL RETURNING key`,
    [now, now, key, now]
  )

const RESET = `status = 'pending', attempt = 0, generation_id = ?, next_attempt_at = ?, run_at = ?, last_error = NULL,
  last_error_name = NULL, result = NULL, progress = NULL, started_at = NULL, finished_at = NULL, cancel_requested = 0,
  cancel_reason = NULL, leased_until = NULL, worker_id = NULL, stalled = 0`

/** A failed or canceled job is pending again at `now` with fresh attempts and a new generation; returns its key. */
export const reset = (storage: StorageService, key: string, generation: string, now: number): Rows =>
  storage.exec(`UPDATE ${JOBS} SET ${RESET} WHERE key = ? AND status IN ('failed', 'canceled') RETURNING key`, [
    generation,
    now,
    now,
    key
  ])

/** An unfinished job's priority; returns its key, priority and insertion order. */
export const setPriority = (storage: StorageService, key: string, priority: number): Rows =>
  storage.exec(
    `UPDATE ${JOBS} SET priority = ? WHERE key = ? AND status IN ('pending', 'waiting_children') RETURNING key, priority, seq`,
    [priority, key]
  )

// Bulk operations by filter.

/**
 * A bulk operation's window: at most `take` of the queue's jobs stored in `status`, inserted in (`after`, `upTo`],
 * in insertion order, read through (queue, status, seq): rows touched are bounded whatever the queue holds.
 */
export const bulkWindow = (
  storage: StorageService,
  window: {
    readonly queue: string
    readonly status: string
    readonly after: number
    readonly upTo: number
    readonly take: number
  }
): Rows =>
  storage.exec(
    `SELECT key, queue, id, seq, status, next_attempt_at, leased_until, created_at FROM ${JOBS} INDEXED BY ${JOBS}_queue_status_seq_idx
     WHERE queue = ? AND status = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`,
    [window.queue, window.status, window.after, window.upTo, window.take]
  )

// Reading a queue's jobs by state.

/** SQL for one state; `active` and the waiting/delayed split depend on the time and on this isolate. */
const stateCondition = (state: JobState, now: number, active: ReadonlyArray<string>): Condition => {
  // Executing here, or leased to an external worker.
  const running = active.length === 0
    ? "leased_until IS NOT NULL"
    : `(leased_until IS NOT NULL OR key IN (${placeholders(active)}))`
  switch (state) {
    case "waiting":
      return { sql: `(status = 'pending' AND next_attempt_at <= ? AND NOT ${running})`, bindings: [now, ...active] }
    case "delayed":
      return { sql: `(status = 'pending' AND next_attempt_at > ? AND NOT ${running})`, bindings: [now, ...active] }
    case "active":
      return { sql: `(status = 'pending' AND ${running})`, bindings: [...active] }
    case "waiting-children":
      return { sql: "status = 'waiting_children'", bindings: [] }
    default:
      return { sql: "status = ?", bindings: [state] }
  }
}

/**
 * The queue's first `take` jobs after insertion order `after`, in `states` (all when empty), in the
 * order they were added, `columns` selected. `active`: the queue's keys executing here (`now` splits
 * waiting from delayed).
 */
export const page = (
  storage: StorageService,
  options: {
    readonly columns: string
    readonly queue: string
    readonly after: number
    readonly states: ReadonlyArray<JobState>
    readonly now: number
    readonly active: ReadonlyArray<string>
    readonly take: number
  }
): Rows => {
  const conditions = options.states.map((state) => stateCondition(state, options.now, options.active))
  const filter = conditions.length === 0 ? "" : ` AND (${conditions.map((c) => c.sql).join(" OR ")})`
  return storage.exec(
    `SELECT ${options.columns} FROM ${JOBS} WHERE queue = ? AND seq > ?${filter} ORDER BY seq LIMIT ?`,
    [options.queue, options.after, ...conditions.flatMap((c) => c.bindings), options.take]
  )
}

/** The statuses a state's jobs are stored in: the index range a page of that state walks. */
export const STATUS_OF: Record<JobState, string> = {
  waiting: "pending",
  delayed: "pending",
  active: "pending",
  "waiting-children": "waiting_children",
  completed: "completed",
  failed: "failed",
  canceled: "canceled"
}

/**
 * At most `examine` of the queue's jobs after insertion order `after` in the status `state` is stored in,
 * in the order they were added, each with `matched` (1 when it is in `state`: waiting, delayed and active
 * share "pending"). Rows touched are bounded whatever the queue holds: a state that is rare among its
 * status's jobs gives a short page and a cursor to read on from.
 */
export const examinedPage = (
  storage: StorageService,
  options: {
    readonly columns: string
    readonly queue: string
    readonly after: number
    readonly state: JobState
    readonly now: number
    readonly active: ReadonlyArray<string>
    readonly examine: number
  }
): Rows => {
  const condition = stateCondition(options.state, options.now, options.active)
  return storage.exec(
    `SELECT ${options.columns}, (${condition.sql}) AS matched FROM ${JOBS} INDEXED BY ${JOBS}_queue_status_seq_idx
     WHERE queue = ? AND status = ? AND seq > ? ORDER BY seq LIMIT ?`,
    [...condition.bindings, options.queue, STATUS_OF[options.state], options.after, options.examine]
  )
}

/** Keys bound per statement: workerd takes at most 100 parameters, `now` among them. */
const CHUNK = 64

/**
 * How many of the queue's jobs are in each state, each counted up to the inspector's cap, reading index
 * ranges only (`queue_due_idx`, `queue_leased_idx`, `queue_idx`): rows touched are bounded by the cap and by
 * the jobs running, whatever the queue holds. Running jobs (leased, or among `active`: executing here) are
 * read one by one; the pending ones due by `now` less those are waiting, the later ones less those delayed.
 */
export const cappedStateCounts = (
  storage: StorageService,
  queue: string,
  now: number,
  active: ReadonlyArray<string>
): Effect.Effect<Record<JobState, number>, StorageError> =>
  Effect.gen(function*() {
    // Each statement names its index: without statistics SQLite may take another index on `queue` and read the
    // queue's rows one by one (a leased count through (queue, status, seq) read 100 000 rows).
    const capped = (index: string, where: string, bindings: ReadonlyArray<SqlValue>) =>
      countOf(storage.exec(Text.cappedCount(`${JOBS} INDEXED BY ${index}`, where), bindings))
    const running = new Map<string, boolean>()
    const leased = yield* storage.exec(
      `SELECT key, next_attempt_at > ? AS later FROM ${JOBS} INDEXED BY ${JOBS}_queue_leased_idx
       WHERE queue = ? AND leased_until IS NOT NULL`,
      [now, queue]
    )
    for (const row of leased) running.set(String(row.key), Number(row.later) === 1)
    for (let at = 0; at < active.length; at += CHUNK) {
      const keys = active.slice(at, at + CHUNK)
      const rows = yield* storage.exec(
        `SELECT key, next_attempt_at > ? AS later FROM ${JOBS} WHERE status = 'pending' AND key IN (${placeholders(keys)})`,
        [now, ...keys]
      )
      for (const row of rows) running.set(String(row.key), Number(row.later) === 1)
    }
    let runningLater = 0
    for (const later of running.values()) if (later) runningLater++
    const due = yield* capped(`${JOBS}_queue_due_idx`, "queue = ? AND status = 'pending' AND next_attempt_at <= ?", [queue, now])
    const later = yield* capped(`${JOBS}_queue_due_idx`, "queue = ? AND status = 'pending' AND next_attempt_at > ?", [queue, now])
    // At the cap a count means "at least": what runs among them cannot be told apart, so the cap stays.
    const less = (count: number, minus: number) => count >= COUNT_CAP ? COUNT_CAP : Math.max(0, count - minus)
    const byStatus = (status: string) => capped(`${JOBS}_queue_due_idx`, "queue = ? AND status = ?", [queue, status])
    return {
      waiting: less(due, running.size - runningLater),
      delayed: less(later, runningLater),
      active: Math.min(running.size, COUNT_CAP),
      "waiting-children": yield* byStatus("waiting_children"),
      completed: yield* byStatus("completed"),
      failed: yield* byStatus("failed"),
      canceled: yield* byStatus("canceled")
    }
  })

/**
 * How many of the queue's jobs finished with `status` since `since` (by `finished_at`), counted up to the
 * inspector's cap from a range of the (queue, status, finished_at) index: the rows read are bounded by the
 * cap, whatever the queue holds.
 */
export const cappedFinishedSince = (storage: StorageService, queue: string, status: "completed" | "failed", since: number) =>
  countOf(storage.exec(
    Text.cappedCount(`${JOBS} INDEXED BY ${JOBS}_queue_idx`, "queue = ? AND status = ? AND finished_at >= ?"),
    [queue, status, since]
  ))

/** The queue's jobs counted by status, pending ones left out (`status`, `n`): from the (queue, status, …) index alone. */
export const countsByStatus = (storage: StorageService, queue: string): Rows =>
  storage.exec(`SELECT status, COUNT(*) AS n FROM ${JOBS} WHERE queue = ? AND status != 'pending' GROUP BY status`, [queue])

/** The queue's pending jobs counted by whether they are due after `now` (`later`) and leased (`leased`). */
export const pendingCounts = (storage: StorageService, queue: string, now: number): Rows =>
  storage.exec(
    `SELECT next_attempt_at > ? AS later, leased_until IS NOT NULL AS leased, COUNT(*) AS n FROM ${JOBS}
     WHERE queue = ? AND status = 'pending' GROUP BY later, leased`,
    [now, queue]
  )

/** When the pending ones among `keys` are due (`next_attempt_at`). */
export const pendingTimes = (storage: StorageService, keys: ReadonlyArray<string>): Rows =>
  storage.exec(`SELECT next_attempt_at FROM ${JOBS} WHERE status = 'pending' AND key IN (${placeholders(keys)})`, keys)
