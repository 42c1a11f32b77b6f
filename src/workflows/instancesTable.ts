/**
 * The owner of `durability_workflows`: every statement on an instance's row, reads included.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Execution } from "../engine/DurableTable.js"
import type { StorageError } from "../shared/Errors.js"
import type { Row, SqlValue, StorageService } from "../engine/StorageService.js"
import { TABLE } from "./schema.js"
import type { WorkflowInstanceStatus } from "./types.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** An instance's key: its workflow's name and its id (a workflow name cannot contain "/"). */
export const keyOf = (workflow: string, id: string): string => `${workflow}/${id}`

/** The fence of a run's writes: this generation of the instance, still a record to run (bindings: key, generation). */
const CURRENT_RUN = `key = ? AND generation_id = ? AND status = 'pending'`

/** The same fence as a condition of another table's write (bindings: key, generation). */
export const LIVE_RUN = `EXISTS (SELECT 1 FROM ${TABLE} WHERE ${CURRENT_RUN})`

export const read = (storage: StorageService, key: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT * FROM ${TABLE} WHERE key = ?`, [key]), ([row]) => row)

export interface NewInstance {
  readonly key: string
  readonly workflow: string
  readonly id: string
  readonly generation: string
  readonly params: string
  readonly parent: string | null
  readonly at: number
}

/** Inserts the instance unless its key exists; returns whether it was inserted. */
export const insert = (storage: StorageService, instance: NewInstance): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(
      `INSERT INTO ${TABLE} (key, workflow, instance_id, generation_id, status, attempt, next_attempt_at, params, parent,
         created_at, updated_at)
       VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key`,
      [instance.key, instance.workflow, instance.id, instance.generation, instance.at, instance.params, instance.parent, instance.at, instance.at]
    ),
    (rows) => rows.length > 0
  )

/** Marks the run started (the first time only: `started_at` tells queued from running). */
export const markStarted = (storage: StorageService, execution: Execution, at: number): Effect.Effect<void, StorageError> =>
  Number(execution.row.started_at ?? 0) > 0 ? Effect.void : Effect.asVoid(storage.exec(
    `UPDATE ${TABLE} SET started_at = ? WHERE key = ? AND generation_id = ? AND started_at IS NULL`,
    [at, execution.key, execution.generation]
  ))

/** How a run ended, as `complete` stores it. */
export type RunEnd =
  | { readonly _tag: "Complete"; readonly output: string }
  | {
    readonly _tag: "Suspend"
    /** The earliest time something it waits for comes due (a sleep, a retry, an event's timeout); null: none. */
    readonly at: number | null
    /** What it waits for besides time: `event:<type>` and `child:<key>` entries. */
    readonly waiting: ReadonlyArray<string>
  }

/** Stores a run's end, fenced to its attempt; returns whether it matched. */
export const end = (storage: StorageService, execution: Execution, value: RunEnd, at: number): Effect.Effect<boolean, StorageError> => {
  const fence: ReadonlyArray<SqlValue> = [execution.key, execution.generation, execution.attempt]
  const written = value._tag === "Complete"
    ? storage.exec(
      `UPDATE ${TABLE} SET status = 'complete', output = ?, waiting = NULL, wake_at = NULL, ended_at = ?, updated_at = ?
       WHERE ${CURRENT_RUN} AND attempt = ? RETURNING key`,
      [value.output, at, at, ...fence]
    )
    // Each run between two waits is counted afresh: a workflow that sleeps a thousand times is not out of attempts.
    : storage.exec(
      `UPDATE ${TABLE} SET status = 'suspended', attempt = 0, waiting = ?, wake_at = ?, next_attempt_at = ?, updated_at = ?
       WHERE ${CURRENT_RUN} AND attempt = ? RETURNING key`,
      [value.waiting.length === 0 ? null : JSON.stringify(value.waiting), value.at, value.at ?? at, at, ...fence]
    )
  return Effect.map(written, (rows) => rows.length > 0)
}

/** Makes a suspended instance a record to run now (a wake-up); returns whether it was suspended and not paused. */
export const wake = (storage: StorageService, key: string, at: number): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(
      `UPDATE ${TABLE} SET status = 'pending', next_attempt_at = ?, waiting = NULL, wake_at = NULL, updated_at = ?
       WHERE key = ? AND status = 'suspended' AND paused = 0 RETURNING key`,
      [at, at, key]
    ),
    (rows) => rows.length > 0
  )

export const setPaused = (storage: StorageService, key: string, paused: boolean, at: number): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET paused = ?, updated_at = ? WHERE key = ? AND status IN ('pending', 'suspended') RETURNING *`,
    [paused ? 1 : 0, at, key]
  )

/** Ends the instance as terminated under a new generation (fencing a run still going). */
export const terminate = (storage: StorageService, key: string, generation: string, at: number): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET status = 'terminated', generation_id = ?, waiting = NULL, wake_at = NULL, ended_at = ?,
       updated_at = ?, last_error = 'The workflow instance was terminated', last_error_name = 'WorkflowTerminatedError'
     WHERE key = ? AND status IN ('pending', 'suspended') RETURNING *`,
    [generation, at, at, key]
  )

/** Starts the instance over under a new generation: its steps and events are deleted by the caller. */
export const restart = (storage: StorageService, key: string, generation: string, at: number): Rows =>
  storage.exec(
    `UPDATE ${TABLE} SET status = 'pending', generation_id = ?, attempt = 0, next_attempt_at = ?, last_error = NULL,
       last_error_name = NULL, output = NULL, paused = 0, waiting = NULL, wake_at = NULL, started_at = NULL, ended_at = NULL,
       updated_at = ?
     WHERE key = ? RETURNING *`,
    [generation, at, at, key]
  )

/** An instance's public status from its row (the same split as `STATUS_WHERE`). */
export const statusOf = (row: Row): WorkflowInstanceStatus => {
  switch (row.status) {
    case "complete":
      return "complete"
    case "failed":
      return "errored"
    case "terminated":
      return "terminated"
    case "suspended":
      return Number(row.paused) === 1 ? "paused" : "waiting"
    default:
      return Number(row.paused) === 1 ? "paused" : row.started_at === null ? "queued" : "running"
  }
}

/** Each public status as a condition on a row (constants, no bindings). */
export const STATUS_WHERE: Readonly<Record<string, string>> = {
  queued: "(status = 'pending' AND paused = 0 AND started_at IS NULL)",
  running: "(status = 'pending' AND paused = 0 AND started_at IS NOT NULL)",
  paused: "(status IN ('pending', 'suspended') AND paused = 1)",
  waiting: "(status = 'suspended' AND paused = 0)",
  complete: "(status = 'complete')",
  errored: "(status = 'failed')",
  terminated: "(status = 'terminated')"
}

/**
 * A page of a workflow's instances, newest first (keyset: `created_at`, then `key`, both descending),
 * in `statuses` (public names; all when undefined); `columns` as the caller reads them (default all).
 */
export const page = (
  storage: StorageService,
  workflow: string,
  statuses: ReadonlyArray<string> | undefined,
  after: { readonly at: number; readonly key: string } | undefined,
  take: number,
  columns = "*"
): Rows =>
  storage.exec(
    // Paused instances are few among the live ones: read them from the state index's exact ranges and sort
    // them, not by walking every live instance in `list_idx` order to find them.
    `SELECT ${columns} FROM ${TABLE}${
      statuses?.length === 1 && statuses[0] === "paused" ? ` INDEXED BY ${TABLE}_state_idx` : ""
    } WHERE workflow = ?${
      statuses === undefined ? "" : ` AND (${statuses.map((status) => STATUS_WHERE[status] ?? "0").join(" OR ")})`
    }${after === undefined ? "" : " AND (created_at < ? OR (created_at = ? AND key < ?))"}
     ORDER BY created_at DESC, key DESC LIMIT ?`,
    [workflow, ...(after === undefined ? [] : [after.at, after.at, after.key]), take]
  )

/** One instance's row with `columns` as the caller reads them (bounded heads of its JSON, for the inspector). */
export const readColumns = (storage: StorageService, key: string, columns: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT ${columns} FROM ${TABLE} WHERE key = ?`, [key]), ([row]) => row)

/**
 * A workflow's instances in each public status, each count stopping at `cap`: every condition is a range
 * of the state index (`workflow, status, paused, started_at`), so a count reads at most `cap` entries.
 */
export const cappedCounts = (storage: StorageService, workflow: string, cap: number): Effect.Effect<Record<string, number>, StorageError> =>
  Effect.gen(function*() {
    const counts: Record<string, number> = {}
    for (const [status, where] of Object.entries(STATUS_WHERE)) {
      const [row] = yield* storage.exec(
        `SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${TABLE} WHERE workflow = ? AND ${where} LIMIT ${cap})`,
        [workflow]
      )
      counts[status] = Number(row?.n ?? 0)
    }
    return counts
  })
