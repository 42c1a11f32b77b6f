/**
 * The engine that owns a Durable Object's one alarm.
 *
 * Capabilities attach a `DurableTable` (their table plus how to run and settle
 * a record). The engine is the only code that touches the physical alarm and
 * the early timer: every write that changes pending work reconciles the alarm
 * in the same transaction, and every execution follows one attempt lifecycle
 * (durable claim, handler under a timeout with an AbortSignal, conditional
 * settle, retry time persisted from a `Schedule`).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Deadlines from "./internal/deadlines.js"
import * as Fork from "./internal/fork.js"
import * as AlarmService from "./AlarmService.js"
import * as Background from "./Background.js"
import * as Logging from "./Logging.js"
import { InvalidOptionError, ParticipantConflictError, type SerializedError, type StorageError } from "./Errors.js"
import * as Engine from "./internal/execution.js"
import type { AlarmInvocationInfo, DurabilityContext } from "./internal/platform.js"
import * as TableSql from "./internal/tableSql.js"
import { shown } from "./internal/validate.js"
import type * as Lifecycle from "./Lifecycle.js"
import * as PermitSemaphore from "./PermitSemaphore.js"
import type * as RetryPolicy from "./RetryPolicy.js"
import * as StorageServiceModule from "./StorageService.js"
import { type Row, StorageService } from "./StorageService.js"

export type { AlarmInvocationInfo, DurabilityContext } from "./internal/platform.js"

/** What `onAlarmRetry` is told after a failed alarm pass armed its own fallback alarm. */
export interface AlarmRetryInfo {
  readonly error: SerializedError
  readonly retryInMs: number
  readonly retryCount?: number
  readonly isRetry?: boolean
  readonly objectId?: string
}

export interface SchedulerOptions {
  /** Permits shared by every execution in the object (eager, timer and alarm). Default 10. */
  readonly alarmConcurrency?: number
  /** The physical alarm is never set sooner than this after a write (1 000–15 000 ms). Default 15 000. */
  readonly alarmMinDelayMs?: number
  /** An alarm pass returns after this long and lets the work continue (platform limit: 15 min). Default 840 000. */
  readonly alarmHandoffMs?: number
  /** Run work at its exact due time with an in-memory timer. Default false. */
  readonly liveTimers?: boolean
  /** Told after a failed alarm pass armed its fallback alarm. Best effort. */
  readonly onAlarmRetry?: ((info: AlarmRetryInfo) => void | PromiseLike<void>) | undefined
  /** Included in `AlarmRetryInfo`. */
  readonly objectId?: string | undefined
  /**
   * Where the library's diagnostics go, one object per entry (`{ level, message, event, ... }`: failures for
   * good, timeouts, failed alarm passes). Default: the Workers console. Used by `layerDurableObject`.
   */
  readonly log?: Logging.Sink | undefined
}

export interface SchedulerConfig {
  readonly alarmConcurrency: number
  readonly alarmMinDelayMs: number
  readonly alarmHandoffMs: number
  readonly liveTimers: boolean
  readonly onAlarmRetry: ((info: AlarmRetryInfo) => void | PromiseLike<void>) | undefined
  readonly objectId: string | undefined
  readonly log: Logging.Sink | undefined
}

/** How long the engine must stay idle before owed upkeep (reconciling after settles) runs. */
export const UPKEEP_DELAY = Duration.millis(100)

export const defaults = {
  alarmConcurrency: 10,
  alarmMinDelayMs: 15_000,
  alarmHandoffMs: 840_000,
  attemptTimeoutMs: 300_000,
  dueBatchSize: 100
} as const

const positiveInteger = (field: string, value: unknown, fallback: number) =>
  value === undefined
    ? Effect.succeed(fallback)
    : typeof value === "number" && Number.isSafeInteger(value) && value > 0
    ? Effect.succeed(value)
    : Effect.fail(
      new InvalidOptionError({ field, kind: "range", message: `${field} must be a positive integer, got ${shown(value)}` })
    )

/** Checks options and fills defaults; messages name the field. */
export const resolveConfig = Effect.fn("Scheduler.resolveConfig")(function*(options: SchedulerOptions) {
  if (typeof options !== "object" || options === null) {
    return yield* new InvalidOptionError({ field: "options", kind: "type", message: "options must be an object" })
  }
  const alarmConcurrency = yield* positiveInteger(
    "alarmConcurrency",
    options.alarmConcurrency,
    defaults.alarmConcurrency
  )
  const alarmMinDelayMs = yield* positiveInteger("alarmMinDelayMs", options.alarmMinDelayMs, defaults.alarmMinDelayMs)
  if (alarmMinDelayMs < 1_000 || alarmMinDelayMs > 15_000) {
    return yield* new InvalidOptionError({
      field: "alarmMinDelayMs",
      kind: "range",
      message: `alarmMinDelayMs must be between 1000 and 15000, got ${alarmMinDelayMs}`
    })
  }
  const alarmHandoffMs = yield* positiveInteger("alarmHandoffMs", options.alarmHandoffMs, defaults.alarmHandoffMs)
  if (options.liveTimers !== undefined && typeof options.liveTimers !== "boolean") {
    return yield* new InvalidOptionError({
      field: "liveTimers",
      kind: "type",
      message: `liveTimers must be a boolean, got ${shown(options.liveTimers)}`
    })
  }
  if (options.onAlarmRetry !== undefined && typeof options.onAlarmRetry !== "function") {
    return yield* new InvalidOptionError({
      field: "onAlarmRetry",
      kind: "type",
      message: `onAlarmRetry must be a function, got ${shown(options.onAlarmRetry)}`
    })
  }
  if (options.log !== undefined && typeof options.log !== "function") {
    return yield* new InvalidOptionError({
      field: "log",
      kind: "type",
      message: `log must be a function, got ${shown(options.log)}`
    })
  }
  if (options.objectId !== undefined && typeof options.objectId !== "string") {
    return yield* new InvalidOptionError({
      field: "objectId",
      kind: "type",
      message: `objectId must be a string, got ${shown(options.objectId)}`
    })
  }
  return {
    alarmConcurrency,
    alarmMinDelayMs,
    alarmHandoffMs,
    liveTimers: options.liveTimers ?? false,
    onAlarmRetry: options.onAlarmRetry,
    objectId: options.objectId,
    log: options.log
  } satisfies SchedulerConfig
})

/** One attempt of one record, as its handler sees it. */
export interface Execution {
  readonly key: string
  readonly generation: string
  /** 1-based; already durably counted when the handler runs. */
  readonly attempt: number
  /** The record as stored when the attempt was claimed. */
  readonly row: Row
  /** Aborted on timeout, purge or shutdown. Cooperative: the handler decides to stop. */
  readonly signal: AbortSignal
  /** The platform's alarm info when a physical alarm started this attempt. */
  readonly platform: AlarmInvocationInfo | undefined
}

export interface AttemptPolicy extends RetryPolicy.RetryPolicy {
  readonly attemptTimeoutMs: number
  /** What the signal is aborted with, and the failure recorded, when an attempt times out. */
  readonly timeoutError: (timeoutMs: number) => unknown
  /** Kind-specific terminal failures (besides `NonRetryableError` and exhausted attempts). */
  readonly isTerminal?: ((error: unknown) => boolean) | undefined
}

/** Each record's `maxAttempts` by one of its columns (see `DurableTable.attemptLimits`). */
export interface AttemptLimits {
  /** The column the policy depends on (e.g. the operation name). */
  readonly column: string
  readonly byValue: ReadonlyMap<string, number>
  /** For values not in `byValue`. */
  readonly otherwise: number
}

/** A capability's participation: its table (with the standard attempt columns) and how to run a record. */
export interface DurableTable {
  /** Unique per scheduler, e.g. "operations". */
  readonly kind: string
  readonly table: string
  readonly keyColumn: string
  /** Rows started per alarm pass; the rest re-arm the alarm. Default 100. */
  readonly dueBatchSize?: number | undefined
  readonly policy: (row: Row) => AttemptPolicy
  /**
   * Every record's `maxAttempts` as a function of one column (what `policy` decides by), so the
   * engine can claim a record in one statement instead of reading it first. Optional.
   */
  readonly attemptLimits?: AttemptLimits | undefined
  /** The handler. Its failures are decided by the policy; its success goes to `complete`. */
  readonly run: (execution: Execution) => Effect.Effect<unknown, unknown>
  /**
   * Persists a success, conditionally on (key, generation, pending, attempt).
   * Runs synchronously inside the settle transaction; returns whether the row
   * matched. A failure other than `StorageError` makes the attempt terminal.
   */
  readonly complete: (execution: Execution, value: unknown) => Effect.Effect<boolean, unknown>
  /** How messages name the record, e.g. `operation "resize" (id "a")`. */
  readonly describe: (row: Row) => string
  /** The entity fields of lifecycle events about `row`. */
  readonly entity: (row: Row) => Lifecycle.LifecycleEntity
  readonly onEvent?: Lifecycle.LifecycleHook | undefined
}

/** A record a write made pending. */
export interface PendingRecord {
  readonly key: string
  readonly at: number
  /** Start it now (eagerly) if a permit is free. */
  readonly start?: boolean | undefined
}

/** What an attached capability can do with the engine. */
export interface TableHandle {
  /** Runs `body` and the alarm reconciliation atomically; re-arms the early timer after commit. */
  readonly write: <A, E>(body: Effect.Effect<A, E>) => Effect.Effect<A, E | StorageError>
  /**
   * For a write whose only effect on pending work is making one record pending at `at` (an
   * insert, or a reschedule), as `pending` reads it from the body's result: the alarm and the early
   * timer are made to cover `at` from memory when they can (no reconciliation read), and with
   * `start` the record starts at once if a permit is free.
   */
  readonly writePending: <A, E>(
    body: Effect.Effect<A, E>,
    pending: (result: A) => PendingRecord | undefined
  ) => Effect.Effect<A, E | StorageError>
  /**
   * Starts the record now if a permit is free right now; never waits. Returns
   * whether it started. With `dueBy`, a record whose next attempt was moved
   * past that time meanwhile (another pass ran it and scheduled a retry) is left
   * to its schedule.
   */
  readonly tryStart: (key: string, options?: { readonly dueBy?: number | undefined }) => Effect.Effect<boolean>
  /** Runs the record (or attaches to its running execution) until the outcome is persisted. */
  readonly execute: (key: string) => Effect.Effect<void, StorageError>
  /**
   * Aborts running executions whose key matches, best effort (purge). With `release`, their keys
   * stop counting as executing here at once: a new record under the same key can start while the
   * aborted handler winds down (its settle is fenced by generation). Without it, a new record
   * waits for the old handler to end (one handler per key at a time).
   */
  readonly abort: (
    matches: (key: string) => boolean,
    reason: unknown,
    options?: { readonly release?: boolean | undefined }
  ) => Effect.Effect<number>
  readonly isActive: (key: string) => Effect.Effect<boolean>
  /** Emits a lifecycle event to this table's hook. */
  readonly emit: (build: (timestamp: number) => Lifecycle.LifecycleEvent) => Effect.Effect<void>
}

export interface Scheduler {
  readonly config: SchedulerConfig
  readonly attach: (table: DurableTable) => Effect.Effect<TableHandle, ParticipantConflictError | InvalidOptionError>
  /**
   * One alarm pass. Fails only when the pass failed AND its fallback alarm could
   * not be armed, so the platform's own retries are the last resort.
   */
  readonly alarm: (info?: AlarmInvocationInfo) => Effect.Effect<void, unknown>
  /**
   * Reads the physical alarm from the platform (run once per instance, before serving). An alarm
   * already in the past arms the early timer, so overdue work runs without waiting for a write.
   */
  readonly warm: Effect.Effect<void, StorageError>
  /** Reconciles the alarm and the early timer with the stored pending work. */
  readonly refresh: Effect.Effect<void, StorageError>
}

export const Scheduler: Context.Tag<Scheduler, Scheduler> = Context.GenericTag<Scheduler>("durability/Scheduler")

export const make = (
  options: SchedulerOptions = {}
): Effect.Effect<
  Scheduler,
  InvalidOptionError,
  StorageService | AlarmService.AlarmService | PermitSemaphore.PermitSemaphore | Background.Background | Scope.Scope
> =>
  Effect.gen(function*() {
    const config = yield* resolveConfig(options)
    const storage = yield* StorageService
    const alarms = yield* AlarmService.AlarmService
    const permits = yield* PermitSemaphore.PermitSemaphore
    const background = yield* Background.Background
    const scope = yield* Effect.scope
    const participants = new Map<string, Engine.Participant>()
    // One statement over every participant's table for each upkeep read; rebuilt when one attaches.
    let upkeep: { readonly list: ReadonlyArray<Engine.Participant>; readonly earliest: string; readonly pending: string } | undefined
    const upkeepSql = () => {
      if (upkeep === undefined) {
        const list = [...participants.values()]
        upkeep = {
          list,
          earliest: TableSql.earliestPendingOf(list.map((p) => p.table.table)),
          pending: TableSql.pendingByTimeOf(list.map((p) => ({ table: p.table.table, key: p.table.keyColumn })))
        }
      }
      return upkeep
    }

    // Settles that only removed pending work owe a reconciliation; it runs once the engine is idle.
    let upkeepOwed = false
    let passesRunning = 0
    const idle = () => {
      if (passesRunning > 0) return false
      for (const participant of participants.values()) {
        if (participant.active.size > 0 || participant.queued.size > 0) return false
      }
      return true
    }

    const reconcile: Effect.Effect<void, StorageError> = Effect.gen(function*() {
      upkeepOwed = false
      let earliest: number | null = null
      if (participants.size > 0) {
        const [row] = yield* storage.exec(upkeepSql().earliest)
        if (typeof row?.at === "number") earliest = row.at
      }
      const current = yield* alarms.physical
      if (earliest === null) {
        if (current !== null) yield* alarms.deletePhysical
        return
      }
      const target = Math.max(earliest, (yield* Clock.currentTimeMillis) + config.alarmMinDelayMs)
      // Keeping an alarm inside [earliest, target] means frequent writes cannot keep postponing it.
      const keep = typeof current === "number" && current >= earliest && current <= target
      if (!keep) yield* alarms.setPhysical(target)
    })

    // A new record due at `at` can only make the earliest pending time earlier. A known alarm in
    // [at, max(at, now + minDelay)] is then exactly what reconciling would keep (it is not before
    // the new earliest, and not after its target), so no read is needed.
    const coverAlarm = (at: number): Effect.Effect<void, StorageError> =>
      Effect.gen(function*() {
        const current = yield* alarms.physical
        const now = yield* Clock.currentTimeMillis
        if (typeof current === "number" && current >= at && current <= Math.max(at, now + config.alarmMinDelayMs)) {
          return
        }
        yield* reconcile
      })

    // The early timer's business: work due inside the min-delay window (or any work, with liveTimers).
    const forTimer = (at: number, now: number) => config.liveTimers || at - now < config.alarmMinDelayMs

    const coverTimer = (at: number): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => forTimer(at, now) ? alarms.coverTimer(at) : Effect.void)

    /**
     * Arms the early timer for the earliest pending time among keys not executing or queued in a
     * pass here (so a due running row cannot spin it); each table reads just past its busy keys.
     * With `after`, a time not after it leaves the timer alone.
     */
    const refreshTimer = (after?: number): Effect.Effect<void, StorageError> => Effect.gen(function*() {
      let next: number | null = null
      if (participants.size > 0) {
        const { list, pending } = upkeepSql()
        const rows = yield* storage.exec(pending, list.map((p) => p.active.size + p.queued.size + 1))
        for (const row of rows) {
          const participant = list[Number(row.p)]
          const key = String(row.key)
          if (participant === undefined || typeof row.at !== "number") continue
          if (participant.active.has(key) || participant.queued.has(key)) continue
          if (next === null || row.at < next) next = row.at
        }
      }
      if (after !== undefined && next !== null && next <= after) return
      const now = yield* Clock.currentTimeMillis
      const wanted = next !== null && forTimer(next, now)
      yield* alarms.armTimer(wanted ? next : null)
    })

    const reportRefreshFailure = Effect.catchAllCause((cause) =>
      background.report("durability.scheduler.refresh_failed", { error: Background.serializeError(cause) })
    )

    const write = <A, E>(body: Effect.Effect<A, E>): Effect.Effect<A, E | StorageError> =>
      Effect.tap(storage.transaction(Effect.zipLeft(body, reconcile)), () => reportRefreshFailure(refreshTimer()))

    // A retry moves the record's due time later, which can move the earliest later: reconcile.
    const settleWrite = <A, E>(body: Effect.Effect<A, E>, retryAt: number | undefined) =>
      storage.transaction(
        Effect.zipLeft(body, retryAt === undefined ? Effect.sync(() => (upkeepOwed = true)) : reconcile)
      )

    // Owed upkeep waits until the engine has been idle for a moment, so a stream of short
    // executions (each going idle before the next registration) pays one reconciliation, not one each.
    let upkeepScheduled = false
    const scheduleUpkeep = Effect.suspend(() => {
      if (upkeepScheduled) return Effect.void
      upkeepScheduled = true
      const later = Effect.zipRight(
        Effect.sleep(UPKEEP_DELAY),
        Effect.suspend(() => {
          upkeepScheduled = false
          return upkeepOwed && idle() ? reportRefreshFailure(write(Effect.void)) : Effect.void
        })
      )
      return Effect.asVoid(Fork.detached(later, scope))
    })

    const afterRelease = (revisit: Engine.Revisit): Effect.Effect<void> =>
      Effect.zipRight(
        reportRefreshFailure(
          revisit === "refresh" ? refreshTimer() : revisit === undefined ? Effect.void : coverTimer(revisit)
        ),
        Effect.suspend(() => upkeepOwed && idle() ? scheduleUpkeep : Effect.void)
      )

    const engine: Engine.Engine = {
      config,
      storage,
      permits,
      background,
      scope,
      deadlines: Deadlines.make(scope),
      write,
      settleWrite,
      coverAlarm,
      coverTimer,
      afterRelease
    }

    // While a pass runs, its own end reconciles; releases inside it owe nothing.
    const runPass = (startedAt: number, info: AlarmInvocationInfo | undefined) =>
      Effect.suspend(() => {
        passesRunning++
        const batches: Array<Engine.DueBatch> = []
        return Effect.gen(function*() {
          for (const participant of participants.values()) {
            batches.push(yield* Engine.takeDue(engine, participant, startedAt))
          }
          // The pass can take long (a handler attached to, a full pool): arm the timer now for
          // later work it did not take. Work already due waits for this pass to end.
          yield* reportRefreshFailure(refreshTimer(startedAt))
          yield* Effect.forEach(batches, (batch) => Engine.runBatch(engine, batch, startedAt, info), {
            concurrency: "unbounded",
            discard: true
          })
        }).pipe(
          Effect.ensuring(Effect.sync(() => {
            passesRunning--
            batches.forEach(Engine.releaseBatch)
          }))
        )
      })

    const armFallback = (cause: unknown, info: AlarmInvocationInfo | undefined) =>
      Effect.gen(function*() {
        const retryAt = (yield* Clock.currentTimeMillis) + config.alarmMinDelayMs
        yield* alarms.setPhysical(retryAt)
        const error = Background.serializeError(cause)
        yield* background.report("durability.alarm.failed", { error, retryInMs: config.alarmMinDelayMs })
        const hook = config.onAlarmRetry
        if (hook === undefined) return
        const retryInfo: AlarmRetryInfo = {
          error,
          retryInMs: config.alarmMinDelayMs,
          ...(info === undefined ? {} : { isRetry: info.isRetry, retryCount: info.retryCount }),
          ...(config.objectId === undefined ? {} : { objectId: config.objectId })
        }
        const hookFailed = (failure: unknown) =>
          background.report("durability.alarm.retry_hook_failed", { error: Background.serializeError(failure) })
        try {
          const returned = hook(retryInfo)
          if (returned !== undefined && typeof returned.then === "function") {
            yield* background.waitUntil(
              Promise.resolve(returned).then(() => undefined, (failure) => Effect.runSync(hookFailed(failure)))
            )
          }
        } catch (failure) {
          yield* hookFailed(failure)
        }
      })

    // A pass started by the early timer leaves the physical alarm alone; one started by the
    // platform knows the alarm was consumed (no I/O, so TestClock sees every step).
    const pass = (info: AlarmInvocationInfo | undefined, physical: boolean): Effect.Effect<void, unknown> =>
      Effect.gen(function*() {
        if (physical) {
          // The platform consumed the alarm. Re-arm it before any work runs, so a crash in
          // this pass is recovered by our own alarm, not only by the platform's few retries.
          // (Not the early timer: this pass is about to run what is due.)
          yield* alarms.physicalFired
          yield* storage.transaction(reconcile)
        }
        const startedAt = yield* Clock.currentTimeMillis
        if (!physical) {
          // The platform's time limit binds alarm invocations only: a timer pass runs to the end.
          yield* runPass(startedAt, info)
          yield* write(Effect.void)
          return
        }
        const work = yield* Fork.detached(runPass(startedAt, info), scope)
        const remaining = Math.max(0, config.alarmHandoffMs - ((yield* Clock.currentTimeMillis) - startedAt))
        const finished = yield* Engine.awaitOrHandoff(work, remaining)
        if (Option.isNone(finished)) {
          // Hand off before the platform's wall-time limit; the work keeps running and the
          // next pass attaches to it.
          yield* background.waitUntil(Effect.runPromise(Fiber.await(work)))
          // The continuation alarm: the one armed when the pass started may already be past (a
          // handoff later than the minimum delay), and the platform would re-run alarm() at once.
          const now = yield* Clock.currentTimeMillis
          const target = now + config.alarmMinDelayMs
          const current = yield* alarms.physical
          if (typeof current !== "number" || current <= now || current > target) yield* alarms.setPhysical(target)
          return
        }
        yield* finished.value
        yield* write(Effect.void)
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.catchAllCause(
            armFallback(Engine.causeError(cause), info),
            // Only now does the platform's limited retry take over.
            () => Effect.failCause(cause)
          )
        )
      )

    const alarm = (info?: AlarmInvocationInfo) => Effect.withSpan(pass(info, true), "Scheduler.alarm")

    yield* alarms.setTimerHandler(
      Effect.catchAllCause(
        pass(undefined, false),
        (cause) => background.report("durability.background_execution.failed", { error: Background.serializeError(Engine.causeError(cause)) })
      )
    )

    const attach = Effect.fn("Scheduler.attach")(function*(table: DurableTable) {
      if (!TableSql.isIdentifier(table.table) || !TableSql.isIdentifier(table.keyColumn)) {
        return yield* new InvalidOptionError({
          field: "table",
          kind: "type",
          message: `Invalid table or key column name: ${table.table}.${table.keyColumn}`
        })
      }
      if (participants.has(table.kind)) {
        return yield* new ParticipantConflictError({
          kind: table.kind,
          message: `A "${table.kind}" helper is already attached to this scheduler: an object takes one helper ` +
            `of each kind, so put all of its handlers in that one helper`
        })
      }
      const participant = Engine.makeParticipant(table)
      participants.set(table.kind, participant)
      upkeep = undefined
      return Engine.handle(engine, participant)
    })

    return Scheduler.of({
      config,
      attach,
      alarm,
      warm: Effect.gen(function*() {
        const stored = yield* alarms.readPhysical
        // A stored alarm already past is one the platform did not deliver (wrangler dev does not fire an
        // alarm set before a reload; workerd#3566): run what is overdue now instead of waiting for a write.
        if (stored !== null && stored <= (yield* Clock.currentTimeMillis)) yield* alarms.coverTimer(stored)
      }),
      refresh: write(Effect.void)
    })
  })

/** The engine over the other services. */
export const layer = (
  options: SchedulerOptions = {}
): Layer.Layer<
  Scheduler,
  InvalidOptionError,
  StorageService | AlarmService.AlarmService | PermitSemaphore.PermitSemaphore | Background.Background
> => Layer.scoped(Scheduler, make(options))

/** Every service the engine runs on, as one context. */
export type Services =
  | Scheduler
  | StorageService
  | AlarmService.AlarmService
  | PermitSemaphore.PermitSemaphore
  | Background.Background

/** The engine with its alarm and permit services, over the given storage and background layers. */
export const layerWith = (
  storage: Layer.Layer<StorageService>,
  background: Layer.Layer<Background.Background>,
  options: SchedulerOptions = {}
): Layer.Layer<Services, InvalidOptionError> => {
  // Checked by the scheduler layer, which fails to build on a bad value.
  const given = typeof options === "object" && options !== null ? options.alarmConcurrency : undefined
  const permits = PermitSemaphore.layer(given ?? defaults.alarmConcurrency)
  const base = Layer.mergeAll(storage, background, permits)
  return Layer.provideMerge(layer(options), Layer.provideMerge(AlarmService.layer, base))
}

/**
 * The whole engine over a Durable Object's own storage, alarm and `waitUntil`, with Effect's logger
 * writing structured objects to the Workers console (or to `options.log`):
 * provide it once per object instance (e.g. to a `ManagedRuntime` built in the
 * constructor). It builds synchronously and does no I/O; run `warm` before
 * serving (inside `blockConcurrencyWhile`).
 */
export const layerDurableObject = (
  ctx: DurabilityContext,
  options: SchedulerOptions = {}
): Layer.Layer<Services, InvalidOptionError> => {
  // Checked by the scheduler layer, which fails to build on a bad value.
  const given = typeof options === "object" && options !== null ? options.log : undefined
  const sink = typeof given === "function" ? given : Logging.consoleSink
  return Layer.provideMerge(
    layerWith(StorageServiceModule.layerDurableObject(ctx), Background.layerDurableObject(ctx, sink), options),
    Logging.layer(sink)
  )
}
