/**
 * The engine's extension point: a capability (operations, named alarms, your own table) takes part
 * in the object's scheduler by attaching a `DurableTable`: its table, with the standard attempt
 * columns, and how to run and settle one record. `Scheduler.attach` returns a `TableHandle`, the
 * capability's only way to write pending work (so the physical alarm is reconciled in the same
 * transaction) and to start it.
 *
 * The standard columns: `<key> TEXT PRIMARY KEY, generation_id TEXT, status TEXT ('pending' | …),
 * attempt INTEGER, next_attempt_at INTEGER, last_error TEXT, last_error_name TEXT`, indexed on
 * `(status, next_attempt_at)`.
 *
 * A table is records with attempts (`policy`, `run`, `complete`, `settled`, `describe`). What a
 * capability needs beyond that is a named concept of its own, never a change of what a claim means:
 * `timers` (durable timers on the same alarm), `leases` (records claimed for work done elsewhere),
 * `admission` (`Run | Defer(at) | Lease` before a claim), `holds` (pending records waiting for
 * something other than their time) and `dispatch` (start order and per-group concurrency).
 */
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"
import type * as Runtime from "effect/Runtime"
import type * as Option from "effect/Option"
import type { StorageError } from "../shared/Errors.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"
import type * as Lifecycle from "./Lifecycle.js"
import type * as PermitSemaphore from "./PermitSemaphore.js"
import type * as RetryPolicy from "./RetryPolicy.js"
import type { Row, SqlValue } from "./StorageService.js"

/** One attempt of one record, as its handler sees it. */
export interface Execution {
  /** The record's key in its table. */
  readonly key: string
  /**
   * The record's generation: fences this attempt's settle against a record registered again under the same
   * key.
   */
  readonly generation: string
  /** 1-based; already durably counted when the handler runs. */
  readonly attempt: number
  /** The record as stored when the attempt was claimed. */
  readonly row: Row
  /** Aborted on timeout, purge, cancel or shutdown. Cooperative: the handler decides to stop. */
  readonly signal: AbortSignal
  /** The platform's alarm info when a physical alarm started this attempt. */
  readonly platform: AlarmInvocationInfo | undefined
  /** The engine's runtime (its clock and services): what a plain handler's promises run Effects on. */
  readonly runtime: Runtime.Runtime<never>
}

/** One success of many to persist at once (`DurableTable.completeMany`). */
export interface Completion<A> {
  /** The attempt that succeeded. */
  readonly execution: Execution
  /** What it returned, as `complete` takes it. */
  readonly value: A
  /** The clock when its attempt ended. */
  readonly settledAt: number
}

/** How a table's record is retried and timed out: the retry policy plus the attempt's time limit. */
export interface AttemptPolicy extends RetryPolicy.RetryPolicy {
  /** How long one attempt may run before its signal is aborted and it counts as failed (milliseconds). */
  readonly attemptTimeoutMs: number
  /** What the signal is aborted with, and the failure recorded, when an attempt times out. */
  readonly timeoutError: (timeoutMs: number) => unknown
  /**
   * Failures that end the record whatever its remaining attempts (besides `NonRetryableError` and
   * exhausted attempts): e.g. a named alarm's timeout, or a result that cannot be stored.
   */
  readonly isTerminal?: ((error: unknown) => boolean) | undefined
}

/** Each record's `maxAttempts` by one of its columns (see `DurableTable.attemptLimits`). */
export interface AttemptLimits {
  /** The column the policy depends on (e.g. the operation name). */
  readonly column: string
  /** `maxAttempts` by the column's value. */
  readonly byValue: ReadonlyMap<string, number>
  /** For values not in `byValue`. */
  readonly otherwise: number
}

/**
 * A capability's participation: its table and how to run a record. `A` is what `run` succeeds with
 * and `complete` stores.
 */
export interface DurableTable<A = unknown> {
  /** Unique per scheduler, e.g. "operations". */
  readonly kind: string
  /** The SQL table's name. */
  readonly table: string
  /** The table's key column (`TEXT PRIMARY KEY`). */
  readonly keyColumn: string
  /** Rows started per alarm pass; the rest follow from the re-armed timer or alarm. Default 100. */
  readonly dueBatchSize?: number | undefined
  /** The record's retry and timeout policy, decided from its row. */
  readonly policy: (row: Row) => AttemptPolicy
  /**
   * Every record's `maxAttempts` as a function of one column (what `policy` decides by), so the
   * engine can claim a record in one statement instead of reading it first. Optional.
   */
  readonly attemptLimits?: AttemptLimits | undefined
  /**
   * The handler. Its failures are decided by the policy; its success goes to `complete`. Called
   * synchronously: an `Exit` returned (a plain handler that already ended) settles with no fiber.
   */
  readonly run: (execution: Execution) => Effect.Effect<A, unknown>
  /**
   * Persists a success, conditionally on (key, generation, pending, attempt). Runs synchronously
   * inside the settle transaction; returns whether the row matched. `settledAt` is the clock as the
   * attempt ended. A failure other than `StorageError` is decided by the policy like a handler's
   * failure (typically terminal).
   */
  readonly complete: (execution: Execution, value: A, settledAt: number) => Effect.Effect<boolean, unknown>
  /**
   * `complete` writes with exactly one statement, atomic on its own: the engine then runs it without
   * a transaction around it (a transaction runs its body in a fiber of its own; see bench/RESULTS.md).
   */
  readonly completesInOneStatement?: boolean | undefined
  /**
   * Persists many successes (at most `TableSql.GROUP_SIZE`) as `complete` does each (the same fence per
   * record, no settled work), in one statement (`TableSql.completedFrom` builds it); returns the keys
   * that matched. Its failure writes nothing: the engine then settles each record on its own. Without
   * it, records settle one by one.
   */
  readonly completeMany?: ((completed: ReadonlyArray<Completion<A>>) => Effect.Effect<ReadonlyArray<string>, unknown>) | undefined
  /** How messages name the record, e.g. `operation "resize" (id "a")`. */
  readonly describe: (row: Row) => string
  /** The entity fields of lifecycle events about `row`. */
  readonly entity: (row: Row) => Lifecycle.LifecycleEntity
  /** Told the lifecycle events of the table's records. */
  readonly onEvent?: Lifecycle.LifecycleHook | undefined
  /** How due records start when time order alone is not enough (job queues). */
  readonly dispatch?: Dispatch | undefined
  /** What holds pending records beyond their time (see `Holds`). */
  readonly holds?: Holds | undefined
  /** What a due record's claim may decide first (see `Admission`). */
  readonly admission?: Admissions | undefined
  /**
   * Work that must commit with a record's end (a parent released, a retention bound kept): decided
   * from the row as claimed, before the settle runs. Returns `undefined` when there is none (the
   * settle then keeps its one-statement path); otherwise the effect runs inside the settle
   * transaction, after the settle matched, and returns the records it made pending (it may set the
   * table's timers with `timers`).
   */
  readonly settled?: ((row: Row, settlement: Settlement, timers: TimerHandle) => SettledWork | undefined) | undefined
  /** The table's durable timers (see `Timers`): what runs when one of them comes due. */
  readonly timers?: Timers | undefined
  /** The table's records may be leased for work done elsewhere (see `Leases`, `TableHandle.lease`). */
  readonly leases?: Leases | undefined
}

/**
 * Leasing: a record claimed for work done elsewhere (an external worker). `TableHandle.lease` claims it
 * as an execution is claimed (its attempt counted, the attempt number its fencing token) and sets the
 * lease's timer; the worker's outcome is settled through `TableHandle.settle`. When the timer comes
 * due first, `expired` decides from the record as stored (still under that claim) what becomes of it.
 */
export interface Leases {
  /** Decides what becomes of a leased record when its lease's timer comes due (see `LeaseExpiry`). */
  readonly expired: (row: Row, now: number) => LeaseExpiry
}

/**
 * What becomes of a leased record at its lease's time. Each `write` runs in the transaction that
 * takes the lease's timer (for `Failed` and `Exhausted`: the settle's), so it happens once for good.
 * - `Extended`: the lease was extended meanwhile: its timer moves to `at`;
 * - `Released`: `write` put the record back to waiting (its attempt stays counted), returning the
 *   records it made pending;
 * - `Failed`: it fails for good with `error`, settled as any failed attempt (settled work, events);
 * - `Exhausted`: its attempts are spent: it fails as an exhausted record.
 */
export type LeaseExpiry = Data.TaggedEnum<{
  Extended: { readonly at: number }
  Released: { readonly write: Effect.Effect<ReadonlyArray<PendingRecord>, StorageError> }
  Failed: { readonly error: unknown; readonly write: Effect.Effect<void, StorageError> }
  Exhausted: { readonly write: Effect.Effect<void, StorageError> }
}>

/** Builds and matches `LeaseExpiry` values. */
export const LeaseExpiry = Data.taggedEnum<LeaseExpiry>()

/** One of a table's durable timers, as stored. */
export interface Timer {
  /** The timer's key within its table. */
  readonly key: string
  /** When it comes due (epoch milliseconds). */
  readonly at: number
  /** What `set` stored with it (null: nothing). */
  readonly data: string | null
}

/**
 * What a table's timer does when it comes due (a lease's end, a retention bound, an outbox to
 * flush): `fire` runs in the transaction that took the timer (so it is gone unless `fire` sets it
 * again), at the pass's time `now`. Its result is a settled work's: the records of this table it
 * made pending (covered by the alarm before the commit, started after it) and what to run after.
 */
export interface Timers {
  /**
   * Runs the due timer in the transaction that took it; returns the records it made pending and what to run
   * after.
   */
  readonly fire: (timer: Timer, now: number, timers: TimerHandle) => SettledWork
}

/**
 * What a table decides about a due record just before its claim, in the claim's transaction:
 * - `Run`: claim it now (the decision may have written to it: the claim returns the row as claimed);
 * - `Defer`: not before `at` (a rate limit's next token, a schedule's next slot): the engine moves the
 *   record there and its attempt is not counted;
 * - `Lease`: claim it for work done elsewhere (a Cloudflare Queue's consumer) until `until`, as
 *   `TableHandle.lease` does: nothing runs here; `leased` writes the table's lease state (and what
 *   hands the record over) with the claim. Past its attempts, it is exhausted as any claim would be.
 */
export type Admission = Data.TaggedEnum<{
  Run: {}
  Defer: {
    readonly at: number
    /** Called once the deferral committed (e.g. to count a rate limit's refusal; a rollback calls nothing). */
    readonly committed?: (() => void) | undefined
  }
  Lease: {
    readonly until: number
    readonly state?: LeaseState | undefined
    /** Writes the table's lease state with the claim, in the claim's transaction. */
    readonly leased: (row: Row) => Effect.Effect<void, StorageError>
  }
}>

/** Builds and matches `Admission` values. */
export const Admission = Data.taggedEnum<Admission>()

/**
 * Work run in a settle transaction: the records it made pending get the alarm, the timer and an
 * eager start; `after` runs once the settle committed (e.g. lifecycle events of the records it changed).
 */
export type SettledWork = Effect.Effect<
  { readonly pending: ReadonlyArray<PendingRecord>; readonly after?: Effect.Effect<void> | undefined },
  StorageError
>

/** How a record ended for good. */
export type Settlement =
  | { readonly outcome: "completed"; readonly at: number }
  | { readonly outcome: "failed"; readonly at: number; readonly error: { readonly name: string; readonly message: string } }

/** A group's limit inside the shared permits; its waiters are served by rank (smaller first), then arrival. */
export interface Slot {
  /** How many of the group's records may run at once. */
  readonly capacity: number
  /** Takes a permit if one is free now; never waits. */
  readonly tryAcquire: Effect.Effect<Option.Option<PermitSemaphore.Permit>>
  /** Waits for a permit as `key`, ranked by `rank` among the waiters. */
  readonly acquire: (rank: ReadonlyArray<number>, key: string) => Effect.Effect<PermitSemaphore.Permit>
  /** Permits free now. */
  readonly available: Effect.Effect<number>
}

/** How due records start when time order alone is not enough (job queues: priorities and per-queue concurrency). */
export interface Dispatch {
  /** The ORDER BY of due scans (default `next_attempt_at`), e.g. `priority DESC, seq`. */
  readonly order?: string | undefined
  /**
   * The start order as numbers (smaller first), read by due scans (`columns`, a select list) so
   * records waiting for a full slot start in that order, whenever each came due.
   */
  readonly rank?: {
    /** The select list the due scans read for `of`. */
    readonly columns: string
    /** The numbers, from a row read with `columns`. */
    readonly of: (row: Row) => ReadonlyArray<number>
  } | undefined
  /**
   * The record's own limit inside the shared permits (e.g. its queue's concurrency), by key: taken
   * before a shared permit, so a full group never holds a permit another group could use.
   */
  readonly slotOf?: ((key: string) => Slot | undefined) | undefined
  /** A column every claim sets to the claim's time (e.g. `started_at`). */
  readonly startedColumn?: string | undefined
}

/**
 * Pending records that wait for something other than their time (a paused queue, a worker's lease, a
 * schedule between runs): they neither wake the object nor are claimed until what holds them ends,
 * and what ends it makes them pending again through the handle.
 */
export interface Holds {
  /** The SQL condition (no bindings) a pending record must meet to count as due and to be claimed. */
  readonly where: string
  /** The same in memory, by key, where it can be told (e.g. its queue is paused): no eager start and no timer. */
  readonly holds?: ((key: string) => boolean) | undefined
}

/** What a table writes to a record with its lease's claim, in the same statement: a SET list and its bindings. */
export interface LeaseState {
  /** The SQL SET list, e.g. `worker = ?, token = ?`. */
  readonly columns: string
  /** The values of its placeholders, in order. */
  readonly bindings: ReadonlyArray<SqlValue>
}

/** A table's admissions (see `Admission`). */
export interface Admissions {
  /**
   * The record's admission, decided from the row as read before its claim (e.g. a token bucket).
   * `undefined`: it runs. The effect runs in the claim's transaction.
   */
  readonly of: (row: Row) => ((now: number) => Effect.Effect<Admission, StorageError>) | undefined
  /**
   * Whether the record under `key` may have an admission: when not, it is claimed in one statement
   * without being read first. Default: every record may.
   */
  readonly mayApply?: ((key: string) => boolean) | undefined
}

/** A record a write made pending. */
export interface PendingRecord {
  /** The record's key. */
  readonly key: string
  /** When it comes due (epoch milliseconds). */
  readonly at: number
  /** Start it now (eagerly) if a permit is free. */
  readonly start?: boolean | undefined
}

/** What an attached capability can do with the engine. */
export interface TableHandle {
  /** Runs `body` and the alarm reconciliation atomically; re-arms the early timer after commit. */
  readonly write: <B, E>(body: Effect.Effect<B, E>) => Effect.Effect<B, E | StorageError>
  /**
   * For a write whose only effect on pending work is making records pending (an insert, or a
   * reschedule), as `pending` reads them from the body's result: the alarm and the early timer are
   * made to cover them from memory when they can (no reconciliation read), and those with `start`
   * start at once while permits are free.
   */
  readonly writePending: <B, E>(
    body: Effect.Effect<B, E>,
    pending: (result: B) => PendingRecord | ReadonlyArray<PendingRecord> | undefined,
    options?: {
      /**
       * The body writes with one statement, making at most one record pending at this time: when the
       * known alarm already covers it, the statement runs without a transaction (one costs a fiber).
       */
      readonly oneStatementAt?: number | undefined
      /**
       * The body may also have removed pending work (a cancel, a delete): the alarm is reconciled
       * from storage in the transaction, not only moved earlier.
       */
      readonly reconcile?: boolean | undefined
    }
  ) => Effect.Effect<B, E | StorageError>
  /**
   * Starts the record now if a permit is free right now; never waits. Returns whether it started.
   * With `dueBy`, a record whose next attempt was moved past that time meanwhile is left to its schedule.
   */
  readonly tryStart: (key: string, options?: { readonly dueBy?: number | undefined }) => Effect.Effect<boolean>
  /**
   * Aborts running executions whose key matches, best effort (purge, cancel). With `release`, their
   * keys stop counting as executing here at once: a new record under the same key can start while
   * the aborted handler winds down (its settle is fenced by generation). Without it, a new record
   * waits for the old handler to end (one handler per key at a time).
   */
  readonly abort: (
    matches: (key: string) => boolean,
    reason: unknown,
    options?: { readonly release?: boolean | undefined }
  ) => Effect.Effect<number>
  /**
   * Emits a lifecycle event to this table's hook, stamped `at` (a clock reading the caller has) or now.
   * `settles: false` says the event cannot settle a record: with no hook of the user's it is not built.
   */
  readonly emit: (build: (timestamp: number) => Lifecycle.LifecycleEvent, at?: number, settles?: boolean) => Effect.Effect<void>
  /**
   * Settles an attempt that ran outside this isolate's executions (a job leased to an external worker),
   * as the engine settles its own: the policy decides a failure, the settled work and the events
   * follow. All of it is one transaction that first runs `guard` (the lease's fencing check): when the
   * guard fails, nothing is written and its error is returned. `row` is the record as claimed, `value`
   * what `complete` stores.
   */
  readonly settle: <E>(
    row: Row,
    outcome:
      | { readonly _tag: "Success"; readonly value: unknown }
      | { readonly _tag: "Failure"; readonly error: unknown; readonly terminal?: boolean | undefined },
    guard: Effect.Effect<void, E>
  ) => Effect.Effect<void, E | StorageError>
  /** Whether the record under `key` is executing in this isolate now (what "active" means after an eviction: nothing). */
  readonly executing: (key: string) => boolean
  /** The keys executing in this isolate now. */
  readonly executingKeys: () => Iterable<string>
  /** This table's durable timers (the table must have `timers`). */
  readonly timers: TimerHandle
  /**
   * Inside a transaction: leases the record under `key` until `until` (the table must have `leases`):
   * claims it if it is pending, due by `now` and within its attempts (the one claim every record
   * takes) with the table's own lease `state` (a worker id, a token of its own) in the same statement,
   * and sets the lease's timer. Returns the row as claimed, or `undefined` when it could not be.
   */
  readonly lease: (
    key: string,
    until: number,
    now: number,
    state?: LeaseState | undefined
  ) => Effect.Effect<Row | undefined, StorageError>
  /**
   * Inside a transaction: `row` (as stored, pending) is leased until `until` under its current claim,
   * but has no lease timer (a lease stored before the engine kept them): sets it.
   */
  readonly resumeLease: (row: Row, until: number) => Effect.Effect<void, StorageError>
}

/**
 * A table's durable timers. `set` and `cancel` belong inside a transaction that writes the table
 * (`write`, `writePending`, settled work, a timer's `fire`): the alarm is made to cover a timer
 * there, exactly as a pending record.
 */
export interface TimerHandle {
  /** Sets (or moves) the timer `key` to `at`, with `data`. */
  readonly set: (key: string, at: number, data?: string | undefined) => Effect.Effect<void, StorageError>
  /** Makes the timer `key` fire by `at`: set there, or left where it is when that is earlier (no data). */
  readonly setBy: (key: string, at: number) => Effect.Effect<void, StorageError>
  /** Deletes the timer `key`; returns whether there was one. */
  readonly cancel: (key: string) => Effect.Effect<boolean, StorageError>
  /** Reads the timer `key`; undefined when there is none. */
  readonly get: (key: string) => Effect.Effect<Timer | undefined, StorageError>
  /** How many timers the table has. */
  readonly count: Effect.Effect<number, StorageError>
}
