/**
 * An attempt settled by a worker elsewhere (`TableHandle.settle`: a job leased to an external worker),
 * through the attempt lifecycle's own settle, after its guard (the lease's fencing check). Part of the
 * engine's timer support (`timerSupport.ts`), as leases are.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import type { StorageError } from "../shared/Errors.js"
import * as Attempt from "./attempt.js"
import type { Execution } from "./DurableTable.js"
import type { Run } from "./engine.js"
import type { Row } from "./StorageService.js"
import * as Timers from "./timers.js"

/** A leased record's settle ends its lease: its timer goes, inside the settle's transaction. */
export const endLease = (run: Run, key: string): Effect.Effect<boolean, StorageError> =>
  Timers.cancel(run.engine.storage, Timers.leaseOwner(run.participant.table.kind), key)

/**
 * Settles an attempt that ran outside this isolate (see `TableHandle.settle`): the attempt is the one
 * `row` was claimed for; its duration counts from the row's claim time when the table stamps one.
 */
export const settleExternal = <E>(
  run: Run,
  row: Row,
  outcome:
    | { readonly _tag: "Success"; readonly value: unknown }
    | { readonly _tag: "Failure"; readonly error: unknown; readonly terminal?: boolean | undefined },
  guard: Effect.Effect<void, E>
): Effect.Effect<void, E | StorageError> =>
  Effect.gen(function*() {
    const { table } = run.participant
    const endedAt = yield* Clock.currentTimeMillis
    const started = table.dispatch?.startedColumn === undefined ? undefined : row[table.dispatch.startedColumn]
    const execution: Execution = {
      key: String(row[table.keyColumn]),
      generation: String(row.generation_id),
      attempt: Number(row.attempt),
      row,
      signal: new AbortController().signal,
      platform: undefined,
      runtime: yield* Effect.runtime<never>()
    }
    const settled: Attempt.Settled = {
      execution,
      entry: { persisted: Deferred.unsafeMake(FiberId.none), abort: () => undefined, revisit: undefined },
      policy: table.policy(row),
      outcome: outcome._tag === "Success" ? Exit.succeed(outcome.value) : Exit.fail(outcome.error),
      endedAt,
      durationMs: typeof started === "number" ? Math.max(0, endedAt - started) : 0,
      guard: Effect.zipRight(
        Effect.mapError(guard, (error) => new Attempt.Refused(error)),
        // A leased record's settle ends its lease: the lease's timer goes with it.
        table.leases === undefined ? Effect.void : endLease(run, execution.key)
      ),
      terminal: outcome._tag === "Failure" && outcome.terminal === true
    }
    yield* Effect.catchIf(
      Attempt.settle(run, settled),
      (error): error is Attempt.Refused => error instanceof Attempt.Refused,
      (refused) => Effect.fail(refused.error as E)
    )
    // A retry time gets the early timer, as when an own execution releases its key.
    yield* run.engine.upkeep.afterRelease(settled.entry.revisit)
  })
