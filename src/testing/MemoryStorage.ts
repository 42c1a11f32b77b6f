/**
 * An in-memory stand-in for a SQLite-backed Durable Object's `ctx.storage`:
 * a real SQLite engine (sql.js, WebAssembly) plus the one alarm, with the
 * behaviours of workerd that the library relies on: synchronous `exec`,
 * `transactionSync` that rolls back SQL and alarm writes together, and SQL
 * `BEGIN`/`SAVEPOINT` statements rejected.
 *
 * The object outlives any runtime built on it, which is how tests simulate
 * eviction: drop the runtime, keep the `MemoryStorage`, build a new runtime.
 */
import { Effect } from "effect"
import initSqlJs from "sql.js"
import type { Database, SqlJsStatic } from "sql.js"
import type { DurableObjectStorageLike, SqlCursorLike, SqlValue } from "../internal/platform.js"

let engine: Promise<SqlJsStatic> | undefined

const loadEngine = (): Promise<SqlJsStatic> => (engine ??= initSqlJs())

const TRANSACTION_SQL = /^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b/i

const toSqlJs = (value: unknown): number | string | Uint8Array | null => {
  if (value instanceof ArrayBuffer) return new Uint8Array(value)
  if (typeof value === "boolean") return value ? 1 : 0
  if (value === undefined) throw new TypeError("undefined cannot be bound to a SQL parameter")
  return value as number | string | null
}

const fromSqlJs = (value: unknown): SqlValue => {
  if (value instanceof Uint8Array) return value.slice().buffer
  return value as SqlValue
}

export interface MemoryStorage extends DurableObjectStorageLike {
  /** The alarm as the platform holds it (no I/O, for assertions). */
  readonly alarmAt: number | null
  /** What the platform does when it invokes `alarm()`: the alarm is cleared before the handler runs. */
  readonly takeAlarm: () => number | null
  /** A byte-for-byte image of the database, to assert that a rejected call changed nothing. */
  readonly snapshot: () => Uint8Array
  /** Every statement executed so far, in order (for counting and fault injection). */
  readonly statements: ReadonlyArray<string>
}

class MemoryStorageImpl implements MemoryStorage {
  alarmAt: number | null = null
  readonly statements: Array<string> = []
  private depth = 0
  private savepoints = 0

  constructor(private readonly db: Database) {}

  readonly sql = {
    exec: (query: string, ...bindings: Array<unknown>): SqlCursorLike => {
      if (TRANSACTION_SQL.test(query)) {
        throw new Error(
          "To execute a transaction, please use the state.storage.transaction() or " +
            "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT statements."
        )
      }
      this.statements.push(query)
      return this.run(query, bindings.map(toSqlJs))
    }
  }

  private run(query: string, bindings: Array<number | string | Uint8Array | null>): SqlCursorLike {
    let rows: Array<Record<string, SqlValue>> = []
    let rowsWritten = 0
    let statements = 0
    for (const statement of this.db.iterateStatements(query)) {
      statements++
      try {
        if (bindings.length > 0) {
          if (statements > 1) throw new Error("bindings are only supported for a single statement")
          statement.bind(bindings)
        }
        rows = []
        while (statement.step()) {
          const row: Record<string, SqlValue> = {}
          const values = statement.get()
          statement.getColumnNames().forEach((name, i) => (row[name] = fromSqlJs(values[i])))
          rows.push(row)
        }
        rowsWritten += this.db.getRowsModified()
      } finally {
        statement.free()
      }
    }
    const result = rows
    return { toArray: () => result, rowsWritten }
  }

  transactionSync<T>(closure: () => T): T {
    const name = `durability_sp_${++this.savepoints}`
    const alarmBefore = this.alarmAt
    this.db.run(`SAVEPOINT ${name}`)
    this.depth++
    try {
      const result = closure()
      this.db.run(`RELEASE ${name}`)
      return result
    } catch (error) {
      this.db.run(`ROLLBACK TO ${name}`)
      this.db.run(`RELEASE ${name}`)
      this.alarmAt = alarmBefore
      throw error
    } finally {
      this.depth--
    }
  }

  getAlarm(): Promise<number | null> {
    return Promise.resolve(this.alarmAt)
  }

  setAlarm(scheduledTime: number | Date): Promise<void> {
    const at = typeof scheduledTime === "number" ? scheduledTime : scheduledTime.getTime()
    if (!Number.isFinite(at)) return Promise.reject(new TypeError("setAlarm() requires a finite time"))
    this.alarmAt = at
    return Promise.resolve()
  }

  deleteAlarm(): Promise<void> {
    this.alarmAt = null
    return Promise.resolve()
  }

  readonly takeAlarm = (): number | null => {
    const at = this.alarmAt
    this.alarmAt = null
    return at
  }

  readonly snapshot = (): Uint8Array => this.db.export()
}

/** Creates an empty in-memory Durable Object storage. */
export const make: Effect.Effect<MemoryStorage> = Effect.promise(async () => {
  const SQL = await loadEngine()
  return new MemoryStorageImpl(new SQL.Database())
})
