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
  /** A due record's claim in one statement, given its attempt limit as SQL (bindings: key, due-by time, then the limit's). */
  readonly claimDue: (limit: string) => string
  readonly exhaust: string
  readonly settleFailure: string
}

/** Statements for one table; `table` and `key` were checked with `isIdentifier`. */
export const make = (table: string, key: string): TableSql => {
  const current = `${key} = ? AND generation_id = ? AND status = 'pending'`
  return {
    due:
      `SELECT ${key} AS key FROM ${table} WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`,
    read: `SELECT * FROM ${table} WHERE ${key} = ?`,
    claim: `UPDATE ${table} SET attempt = attempt + 1 WHERE ${current} AND attempt < ? RETURNING attempt`,
    claimDue: (limit) =>
      `UPDATE ${table} SET attempt = attempt + 1 WHERE ${key} = ? AND status = 'pending' AND next_attempt_at <= ? ` +
      `AND attempt < ${limit} RETURNING *`,
    exhaust:
      `UPDATE ${table} SET status = 'failed', last_error = ?, last_error_name = ? WHERE ${current} AND attempt >= ? RETURNING attempt`,
    settleFailure:
      `UPDATE ${table} SET status = ?, next_attempt_at = ?, last_error = ?, last_error_name = ? WHERE ${current} AND attempt = ? RETURNING attempt`
  }
}

/**
 * The earliest pending time over every participating table, as one statement
 * (each side is an indexed MIN; NULL when nothing is pending anywhere).
 */
export const earliestPendingOf = (tables: ReadonlyArray<string>): string =>
  tables.length === 1
    ? `SELECT MIN(next_attempt_at) AS at FROM ${tables[0]} WHERE status = 'pending'`
    : `SELECT MIN(at) AS at FROM (${
      tables.map((table) => `SELECT MIN(next_attempt_at) AS at FROM ${table} WHERE status = 'pending'`).join(
        " UNION ALL "
      )
    })`

/**
 * Each table's first pending rows by time as one statement: `p` is the table's
 * position in `tables`, and each side takes its own LIMIT binding, in order.
 */
export const pendingByTimeOf = (tables: ReadonlyArray<{ readonly table: string; readonly key: string }>): string =>
  tables.map(({ key, table }, p) =>
    `SELECT * FROM (SELECT ${p} AS p, ${key} AS key, next_attempt_at AS at FROM ${table} WHERE status = 'pending' ORDER BY next_attempt_at LIMIT ?)`
  ).join(" UNION ALL ")
