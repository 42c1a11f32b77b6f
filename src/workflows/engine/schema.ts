/**
 * The Effect workflow engine's tables and their one migration: executions (records with attempts),
 * the activity journal and the durable deferreds' results.
 * @internal
 */
import * as MigrationSql from "../../engine/migrationSql.js"
import type * as Migrations from "../../engine/Migrations.js"

/** The capability's name on the scheduler (and in its migrations' history). */
export const CAPABILITY = "effectWorkflows"

/** One row per execution: the engine's record (a run is an attempt), its payload and its last result. */
export const EXECUTIONS = "durability_effect_workflow_executions"

/** One row per activity attempt that completed: its exit, stored once. */
export const ACTIVITIES = "durability_effect_workflow_activities"

/** One row per durable deferred that was done (clocks included): its exit, stored once. */
export const DEFERREDS = "durability_effect_workflow_deferreds"

/** The tables' migrations, in order. */
export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    // `suspended` holds a pending execution off the alarm until something wakes it; `wakes` counts the
    // wake-ups, so a run that suspends after one arrived runs again instead of sleeping through it.
    name: "durability_0016_effect_workflows",
    up: `CREATE TABLE ${EXECUTIONS} (
        execution_id TEXT PRIMARY KEY,
        generation_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
        attempt INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        last_error TEXT,
        last_error_name TEXT,
        created_at INTEGER NOT NULL,
        workflow TEXT NOT NULL,
        payload TEXT NOT NULL,
        parent TEXT,
        suspended INTEGER NOT NULL DEFAULT 0,
        wakes INTEGER NOT NULL DEFAULT 0,
        interrupted INTEGER NOT NULL DEFAULT 0,
        result TEXT
      );
      CREATE INDEX ${EXECUTIONS}_pending_idx ON ${EXECUTIONS} (status, next_attempt_at);
      CREATE TABLE ${ACTIVITIES} (
        execution_id TEXT NOT NULL,
        name TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        exit TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (execution_id, name, attempt)
      ) WITHOUT ROWID;
      CREATE TABLE ${DEFERREDS} (
        execution_id TEXT NOT NULL,
        name TEXT NOT NULL,
        exit TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (execution_id, name)
      ) WITHOUT ROWID`,
    down: `DROP TABLE IF EXISTS ${DEFERREDS}; DROP TABLE IF EXISTS ${ACTIVITIES}; DROP TABLE IF EXISTS ${EXECUTIONS};`,
    presentWhen: MigrationSql.tableExists(EXECUTIONS)
  }
]
