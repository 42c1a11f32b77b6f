/**
 * A schedule's slots are durable timers: a schedule waiting for its next run (no run in progress)
 * has one timer of the schedules' table, under its row's key, at its `next_attempt_at` (its next
 * slot, or a manual run asked for). The timer's fire picks the run in its transaction (`Runs.pick`):
 * a run starts (the record is claimable then, and only then), or the schedule moves to its next slot
 * (the timer with it), or it ends. The engine's claim path sees runs alone.
 *
 * Every write that changes a waiting schedule's time or its pause ends with `sync`, in its transaction.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { PendingRecord, TimerHandle } from "../engine/DurableTable.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import type { StorageError } from "../shared/Errors.js"
import * as Runs from "./runs.js"
import * as SchedulesTable from "./schedulesTable.js"

/**
 * Whether the schedule as stored waits for a slot timer: pending, no run in progress, not paused (or
 * a manual run asked). Its owner counts and lists the waiting ones with the same condition in SQL.
 */
export const waits = (row: Row): boolean =>
  row.status === "pending" && row.run_slot === null && (Number(row.paused) === 0 || row.manual_at !== null)

/** In a transaction: the schedule's timer as its row says (set at its time while it waits, gone otherwise). */
export const sync = (storage: StorageService, timers: TimerHandle, key: string): Effect.Effect<void, StorageError> =>
  Effect.flatMap(SchedulesTable.read(storage, key), (row) => syncRow(timers, key, row))

const syncRow = (timers: TimerHandle, key: string, row: Row | undefined): Effect.Effect<void, StorageError> =>
  row !== undefined && waits(row) ? timers.set(key, Number(row.next_attempt_at)) : Effect.asVoid(timers.cancel(key))

/**
 * In a transaction, after a write of the schedule (or its slot timer came due): the schedule as its row
 * now says. A waiting schedule due by `now` starts the run the plan picks (made pending, to start at
 * once while a permit is free) or moves to its next slot or ends; a waiting one not due yet gets its
 * timer at its time; any other (removed, paused, running, ended) has none.
 */
export const update = (parts: Runs.Parts, timers: TimerHandle, key: string, now: number): Effect.Effect<
  ReadonlyArray<PendingRecord>,
  StorageError
> =>
  Effect.gen(function*() {
    const row = yield* SchedulesTable.read(parts.storage, key)
    if (row === undefined || !waits(row) || Number(row.next_attempt_at) > now) {
      yield* syncRow(timers, key, row)
      return []
    }
    const picked = yield* Runs.pick(parts, row, now)
    if (picked.run) {
      // A timer left from before the run (its own time) has nothing more to do.
      yield* timers.cancel(key)
      return [{ key, at: Number(row.next_attempt_at), start: true }]
    }
    yield* sync(parts.storage, timers, key)
    return []
  })

/** The slot timer came due (in the transaction that took it). */
export const fire = (parts: Runs.Parts, timers: TimerHandle, key: string, now: number) =>
  Effect.map(update(parts, timers, key, now), (pending) => ({ pending }))

/**
 * When the schedules are made: every waiting schedule has its timer (schedules stored before slots
 * were timers waited as records). Counted first, so an object whose timers are all there pays two counts.
 */
export const resync = (storage: StorageService, timers: TimerHandle): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    if ((yield* SchedulesTable.countWaiting(storage)) === (yield* timers.count)) return
    for (const row of yield* SchedulesTable.waiting(storage)) {
      const timer = yield* timers.get(String(row.key))
      if (timer === undefined) yield* timers.set(String(row.key), Number(row.next_attempt_at))
    }
  })
