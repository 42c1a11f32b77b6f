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
import * as SchedulesTable from "./schedulesTable.js"

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
  const key = String(row.key)
  const generation = String(row.generation_id)
  if (decision._tag === "Run") {
    return Effect.as(SchedulesTable.startRun(parts.storage, key, generation, decision, now), { run: true } as const)
  }
  const at = Plan.dueAt({ cursor: decision.cursor, manualAt: row.manual_at === null ? null : Number(row.manual_at) })
  return Effect.as(
    SchedulesTable.moveOn(parts.storage, key, generation, { cursor: decision.cursor, missed: decision.missed, at }, now),
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
export const advance = (parts: Parts, claimed: Row, settlement: Settlement): Effect.Effect<Next | undefined, StorageError> =>
  Effect.gen(function*() {
    const key = String(claimed.key)
    const row = yield* SchedulesTable.readGeneration(parts.storage, key, String(claimed.generation_id))
    if (row === undefined) return undefined
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
    yield* SchedulesTable.advance(parts.storage, key, String(row.generation_id), {
      generation: parts.newGeneration(),
      at,
      cursor: next.cursor,
      waitedAt: next.waitedAt,
      manualAt: next.manualAt,
      missed: next.missed,
      outcome: settlement.outcome,
      settledAt: settlement.at,
      error: settlement.outcome === "failed" ? settlement.error : undefined
    })
    return { at, waits: at !== null && (!state.paused || next.manualAt !== null) }
  })

/** Where `advance` left the schedule: its next time (`null`: ended), and whether it waits for it (not paused, or a manual run asked). */
export interface Next {
  readonly at: number | null
  readonly waits: boolean
}
