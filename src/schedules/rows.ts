/**
 * A schedule's row read back: as the plan's state (its timing compiled once per timing and anchor)
 * and as what `get`/`list` show.
 * @internal
 */
import type { SerializedError } from "../shared/Errors.js"
import type { Row } from "../engine/StorageService.js"
import * as Json from "../shared/json.js"
import type * as Options from "./options.js"
import type * as Plan from "./plan.js"
import * as Timing from "./timing.js"

const numberOrNull = (value: unknown): number | null => value === null || value === undefined ? null : Number(value)

/** Compiling a cron parses it: done once per distinct timing and anchor, not per claim. */
export const timings = () => {
  const compiled = new Map<string, Timing.Timing>()
  return (text: string, anchor: number): Timing.Timing => {
    const id = `${anchor}\u0000${text}`
    const known = compiled.get(id)
    if (known !== undefined) return known
    const timing = Timing.compile(JSON.parse(text) as Timing.TimingSpec, anchor)
    if (compiled.size >= 1_000) compiled.clear()
    compiled.set(id, timing)
    return timing
  }
}

export type Timings = ReturnType<typeof timings>

export const boundsOf = (row: Row): Timing.Bounds => {
  const startAt = numberOrNull(row.start_at)
  const endAt = numberOrNull(row.end_at)
  return {
    ...(startAt === null ? {} : { startAt }),
    ...(endAt === null ? {} : { endAt })
  }
}

export const planState = (row: Row, timingOf: Timings): Plan.State => ({
  timing: timingOf(String(row.timing), Number(row.anchor_at)),
  bounds: boundsOf(row),
  catchUp: row.catch_up as Plan.CatchUp,
  overlap: row.overlap as Plan.Overlap,
  graceMs: Number(row.grace_ms),
  paused: Number(row.paused) === 1,
  cursor: numberOrNull(row.slot_at),
  manualAt: numberOrNull(row.manual_at),
  waitedAt: numberOrNull(row.waited_at),
  scheduledRuns: Number(row.scheduled_runs),
  limit: numberOrNull(row.run_limit)
})

/** Stable for one slot across its retries and evictions; a manual run has its own. */
export const idempotencyKey = (schedule: string, key: string, slot: number, manual: boolean): string =>
  `durability-schedule:v1:${schedule}/${key}@${manual ? "manual:" : ""}${new Date(slot).toISOString()}`

export interface RunInfo {
  readonly scheduledTime: number
  readonly manual: boolean
  readonly runNumber: number
}

/** A schedule as `get` and `list` show it. */
export interface ScheduleInfo<P = unknown> extends Options.Resolved {
  /** The handler's name. */
  readonly schedule: string
  /** The schedule's key, unique per handler. */
  readonly key: string
  /** The timing as stored: a cron expression and time zone, or an interval in milliseconds. */
  readonly timing: Timing.TimingSpec
  /** E.g. `cron "0 9 * * 1-5" in Europe/Lisbon`. */
  readonly description: string
  /** The schedule's payload. */
  readonly payload: P
  /** `ended`: no slot is left (past `endAt`, or `limit` reached) and no run is pending. */
  readonly status: "active" | "paused" | "ended"
  /** When the next run is due (its slot, or a requested manual run); null when none is. Paused: when it would be. */
  readonly nextRunAt: number | null
  /** The run in progress (executing, or waiting for its retry), if any. */
  readonly currentRun: (RunInfo & { readonly attempt: number; readonly nextAttemptAt: number; readonly lastError: SerializedError | null }) | null
  /** The last run that ended, and how (null before any). */
  readonly lastRun:
    | (RunInfo & { readonly outcome: "completed" | "failed"; readonly settledAt: number; readonly error: SerializedError | null })
    | null
  /** Runs that ended (completed or failed for good). */
  readonly runCount: number
  /** Slots passed over without a run (catch-up, overlap). */
  readonly missedCount: number
  /** When it was created (epoch milliseconds). */
  readonly createdAt: number
  /** When it was last changed (epoch milliseconds). */
  readonly updatedAt: number
}

const errorOf = (message: unknown, name: unknown): SerializedError | null =>
  message === null || message === undefined ? null : { name: name === null ? "Error" : String(name), message: String(message) }

export const infoOf = (row: Row, payload: unknown): ScheduleInfo => {
  const spec = JSON.parse(String(row.timing)) as Timing.TimingSpec
  const cursor = numberOrNull(row.slot_at)
  const runSlot = numberOrNull(row.run_slot)
  // A manual run in progress is the current run, not the next one.
  const requested = numberOrNull(row.manual_at)
  const manualAt = Number(row.run_manual) === 1 && requested === runSlot ? null : requested
  const nextRunAt = cursor === null ? manualAt : manualAt === null ? cursor : Math.min(cursor, manualAt)
  const lastSlot = numberOrNull(row.last_slot)
  return {
    schedule: String(row.schedule),
    key: String(row.schedule_key),
    timing: spec,
    description: Timing.describe(spec),
    payload,
    status: row.status === "ended" ? "ended" : Number(row.paused) === 1 ? "paused" : "active",
    nextRunAt,
    currentRun: runSlot === null ? null : {
      scheduledTime: runSlot,
      manual: Number(row.run_manual) === 1,
      runNumber: Number(row.run_number),
      attempt: Number(row.attempt),
      nextAttemptAt: Number(row.next_attempt_at),
      lastError: errorOf(row.last_error, row.last_error_name)
    },
    lastRun: lastSlot === null ? null : {
      scheduledTime: lastSlot,
      manual: Number(row.last_manual) === 1,
      runNumber: Number(row.last_run_number),
      outcome: row.last_outcome === "failed" ? "failed" : "completed",
      settledAt: Number(row.last_settled_at),
      error: errorOf(row.last_run_error, row.last_run_error_name)
    },
    runCount: Number(row.run_count),
    missedCount: Number(row.missed_count),
    startAt: numberOrNull(row.start_at),
    endAt: numberOrNull(row.end_at),
    limit: numberOrNull(row.run_limit),
    catchUp: row.catch_up as Plan.CatchUp,
    overlap: row.overlap as Plan.Overlap,
    graceMs: Number(row.grace_ms),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at)
  }
}

/** The stored payload, decoded as JSON (the schedule's codec decodes it further). */
export const storedPayload = (row: Row): unknown => Json.decode(String(row.payload))
