/**
 * A lease's end (see `DurableTable.Leases`): its timer (`leaseClaim.ts`) came due, and the table
 * decides what becomes of the record, once, durably, whether or not the object was evicted meanwhile.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import * as Attempt from "./attempt.js"
import { claimOf, holds } from "./leaseClaim.js"
import type { PendingRecord } from "./DurableTable.js"
import type { Run } from "./engine.js"
import * as Timers from "./timers.js"

/** The lease timer is gone (another pass, or the worker's settle, took it first): nothing to do. */
class Gone {}

/** Takes the timer, or fails with `Gone`: the guard of what only one of the timer's takers may do. */
const taken = (run: Run, timer: Timers.Stored) =>
  Effect.flatMap(Timers.take(run.engine.storage, timer), (took) => took ? Effect.void : Effect.fail(new Gone()))

/**
 * A lease timer came due: what the table decides from the record as stored now. A timer of an
 * earlier claim (the record settled, was removed or leased again) is only taken.
 */
export const expire = (run: Run, timer: Timers.Stored, now: number): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const { engine, participant } = run
    const leases = participant.table.leases
    if (leases === undefined) return
    const { storage } = engine
    let pending: ReadonlyArray<PendingRecord> = []
    const settle = yield* storage.transaction(Effect.gen(function*() {
      const [row] = yield* storage.exec(participant.sql.read, [timer.key])
      if (!holds(row, claimOf(timer.data))) {
        yield* Timers.take(storage, timer)
        return undefined
      }
      const expiry = leases.expired(row, now)
      switch (expiry._tag) {
        case "Extended": {
          if (yield* Timers.take(storage, timer)) {
            yield* Timers.set(storage, timer.owner, timer.key, expiry.at, timer.data)
            yield* engine.upkeep.cover(expiry.at)
          }
          return undefined
        }
        case "Released": {
          if (!(yield* Timers.take(storage, timer))) return undefined
          pending = yield* expiry.write
          if (pending.length > 0) yield* engine.upkeep.cover(Math.min(...pending.map((record) => record.at)))
          return undefined
        }
        // Settled in a transaction of their own, which takes the timer first: the timer stays until then.
        default:
          return { row, expiry }
      }
    }))
    yield* Attempt.startPending(run, pending)
    if (settle === undefined) return
    const guard = Effect.zipRight(taken(run, timer), settle.expiry.write)
    const ending = settle.expiry._tag === "Failed"
      ? Attempt.settleExternal(run, settle.row, { _tag: "Failure", error: settle.expiry.error, terminal: true }, guard)
      : Attempt.exhaustGuarded(run, settle.row, guard)
    yield* Effect.catchIf(ending, (error): error is Gone => error instanceof Gone, () => Effect.void)
  })
