/**
 * The named alarms' table, `durability_alarms`, and its migrations.
 * @internal
 */
import * as MigrationSql from "../engine/migrationSql.js"
import type * as Migrations from "../engine/Migrations.js"

/** The capability's name on the scheduler (and in its migrations' history). */
export const CAPABILITY = "namedAlarms"

/** The start of every named alarm's `idempotencyKey`; a generation follows it. */
export const IDEMPOTENCY_PREFIX = "durability-alarm:v1:"

/** The named alarms' SQL table. */
export const TABLE = "durability_alarms"

const COLUMNS = "name, status, scheduled_at, next_attempt_at, attempt, last_error, last_error_name"

/** `durability_alarms` as created by 0003, with the columns a later migration adds. */
const createAlarms = (generation = "", created = "") =>
  `CREATE TABLE durability_alarms (
    name TEXT PRIMARY KEY,${generation}
    status TEXT NOT NULL CHECK (status IN ('pending', 'failed')),
    scheduled_at INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    last_error_name TEXT${created}
  )`

const PENDING_INDEX = "CREATE INDEX durability_alarms_pending_idx ON durability_alarms (status, next_attempt_at)"

/** The named alarms table's migrations, in order: what `NamedAlarms.migrate` applies. */
export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0003_create_alarms",
    up: `${createAlarms()};
      ${PENDING_INDEX}`,
    down: "DROP TABLE IF EXISTS durability_alarms;",
    presentWhen: MigrationSql.tableExists("durability_alarms")
  },
  {
    name: "durability_0004_alarms_generation_and_created_at",
    presentWhen: MigrationSql.columnExists("durability_alarms", "generation_id"),
    ...MigrationSql.addGenerationAndCreatedAt({
      table: "durability_alarms",
      keyColumn: "name",
      columns: COLUMNS,
      createBefore: createAlarms(),
      createAfter: createAlarms(
        "\n    generation_id TEXT NOT NULL DEFAULT 'legacy',",
        `,\n    created_at INTEGER NOT NULL DEFAULT (${MigrationSql.NOW_MS})`
      ),
      pendingIndex: PENDING_INDEX
    })
  },
  {
    // The occurrence's payload (JSON as stored, NULL for none): the Agents SDK's `schedule(when, method,
    // payload)` carries one, and users reached for it.
    name: "durability_0013_alarms_payload",
    up: "ALTER TABLE durability_alarms ADD COLUMN payload TEXT",
    down: "ALTER TABLE durability_alarms DROP COLUMN payload;",
    presentWhen: MigrationSql.columnExists("durability_alarms", "payload")
  }
]
