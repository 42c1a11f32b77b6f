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
