/**
 * `SchedulesObject`: recurring schedules written against the public promise API (`DurabilitySchedules`
 * on a shared `DurabilityScheduler`), over real SQLite storage and the real alarm, as an application
 * would. Every run's attempt and every `alarm()` delivery is recorded in the object's own tables,
 * which survive resets; the scenarios read them over RPC.
 *
 * One handler, `tick`, records each attempt and returns. A hold (`hold(key, runNumber, attempt)`,
 * stored so that it outlives a reset) keeps that one attempt open until `release` opens its gate or
 * the run's signal is aborted; any other attempt of the run is not held.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  DurabilityScheduler,
  DurabilitySchedules,
  type DurableScheduleInfo,
  type DurableScheduleOptions,
  type DurableScheduleRun,
  type DurableScheduleTiming,
  type DurableScheduleUpsertResult
} from "../../../src/index.js"
import { Gates } from "./gates.js"

/** The settings the scenarios compute their expectations from. */
export const SCHEDULES = {
  alarmMinDelayMs: 1_000,
  retryDelayMs: 20,
  maxAttempts: 3,
  attemptTimeoutMs: 10_000
} as const

/** Every schedule's payload (null when `upsert` was given none). */
export type Tick = { readonly tag?: string } | null

export type ScheduleView = DurableScheduleInfo<Tick>

/** One attempt of one run, as the handler recorded it. */
export interface RunCall {
  readonly seq: number
  readonly key: string
  readonly scheduled_time: number
  readonly run_number: number
  readonly attempt: number
  readonly manual: number
  readonly idempotency_key: string
  readonly tag: string | null
  readonly instance: string
  /** `Date.now()` when the handler started. */
  readonly started_at: number
  readonly ended_at: number | null
  readonly outcome: "running" | "completed" | "failed"
  /** 1 when this instance's `alarm()` was in progress as the handler started (the platform alarm woke the run). */
  readonly in_alarm: number
  /** 1 when the attempt waited on a hold. */
  readonly held: number
  readonly aborted: number
}

export interface ScheduleAlarmRecord {
  readonly seq: number
  /** `Date.now()` when `alarm()` was entered. */
  readonly at: number
  readonly instance: string
  /** `getAlarm()` when `alarm()` was entered. */
  readonly seen: number | null
  /** `Date.now()` when `alarm()` returned: the pass's last write (the alarm it re-armed) came before. */
  readonly ended_at: number | null
}

/** The stored alarm, and the clock read after it: a reading taken before the alarm's time shows the alarm as armed. */
export interface AlarmReading {
  readonly alarmAt: number | null
  readonly readAt: number
}

/** A stored schedule row (the columns the scenarios read). */
export interface ScheduleRow {
  readonly key: string
  readonly schedule: string
  readonly schedule_key: string
  readonly generation_id: string
  readonly status: string
  readonly attempt: number
  readonly next_attempt_at: number
  readonly anchor_at: number
  readonly paused: number
  readonly slot_at: number | null
  readonly manual_at: number | null
  readonly run_slot: number | null
  readonly run_number: number
  readonly run_count: number
  readonly missed_count: number
  readonly last_slot: number | null
  readonly updated_at: number
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS schedule_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    scheduled_time INTEGER NOT NULL,
    run_number INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    manual INTEGER NOT NULL,
    idempotency_key TEXT NOT NULL,
    tag TEXT,
    instance TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    outcome TEXT NOT NULL DEFAULT 'running',
    in_alarm INTEGER NOT NULL,
    held INTEGER NOT NULL DEFAULT 0,
    aborted INTEGER NOT NULL DEFAULT 0
  );
  CREATE TABLE IF NOT EXISTS schedule_alarms (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    instance TEXT NOT NULL,
    seen INTEGER,
    ended_at INTEGER
  );
  CREATE TABLE IF NOT EXISTS schedule_holds (
    key TEXT NOT NULL,
    run_number INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    PRIMARY KEY (key, run_number, attempt)
  );
`

const holdName = (key: string, runNumber: number, attempt: number) => `${key}#${runNumber}#${attempt}`

/** Rejects with the signal's reason once it is aborted; never settles if the object resets first. */
const untilAborted = (signal: AbortSignal): Promise<never> =>
  new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener("abort", () => reject(signal.reason), { once: true })
  })

export class SchedulesObject extends DurableObject {
  readonly instance = crypto.randomUUID()
  /** When this instance was made (a reset's next call, or the alarm, makes the next one). */
  readonly bornAt = Date.now()
  readonly records = this.ctx.storage.sql.exec(CREATE)
  /** `alarm()` calls of this instance in progress. */
  private alarmsRunning = 0
  /** In memory: a reset loses them, but the holds they open are stored. */
  private readonly gates = new Gates()

  readonly scheduler = new DurabilityScheduler({
    context: this.ctx,
    alarmMinDelayMs: SCHEDULES.alarmMinDelayMs,
    // Not the console: the test pool hangs when an instance it reset writes to the console.
    log: () => undefined
  })

  readonly schedules = new DurabilitySchedules({
    scheduler: this.scheduler,
    attemptTimeoutMs: SCHEDULES.attemptTimeoutMs,
    retries: { maxAttempts: SCHEDULES.maxAttempts, delay: () => SCHEDULES.retryDelayMs },
    handlers: {
      tick: (run: DurableScheduleRun<Tick>) => this.record(run)
    }
  })

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    const seen = await this.ctx.storage.getAlarm()
    const sql = this.ctx.storage.sql
    const [row] = sql.exec<{ seq: number }>(
      "INSERT INTO schedule_alarms (at, instance, seen) VALUES (?, ?, ?) RETURNING seq",
      Date.now(),
      this.instance,
      seen
    ).toArray()
    this.alarmsRunning++
    try {
      await this.schedules.alarm(info)
    } finally {
      this.alarmsRunning--
      sql.exec("UPDATE schedule_alarms SET ended_at = ? WHERE seq = ?", Date.now(), row!.seq)
    }
  }

  /** Runs one attempt, recording it in `schedule_calls`. */
  private async record(run: DurableScheduleRun<Tick>): Promise<void> {
    const sql = this.ctx.storage.sql
    const held = sql.exec(
      "SELECT 1 AS held FROM schedule_holds WHERE key = ? AND run_number = ? AND attempt = ?",
      run.key,
      run.runNumber,
      run.attempt
    ).toArray().length > 0
    const [row] = sql.exec<{ seq: number }>(
      `INSERT INTO schedule_calls (key, scheduled_time, run_number, attempt, manual, idempotency_key, tag, instance,
         started_at, in_alarm, held)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
      run.key,
      run.scheduledTime,
      run.runNumber,
      run.attempt,
      run.manual ? 1 : 0,
      run.idempotencyKey,
      run.payload?.tag ?? null,
      this.instance,
      Date.now(),
      this.alarmsRunning > 0 ? 1 : 0,
      held ? 1 : 0
    ).toArray()
    const seq = row!.seq
    run.signal.addEventListener("abort", () => void sql.exec("UPDATE schedule_calls SET aborted = 1 WHERE seq = ?", seq), {
      once: true
    })
    const end = (outcome: "completed" | "failed") =>
      sql.exec("UPDATE schedule_calls SET ended_at = ?, outcome = ? WHERE seq = ?", Date.now(), outcome, seq)
    try {
      if (held) await Promise.race([this.gates.opened(holdName(run.key, run.runNumber, run.attempt)), untilAborted(run.signal)])
      end("completed")
    } catch (error) {
      end("failed")
      throw error
    }
  }

  // RPC surface used by the scenarios (none of them rejects: a rejected RPC breaks isolated storage).

  upsert(key: string, timing: DurableScheduleTiming, options?: DurableScheduleOptions<Tick>): Promise<DurableScheduleUpsertResult> {
    return this.schedules.tick.upsert(key, timing, options)
  }

  get(key: string): Promise<ScheduleView | undefined> {
    return this.schedules.tick.get(key)
  }

  async list(): Promise<ReadonlyArray<ScheduleView>> {
    return (await this.schedules.tick.list()).items
  }

  pause(key: string): Promise<boolean> {
    return this.schedules.tick.pause(key)
  }

  resume(key: string): Promise<boolean> {
    return this.schedules.tick.resume(key)
  }

  trigger(key: string): Promise<boolean> {
    return this.schedules.tick.trigger(key)
  }

  remove(key: string): Promise<boolean> {
    return this.schedules.tick.remove(key)
  }

  /** Holds attempt `attempt` of run `runNumber` of `key` open until `release` (stored: it outlives a reset). */
  hold(key: string, runNumber: number, attempt: number): void {
    this.ctx.storage.sql.exec(
      "INSERT OR IGNORE INTO schedule_holds (key, run_number, attempt) VALUES (?, ?, ?)",
      key,
      runNumber,
      attempt
    )
  }

  /** Lets a held attempt return (or, if it has not started, not be held at all). */
  release(key: string, runNumber: number, attempt: number): void {
    this.ctx.storage.sql.exec(
      "DELETE FROM schedule_holds WHERE key = ? AND run_number = ? AND attempt = ?",
      key,
      runNumber,
      attempt
    )
    this.gates.open(holdName(key, runNumber, attempt))
  }

  /** The stored schedule rows, by key. */
  rows(): ReadonlyArray<ScheduleRow> {
    return this.ctx.storage.sql.exec("SELECT * FROM durability_schedules ORDER BY key").toArray() as unknown as ReadonlyArray<
      ScheduleRow
    >
  }

  calls(): ReadonlyArray<RunCall> {
    return this.ctx.storage.sql.exec("SELECT * FROM schedule_calls ORDER BY seq").toArray() as unknown as ReadonlyArray<RunCall>
  }

  alarms(): ReadonlyArray<ScheduleAlarmRecord> {
    return this.ctx.storage.sql.exec("SELECT * FROM schedule_alarms ORDER BY seq").toArray() as unknown as ReadonlyArray<
      ScheduleAlarmRecord
    >
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  async alarmReading(): Promise<AlarmReading> {
    const alarmAt = await this.ctx.storage.getAlarm()
    return { alarmAt, readAt: Date.now() }
  }

  now(): number {
    return Date.now()
  }

  whoami(): string {
    return this.instance
  }

  born(): { readonly instance: string; readonly at: number } {
    return { instance: this.instance, at: this.bornAt }
  }
}
