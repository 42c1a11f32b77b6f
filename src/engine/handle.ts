/**
 * What `Scheduler.attach` gives a capability: its writes of pending work, eager starts, aborts and
 * lifecycle events, all bound to its table.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { PendingRecord, TableHandle } from "./DurableTable.js"
import * as Lifecycle from "./Lifecycle.js"
import * as Attempt from "./attempt.js"
import { type Run, timersOf } from "./engine.js"

const asList = (made: PendingRecord | ReadonlyArray<PendingRecord> | undefined): ReadonlyArray<PendingRecord> =>
  made === undefined ? [] : Array.isArray(made) ? made : [made as PendingRecord]

export const make = (run: Run): TableHandle => {
  const { engine, participant } = run
  const { upkeep } = engine

  const tryStart: TableHandle["tryStart"] = (key, options) => Attempt.tryStart(run, key, options?.dueBy)

  const writePending: TableHandle["writePending"] = (body, pending, options) =>
    Effect.gen(function*() {
      let records: ReadonlyArray<PendingRecord> = []
      const written = Effect.tap(body, (value) => {
        records = asList(pending(value))
      })
      const at = options?.oneStatementAt
      const result = at !== undefined && (yield* engine.alarms.covers(at))
        ? yield* written
        : yield* engine.storage.transaction(Effect.tap(written, () =>
          options?.reconcile === true
            ? upkeep.reconcile
            : records.length === 0
            ? Effect.void
            // The earliest new time is the only one that can move the alarm earlier.
            : upkeep.cover(records.reduce((at, record) => Math.min(at, record.at), Number.MAX_SAFE_INTEGER))))
      // Inside a caller's transaction (`StorageService.atomically`) the start waits for its commit.
      yield* engine.storage.afterCommit(Attempt.startPending(run, records))
      return result
    })

  return {
    write: upkeep.write,
    writePending,
    tryStart,
    abort: (matches, reason, options) => {
      const aborting = Effect.suspend(() => {
        let aborted = 0
        for (const [key, entry] of participant.active) {
          if (!matches(key)) continue
          entry.abort(reason)
          if (options?.release === true) participant.active.delete(key)
          aborted++
        }
        // A released key may have a new record the early timer skipped while the key was busy.
        return options?.release === true && aborted > 0
          ? Effect.as(upkeep.afterRelease("refresh"), aborted)
          : Effect.succeed(aborted)
      })
      // Inside a caller's transaction the write that asked for it may still roll back: abort after the commit
      // (`afterCommit` gives back the same effect when there is no such transaction).
      const now = Effect.asVoid(aborting)
      const later = engine.storage.afterCommit(now)
      return later === now ? aborting : Effect.as(later, 0)
    },
    settle: (row, outcome, guard) => timersOf(engine).settleExternal(run, row, outcome, guard),
    emit: (build, at, settles) =>
      settles === false && !Lifecycle.hears(participant.table.onEvent)
        ? Effect.void
        : engine.storage.afterCommit(Lifecycle.emitTo(engine.background, participant.table.onEvent, build, at)),
    executing: (key) => participant.active.has(key),
    executingKeys: () => participant.active.keys(),
    // From the engine's timer support, which a table that has timers or leases brought with it.
    get timers() {
      return timersOf(engine).handleOf(run)
    },
    lease: (key, until, now, state) => timersOf(engine).claimLease(run, key, until, now, state),
    resumeLease: (row, until) => timersOf(engine).resumeLease(run, row, until)
  }
}
