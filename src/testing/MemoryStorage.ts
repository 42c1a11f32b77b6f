/**
 * An in-memory stand-in for a SQLite-backed Durable Object's `ctx.storage`:
 * a real SQLite engine (sql.js, WebAssembly) plus the one alarm, with the
 * behaviours of workerd that the library relies on: synchronous `exec`,
 * `transactionSync` that rolls back SQL and alarm writes together, and SQL
 * `BEGIN`/`SAVEPOINT` statements rejected.
 *
 * `exec` follows workerd's rules (checked against workerd 1.20260310.1):
 * - every JS number is bound as a REAL (`SELECT ? / 2` with 3 is 1.5, and
 *   `'k' || ?` with 1 is `'k1.0'`); INTEGER-affinity columns still store integers;
 * - `undefined` binds NULL, array buffers and their views bind BLOBs, a bigint is
 *   a TypeError, and any other value (booleans included) binds its string form;
 * - the number of bindings must equal the statement's parameter count;
 * - in a script, only the last statement may have parameters and the rows are
 *   those of the last statement; the statements before it run to completion first;
 * - an empty script, or text after the last statement that is not one (a
 *   trailing comment), is an error;
 * - a transaction statement anywhere in a script is rejected when it is reached;
 * - foreign keys are enforced;
 * - `rowsWritten` counts the rows the last statement wrote, trigger writes
 *   included (workerd also counts index rows; this fake does not).
 * Not reproduced: workerd's authorizer (it rejects `sqlite_version()`, most
 * PRAGMAs, `ATTACH`, `_cf_` tables), and its lazy cursors (this one runs the
 * last statement to completion in `exec`).
 *
 * The object outlives any runtime built on it, which is how tests simulate
 * eviction: drop the runtime, keep the `MemoryStorage`, build a new runtime.
 * @packageDocumentation
 */
import * as Effect from "effect/Effect"
import type { Database, SqlJsStatic, Statement } from "sql.js"
import type { DurableObjectStorageLike, SqlCursorLike, SqlValue } from "../shared/platform.js"

/** The raw SQLite entry points sql.js exposes on its module but leaves out of its types. */
interface SqliteExports {
  readonly _sqlite3_bind_double: (statement: number, index: number, value: number) => number
  readonly cwrap: (name: string, returns: string, args: ReadonlyArray<string>) => (pointer: number) => unknown
}

interface Engine {
  readonly sql: SqlJsStatic
  readonly bindDouble: (statement: number, index: number, value: number) => number
  readonly statementText: (statement: number) => unknown
}

let engine: Promise<Engine> | undefined

/** What a project that installs the library without sql.js (an optional peer) is told to run. */
export const SQL_JS_MISSING = "durability/testing needs sql.js for its in-memory SQLite, an optional peer dependency: " +
  "npm install --save-dev sql.js@^1.10"

// Loaded on first use, so importing `durability/testing` works without sql.js until a storage is made.
const importSqlJs = (): Promise<() => Promise<SqlJsStatic>> =>
  import("sql.js").then(
    (module: { readonly default: () => Promise<SqlJsStatic> }) => module.default,
    (cause: unknown) => Promise.reject(new Error(SQL_JS_MISSING, { cause }))
  )

const loadEngine = (): Promise<Engine> =>
  (engine ??= importSqlJs().then((initSqlJs) => initSqlJs()).then((sql) => {
    const exports = sql as unknown as SqliteExports
    return {
      sql,
      bindDouble: (statement, index, value) => exports._sqlite3_bind_double(statement, index, value),
      statementText: exports.cwrap("sqlite3_sql", "string", ["number"])
    }
  }))

const SQLITE_OK = 0
const SQLITE_RANGE = 25

const TRANSACTION_SQL = /^(?:[\s;]|--[^\n]*(?:\n|$)|\/\*[\s\S]*?(?:\*\/|$))*(?:BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b/i

const TRANSACTION_MESSAGE = "To execute a transaction, please use the state.storage.transaction() or " +
  "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT statements. " +
  "The JavaScript API is safer because it will automatically roll back on exceptions, and because it " +
  "interacts correctly with Durable Objects' automatic atomic write coalescing."

/** workerd's conversion of one binding. Numbers are returned as is and bound as REAL later. */
const toSqlJs = (value: unknown): number | string | Uint8Array | null => {
  if (value === null || value === undefined) return null
  if (typeof value === "number" || typeof value === "string") return value
  if (typeof value === "bigint") throw new TypeError("Cannot convert a BigInt value to a number")
  if (typeof value === "symbol") throw new TypeError("Cannot convert a Symbol value to a string")
  if (value instanceof ArrayBuffer) return new Uint8Array(value)
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
  return String(value)
}

const fromSqlJs = (value: unknown): SqlValue => {
  if (value instanceof Uint8Array) return value.slice().buffer
  return value as SqlValue
}

/** An in-memory SQLite-backed Durable Object storage (sql.js) with one alarm, for tests in plain Node. */
export interface MemoryStorage extends DurableObjectStorageLike {
  /** The alarm as the platform holds it (no I/O, for assertions). */
  readonly alarmAt: number | null
  /** What the platform does when it invokes `alarm()`: the alarm is cleared before the handler runs. */
  readonly takeAlarm: () => number | null
  /** A byte-for-byte image of the database, to assert that a rejected call changed nothing. */
  readonly snapshot: () => Uint8Array
  /** Every statement executed so far, in order (for counting and fault injection). */
  readonly statements: ReadonlyArray<string>
  /**
   * Calls `listener` after every change of the alarm (set, deleted, taken, rolled back); returns the
   * unsubscribe function. The test kit delivers alarms with it, as the platform would.
   */
  readonly watchAlarm: (listener: () => void) => () => void
}

/** A prepared statement kept for reuse, with what `run` learned about it once. */
interface Prepared {
  readonly statement: Statement
  readonly pointer: number
  readonly parameters: number
}

const DATA_STATEMENT = /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|REPLACE)\b/i

/** Distinct statements kept prepared; the engine's are a few dozen, listing queries vary more. */
const MAX_PREPARED = 256

/** Durable Object SQLite's limit of bound parameters per query. */
export const MAX_BOUND_PARAMETERS = 100

class MemoryStorageImpl implements MemoryStorage {
  #alarmAt: number | null = null
  readonly #listeners = new Set<() => void>()
  readonly statements: Array<string> = []
  private depth = 0
  private savepoints = 0
  /** The own property of a sql.js `Statement` that holds the `sqlite3_stmt*` (its name is minified). */
  private pointerKey: string | undefined

  constructor(private readonly engine: Engine, private readonly db: Database) {
    db.run("PRAGMA foreign_keys = ON")
    // Rollback semantics are unchanged; the journal just skips the emulated file system (faster).
    db.run("PRAGMA journal_mode = MEMORY")
    db.run("PRAGMA locking_mode = EXCLUSIVE")
  }

  readonly sql = {
    exec: (query: string, ...bindings: Array<unknown>): SqlCursorLike => {
      if (TRANSACTION_SQL.test(query)) throw new Error(TRANSACTION_MESSAGE)
      this.statements.push(query)
      return this.run(query, bindings.map(toSqlJs))
    }
  }

  private pointer(statement: Statement): number {
    const own = statement as unknown as Record<string, unknown>
    if (this.pointerKey === undefined) {
      const text = statement.getSQL()
      this.pointerKey = Object.keys(own).find((key) => {
        const value = own[key]
        return typeof value === "number" && value > 1 && this.engine.statementText(value) === text
      })
      if (this.pointerKey === undefined) throw new Error("MemoryStorage: cannot find the sql.js statement handle")
    }
    return own[this.pointerKey] as number
  }

  /** SQLite has no exported `sqlite3_bind_parameter_count` in sql.js: probe indexes until SQLITE_RANGE. */
  private parameterCount(pointer: number): number {
    let count = 0
    for (;;) {
      const rc = this.engine.bindDouble(pointer, count + 1, 0)
      if (rc === SQLITE_RANGE) return count
      if (rc !== SQLITE_OK) throw new Error(`sqlite3_bind_double failed with code ${rc}`)
      count++
    }
  }

  /** Prepared once (`snapshot` frees it). */
  private totalChangesStatement: Statement | undefined

  private totalChanges(): number {
    const statement = (this.totalChangesStatement ??= this.db.prepare("SELECT total_changes()"))
    try {
      statement.step()
      return statement.get()[0] as number
    } finally {
      statement.reset()
    }
  }

  /**
   * Single statements prepared once and reused, as workerd caches them: compiling a statement costs
   * more than running it, and the node tests run hundreds of thousands. `snapshot` frees them.
   */
  private readonly prepared = new Map<string, Prepared>()

  private remember(query: string): void {
    if (this.prepared.size >= MAX_PREPARED) {
      const [oldest] = this.prepared
      oldest![1].statement.free()
      this.prepared.delete(oldest![0])
    }
    const statement = this.db.prepare(query)
    const pointer = this.pointer(statement)
    this.prepared.set(query, { statement, pointer, parameters: this.parameterCount(pointer) })
  }

  private run(query: string, bindings: Array<number | string | Uint8Array | null>): SqlCursorLike {
    const cached = this.prepared.get(query)
    if (cached !== undefined) return this.execute(cached, bindings)
    const iterator = this.db.iterateStatements(query)
    let cursor: SqlCursorLike | undefined
    let alone = true
    try {
      for (let next = iterator.next();; next = iterator.next()) {
        if (next.done) throw new Error("SQL code did not contain a statement.")
        const statement = next.value
        try {
          if (TRANSACTION_SQL.test(statement.getSQL())) throw new Error(TRANSACTION_MESSAGE)
          const pointer = this.pointer(statement)
          const parameters = this.parameterCount(pointer)
          if (iterator.getRemainingSQL().trim() !== "") {
            if (parameters > 0) {
              throw new Error(
                "When executing multiple SQL statements in a single call, only the last statement can have parameters."
              )
            }
            while (statement.step());
            alone = false
            continue
          }
          cursor = this.execute({ statement, pointer, parameters }, bindings)
          break
        } finally {
          statement.free()
        }
      }
    } finally {
      ;(iterator as Partial<Record<"return", () => unknown>>).return?.()
    }
    // Only a data statement that ran without error is kept (the iterator frees its own); preparing
    // DDL again could fail (the table now exists).
    if (alone && DATA_STATEMENT.test(query)) this.remember(query)
    return cursor
  }

  private execute(prepared: Prepared, bindings: Array<number | string | Uint8Array | null>): SqlCursorLike {
    const { parameters, pointer, statement } = prepared
    // Durable Object SQLite binds at most 100 parameters per query (its platform limits); sql.js many more.
    if (parameters > MAX_BOUND_PARAMETERS) throw new Error(`too many SQL variables: ${parameters} (at most ${MAX_BOUND_PARAMETERS}): SQLITE_ERROR`)
    if (parameters !== bindings.length) throw new Error("Wrong number of parameter bindings for SQL query.")
    try {
      statement.bind(bindings)
      bindings.forEach((value, i) => {
        if (typeof value === "number") this.engine.bindDouble(pointer, i + 1, value)
      })
      const before = this.totalChanges()
      const rows: Array<Record<string, SqlValue>> = []
      let columns: Array<string> | undefined
      while (statement.step()) {
        const row: Record<string, SqlValue> = {}
        const values = statement.get()
        columns ??= statement.getColumnNames()
        columns.forEach((name, i) => (row[name] = fromSqlJs(values[i])))
        rows.push(row)
      }
      const rowsWritten = this.totalChanges() - before
      return { toArray: () => rows, rowsWritten }
    } finally {
      // A reused statement must not hold its read lock (or its bindings) until the next call.
      statement.reset()
    }
  }

  get alarmAt(): number | null {
    return this.#alarmAt
  }

  private set alarmAt(at: number | null) {
    if (at === this.#alarmAt) return
    this.#alarmAt = at
    for (const listener of this.#listeners) listener()
  }

  readonly watchAlarm = (listener: () => void): (() => void) => {
    this.#listeners.add(listener)
    return () => void this.#listeners.delete(listener)
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

  readonly snapshot = (): Uint8Array => {
    // Some sql.js versions free every statement on export(): free ours first and prepare again later.
    this.totalChangesStatement?.free()
    this.totalChangesStatement = undefined
    for (const { statement } of this.prepared.values()) statement.free()
    this.prepared.clear()
    return this.db.export()
  }
}

/** Creates an empty in-memory Durable Object storage. */
export const make: Effect.Effect<MemoryStorage> = Effect.promise(async () => {
  const loaded = await loadEngine().catch((error: unknown) => {
    // A failed load is not cached: installing sql.js fixes the next call.
    engine = undefined
    throw error
  })
  return new MemoryStorageImpl(loaded, new loaded.sql.Database())
})

/** The calls a wrapper made with `intercept` may replace; the rest go straight to the wrapped storage. */
export interface Interceptors {
  /** Replaces `exec`. */
  readonly exec?: ((query: string, bindings: Array<unknown>) => SqlCursorLike) | undefined
  /** Replaces `setAlarm`. */
  readonly setAlarm?: ((at: number | Date) => Promise<void>) | undefined
  /** Replaces `deleteAlarm`. */
  readonly deleteAlarm?: (() => Promise<void>) | undefined
}

/**
 * `inner`, with some of its calls replaced (fault injection, a frozen view): everything else,
 * assertions included (`alarmAt`, `statements`, `snapshot`), reads through to `inner`.
 */
export const intercept = (inner: MemoryStorage, by: Interceptors): MemoryStorage => ({
  get alarmAt() {
    return inner.alarmAt
  },
  get statements() {
    return inner.statements
  },
  takeAlarm: () => inner.takeAlarm(),
  watchAlarm: (listener) => inner.watchAlarm(listener),
  snapshot: () => inner.snapshot(),
  sql: {
    exec: (query: string, ...bindings: Array<unknown>) =>
      by.exec === undefined ? inner.sql.exec(query, ...bindings) : by.exec(query, bindings)
  },
  transactionSync: (closure) => inner.transactionSync(closure),
  getAlarm: () => inner.getAlarm(),
  setAlarm: (at) => by.setAlarm === undefined ? inner.setAlarm(at) : by.setAlarm(at),
  deleteAlarm: () => by.deleteAlarm === undefined ? inner.deleteAlarm() : by.deleteAlarm()
})
