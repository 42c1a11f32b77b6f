/**
 * A lease's end (see `DurableTable.Leases`): its timer (`leaseClaim.ts`) came due, and the table
 * decides what becomes of the record, once, durably, whether or not the object was evicted meanwhile.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import * as Attempt from "./attempt.js"
import { claimOf, holds } from "./leaseClaim.js"
import * as LeaseSettle from "./leaseSettle.js"
import type { LeaseExpiry as LeaseExpiryDecision, PendingRecord } from "./DurableTable.js"
import type { Run } from "./engine.js"
import type { Row } from "./StorageService.js"
import * as Timers from "./timers.js"

/** The lease timer is gone (another pass, or the worker's settle, took it first): nothing to do. */
class Gone {}

/** Takes the timer, or fails with `Gone`: the guard of what only one of the timer's takers may do. */
const taken = (run: Run, timer: Timers.Stored) =>
  Effect.flatMap(Timers.take(run.engine.storage, timer), (took) => took ? Effect.void : Effect.fail(new Gone()))

/**
 * Lease timers of one table came due: what the table decides from each record as stored now, all in
 * one transaction (a batch pays one). A timer of an earlier claim (the record settled, was removed or
 * leased again) is only taken. Failures and exhaustions settle afterwards, each in the settle's own
 * transaction, which takes the timer first.
 */
export const expire = (run: Run, timers: ReadonlyArray<Timers.Stored>, now: number): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const { engine, participant } = run
    const leases = participant.table.leases
    if (leases === undefined) return
    const { storage } = engine
    const pending: Array<PendingRecord> = []
    const settles: Array<{ readonly timer: Timers.Stored; readonly row: Row; readonly expiry: Ending }> = []
    yield* storage.transaction(Effect.forEach(timers, (timer) =>
      Effect.gen(function*() {
        const [row] = yield* storage.exec(participant.sql.read, [timer.key])
        if (!holds(row, claimOf(timer.data))) {
          yield* Timers.take(storage, timer)
          return
        }
        const expiry = leases.expired(row, now)
        switch (expiry._tag) {
          case "Extended": {
            if (yield* Timers.take(storage, timer)) {
              yield* Timers.set(storage, timer.owner, timer.key, expiry.at, timer.data)
              yield* engine.upkeep.cover(expiry.at)
            }
            return
          }
          case "Released": {
            if (!(yield* Timers.take(storage, timer))) return
            const made = yield* expiry.write
            if (made.length > 0) yield* engine.upkeep.cover(Math.min(...made.map((record) => record.at)))
            pending.push(...made)
            return
          }
          // Settled in a transaction of its own, which takes the timer first: the timer stays until then.
          default:
            settles.push({ timer, row, expiry })
        }
      }), { discard: true }))
    yield* Attempt.startPending(run, pending)
    for (const { expiry, row, timer } of settles) {
      const guard = Effect.zipRight(taken(run, timer), expiry.write)
      const ending = expiry._tag === "Failed"
        ? LeaseSettle.settleExternal(run, row, { _tag: "Failure", error: expiry.error, terminal: true }, guard)
        : Attempt.exhaustGuarded(run, row, guard)
      yield* Effect.catchIf(ending, (error): error is Gone => error instanceof Gone, () => Effect.void)
    }
  })

/** The expiries that end the record. */
type Ending = Extract<LeaseExpiryDecision, { readonly _tag: "Failed" | "Exhausted" }>
