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
import * as Either from "effect/Either"
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
import * as TableSql from "./tableSql.js"
import type { Row } from "./StorageService.js"
import { errorOf } from "../shared/cause.js"
import type * as Deadlines from "./deadlines.js"
import { type Run, timersOf } from "./engine.js"
import * as Fork from "../shared/fork.js"
import { type ActiveExecution, begin, type Grouped, type Ready, type Start } from "./participant.js"


/**
 * A lifecycle event of `row`; one that does not end an attempt (`settles: false`: a start) is built only for
 * a user's hook.
 */
const emit = (
  run: Run,
  row: Row,
  settles: boolean,
  build: (entity: Lifecycle.LifecycleEntity, timestamp: number) => Lifecycle.LifecycleEvent,
  at?: number
): Effect.Effect<void> => {
  const { table } = run.participant
  return table.onEvent === undefined || (!settles && !Lifecycle.hears(table.onEvent))
    ? Effect.void
    : Lifecycle.emitTo(run.engine.background, table.onEvent, (timestamp) => build(table.entity(row), timestamp), at)
}

/** The `attempt_settled` event of a success. */
const emitCompleted = (run: Run, execution: Execution, durationMs: number, endedAt: number): Effect.Effect<void> =>
  emit(run, execution.row, true, (entity, timestamp) => ({
    ...entity,
    type: "attempt_settled",
    outcome: "completed",
    timestamp,
    attempt: execution.attempt,
    durationMs
  }), endedAt)

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

/**
 * Takes the record's slot and a permit when both are free right now; nobody awaits the outcome. `inline`:
 * the execution runs in the participant's drain (`startInline`), else in a fiber of its own.
 */
const tryStartWith = (run: Run, key: string, dueBy: number | undefined, inline: boolean): Effect.Effect<boolean> => {
  const group = run.participant.table.dispatch?.slotOf?.(key)
  const withSlot = (slot: PermitSemaphore.Permit | undefined) =>
    Effect.flatMap(run.engine.permits.tryAcquire, (permit) => {
      if (Option.isNone(permit)) return Effect.as(slot?.release ?? Effect.void, false)
      const start: Start = { permit: permit.value, slot, dueBy, inline }
      return Effect.as(inline ? startInline(run, key, start) : startForked(run, key, start), true)
    })
  return group === undefined
    ? withSlot(undefined)
    : Effect.flatMap(group.tryAcquire, (slot) => Option.isNone(slot) ? Effect.succeed(false) : withSlot(slot.value))
}

/**
 * For a pass, when the record's slot and a permit are free right now: runs it in this fiber (a plain
 * value settles here, with no fiber) and returns its outcome, or what completes once a handler that
 * suspended has settled; attaches to its execution in this isolate; `undefined` when it must wait.
 */
export const runNow = (
  run: Run,
  key: string,
  start: Omit<Start, "permit">,
  /** Called once the record is taken (before it runs): the pass stops holding it. */
  taken: () => void
): Effect.Effect<Exit.Exit<void, StorageError> | Deferred.Deferred<void, StorageError> | undefined> =>
  Effect.suspend(() => {
    const running = run.participant.active.get(key)
    if (running !== undefined) {
      taken()
      return Effect.succeed(running.persisted)
    }
    const group = run.participant.table.dispatch?.slotOf?.(key)
    const withSlot = (slot: PermitSemaphore.Permit | undefined) =>
      Effect.flatMap(run.engine.permits.tryAcquire, (permit) => {
        if (Option.isNone(permit)) return Effect.as(slot?.release ?? Effect.void, undefined)
        const entry = begin(run.participant, key)
        taken()
        const execution = own(run, key, entry, { ...start, permit: permit.value, slot, inline: true, awaited: true })
        return Effect.map(Effect.exit(Effect.uninterruptible(execution)), (exit) => entry.moved === true ? entry.persisted : exit)
      })
    return group === undefined
      ? withSlot(undefined)
      : Effect.flatMap(group.tryAcquire, (slot) => Option.isNone(slot) ? Effect.succeed(undefined) : withSlot(slot.value))
  })

/** Starts the record as its own fiber when its slot and a permit are free right now; nobody awaits it. */
export const tryStart = (run: Run, key: string, dueBy: number | undefined): Effect.Effect<boolean> =>
  tryStartWith(run, key, dueBy, false)

/** With `start.permit` held, nobody awaiting: the execution as a fiber of its own, kept alive by `waitUntil`. */
const startForked = (run: Run, key: string, start: Start): Effect.Effect<void> =>
  Effect.flatMap(startHolding(run, key, start, true), ({ fiber }) =>
    fiber === undefined ? Effect.void : run.engine.background.waitUntil(Fork.settled(fiber)))

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
    const execution = own(run, key, entry, start)
    const fiber = Fork.detached(unobserved ? unobservedBy(run, key, execution) : execution, run.engine.scope)
    return Effect.map(fiber, (fiber) => ({ entry, fiber }))
  })

/**
 * With `start.permit` held, nobody awaiting: takes the key now (so every starter sees it executing) and
 * leaves the execution to the participant's drain, started when none runs; or, when the key already
 * executes here, gives the permit back.
 */
const startInline = (run: Run, key: string, start: Start): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { participant } = run
    if (participant.active.has(key)) return releaseHeld(start)
    participant.ready.push({ key, entry: begin(participant, key), start })
    if (participant.draining) return Effect.void
    participant.draining = true
    return Effect.flatMap(Fork.detached(drain(run), run.engine.scope), (fiber) => run.engine.background.waitUntil(Fork.settled(fiber)))
  })

/** An execution nobody awaits: its failure is reported here. */
const unobservedBy = (run: Run, key: string, execution: Effect.Effect<void, StorageError>): Effect.Effect<void> =>
  Effect.catchAllCause(execution, (cause) =>
    run.engine.background.report("durability.background_execution.failed", {
      kind: run.participant.table.kind,
      id: key,
      error: Background.serializeError(errorOf(cause))
    }))

const releaseHeld = (start: Start): Effect.Effect<void> =>
  start.slot === undefined ? start.permit.release : Effect.zipRight(start.permit.release, start.slot.release)

/** The execution itself, from claim to release; its outcome also completes `entry.persisted`. */
const own = (run: Run, key: string, entry: ActiveExecution, start: Start): Effect.Effect<void, StorageError> => {
  const body = claimsDirectly(run.participant, key) ? claimDirectly(run, key, entry, start) : readThenClaim(run, key, entry, start)
  // An inline execution whose handler suspended ends in the fiber it moved to, which releases it.
  return Effect.onExit(body, (exit) => entry.moved ? Effect.void : release(run, key, entry, start, exit))
}

/** Whether the record is claimed in one statement; one that may have an admission is read first (its admission decides from the row). */
const claimsDirectly = (participant: Run["participant"], key: string): boolean =>
  participant.claimDue !== undefined &&
  (participant.table.admission === undefined || participant.table.admission.mayApply?.(key) === false)

/** Gives back the key and the permit once the execution really ended, and tells who waits. */
const release = (
  run: Run,
  key: string,
  entry: ActiveExecution,
  start: Start,
  exit: Exit.Exit<void, StorageError>
): Effect.Effect<void> =>
  Effect.zipRight(
    releaseHeld(start),
    Effect.suspend(() => {
      const { participant } = run
      if (participant.active.get(key) === entry) participant.active.delete(key)
      Deferred.unsafeDone(entry.persisted, Exit.asVoid(exit))
      // After an infrastructure failure the early timer is not re-armed: the row is still due, so it
      // would fire at once and fail again in a hot loop. The fallback alarm (or the registration's
      // alarm) retries it after the minimum delay.
      return Exit.isSuccess(exit) ? run.engine.upkeep.afterRelease(entry.revisit) : Effect.void
    })
  )

/** Reads the record, then claims it (limits that depend on more than one column). */
const readThenClaim = (run: Run, key: string, entry: ActiveExecution, start: Start) =>
  Effect.flatMap(run.engine.storage.exec(run.participant.sql.read, [key]), ([row]) => {
    if (row === undefined || row.status !== "pending") return Effect.void
    if (start.dueBy !== undefined && Number(row.next_attempt_at) > start.dueBy) return Effect.void
    const { dispatch, policy: policyOf } = run.participant.table
    const policy = policyOf(row)
    const { storage } = run.engine
    const admission = run.participant.table.admission?.of(row)
    // A deferral's own follow-up, called once its transaction committed.
    let deferred: (() => void) | undefined
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
            deferred = decision.committed
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
      if (rows === undefined) {
        deferred?.()
        return Effect.void
      }
      const [first] = rows
      return first === undefined
        ? exhaust(run, key, row, policy)
        // An admitted record runs as claimed: its admission may have written to it in the claim's transaction.
        : attempt(run, key, admission === undefined ? row : first, Number(first.attempt), entry, start)
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
    claimed !== undefined ? attempt(run, key, claimed, Number(claimed.attempt), entry, start) : notClaimed(run, key, dueBy))
}

/** A record the claim did not take: read, to tell "not due" (nothing to do) from "out of attempts". */
const notClaimed = (run: Run, key: string, dueBy: number): Effect.Effect<void, StorageError> =>
  Effect.flatMap(run.engine.storage.exec(run.participant.sql.read, [key]), ([row]) =>
    row === undefined || row.status !== "pending" || Number(row.next_attempt_at) > dueBy
      ? Effect.void
      : exhaust(run, key, row, run.participant.table.policy(row)))

const attempt = (
  run: Run,
  key: string,
  row: Row,
  attemptNumber: number,
  entry: ActiveExecution,
  start: Start
) =>
  Effect.gen(function*() {
    const { participant } = run
    const policy = participant.table.policy(row)
    const startedAt = yield* Clock.currentTimeMillis
    yield* emit(
      run,
      row,
      false,
      (entity, timestamp) => ({ ...entity, type: "attempt_started", timestamp, attempt: attemptNumber }),
      startedAt
    )

    const controller = new AbortController()
    const runtime = yield* Effect.runtime<never>()
    const execution: Execution = {
      key,
      generation: String(row.generation_id),
      attempt: attemptNumber,
      row,
      signal: controller.signal,
      platform: start.platform,
      runtime
    }
    let returned: Effect.Effect<unknown, unknown>
    try {
      returned = participant.table.run(execution)
    } catch (defect) {
      returned = Exit.die(defect)
    }
    // A plain handler that already ended: no fiber, no scheduler turn, nothing to time out.
    if (Exit.isExit(returned)) {
      entry.abort = (reason) => controller.abort(reason)
      const attempted: Attempted = { execution, entry, policy, controller, handler: undefined, startedAt }
      return yield* (start.group === undefined ? conclude(run, attempted, returned) : concludeOrJoin(run, start, attempted, returned))
    }
    // Started at once, in this step: a handler that finishes without suspending needs no deadline and no
    // waiting here. Not a child fiber, so interrupting this execution (eviction) interrupts it explicitly;
    // interruptible whatever the starter's region.
    const handler = Runtime.runFork(runtime)(Effect.interruptible(returned))
    entry.abort = (reason) => {
      controller.abort(reason)
      handler.unsafeInterruptAsFork(FiberId.none)
    }
    const ended = handler.unsafePoll()
    const attempted: Attempted = { execution, entry, policy, controller, handler, startedAt }
    if (ended !== null) {
      return yield* (start.group === undefined ? conclude(run, attempted, ended) : concludeOrJoin(run, start, attempted, ended))
    }
    if (start.inline !== true) return yield* awaitHandler(run, { ...attempted, handler })
    // Nobody waits for an inline execution: it goes on in a fiber of its own, which releases it.
    entry.moved = true
    const rest = Effect.onExit(awaitHandler(run, { ...attempted, handler }), (exit) => release(run, key, entry, start, exit))
    // A pass awaits the outcome (and reports its failure); for an eager start, nobody would.
    const fiber = yield* Fork.detached(start.awaited === true ? rest : unobservedBy(run, key, rest), run.engine.scope)
    yield* run.engine.background.waitUntil(Fork.settled(fiber))
  })

/**
 * A success that ended at once, of a record claimed with others, whose settle is the table's `complete`
 * alone (no settled work), joins its group, to be settled with the others (`settleGroup`); anything else
 * settles here.
 */
const concludeOrJoin = (
  run: Run,
  start: Start,
  attempted: Attempted,
  outcome: Exit.Exit<unknown, unknown>
): Effect.Effect<void, StorageError> =>
  Effect.flatMap(Clock.currentTimeMillis, (endedAt) => {
    const { table } = run.participant
    const { entry, execution, policy, startedAt } = attempted
    const joins = start.group !== undefined && table.completeMany !== undefined && Exit.isSuccess(outcome) &&
      table.settled?.(execution.row, { outcome: "completed", at: endedAt }, timersOf(run.engine).handleOf(run)) === undefined
    // What ended before it is settled first, as one by one it would have been.
    if (!joins) return Effect.zipRight(flushGroup(run, start.group), conclude(run, attempted, outcome))
    entry.grouped = true
    start.group.push({ key: execution.key, entry, start, execution, policy, value: outcome.value, startedAt, endedAt })
    return Effect.void
  })

/** An attempt whose handler has started. */
interface Attempted {
  readonly execution: Execution
  readonly entry: ActiveExecution
  readonly policy: AttemptPolicy
  readonly controller: AbortController
  /** The handler's fiber; none for a plain handler that had ended when called. */
  readonly handler: Fiber.RuntimeFiber<unknown, unknown> | undefined
  readonly startedAt: number
}

/**
 * Waits for a suspended handler up to the attempt's timeout (then aborts it), settles, and keeps the
 * key and the permit until an abort-ignoring handler really ends.
 */
const awaitHandler = (
  run: Run,
  attempted: Attempted & { readonly handler: Fiber.RuntimeFiber<unknown, unknown> }
): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const { controller, execution, handler, policy } = attempted
    const finished = yield* awaitWithin(run.engine.deadlines, handler, policy.attemptTimeoutMs).pipe(
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          controller.abort(new Error("The execution was interrupted"))
          handler.unsafeInterruptAsFork(FiberId.none)
        })
      )
    )
    if (Option.isSome(finished)) return yield* Effect.zipRight(conclude(run, attempted, finished.value), Fiber.await(handler))
    const timeout = policy.timeoutError(policy.attemptTimeoutMs)
    controller.abort(timeout)
    yield* Fiber.interruptFork(handler)
    const { row } = execution
    yield* logOutcome(
      run,
      row,
      "warning",
      "durability.attempt.timed_out",
      `Durable ${run.participant.table.describe(row)}: attempt ${execution.attempt} timed out after ${policy.attemptTimeoutMs}ms`,
      { attempt: execution.attempt, timeoutMs: policy.attemptTimeoutMs }
    )
    yield* conclude(run, attempted, Exit.fail(timeout))
    // An abort-ignoring handler keeps the key and the permit until it really ends.
    yield* Fiber.await(handler)
  })

/** Settles the attempt's outcome; whoever waits for the record resumes once it is durable. */
const conclude = (
  run: Run,
  attempted: Pick<Attempted, "entry" | "execution" | "policy" | "startedAt">,
  outcome: Exit.Exit<unknown, unknown>
): Effect.Effect<void, StorageError> =>
  Effect.flatMap(Clock.currentTimeMillis, (endedAt) => {
    const { entry, execution, policy, startedAt } = attempted
    // An own execution has no guard, so nothing is refused.
    const settled = settle(run, { execution, entry, policy, outcome, endedAt, durationMs: endedAt - startedAt })
    return Effect.tap(settled as Effect.Effect<void, StorageError>, () => Deferred.unsafeDone(entry.persisted, Exit.void))
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
      return Effect.zipRight(emitCompleted(run, execution, durationMs, endedAt), afterSettled(run, done))
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
 * After the commit that made `records` pending: each starts while its slot and a permit are free (and it
 * asks to), or gets the early timer; a key executing here is looked at again when it is released. A
 * start takes its key and permit here and runs in the participant's drain, once the writer has moved on.
 */
export const startPending = (run: Run, records: ReadonlyArray<PendingRecord>): Effect.Effect<void> =>
  records.length === 0 ? Effect.void : Effect.gen(function*() {
    let startable = true
    const { participant } = run
    const held = participant.table.holds?.holds
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
      if (startable && made.start === true && (yield* tryStartWith(run, made.key, made.at, true))) continue
      if (made.start === true) {
        startable = false
        // The drain frees permits as its executions end (at once, for plain values): it tries these
        // again after its ready ones, and gives the timer those it cannot start.
        if (participant.draining) {
          participant.later.push(made)
          continue
        }
      }
      yield* run.engine.alarms.coverTimer(made.at)
    }
  })

/**
 * Runs the ready executions in order in one fiber: each in turn (a handler that ends at once settles
 * here, and what its settle started joins this batch; one that suspends goes on in a fiber of its own).
 */
const drain = (run: Run): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { participant } = run
    const { later, ready } = participant
    const held = participant.table.holds?.holds
    let at = 0
    let retried = 0
    const next = (): Effect.Effect<void> => {
      if (at < ready.length) {
        const group = groupAt(run, ready, at)
        if (group.length > 1) {
          at += group.length
          return Effect.zipRight(Effect.uninterruptible(runGroup(run, group)), Effect.suspend(next))
        }
        const { entry, key, start } = ready[at++]!
        return Effect.zipRight(Effect.uninterruptible(unobservedBy(run, key, own(run, key, entry, start))), Effect.suspend(next))
      }
      return retryLater(0)
    }
    // Starts the records refused before while permits are free (each joins the ready ones, to run as a
    // group), then runs them; one refused goes to the timer with the rest.
    const retryLater = (started: number): Effect.Effect<void> => {
      while (retried < later.length && started < TableSql.GROUP_SIZE) {
        const made = later[retried++]!
        if (held?.(made.key) === true || participant.active.has(made.key) || participant.queued.has(made.key)) continue
        return Effect.flatMap(tryStartWith(run, made.key, made.at, true), (ok) => {
          if (ok) return retryLater(started + 1)
          retried--
          // Those just started hold the permits: run them, then try again. Else it waits for the timer.
          return started > 0 ? next() : Effect.zipRight(coverLater, Effect.suspend(next))
        })
      }
      return started > 0 ? next() : Effect.void
    }
    // The timer for the records the drain did not start.
    const coverLater = Effect.suspend(() => {
      let earliest: number | undefined
      for (let i = retried; i < later.length; i++) earliest = Math.min(earliest ?? later[i]!.at, later[i]!.at)
      retried = later.length
      return earliest === undefined ? Effect.void : run.engine.alarms.coverTimer(earliest)
    })
    return Effect.ensuring(
      next(),
      Effect.suspend(() => {
        participant.draining = false
        if (at >= ready.length && retried >= later.length) {
          ready.length = 0
          later.length = 0
          return Effect.void
        }
        // Interrupted (the object's scope closed): the rest never claimed; their rows are covered by the alarm.
        const left = ready.splice(0)
        const released = left.length <= at
          ? Effect.void
          : Effect.forEach(left.slice(at), (item) => release(run, item.key, item.entry, item.start, Exit.void), { discard: true })
        return Effect.zipRight(released, Effect.ensuring(coverLater, Effect.sync(() => {
          later.length = 0
        })))
      })
    )
  })

/**
 * The ready executions from `from` that can be claimed together: consecutive, each claimed in one statement,
 * of a table that completes many at once; at most `TableSql.GROUP_SIZE`.
 */
const groupAt = (run: Run, ready: ReadonlyArray<Ready>, from: number): ReadonlyArray<Ready> => {
  const { participant } = run
  if (participant.table.completeMany === undefined || participant.claimDue === undefined) return []
  let end = from
  while (end < ready.length && end - from < TableSql.GROUP_SIZE && claimsDirectly(participant, ready[end]!.key)) end++
  return ready.slice(from, end)
}

/**
 * A group of ready executions as one: claimed in one statement, each run in turn (its own lifecycle: a
 * failure, a suspended handler or a success with settled work settles on its own), then the successes
 * that ended at once settled together (`settleGroup`). Each record's fencing is as in `own`.
 */
const runGroup = (run: Run, group: ReadonlyArray<Ready>): Effect.Effect<void> =>
  Effect.gen(function*() {
    const { participant } = run
    const { storage } = run.engine
    const claimDue = participant.claimDue!
    let dueBy = 0
    for (const item of group) dueBy = Math.max(dueBy, item.start.dueBy ?? Number.MAX_SAFE_INTEGER)
    const bindings = [...group.map((item) => item.key), dueBy, ...claimDue.bindings]
    const sql = participant.sql.claimDueMany(claimDue.limit, group.length)
    const claimed = yield* Effect.exit(
      participant.table.dispatch?.startedColumn === undefined
        ? storage.exec(sql, bindings)
        : Effect.flatMap(Clock.currentTimeMillis, (now) => storage.exec(sql, [now, ...bindings]))
    )
    const rows = new Map(Exit.isSuccess(claimed) ? claimed.value.map((row) => [String(row[participant.table.keyColumn]), row]) : [])
    const successes: Array<Grouped> = []
    for (const { entry, key, start } of group) {
      const row = rows.get(key)
      const execution = Exit.isFailure(claimed)
        ? claimed
        : row === undefined
        ? Effect.zipRight(flushGroup(run, successes), notClaimed(run, key, dueBy))
        : attempt(run, key, row, Number(row.attempt), entry, { ...start, group: successes })
      const exit = yield* Effect.exit(execution)
      if (entry.moved === true || entry.grouped === true) continue
      yield* release(run, key, entry, start, exit)
      if (Exit.isFailure(exit)) yield* unobservedBy(run, key, exit)
    }
    yield* flushGroup(run, successes)
  })

/** Settles the group's successes so far (`settleGroup`, `TableSql.GROUP_SIZE` at a time) and empties it. */
const flushGroup = (run: Run, successes: Array<Grouped> | undefined): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (successes === undefined || successes.length === 0) return Effect.void
    const settling = successes.splice(0)
    const chunks: Array<ReadonlyArray<Grouped>> = []
    for (let from = 0; from < settling.length; from += TableSql.GROUP_SIZE) chunks.push(settling.slice(from, from + TableSql.GROUP_SIZE))
    return Effect.forEach(chunks, (chunk) => settleGroup(run, chunk), { discard: true })
  })

/**
 * Settles successes of one group in one statement (`DurableTable.completeMany`), then releases each; when
 * that statement fails, each settles on its own (as `complete` alone would: its own failure handling).
 */
const settleGroup = (run: Run, successes: ReadonlyArray<Grouped>): Effect.Effect<void> =>
  Effect.gen(function*() {
    const { table } = run.participant
    const completions = successes.map(({ endedAt, execution, value }) => ({ execution, value, settledAt: endedAt }))
    const matched = yield* Effect.either(run.engine.upkeep.settleWrite(table.completeMany!(completions), undefined, true))
    for (const success of successes) {
      const { endedAt, entry, execution, key, start, startedAt } = success
      const settled: Effect.Effect<void, StorageError> = Either.isLeft(matched)
        ? conclude(run, success, Exit.succeed(success.value))
        : !matched.right.includes(key)
        ? Effect.void
        : emitCompleted(run, execution, endedAt - startedAt, endedAt)
      const exit = yield* Effect.exit(settled)
      yield* release(run, key, entry, start, exit)
      if (Exit.isFailure(exit)) yield* unobservedBy(run, key, exit)
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
    // Every attempt's end is built, a retry's too: what listens for ends (the watchers, a table's counts) hears it.
    yield* emit(run, execution.row, true, (entity, timestamp) =>
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
    yield* emit(run, row, true, (entity, timestamp) => ({
      ...entity,
      type: "terminal",
      timestamp,
      attempt: Number(first.attempt),
      reason: "attempts_exhausted",
      error: { name: error._tag, message: error.message }
    }))
    yield* afterSettled(run, done)
  })
