/**
 * Fanout's tables and their one migration: the manifest (one row per live deduplication key), the
 * deliveries (one row per message and target), the sequence counter, and the targets (one engine
 * record per target: a target's pass is what the engine claims, runs under a permit and re-times).
 * @internal
 */
import * as MigrationSql from "../engine/migrationSql.js"
import type * as Migrations from "../engine/Migrations.js"

/** The capability's name on the scheduler (and in its migrations' history). */
export const CAPABILITY = "fanout"

/** One row per live deduplication key: the message, its recipients and how many deliveries remain. */
export const MESSAGES = "durability_fanout_messages"
/** One row per (message, target) still to deliver or to dead-letter; settled rows are deleted. */
export const DELIVERIES = "durability_fanout_deliveries"
/** One row: the last `seq` given, so first deliveries keep enqueue order even across an empty queue. */
export const SEQ = "durability_fanout_seq"
/** The engine's records: one per target that has (or had) deliveries, pending while any is stored. */
export const TARGETS = "durability_fanout_targets"

/** Fanout's migrations, in order: what `Fanout.migrate` applies. */
export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0023_fanout",
    up: `CREATE TABLE ${MESSAGES} (
        key TEXT PRIMARY KEY,
        id TEXT NOT NULL,
        payload TEXT NOT NULL,
        targets TEXT NOT NULL,
        remaining INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        generation_id TEXT NOT NULL
      );
      CREATE TABLE ${DELIVERIES} (
        id TEXT PRIMARY KEY,
        message_key TEXT NOT NULL,
        target_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        phase TEXT NOT NULL CHECK (phase IN ('delivery', 'dead_letter')),
        attempt INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        last_error TEXT,
        last_error_name TEXT,
        created_at INTEGER NOT NULL,
        generation_id TEXT NOT NULL,
        dead_lettered_at INTEGER,
        dead_letter_reason TEXT
      );
      CREATE INDEX durability_fanout_deliveries_first_idx ON ${DELIVERIES} (target_id, attempt, phase, seq);
      CREATE INDEX durability_fanout_deliveries_due_idx ON ${DELIVERIES} (target_id, next_attempt_at);
      CREATE TABLE ${SEQ} (one INTEGER PRIMARY KEY CHECK (one = 1), seq INTEGER NOT NULL);
      CREATE TABLE ${TARGETS} (
        target TEXT PRIMARY KEY,
        generation_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'idle', 'failed')),
        attempt INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        last_error TEXT,
        last_error_name TEXT,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX durability_fanout_targets_pending_idx ON ${TARGETS} (status, next_attempt_at)`,
    down: `DROP TABLE IF EXISTS ${TARGETS};
      DROP TABLE IF EXISTS ${SEQ};
      DROP TABLE IF EXISTS ${DELIVERIES};
      DROP TABLE IF EXISTS ${MESSAGES};`,
    presentWhen: MigrationSql.tableExists(TARGETS)
  }
]
