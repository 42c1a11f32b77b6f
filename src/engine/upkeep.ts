/**
 * Keeping the object's wake-up in step with its pending rows: the earliest pending time over every
 * attached table (one statement), reconciled into the physical alarm inside the transaction that
 * changed the rows, and the early timer re-armed after the commit.
 *
 * Settles that only remove pending work owe a reconciliation (the alarm is still at or before
 * everything pending, so nothing can be missed); it runs once the engine has been idle for
 * `UPKEEP_DELAY`, so a stream of short executions pays one reconciliation, not one each.
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as AlarmService from "./AlarmService.js"
import * as Background from "./Background.js"
import type { StorageError } from "../shared/Errors.js"
import * as Fork from "../shared/fork.js"
import type { StorageService } from "./StorageService.js"
import type { Participant, Revisit } from "./participant.js"
import * as TableSql from "./tableSql.js"

/** How long the engine must stay idle before owed upkeep (reconciling after settles) runs. */
export const UPKEEP_DELAY = Duration.millis(100)

export interface Upkeep {
  /** Inside a transaction: reconciles the physical alarm with the earliest pending time. */
  readonly reconcile: Effect.Effect<void, StorageError>
  /** Runs `body` and the reconciliation atomically, then re-arms the early timer. */
  readonly write: <A, E>(body: Effect.Effect<A, E>) => Effect.Effect<A, E | StorageError>
  /**
   * Settles an attempt atomically. A retry moves the record to `retryAt`, so the alarm is
   * reconciled in the same transaction; any other outcome only removes pending work, which owes a
   * reconciliation once idle. A body of `oneStatement` that owes nothing runs without a transaction
   * (a statement is atomic on its own, and a transaction costs a fiber).
   */
  readonly settleWrite: <A, E>(
    body: Effect.Effect<A, E>,
    retryAt: number | undefined,
    oneStatement: boolean
  ) => Effect.Effect<A, E | StorageError>
  /** Inside a transaction, after a record became pending at `at`: reconciles, from memory when the known alarm covers it. */
  readonly cover: (at: number) => Effect.Effect<void, StorageError>
  /**
   * Arms the early timer for the earliest pending time among keys not executing or queued here (so a
   * due running row cannot spin it). With `after`, a time not after it leaves the timer alone.
   */
  readonly refreshTimer: (after?: number) => Effect.Effect<void, StorageError>
  /** After an execution released its key and permit: the key's timer follow-up, then owed upkeep once idle. */
  readonly afterRelease: (revisit: Revisit) => Effect.Effect<void>
  /** Counts running passes (a pass's own end reconciles, so releases inside it owe nothing). */
  readonly passes: { running: number }
  /** Runs `effect`, reporting (not failing with) its failure. */
  readonly reported: (effect: Effect.Effect<void, StorageError>) => Effect.Effect<void>
}

/** What upkeep reads of the engine's timer support: whose timers count, and their earliest as a statement. */
export interface TimerOwners {
  /** The timer owners of the attached tables: their own timers, and the lease timers of those that lease. */
  readonly owners: (participants: ReadonlyArray<Participant<any>>) => ReadonlyArray<string>
  /** The earliest timer of `owners`, as a statement (`SELECT MIN(at) AS at …`, one `?` per owner). */
  readonly earliestOf: (owners: ReadonlyArray<string>) => string
}

export const make = (options: {
  readonly storage: StorageService
  readonly alarms: AlarmService.AlarmService
  readonly background: Background.Background
  /** The engine's: it ends the wait for idleness with the object. */
  readonly scope: Scope.Scope
  /** The engine's attached tables (tables only attach, so their count tells whether the SQL is current). */
  readonly participants: ReadonlyArray<Participant<any>>
  /** The engine's timer support (`engine.ts` `TimerSupport`) once it has any: the first table with timers brings it. */
  readonly timers: () => TimerOwners | undefined
}): Upkeep => {
  const { alarms, background, participants, storage } = options
  // One statement over every participant's table (and the timers of those with timers) for each upkeep
  // read; rebuilt when one attaches.
  let sql: {
    readonly tables: number
    readonly earliest: string
    readonly owners: ReadonlyArray<string>
    readonly pending: string
  } | undefined
  const statements = () => {
    if (sql?.tables !== participants.length) {
      const timers = options.timers()
      const owners = timers === undefined ? [] : timers.owners(participants)
      const records = TableSql.earliestPendingOf(participants.map((p) => ({ table: p.table.table, shape: TableSql.shapeOf(p.table) })))
      sql = {
        tables: participants.length,
        earliest: timers === undefined || owners.length === 0
          ? records
          : `SELECT MIN(at) AS at FROM (${records} UNION ALL ${timers.earliestOf(owners)})`,
        owners,
        // The earliest timer rides along as a row of no table (`p` -1): one statement either way.
        pending: TableSql.pendingByTimeOf(
          participants.map((p) => ({ table: p.table.table, key: p.table.keyColumn, shape: TableSql.shapeOf(p.table) }))
        ) + (timers === undefined || owners.length === 0 ? "" : ` UNION ALL SELECT -1 AS p, NULL AS key, at FROM (${timers.earliestOf(owners)})`)
      }
    }
    return sql
  }

  let owed = false
  const passes = { running: 0 }
  const idle = () => {
    if (passes.running > 0) return false
    for (const participant of participants) {
      if (participant.active.size > 0 || participant.queued.size > 0) return false
    }
    return true
  }

  const reported = (effect: Effect.Effect<void, StorageError>) =>
    Effect.catchAllCause(effect, (cause) =>
      background.report("durability.scheduler.refresh_failed", { error: Background.serializeError(cause) }))

  const reconcile: Effect.Effect<void, StorageError> = Effect.suspend(() => {
    owed = false
    if (participants.length === 0) return alarms.reconcile(null)
    const { earliest, owners } = statements()
    return Effect.flatMap(storage.exec(earliest, owners), ([row]) => alarms.reconcile(typeof row?.at === "number" ? row.at : null))
  })

  const cover = (at: number) => Effect.flatMap(alarms.covers(at), (covered) => covered ? Effect.void : reconcile)

  const refreshTimer = (after?: number): Effect.Effect<void, StorageError> =>
    Effect.suspend(() => {
      if (participants.length === 0) return alarms.armTimer(null)
      const limits = participants.map((p) => p.active.size + p.queued.size + 1)
      const { owners, pending } = statements()
      return Effect.flatMap(storage.exec(pending, [...limits, ...owners]), (rows) => {
        let next: number | null = null
        for (const row of rows) {
          if (typeof row.at !== "number") continue
          const participant = participants[Number(row.p)]
          const key = String(row.key)
          // A timer (no table) has no key lock: the earliest one counts whatever runs.
          if (participant !== undefined && (participant.active.has(key) || participant.queued.has(key))) continue
          if (next === null || row.at < next) next = row.at
        }
        if (after !== undefined && next !== null && next <= after) return Effect.void
        return alarms.armTimer(next)
      })
    })

  const write = <A, E>(body: Effect.Effect<A, E>): Effect.Effect<A, E | StorageError> =>
    Effect.tap(storage.transaction(Effect.zipLeft(body, reconcile)), () => storage.afterCommit(reported(refreshTimer())))

  const owe = Effect.sync(() => {
    owed = true
  })
  const settleWrite = <A, E>(body: Effect.Effect<A, E>, retryAt: number | undefined, oneStatement: boolean) => {
    if (retryAt !== undefined) return storage.transaction(Effect.zipLeft(body, reconcile))
    const owing = Effect.zipLeft(body, owe)
    return oneStatement ? owing : storage.transaction(owing)
  }

  // Once idle for a moment; a later reconciliation (a write, a pass) pays the debt first.
  const later = Effect.zipRight(
    Effect.sleep(UPKEEP_DELAY),
    Effect.suspend(() => owed && idle() ? reported(write(Effect.void)) : Effect.void)
  )

  // One wait for idleness at a time (a fiber, not a FiberHandle: this flag is all of it that is used).
  let waiting = false
  const waitForIdle = Effect.suspend(() => {
    if (waiting) return Effect.void
    waiting = true
    return Effect.asVoid(Fork.detached(Effect.ensuring(later, Effect.sync(() => {
      waiting = false
    })), options.scope))
  })

  const afterRelease = (revisit: Revisit): Effect.Effect<void> =>
    Effect.zipRight(
      revisit === undefined
        ? Effect.void
        : reported(revisit === "refresh" ? refreshTimer() : alarms.coverTimer(revisit)),
      Effect.suspend(() =>
        owed && idle() ? waitForIdle : Effect.void
      )
    )

  return {
    reconcile,
    write,
    settleWrite,
    cover,
    refreshTimer,
    afterRelease,
    passes,
    reported
  }
}
