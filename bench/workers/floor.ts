/**
 * The floor: a hand-written object doing the minimum durable writes per operation with plain
 * `ctx.storage.sql` and `setAlarm` (insert, claim, complete), no library and no Effect. Named
 * alarms are rows of the same table (an upsert replaces the pending one, success deletes it).
 */
import { DurableObject } from "cloudflare:workers"
import { Counter, countingStorage } from "./counting.js"
import { BACKLOG_DELAY_MS, type BenchTarget, makeDriver, Tracker } from "./driver.js"

const OPERATION = 0
const NAMED = 1
const BACKLOG = 2

export class FloorBench extends DurableObject<Record<string, unknown>> implements BenchTarget {
  readonly counter = new Counter()
  readonly tracker = new Tracker()
  readonly storage: DurableObjectStorage
  readonly sql: SqlStorage

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env)
    this.storage = countingStorage(ctx.storage, this.counter)
    this.sql = this.storage.sql
    this.sql.exec(`CREATE TABLE IF NOT EXISTS floor_work (
      id TEXT PRIMARY KEY, kind INTEGER NOT NULL, due INTEGER NOT NULL, status INTEGER NOT NULL DEFAULT 0);
      CREATE INDEX IF NOT EXISTS floor_work_due ON floor_work (status, due)`)
  }

  /** Sets the alarm if it is unset or later than `at`. */
  private async arm(at: number): Promise<void> {
    const current = await this.storage.getAlarm()
    if (current === null || current > at) await this.storage.setAlarm(at)
  }

  private async run(kind: number, id: string, due: number): Promise<void> {
    if (kind === OPERATION) this.tracker.ran()
    else if (kind === NAMED) this.tracker.fired(id, due)
  }

  override async alarm(): Promise<void> {
    for (;;) {
      const due = this.sql
        .exec<{ id: string; kind: number; due: number }>(
          "SELECT id, kind, due FROM floor_work WHERE status = 0 AND due <= ? ORDER BY due LIMIT 100",
          Date.now()
        )
        .toArray()
      if (due.length === 0) break
      for (const row of due) {
        this.sql.exec("UPDATE floor_work SET status = 1 WHERE id = ?", row.id) // claim
        await this.run(row.kind, row.id, row.due)
        if (row.kind === NAMED) this.sql.exec("DELETE FROM floor_work WHERE id = ? AND status = 1", row.id)
        else this.sql.exec("UPDATE floor_work SET status = 2 WHERE id = ?", row.id) // complete
      }
    }
    const next = this.sql.exec<{ at: number | null }>("SELECT MIN(due) AS at FROM floor_work WHERE status = 0").one()
    if (next.at !== null) await this.storage.setAlarm(next.at)
  }

  reset(): void {
    this.counter.reset()
    this.tracker.reset()
  }

  async register(start: number, count: number): Promise<void> {
    const now = Date.now()
    for (let i = start; i < start + count; i++) {
      this.sql.exec("INSERT INTO floor_work (id, kind, due) VALUES (?, ?, ?)", `op-${i}`, OPERATION, now)
    }
    await this.arm(now)
  }

  waitDone(target: number, timeoutMs: number) {
    return this.tracker.waitDone(target, timeoutMs)
  }

  async scheduleAlarms(items: ReadonlyArray<{ readonly name: string; readonly at: number }>): Promise<void> {
    let earliest = Infinity
    for (const { name, at } of items) {
      this.sql.exec(
        `INSERT INTO floor_work (id, kind, due) VALUES (?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET due = excluded.due, status = 0`,
        name,
        NAMED,
        at
      )
      earliest = Math.min(earliest, at)
    }
    if (earliest !== Infinity) await this.arm(earliest)
  }

  waitAlarms(target: number, timeoutMs: number) {
    return this.tracker.waitAlarms(target, timeoutMs)
  }

  alarmSamples() {
    return this.tracker.alarmSamples()
  }

  async seed(start: number, count: number): Promise<void> {
    const at = Date.now() + BACKLOG_DELAY_MS
    for (let i = start; i < start + count; i++) {
      this.sql.exec("INSERT INTO floor_work (id, kind, due) VALUES (?, ?, ?)", `backlog-${i}`, BACKLOG, at)
    }
    await this.arm(at)
  }

  seeded(count: number): number {
    const row = this.ctx.storage.sql
      .exec<{ n: number }>("SELECT COUNT(*) AS n FROM floor_work WHERE kind = ? AND status = 0", BACKLOG)
      .one()
    return Math.min(count, row.n)
  }

  counts() {
    return this.counter.snapshot()
  }
}

export default makeDriver((env: any, binding, name) => env[binding].get(env[binding].idFromName(name)))

/**
 * The floor on this library's schema: `durability_calls` as its migrations leave it (three indexes,
 * a CHECK, the payload and a generation per row) and the very statements the library runs per
 * operation (insert, one-statement claim returning the row, conditional complete), still a plain
 * loop with no library and no Effect. What it costs over `FloorBench` is what the schema and its
 * statements cost; what the library costs over it is the library's own runtime.
 */
export class FloorSchemaBench extends FloorBench {
  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env)
    this.sql.exec(`CREATE TABLE IF NOT EXISTS durability_calls (
      id TEXT PRIMARY KEY,
      operation TEXT NOT NULL,
      payload TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
      result TEXT,
      attempt INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER NOT NULL,
      last_error TEXT,
      last_error_name TEXT,
      completed_at INTEGER,
      generation_id TEXT NOT NULL DEFAULT 'legacy',
      created_at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)));
      CREATE INDEX IF NOT EXISTS durability_calls_pending_idx ON durability_calls (status, next_attempt_at);
      CREATE INDEX IF NOT EXISTS durability_calls_created_idx ON durability_calls (created_at)`)
  }

  override async alarm(): Promise<void> {
    for (;;) {
      const due = this.sql.exec<{ key: string }>(
        `SELECT id AS key FROM durability_calls WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`,
        Date.now(),
        100
      ).toArray()
      if (due.length === 0) break
      for (const { key } of due) {
        const [row] = this.sql.exec<Record<string, SqlStorageValue>>(
          `UPDATE durability_calls SET attempt = attempt + 1 WHERE id = ? AND status = 'pending' AND next_attempt_at <= ? ` +
            `AND attempt < ? RETURNING *`,
          key,
          Date.now(),
          5
        ).toArray()
        if (row === undefined) continue
        JSON.parse(String(row.payload))
        this.tracker.ran()
        this.sql.exec(
          `UPDATE durability_calls SET status = 'completed', result = ?, completed_at = ?,
               last_error = NULL, last_error_name = NULL
             WHERE id = ? AND generation_id = ? AND status = 'pending' AND attempt = ? RETURNING id`,
          JSON.stringify(null),
          Date.now(),
          key,
          row.generation_id!,
          row.attempt!
        ).toArray()
      }
    }
    const next = this.sql.exec<{ at: number | null }>(
      "SELECT MIN(next_attempt_at) AS at FROM durability_calls WHERE status = 'pending'"
    ).one()
    if (next.at !== null) await this.storage.setAlarm(next.at)
  }

  override async register(start: number, count: number): Promise<void> {
    const now = Date.now()
    for (let i = start; i < start + count; i++) {
      this.sql.exec(
        `INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, generation_id, created_at)
           VALUES (?, ?, ?, 'pending', 0, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id`,
        `op-${i}`,
        "tick",
        JSON.stringify({ n: i }),
        now,
        crypto.randomUUID(),
        now
      ).toArray()
    }
    const current = await this.storage.getAlarm()
    if (current === null || current > now) await this.storage.setAlarm(now)
  }
}
