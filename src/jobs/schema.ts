/**
 * The job queues' tables. A job's row is the engine's record (key `<queue>/<id>`, the standard
 * attempt columns) plus what a queue needs: priority and insertion order, its payload, result and
 * progress, its place in a flow. Everything a job's life touches (the row, its dedup key, its
 * queue's rate-limit buckets, its parent's counter, its dead letter) lives in this one database,
 * so one synchronous transaction covers it.
 * @internal
 */
import type * as Migrations from "../engine/Migrations.js"
import * as MigrationSql from "../engine/migrationSql.js"
import * as StepMemo from "../steps/memo.js"

export const JOBS = "durability_jobs"
export const QUEUES = "durability_job_queues"
export const BUCKETS = "durability_job_buckets"
export const DEDUP = "durability_job_dedup"
export const LOGS = "durability_job_logs"
export const DEAD_LETTERS = "durability_job_dead_letters"
export const OUTBOX = "durability_job_outbox"

const CREATE = `CREATE TABLE ${JOBS} (
    key TEXT PRIMARY KEY,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    generation_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'waiting_children', 'completed', 'failed', 'canceled')),
    attempt INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    last_error_name TEXT,
    run_at INTEGER NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0,
    seq INTEGER NOT NULL,
    payload TEXT NOT NULL,
    result TEXT,
    progress TEXT,
    group_key TEXT,
    parent_key TEXT,
    on_failure TEXT NOT NULL DEFAULT 'fail' CHECK (on_failure IN ('fail', 'ignore')),
    children_pending INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    cancel_reason TEXT,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER
  );
  CREATE INDEX ${JOBS}_pending_idx ON ${JOBS} (status, next_attempt_at);
  CREATE INDEX ${JOBS}_order_idx ON ${JOBS} (status, priority DESC, seq);
  CREATE INDEX ${JOBS}_queue_idx ON ${JOBS} (queue, status, finished_at);
  CREATE INDEX ${JOBS}_seq_idx ON ${JOBS} (seq);
  CREATE INDEX ${JOBS}_parent_idx ON ${JOBS} (parent_key) WHERE parent_key IS NOT NULL;
  CREATE INDEX ${JOBS}_created_idx ON ${JOBS} (created_at);
  CREATE TABLE ${QUEUES} (
    queue TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0,
    rate_limit TEXT
  );
  CREATE TABLE ${BUCKETS} (
    queue TEXT NOT NULL,
    group_key TEXT NOT NULL,
    tokens REAL NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (queue, group_key)
  );
  CREATE TABLE ${DEDUP} (
    queue TEXT NOT NULL,
    dedup_key TEXT NOT NULL,
    job_id TEXT NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (queue, dedup_key)
  );
  CREATE TABLE ${LOGS} (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (key, seq)
  );
  CREATE TABLE ${DEAD_LETTERS} (
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    error_name TEXT NOT NULL,
    error_message TEXT NOT NULL,
    failed_at INTEGER NOT NULL,
    PRIMARY KEY (queue, id)
  );
  CREATE INDEX ${DEAD_LETTERS}_failed_idx ON ${DEAD_LETTERS} (failed_at, queue, id);
  CREATE TRIGGER ${JOBS}_logs_gone AFTER DELETE ON ${JOBS} BEGIN
    DELETE FROM ${LOGS} WHERE key = old.key;
  END`

export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0005_create_jobs",
    up: CREATE,
    down: `DROP TRIGGER IF EXISTS ${JOBS}_logs_gone;
      DROP TABLE IF EXISTS ${DEAD_LETTERS};
      DROP TABLE IF EXISTS ${LOGS};
      DROP TABLE IF EXISTS ${DEDUP};
      DROP TABLE IF EXISTS ${BUCKETS};
      DROP TABLE IF EXISTS ${QUEUES};
      DROP TABLE IF EXISTS ${JOBS};`,
    presentWhen: MigrationSql.tableExists(JOBS)
  },
  {
    name: "durability_0006_jobs_steps",
    // The shared memo table and the triggers deleting a job's memos with its end, removal or `retry`.
    ...StepMemo.memoSchema({ capability: "jobs", table: JOBS, keyColumn: "key", terminal: ["completed", "failed", "canceled"] })
  },
  {
    name: "durability_0009_jobs_leases",
    // A lease's fencing token grows with every lease of the job; `leased_until` is set while one is out.
    up: `ALTER TABLE ${JOBS} ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE ${JOBS} ADD COLUMN leased_until INTEGER;
      ALTER TABLE ${JOBS} ADD COLUMN worker_id TEXT;
      ALTER TABLE ${JOBS} ADD COLUMN stalled INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE ${JOBS} ADD COLUMN waiting_slot INTEGER NOT NULL DEFAULT 0`,
    down: `ALTER TABLE ${JOBS} DROP COLUMN waiting_slot;
      ALTER TABLE ${JOBS} DROP COLUMN stalled;
      ALTER TABLE ${JOBS} DROP COLUMN worker_id;
      ALTER TABLE ${JOBS} DROP COLUMN leased_until;
      ALTER TABLE ${JOBS} DROP COLUMN lease_token;`,
    presentWhen: MigrationSql.columnExists(JOBS, "lease_token")
  },
  {
    name: "durability_0010_jobs_outbox",
    // Envelopes of leased jobs to send to a Cloudflare Queue: an engine record each (key `<job key>#<token>`),
    // written in the lease's transaction and deleted once sent, so a failed or cut send is sent again.
    up: `CREATE TABLE ${OUTBOX} (
        key TEXT PRIMARY KEY,
        queue TEXT NOT NULL,
        body TEXT NOT NULL,
        generation_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'failed')),
        attempt INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        last_error TEXT,
        last_error_name TEXT,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX ${OUTBOX}_pending_idx ON ${OUTBOX} (status, next_attempt_at)`,
    down: `DROP TABLE IF EXISTS ${OUTBOX};`,
    presentWhen: MigrationSql.tableExists(OUTBOX)
  },
  {
    name: "durability_0011_jobs_queue_order",
    // A queue's jobs in the order they were added, and its dead letters in the order they failed, a page at a
    // time (`list`, `deadLetters.list`, redrive, the inspector): without them a page sorts the whole queue (37 ms
    // for 100 000 jobs in bench I1), a deep page as much as the first.
    up: `CREATE INDEX ${JOBS}_queue_seq_idx ON ${JOBS} (queue, seq);
      CREATE INDEX ${DEAD_LETTERS}_queue_failed_idx ON ${DEAD_LETTERS} (queue, failed_at, id)`,
    down: `DROP INDEX IF EXISTS ${DEAD_LETTERS}_queue_failed_idx;
      DROP INDEX IF EXISTS ${JOBS}_queue_seq_idx;`,
    presentWhen: MigrationSql.indexExists(`${JOBS}_queue_seq_idx`)
  },
  {
    name: "durability_0012_jobs_retention_timer",
    // Retention by age was a record of its own in this table (key "/retention", queue ""); it is an engine
    // timer now, which the jobs set again when they are made (a kept job with an age bound gets it back).
    up: `DELETE FROM ${JOBS} WHERE key = '/retention' AND queue = ''`,
    // Nothing to put back: a version that wants the record makes it again at its next settle.
    down: `DELETE FROM ${JOBS} WHERE 0;`
  },
  {
    name: "durability_0014_jobs_state_counts",
    // The inspector's counts by state read index ranges only, whatever the data's shape: a queue's pending jobs
    // split at `now` (waiting from delayed), and its leased ones (active elsewhere) through a partial index as
    // small as the leases out. Without them one queue of 100 000 waiting jobs made every overview read them all.
    // A queue's jobs of one status in the order they were added serve the inspector's page of a state: without it
    // a page of failed jobs walked the whole queue (34 ms for 200 000 waiting ones in bench I1).
    up: `CREATE INDEX ${JOBS}_queue_due_idx ON ${JOBS} (queue, status, next_attempt_at);
      CREATE INDEX ${JOBS}_queue_leased_idx ON ${JOBS} (queue, next_attempt_at) WHERE leased_until IS NOT NULL;
      CREATE INDEX ${JOBS}_queue_status_seq_idx ON ${JOBS} (queue, status, seq)`,
    down: `DROP INDEX IF EXISTS ${JOBS}_queue_status_seq_idx;
      DROP INDEX IF EXISTS ${JOBS}_queue_leased_idx;
      DROP INDEX IF EXISTS ${JOBS}_queue_due_idx;`,
    presentWhen: MigrationSql.indexExists(`${JOBS}_queue_due_idx`)
  },
  {
    name: "durability_0019_jobs_concurrency_keys",
    // A queue's concurrency by key: each job's key, computed from its payload at `add` (so it is durable), whether
    // it waits for a running job of its key to end (`waiting_key`), and its round (`turn`: a key's jobs take
    // successive rounds, so start order goes round by round across keys; 0 in objects without keys). The start
    // order's index takes the round (0 everywhere else: the same order, the same plan). The others are partial, as
    // small as the jobs with a key, those waiting for it, the leases out, and the rounds of jobs without a key.
    up: `ALTER TABLE ${JOBS} ADD COLUMN concurrency_key TEXT;
      ALTER TABLE ${JOBS} ADD COLUMN waiting_key INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE ${JOBS} ADD COLUMN turn INTEGER NOT NULL DEFAULT 0;
      DROP INDEX IF EXISTS ${JOBS}_order_idx;
      CREATE INDEX ${JOBS}_order_turn_idx ON ${JOBS} (status, priority DESC, turn, seq);
      CREATE INDEX ${JOBS}_key_turn_idx ON ${JOBS} (queue, concurrency_key, turn) WHERE concurrency_key IS NOT NULL;
      CREATE INDEX ${JOBS}_key_waiting_idx ON ${JOBS} (queue, concurrency_key, priority DESC, turn, seq) WHERE waiting_key = 1;
      CREATE INDEX ${JOBS}_key_leased_idx ON ${JOBS} (queue, concurrency_key) WHERE leased_until IS NOT NULL;
      CREATE INDEX ${JOBS}_keyless_turn_idx ON ${JOBS} (turn) WHERE concurrency_key IS NULL AND turn > 0`,
    down: `DROP INDEX IF EXISTS ${JOBS}_keyless_turn_idx;
      DROP INDEX IF EXISTS ${JOBS}_key_leased_idx;
      DROP INDEX IF EXISTS ${JOBS}_key_waiting_idx;
      DROP INDEX IF EXISTS ${JOBS}_key_turn_idx;
      DROP INDEX IF EXISTS ${JOBS}_order_turn_idx;
      CREATE INDEX ${JOBS}_order_idx ON ${JOBS} (status, priority DESC, seq);
      ALTER TABLE ${JOBS} DROP COLUMN turn;
      ALTER TABLE ${JOBS} DROP COLUMN waiting_key;
      ALTER TABLE ${JOBS} DROP COLUMN concurrency_key;`,
    presentWhen: MigrationSql.columnExists(JOBS, "concurrency_key")
  },
  {
    name: "durability_0020_jobs_cancel_on",
    // The event key whose arrival cancels the job (`cancelOn`), indexed where it is set, so an event finds its jobs
    // with one statement whatever the table's size.
    up: `ALTER TABLE ${JOBS} ADD COLUMN cancel_on TEXT;
      CREATE INDEX ${JOBS}_cancel_on_idx ON ${JOBS} (cancel_on) WHERE cancel_on IS NOT NULL`,
    down: `DROP INDEX IF EXISTS ${JOBS}_cancel_on_idx;
      ALTER TABLE ${JOBS} DROP COLUMN cancel_on;`,
    presentWhen: MigrationSql.columnExists(JOBS, "cancel_on")
  },
  {
    name: "durability_0022_jobs_batches",
    // A batched queue's open wait for more jobs (`batch.waitMs`): until when its due jobs wait, kept with the
    // queue so an eviction during the wait neither loses it nor starts it over.
    up: `ALTER TABLE ${QUEUES} ADD COLUMN batch_until INTEGER`,
    down: `ALTER TABLE ${QUEUES} DROP COLUMN batch_until;`,
    presentWhen: MigrationSql.columnExists(QUEUES, "batch_until")
  }
]
