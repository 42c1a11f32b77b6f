/**
 * The owner of the log's records, its counter, its cursors and its cold-segment index: every
 * statement on them, reads included (the schema is `schema.ts`).
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, SqlValue, StorageService } from "../engine/StorageService.js"
import { CURSORS, LOG_SEQ, RECORDS, SEGMENTS } from "./schema.js"

/** A Durable Object statement takes at most 100 bindings. */
const MAX_BINDINGS = 100

/** A stored record, as read. */
export interface StoredRecord {
  readonly offset: number
  readonly key: string
  readonly payload: string
  readonly bytes: number
  readonly appendedAt: number
}

/** A record to insert at its reserved offset. */
export type NewRecord = StoredRecord

/** An entry of the cold-segment index. */
export interface SegmentRow {
  readonly firstOffset: number
  readonly lastOffset: number
  readonly locator: string
  readonly bytes: number
  readonly flushedAt: number
}

/**
 * The counter and the edges of what the object and the index hold, read with one statement. The
 * object's records are always the contiguous run `[lowestHot, nextOffset)`: offsets are reserved
 * contiguously and a trim removes only a leading run.
 */
export interface Edges {
  readonly nextOffset: number
  readonly totalBytes: number
  /** The lowest offset still held in the object, or undefined when it holds none. */
  readonly lowestHot: number | undefined
  /** The lowest first offset of an indexed cold segment, or undefined when none is indexed. */
  readonly lowestCold: number | undefined
}

const chunks = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

const num = (value: SqlValue | undefined): number => Number(value)
const optionalNum = (value: SqlValue | undefined): number | undefined =>
  value === null || value === undefined ? undefined : Number(value)

const toRecord = (row: Row): StoredRecord => ({
  offset: num(row.log_offset),
  key: String(row.dedup_key),
  payload: String(row.payload),
  bytes: num(row.bytes),
  appendedAt: num(row.appended_at)
})

const toSegment = (row: Row): SegmentRow => ({
  firstOffset: num(row.first_offset),
  lastOffset: num(row.last_offset),
  locator: String(row.locator),
  bytes: num(row.bytes),
  flushedAt: num(row.flushed_at)
})

/** The offsets already held for these keys (at most one statement per 100 keys). */
export const offsetsOfKeys = (
  storage: StorageService,
  keys: ReadonlyArray<string>
): Effect.Effect<ReadonlyMap<string, number>, StorageError> =>
  Effect.map(
    Effect.forEach(chunks(keys, MAX_BINDINGS), (part) =>
      storage.exec(
        `SELECT dedup_key, log_offset FROM ${RECORDS} WHERE dedup_key IN (${part.map(() => "?").join(", ")})`,
        part
      )),
    (parts) => new Map(parts.flat().map((row) => [String(row.dedup_key), num(row.log_offset)]))
  )

/**
 * Reserves `count` offsets and adds `bytes` to the stored total: the first reserved offset, and the
 * furthest-behind consumer's backlog after it (the load an append answers), with one statement.
 */
export const reserve = (
  storage: StorageService,
  count: number,
  bytes: number
): Effect.Effect<{ readonly first: number; readonly backlog: number }, StorageError> =>
  Effect.map(
    storage.exec(
      `UPDATE ${LOG_SEQ} SET next_offset = next_offset + ?, total_bytes = total_bytes + ? WHERE id = 0
       RETURNING next_offset - ? AS first, next_offset, (SELECT MIN(cursor_offset) FROM ${CURSORS}) AS low`,
      [count, bytes, count]
    ),
    ([row]) => {
      const low = optionalNum(row?.low)
      return { first: num(row?.first), backlog: low === undefined ? 0 : Math.max(0, num(row?.next_offset) - low) }
    }
  )

/** Inserts records at their reserved offsets (as few statements as the binding limit allows). */
export const insert = (storage: StorageService, records: ReadonlyArray<NewRecord>): Effect.Effect<void, StorageError> =>
  Effect.forEach(chunks(records, Math.floor(MAX_BINDINGS / 5)), (part) =>
    storage.exec(
      `INSERT INTO ${RECORDS} (log_offset, dedup_key, payload, bytes, appended_at) VALUES ${part.map(() => "(?, ?, ?, ?, ?)").join(", ")}`,
      part.flatMap((record) => [record.offset, record.key, record.payload, record.bytes, record.appendedAt])
    ), { discard: true })

/** The counter and the lowest hot and cold offsets. */
export const edges = (storage: StorageService): Effect.Effect<Edges, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT s.next_offset, s.total_bytes,
         (SELECT MIN(log_offset) FROM ${RECORDS}) AS lowest_hot,
         (SELECT MIN(first_offset) FROM ${SEGMENTS}) AS lowest_cold
       FROM ${LOG_SEQ} s WHERE s.id = 0`
    ),
    ([row]) => ({
      nextOffset: num(row?.next_offset ?? 0),
      totalBytes: num(row?.total_bytes ?? 0),
      lowestHot: optionalNum(row?.lowest_hot),
      lowestCold: optionalNum(row?.lowest_cold)
    })
  )

/** Up to `limit` records from `from` on, in offset order. */
export const page = (storage: StorageService, from: number, limit: number): Effect.Effect<ReadonlyArray<StoredRecord>, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT log_offset, dedup_key, payload, bytes, appended_at FROM ${RECORDS} WHERE log_offset >= ? ORDER BY log_offset LIMIT ?`,
      [from, limit]
    ),
    (rows) => rows.map(toRecord)
  )

/** The records of `[first, last]`, in offset order. */
export const range = (storage: StorageService, first: number, last: number): Effect.Effect<ReadonlyArray<StoredRecord>, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT log_offset, dedup_key, payload, bytes, appended_at FROM ${RECORDS} WHERE log_offset >= ? AND log_offset <= ? ORDER BY log_offset`,
      [first, last]
    ),
    (rows) => rows.map(toRecord)
  )

/**
 * Deletes the records of `[first, last]` and takes their bytes off the total; returns how many were
 * deleted (fewer than asked when another call removed some first).
 */
export const removeRange = (storage: StorageService, first: number, last: number): Effect.Effect<number, StorageError> =>
  Effect.gen(function*() {
    const [row] = yield* storage.exec(
      `SELECT COUNT(*) AS count, COALESCE(SUM(bytes), 0) AS bytes FROM ${RECORDS} WHERE log_offset >= ? AND log_offset <= ?`,
      [first, last]
    )
    const count = num(row?.count ?? 0)
    if (count === 0) return 0
    yield* storage.exec(`DELETE FROM ${RECORDS} WHERE log_offset >= ? AND log_offset <= ?`, [first, last])
    yield* storage.exec(`UPDATE ${LOG_SEQ} SET total_bytes = MAX(0, total_bytes - ?) WHERE id = 0`, [num(row?.bytes ?? 0)])
    return count
  })

/**
 * Indexes a segment flushed to cold storage. A segment starting at the same offset was flushed by a
 * trim that did not get to delete its records: the new write covers at least the same records, so
 * its entry replaces the old one.
 */
export const indexSegment = (storage: StorageService, segment: SegmentRow): Effect.Effect<void, StorageError> =>
  Effect.asVoid(storage.exec(
    `INSERT INTO ${SEGMENTS} (first_offset, last_offset, locator, bytes, flushed_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (first_offset) DO UPDATE SET last_offset = excluded.last_offset, locator = excluded.locator,
       bytes = excluded.bytes, flushed_at = excluded.flushed_at`,
    [segment.firstOffset, segment.lastOffset, segment.locator, segment.bytes, segment.flushedAt]
  ))

/** The indexed segment holding `offset`, if any. */
export const segmentHolding = (storage: StorageService, offset: number): Effect.Effect<SegmentRow | undefined, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT * FROM ${SEGMENTS} WHERE first_offset <= ? AND last_offset >= ? ORDER BY first_offset DESC LIMIT 1`,
      [offset, offset]
    ),
    ([row]) => row === undefined ? undefined : toSegment(row)
  )

/** Drops the index entries of the segments that end before `offset`; returns how many. */
export const forgetSegmentsBefore = (storage: StorageService, offset: number): Effect.Effect<number, StorageError> =>
  Effect.map(storage.exec(`DELETE FROM ${SEGMENTS} WHERE last_offset < ? RETURNING first_offset`, [offset]), (rows) => rows.length)

/** The indexed segments, oldest first, at most `limit` (the inspector's view). */
export const segments = (storage: StorageService, limit: number): Effect.Effect<ReadonlyArray<SegmentRow>, StorageError> =>
  Effect.map(storage.exec(`SELECT * FROM ${SEGMENTS} ORDER BY first_offset LIMIT ?`, [limit]), (rows) => rows.map(toSegment))

/** How many segments are indexed, and their bytes. */
export const segmentTotals = (storage: StorageService): Effect.Effect<{ readonly count: number; readonly bytes: number }, StorageError> =>
  Effect.map(
    storage.exec(`SELECT COUNT(*) AS count, COALESCE(SUM(bytes), 0) AS bytes FROM ${SEGMENTS}`),
    ([row]) => ({ count: num(row?.count ?? 0), bytes: num(row?.bytes ?? 0) })
  )

/** A consumer's committed cursor, if any. */
export const cursor = (storage: StorageService, consumer: string): Effect.Effect<number | undefined, StorageError> =>
  Effect.map(
    storage.exec(`SELECT cursor_offset FROM ${CURSORS} WHERE consumer = ?`, [consumer]),
    ([row]) => optionalNum(row?.cursor_offset)
  )

/** Moves a consumer's cursor to `offset` if that is further on (a regression changes nothing). */
export const commit = (storage: StorageService, consumer: string, offset: number, now: number): Effect.Effect<void, StorageError> =>
  Effect.asVoid(storage.exec(
    `INSERT INTO ${CURSORS} (consumer, cursor_offset, committed_at) VALUES (?, ?, ?)
     ON CONFLICT (consumer) DO UPDATE SET cursor_offset = excluded.cursor_offset, committed_at = excluded.committed_at
     WHERE excluded.cursor_offset > ${CURSORS}.cursor_offset`,
    [consumer, offset, now]
  ))

/** Every cursor, by consumer name. */
export const cursors = (storage: StorageService): Effect.Effect<ReadonlyArray<{ readonly consumer: string; readonly offset: number; readonly committedAt: number }>, StorageError> =>
  Effect.map(
    storage.exec(`SELECT consumer, cursor_offset, committed_at FROM ${CURSORS} ORDER BY consumer`),
    (rows) => rows.map((row) => ({ consumer: String(row.consumer), offset: num(row.cursor_offset), committedAt: num(row.committed_at) }))
  )

/** How far the furthest-behind consumer is from the next offset (0 without cursors), with one statement. */
export const backlog = (storage: StorageService): Effect.Effect<number, StorageError> =>
  Effect.map(
    storage.exec(`SELECT s.next_offset, (SELECT MIN(cursor_offset) FROM ${CURSORS}) AS low FROM ${LOG_SEQ} s WHERE s.id = 0`),
    ([row]) => {
      const low = optionalNum(row?.low)
      return low === undefined ? 0 : Math.max(0, num(row?.next_offset ?? 0) - low)
    }
  )

/** How many consumers have a cursor, and how many segments are indexed, each counted up to `cap`. */
export const cappedCounts = (storage: StorageService, cap: number): Effect.Effect<{ readonly consumers: number; readonly segments: number }, StorageError> =>
  Effect.map(
    storage.exec(
      `SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM ${CURSORS} LIMIT ?)) AS consumers,
         (SELECT COUNT(*) FROM (SELECT 1 FROM ${SEGMENTS} LIMIT ?)) AS segments`,
      [cap, cap]
    ),
    ([row]) => ({ consumers: num(row?.consumers ?? 0), segments: num(row?.segments ?? 0) })
  )

/** The first `limit` cursors by consumer name. */
export const firstCursors = (storage: StorageService, limit: number) =>
  Effect.map(
    storage.exec(`SELECT consumer, cursor_offset, committed_at FROM ${CURSORS} ORDER BY consumer LIMIT ?`, [limit]),
    (rows) => rows.map((row) => ({ consumer: String(row.consumer), offset: num(row.cursor_offset), committedAt: num(row.committed_at) }))
  )
