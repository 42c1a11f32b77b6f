/**
 * The operations' table, `durability_calls`: its migrations, the shared step memos' triggers included.
 * @internal
 */
import * as MigrationSql from "../engine/migrationSql.js"
import type * as Migrations from "../engine/Migrations.js"
import * as StepMemo from "../steps/memo.js"

/** The capability's name on the scheduler (and in its migrations' history). */
export const CAPABILITY = "operations"

/** The operations' SQL table. */
export const TABLE = "durability_calls"

const COLUMNS =
  "id, operation, payload, status, result, attempt, next_attempt_at, last_error, last_error_name, completed_at"

/** `durability_calls` as created by 0001, plus the columns a later migration adds. */
const createCalls = (added = "") =>
  `CREATE TABLE durability_calls (
    id TEXT PRIMARY KEY,
    operation TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    result TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    last_error_name TEXT,
    completed_at INTEGER${added}
  )`

const PENDING_INDEX = "CREATE INDEX durability_calls_pending_idx ON durability_calls (status, next_attempt_at)"

/** The operations table's migrations, in order: what `Operations.migrate` applies. */
export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0001_create_calls",
    up: createCalls(),
    down: "DROP TABLE IF EXISTS durability_calls;",
    presentWhen: MigrationSql.tableExists("durability_calls")
  },
  {
    name: "durability_0002_pending_index",
    up: PENDING_INDEX,
    down: "DROP INDEX IF EXISTS durability_calls_pending_idx;",
    presentWhen: MigrationSql.indexExists("durability_calls_pending_idx")
  },
  {
    name: "durability_0004_calls_generation_and_created_at",
    presentWhen: MigrationSql.columnExists("durability_calls", "generation_id"),
    ...MigrationSql.addGenerationAndCreatedAt({
      table: "durability_calls",
      keyColumn: "id",
      columns: COLUMNS,
      createBefore: createCalls(),
      createAfter: createCalls(`,
    generation_id TEXT NOT NULL DEFAULT 'legacy',
    created_at INTEGER NOT NULL DEFAULT (${MigrationSql.NOW_MS})`),
      pendingIndex: PENDING_INDEX
    })
  },
  {
    name: "durability_0006_operations_steps",
    // The shared memo table and the triggers deleting a call's memos with its end, purge or replacement.
    ...StepMemo.memoSchema({ capability: "operations", table: "durability_calls", keyColumn: "id", terminal: ["completed", "failed"] })
  }
]
