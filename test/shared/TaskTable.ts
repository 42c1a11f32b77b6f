/**
 * A minimal capability for engine tests: a `test_tasks` table with the standard
 * attempt columns, and handlers chosen per test. It exercises the whole attempt
 * lifecycle without depending on the operations or named-alarm capabilities.
 */
import { Clock, Effect } from "effect"
import { DurableAttemptTimeoutError } from "../../src/shared/Errors.js"
import type * as Lifecycle from "../../src/engine/Lifecycle.js"
import * as RetryPolicy from "../../src/engine/RetryPolicy.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import { StorageService } from "../../src/engine/StorageService.js"

export const CREATE_TABLE = `
  CREATE TABLE IF NOT EXISTS test_tasks (
    id TEXT PRIMARY KEY,
    generation_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    attempt INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    last_error_name TEXT,
    result TEXT
  );
  CREATE INDEX IF NOT EXISTS test_tasks_pending_idx ON test_tasks (status, next_attempt_at);
`

export interface TaskRow {
  readonly id: string
  readonly generation_id: string
  readonly status: string
  readonly attempt: number
  readonly next_attempt_at: number
  readonly last_error: string | null
  readonly last_error_name: string | null
  readonly result: string | null
}

export type Handler = (execution: Scheduler.Execution) => Effect.Effect<unknown, unknown>

export interface TaskTableOptions {
  readonly handler: Handler
  readonly maxAttempts?: number
  readonly attemptTimeoutMs?: number
  readonly schedule?: RetryPolicy.RetrySchedule
  readonly onEvent?: Lifecycle.LifecycleHook
  readonly kind?: string
  /** The table's durable timers. */
  readonly timers?: Scheduler.Timers
}

export const table = (options: TaskTableOptions): Effect.Effect<Scheduler.DurableTable, never, StorageService> =>
  Effect.map(StorageService, (storage) => ({
  kind: options.kind ?? "tasks",
  table: "test_tasks",
  keyColumn: "id",
  policy: () => ({
    maxAttempts: options.maxAttempts ?? RetryPolicy.DEFAULT_MAX_ATTEMPTS,
    schedule: options.schedule ?? RetryPolicy.defaultSchedule,
    attemptTimeoutMs: options.attemptTimeoutMs ?? RetryPolicy.DEFAULT_ATTEMPT_TIMEOUT_MS,
    timeoutError: (timeoutMs) =>
      new DurableAttemptTimeoutError({ message: `Task attempt timed out after ${timeoutMs} ms`, timeoutMs })
  }),
  run: options.handler,
  complete: (execution, value) =>
    Effect.map(
      storage.exec(
        `UPDATE test_tasks SET status = 'completed', result = ?, last_error = NULL, last_error_name = NULL
         WHERE id = ? AND generation_id = ? AND status = 'pending' AND attempt = ? RETURNING id`,
        [JSON.stringify(value ?? null), execution.key, execution.generation, execution.attempt]
      ),
      (rows) => rows.length > 0
    ),
  describe: (row) => `task "${String(row.id)}"`,
  entity: (row) => ({ entityKind: "task", id: String(row.id), generation: String(row.generation_id) }),
  ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
  ...(options.timers === undefined ? {} : { timers: options.timers })
}))

/** Creates the table and attaches a task participant to the scheduler. */
export const attach = (options: TaskTableOptions) =>
  Effect.gen(function*() {
    const storage = yield* StorageService
    yield* storage.exec(CREATE_TABLE)
    const scheduler = yield* Scheduler.Scheduler
    return yield* scheduler.attach(yield* table(options))
  })

let generations = 0

/** Inserts (or replaces) a pending task due at `dueAt` through the engine, so the alarm is reconciled. */
export const register = (handle: Scheduler.TableHandle, id: string, dueAt?: number, generation?: string) =>
  Effect.gen(function*() {
    const storage = yield* StorageService
    const at = dueAt ?? (yield* Clock.currentTimeMillis)
    const gen = generation ?? `g${++generations}`
    yield* handle.write(
      storage.exec(
        `INSERT INTO test_tasks (id, generation_id, status, attempt, next_attempt_at) VALUES (?, ?, 'pending', 0, ?)
         ON CONFLICT (id) DO UPDATE SET generation_id = excluded.generation_id, status = 'pending', attempt = 0,
           next_attempt_at = excluded.next_attempt_at, last_error = NULL, last_error_name = NULL, result = NULL`,
        [id, gen, at]
      )
    )
    return gen
  })

export const read = (id: string) =>
  Effect.flatMap(StorageService, (storage) =>
    Effect.map(
      storage.exec("SELECT * FROM test_tasks WHERE id = ?", [id]),
      (rows) => rows[0] as unknown as TaskRow | undefined
    ))

export const all = Effect.flatMap(StorageService, (storage) =>
  Effect.map(storage.exec("SELECT * FROM test_tasks ORDER BY id"), (rows) => rows as unknown as ReadonlyArray<TaskRow>))
