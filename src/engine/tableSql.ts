/**
 * The SQL the engine runs against a participant's table. Every participating
 * table has the standard attempt columns:
 * `<key> TEXT PRIMARY KEY, generation_id TEXT, status TEXT ('pending' | 'failed' | …),
 *  attempt INTEGER, next_attempt_at INTEGER, last_error TEXT, last_error_name TEXT`
 * and an index on `(status, next_attempt_at)` so due scans and the earliest
 * pending time stay indexed whatever the backlog.
 * @internal
 */

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

export const isIdentifier = (name: string): boolean => IDENTIFIER.test(name)

export interface TableSql {
  readonly due: string
  readonly read: string
  readonly claim: string
  /** `claim`, returning the whole row as claimed (for a gated claim, whose gate may have written to it). */
  readonly claimRow: string
  /** A due record's claim in one statement, given its attempt limit as SQL (bindings: key, due-by time, then the limit's). */
  readonly claimDue: (limit: string) => string
  /** `claimDue` of `count` records at once (bindings: the keys, the due-by time, then the limit's). */
  readonly claimDueMany: (limit: string, count: number) => string
  readonly exhaust: string
  readonly settleFailure: string
  /** An admission's `Defer`: the record waits until then (bindings: time, key, generation). */
  readonly defer: string
  /**
   * A lease's claim: as `claimDue`, of a pending record whatever the table's further condition (a
   * record may wait for its lease), setting the table's lease state (`set`, a SET list) with it.
   * Bindings: [claim time when stamped,] `set`'s, key, due-by time, then the limit's.
   */
  readonly lease: (limit: string, set?: string) => string
}

/** What a table's dispatch changes in its statements (see `DurableTable.Dispatch`). */
export interface Shape {
  readonly order?: string | undefined
  /** Further columns due scans return (a select list). */
  readonly rank?: { readonly columns: string } | undefined
  readonly pendingWhere?: string | undefined
  /** Set to the claim's time by every claim (its binding comes first). */
  readonly startedColumn?: string | undefined
}

/** A table's shape, from its dispatch and its holds. */
export const shapeOf = (table: {
  readonly dispatch?: Omit<Shape, "pendingWhere"> | undefined
  readonly holds?: { readonly where: string } | undefined
}): Shape => ({
  order: table.dispatch?.order,
  rank: table.dispatch?.rank,
  startedColumn: table.dispatch?.startedColumn,
  pendingWhere: table.holds?.where
})

/** `status = 'pending'`, with the table's further condition: what due, wake-up and claim statements count. */
const pendingOf = (shape: Shape | undefined): string =>
  shape?.pendingWhere === undefined ? "status = 'pending'" : `status = 'pending' AND (${shape.pendingWhere})`

/** Statements for one table; `table` and `key` were checked with `isIdentifier`. */
export const make = (table: string, key: string, shape?: Shape): TableSql => {
  const current = `${key} = ? AND generation_id = ? AND status = 'pending'`
  const pending = pendingOf(shape)
  const stamp = shape?.startedColumn === undefined ? "" : `, ${shape.startedColumn} = ?`
  return {
    due: `SELECT ${key} AS key${shape?.rank === undefined ? "" : `, ${shape.rank.columns}`} FROM ${table} WHERE ${pending} AND next_attempt_at <= ? ORDER BY ${
      shape?.order ?? "next_attempt_at"
    } LIMIT ?`,
    read: `SELECT * FROM ${table} WHERE ${key} = ?`,
    claim: `UPDATE ${table} SET attempt = attempt + 1${stamp} WHERE ${key} = ? AND generation_id = ? AND ${pending} ` +
      `AND attempt < ? RETURNING attempt`,
    claimRow: `UPDATE ${table} SET attempt = attempt + 1${stamp} WHERE ${key} = ? AND generation_id = ? AND ${pending} ` +
      `AND attempt < ? RETURNING *`,
    claimDue: (limit) =>
      `UPDATE ${table} SET attempt = attempt + 1${stamp} WHERE ${key} = ? AND ${pending} AND next_attempt_at <= ? ` +
      `AND attempt < ${limit} RETURNING *`,
    claimDueMany: (limit, count) =>
      `UPDATE ${table} SET attempt = attempt + 1${stamp} WHERE ${key} IN (${placeholders(count)}) AND ${pending} ` +
      `AND next_attempt_at <= ? AND attempt < ${limit} RETURNING *`,
    exhaust:
      `UPDATE ${table} SET status = 'failed', last_error = ?, last_error_name = ? WHERE ${current} AND attempt >= ? RETURNING attempt`,
    settleFailure:
      `UPDATE ${table} SET status = ?, next_attempt_at = ?, last_error = ?, last_error_name = ? WHERE ${current} AND attempt = ? RETURNING attempt`,
    defer: `UPDATE ${table} SET next_attempt_at = ? WHERE ${current}`,
    lease: (limit, set) =>
      `UPDATE ${table} SET attempt = attempt + 1${stamp}${set === undefined ? "" : `, ${set}`} WHERE ${key} = ? AND status = 'pending' AND next_attempt_at <= ? ` +
      `AND attempt < ${limit} RETURNING *`
  }
}

/**
 * The earliest pending time over every participating table, as one statement
 * (each side is an indexed MIN; NULL when nothing is pending anywhere).
 */
export const earliestPendingOf = (tables: ReadonlyArray<{ readonly table: string; readonly shape?: Shape | undefined }>): string => {
  const earliest = ({ shape, table }: (typeof tables)[number]) =>
    `SELECT MIN(next_attempt_at) AS at FROM ${table} WHERE ${pendingOf(shape)}`
  return tables.length === 1
    ? earliest(tables[0]!)
    : `SELECT MIN(at) AS at FROM (${tables.map(earliest).join(" UNION ALL ")})`
}

/**
 * Each table's first pending rows by time as one statement: `p` is the table's
 * position in `tables`, and each side takes its own LIMIT binding, in order.
 */
export const pendingByTimeOf = (
  tables: ReadonlyArray<{ readonly table: string; readonly key: string; readonly shape?: Shape | undefined }>
): string =>
  tables.map(({ key, shape, table }, p) =>
    `SELECT * FROM (SELECT ${p} AS p, ${key} AS key, next_attempt_at AS at FROM ${table} WHERE ${
      pendingOf(shape)
    } ORDER BY next_attempt_at LIMIT ?)`
  ).join(" UNION ALL ")

const placeholders = (count: number): string => Array.from({ length: count }, () => "?").join(", ")

/** Records a grouped statement takes at once: a Durable Object statement takes at most 100 bindings. */
export const GROUP_SIZE = 20

/**
 * The successes of many records in one statement: `set` (a SET list over `v.result` and `v.at`) on each
 * row matching a `(key, generation, attempt)` of `items` and still pending; returns the matched keys.
 */
export const completed = (
  table: string,
  key: string,
  set: string,
  items: ReadonlyArray<{ readonly execution: { readonly key: string; readonly generation: string; readonly attempt: number }; readonly value: string; readonly settledAt: number }>
): { readonly sql: string; readonly bindings: Array<string | number> } => ({
  sql: `UPDATE ${table} SET ${set} FROM (SELECT column1 AS key, column2 AS generation, column3 AS attempt, column4 AS result, column5 AS at ` +
    `FROM (VALUES ${Array.from({ length: items.length }, () => "(?, ?, ?, ?, ?)").join(", ")})) AS v ` +
    `WHERE ${table}.${key} = v.key AND ${table}.generation_id = v.generation AND ${table}.attempt = v.attempt ` +
    `AND ${table}.status = 'pending' RETURNING ${table}.${key} AS key`,
  bindings: items.flatMap(({ execution, settledAt, value }) => [execution.key, execution.generation, execution.attempt, value, settledAt])
})
