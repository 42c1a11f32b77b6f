/**
 * The attempt lifecycle every table shares: the per-key lock, a durable claim before the handler
 * runs, the handler under a timeout with an `AbortSignal`, a settle conditional on (key, generation,
 * pending, attempt), and the retry time persisted from the policy's `Schedule`.
 *
 * An execution runs in the engine's scope and keeps its key and permit until the handler has really
 * ended, even after a timeout was persisted, so an abort-ignoring handler never overlaps its own
 * retry; callers resume as soon as the outcome is durable.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Background from "./Background.js"
import type { AttemptPolicy, Execution, PendingRecord, SettledWork } from "./DurableTable.js"
import { DurableAttemptsExhaustedError, type SerializedError, type StorageError } from "../shared/Errors.js"
import * as Lifecycle from "./Lifecycle.js"
import type * as PermitSemaphore from "./PermitSemaphore.js"
import * as RetryPolicy from "./RetryPolicy.js"
import type { Row } from "./StorageService.js"
import { errorOf } from "../shared/cause.js"
import type * as Deadlines from "./deadlines.js"
import { type Run, timersOf } from "./engine.js"
import * as Fork from "../shared/fork.js"
import { type ActiveExecution, begin } from "./participant.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"

export interface Start {
  /** Where the record stands among those waiting for its group's slot (`Dispatch.rank`). */
  readonly rank?: ReadonlyArray<number> | undefined
  /** Held from the claim until the handler has really ended. */
  readonly permit: PermitSemaphore.Permit
  /** The record's group slot (`Dispatch.slotOf`), held as long as the permit. */
  readonly slot?: PermitSemaphore.Permit | undefined
  readonly platform?: AlarmInvocationInfo | undefined
  /** A pass's time: the row must still be due then (an attempt may have settled since the due scan). */
  readonly dueBy?: number | undefined
}

const emit = (
  run: Run,
  row: Row,
  build: (entity: Lifecycle.LifecycleEntity, timestamp: number) => Lifecycle.LifecycleEvent,
  at?: number
): Effect.Effect<void> => {
  const { table } = run.participant
  return table.onEvent === undefined
    ? Effect.void
    : Lifecycle.emitTo(run.engine.background, table.onEvent, (timestamp) => build(table.entity(row), timestamp), at)
}

/**
 * Logs what no caller sees, once: through Effect's `Logger`, annotated with the record's entity
 * fields, so an application without a lifecycle hook still learns that work failed for good.
 */
const logOutcome = (
  run: Run,
  row: Row,
  level: "error" | "warning",
  event: string,
  message: string,
  fields: Readonly<Record<string, unknown>>
): Effect.Effect<void> =>
  (level === "error" ? Effect.logError(message) : Effect.logWarning(message)).pipe(
    Effect.annotateLogs({ event, ...run.participant.table.entity(row), ...fields })
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
    const outcome = Deferred.unsafeMake<Option.Option<Exit.Exit<A, E>>>(FiberId.none)
    fiber.addObserver((exit) => Deferred.unsafeDone(outcome, Exit.succeed(Option.some(exit))))
    return Effect.flatMap(
      deadlines.after(ms, () => Deferred.unsafeDone(outcome, Exit.succeed(Option.none()))),
      (cancel) => Effect.ensuring(Deferred.await(outcome), Effect.sync(cancel))
    )
  })

/**
 * For a pass: waits (FIFO) for a permit, then starts the record as its own fiber in the engine's
 * scope, or attaches to its execution in this isolate. Returns what completes once the outcome is
 * durable, so a pass starts its whole batch from one fiber and then awaits the outcomes.
 */
export const launch = (
  run: Run,
  key: string,
  start: Omit<Start, "permit">
): Effect.Effect<Deferred.Deferred<void, StorageError>> =>
  Effect.suspend(() => {
    const running = run.participant.active.get(key)
    if (running !== undefined) return Effect.succeed(running.persisted)
    const group = run.participant.table.dispatch?.slotOf?.(key)
    return Effect.uninterruptibleMask((restore) => {
      const holding = (slot: PermitSemaphore.Permit | undefined) =>
        Effect.flatMap(
          Effect.onInterrupt(restore(run.engine.permits.acquire), () => slot?.release ?? Effect.void),
          (permit) =>
            Effect.map(startHolding(run, key, { ...start, permit, slot }, false), (started) => started.entry.persisted)
        )
      return group === undefined ? holding(undefined) : Effect.flatMap(restore(group.acquire(start.rank ?? [], key)), holding)
    })
  })

/** Starts the record as its own fiber when its slot and a permit are free right now; nobody awaits it. */
export const tryStart = (run: Run, key: string, dueBy: number | undefined): Effect.Effect<boolean> => {
  const group = run.participant.table.dispatch?.slotOf?.(key)
  const withSlot = (slot: PermitSemaphore.Permit | undefined) =>
    Effect.flatMap(run.engine.permits.tryAcquire, (permit) => {
      if (Option.isNone(permit)) return Effect.as(slot?.release ?? Effect.void, false)
      return Effect.flatMap(startHolding(run, key, { permit: permit.value, slot, dueBy }, true), ({ fiber }) =>
        fiber === undefined ? Effect.succeed(true) : Effect.as(run.engine.background.waitUntil(Fork.settled(fiber)), true))
    })
  return group === undefined
    ? withSlot(undefined)
    : Effect.flatMap(group.tryAcquire, (slot) => Option.isNone(slot) ? Effect.succeed(false) : withSlot(slot.value))
}

/**
 * With `start.permit` held: starts the record as its own fiber in the engine's scope, or, when it
 * already executes in this isolate (another starter took the key meanwhile), gives the permit back
 * and returns that execution. `unobserved`: nobody awaits the outcome, so a failure is reported here.
 */
const startHolding = (
  run: Run,
  key: string,
  start: Start,
  unobserved: boolean
): Effect.Effect<{ readonly entry: ActiveExecution; readonly fiber?: Fiber.RuntimeFiber<void, StorageError> }> =>
  Effect.suspend(() => {
    const running = run.participant.active.get(key)
    if (running !== undefined) return Effect.as(releaseHeld(start), { entry: running })
    const entry = begin(run.participant, key)
    const { background, scope } = run.engine
    const execution = own(run, key, entry, start)
    const supervised = unobserved
      ? Effect.catchAllCause(execution, (cause) =>
        background.report("durability.background_execution.failed", {
          kind: run.participant.table.kind,
          id: key,
          error: Background.serializeError(errorOf(cause))
        }))
      : execution
    return Effect.map(Fork.detached(supervised, scope), (fiber) => ({ entry, fiber }))
  })

const releaseHeld = (start: Start): Effect.Effect<void> =>
  start.slot === undefined ? start.permit.release : Effect.zipRight(start.permit.release, start.slot.release)

/** The execution itself, from claim to release; its outcome also completes `entry.persisted`. */
const own = (run: Run, key: string, entry: ActiveExecution, start: Start): Effect.Effect<void, StorageError> => {
  const { participant } = run
  // A record that may have an admission is read first: its admission decides from the row.
  const direct = participant.claimDue !== undefined &&
    (participant.table.admission === undefined || participant.table.admission.mayApply?.(key) === false)
  const body = direct ? claimDirectly(run, key, entry, start) : readThenClaim(run, key, entry, start)
  return Effect.onExit(body, (exit) =>
    Effect.zipRight(
      releaseHeld(start),
      Effect.suspend(() => {
        if (participant.active.get(key) === entry) participant.active.delete(key)
        Deferred.unsafeDone(entry.persisted, Exit.asVoid(exit))
        // After an infrastructure failure the early timer is not re-armed: the row is still due, so it
        // would fire at once and fail again in a hot loop. The fallback alarm (or the registration's
        // alarm) retries it after the minimum delay.
        return Exit.isSuccess(exit) ? run.engine.upkeep.afterRelease(entry.revisit) : Effect.void
      })
    ))
}

/** Reads the record, then claims it (limits that depend on more than one column). */
const readThenClaim = (run: Run, key: string, entry: ActiveExecution, start: Start) =>
  Effect.flatMap(run.engine.storage.exec(run.participant.sql.read, [key]), ([row]) => {
    if (row === undefined || row.status !== "pending") return Effect.void
    if (start.dueBy !== undefined && Number(row.next_attempt_at) > start.dueBy) return Effect.void
    const { dispatch, policy: policyOf } = run.participant.table
    const policy = policyOf(row)
    const { storage } = run.engine
    const admission = run.participant.table.admission?.of(row)
    const claimAt = (now: number) => {
      const bindings = [key, String(row.generation_id), policy.maxAttempts]
      return storage.exec(
        admission === undefined ? run.participant.sql.claim : run.participant.sql.claimRow,
        dispatch?.startedColumn === undefined ? bindings : [now, ...bindings]
      )
    }
    const claimed = admission === undefined
      ? (dispatch?.startedColumn === undefined ? claimAt(0) : Effect.flatMap(Clock.currentTimeMillis, claimAt))
      : storage.transaction(
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.flatMap(admission(now), (decision) => {
            if (decision._tag === "Run") return claimAt(now)
            if (decision._tag === "Lease") {
              // Claimed here, run elsewhere: the lease's timer covers its end; past its attempts, exhausted.
              return Effect.flatMap(timersOf(run.engine).claimLease(run, key, decision.until, now, decision.state), (claimed) => {
                if (claimed === undefined) return Effect.succeed([])
                entry.revisit = "refresh"
                return Effect.as(decision.leased(claimed), undefined)
              })
            }
            // Deferred, not claimed: the record waits until then, the alarm follows it in this transaction,
            // and the timer looks again once this key is released.
            entry.revisit = "refresh"
            return Effect.as(
              Effect.zipRight(
                storage.exec(run.participant.sql.defer, [decision.at, key, String(row.generation_id)]),
                run.engine.upkeep.reconcile
              ),
              undefined
            )
          }))
      )
    return Effect.flatMap(claimed, (rows) => {
      if (rows === undefined) return Effect.void
      const [first] = rows
      return first === undefined
        ? exhaust(run, key, row, policy)
        // An admitted record runs as claimed: its admission may have written to it in the claim's transaction.
        : attempt(run, key, admission === undefined ? row : first, Number(first.attempt), entry, start.platform)
    })
  })

/**
 * Claims the record in one statement (the attempt is counted only when it can run, and the permit
 * is already held). Only when nothing was claimed is the record read, to tell "not due" from "out of attempts".
 */
const claimDirectly = (run: Run, key: string, entry: ActiveExecution, start: Start) => {
  const { participant } = run
  const claimDue = participant.claimDue!
  const dueBy = start.dueBy ?? Number.MAX_SAFE_INTEGER
  const { storage } = run.engine
  const stamped = participant.table.dispatch?.startedColumn !== undefined
  const claim = stamped
    ? Effect.flatMap(Clock.currentTimeMillis, (now) => storage.exec(claimDue.sql, [now, key, dueBy, ...claimDue.bindings]))
    : storage.exec(claimDue.sql, [key, dueBy, ...claimDue.bindings])
  return Effect.flatMap(claim, ([claimed]) =>
    claimed !== undefined
      ? attempt(run, key, claimed, Number(claimed.attempt), entry, start.platform)
      : Effect.flatMap(storage.exec(participant.sql.read, [key]), ([row]) =>
        row === undefined || row.status !== "pending" || Number(row.next_attempt_at) > dueBy
          ? Effect.void
          : exhaust(run, key, row, participant.table.policy(row))))
}

const attempt = (
  run: Run,
  key: string,
  row: Row,
  attemptNumber: number,
  entry: ActiveExecution,
  platform: AlarmInvocationInfo | undefined
) =>
  Effect.gen(function*() {
    const { participant } = run
    const policy = participant.table.policy(row)
    const startedAt = yield* Clock.currentTimeMillis
    yield* emit(
      run,
      row,
      (entity, timestamp) => ({ ...entity, type: "attempt_started", timestamp, attempt: attemptNumber }),
      startedAt
    )

    const controller = new AbortController()
    const execution: Execution = {
      key,
      generation: String(row.generation_id),
      attempt: attemptNumber,
      row,
      signal: controller.signal,
      platform
    }
    // Started at once, in this step: a handler that finishes without suspending (a plain value) needs
    // no scheduler turn, no deadline and no waiting here. Not a child fiber, so interrupting this
    // execution (eviction) interrupts it explicitly.
    const handler = Runtime.runFork(yield* Effect.runtime<never>())(Effect.suspend(() => participant.table.run(execution)))
    entry.abort = (reason) => {
      controller.abort(reason)
      handler.unsafeInterruptAsFork(FiberId.none)
    }
    const ended = handler.unsafePoll()
    const finished = ended !== null ? Option.some(ended) : yield* awaitWithin(run.engine.deadlines, handler, policy.attemptTimeoutMs).pipe(
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          controller.abort(new Error("The execution was interrupted"))
          handler.unsafeInterruptAsFork(FiberId.none)
        })
      )
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
        run,
        row,
        "warning",
        "durability.attempt.timed_out",
        `Durable ${participant.table.describe(row)}: attempt ${attemptNumber} timed out after ${policy.attemptTimeoutMs}ms`,
        { attempt: attemptNumber, timeoutMs: policy.attemptTimeoutMs }
      )
    }
    const endedAt = yield* Clock.currentTimeMillis
    // An own execution has no guard, so nothing is refused.
    yield* (settle(run, { execution, entry, policy, outcome, endedAt, durationMs: endedAt - startedAt }) as Effect.Effect<void, StorageError>)
    Deferred.unsafeDone(entry.persisted, Exit.void)
    // An abort-ignoring handler keeps the key and the permit until it really ends.
    if (ended === null) yield* Fiber.await(handler)
  })

export interface Settled {
  readonly execution: Execution
  readonly entry: ActiveExecution
  readonly policy: AttemptPolicy
  readonly outcome: Exit.Exit<unknown, unknown>
  /** The clock when the attempt ended: the settle's time. */
  readonly endedAt: number
  readonly durationMs: number
  /** Run first, in the settle's transaction (an external settle's fencing check); its failure writes nothing. */
  readonly guard?: Effect.Effect<void, Refused | StorageError> | undefined
  /** A failure that ends the record whatever the policy (an external worker's `retryable: false`). */
  readonly terminal?: boolean | undefined
}

/** A guard's refusal, carried through the settle untouched and handed back to the external settler. */
export class Refused {
  constructor(readonly error: unknown) {}
}

const guarded = <A, E>(settled: Settled, body: Effect.Effect<A, E>): Effect.Effect<A, E | Refused | StorageError> =>
  settled.guard === undefined ? body : Effect.zipRight(settled.guard, body)

const isStorageError = (error: unknown): error is StorageError =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "StorageError"

/** Settles an attempt: its outcome, the policy's decision and the table's settled work, in one transaction. */
export const settle = (run: Run, settled: Settled): Effect.Effect<void, StorageError | Refused> => {
  const { durationMs, endedAt, execution, outcome, policy } = settled
  if (Exit.isFailure(outcome)) {
    const error = errorOf(outcome.cause)
    return settleFailure(run, settled, error, settled.terminal === true || (policy.isTerminal?.(error) ?? false))
  }
  const done = made()
  const work = run.participant.table.settled?.(execution.row, { outcome: "completed", at: endedAt }, timersOf(run.engine).handleOf(run))
  return Effect.flatMap(
    Effect.either(run.engine.upkeep.settleWrite(
      withSettled(run, guarded(settled, run.participant.table.complete(execution, outcome.value, endedAt)), (matched) => matched, work, done),
      undefined,
      work === undefined && run.participant.table.completesInOneStatement === true && settled.guard === undefined
    )),
    (completed) => {
      if (completed._tag === "Left") {
        if (isStorageError(completed.left) || completed.left instanceof Refused) return Effect.fail(completed.left)
        // The value could not be stored: the policy decides (typically terminal: never re-run the side effect).
        return settleFailure(run, settled, completed.left, policy.isTerminal?.(completed.left) ?? false)
      }
      if (!completed.right) return Effect.void
      return Effect.zipRight(
        emit(run, execution.row, (entity, timestamp) => ({
          ...entity,
          type: "attempt_settled",
          outcome: "completed",
          timestamp,
          attempt: execution.attempt,
          durationMs
        }), endedAt),
        afterSettled(run, done)
      )
    }
  )
}

/**
 * The settle `body` followed, when it matched, by the table's settled work in the same transaction;
 * the records the work made pending are pushed to `made` and covered by the alarm before the commit.
 */
const withSettled = <A, E>(
  run: Run,
  body: Effect.Effect<A, E>,
  matched: (result: A) => boolean,
  work: SettledWork | undefined,
  made: Made
): Effect.Effect<A, E | StorageError> =>
  work === undefined ? body : Effect.tap(body, (result) =>
    !matched(result) ? Effect.void : Effect.flatMap(work, ({ after, pending }) => {
      made.after = after
      if (pending.length === 0) return Effect.void
      made.pending.push(...pending)
      return run.engine.upkeep.cover(pending.reduce((at, record) => Math.min(at, record.at), Number.MAX_SAFE_INTEGER))
    }))

/** What a settle's settled work left for after the commit. */
interface Made {
  readonly pending: Array<PendingRecord>
  after: Effect.Effect<void> | undefined
}

const made = (): Made => ({ pending: [], after: undefined })

/** After the settle committed: the settled work's records started or timed, then its own follow-up. */
const afterSettled = (run: Run, done: Made): Effect.Effect<void> =>
  done.after === undefined ? startPending(run, done.pending) : Effect.zipRight(startPending(run, done.pending), done.after)

/**
 * After the commit that made `records` pending: each starts at once while permits are free (and it
 * asks to), or gets the early timer; a key executing here is looked at again when it is released.
 */
export const startPending = (run: Run, records: ReadonlyArray<PendingRecord>): Effect.Effect<void> =>
  records.length === 0 ? Effect.void : Effect.gen(function*() {
    let startable = true
    const held = run.participant.table.holds?.holds
    for (const made of records) {
      // A held record's claim would be refused: starting it would only show it running for a moment. One
      // that asks for no start still gets its time covered (a leased job's reclaim at its lease's end).
      if (held?.(made.key) === true) {
        if (made.start !== true) yield* run.engine.alarms.coverTimer(made.at)
        continue
      }
      const running = run.participant.active.get(made.key)
      if (running !== undefined) {
        // The timer skips a running key; its release looks again.
        running.revisit = "refresh"
        continue
      }
      // Once a permit is refused, the rest of a batch is left to the timer or the alarm.
      if (startable && made.start === true && (yield* tryStart(run, made.key, made.at))) continue
      if (made.start === true) startable = false
      yield* run.engine.alarms.coverTimer(made.at)
    }
  })

const settleFailure = (run: Run, settled: Settled, error: unknown, terminal: boolean) =>
  Effect.gen(function*() {
    const { durationMs, entry, execution, policy } = settled
    const { participant } = run
    const decision = yield* RetryPolicy.decide(policy, execution.attempt, error, { terminal })
    const recorded = storableError(Background.serializeError(decision._tag === "Fail" ? decision.error : error))
    const retryAt = decision._tag === "Retry" ? decision.at : undefined
    const nextAttemptAt = retryAt ?? Number(execution.row.next_attempt_at)
    const done = made()
    const work = decision._tag === "Fail"
      ? participant.table.settled?.(execution.row, { outcome: "failed", at: settled.endedAt, error: recorded }, timersOf(run.engine).handleOf(run))
      : undefined
    const matched = yield* run.engine.upkeep.settleWrite(
      withSettled(run, guarded(settled, run.engine.storage.exec(participant.sql.settleFailure, [
        decision._tag === "Retry" ? "pending" : "failed",
        nextAttemptAt,
        recorded.message,
        recorded.name,
        execution.key,
        execution.generation,
        execution.attempt
      ])), (rows) => rows.length > 0, work, done),
      retryAt,
      work === undefined && settled.guard === undefined
    )
    if (matched.length === 0) return
    if (retryAt !== undefined && entry.revisit !== "refresh") entry.revisit = retryAt
    if (decision._tag === "Fail") {
      yield* logOutcome(
        run,
        execution.row,
        "error",
        "durability.attempt.failed",
        `Durable ${participant.table.describe(execution.row)} failed for good on attempt ${execution.attempt}: ` +
          `${recorded.name}: ${recorded.message}`,
        { attempt: execution.attempt, error: recorded }
      )
    }
    yield* emit(run, execution.row, (entity, timestamp) =>
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
    yield* afterSettled(run, done)
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

/**
 * A leased record whose lease ended with its attempts spent: exhausted as an own record is, in one
 * transaction that first runs `guard` (its failure writes nothing and is returned).
 */
export const exhaustGuarded = <E>(run: Run, row: Row, guard: Effect.Effect<void, E>): Effect.Effect<void, E | StorageError> =>
  exhaust(run, String(row[run.participant.table.keyColumn]), row, run.participant.table.policy(row), guard)

const exhaust = <E = never>(
  run: Run,
  key: string,
  row: Row,
  policy: AttemptPolicy,
  guard?: Effect.Effect<void, E>
): Effect.Effect<void, E | StorageError> =>
  Effect.gen(function*() {
    const error = new DurableAttemptsExhaustedError({
      message: `Durable ${run.participant.table.describe(row)} exhausted its ${policy.maxAttempts} attempts`,
      attempts: policy.maxAttempts
    })
    const done = made()
    const work = run.participant.table.settled?.(row, {
      outcome: "failed",
      at: yield* Clock.currentTimeMillis,
      error: { name: error._tag, message: error.message }
    }, timersOf(run.engine).handleOf(run))
    const statement = run.engine.storage.exec(run.participant.sql.exhaust, [
      error.message,
      error._tag,
      key,
      String(row.generation_id),
      policy.maxAttempts
    ])
    const [first] = yield* run.engine.upkeep.settleWrite(
      withSettled(run, guard === undefined ? statement : Effect.zipRight(guard, statement), (rows) => rows.length > 0, work, done),
      undefined,
      work === undefined && guard === undefined
    )
    if (first === undefined) return
    yield* logOutcome(run, row, "error", "durability.attempts_exhausted", error.message, {
      attempt: Number(first.attempt),
      error: { name: error._tag, message: error.message }
    })
    yield* emit(run, row, (entity, timestamp) => ({
      ...entity,
      type: "terminal",
      timestamp,
      attempt: Number(first.attempt),
      reason: "attempts_exhausted",
      error: { name: error._tag, message: error.message }
    }))
    yield* afterSettled(run, done)
  })
