/**
 * SQL shared by the capabilities' migrations.
 * @internal
 */

/** `presentWhen` queries (identifiers are the library's own constants, never user input). */
export const tableExists = (table: string) => `SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '${table}'`
export const indexExists = (index: string) => `SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = '${index}'`
export const columnExists = (table: string, column: string) =>
  `SELECT 1 FROM pragma_table_info('${table}') WHERE name = '${column}'`

/** The current time in epoch milliseconds, as SQLite computes it. */
export const NOW_MS = "CAST(unixepoch('subsec') * 1000 AS INTEGER)"

/**
 * The 0004 migration of a capability table: rebuilt (not altered) so the new
 * columns get their real defaults, and old rows get a per-row legacy
 * generation so a stale execution can never match a new registration. The down
 * script rebuilds the previous shape.
 */
export const addGenerationAndCreatedAt = (options: {
  readonly table: string
  readonly keyColumn: string
  /** The columns both shapes share. */
  readonly columns: string
  readonly createBefore: string
  readonly createAfter: string
  readonly pendingIndex: string
}) => {
  const { columns, table } = options
  const old = `${table}_0004`
  return {
    up: `ALTER TABLE ${table} RENAME TO ${old};
      ${options.createAfter};
      INSERT INTO ${table} (${columns}, generation_id, created_at)
        SELECT ${columns}, 'legacy:' || ${options.keyColumn}, ${NOW_MS} FROM ${old};
      DROP TABLE ${old};
      ${options.pendingIndex};
      CREATE INDEX ${table}_created_idx ON ${table} (created_at)`,
    down: `ALTER TABLE ${table} RENAME TO ${old};
      ${options.createBefore};
      INSERT INTO ${table} (${columns}) SELECT ${columns} FROM ${old};
      DROP TABLE IF EXISTS ${old};
      ${options.pendingIndex};`
  }
}
