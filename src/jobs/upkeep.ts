/**
 * Retention by age without new activity: one durable timer of the jobs table (key `retention`), due
 * when the oldest kept finished job passes its queue's `ageMs`. Its fire trims every queue by age and
 * sets itself to the next such time, or lets itself go when no finished job is kept: the one alarm
 * wakes the object for it, durably, with no polling and no record of its own.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { TimerHandle } from "../engine/DurableTable.js"
import type { StorageError } from "../shared/Errors.js"
import type { StorageService } from "../engine/StorageService.js"
import * as Flow from "./flow.js"
import * as JobsTable from "./jobsTable.js"

export const KEY = "retention"

/** A queue's age bound for one finished state. */
export interface AgeBound {
  readonly queue: string
  readonly status: "completed" | "failed"
  readonly ageMs: number
}

/** Makes the retention timer due no later than `at` (inside the transaction that kept a job until then). */
export const due = (timers: TimerHandle, at: number): Effect.Effect<void, StorageError> => timers.setBy(KEY, at)

/** The timer's fire: every bound's finished jobs past their age, deleted (recorded in `out`). */
export const trim = (
  context: Flow.Context,
  out: Flow.Changes,
  bounds: ReadonlyArray<AgeBound>,
  now: number
): Effect.Effect<void, StorageError> =>
  Effect.forEach(bounds, ({ ageMs, queue, status }) => Flow.trim(context, out, queue, status, { ageMs }, now, undefined), {
    discard: true
  })

/** When a kept job next passes its age (one past the bound: the trim deletes jobs finished strictly before `now - ageMs`). */
const nextAt = (storage: StorageService, bounds: ReadonlyArray<AgeBound>): Effect.Effect<number | undefined, StorageError> =>
  Effect.gen(function*() {
    let next: number | undefined
    for (const { ageMs, queue, status } of bounds) {
      const [oldest] = yield* JobsTable.oldestFinished(storage, queue, status)
      if (typeof oldest?.at === "number") next = Math.min(next ?? Number.MAX_SAFE_INTEGER, oldest.at + ageMs + 1)
    }
    return next
  })

/** After a trim: the timer set to the next time a kept job passes its age, or left gone. */
export const reschedule = (
  storage: StorageService,
  timers: TimerHandle,
  bounds: ReadonlyArray<AgeBound>,
  now: number
): Effect.Effect<void, StorageError> =>
  Effect.flatMap(nextAt(storage, bounds), (next) => next === undefined ? Effect.void : timers.set(KEY, Math.max(next, now)))

/**
 * When the jobs are made: a kept job with an age bound has the timer (stored data from before the
 * timer, or bounds that changed since the last settle), so it goes even if nothing else happens.
 */
export const ensure = (
  storage: StorageService,
  timers: TimerHandle,
  bounds: ReadonlyArray<AgeBound>,
  now: number
): Effect.Effect<void, StorageError> =>
  bounds.length === 0 ? Effect.void : Effect.flatMap(nextAt(storage, bounds), (next) =>
    next === undefined ? Effect.void : due(timers, Math.max(next, now)))
