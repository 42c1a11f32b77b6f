/**
 * The owner of `durability_effect_workflow_executions`: every statement on an execution's row, reads
 * included (the schema is `schema.ts`). A run's end is fenced by `CURRENT_ATTEMPT`.
 *
 * An execution is pending while it has work: runnable (`suspended = 0`: due, claimed by the engine) or
 * suspended (`suspended = 1`: held off the alarm until a deferred, a clock, a child or `resume` wakes it).
 * It ends `completed` (its result stored) or `failed` (the engine spent its attempts on a run that failed
 * outside the workflow: storage, a payload that no longer decodes).
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Execution } from "../../engine/DurableTable.js"
import type { Row, StorageService } from "../../engine/StorageService.js"
import type { StorageError } from "../../shared/Errors.js"
import { EXECUTIONS } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** The fence of a run's end: this attempt of this generation, still pending (bindings: id, generation, attempt). */
const CURRENT_ATTEMPT = "execution_id = ? AND generation_id = ? AND status = 'pending' AND attempt = ?"

/** What holds a pending execution off the alarm: it waits for a wake-up, not for its time. */
export const RUNNABLE = "suspended = 0"

/** The execution stored under `id`, if any. */
export const read = (storage: StorageService, id: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT * FROM ${EXECUTIONS} WHERE execution_id = ?`, [id]), ([row]) => row)

/** A new execution, runnable at `now`, unless one is stored under its id; returns it when inserted. */
export const insert = (
  storage: StorageService,
  execution: {
    readonly id: string
    readonly generation: string
    readonly workflow: string
    readonly payload: string
    readonly parent: string | null
  },
  now: number
): Rows =>
  storage.exec(
    `INSERT INTO ${EXECUTIONS} (execution_id, generation_id, status, attempt, next_attempt_at, created_at, workflow, payload, parent)
     VALUES (?, ?, 'pending', 0, ?, ?, ?, ?, ?)
     ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id`,
    [execution.id, execution.generation, now, now, execution.workflow, execution.payload, execution.parent]
  )

/**
 * Wakes a pending execution at `now` (`interrupt` also asks it to stop): a suspended one becomes
 * runnable; a running one counts the wake-up, so its run suspending next runs again. Returns it when
 * it was suspended (it needs a start) or runnable.
 */
export const wake = (storage: StorageService, id: string, now: number, interrupt = false): Rows =>
  storage.exec(
    `UPDATE ${EXECUTIONS} SET wakes = wakes + 1, suspended = 0, next_attempt_at = CASE WHEN suspended = 1 THEN ? ELSE next_attempt_at END${
      interrupt ? ", interrupted = 1" : ""
    }
     WHERE execution_id = ? AND status = 'pending' RETURNING execution_id, next_attempt_at`,
    [now, id]
  )

/** `wake`, only of a suspended execution (a `resume`). */
export const resume = (storage: StorageService, id: string, now: number): Rows =>
  storage.exec(
    `UPDATE ${EXECUTIONS} SET wakes = wakes + 1, suspended = 0, next_attempt_at = ?
     WHERE execution_id = ? AND status = 'pending' AND suspended = 1 RETURNING execution_id, next_attempt_at`,
    [now, id]
  )

/** A run completed the execution: its result stored for good. */
export const complete = (
  storage: StorageService,
  run: Pick<Execution, "key" | "generation" | "attempt">,
  result: string,
  at: number
): Rows =>
  storage.exec(
    `UPDATE ${EXECUTIONS} SET status = 'completed', result = ?, suspended = 0, next_attempt_at = ?
     WHERE ${CURRENT_ATTEMPT} RETURNING execution_id`,
    [result, at, run.key, run.generation, run.attempt]
  )

/**
 * A run suspended: the execution waits under a new generation with its attempts counted afresh, held
 * unless a wake-up came during the run (`wakes` moved past what the claim read): then it runs again at `at`.
 */
export const suspend = (
  storage: StorageService,
  run: Pick<Execution, "key" | "generation" | "attempt">,
  wakesAtClaim: number,
  generation: string,
  result: string,
  at: number
): Rows =>
  storage.exec(
    `UPDATE ${EXECUTIONS} SET result = ?, suspended = CASE WHEN wakes = ? THEN 1 ELSE 0 END, attempt = 0,
       generation_id = ?, next_attempt_at = ?
     WHERE ${CURRENT_ATTEMPT} RETURNING execution_id`,
    [result, wakesAtClaim, generation, at, run.key, run.generation, run.attempt]
  )

/**
 * Deletes the executions that ended (completed or failed) before `before` and whose parent, if any, ended too
 * (a running parent may still read its child's result); returns their ids.
 */
export const purgeEnded = (storage: StorageService, before: number): Effect.Effect<ReadonlyArray<string>, StorageError> =>
  Effect.map(
    storage.exec(
      `DELETE FROM ${EXECUTIONS} WHERE status IN ('completed', 'failed') AND created_at < ?
         AND (parent IS NULL OR parent NOT IN (SELECT execution_id FROM ${EXECUTIONS} WHERE status = 'pending'))
       RETURNING execution_id`,
      [before]
    ),
    (rows) => rows.map((row) => String(row.execution_id))
  )
