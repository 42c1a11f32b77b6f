/**
 * A schedule's two transitions, written where the engine gives them a transaction: which run starts
 * (in its slot timer's fire, see `slots.ts`), and where the schedule goes once a run
 * ended for good (in the settle's transaction, as its settled work).
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Settlement } from "../engine/DurableTable.js"
import type { StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as Plan from "./plan.js"
import * as Rows from "./rows.js"
import { TABLE } from "./schema.js"

export interface Parts {
  readonly storage: StorageService
  readonly timingOf: Rows.Timings
  readonly newGeneration: () => string
}

/**
 * The slot timer of a schedule waiting for its run came due (in its transaction): starts the run the
 * plan picks (the record is claimable from now), or moves the schedule to its next slot, or ends it.
 */
export const pick = (parts: Parts, row: Row, now: number): Effect.Effect<Picked, StorageError> => {
  const decision = Plan.start(Rows.planState(row, parts.timingOf), now)
  const where = [String(row.key), String(row.generation_id)]
  if (decision._tag === "Run") {
    return Effect.as(
      parts.storage.exec(
        `UPDATE ${TABLE} SET run_slot = ?, run_manual = ?, run_started_at = ?, slot_at = ?,
           started_slot = CASE WHEN ? = 1 THEN started_slot ELSE ? END,
           waited_at = CASE WHEN ? = 1 THEN waited_at ELSE NULL END, missed_count = missed_count + ?,
           run_number = run_number + 1, scheduled_runs = scheduled_runs + ?, last_error = NULL, last_error_name = NULL
         WHERE key = ? AND generation_id = ?`,
        [
          decision.slot,
          decision.manual ? 1 : 0,
          now,
          decision.cursor,
          decision.manual ? 1 : 0,
          decision.slot,
          decision.manual ? 1 : 0,
          decision.missed,
          decision.manual ? 0 : 1,
          ...where
        ]
      ),
      { run: true } as const
    )
  }
  const at = Plan.dueAt({ cursor: decision.cursor, manualAt: row.manual_at === null ? null : Number(row.manual_at) })
  return Effect.as(
    parts.storage.exec(
      `UPDATE ${TABLE} SET slot_at = ?, missed_count = missed_count + ?, next_attempt_at = ?,
         status = CASE WHEN ? = 1 THEN 'ended' ELSE status END
       WHERE key = ? AND generation_id = ?`,
      [decision.cursor, decision.missed, at ?? now, at === null ? 1 : 0, ...where]
    ),
    { run: false, at } as const
  )
}

/** What `pick` did: started the run, or moved the schedule to `at` (ended it: `null`). */
export type Picked = { readonly run: true } | { readonly run: false; readonly at: number | null }

/**
 * After a run ended for good (completed, or failed with no retry left): the schedule goes on from
 * its cursor with a fresh generation (so the run's step memos go) and attempt 0; what it waits for
 * next is `Slots.update`'s. A failed run never stops the schedule.
 */
export const advance = (parts: Parts, claimed: Row, settlement: Settlement): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const key = String(claimed.key)
    const [row] = yield* parts.storage.exec(`SELECT * FROM ${TABLE} WHERE key = ? AND generation_id = ?`, [
      key,
      String(claimed.generation_id)
    ])
    if (row === undefined) return
    const state = Rows.planState(row, parts.timingOf)
    const runSlot = row.run_slot === null ? null : Number(row.run_slot)
    const next = runSlot === null
      ? { cursor: state.cursor, waitedAt: state.waitedAt, manualAt: state.manualAt, missed: 0 }
      : Plan.settle(state, {
        slot: runSlot,
        manual: Number(row.run_manual) === 1,
        startedAt: Number(row.run_started_at ?? settlement.at)
      }, settlement.at)
    const at = Plan.dueAt(next)
    const failed = settlement.outcome === "failed" ? settlement.error : undefined
    yield* parts.storage.exec(
      `UPDATE ${TABLE} SET generation_id = ?, status = ?, attempt = 0, next_attempt_at = ?, slot_at = ?, waited_at = ?,
         manual_at = ?, missed_count = missed_count + ?, run_slot = NULL, run_manual = 0, run_started_at = NULL,
         run_count = run_count + CASE WHEN run_slot IS NULL THEN 0 ELSE 1 END,
         last_slot = COALESCE(run_slot, last_slot), last_manual = CASE WHEN run_slot IS NULL THEN last_manual ELSE run_manual END,
         last_run_number = CASE WHEN run_slot IS NULL THEN last_run_number ELSE run_number END,
         last_outcome = ?, last_settled_at = ?, last_run_error = ?, last_run_error_name = ?,
         last_error = NULL, last_error_name = NULL
       WHERE key = ? AND generation_id = ?`,
      [
        parts.newGeneration(),
        at === null ? "ended" : "pending",
        at ?? settlement.at,
        next.cursor,
        next.waitedAt,
        next.manualAt,
        next.missed,
        settlement.outcome,
        settlement.at,
        failed?.message ?? null,
        failed?.name ?? null,
        key,
        String(row.generation_id)
      ]
    )
  })
