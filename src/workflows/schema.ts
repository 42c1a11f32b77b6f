/**
 * The workflows' tables: one row per instance (the engine's record), its steps in call order, and the
 * events sent to it. An instance's steps and events go with its row (a trigger), whatever deletes it.
 * @internal
 */
import * as MigrationSql from "../engine/migrationSql.js"
import type * as Migrations from "../engine/Migrations.js"

/** The capability's name on the scheduler (and in its migrations' history). */
export const CAPABILITY = "workflows"

export const TABLE = "durability_workflows"
export const STEPS = "durability_workflow_steps"
export const EVENTS = "durability_workflow_events"

/**
 * `status` is the engine's: `pending` (queued or running: a record to claim), `suspended` (sleeping,
 * waiting for an event or a child, or paused: only a durable timer or a write wakes it), and the ends
 * `complete`, `failed` (errored) and `terminated`.
 */
const CREATE = `CREATE TABLE ${TABLE} (
    key TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    generation_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'suspended', 'complete', 'failed', 'terminated')),
    attempt INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    last_error_name TEXT,
    params TEXT NOT NULL,
    output TEXT,
    paused INTEGER NOT NULL DEFAULT 0,
    waiting TEXT,
    wake_at INTEGER,
    parent TEXT,
    started_at INTEGER,
    ended_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX ${TABLE}_pending_idx ON ${TABLE} (status, next_attempt_at);
  CREATE INDEX ${TABLE}_list_idx ON ${TABLE} (workflow, status, created_at, key);
  CREATE INDEX ${TABLE}_created_idx ON ${TABLE} (created_at);
  CREATE TABLE ${STEPS} (
    instance TEXT NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('do', 'sleep', 'event', 'child')),
    status TEXT NOT NULL CHECK (status IN ('running', 'retrying', 'waiting', 'completed', 'failed')),
    attempt INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    error_name TEXT,
    error_message TEXT,
    wake_at INTEGER,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    PRIMARY KEY (instance, seq)
  ) WITHOUT ROWID;
  CREATE TABLE ${EVENTS} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    instance TEXT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    sent_at INTEGER NOT NULL,
    consumed_seq INTEGER
  );
  CREATE INDEX ${EVENTS}_waiting_idx ON ${EVENTS} (instance, type, consumed_seq, id);
  CREATE TRIGGER ${TABLE}_delete_trigger AFTER DELETE ON ${TABLE} BEGIN
    DELETE FROM ${STEPS} WHERE instance = OLD.key;
    DELETE FROM ${EVENTS} WHERE instance = OLD.key;
  END`

/** The workflows' migrations, in order (apply them with `DurabilityWorkflows.migrate`). */
export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0017_create_workflows",
    up: CREATE,
    down: `DROP TRIGGER IF EXISTS ${TABLE}_delete_trigger; DROP TABLE IF EXISTS ${EVENTS}; DROP TABLE IF EXISTS ${STEPS}; DROP TABLE IF EXISTS ${TABLE};`,
    presentWhen: MigrationSql.tableExists(TABLE)
  },
  {
    // The inspector counts each public status of a workflow from this index alone (paused and started
    // tell queued, running, paused and waiting apart), so a capped count reads index entries only.
    name: "durability_0018_workflows_state_counts",
    up: `CREATE INDEX ${TABLE}_state_idx ON ${TABLE} (workflow, status, paused, started_at)`,
    down: `DROP INDEX IF EXISTS ${TABLE}_state_idx;`,
    presentWhen: MigrationSql.indexExists(`${TABLE}_state_idx`)
  }
]
