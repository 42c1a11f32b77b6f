/**
 * Reversible SQLite migrations, one ordered list per capability, with their
 * history in the shared `durability_migrations` table.
 *
 * Every history row stores the `down` script of its migration, so an older
 * library version that does not know a migration can still revert it on a
 * downgrade (at most {@link MAX_FUTURE_MIGRATIONS} of them).
 *
 * A call plans and writes inside one storage transaction: the plan is read
 * there (no other event can change the history between reading and writing),
 * and a refusal is raised before the first write, so a refused call leaves the
 * database byte-for-byte unchanged. Any failing script rolls back the whole
 * batch, history included.
 *
 * Reverting the last recorded migration drops the history table too, and the tables the caller
 * names as shared (`MigrateOptions.sharedTables`), so reverting everything leaves no trace.
 * @packageDocumentation
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { MigrationError, StorageError } from "../shared/Errors.js"
import { StorageService } from "./StorageService.js"

/** One reversible schema change of a capability, applied once and recorded in the history. */
export interface Migration {
  /** Unique within its capability's list; recorded in the history. */
  readonly name: string
  /** The SQL that applies it. */
  readonly up: string
  /** Reverts `up`. Stored with the history, so it should tolerate a missing object (`IF EXISTS`). */
  readonly down: string
  /**
   * A query that returns a row when the schema already holds what `up` makes (a table, a column,
   * an index). A migration missing from this capability's history whose effect is present is
   * recorded as applied without running `up`: a history that lost track of a migration (or one
   * split under another name) never re-runs it over live rows.
   */
  readonly presentWhen?: string | undefined
}

/** `migrate`'s options. */
export interface MigrateOptions {
  /**
   * Tables several capabilities' migrations make (each `up` creates it if missing) and none drops in
   * its `down`, as another may still use it: dropped with the history table when the last recorded
   * migration is reverted. Identifiers, inlined into SQL: the caller's own constants, never user input.
   */
  readonly sharedTables?: ReadonlyArray<string> | undefined
}

/** What a migration call did. */
export interface MigrationResult {
  /** Migrations applied, in list order. */
  readonly applied: ReadonlyArray<string>
  /** Migrations reverted, newest first: unknown (future) ones, then known ones. */
  readonly rolledBack: ReadonlyArray<string>
}

/** The shared history table: one row per applied migration, with its `down` script. */
export const HISTORY_TABLE = "durability_migrations"

/**
 * A newer library version may leave migrations this one does not know. Only
 * this many are unwound on a downgrade, so deploying a very old version by
 * mistake cannot silently strip a schema.
 */
export const MAX_FUTURE_MIGRATIONS = 2

/**
 * 2.x recorded the rewrite of both tables under one name. 3.x splits it per
 * capability; the combined row stays (capability NULL) so a rollback to 2.x
 * still reads a complete history and never re-runs the rewrite.
 */
const LEGACY_COMBINED = "durability_0004_generation_and_created_at"
const LEGACY_SPLIT_PREFIX = "durability_0004_"

// The first three columns match what workers-qb created in 2.x, so a 2.x
// table is upgraded in place instead of being recreated.
const CREATE_HISTORY = `CREATE TABLE IF NOT EXISTS ${HISTORY_TABLE} (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT UNIQUE,
  applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  capability TEXT,
  down TEXT
)`

const ADDED_COLUMNS = ["capability", "down"] as const

const HistoryRow = Schema.Struct({
  id: Schema.Number,
  name: Schema.NullOr(Schema.String),
  capability: Schema.NullOr(Schema.String),
  down: Schema.NullOr(Schema.String)
})
type HistoryRow = typeof HistoryRow.Type

interface NamedRow extends HistoryRow {
  readonly name: string
}

const TableName = Schema.Struct({ name: Schema.String })
const Count = Schema.Struct({ count: Schema.Number })

const describe = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const invalid = (message: string) => new MigrationError({ message })

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Checks what a JavaScript caller could get wrong, before anything touches storage. */
const validate = (
  capability: unknown,
  migrations: unknown,
  target: unknown,
  options: unknown = undefined
): MigrationError | undefined => {
  if (typeof capability !== "string" || capability.length === 0) {
    return invalid("Durability migration capability must be a non-empty string")
  }
  if (!Array.isArray(migrations)) {
    return invalid(`Durability ${capability} migrations must be an array`)
  }
  const seen = new Set<string>()
  for (const [index, migration] of (migrations as ReadonlyArray<unknown>).entries()) {
    if (typeof migration !== "object" || migration === null) {
      return invalid(`Durability ${capability} migration #${index} must be an object`)
    }
    const { down, name, up } = migration as Record<string, unknown>
    if (typeof name !== "string" || name.length === 0) {
      return invalid(`Durability ${capability} migration #${index} must have a non-empty name`)
    }
    if (typeof up !== "string" || typeof down !== "string") {
      return invalid(`Durability ${capability} migration "${name}" must have string up and down scripts`)
    }
    const { presentWhen } = migration as Record<string, unknown>
    if (presentWhen !== undefined && typeof presentWhen !== "string") {
      return invalid(`Durability ${capability} migration "${name}" must have a string presentWhen query`)
    }
    if (seen.has(name)) {
      return invalid(`Durability ${capability} migration name "${name}" is used twice`)
    }
    seen.add(name)
  }
  if (target !== undefined && target !== null && typeof target !== "string") {
    return invalid(`Durability ${capability} migration target must be a name, null or undefined`)
  }
  const shared = (options as { readonly sharedTables?: unknown } | null | undefined)?.sharedTables
  if (
    shared !== undefined &&
    !(Array.isArray(shared) && shared.every((table) => typeof table === "string" && IDENTIFIER.test(table)))
  ) {
    return invalid(`Durability ${capability} migration options.sharedTables must be an array of table names`)
  }
  return undefined
}

interface History {
  readonly missingColumns: ReadonlyArray<string>
  readonly rows: ReadonlyArray<NamedRow>
}

const readHistory = (sql: StorageService): Effect.Effect<History, StorageError> =>
  Effect.gen(function*() {
    const tables = yield* sql.query(
      TableName,
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?",
      [HISTORY_TABLE]
    )
    if (tables.length === 0) return { missingColumns: [], rows: [] }
    const columns = new Set(
      (yield* sql.query(TableName, `SELECT name FROM pragma_table_info('${HISTORY_TABLE}')`)).map((c) => c.name)
    )
    const missingColumns = ADDED_COLUMNS.filter((column) => !columns.has(column))
    // A 2.x table has no capability/down columns yet: read them as NULL rather than altering
    // the table, because a read-only caller (or a refused migrate) must not write.
    const select = (column: string) => (columns.has(column) ? column : `NULL AS ${column}`)
    const rows = yield* sql.query(
      HistoryRow,
      `SELECT id, name, ${select("capability")}, ${select("down")} FROM ${HISTORY_TABLE} ORDER BY id`
    )
    return {
      missingColumns,
      rows: rows.filter((row): row is NamedRow => row.name !== null)
    }
  })

interface Plan {
  readonly missingColumns: ReadonlyArray<string>
  readonly translate: ReadonlyArray<string>
  readonly claim: ReadonlyArray<string>
  readonly future: ReadonlyArray<NamedRow & { readonly down: string }>
  readonly revert: ReadonlyArray<Migration>
  readonly apply: ReadonlyArray<Migration>
  /** Missing from the history, but already in the schema: recorded without running `up`. */
  readonly adopt: ReadonlyArray<Migration>
  readonly refresh: ReadonlyArray<Migration>
}

const isEmptyPlan = (plan: Plan): boolean =>
  plan.translate.length === 0 &&
  plan.claim.length === 0 &&
  plan.future.length === 0 &&
  plan.revert.length === 0 &&
  plan.apply.length === 0 &&
  plan.adopt.length === 0 &&
  plan.refresh.length === 0

/**
 * Decides every write from the history and, for migrations the history does not have, from
 * whether their effect is `present` in the schema; fails (before any write) when the call must be
 * refused.
 */
const plan = (
  capability: string,
  migrations: ReadonlyArray<Migration>,
  targetIndex: number,
  history: History,
  present: (migration: Migration) => boolean
): Effect.Effect<Plan, MigrationError> => {
  const known = new Set(migrations.map((m) => m.name))
  const byName = new Map(history.rows.map((row) => [row.name, row]))

  for (const row of history.rows) {
    if (known.has(row.name) && row.capability !== null && row.capability !== capability) {
      return Effect.fail(
        invalid(
          `Durability ${capability} migration "${row.name}" is already recorded for capability "${row.capability}"`
        )
      )
    }
  }

  // Translate only on the first migrate after a 2.x upgrade: the list's earlier
  // migrations are all recorded but none is claimed yet. After this capability
  // reverted its split half, the combined row is still there, and translating
  // again would mark the half applied without running it.
  const claimedAny = history.rows.some((row) => row.capability === capability)
  const translate = byName.has(LEGACY_COMBINED) && !claimedAny
    ? migrations.flatMap((m, index) =>
      m.name.startsWith(LEGACY_SPLIT_PREFIX) &&
        !byName.has(m.name) &&
        migrations.slice(0, index).every((earlier) => byName.has(earlier.name))
        ? [m.name]
        : []
    )
    : []

  const claim = history.rows.filter((row) => row.capability === null && known.has(row.name)).map((row) => row.name)
  const mine = history.rows.filter((row) => row.capability === capability || (row.capability === null && known.has(row.name)))
  // A translated half is applied, with no stored down yet (the refresh below stores it).
  const applied = new Map<string, string | null>([
    ...mine.filter((row) => known.has(row.name)).map((row) => [row.name, row.down] as const),
    ...translate.map((name) => [name, null] as const)
  ])

  const futureRows = mine.filter((row) => !known.has(row.name)).reverse()
  if (futureRows.length > MAX_FUTURE_MIGRATIONS) {
    return Effect.fail(
      invalid(
        `Durability ${capability} schema is ${futureRows.length} migrations ahead of this version; ` +
          `refusing to revert more than ${MAX_FUTURE_MIGRATIONS}`
      )
    )
  }
  const future: Array<NamedRow & { readonly down: string }> = []
  for (const row of futureRows) {
    if (row.down === null) {
      return Effect.fail(
        invalid(`Durability ${capability} migration "${row.name}" has no stored down script and cannot be reverted`)
      )
    }
    future.push({ ...row, down: row.down })
  }

  const wanted = migrations.slice(0, targetIndex + 1)
  const missing = wanted.filter((m) => !applied.has(m.name))
  return Effect.succeed({
    missingColumns: history.missingColumns,
    translate,
    claim,
    future,
    revert: migrations.slice(targetIndex + 1).filter((m) => applied.has(m.name)).reverse(),
    apply: missing.filter((m) => !present(m)),
    adopt: missing.filter(present),
    // Keeps the stored down current, so a later downgrade runs this version's revert logic.
    refresh: wanted.filter((m) => applied.has(m.name) && applied.get(m.name) !== m.down)
  })
}

/** Runs `plan`; must stay synchronous, it is the body of one storage transaction. */
const execute = (
  sql: StorageService,
  capability: string,
  { adopt, apply, claim, future, missingColumns, refresh, revert, translate }: Plan,
  sharedTables: ReadonlyArray<string>
): Effect.Effect<void, MigrationError | StorageError> =>
  Effect.gen(function*() {
    const step = <A>(name: string, action: string, effect: Effect.Effect<A, StorageError>) =>
      Effect.mapError(effect, (cause) =>
        new MigrationError({
          message: `Durability ${capability} migration "${name}" failed to ${action}: ${describe(cause)}`,
          cause
        }))

    yield* sql.exec(CREATE_HISTORY)
    for (const column of missingColumns) {
      yield* sql.exec(`ALTER TABLE ${HISTORY_TABLE} ADD COLUMN ${column} TEXT`)
    }
    for (const name of translate) {
      yield* sql.exec(`INSERT OR IGNORE INTO ${HISTORY_TABLE} (name, capability) VALUES (?, ?)`, [name, capability])
    }
    for (const name of claim) {
      yield* sql.exec(`UPDATE ${HISTORY_TABLE} SET capability = ? WHERE name = ? AND capability IS NULL`, [
        capability,
        name
      ])
    }
    for (const row of future) {
      yield* step(row.name, "revert", sql.exec(row.down))
      yield* step(row.name, "revert", sql.exec(`DELETE FROM ${HISTORY_TABLE} WHERE id = ?`, [row.id]))
    }
    for (const migration of revert) {
      yield* step(migration.name, "revert", sql.exec(migration.down))
      yield* step(migration.name, "revert", sql.exec(`DELETE FROM ${HISTORY_TABLE} WHERE name = ?`, [migration.name]))
    }
    const record = (migration: Migration) =>
      sql.exec(`INSERT INTO ${HISTORY_TABLE} (name, capability, down) VALUES (?, ?, ?)`, [
        migration.name,
        capability,
        migration.down
      ])
    for (const migration of apply) {
      yield* step(migration.name, "apply", sql.exec(migration.up))
      yield* step(migration.name, "apply", record(migration))
    }
    for (const migration of adopt) {
      yield* step(migration.name, "record", record(migration))
    }
    for (const migration of refresh) {
      yield* step(
        migration.name,
        "store its down script",
        sql.exec(`UPDATE ${HISTORY_TABLE} SET down = ? WHERE name = ?`, [migration.down, migration.name])
      )
    }
    const [remaining] = yield* sql.query(Count, `SELECT COUNT(*) AS count FROM ${HISTORY_TABLE}`)
    // Reverting everything leaves no trace of the library in the object's database: nor the tables
    // the capabilities share (each revert keeps them, not knowing whether another uses them).
    if (remaining?.count === 0) {
      yield* sql.exec([`DROP TABLE ${HISTORY_TABLE}`, ...sharedTables.map((table) => `DROP TABLE IF EXISTS ${table}`)].join("; "))
    }
  })

/**
 * Moves `capability`'s schema to `target`: `undefined` = the last migration of
 * the list, `null` = revert all, a name = that migration (applied, later ones reverted).
 */
export const migrate: (
  capability: string,
  migrations: ReadonlyArray<Migration>,
  target?: string | null,
  options?: MigrateOptions
) => Effect.Effect<MigrationResult, MigrationError | StorageError, StorageService> = Effect.fn("Migrations.migrate")(
  function*(capability: string, migrations: ReadonlyArray<Migration>, target?: string | null, options?: MigrateOptions) {
    const problem = validate(capability, migrations, target, options)
    if (problem !== undefined) return yield* problem

    const resolved = target === undefined ? (migrations[migrations.length - 1]?.name ?? null) : target
    const targetIndex = resolved === null ? -1 : migrations.findIndex((m) => m.name === resolved)
    if (resolved !== null && targetIndex === -1) {
      return yield* invalid(`Unknown durability migration target "${resolved}"`)
    }

    const sql = yield* StorageService
    return yield* sql.transaction(Effect.gen(function*() {
      const history = yield* readHistory(sql)
      const recorded = new Set(history.rows.map((row) => row.name))
      const present = new Set<string>()
      for (const migration of migrations.slice(0, targetIndex + 1)) {
        if (migration.presentWhen === undefined || recorded.has(migration.name)) continue
        const found = yield* Effect.mapError(sql.exec(migration.presentWhen), (cause) =>
          new MigrationError({
            message: `Durability ${capability} migration "${migration.name}" failed to check presentWhen: ${
              describe(cause)
            }`,
            cause
          }))
        if (found.length > 0) present.add(migration.name)
      }
      const decided = yield* plan(
        capability,
        migrations,
        targetIndex,
        history,
        (migration) => present.has(migration.name)
      )
      // Nothing to change: skip even the history table setup, so a no-op call writes nothing.
      if (isEmptyPlan(decided)) return { applied: [], rolledBack: [] } satisfies MigrationResult
      yield* execute(sql, capability, decided, options?.sharedTables ?? [])
      return {
        applied: decided.apply.map((m) => m.name),
        rolledBack: [...decided.future.map((row) => row.name), ...decided.revert.map((m) => m.name)]
      }
    }))
  }
)

/**
 * True when every migration of the list is applied for `capability` with its
 * current down script and no unknown migration is recorded for it: `migrate`
 * to latest would change nothing. Read-only; invalid input reads as "not current"
 * so that the caller's `migrate` reports it.
 */
export const isCurrent: (
  capability: string,
  migrations: ReadonlyArray<Migration>
) => Effect.Effect<boolean, StorageError, StorageService> = Effect.fn("Migrations.isCurrent")(
  function*(capability: string, migrations: ReadonlyArray<Migration>) {
    if (validate(capability, migrations, undefined) !== undefined) return false
    const history = yield* readHistory(yield* StorageService)
    const mine = new Map(
      history.rows.filter((row) => row.capability === capability).map((row) => [row.name, row.down] as const)
    )
    return mine.size === migrations.length && migrations.every((m) => mine.has(m.name) && mine.get(m.name) === m.down)
  }
)
