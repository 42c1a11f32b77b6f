/**
 * The engine's state for one attached table: its SQL, which keys are executing in this isolate
 * (the per-key lock) and which a running pass took and has not started yet.
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as FiberId from "effect/FiberId"
import type { StorageError } from "../shared/Errors.js"
import type * as PermitSemaphore from "./PermitSemaphore.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"
import type { AttemptPolicy, DurableTable, Execution, PendingRecord } from "./DurableTable.js"
import type { SqlValue } from "./StorageService.js"
import * as TableSql from "./tableSql.js"

/**
 * What the early timer owes a key once its execution releases it (the timer skips executing
 * keys): a retry's time, a full recomputation (the key was written while it ran), or nothing.
 */
export type Revisit = number | "refresh" | undefined

export interface ActiveExecution {
  /** Done once the outcome is durable (or the execution failed); passes attach here instead of re-running. */
  readonly persisted: Deferred.Deferred<void, StorageError>
  abort: (reason: unknown) => void
  revisit: Revisit
  /** Started inline, its handler suspended: the fiber it moved to releases it. */
  moved?: boolean
  /** Its success waits to settle with its group's, which releases it. */
  grouped?: boolean
}

export interface Start {
  /** Where the record stands among those waiting for its group's slot (`Dispatch.rank`). */
  readonly rank?: ReadonlyArray<number> | undefined
  /** Held from the claim until the handler has really ended. */
  readonly permit: PermitSemaphore.Permit
  /** The record's group slot (`Dispatch.slotOf`), held as long as the permit. */
  readonly slot?: PermitSemaphore.Permit | undefined
  readonly platform?: AlarmInvocationInfo | undefined
  /** A pass's time: the row must still be due then (an attempt may have settled since the due scan). */
  readonly dueBy?: number | undefined
  /**
   * Runs in the fiber that starts it (the participant's drain, or a pass): a handler that ends at once
   * settles there too (no fiber, no scheduler turn); one that suspends goes on in a fiber of its own.
   */
  readonly inline?: boolean | undefined
  /** Inline for a pass, which awaits the outcome and reports its failure. */
  readonly awaited?: boolean | undefined
  /** Claimed with others: a success that ended at once joins these, settled with them (`Attempt.settleGroup`). */
  readonly group?: Array<Grouped> | undefined
}

/** A success waiting to settle with the others of its group, its key and permit held until then. */
export interface Grouped {
  readonly key: string
  readonly entry: ActiveExecution
  readonly start: Start
  readonly execution: Execution
  readonly policy: AttemptPolicy
  readonly value: unknown
  readonly startedAt: number
  readonly endedAt: number
}

/** An execution that holds its key and permit, waiting for the participant's drain. */
export interface Ready {
  readonly key: string
  readonly entry: ActiveExecution
  readonly start: Start
}

export interface Participant<A = unknown> {
  readonly table: DurableTable<A>
  readonly sql: TableSql.TableSql
  readonly dueBatchSize: number
  /** One entry per executing key: the per-key lock of this isolate. */
  readonly active: Map<string, ActiveExecution>
  /** Keys a running pass took from its due scan and has not started yet: other passes and the timer leave them. */
  readonly queued: Set<string>
  /** Executions that took their key and permit, waiting for the participant's drain (`Attempt.startPending`). */
  readonly ready: Array<Ready>
  /** Records refused a permit while a drain ran: it tries them again once its ready ones ended. */
  readonly later: Array<PendingRecord>
  /** Whether a drain runs (or is about to). */
  draining: boolean
  /** Claims a due record in one statement (bindings: key, due-by time, then `bindings`), when the limits fit in SQL. */
  readonly claimDue: { readonly sql: string; readonly limit: string; readonly bindings: ReadonlyArray<SqlValue> } | undefined
  /** The attempt limit of a lease's claim (`TableSql.lease`) as SQL, and its bindings, when the limits fit in SQL. */
  readonly claimLease: { readonly limit: string; readonly bindings: ReadonlyArray<SqlValue> } | undefined
}

/** Bound parameters a claim may spend on per-value limits (SQLite caps a statement's bindings). */
const MAX_LIMIT_BINDINGS = 64

export const make = <A>(table: DurableTable<A>, defaultBatchSize: number): Participant<A> => {
  const sql = TableSql.make(table.table, table.keyColumn, TableSql.shapeOf(table))
  let claimDue: Participant["claimDue"]
  let claimLease: Participant["claimLease"]
  const limits = table.attemptLimits
  if (limits !== undefined && TableSql.isIdentifier(limits.column)) {
    const groups = new Map<number, Array<string>>()
    for (const [value, max] of limits.byValue) {
      if (max !== limits.otherwise) groups.set(max, [...(groups.get(max) ?? []), value])
    }
    const bindings: Array<SqlValue> = []
    let limit = "?"
    if (groups.size > 0) {
      limit = "CASE"
      for (const [max, values] of groups) {
        limit += ` WHEN ${limits.column} IN (${values.map(() => "?").join(", ")}) THEN ?`
        bindings.push(...values, max)
      }
      limit += " ELSE ? END"
    }
    bindings.push(limits.otherwise)
    if (bindings.length <= MAX_LIMIT_BINDINGS) {
      claimDue = { sql: sql.claimDue(limit), limit, bindings }
      claimLease = { limit, bindings }
    }
  }
  return {
    table,
    sql,
    dueBatchSize: table.dueBatchSize ?? defaultBatchSize,
    active: new Map(),
    queued: new Set(),
    ready: [],
    later: [],
    draining: false,
    claimDue,
    claimLease
  }
}

/** Registers the key's execution synchronously, before any storage read, so two starters cannot both miss it. */
export const begin = (participant: Participant<any>, key: string): ActiveExecution => {
  const entry: ActiveExecution = {
    persisted: Deferred.unsafeMake(FiberId.none),
    abort: () => undefined,
    revisit: undefined
  }
  participant.active.set(key, entry)
  return entry
}
