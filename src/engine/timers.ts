/**
 * Durable timers: one engine-owned table of `(owner, key) → at, data`, covered by the same physical
 * alarm as every pending record. A capability attaches its timers with its table (`DurableTable.timers`);
 * when one comes due, a pass deletes it and runs the owner's `fire` in the same transaction, so a timer
 * fires once for good (a crash before the commit leaves it due, a crash after leaves its effect).
 *
 * Only the timers of attached owners count: one left by a capability this object no longer attaches
 * would otherwise keep the alarm firing for nothing.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type * as Migrations from "./Migrations.js"
import type { Row, StorageService } from "./StorageService.js"

export const TABLE = "durability_timers"

/** The migrations' capability name of the timers table: the engine owns it. */
export const CAPABILITY = "timers"

export const MIGRATIONS: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_timers_0001_create",
    up: `CREATE TABLE ${TABLE} (
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        at INTEGER NOT NULL,
        data TEXT,
        PRIMARY KEY (owner, key)
      ) WITHOUT ROWID;
      CREATE INDEX ${TABLE}_at_idx ON ${TABLE} (at, owner)`,
    down: `DROP TABLE IF EXISTS ${TABLE};`,
    presentWhen: `SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '${TABLE}'`
  }
]

const LEASE_SUFFIX = ".lease"

/** The owner of a table's lease timers (see `leases.ts`): the engine's, not the table's own. */
export const leaseOwner = (kind: string): string => `${kind}${LEASE_SUFFIX}`

/** The table kind of a lease timer's owner, or `undefined` when the owner is a table's own timers. */
export const leaseKindOf = (owner: string): string | undefined =>
  owner.endsWith(LEASE_SUFFIX) ? owner.slice(0, -LEASE_SUFFIX.length) : undefined

/** One due timer as stored. */
export interface Stored {
  readonly owner: string
  readonly key: string
  readonly at: number
  readonly data: string | null
}

const ownersIn = (owners: ReadonlyArray<string>): string => `owner IN (${owners.map(() => "?").join(", ")})`

/**
 * Time order first: left to itself, SQLite reads `owner IN (…)` through the primary key and visits every
 * timer of those owners (100 000 sleeping workflows: milliseconds per pass); the time index stops at the first.
 */
const BY_TIME = `${TABLE} INDEXED BY ${TABLE}_at_idx`

/** The earliest timer of the attached owners, as a select list item of the earliest-pending statement. */
export const earliestOf = (owners: ReadonlyArray<string>): string =>
  `SELECT MIN(at) AS at FROM ${BY_TIME} WHERE ${ownersIn(owners)}`

export const set = (storage: StorageService, owner: string, key: string, at: number, data: string | null) =>
  storage.exec(
    `INSERT INTO ${TABLE} (owner, key, at, data) VALUES (?, ?, ?, ?)
     ON CONFLICT (owner, key) DO UPDATE SET at = excluded.at, data = excluded.data`,
    [owner, key, at, data]
  )

/** Makes the timer fire by `at`: set there, or kept where it is when that is earlier (one statement). */
export const setBy = (storage: StorageService, owner: string, key: string, at: number) =>
  storage.exec(
    `INSERT INTO ${TABLE} (owner, key, at, data) VALUES (?, ?, ?, NULL)
     ON CONFLICT (owner, key) DO UPDATE SET at = MIN(at, excluded.at)`,
    [owner, key, at]
  )

/** Sets the timer unless there is one already; returns whether it was set. */
export const setIfAbsent = (storage: StorageService, owner: string, key: string, at: number, data: string | null) =>
  Effect.map(
    storage.exec(`INSERT INTO ${TABLE} (owner, key, at, data) VALUES (?, ?, ?, ?) ON CONFLICT (owner, key) DO NOTHING RETURNING key`, [
      owner,
      key,
      at,
      data
    ]),
    (rows) => rows.length > 0
  )

/** Deletes the timer; returns whether there was one. */
export const cancel = (storage: StorageService, owner: string, key: string): Effect.Effect<boolean, StorageError> =>
  Effect.map(storage.exec(`DELETE FROM ${TABLE} WHERE owner = ? AND key = ? RETURNING key`, [owner, key]), (rows) => rows.length > 0)

export const get = (storage: StorageService, owner: string, key: string): Effect.Effect<Stored | undefined, StorageError> =>
  Effect.map(storage.exec(`SELECT owner, key, at, data FROM ${TABLE} WHERE owner = ? AND key = ?`, [owner, key]), ([row]) =>
    row === undefined ? undefined : stored(row))

const stored = (row: Row): Stored => ({
  owner: String(row.owner),
  key: String(row.key),
  at: Number(row.at),
  data: row.data === null || row.data === undefined ? null : String(row.data)
})

/** The attached owners' timers due by `now`, earliest first. */
export const due = (
  storage: StorageService,
  owners: ReadonlyArray<string>,
  now: number,
  limit: number
): Effect.Effect<ReadonlyArray<Stored>, StorageError> =>
  Effect.map(
    storage.exec(`SELECT owner, key, at, data FROM ${BY_TIME} WHERE at <= ? AND ${ownersIn(owners)} ORDER BY at LIMIT ?`, [
      now,
      ...owners,
      limit
    ]),
    (rows) => rows.map(stored)
  )

/**
 * Takes the timer as it was read (same time): whether this fire owns it. Another pass, or a `set`
 * that moved it meanwhile, leaves nothing to take.
 */
export const take = (storage: StorageService, timer: Stored): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    storage.exec(`DELETE FROM ${TABLE} WHERE owner = ? AND key = ? AND at = ? RETURNING key`, [timer.owner, timer.key, timer.at]),
    (rows) => rows.length > 0
  )
