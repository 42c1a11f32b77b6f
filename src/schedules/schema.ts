/**
 * The recurring schedules' table: one row per schedule, which is also the engine's record. Between
 * runs the record waits for its next slot (`next_attempt_at`); a run claims it, retries keep it, and
 * the settle moves it to the next slot with a fresh generation and attempt 0, in one transaction.
 * @internal
 */
import type * as Migrations from "../engine/Migrations.js"
import * as MigrationSql from "../engine/migrationSql.js"
import * as StepMemo from "../steps/memo.js"

export const TABLE = "durability_schedules"

const CREATE = `CREATE TABLE ${TABLE} (
    key TEXT PRIMARY KEY,
    schedule TEXT NOT NULL,
    schedule_key TEXT NOT NULL,
    generation_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'failed', 'ended')),
    attempt INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    last_error_name TEXT,
    timing TEXT NOT NULL,
    anchor_at INTEGER NOT NULL,
    start_at INTEGER,
    end_at INTEGER,
    run_limit INTEGER,
    catch_up TEXT NOT NULL CHECK (catch_up IN ('skip', 'latest', 'all')),
    overlap TEXT NOT NULL CHECK (overlap IN ('skip', 'wait')),
    grace_ms INTEGER NOT NULL,
    payload TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    slot_at INTEGER,
    manual_at INTEGER,
    waited_at INTEGER,
    run_slot INTEGER,
    started_slot INTEGER,
    run_manual INTEGER NOT NULL DEFAULT 0,
    run_started_at INTEGER,
    started_at INTEGER,
    run_number INTEGER NOT NULL DEFAULT 0,
    scheduled_runs INTEGER NOT NULL DEFAULT 0,
    run_count INTEGER NOT NULL DEFAULT 0,
    missed_count INTEGER NOT NULL DEFAULT 0,
    last_slot INTEGER,
    last_manual INTEGER,
    last_run_number INTEGER,
    last_outcome TEXT,
    last_settled_at INTEGER,
    last_run_error TEXT,
    last_run_error_name TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX ${TABLE}_pending_idx ON ${TABLE} (status, next_attempt_at);
  CREATE INDEX ${TABLE}_list_idx ON ${TABLE} (schedule, created_at, key)`

export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0007_create_schedules",
    up: CREATE,
    down: `DROP TABLE IF EXISTS ${TABLE};`,
    presentWhen: MigrationSql.tableExists(TABLE)
  },
  {
    name: "durability_0008_schedules_steps",
    // A run's memos go with its generation (each run has its own), its schedule's removal or purge.
    ...StepMemo.memoSchema({ capability: "schedules", table: TABLE, keyColumn: "key", terminal: ["failed", "ended"] })
  },
  {
    name: "durability_0015_schedules_state_counts",
    // The inspector counts paused and active schedules by index range, whichever is rare: filtering `paused` row
    // by row read every schedule that was not ended.
    up: `CREATE INDEX ${TABLE}_status_paused_idx ON ${TABLE} (paused, status)`,
    down: `DROP INDEX IF EXISTS ${TABLE}_status_paused_idx;`,
    presentWhen: MigrationSql.indexExists(`${TABLE}_status_paused_idx`)
  }
]
