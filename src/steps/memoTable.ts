/**
 * The owner of `durability_steps`, the step memos the capabilities share (keyed by capability,
 * record key, generation and step name): its schema, with the triggers that delete a capability's
 * memos with their record (`memoSchema`, in each capability's migrations), and its statements.
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"

export const MEMO_TABLE = "durability_steps"

const CREATE_MEMO = `CREATE TABLE IF NOT EXISTS ${MEMO_TABLE} (
    capability TEXT NOT NULL,
    record_key TEXT NOT NULL,
    generation TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (capability, record_key, generation, name)
  )`

/** Which records the memos of a capability belong to. */
export interface MemoTarget {
  /** Its migrations' capability name, e.g. "operations". */
  readonly capability: string
  readonly table: string
  readonly keyColumn: string
}

/** Identifiers are inlined into SQL: only the library's own constants, never user input. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

const checked = (value: string): string => {
  if (!IDENTIFIER.test(value)) throw new Error(`durability steps: ${JSON.stringify(value)} is not an SQL identifier`)
  return value
}

/**
 * The memo table (if no other capability made it yet) and the triggers that delete `capability`'s
 * memos with their record: deleted, ended (`terminal` statuses), or given a new generation. `down`
 * removes the triggers and this capability's memos; it never drops the table, which another
 * capability may use. A table rebuild (rename, create, copy) loses its triggers: a later migration
 * that rebuilds the table must create them again.
 */
export const memoSchema = (
  o: MemoTarget & { readonly terminal: ReadonlyArray<string> }
): { readonly up: string; readonly down: string; readonly presentWhen: string } => {
  const table = checked(o.table)
  const key = checked(o.keyColumn)
  const capability = checked(o.capability)
  const prefix = `${table}_steps`
  const mine = `${MEMO_TABLE} WHERE capability = '${capability}'`
  const terminal = o.terminal.map((status) => `'${checked(status)}'`).join(", ")
  return {
    up: `${CREATE_MEMO};
  CREATE TRIGGER ${prefix}_gone AFTER DELETE ON ${table} BEGIN
    DELETE FROM ${mine} AND record_key = old.${key};
  END;
  CREATE TRIGGER ${prefix}_ended AFTER UPDATE OF status ON ${table} WHEN new.status IN (${terminal}) BEGIN
    DELETE FROM ${mine} AND record_key = new.${key};
  END;
  CREATE TRIGGER ${prefix}_replaced AFTER UPDATE OF generation_id ON ${table}
    WHEN new.generation_id IS NOT old.generation_id BEGIN
    DELETE FROM ${mine} AND record_key = new.${key} AND generation <> new.generation_id;
  END`,
    // The table is made again if it went missing, so the revert cannot fail on it.
    down: `DROP TRIGGER IF EXISTS ${prefix}_gone;
  DROP TRIGGER IF EXISTS ${prefix}_ended;
  DROP TRIGGER IF EXISTS ${prefix}_replaced;
  ${CREATE_MEMO};
  DELETE FROM ${mine};`,
    presentWhen: `SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = '${prefix}_gone'`
  }
}

/** The records of one capability a memo is written for. */
export interface Records {
  /** Its migrations' capability name, e.g. "operations". */
  readonly capability: string
  /**
   * Its table's owner's statement selecting a row when the record under a key (first binding) at a
   * generation (second binding) is unfinished: a memo is written only then.
   */
  readonly current: string
}

const statements = (records: Records) => ({
  read: `SELECT value FROM ${MEMO_TABLE} WHERE capability = ? AND record_key = ? AND generation = ? AND name = ?`,
  // Fenced: only while the record is this generation and unfinished (a handler may outlive its record).
  write: `INSERT INTO ${MEMO_TABLE} (capability, record_key, generation, name, value, created_at)
      SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (
        ${records.current}
      ) ON CONFLICT DO NOTHING`
})

const cached = new Map<string, ReturnType<typeof statements>>()

const statementsOf = (records: Records) => {
  const id = `${records.capability}\u0000${records.current}`
  let found = cached.get(id)
  if (found === undefined) {
    found = statements(records)
    cached.set(id, found)
  }
  return found
}

/** One memo of a record: its stored value (`value`), in a row when there is one. */
export const read = (storage: StorageService, records: Records, key: string, generation: string, name: string): Effect.Effect<ReadonlyArray<Row>, StorageError> =>
  storage.exec(statementsOf(records).read, [records.capability, key, generation, name])

/** Stores a memo of a record while the record is this generation and unfinished (a memo stored already stays). */
export const write = (
  storage: StorageService,
  records: Records,
  memo: { readonly key: string; readonly generation: string; readonly name: string; readonly value: string; readonly createdAt: number }
): Effect.Effect<ReadonlyArray<Row>, StorageError> =>
  storage.exec(statementsOf(records).write, [
    records.capability,
    memo.key,
    memo.generation,
    memo.name,
    memo.value,
    memo.createdAt,
    memo.key,
    memo.generation
  ])
