/**
 * The retained log's tables: its records (offset-addressed, deduplicated by key), the counter of
 * offsets and stored bytes, the consumers' cursors, the index of segments flushed to cold storage,
 * and, when leases are on, the leased ranges and each consumer's high-water mark of leased offsets.
 * @internal
 */
import type * as Migrations from "../engine/Migrations.js"
import * as MigrationSql from "../engine/migrationSql.js"

export const RECORDS = "durability_log_records"
export const LOG_SEQ = "durability_log_seq"
export const CURSORS = "durability_log_cursors"
export const SEGMENTS = "durability_log_segments"
export const LOG_LEASES = "durability_log_leases"
export const ALLOCATIONS = "durability_log_allocations"

/** The migrations' capability names: the log, and its leases (applied only when leases are on). */
export const CAPABILITY = "log"
export const LEASES_CAPABILITY = "logLeases"

/** The log's own tables. */
export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0024_log",
    // The counter is one row made here, so an append reserves its offsets with one UPDATE … RETURNING and
    // never reads the table's maximum (which a trim would have moved). No index on appended_at: retention reads
    // the oldest records by offset (appended in offset order), and each index row is one more write per append.
    up: `CREATE TABLE ${RECORDS} (
        log_offset INTEGER PRIMARY KEY,
        dedup_key TEXT NOT NULL UNIQUE,
        payload TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        appended_at INTEGER NOT NULL
      );
      CREATE TABLE ${CURSORS} (
        consumer TEXT PRIMARY KEY,
        cursor_offset INTEGER NOT NULL,
        committed_at INTEGER NOT NULL
      );
      CREATE TABLE ${SEGMENTS} (
        first_offset INTEGER PRIMARY KEY,
        last_offset INTEGER NOT NULL,
        locator TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        flushed_at INTEGER NOT NULL
      );
      CREATE INDEX ${SEGMENTS}_last_idx ON ${SEGMENTS} (last_offset);
      CREATE TABLE ${LOG_SEQ} (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        next_offset INTEGER NOT NULL,
        total_bytes INTEGER NOT NULL
      );
      INSERT INTO ${LOG_SEQ} (id, next_offset, total_bytes) VALUES (0, 0, 0)`,
    down: `DROP TABLE IF EXISTS ${LOG_SEQ};
      DROP TABLE IF EXISTS ${SEGMENTS};
      DROP TABLE IF EXISTS ${CURSORS};
      DROP TABLE IF EXISTS ${RECORDS};`,
    presentWhen: MigrationSql.tableExists(RECORDS)
  }
]

/** The leases' tables (capability "logLeases"). */
export const leaseMigrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0025_log_leases",
    // A consumer's reclaimable ranges are found by (consumer, state, first_offset); its ranges in order, for
    // the ack's walk over an unbroken run, by (consumer, first_offset).
    up: `CREATE TABLE ${LOG_LEASES} (
        batch_id TEXT PRIMARY KEY,
        consumer TEXT NOT NULL,
        first_offset INTEGER NOT NULL,
        last_offset INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('active', 'pending', 'acked', 'skipped')),
        attempt INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX ${LOG_LEASES}_claim_idx ON ${LOG_LEASES} (consumer, state, first_offset);
      CREATE INDEX ${LOG_LEASES}_order_idx ON ${LOG_LEASES} (consumer, first_offset);
      CREATE TABLE ${ALLOCATIONS} (
        consumer TEXT PRIMARY KEY,
        allocated_offset INTEGER NOT NULL
      )`,
    down: `DROP TABLE IF EXISTS ${ALLOCATIONS};
      DROP TABLE IF EXISTS ${LOG_LEASES};`,
    presentWhen: MigrationSql.tableExists(LOG_LEASES)
  }
]
