/**
 * Retention by age without new activity: a record of its own in the jobs table (queue "", never a
 * user's queue) that the engine runs when the oldest kept finished job passes its queue's `ageMs`.
 * It trims every queue by age and moves itself to the next such time, or deletes itself when no
 * finished job is kept: the one alarm wakes the object for it, durably, with no polling.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { PendingRecord } from "../engine/DurableTable.js"
import type { StorageError } from "../shared/Errors.js"
import type { StorageService } from "../engine/StorageService.js"
import * as Flow from "./flow.js"
import { JOBS } from "./schema.js"

export const KEY = "/retention"

/** A queue's age bound for one finished state. */
export interface AgeBound {
  readonly queue: string
  readonly status: "completed" | "failed"
  readonly ageMs: number
}

/** Makes the upkeep record due no later than `at` (inside the transaction that kept a job until then). */
export const due = (storage: StorageService, at: number, now: number): Effect.Effect<PendingRecord, StorageError> =>
  Effect.map(
    storage.exec(
      `INSERT INTO ${JOBS} (key, queue, id, generation_id, status, attempt, next_attempt_at, run_at, priority, seq, payload, created_at)
       VALUES (?, '', 'retention', ?, 'pending', 0, ?, ?, 0, 0, 'null', ?)
       ON CONFLICT (key) DO UPDATE SET status = 'pending', attempt = 0,
         next_attempt_at = CASE WHEN status = 'pending' THEN MIN(next_attempt_at, excluded.next_attempt_at)
           ELSE excluded.next_attempt_at END
       RETURNING next_attempt_at`,
      [KEY, crypto.randomUUID(), at, at, now]
    ),
    ([row]) => ({ key: KEY, at: Number(row?.next_attempt_at ?? at) })
  )

/** The upkeep's run: every bound's finished jobs past their age, deleted (recorded in `out`). */
export const trim = (
  context: Flow.Context,
  out: Flow.Changes,
  bounds: ReadonlyArray<AgeBound>,
  now: number
): Effect.Effect<void, StorageError> =>
  Effect.forEach(bounds, ({ ageMs, queue, status }) => Flow.trim(context, out, queue, status, { ageMs }, now, undefined), {
    discard: true
  })

/** After the run: the record moved to the next time a kept job passes its age, or deleted. */
export const reschedule = (
  storage: StorageService,
  bounds: ReadonlyArray<AgeBound>,
  now: number
): Effect.Effect<ReadonlyArray<PendingRecord>, StorageError> =>
  Effect.gen(function*() {
    let next: number | undefined
    for (const { ageMs, queue, status } of bounds) {
      const [oldest] = yield* storage.exec(`SELECT MIN(finished_at) AS at FROM ${JOBS} WHERE queue = ? AND status = ?`, [
        queue,
        status
      ])
      // One past the bound: the trim deletes jobs finished strictly before `now - ageMs`.
      if (typeof oldest?.at === "number") next = Math.min(next ?? Number.MAX_SAFE_INTEGER, oldest.at + ageMs + 1)
    }
    if (next === undefined) {
      yield* storage.exec(`DELETE FROM ${JOBS} WHERE key = ?`, [KEY])
      return []
    }
    return [yield* due(storage, Math.max(next, now), now)]
  })
