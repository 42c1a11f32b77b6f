/**
 * The owner of `durability_workflow_events`: events sent to an instance, kept until a wait of their
 * type consumes them (the first matching wait, oldest event first).
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import { EVENTS } from "./schema.js"

export const insert = (storage: StorageService, key: string, type: string, payload: string, at: number): Effect.Effect<number, StorageError> =>
  Effect.map(
    storage.exec(`INSERT INTO ${EVENTS} (instance, type, payload, sent_at) VALUES (?, ?, ?, ?) RETURNING id`, [key, type, payload, at]),
    ([row]) => Number(row?.id)
  )

/** The oldest event of `type` no wait consumed yet. */
export const oldestUnconsumed = (storage: StorageService, key: string, type: string): Effect.Effect<Row | undefined, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT * FROM ${EVENTS} WHERE instance = ? AND type = ? AND consumed_seq IS NULL ORDER BY id LIMIT 1`,
      [key, type]
    ),
    ([row]) => row
  )

/** Whether an unconsumed event of one of `types` is there. */
export const anyUnconsumed = (storage: StorageService, key: string, types: ReadonlyArray<string>): Effect.Effect<boolean, StorageError> =>
  types.length === 0 ? Effect.succeed(false) : Effect.map(
    storage.exec(
      `SELECT 1 FROM ${EVENTS} WHERE instance = ? AND consumed_seq IS NULL AND type IN (${types.map(() => "?").join(", ")}) LIMIT 1`,
      [key, ...types]
    ),
    (rows) => rows.length > 0
  )

/** Marks the event consumed by the wait at `seq`; returns whether it was still unconsumed. */
export const consume = (storage: StorageService, id: number, seq: number): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(`UPDATE ${EVENTS} SET consumed_seq = ? WHERE id = ? AND consumed_seq IS NULL RETURNING id`, [seq, id]),
    (rows) => rows.length > 0
  )

export const list = (storage: StorageService, key: string, take: number): Effect.Effect<ReadonlyArray<Row>, StorageError> =>
  storage.exec(`SELECT * FROM ${EVENTS} WHERE instance = ? ORDER BY id LIMIT ?`, [key, take])

export const deleteAll = (storage: StorageService, key: string): Effect.Effect<void, StorageError> =>
  Effect.asVoid(storage.exec(`DELETE FROM ${EVENTS} WHERE instance = ?`, [key]))

/** The instance's first `take` events from id `after` on, with `columns` as the caller reads them (bounded heads, for the inspector). */
export const page = (storage: StorageService, key: string, after: number, take: number, columns: string): Effect.Effect<ReadonlyArray<Row>, StorageError> =>
  storage.exec(`SELECT ${columns} FROM ${EVENTS} WHERE instance = ? AND id > ? ORDER BY id LIMIT ?`, [key, after, take])

/** How many events the instance holds, stopping at `cap`. */
export const cappedCount = (storage: StorageService, key: string, cap: number): Effect.Effect<number, StorageError> =>
  Effect.map(
    storage.exec(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${EVENTS} WHERE instance = ? LIMIT ${cap})`, [key]),
    ([row]) => Number(row?.n ?? 0)
  )
