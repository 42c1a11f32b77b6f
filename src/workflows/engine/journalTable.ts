/**
 * The owner of the workflow journal: `durability_effect_workflow_activities` (each activity attempt's
 * exit) and `durability_effect_workflow_deferreds` (each durable deferred's exit). Both are written once:
 * the first exit stored is the one every replay reads.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageService } from "../../engine/StorageService.js"
import type { StorageError } from "../../shared/Errors.js"
import { ACTIVITIES, DEFERREDS } from "./schema.js"

type Text = Effect.Effect<string | undefined, StorageError>

/** The stored exit of an activity's attempt, if it completed. */
export const activity = (storage: StorageService, executionId: string, name: string, attempt: number): Text =>
  Effect.map(
    storage.exec(`SELECT exit FROM ${ACTIVITIES} WHERE execution_id = ? AND name = ? AND attempt = ?`, [executionId, name, attempt]),
    ([row]) => row === undefined ? undefined : String(row.exit)
  )

/** Stores an activity attempt's exit unless one is stored; returns the one stored now. */
export const recordActivity = (
  storage: StorageService,
  executionId: string,
  name: string,
  attempt: number,
  exit: string,
  now: number
): Effect.Effect<string, StorageError> =>
  Effect.zipRight(
    storage.exec(
      `INSERT INTO ${ACTIVITIES} (execution_id, name, attempt, exit, created_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (execution_id, name, attempt) DO NOTHING`,
      [executionId, name, attempt, exit, now]
    ),
    Effect.map(activity(storage, executionId, name, attempt), (stored) => stored ?? exit)
  )

/** The stored exit of a deferred, if it is done. */
export const deferred = (storage: StorageService, executionId: string, name: string): Text =>
  Effect.map(
    storage.exec(`SELECT exit FROM ${DEFERREDS} WHERE execution_id = ? AND name = ?`, [executionId, name]),
    ([row]) => row === undefined ? undefined : String(row.exit)
  )

/** Stores a deferred's exit unless it is done already; returns whether it was stored now. */
export const recordDeferred = (
  storage: StorageService,
  executionId: string,
  name: string,
  exit: string,
  now: number
): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(
      `INSERT INTO ${DEFERREDS} (execution_id, name, exit, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (execution_id, name) DO NOTHING RETURNING name`,
      [executionId, name, exit, now]
    ),
    (rows) => rows.length > 0
  )

/** Deletes the journal of the executions `ids` (their activities' and deferreds' exits). */
export const purge = (storage: StorageService, ids: ReadonlyArray<string>): Effect.Effect<void, StorageError> =>
  ids.length === 0 ? Effect.void : Effect.asVoid(Effect.zipRight(
    storage.exec(`DELETE FROM ${ACTIVITIES} WHERE execution_id IN (SELECT value FROM json_each(?))`, [JSON.stringify(ids)]),
    storage.exec(`DELETE FROM ${DEFERREDS} WHERE execution_id IN (SELECT value FROM json_each(?))`, [JSON.stringify(ids)])
  ))
