/**
 * The engine that owns a Durable Object's one alarm.
 *
 * Capabilities attach a `DurableTable` (their table plus how to run and settle a record; see
 * `DurableTable`). The engine is the only code that decides the object's wake-up: every write that
 * changes pending work reconciles the physical alarm in the same transaction, and every execution
 * follows one attempt lifecycle (durable claim, handler under a timeout with an AbortSignal,
 * conditional settle, retry time persisted from a `Schedule`).
 *
 * Map of the engine: `upkeep.ts` (reconciliation), `attempt.ts` (one execution),
 * `pass.ts` (alarm and timer passes), `handle.ts` (what a capability gets), `timerSupport.ts`
 * (durable timers and leases, given to the engine rather than linked by it).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as AlarmService from "./AlarmService.js"
import * as Background from "./Background.js"
import type { DurableTable, TableHandle } from "./DurableTable.js"
import { InvalidOptionError, type MigrationError, ParticipantConflictError, type StorageError } from "../shared/Errors.js"
import * as Deadlines from "./deadlines.js"
import { type Engine, TIMER_SUPPORT, type TimerSupport, timersOf } from "./engine.js"
import * as Fork from "../shared/fork.js"
import * as Handle from "./handle.js"
import * as Participant from "./participant.js"
import * as Pass from "./pass.js"
import { type AlarmInvocationInfo, type DurabilityContext, objectIdOf } from "../shared/platform.js"
import * as TableSql from "./tableSql.js"
import * as TimerSupportModule from "./timerSupport.js"
import * as Upkeep from "./upkeep.js"
import * as Logging from "./Logging.js"
import * as PermitSemaphore from "./PermitSemaphore.js"
import * as SchedulerConfig from "./SchedulerConfig.js"
import * as StorageService from "./StorageService.js"
import * as Summary from "./summary.js"

export type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
export { Admission, LeaseExpiry } from "./DurableTable.js"
export type {
  Admissions,
  AttemptLimits,
  AttemptPolicy,
  Completion,
  Dispatch,
  DurableTable,
  Execution,
  Holds,
  Leases,
  LeaseState,
  PendingRecord,
  SettledWork,
  Settlement,
  Slot,
  TableHandle,
  Timer,
  TimerHandle,
  Timers
} from "./DurableTable.js"
export type { AlarmRetryInfo, SchedulerConfig, SchedulerOptions } from "./SchedulerConfig.js"
export type { EngineSummary } from "./summary.js"

/** How long the engine must stay idle before owed upkeep (reconciling after settles) runs. */
export const UPKEEP_DELAY = Upkeep.UPKEEP_DELAY

/**
 * The engine of one Durable Object: it owns the object's one alarm and runs the records of every attached
 * table on it.
 */
export interface Scheduler {
  /** The scheduler's settings, resolved. */
  readonly config: SchedulerConfig.SchedulerConfig
  /**
   * Attaches a capability's table (its migrations must have run): the handle is its only way to write pending
   * work and start it.
   */
  readonly attach: <A>(
    table: DurableTable<A>
  ) => Effect.Effect<TableHandle, ParticipantConflictError | InvalidOptionError | MigrationError | StorageError>
  /**
   * One alarm pass. Fails only when the pass failed AND its fallback alarm could not be armed, so
   * the platform's own retries are the last resort.
   */
  readonly alarm: (info?: AlarmInvocationInfo) => Effect.Effect<void, unknown>
  /** Reads the physical alarm from the platform (run once per instance, before serving). */
  readonly warm: Effect.Effect<void, StorageError>
  /**
   * The engine as this instance knows it now, read without I/O (the inspector's overview): the
   * physical alarm, the early timer, the permits, and the executions here (the first `runningListed`).
   */
  readonly summary: (runningListed: number) => Effect.Effect<Summary.EngineSummary>
}

/**
 * Runs `body` as one transaction of the object's storage, so that your own rows and the library's work
 * commit together or not at all: write your rows with `StorageService.exec` (or `ctx.storage.sql`) and
 * add jobs, register operations, set named alarms, upsert schedules or send job events in `body`; the
 * physical alarm is reconciled inside the same transaction. `body` must be synchronous (SQL only: no
 * waiting on promises, timers or locks), else it fails and nothing is written. What acts on the writes
 * in memory (eager starts, aborting a canceled job's handler, lifecycle events, the early timer) runs
 * only after the commit; a rollback drops it with the writes. Make it the outermost transaction (inside
 * `StorageService.transaction` its follow-ups would run before that one commits); nested in itself, it joins
 * the outer one. See docs/architecture.md, "Your writes and the library's in one transaction".
 */
export const transaction = <A, E, R>(
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, E | StorageError, R | StorageService.StorageService> =>
  Effect.flatMap(StorageService.StorageService, (storage) => storage.atomically(body)).pipe(
    Effect.withSpan("Scheduler.transaction")
  )

/** The `Scheduler` service's tag: build it with `layerDurableObject` or `layerWith`. */
export const Scheduler: Context.Tag<Scheduler, Scheduler> = Context.GenericTag<Scheduler>("durability/Scheduler")

/** The services the engine runs on. */
export type Requirements =
  | StorageService.StorageService
  | AlarmService.AlarmService
  | PermitSemaphore.PermitSemaphore
  | Background.Background
  | SchedulerConfig.SchedulerConfig

/**
 * The engine over the other services. With `timers` (the Effect API's engine) any table may have
 * timers or leases; without (the promise face's), the first table that has them brings the support
 * (`timerSupport.withTimers`), so a worker whose tables have none does not bundle it.
 */
const makeWith = (timers: TimerSupport | undefined): Effect.Effect<Scheduler, never, Requirements | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* SchedulerConfig.SchedulerConfig
    const storage = yield* StorageService.StorageService
    const alarms = yield* AlarmService.AlarmService
    const background = yield* Background.Background
    const scope = yield* Effect.scope
    const participants: Array<Participant.Participant> = []
    const engine: Engine = {
      config,
      storage,
      alarms,
      permits: yield* PermitSemaphore.PermitSemaphore,
      background,
      scope,
      deadlines: Deadlines.make(scope),
      upkeep: Upkeep.make({ storage, alarms, background, participants, scope, timers: () => engine.timers }),
      participants,
      timers
    }

    // Each fire of the early timer is a pass of its own (a long pass must not delay the next fire).
    yield* Fork.detached(
      Effect.forever(
        Effect.zipRight(
          alarms.wakeup,
          Effect.flatMap(Fork.detached(Pass.timerPass(engine), scope), (fiber) =>
            background.waitUntil(Fork.settled(fiber)))
        )
      ),
      scope
    )

    // The engine's timers table is made when the first table with timers attaches.
    let timersReady = false
    const attach = Effect.fn("Scheduler.attach")(function*<A>(table: DurableTable<A>) {
      if (!TableSql.isIdentifier(table.table) || !TableSql.isIdentifier(table.keyColumn)) {
        return yield* new InvalidOptionError({
          field: "table",
          kind: "type",
          message: `Invalid table or key column name: ${table.table}.${table.keyColumn}`
        })
      }
      if (participants.some((participant) => participant.table.kind === table.kind)) {
        return yield* new ParticipantConflictError({
          kind: table.kind,
          message: `A "${table.kind}" helper is already attached to this scheduler: an object takes one helper ` +
            `of each kind, so put all of its handlers in that one helper`
        })
      }
      // A capability whose tables may have timers or leases carries the engine's support for them.
      engine.timers ??= (table as { readonly [TIMER_SUPPORT]?: TimerSupport })[TIMER_SUPPORT]
      if ((table.timers !== undefined || table.leases !== undefined) && !timersReady) {
        yield* Effect.provideService(timersOf(engine).migrate, StorageService.StorageService, storage)
        timersReady = true
      }
      const participant = Participant.make(table, config.dueBatchSize)
      participants.push(participant as Participant.Participant)
      return Handle.make({ engine, participant })
    })

    return Scheduler.of({
      config,
      attach,
      alarm: (info) => Effect.withSpan(Pass.alarmPass(engine, info), "Scheduler.alarm"),
      warm: alarms.warm,
      summary: Summary.make(engine)
    })
  })

export const make: Effect.Effect<Scheduler, never, Requirements | Scope.Scope> = /* @__PURE__ */ makeWith(
  TimerSupportModule.support
)

/** The engine over the other services (pure: a bundle that never uses it leaves the timer support out). */
export const layer: Layer.Layer<Scheduler, never, Requirements> = /* @__PURE__ */ Layer.scoped(Scheduler, make)

/** The promise face's engine: timer support comes with the first table that needs it. */
const layerWithoutTimers: Layer.Layer<Scheduler, never, Requirements> = /* @__PURE__ */ Layer.scoped(
  Scheduler,
  makeWith(undefined)
)

/** Every service the engine runs on, as one context. */
export type Services = Scheduler | Requirements

/** The engine with its config, alarm and permit services, over the given storage and background layers. */
export const layerWith = (
  storage: Layer.Layer<StorageService.StorageService>,
  background: Layer.Layer<Background.Background>,
  options: SchedulerConfig.SchedulerOptions | Layer.Layer<SchedulerConfig.SchedulerConfig, InvalidOptionError> = {}
): Layer.Layer<Services, InvalidOptionError> => over(layer, storage, background, options)

const over = (
  engine: Layer.Layer<Scheduler, never, Requirements>,
  storage: Layer.Layer<StorageService.StorageService>,
  background: Layer.Layer<Background.Background>,
  options: SchedulerConfig.SchedulerOptions | Layer.Layer<SchedulerConfig.SchedulerConfig, InvalidOptionError>
): Layer.Layer<Services, InvalidOptionError> => {
  const config: Layer.Layer<SchedulerConfig.SchedulerConfig, InvalidOptionError> = Layer.isLayer(options)
    ? (options as Layer.Layer<SchedulerConfig.SchedulerConfig, InvalidOptionError>)
    : SchedulerConfig.layer(options as SchedulerConfig.SchedulerOptions)
  const base = Layer.mergeAll(storage, background, Layer.provideMerge(PermitSemaphore.layer, config))
  return Layer.provideMerge(engine, Layer.provideMerge(AlarmService.layer, base))
}

const overDurableObject = (
  engine: Layer.Layer<Scheduler, never, Requirements>,
  ctx: DurabilityContext,
  config: Layer.Layer<SchedulerConfig.SchedulerConfig, InvalidOptionError>,
  log: Logging.Sink | undefined
): Layer.Layer<Services, InvalidOptionError> => {
  const sink = typeof log === "function" ? log : Logging.consoleSink
  return Layer.provideMerge(
    over(engine, StorageService.layerDurableObject(ctx), Background.layerDurableObject(ctx), config),
    Logging.layer(sink)
  )
}

/**
 * The whole engine over a Durable Object's own storage, alarm and `waitUntil`, with Effect's logger
 * writing structured objects to the Workers console (or to `options.log`): provide it once per
 * object instance (e.g. to a `ManagedRuntime` built in the constructor). It builds synchronously
 * and does no I/O; run `warm` before serving (inside `blockConcurrencyWhile`).
 */
export const layerDurableObject = (
  ctx: DurabilityContext,
  options: SchedulerConfig.SchedulerOptions = {}
): Layer.Layer<Services, InvalidOptionError> =>
  // A bad `log` is reported by the config layer, which fails to build.
  overDurableObject(
    layer,
    ctx,
    SchedulerConfig.layer(withObjectId(ctx, options)),
    typeof options === "object" && options !== null ? options.log : undefined
  )

/** The object's id (`ctx.id`) as the scheduler's `objectId` unless one is given: metrics and the inspector show it. */
const withObjectId = (ctx: DurabilityContext, options: SchedulerConfig.SchedulerOptions): SchedulerConfig.SchedulerOptions => {
  if (typeof options !== "object" || options === null || options.objectId !== undefined) return options
  const id = objectIdOf(ctx)
  return id === undefined ? options : { ...options, objectId: id }
}

/** `layerDurableObject` with settings already resolved (by a facade's constructor): checked once, not twice. */
export const layerDurableObjectResolved = (
  ctx: DurabilityContext,
  config: SchedulerConfig.SchedulerConfig
): Layer.Layer<Services> =>
  Layer.orDie(overDurableObject(layerWithoutTimers, ctx, SchedulerConfig.layerResolved(config), config.log))
