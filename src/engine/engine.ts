/**
 * The services one engine runs with, as one value the attempt lifecycle, passes and handles share.
 * @internal
 */
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { MigrationError, StorageError } from "../shared/Errors.js"
import type * as AlarmService from "./AlarmService.js"
import type * as Background from "./Background.js"
import type * as PermitSemaphore from "./PermitSemaphore.js"
import type { SchedulerConfig } from "./SchedulerConfig.js"
import type { LeaseState, TableHandle, TimerHandle } from "./DurableTable.js"
import type { Row, StorageService } from "./StorageService.js"
import type * as Deadlines from "./deadlines.js"
import type { Participant } from "./participant.js"
import type { TimerOwners, Upkeep } from "./upkeep.js"

export interface Engine {
  readonly config: SchedulerConfig
  readonly storage: StorageService
  readonly alarms: AlarmService.AlarmService
  readonly permits: PermitSemaphore.PermitSemaphore
  readonly background: Background.Background
  /** Where executions, passes and timers run: closed on eviction. */
  readonly scope: Scope.Scope
  readonly deadlines: Deadlines.Deadlines
  readonly upkeep: Upkeep
  /** The attached tables, in attach order: passes and upkeep read them all. */
  readonly participants: Array<Participant>
  /**
   * Durable timers and leases (`timerSupport.ts`), once a table needs them: the Effect API's engine
   * has them from the start, the promise face's gets them from the first table that carries them.
   */
  timers: TimerSupport | undefined
}

/**
 * What the engine does for tables with `timers` or `leases`, as one value the engine is given rather
 * than links: a worker whose tables have neither (the promise face's operations and named alarms)
 * does not carry the timers table, the timer pass, the lease claims and their expiry.
 */
export interface TimerSupport extends TimerOwners {
  /** Makes the timers table current (once per engine, before the first table with timers attaches). */
  readonly migrate: Effect.Effect<void, MigrationError | StorageError, StorageService>
  /** The attached tables' timers due by `now`, fired a batch per owner and transaction. */
  readonly fireDue: (engine: Engine, now: number) => Effect.Effect<void, StorageError>
  readonly handleOf: (run: Run) => TimerHandle
  readonly claimLease: (
    run: Run,
    key: string,
    until: number,
    now: number,
    state?: LeaseState | undefined
  ) => Effect.Effect<Row | undefined, StorageError>
  readonly resumeLease: (run: Run, row: Row, until: number) => Effect.Effect<void, StorageError>
  /** `TableHandle.settle`: an attempt that ran elsewhere (a leased record's worker), settled here. */
  readonly settleExternal: <E>(
    run: Run,
    row: Row,
    outcome: Parameters<TableHandle["settle"]>[1],
    guard: Effect.Effect<void, E>
  ) => Effect.Effect<void, E | StorageError>
}

/** Where a table carries the timer support it needs (see `timerSupport.withTimers`); not part of `DurableTable`. */
export const TIMER_SUPPORT: unique symbol = Symbol.for("durability/internal/timerSupport")

/** The engine's timer support; only a table with timers or leases reaches this, and it brought them. */
export const timersOf = (engine: Engine): TimerSupport => {
  if (engine.timers === undefined) {
    throw new Error("durability: a table with timers or leases was attached without the engine's timer support")
  }
  return engine.timers
}

/** One table's work on one engine: what every step of an execution needs. */
export interface Run<A = any> {
  readonly engine: Engine
  readonly participant: Participant<A>
}
