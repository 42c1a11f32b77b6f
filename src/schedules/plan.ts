/**
 * The decisions of a recurring schedule, as pure functions of its stored state and the time: which
 * run starts when its record comes due (catch-up), and where its cursor goes when a run settles
 * (overlap). They return decisions; the capability writes them in the claim's or the settle's
 * transaction.
 *
 * The cursor is the schedule's next unrun slot, computed from the previous slot, never from "now",
 * so slots never drift; only a changed timing (or catch-up skipping) moves it from the clock.
 * @internal
 */
import * as Timing from "./timing.js"

/**
 * What becomes of slots missed while the object was evicted or the schedule paused: none run (`skip`), the
 * latest runs once (`latest`), or each runs (`all`, up to a bound).
 */
export type CatchUp = "skip" | "latest" | "all"
/**
 * What becomes of a slot that comes due while a run is active: it is passed over (`skip`) or runs after it
 * (`wait`).
 */
export type Overlap = "skip" | "wait"

/** At most this many missed slots run under `catchUp: "all"`; older ones are counted as missed. */
export const MAX_CATCH_UP_RUNS = 100

/** A slot that starts at most this late counts as on time (default of `graceMs`). */
export const DEFAULT_GRACE_MS = 60_000

export interface State {
  readonly timing: Timing.Timing
  readonly bounds: Timing.Bounds
  readonly catchUp: CatchUp
  readonly overlap: Overlap
  readonly graceMs: number
  readonly paused: boolean
  /** The next unrun slot; null when no slot is left (past `endAt`, or `limit` reached). */
  readonly cursor: number | null
  /** A requested manual run (`trigger`). */
  readonly manualAt: number | null
  /** Slots up to this time came due while a run was active and waited for it (`overlap: "wait"`): they are on time. */
  readonly waitedAt: number | null
  /** Scheduled (not manual) runs started so far, for `limit`. */
  readonly scheduledRuns: number
  readonly limit: number | null
}

export type Start =
  | {
    readonly _tag: "Run"
    /** The slot the run is for (a manual run: the time it was requested). */
    readonly slot: number
    readonly manual: boolean
    readonly cursor: number | null
    /** Slots passed over without a run. */
    readonly missed: number
  }
  | {
    readonly _tag: "Wait"
    readonly cursor: number | null
    readonly missed: number
  }

const nextScheduled = (state: State, after: number, runsAfter: number): number | null =>
  state.limit !== null && runsAfter >= state.limit ? null : Timing.nextAfter(state.timing, state.bounds, after) ?? null

/** The first slot at or after `at` (a new or re-timed schedule starts there). */
export const firstFrom = (state: Pick<State, "timing" | "bounds" | "limit" | "scheduledRuns">, at: number): number | null =>
  state.limit !== null && state.scheduledRuns >= state.limit
    ? null
    : Timing.nextAfter(state.timing, state.bounds, at - 1) ?? null

/** What starts when the schedule's record is claimed at `now` (its first attempt of a run). */
export const start = (state: State, now: number): Start => {
  if (state.manualAt !== null && state.manualAt <= now) {
    return { _tag: "Run", slot: state.manualAt, manual: true, cursor: state.cursor, missed: 0 }
  }
  if (state.paused || state.cursor === null || state.cursor > now) {
    return { _tag: "Wait", cursor: state.cursor, missed: 0 }
  }
  const left = state.limit === null ? Number.MAX_SAFE_INTEGER : state.limit - state.scheduledRuns
  if (left <= 0) return { _tag: "Wait", cursor: null, missed: 0 }
  const keep = state.catchUp === "all" ? Math.min(MAX_CATCH_UP_RUNS, left) : 1
  const due = Timing.dueSlots(state.timing, state.bounds, state.cursor, now, keep)
  const total = due.earlier + due.slots.length
  const latest = due.slots[due.slots.length - 1]
  if (latest === undefined) return { _tag: "Wait", cursor: nextScheduled(state, now, state.scheduledRuns), missed: 0 }
  const run = (slot: number, missed: number): Start => ({
    _tag: "Run",
    slot,
    manual: false,
    cursor: nextScheduled(state, slot, state.scheduledRuns + 1),
    missed
  })
  switch (state.catchUp) {
    case "all":
      return run(due.slots[0]!, due.earlier)
    case "latest":
      return run(latest, total - 1)
    case "skip": {
      const onTime = now - latest <= state.graceMs || (state.waitedAt !== null && latest <= state.waitedAt)
      return onTime
        ? run(latest, total - 1)
        : { _tag: "Wait", cursor: nextScheduled(state, now, state.scheduledRuns), missed: total }
    }
  }
}

export interface Settle {
  readonly cursor: number | null
  readonly waitedAt: number | null
  readonly manualAt: number | null
  /** Slots dropped because they came due while the run was active (`overlap: "skip"`). */
  readonly missed: number
}

/**
 * Where the schedule goes when a run (started at `runStartedAt`, for `runSlot`) settles at `now`.
 * Slots that came due during the run are dropped (`overlap: "skip"`) or wait and count as on time
 * (`"wait"`); slots already overdue when the run started stay for catch-up either way.
 */
export const settle = (
  state: State,
  run: { readonly slot: number; readonly manual: boolean; readonly startedAt: number },
  now: number
): Settle => {
  // A trigger during a manual run asked for another run: it stays.
  const manualAt = run.manual && state.manualAt === run.slot ? null : state.manualAt
  const { cursor } = state
  if (cursor === null || cursor > now) return { cursor, waitedAt: state.waitedAt, manualAt, missed: 0 }
  if (cursor <= run.startedAt) return { cursor, waitedAt: state.waitedAt, manualAt, missed: 0 }
  if (state.overlap === "wait") return { cursor, waitedAt: now, manualAt, missed: 0 }
  const left = state.limit === null ? Number.MAX_SAFE_INTEGER : state.limit - state.scheduledRuns
  const dropped = Timing.dueSlots(state.timing, state.bounds, cursor, now, 1)
  return {
    cursor: left <= 0 ? null : Timing.nextAfter(state.timing, state.bounds, now) ?? null,
    waitedAt: state.waitedAt,
    manualAt,
    missed: dropped.earlier + dropped.slots.length
  }
}

/** When the record is next due: its manual run or its cursor, whichever is first; null when neither. */
export const dueAt = (state: Pick<State, "cursor" | "manualAt">): number | null =>
  state.cursor === null ? state.manualAt : state.manualAt === null ? state.cursor : Math.min(state.cursor, state.manualAt)
