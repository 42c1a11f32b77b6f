/**
 * The attempt lifecycle every capability shares, and the engine's per-table
 * state (which keys are executing in this isolate).
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as Deadlines from "./deadlines.js"
import * as Fork from "./fork.js"
import { Outcome } from "./outcome.js"
import * as Background from "../Background.js"
import { DurableAttemptsExhaustedError, type SerializedError, type StorageError } from "../Errors.js"
import * as Lifecycle from "../Lifecycle.js"
import type * as PermitSemaphore from "../PermitSemaphore.js"
import * as RetryPolicy from "../RetryPolicy.js"
import type {
  AttemptPolicy,
  DurableTable,
  Execution,
  SchedulerConfig,
  TableHandle
} from "../Scheduler.js"
import type { Row, SqlValue, StorageService } from "../StorageService.js"
import type { AlarmInvocationInfo } from "./platform.js"
import * as TableSql from "./tableSql.js"

export interface Engine {
  readonly config: SchedulerConfig
  readonly storage: StorageService
  readonly permits: PermitSemaphore.PermitSemaphore
  readonly background: Background.Background
  readonly scope: Scope.Scope
  readonly deadlines: Deadlines.Deadlines
  /** Runs `body` with a full reconciliation of the alarm (same transaction) and of the early timer (after). */
  readonly write: <A, E>(body: Effect.Effect<A, E>) => Effect.Effect<A, E | StorageError>
  /**
   * Settles an attempt atomically. A retry moves the record to `retryAt`, so the alarm is
   * reconciled in the same transaction; any other outcome only removes pending work, which leaves
   * the alarm at or before everything still pending, so reconciling it (and deleting it once idle)
   * waits for the next idle moment instead of costing a read per attempt.
   */
  readonly settleWrite: <A, E>(body: Effect.Effect<A, E>, retryAt: number | undefined) => Effect.Effect<A, E | StorageError>
  /** Inside a transaction, after a record became pending at `at`: reconciles the alarm, from memory when it can. */
  readonly coverAlarm: (at: number) => Effect.Effect<void, StorageError>
  /** After a commit: makes the early timer fire at or before `at` when `at` is its business. */
  readonly coverTimer: (at: number) => Effect.Effect<void>
  /** Runs after an execution released its key and permit: the key's timer follow-up, then owed upkeep once idle. */
  readonly afterRelease: (revisit: Revisit) => Effect.Effect<void>
}

/**
 * What the early timer owes a key once its execution releases it (the timer skips executing
 * keys): a retry's time, a full recomputation (the key was written while it ran), or nothing.
 */
export type Revisit = number | "refresh" | undefined

interface ActiveExecution {
  /** Done once the outcome is durable (or the execution failed); passes attach here instead of re-running. */
  readonly persisted: Outcome<void, StorageError>
  abort: (reason: unknown) => void
  revisit: Revisit
}

export interface Participant {
  readonly table: DurableTable
  readonly sql: TableSql.TableSql
  /** One entry per executing key: the per-key lock of this isolate. */
  readonly active: Map<string, ActiveExecution>
  /** Keys a running pass took from its due scan and has not started yet: other passes and the timer leave them. */
  readonly queued: Set<string>
  /** Claims a due record in one statement (bindings: key, due-by time, then `bindings`), when the limits fit in SQL. */
  readonly claimDue: { readonly sql: string; readonly bindings: ReadonlyArray<SqlValue> } | undefined
}

/** Bound parameters a claim may spend on per-value limits (SQLite caps a statement's bindings). */
const MAX_LIMIT_BINDINGS = 64

export const makeParticipant = (table: DurableTable): Participant => {
  const sql = TableSql.make(table.table, table.keyColumn)
  let claimDue: Participant["claimDue"]
  const limits = table.attemptLimits
  if (limits !== undefined && TableSql.isIdentifier(limits.column)) {
    const groups = new Map<number, Array<string>>()
    for (const [value, max] of limits.byValue) {
      if (max !== limits.otherwise) groups.set(max, [...(groups.get(max) ?? []), value])
    }
    const bindings: Array<SqlValue> = []
    let limit = "?"
    if (groups.size > 0) {
      limit = "CASE"
      for (const [max, values] of groups) {
        limit += ` WHEN ${limits.column} IN (${values.map(() => "?").join(", ")}) THEN ?`
        bindings.push(...values, max)
      }
      limit += " ELSE ? END"
    }
    bindings.push(limits.otherwise)
    if (bindings.length <= MAX_LIMIT_BINDINGS) claimDue = { sql: sql.claimDue(limit), bindings }
  }
  return { table, sql, active: new Map(), queued: new Set(), claimDue }
}

/** The error a failed, died or interrupted effect stands for. */
export const causeError = (cause: Cause.Cause<unknown>): unknown =>
  Option.getOrElse(
    Option.orElse(Cause.failureOption(cause), () => Cause.dieOption(cause)),
    () => new Error("The execution was interrupted")
  )

/**
 * Waits for `fiber` for at most `ms`; `None` means the time ran out first (the fiber keeps
 * running). An observer and a shared deadline, not a race of two fibers: this runs once per attempt.
 */
export const awaitWithin = <A, E>(
  deadlines: Deadlines.Deadlines,
  fiber: Fiber.RuntimeFiber<A, E>,
  ms: number
): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Effect.suspend(() => {
    const outcome = new Outcome<Option.Option<Exit.Exit<A, E>>>()
    fiber.addObserver((exit) => outcome.succeed(Option.some(exit)))
    return Effect.flatMap(
      deadlines.after(ms, () => outcome.succeed(Option.none())),
      (cancel) => Effect.ensuring(outcome.await, Effect.sync(cancel))
    )
  })

/** Waits for `fiber` for at most `ms`; `None` means the time ran out first (the fiber keeps running). */
export const awaitOrHandoff = <A, E>(fiber: Fiber.Fiber<A, E>, ms: number) =>
  Effect.raceFirst(
    Effect.map(Fiber.await(fiber), Option.some),
    Effect.as(Effect.sleep(Duration.millis(ms)), Option.none<Exit.Exit<A, E>>())
  )

const emit = (
  engine: Engine,
  participant: Participant,
  row: Row,
  build: (entity: Lifecycle.LifecycleEntity, timestamp: number) => Lifecycle.LifecycleEvent
) =>
  Lifecycle.emitTo(
    engine.background,
    participant.table.onEvent,
    (timestamp) => build(participant.table.entity(row), timestamp)
  )

/**
 * Logs what no caller sees, once: through Effect's `Logger`, annotated with the record's entity
 * fields, so an application without a lifecycle hook still learns that work failed for good.
 */
const logOutcome = (
  participant: Participant,
  row: Row,
  level: "error" | "warning",
  event: string,
  message: string,
  fields: Readonly<Record<string, unknown>>
): Effect.Effect<void> =>
  (level === "error" ? Effect.logError(message) : Effect.logWarning(message)).pipe(
    Effect.annotateLogs({ event, ...participant.table.entity(row), ...fields })
  )

const withPermit = <A, E, R>(
  engine: Engine,
  given: PermitSemaphore.Permit | undefined,
  use: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  given !== undefined
    ? Effect.ensuring(use, given.release)
    : Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(restore(engine.permits.acquire), (permit) => Effect.ensuring(restore(use), permit.release))
    )

interface Start {
  readonly permit?: PermitSemaphore.Permit | undefined
  readonly platform?: AlarmInvocationInfo | undefined
  /** A pass's time: the row must still be due then (an attempt may have settled since the due scan). */
  readonly dueBy?: number | undefined
}

/**
 * Runs one record, or attaches to its execution in this isolate. Resolves when
 * the outcome is durable. The execution itself runs in the engine's scope and
 * keeps the key and the permit until the handler has really ended, even after
 * a timeout, so an abort-ignoring handler never overlaps its own retry.
 */
export const execute = (
  engine: Engine,
  participant: Participant,
  key: string,
  start: Start
): Effect.Effect<void, StorageError> =>
  Effect.suspend(() => {
    const running = participant.active.get(key)
    if (running !== undefined) {
      const released = start.permit === undefined ? Effect.void : start.permit.release
      return Effect.zipRight(released, running.persisted.await)
    }
    const entry = begin(participant, key)
    const owner = own(engine, participant, key, entry, start)
    return Effect.zipRight(Fork.detached(owner, engine.scope), entry.persisted.await)
  })

/** Registers the key's execution synchronously, before any storage read, so two starters cannot both miss it. */
const begin = (participant: Participant, key: string): ActiveExecution => {
  const entry: ActiveExecution = {
    persisted: new Outcome(),
    abort: () => undefined,
    revisit: undefined
  }
  participant.active.set(key, entry)
  return entry
}

/** The execution itself, from claim to release; its outcome also completes `entry.persisted`. */
const own = (
  engine: Engine,
  participant: Participant,
  key: string,
  entry: ActiveExecution,
  start: Start
): Effect.Effect<void, StorageError> => {
  const run = participant.claimDue === undefined
    ? readThenClaim(engine, participant, key, entry, start)
    : claimDirectly(engine, participant, participant.claimDue, key, entry, start)
  return (start.permit === undefined ? run : Effect.ensuring(run, start.permit.release)).pipe(
    Effect.onExit((exit) =>
      Effect.sync(() => {
        if (participant.active.get(key) === entry) participant.active.delete(key)
        entry.persisted.done(Exit.asVoid(exit))
      })
    ),
    // After an infrastructure failure the early timer is not re-armed: the row is still due, so it
    // would fire at once and fail again in a hot loop. The fallback alarm (or the registration's
    // alarm) retries it after the minimum delay.
    Effect.onExit((exit) => Exit.isSuccess(exit) ? engine.afterRelease(entry.revisit) : Effect.void)
  )
}

/** Reads the record, then claims it once a permit is free (limits that depend on more than one column). */
const readThenClaim = (engine: Engine, participant: Participant, key: string, entry: ActiveExecution, start: Start) =>
  Effect.gen(function*() {
    const [row] = yield* engine.storage.exec(participant.sql.read, [key])
    if (row === undefined || row.status !== "pending") return
    if (start.dueBy !== undefined && Number(row.next_attempt_at) > start.dueBy) return
    yield* withPermit(
      engine,
      start.permit,
      Effect.gen(function*() {
        const policy = participant.table.policy(row)
        const [claimed] = yield* engine.storage.exec(participant.sql.claim, [
          key,
          String(row.generation_id),
          policy.maxAttempts
        ])
        if (claimed === undefined) return yield* exhaust(engine, participant, key, row, policy)
        yield* attempt(engine, participant, key, row, Number(claimed.attempt), entry, start.platform)
      })
    )
  })

/**
 * Claims the record in one statement once a permit is free (the attempt is counted only when it
 * can run). Only when nothing was claimed is the record read, to tell "not due" from "out of attempts".
 */
const claimDirectly = (
  engine: Engine,
  participant: Participant,
  claimDue: NonNullable<Participant["claimDue"]>,
  key: string,
  entry: ActiveExecution,
  start: Start
) =>
  withPermit(
    engine,
    start.permit,
    Effect.gen(function*() {
      const dueBy = start.dueBy ?? Number.MAX_SAFE_INTEGER
      const [claimed] = yield* engine.storage.exec(claimDue.sql, [key, dueBy, ...claimDue.bindings])
      if (claimed !== undefined) {
        return yield* attempt(engine, participant, key, claimed, Number(claimed.attempt), entry, start.platform)
      }
      const [row] = yield* engine.storage.exec(participant.sql.read, [key])
      if (row === undefined || row.status !== "pending" || Number(row.next_attempt_at) > dueBy) return
      yield* exhaust(engine, participant, key, row, participant.table.policy(row))
    })
  )

const attempt = (
  engine: Engine,
  participant: Participant,
  key: string,
  row: Row,
  attemptNumber: number,
  entry: ActiveExecution,
  platform: AlarmInvocationInfo | undefined
) =>
  Effect.gen(function*() {
    const policy = participant.table.policy(row)
    const generation = String(row.generation_id)
    yield* emit(engine, participant, row, (entity, timestamp) => ({
      ...entity,
      type: "attempt_started",
      timestamp,
      attempt: attemptNumber
    }))

    const controller = new AbortController()
    const execution: Execution = { key, generation, attempt: attemptNumber, row, signal: controller.signal, platform }
    const startedAt = yield* Clock.currentTimeMillis
    const handler = yield* Effect.fork(Effect.suspend(() => participant.table.run(execution)))
    entry.abort = (reason) => {
      controller.abort(reason)
      Effect.runFork(Fiber.interrupt(handler))
    }
    const finished = yield* awaitWithin(engine.deadlines, handler, policy.attemptTimeoutMs).pipe(
      Effect.onInterrupt(() => Effect.sync(() => controller.abort(new Error("The execution was interrupted"))))
    )
    let outcome: Exit.Exit<unknown, unknown>
    if (Option.isSome(finished)) {
      outcome = finished.value
    } else {
      const timeout = policy.timeoutError(policy.attemptTimeoutMs)
      controller.abort(timeout)
      yield* Fiber.interruptFork(handler)
      outcome = Exit.fail(timeout)
      yield* logOutcome(
        participant,
        row,
        "warning",
        "durability.attempt.timed_out",
        `Durable ${participant.table.describe(row)}: attempt ${attemptNumber} timed out after ${policy.attemptTimeoutMs}ms`,
        { attempt: attemptNumber, timeoutMs: policy.attemptTimeoutMs }
      )
    }
    const durationMs = (yield* Clock.currentTimeMillis) - startedAt
    yield* settle(engine, participant, execution, entry, policy, outcome, durationMs)
    entry.persisted.succeed(undefined)
    // An abort-ignoring handler keeps the key and the permit until it really ends.
    yield* Fiber.await(handler)
  })

const isStorageError = (error: unknown): error is StorageError =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "StorageError"

const settle = (
  engine: Engine,
  participant: Participant,
  execution: Execution,
  entry: ActiveExecution,
  policy: AttemptPolicy,
  outcome: Exit.Exit<unknown, unknown>,
  durationMs: number
): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    if (Exit.isSuccess(outcome)) {
      const completed = yield* Effect.either(
        engine.settleWrite(participant.table.complete(execution, outcome.value), undefined)
      )
      if (completed._tag === "Right") {
        if (completed.right) {
          yield* emit(engine, participant, execution.row, (entity, timestamp) => ({
            ...entity,
            type: "attempt_settled",
            outcome: "completed",
            timestamp,
            attempt: execution.attempt,
            durationMs
          }))
        }
        return
      }
      if (isStorageError(completed.left)) return yield* completed.left
      return yield* settleFailure(engine, participant, execution, entry, policy, completed.left, durationMs, true)
    }
    const error = causeError(outcome.cause)
    const terminal = policy.isTerminal?.(error) ?? false
    yield* settleFailure(engine, participant, execution, entry, policy, error, durationMs, terminal)
  })

const settleFailure = (
  engine: Engine,
  participant: Participant,
  execution: Execution,
  entry: ActiveExecution,
  policy: AttemptPolicy,
  error: unknown,
  durationMs: number,
  terminal: boolean
) =>
  Effect.gen(function*() {
    const decision = yield* RetryPolicy.decide(policy, execution.attempt, error, { terminal })
    const recorded = storableError(Background.serializeError(decision._tag === "Fail" ? decision.error : error))
    const retryAt = decision._tag === "Retry" ? decision.at : undefined
    const nextAttemptAt = retryAt ?? Number(execution.row.next_attempt_at)
    const matched = yield* engine.settleWrite(
      engine.storage.exec(participant.sql.settleFailure, [
        decision._tag === "Retry" ? "pending" : "failed",
        nextAttemptAt,
        recorded.message,
        recorded.name,
        execution.key,
        execution.generation,
        execution.attempt
      ]),
      retryAt
    )
    if (matched.length === 0) return
    if (retryAt !== undefined && entry.revisit !== "refresh") entry.revisit = retryAt
    if (decision._tag === "Fail") {
      yield* logOutcome(
        participant,
        execution.row,
        "error",
        "durability.attempt.failed",
        `Durable ${participant.table.describe(execution.row)} failed for good on attempt ${execution.attempt}: ` +
          `${recorded.name}: ${recorded.message}`,
        { attempt: execution.attempt, error: recorded }
      )
    }
    yield* emit(engine, participant, execution.row, (entity, timestamp) =>
      decision._tag === "Retry"
        ? {
          ...entity,
          type: "attempt_settled",
          outcome: "retry_scheduled",
          timestamp,
          attempt: execution.attempt,
          durationMs,
          error: recorded,
          nextAttemptAt
        }
        : {
          ...entity,
          type: "attempt_settled",
          outcome: "failed",
          timestamp,
          attempt: execution.attempt,
          durationMs,
          error: recorded
        })
  })

/** The longest error message stored with a record (a row over the storage limit could never be written). */
export const MAX_ERROR_MESSAGE_CHARS = 8_192

const clip = (text: string, max: number): string => {
  if (text.length <= max) return text
  // Never cut a surrogate pair in half.
  const end = /[\uD800-\uDBFF]/.test(text.charAt(max - 1)) ? max - 1 : max
  return `${text.slice(0, end)}… (${text.length - end} more characters)`
}

/** The error as stored and reported: bounded, so settling a failure cannot fail on its size. */
const storableError = (error: SerializedError): SerializedError => ({
  name: clip(error.name, 256),
  message: clip(error.message, MAX_ERROR_MESSAGE_CHARS)
})

const exhaust = (engine: Engine, participant: Participant, key: string, row: Row, policy: AttemptPolicy) =>
  Effect.gen(function*() {
    const error = new DurableAttemptsExhaustedError({
      message: `Durable ${participant.table.describe(row)} exhausted its ${policy.maxAttempts} attempts`,
      attempts: policy.maxAttempts
    })
    const exhausted = yield* engine.settleWrite(
      engine.storage.exec(participant.sql.exhaust, [
        error.message,
        error._tag,
        key,
        String(row.generation_id),
        policy.maxAttempts
      ]),
      undefined
    )
    const [first] = exhausted
    if (first === undefined) return
    yield* logOutcome(participant, row, "error", "durability.attempts_exhausted", error.message, {
      attempt: Number(first.attempt),
      error: { name: error._tag, message: error.message }
    })
    yield* emit(engine, participant, row, (entity, timestamp) => ({
      ...entity,
      type: "terminal",
      timestamp,
      attempt: Number(first.attempt),
      reason: "attempts_exhausted",
      error: { name: error._tag, message: error.message }
    }))
  })

/** The due rows one participant's share of a pass took (queued, so other passes and the timer leave them). */
export interface DueBatch {
  readonly participant: Participant
  /** Taken keys not started yet. */
  readonly waiting: Set<string>
  readonly keys: ReadonlyArray<string>
}

/** Takes up to a batch of this participant's due rows for a pass. Pair with `releaseBatch`. */
export const takeDue = (engine: Engine, participant: Participant, now: number): Effect.Effect<DueBatch, StorageError> =>
  Effect.gen(function*() {
    const batch = participant.table.dueBatchSize ?? 100
    // Rows another pass already took are left to it (and do not count against this batch).
    const scanned = yield* engine.storage.exec(participant.sql.due, [now, batch + participant.queued.size])
    const keys = scanned.map((row) => String(row.key)).filter((key) => !participant.queued.has(key)).slice(0, batch)
    for (const key of keys) participant.queued.add(key)
    return { participant, waiting: new Set(keys), keys }
  })

/** Gives back the keys of a batch that never started (the pass failed or was interrupted). */
export const releaseBatch = (batch: DueBatch): void => {
  for (const key of batch.waiting) batch.participant.queued.delete(key)
  batch.waiting.clear()
}

/** Runs a taken batch, bounded by the pool; every row gets its chance, then the first infrastructure failure fails the pass. */
export const runBatch = (
  engine: Engine,
  batch: DueBatch,
  now: number,
  platform: AlarmInvocationInfo | undefined
): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const { participant, waiting } = batch
    const take = (key: string) => Effect.sync(() => waiting.delete(key) && participant.queued.delete(key))
    const run = (key: string) =>
      Effect.zipRight(take(key), Effect.exit(execute(engine, participant, key, { platform, dueBy: now })))
    // One due row (a timer pass for one alarm, typically) runs in this fiber: no fork to wait for.
    const exits = batch.keys.length === 1
      ? [yield* run(batch.keys[0]!)]
      : yield* Effect.forEach(batch.keys, run, { concurrency: engine.config.alarmConcurrency })
    const failed = exits.find(Exit.isFailure)
    if (failed !== undefined) return yield* failed
  })

export const handle = (engine: Engine, participant: Participant): TableHandle => {
  // Nobody awaits an eager start: it runs as its own fiber, and its failure is reported.
  const tryStart: TableHandle["tryStart"] = (key, options) =>
    Effect.gen(function*() {
      const permit = yield* engine.permits.tryAcquire
      if (Option.isNone(permit)) return false
      if (participant.active.has(key)) {
        yield* permit.value.release
        return true
      }
      const entry = begin(participant, key)
      const fiber = yield* Fork.detached(
        Effect.catchAllCause(
          own(engine, participant, key, entry, { permit: permit.value, dueBy: options?.dueBy }),
          (cause) =>
            engine.background.report("durability.background_execution.failed", {
              kind: participant.table.kind,
              id: key,
              error: Background.serializeError(causeError(cause))
            })
        ),
        engine.scope
      )
      yield* engine.background.waitUntil(Fork.settled(fiber))
      return true
    })

  const writePending: TableHandle["writePending"] = (body, pending) =>
    Effect.gen(function*() {
      const result = yield* engine.storage.transaction(
        Effect.tap(body, (value) => {
          const made = pending(value)
          return made === undefined ? Effect.void : engine.coverAlarm(made.at)
        })
      )
      const made = pending(result)
      if (made === undefined) return result
      const running = participant.active.get(made.key)
      if (running !== undefined) {
        // The timer skips a running key; its release looks again.
        running.revisit = "refresh"
        return result
      }
      if (made.start === true && (yield* tryStart(made.key, { dueBy: made.at }))) return result
      yield* engine.coverTimer(made.at)
      return result
    })

  return {
    write: engine.write,
    writePending,
    tryStart,
    execute: (key) => execute(engine, participant, key, {}),
    abort: (matches, reason, options) =>
      Effect.suspend(() => {
        let aborted = 0
        for (const [key, entry] of participant.active) {
          if (!matches(key)) continue
          entry.abort(reason)
          if (options?.release === true) participant.active.delete(key)
          aborted++
        }
        // A released key may have a new record the early timer skipped while the key was busy.
        return options?.release === true && aborted > 0 ? Effect.as(engine.afterRelease("refresh"), aborted) : Effect.succeed(aborted)
      }),
    isActive: (key) => Effect.sync(() => participant.active.has(key)),
    emit: (build) => Lifecycle.emitTo(engine.background, participant.table.onEvent, build)
  }
}
