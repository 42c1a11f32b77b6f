/**
 * The engine's durable timers and leases as one `TimerSupport` value: the timers table's migration,
 * the timer pass (`fireDue`), the tables' timer handles, lease claims and their ends.
 *
 * The engine is given it instead of linking it: the Effect API's `Scheduler.layerWith` builds the
 * engine with it, and a capability whose tables have timers or leases (jobs, schedules) carries it
 * on its table (`withTimers`), so the promise face's engine gets it with the first such table. A
 * worker with neither never bundles this module.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import * as Fork from "../shared/fork.js"
import * as Attempt from "./attempt.js"
import type { PendingRecord } from "./DurableTable.js"
import { type Engine, TIMER_SUPPORT, type TimerSupport } from "./engine.js"
import * as LeaseClaim from "./leaseClaim.js"
import * as LeaseExpiry from "./leaseExpiry.js"
import * as LeaseSettle from "./leaseSettle.js"
import * as Migrations from "./Migrations.js"
import type { Participant } from "./participant.js"
import * as TimerHandle from "./timerHandle.js"
import * as Timers from "./timers.js"

/** The timer owners of the attached tables: their own timers, and the engine's lease timers of those that lease. */
const owners = (participants: ReadonlyArray<Participant<any>>): ReadonlyArray<string> =>
  participants.flatMap((p) => [
    ...(p.table.timers === undefined ? [] : [p.table.kind]),
    ...(p.table.leases === undefined ? [] : [Timers.leaseOwner(p.table.kind)])
  ])

/** Due timers read at a time; a pass fires up to `TIMER_BATCHES` such batches, the rest get the next pass. */
const TIMER_BATCH = 100
const TIMER_BATCHES = 10

/**
 * Fires one owner's due timers: takes each and runs its owner's `fire`, all in one transaction,
 * covering the records they made pending; after the commit those start (or get the timer) and each
 * fire's follow-up runs as a fiber of its own. A lease timer's owner is the engine (`leaseExpiry.ts`).
 */
const fire = (engine: Engine, owner: string, timers: ReadonlyArray<Timers.Stored>, now: number) =>
  Effect.gen(function*() {
    const leased = Timers.leaseKindOf(owner)
    if (leased !== undefined) {
      const participant = engine.participants.find((p) => p.table.kind === leased)
      return participant === undefined ? undefined : yield* LeaseExpiry.expire({ engine, participant }, timers, now)
    }
    const participant = engine.participants.find((p) => p.table.kind === owner)
    const fires = participant?.table.timers
    if (participant === undefined || fires === undefined) return
    const handle = TimerHandle.handleOf({ engine, participant })
    const pending: Array<PendingRecord> = []
    const after: Array<Effect.Effect<void>> = []
    yield* engine.storage.transaction(Effect.forEach(timers, (timer) =>
      Effect.gen(function*() {
        if (!(yield* Timers.take(engine.storage, timer))) return
        const made = yield* fires.fire({ key: timer.key, at: timer.at, data: timer.data }, now, handle)
        if (made.pending.length > 0) {
          yield* engine.upkeep.cover(made.pending.reduce((at, record) => Math.min(at, record.at), Number.MAX_SAFE_INTEGER))
          pending.push(...made.pending)
        }
        if (made.after !== undefined) after.push(made.after)
      }), { discard: true }))
    yield* Attempt.startPending({ engine, participant }, pending)
    // Their own fibers (a send to a Cloudflare Queue can take seconds): the pass goes on to its records.
    for (const follow of after) {
      yield* Effect.flatMap(Fork.detached(follow, engine.scope), (fiber) => engine.background.waitUntil(Fork.settled(fiber)))
    }
  })

/** The attached tables' timers due by `now`, by owner, a batch at a time (before the due scans, which see what they made pending). */
const fireDue = (engine: Engine, now: number): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const attached = owners(engine.participants)
    if (attached.length === 0) return
    for (let batch = 0; batch < TIMER_BATCHES; batch++) {
      const due = yield* Timers.due(engine.storage, attached, now, TIMER_BATCH)
      const byOwner = new Map<string, Array<Timers.Stored>>()
      for (const timer of due) {
        const group = byOwner.get(timer.owner)
        if (group === undefined) byOwner.set(timer.owner, [timer])
        else group.push(timer)
      }
      for (const [owner, timers] of byOwner) yield* fire(engine, owner, timers, now)
      if (due.length < TIMER_BATCH) return
    }
  })

export const support: TimerSupport = {
  migrate: Effect.suspend(() =>
    Effect.flatMap(
      Migrations.isCurrent(Timers.CAPABILITY, Timers.MIGRATIONS),
      (current) => current ? Effect.void : Effect.asVoid(Migrations.migrate(Timers.CAPABILITY, Timers.MIGRATIONS))
    )
  ),
  owners,
  earliestOf: Timers.earliestOf,
  fireDue,
  handleOf: TimerHandle.handleOf,
  claimLease: LeaseClaim.claim,
  resumeLease: LeaseClaim.resume,
  settleExternal: LeaseSettle.settleExternal
}

/** `table` (a capability's participant, whose tables may have timers or leases) carrying the support they need. */
export const withTimers = <T extends object>(table: T): T => Object.assign(table, { [TIMER_SUPPORT]: support })
