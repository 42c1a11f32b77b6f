/**
 * The owner of the log's leased ranges and of each consumer's allocation (the high-water mark of
 * leased offsets, ahead of its cursor): every statement on them, reads included. A range's holder
 * is its `batch_id`: a reclaim gives the range a new one, which fences the old holder.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, SqlValue, StorageService } from "../engine/StorageService.js"
import { ALLOCATIONS, LOG_LEASES } from "./schema.js"

/** A range's state: held (`active`), nacked (`pending`), done (`acked`), or given up (`skipped`). */
export type LeaseState = "active" | "pending" | "acked" | "skipped"

/** A leased range as stored. */
export interface LeaseRow {
  readonly batchId: string
  readonly consumer: string
  readonly firstOffset: number
  readonly lastOffset: number
  readonly state: LeaseState
  readonly attempt: number
  readonly expiresAt: number
  readonly createdAt: number
}

const num = (value: SqlValue | undefined): number => Number(value)

const toLease = (row: Row): LeaseRow => ({
  batchId: String(row.batch_id),
  consumer: String(row.consumer),
  firstOffset: num(row.first_offset),
  lastOffset: num(row.last_offset),
  state: String(row.state) as LeaseState,
  attempt: num(row.attempt),
  expiresAt: num(row.expires_at),
  createdAt: num(row.created_at)
})

/** The consumer's oldest range that may be claimed again: nacked, or held past its expiry. */
export const reclaimable = (storage: StorageService, consumer: string, now: number): Effect.Effect<LeaseRow | undefined, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT * FROM ${LOG_LEASES} WHERE consumer = ? AND (state = 'pending' OR (state = 'active' AND expires_at <= ?))
       ORDER BY first_offset LIMIT 1`,
      [consumer, now]
    ),
    ([row]) => row === undefined ? undefined : toLease(row)
  )

/**
 * Hands the range held as `batchId` to a new holder (`nextBatchId`), as `state`, one attempt further;
 * false when it changed meanwhile.
 */
export const reassign = (
  storage: StorageService,
  o: { readonly batchId: string; readonly nextBatchId: string; readonly state: "active" | "skipped"; readonly expiresAt: number }
): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(
      `UPDATE ${LOG_LEASES} SET batch_id = ?, state = ?, attempt = attempt + 1, expires_at = ?
       WHERE batch_id = ? AND state IN ('active', 'pending') RETURNING batch_id`,
      [o.nextBatchId, o.state, o.expiresAt, o.batchId]
    ),
    (rows) => rows.length === 1
  )

/** How many ranges the consumer holds now: nacked ones, and held ones not expired. */
export const heldCount = (storage: StorageService, consumer: string, now: number): Effect.Effect<number, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT COUNT(*) AS count FROM ${LOG_LEASES} WHERE consumer = ? AND (state = 'pending' OR (state = 'active' AND expires_at > ?))`,
      [consumer, now]
    ),
    ([row]) => num(row?.count ?? 0)
  )

/** The consumer's allocation (the offset its next fresh range starts at, at least), if any. */
export const allocation = (storage: StorageService, consumer: string): Effect.Effect<number | undefined, StorageError> =>
  Effect.map(
    storage.exec(`SELECT allocated_offset FROM ${ALLOCATIONS} WHERE consumer = ?`, [consumer]),
    ([row]) => row === undefined ? undefined : num(row.allocated_offset)
  )

/** Records a fresh range held by `lease.batchId` and moves the consumer's allocation past it. */
export const open = (storage: StorageService, lease: LeaseRow): Effect.Effect<void, StorageError> =>
  Effect.zipRight(
    storage.exec(
      `INSERT INTO ${LOG_LEASES} (batch_id, consumer, first_offset, last_offset, state, attempt, expires_at, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      [lease.batchId, lease.consumer, lease.firstOffset, lease.lastOffset, lease.state, lease.attempt, lease.expiresAt, lease.createdAt]
    ),
    Effect.asVoid(storage.exec(
      `INSERT INTO ${ALLOCATIONS} (consumer, allocated_offset) VALUES (?, ?)
       ON CONFLICT (consumer) DO UPDATE SET allocated_offset = MAX(allocated_offset, excluded.allocated_offset)`,
      [lease.consumer, lease.lastOffset + 1]
    ))
  )

/** Settles the range held as `batchId` (active only) to `state`; false when it is not held. */
export const settle = (
  storage: StorageService,
  consumer: string,
  batchId: string,
  state: "acked" | "pending"
): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(
      `UPDATE ${LOG_LEASES} SET state = ?, expires_at = CASE WHEN ? = 'pending' THEN 0 ELSE expires_at END
       WHERE batch_id = ? AND consumer = ? AND state = 'active' RETURNING batch_id`,
      [state, state, batchId, consumer]
    ),
    (rows) => rows.length === 1
  )

/** The consumer's ranges from `offset` on, in offset order (the ack's walk). */
export const from = (storage: StorageService, consumer: string, offset: number): Effect.Effect<ReadonlyArray<LeaseRow>, StorageError> =>
  Effect.map(
    storage.exec(`SELECT * FROM ${LOG_LEASES} WHERE consumer = ? AND first_offset >= ? ORDER BY first_offset`, [consumer, offset]),
    (rows) => rows.map(toLease)
  )

/** Deletes the consumer's done ranges that end before `offset` (its cursor passed them). */
export const dropPassed = (storage: StorageService, consumer: string, offset: number): Effect.Effect<void, StorageError> =>
  Effect.asVoid(storage.exec(
    `DELETE FROM ${LOG_LEASES} WHERE consumer = ? AND last_offset < ? AND state IN ('acked', 'skipped')`,
    [consumer, offset]
  ))

/** The consumer's ranges, in offset order (for operators). */
export const list = (storage: StorageService, consumer: string): Effect.Effect<ReadonlyArray<LeaseRow>, StorageError> =>
  Effect.map(
    storage.exec(`SELECT * FROM ${LOG_LEASES} WHERE consumer = ? ORDER BY first_offset`, [consumer]),
    (rows) => rows.map(toLease)
  )

/** The ranges held now across consumers, at most `limit` (the inspector's view). */
export const held = (storage: StorageService, now: number, limit: number): Effect.Effect<ReadonlyArray<LeaseRow>, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT * FROM ${LOG_LEASES} WHERE state = 'pending' OR (state = 'active' AND expires_at > ?) ORDER BY consumer, first_offset LIMIT ?`,
      [now, limit]
    ),
    (rows) => rows.map(toLease)
  )

/** How many ranges are held now across consumers, counted up to `cap`. */
export const heldTotal = (storage: StorageService, now: number, cap: number): Effect.Effect<number, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT COUNT(*) AS count FROM (SELECT 1 FROM ${LOG_LEASES} WHERE state = 'pending' OR (state = 'active' AND expires_at > ?) LIMIT ?)`,
      [now, cap]
    ),
    ([row]) => num(row?.count ?? 0)
  )
