/**
 * Fanout on the engine. Each target is one record of the engine (the targets table): pending
 * while the target has deliveries stored, due at its earliest one. Running it is the target's pass: one
 * permit, a batch claimed in one transaction, one consumer call, the settlements, the dead letters. Its
 * end re-times the record from the deliveries left, so every delay (a retry, `batchDelayMs`, a claim's
 * deadline, the 60 s of a dead letter or a removed target) is the engine's: covered by the one alarm and
 * the early timer. The per-key lock makes a target's pass single in the isolate.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Background from "../engine/Background.js"
import type { AttemptPolicy, Execution, PendingRecord, TableHandle } from "../engine/DurableTable.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import * as Migrations from "../engine/Migrations.js"
import * as Policy from "../engine/policy.js"
import * as RetryPolicy from "../engine/RetryPolicy.js"
import * as Scheduler from "../engine/Scheduler.js"
import { type Row, StorageService } from "../engine/StorageService.js"
import * as TimerSupport from "../engine/timerSupport.js"
import { errorOf } from "../shared/cause.js"
import { InvalidInputError, InvalidOptionError, ParticipantConflictError, type StorageError } from "../shared/Errors.js"
import * as Json from "../shared/json.js"
import type { SerializedError, StoredMessage } from "../shared/StoredMessage.js"
import { shown } from "../shared/validate.js"
import * as Load from "../routing/RoutingLoad.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as Table from "./deliveriesTable.js"
import * as Inspection from "./inspection.js"
import { FanoutEnqueueError, FanoutSettlementError, FanoutTimeoutError } from "./errors.js"
import type { FanoutEnqueueOptions, FanoutInput, FanoutMessage, FanoutOptions, Service, Target } from "./types.js"
import { CAPABILITY, migrations, TARGETS } from "./schema.js"

/** How long a dead letter's write may take, and how long a failed one (or a removed target's work) waits. */
export const RETRY_LATER_MS = 60_000
/** Deliveries per target pass by default. */
export const DEFAULT_MAX_BATCH_SIZE = 10
/** The entity kind of fanout's lifecycle events. */
export const ENTITY_KIND = "fanout_delivery"

const GENERATION = "fanout"

type Phase = "open" | "settling" | "settled" | "closed"

/** One delivery of a running batch: its claim and where its settlement stands. */
interface Slot {
  readonly row: Row
  readonly claim: Table.Claim
  readonly message: FanoutMessage<unknown>
  phase: Phase
  outcome: string | undefined
  /** Done when its settlement ended: success, or its failure (the outcome may still have committed). */
  done: Deferred.Deferred<void, unknown> | undefined
  /** How its settlement ended, once it did. */
  result: Exit.Exit<unknown, unknown> | undefined
}

interface Resolved {
  readonly policy: Policy.Resolved
  readonly target: Target<unknown>
}

const serialized = (error: unknown): SerializedError => Background.serializeError(error)

const wrap = (body: unknown): string =>
  JSON.stringify(body === undefined ? { kind: "undefined" } : { kind: "value", value: body })

const unwrap = (payload: string): unknown => {
  const parsed = JSON.parse(payload) as { readonly kind: string; readonly value?: unknown }
  return parsed.kind === "undefined" ? undefined : parsed.value
}

const optionProblem = (field: string, kind: "range" | "type", message: string) =>
  new InvalidOptionError({ field, kind, message })

/** The options checked (messages as the reference's, so its tests read them), each target's policy resolved. */
const check = <Body>(options: FanoutOptions<Body>) =>
  Effect.gen(function*() {
    if (typeof options !== "object" || options === null) return yield* optionProblem("options", "type", "Fanout needs an options object")
    const targets = options.targets as unknown
    if (typeof targets !== "object" || targets === null || Array.isArray(targets) || Object.keys(targets).length === 0) {
      return yield* optionProblem("targets", "type", "Fanout requires at least one static target")
    }
    const base = yield* Policy.resolve("", options, Policy.defaults)
    const resolved = new Map<string, Resolved>()
    for (const [id, target] of Object.entries(targets as Record<string, unknown>)) {
      const entry = target as { readonly deliver?: unknown; readonly storage?: unknown } | null
      const consumer = typeof entry?.deliver === "function"
      const storage = typeof entry?.storage === "function"
      if (id === "" || entry === null || typeof entry !== "object" || consumer === storage) {
        return yield* optionProblem(`targets.${id}`, "type", `Invalid fanout target "${id}"`)
      }
      const policy = yield* Policy.resolve(`targets.${id}.`, entry as Policy.ExecutionOptions, base)
      // A shallow copy: the callbacks are fixed at construction.
      resolved.set(id, { policy, target: { ...(entry as Target<unknown>) } })
    }
    const maxBatchSize = options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE
    if (!Number.isSafeInteger(maxBatchSize) || maxBatchSize <= 0) {
      return yield* optionProblem("maxBatchSize", "range", `maxBatchSize must be a positive integer, got ${shown(maxBatchSize)}`)
    }
    const batchDelayMs = options.batchDelayMs ?? 0
    if (!Number.isSafeInteger(batchDelayMs) || batchDelayMs < 0) {
      return yield* optionProblem("batchDelayMs", "range", "batchDelayMs must be a non-negative integer")
    }
    if (options.dlq !== undefined && typeof options.dlq !== "function") {
      return yield* optionProblem("dlq", "type", `dlq must be a function, got ${shown(options.dlq)}`)
    }
    if (options.onLifecycleEvent !== undefined && typeof options.onLifecycleEvent !== "function") {
      return yield* optionProblem("onLifecycleEvent", "type", `onLifecycleEvent must be a function, got ${shown(options.onLifecycleEvent)}`)
    }
    return { resolved, base, maxBatchSize, batchDelayMs }
  })

/** The fanout's hook sees its deliveries' events only, not those of the engine records behind its passes. */
const deliveriesOnly = (hook: Lifecycle.LifecycleHook | undefined): Lifecycle.LifecycleHook | undefined =>
  hook === undefined ? undefined : (event) => event.entityKind === ENTITY_KIND ? hook(event) : undefined

/** What runs a fanout's passes: the newest fanout made on the scheduler (see `make`'s `replace`). */
interface Impl {
  readonly pass: (execution: Execution) => Effect.Effect<void, StorageError>
  readonly passPolicy: (target: string) => AttemptPolicy
  readonly onEvent: Lifecycle.LifecycleHook | undefined
}

/** The deliveries stored, counted once, then kept in step with what commits (undefined: count again). */
interface Count {
  value: number | undefined
}

/** The deliveries participant of each scheduler, the fanout whose passes it runs now, and their count. */
const participants = new WeakMap<object, { current: Impl; readonly handle: TableHandle; readonly count: Count }>()

/**
 * A fanout on the scheduler. A scheduler takes one: another fails with `ParticipantConflictError`, unless
 * `replace` (the promise face's `{ context }` form, where the reference builds a scheduler per instance), in
 * which case the newer one takes the participant over.
 */
export const make = <Body>(options: FanoutOptions<Body>, replace?: boolean) =>
  Effect.gen(function*() {
    const { base, batchDelayMs, maxBatchSize, resolved } = yield* check(options)
    const storage = yield* StorageService
    const routing = yield* Load.RoutingLoad
    const background = yield* Background.Background
    if (!(yield* Migrations.isCurrent(CAPABILITY, migrations))) yield* Migrations.migrate(CAPABILITY, migrations)
    const dlq = options.dlq as ((message: StoredMessage<unknown>) => Effect.Effect<void, unknown>) | undefined
    const allTargets = [...resolved.keys()].sort()

    // The stored deliveries, counted once and then kept in step with what commits (a failed write recounts).
    // One count per scheduler: a fanout that took over shares it with the batches still running of the one before.
    const scheduler = yield* Scheduler.Scheduler
    const attached = participants.get(scheduler)
    const counted: Count = attached?.count ?? { value: undefined }
    const adjust = (by: number) =>
      Effect.sync(() => {
        if (counted.value !== undefined) counted.value += by
      })
    const pendingCount = Effect.suspend(() =>
      counted.value !== undefined
        ? Effect.succeed(counted.value)
        : Effect.tap(Table.count(storage), (n) => Effect.sync(() => (counted.value = n)))
    )
    const recountOnFailure = <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.tapErrorCause(effect, () => Effect.sync(() => (counted.value = undefined)))

    const policyOf = (target: string): Policy.Resolved => resolved.get(target)?.policy ?? base

    let handle: TableHandle | undefined
    const engine = (): TableHandle => handle!

    const emit = (build: (timestamp: number) => Lifecycle.LifecycleEvent, at?: number) => engine().emit(build, at, false)
    const entity = (row: Row) => ({
      entityKind: ENTITY_KIND,
      id: String(row.message_id ?? row.message_key),
      target: String(row.target_id),
      generation: String(row.generation_id)
    })
    const claimOf = (row: Row): Table.Claim => ({
      id: String(row.id),
      messageKey: String(row.message_key),
      generation: String(row.generation_id),
      attempt: Number(row.attempt)
    })
    const deliveryId = (row: Row) => JSON.stringify([String(row.generation_id), String(row.target_id)])

    // ---- Settlement, shared by the consumer's calls and the pass's own decisions. ----

    /** Deletes the delivery under its claim (an ack). */
    const ack = (row: Row, startedAt: number) =>
      Effect.gen(function*() {
        const matched = yield* recountOnFailure(storage.transaction(Table.remove(storage, claimOf(row), "delivery")))
        if (!matched) return false
        yield* adjust(-1)
        const now = yield* Clock.currentTimeMillis
        yield* emit((timestamp) => ({
          type: "attempt_settled",
          outcome: "completed",
          ...entity(row),
          timestamp,
          attempt: Number(row.attempt),
          durationMs: Math.max(0, now - startedAt)
        }), now)
        return true
      })

    /**
     * The dead-letter path: dropped (deleted, `terminal`) without a DLQ; with one, its durable intent first,
     * the write itself left to `writeDeadLetter`. Returns the row in its dead-letter phase, if any.
     */
    const deadLetter = (row: Row, reason: "explicit" | "exhausted", error: SerializedError | undefined) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const claim = claimOf(row)
        if (dlq === undefined) {
          const matched = yield* recountOnFailure(storage.transaction(Table.remove(storage, claim, "any")))
          if (matched) {
            yield* adjust(-1)
            yield* emitTerminal(row, reason, error ?? storedError(row), now)
          }
          return matched
        }
        const marked = yield* storage.transaction(Table.markDeadLetter(storage, claim, reason, now, now + RETRY_LATER_MS, error))
        // The message's fields (id, body) come from the row as the pass read it.
        return marked === undefined ? false : { ...row, ...marked }
      })

    const storedError = (row: Row): SerializedError | undefined =>
      row.last_error === null || row.last_error === undefined
        ? undefined
        : { name: String(row.last_error_name ?? "Error"), message: String(row.last_error) }

    const emitTerminal = (row: Row, reason: "explicit" | "exhausted", error: SerializedError | undefined, at: number) =>
      emit((timestamp) => ({
        type: "terminal",
        ...entity(row),
        timestamp,
        attempt: Number(row.attempt),
        reason: reason === "explicit" ? "dead_lettered" : "attempts_exhausted",
        error: error ?? { name: "DeadLetter", message: "Dead-lettered by consumer" }
      }), at)

    /** Writes a dead letter to the DLQ (under its deadline), then deletes it; a failed write waits 60 s. */
    const writeDeadLetter = (row: Row) =>
      Effect.gen(function*() {
        const claim = claimOf(row)
        const reason = row.dead_letter_reason === "explicit" ? "explicit" : "exhausted"
        if (dlq === undefined) {
          // Dead-lettered while a DLQ was configured, and there is none now: dropped, as without a DLQ.
          const matched = yield* recountOnFailure(storage.transaction(Table.remove(storage, claim, "dead_letter")))
          if (!matched) return
          yield* adjust(-1)
          return yield* emitTerminal(row, reason, storedError(row), yield* Clock.currentTimeMillis)
        }
        const error = storedError(row) ?? null
        const entry: StoredMessage<unknown> = {
          id: deliveryId(row),
          messageId: String(row.message_id),
          target: String(row.target_id),
          body: unwrap(String(row.payload)),
          enqueuedAt: Number(row.enqueued_at),
          storedAt: Number(row.dead_lettered_at),
          attempts: Number(row.attempt),
          failure: { reason, error }
        }
        const written = yield* Effect.exit(
          Effect.timeoutFail(Effect.suspend(() => dlq(entry)), {
            duration: Duration.millis(RETRY_LATER_MS),
            onTimeout: () => new FanoutTimeoutError({ message: `Fanout dead-letter write timed out after ${RETRY_LATER_MS}ms`, timeoutMs: RETRY_LATER_MS })
          })
        )
        const now = yield* Clock.currentTimeMillis
        if (Exit.isFailure(written)) {
          const failure = errorOf(written.cause)
          yield* background.report("durability.fanout.dead_letter_failed", {
            messageId: entry.messageId,
            target: entry.target,
            error: serialized(failure)
          })
          yield* storage.transaction(Table.retryDeadLetter(storage, claim, now + RETRY_LATER_MS))
          return
        }
        const matched = yield* recountOnFailure(storage.transaction(Table.remove(storage, claim, "dead_letter")))
        if (!matched) return
        yield* adjust(-1)
        yield* emitTerminal(row, reason, error ?? undefined, now)
      })

    /**
     * A failed attempt (or a consumer's `retry`): again at `delayMs` from now or the policy's time, or the
     * dead-letter path once its attempts are spent (or the policy refuses).
     */
    const retry = (row: Row, error: unknown, startedAt: number, delayMs: number | undefined) =>
      Effect.gen(function*() {
        const target = String(row.target_id)
        const policy = policyOf(target)
        const attempt = Number(row.attempt)
        const now = yield* Clock.currentTimeMillis
        let at: number
        if (attempt >= policy.maxAttempts) return yield* deadLetter(row, "exhausted", serialized(error))
        if (delayMs !== undefined) at = now + delayMs
        else {
          const decision = yield* RetryPolicy.decide({ maxAttempts: policy.maxAttempts, schedule: policy.schedule }, attempt, error)
          if (decision._tag === "Fail") return yield* deadLetter(row, "exhausted", serialized(decision.error))
          at = decision.at
        }
        const recorded = serialized(error)
        const matched = yield* storage.transaction(Table.reschedule(storage, claimOf(row), at, recorded))
        if (!matched) return false
        yield* emit((timestamp) => ({
          type: "attempt_settled",
          outcome: "retry_scheduled",
          ...entity(row),
          timestamp,
          attempt,
          durationMs: Math.max(0, now - startedAt),
          error: recorded,
          nextAttemptAt: at
        }), now)
        return true
      })

    // ---- The pass of one target. ----

    const messageOf = (row: Row, startedAt: number, deadLetters: Array<Row>): Slot => {
      const id = deliveryId(row)
      const slot: Slot = {
        row,
        claim: claimOf(row),
        phase: "open",
        outcome: undefined,
        done: undefined,
        result: undefined,
        message: undefined as unknown as FanoutMessage<unknown>
      }
      const settle = <E>(outcome: string, work: Effect.Effect<boolean | Row, E>) =>
        Effect.suspend((): Effect.Effect<void, FanoutSettlementError | E> => {
          if (slot.phase === "settling" || slot.phase === "settled") {
            return Effect.fail(new FanoutSettlementError({ message: `Fanout delivery "${id}" was already settled as "${slot.outcome}"` }))
          }
          if (slot.phase === "closed") return Effect.fail(new FanoutSettlementError({ message: `Fanout delivery "${id}" is stale` }))
          slot.phase = "settling"
          slot.outcome = outcome
          const done = Deferred.unsafeMake<void, unknown>(FiberId.none)
          slot.done = done
          return Effect.flatMap(Effect.exit(work), (exit) =>
            Effect.suspend((): Effect.Effect<void, FanoutSettlementError | E> => {
              slot.phase = "settled"
              slot.result = exit
              Deferred.unsafeDone(done, Exit.asVoid(exit))
              if (Exit.isFailure(exit)) return Effect.failCause(exit.cause)
              const value = exit.value
              if (value === false) {
                return Effect.fail(new FanoutSettlementError({ message: `Fanout delivery "${id}" is stale` }))
              }
              if (typeof value === "object") deadLetters.push(value)
              return Effect.void
            }))
        })
      const message: FanoutMessage<unknown> = {
        id: String(row.message_id),
        deliveryId: id,
        target: String(row.target_id),
        body: unwrap(String(row.payload)),
        attempt: Number(row.attempt),
        enqueuedAt: Number(row.enqueued_at),
        ack: () => settle("ack", ack(row, startedAt)),
        retry: (delayMs) => {
          if (delayMs !== undefined && (!Number.isSafeInteger(delayMs) || delayMs < 0)) {
            return Effect.fail(
              new InvalidInputError({ field: "delayMs", kind: "range", message: `delayMs must be a non-negative safe integer, got ${shown(delayMs)}` })
            )
          }
          return Effect.flatMap(Clock.currentTimeMillis, (now) =>
            delayMs !== undefined && !Number.isSafeInteger(now + delayMs)
              ? Effect.fail<InvalidInputError | FanoutSettlementError | StorageError>(
                new InvalidInputError({ field: "delayMs", kind: "range", message: "now + delayMs must be a safe integer" })
              )
              : settle("retry", retry(row, { name: "Retry", message: "Retried by consumer" }, startedAt, delayMs)))
        },
        deadLetter: () => settle("deadLetter", deadLetter(row, "explicit", undefined))
      }
      // The settlement calls close over the slot, so the message is set on it once they exist.
      Object.assign(slot, { message })
      return slot
    }

    /** Storage targets: one write per message, all settled (a sibling still writing is not cut short), then each acked. */
    const storageBatch = (write: (message: StoredMessage<unknown>) => Effect.Effect<void, unknown>, slots: ReadonlyArray<Slot>) =>
      Effect.flatMap(
        Effect.forEach(slots, (slot) =>
          Effect.exit(Effect.flatMap(Clock.currentTimeMillis, (storedAt) =>
            Effect.zipRight(
              Effect.suspend(() =>
                write({
                  id: slot.message.deliveryId,
                  messageId: slot.message.id,
                  target: slot.message.target,
                  body: slot.message.body,
                  enqueuedAt: slot.message.enqueuedAt,
                  storedAt,
                  attempts: slot.message.attempt
                })
              ),
              slot.message.ack()
            ))), { concurrency: "unbounded" }),
        (exits) => {
          const failed = exits.find(Exit.isFailure)
          return failed === undefined ? Effect.void : failed
        }
      )

    /** One batch: the call and the settlements it started under one deadline, then what was left unsettled. */
    const deliverBatch = (entry: Resolved, rows: ReadonlyArray<Row>) =>
      Effect.gen(function*() {
        const startedAt = yield* Clock.currentTimeMillis
        const deadLetters: Array<Row> = []
        const batch = rows.map((row) => messageOf(row, startedAt, deadLetters))
        const timeoutMs = entry.policy.attemptTimeoutMs
        const { target: definition } = entry
        const ended = yield* routing.measure(
          "outbound",
          Effect.gen(function*() {
            for (const slot of batch) {
              yield* emit((timestamp) => ({ type: "attempt_started", ...entity(slot.row), timestamp, attempt: Number(slot.row.attempt) }), startedAt)
            }
            const call = definition.deliver !== undefined
              ? Effect.suspend(() => definition.deliver!(batch.map((slot) => slot.message)))
              : storageBatch(definition.storage!, batch)
            const called = yield* Effect.exit(call)
            // Settlements already started are awaited, even after a throw.
            for (const slot of batch) if (slot.done !== undefined) yield* Effect.exit(Deferred.await(slot.done))
            return called
          }).pipe(
            // The consumer's promise cannot be cancelled: at the deadline the pass moves on without it.
            Effect.disconnect,
            Effect.timeoutOption(Duration.millis(timeoutMs))
          )
        )
        for (const slot of batch) if (slot.phase === "open") slot.phase = "closed"
        const failure: unknown = Option.isNone(ended)
          ? new FanoutTimeoutError({ message: `Fanout delivery timed out after ${timeoutMs}ms`, timeoutMs })
          : Exit.isFailure(ended.value)
          ? errorOf(ended.value.cause)
          : undefined
        const unsettled = batch.filter((slot) => slot.done === undefined)
        if (failure === undefined && definition.deliver !== undefined && definition.ackOnReturn === true && unsettled.length > 0) {
          const acked = yield* recountOnFailure(storage.transaction(Table.removeAll(storage, unsettled.map((slot) => slot.claim))))
          yield* adjust(-acked.length)
          const now = yield* Clock.currentTimeMillis
          for (const slot of unsettled) {
            if (!acked.includes(slot.claim.id)) continue
            yield* emit((timestamp) => ({
              type: "attempt_settled",
              outcome: "completed",
              ...entity(slot.row),
              timestamp,
              attempt: slot.claim.attempt,
              durationMs: Math.max(0, now - startedAt)
            }), now)
          }
        } else {
          const error = failure ?? new Error("Consumer returned without settling the message")
          for (const slot of unsettled) {
            const row = yield* retry(slot.row, error, startedAt, undefined)
            if (typeof row === "object") deadLetters.push(row)
          }
        }
        // A settlement that failed may still have committed: the row as stored decides.
        for (const slot of batch) {
          const exit = slot.result
          // Still settling (the deadline passed): its claim's deadline stands.
          if (exit === undefined || Exit.isSuccess(exit)) continue
          const stored = yield* Table.read(storage, slot.claim.id)
          if (
            stored === undefined || String(stored.generation_id) !== slot.claim.generation ||
            Number(stored.attempt) !== slot.claim.attempt || stored.phase !== "delivery"
          ) continue
          const row = yield* retry(slot.row, errorOf(exit.cause), startedAt, undefined)
          if (typeof row === "object") deadLetters.push(row)
        }
        return deadLetters
      })

    const pass = (execution: Execution) =>
      Effect.gen(function*() {
        const target = execution.key
        const now = yield* Clock.currentTimeMillis
        const entry = resolved.get(target)
        if (entry === undefined) {
          const moved = yield* storage.transaction(Table.postpone(storage, target, now, now + RETRY_LATER_MS))
          if (moved > 0) {
            yield* background.report("durability.fanout.target_missing", { target, deliveries: moved, retryAt: now + RETRY_LATER_MS })
          }
          return
        }
        const due = yield* Table.due(storage, target, now, maxBatchSize)
        if (due.length === 0) return
        const deadline = now + entry.policy.attemptTimeoutMs
        const claimable: Array<Row> = []
        const dead: Array<{ readonly row: Row; readonly exhausted: boolean }> = []
        for (const row of due) {
          if (row.message_generation === null || String(row.message_generation) !== String(row.generation_id)) {
            // Never expected (a manifest goes with its last delivery): kept, reported, and not due again at once.
            yield* storage.transaction(Table.postponeOne(storage, String(row.id), now + RETRY_LATER_MS))
            yield* background.report("durability.fanout.failed", {
              target,
              delivery: String(row.id),
              error: { name: "Error", message: `Fanout delivery ${String(row.id)} is missing its message manifest` }
            })
          } else if (row.phase === "dead_letter") dead.push({ row, exhausted: false })
          else if (Number(row.attempt) >= entry.policy.maxAttempts) dead.push({ row, exhausted: true })
          else claimable.push(row)
        }
        // The whole batch claimed in one transaction (one statement per 30 deliveries).
        const claimed = claimable.length === 0 ? [] : yield* storage.transaction(Table.claimMany(storage, claimable, deadline))
        const toWrite: Array<Row> = dead.filter((item) => !item.exhausted).map((item) => item.row)
        for (const item of dead) {
          if (!item.exhausted) continue
          const marked = yield* deadLetter(item.row, "exhausted", storedError(item.row))
          if (typeof marked === "object") toWrite.push(marked)
        }
        if (claimed.length > 0) toWrite.push(...(yield* deliverBatch(entry, claimed)))
        yield* Effect.forEach(toWrite, writeDeadLetter, { concurrency: "unbounded", discard: true })
      })

    // The engine's record of a target: retried (a storage failure of its pass) every few seconds, never exhausted.
    const passPolicy = (target: string): AttemptPolicy => ({
      maxAttempts: Number.MAX_SAFE_INTEGER,
      schedule: RetryPolicy.fromDelay(() => 1_000),
      attemptTimeoutMs: policyOf(target).attemptTimeoutMs + 2 * RETRY_LATER_MS,
      timeoutError: (timeoutMs) => new FanoutTimeoutError({ message: `Fanout pass timed out after ${timeoutMs}ms`, timeoutMs })
    })

    const impl: Impl = { pass, passPolicy, onEvent: deliveriesOnly(options.onLifecycleEvent) }
    if (attached !== undefined) {
      if (replace !== true) {
        return yield* new ParticipantConflictError({
          kind: "deliveries",
          message: "A deliveries helper is already attached to this scheduler"
        })
      }
      // A newer fanout over the same object (the reference's `{ context }` form makes one per instance):
      // from now on its targets and options run the passes; an older one's in-flight settlements stay fenced.
      attached.current = impl
      handle = attached.handle
    } else {
      const slot: { current: Impl } = { current: impl }
      handle = yield* scheduler.attach<void>(TimerSupport.withTimers({
        kind: "deliveries",
        table: TARGETS,
        keyColumn: "target",
        policy: (row: Row) => slot.current.passPolicy(String(row.target)),
        run: (execution: Execution) => slot.current.pass(execution),
        complete: (execution: Execution) =>
          Effect.map(Table.endPass(storage, execution.key, execution.generation, execution.attempt), (at) => at !== undefined),
        settled: (row: Row) =>
          Effect.map(
            Table.pendingTarget(storage, String(row.target)),
            (rows) => ({ pending: rows.map((stored): PendingRecord => ({ key: String(row.target), at: Number(stored.next_attempt_at) })) })
          ),
        describe: (row: Row) => `fanout target "${String(row.target)}"`,
        entity: (row: Row) => ({ entityKind: "fanout_target", id: String(row.target), generation: String(row.generation_id) }),
        onEvent: (event) => slot.current.onEvent?.(event)
      }))
      participants.set(scheduler, Object.assign(slot, { handle, count: counted }))
    }

    // One source per object: a fanout that took over keeps the first one's (it reads the same tables).
    if (attached === undefined) yield* InspectionRegistry.register(Inspection.source(storage))

    // ---- Acceptance. ----

    const enqueue = (
      input: FanoutInput<Body> | ReadonlyArray<FanoutInput<Body>>,
      enqueueOptions?: FanoutEnqueueOptions
    ): Effect.Effect<Array<string>, FanoutEnqueueError | StorageError> =>
      Effect.gen(function*() {
        const list: ReadonlyArray<FanoutInput<Body>> = Array.isArray(input) ? input : [input as FanoutInput<Body>]
        const given: unknown = enqueueOptions?.targets
        // Not spread before it is known to be an array: a string would spread into its characters.
        const targets: Array<string> = given === undefined ? allTargets : Array.isArray(given) ? [...given].sort() : []
        if (
          targets.length === 0 || new Set(targets).size !== targets.length ||
          targets.some((target) => typeof target !== "string" || !resolved.has(target))
        ) {
          return yield* new FanoutEnqueueError({ message: "Enqueue targets must be distinct configured target IDs" })
        }
        const entries: Array<{ readonly id: string; readonly key: string; readonly payload: string }> = []
        for (const [index, message] of list.entries()) {
          if (typeof message !== "object" || message === null) {
            return yield* new FanoutEnqueueError({ message: `messages[${index}] must be an object with a body` })
          }
          const id = message.id === undefined ? crypto.randomUUID() : message.id
          const key = message.deduplicationKey === undefined ? id : message.deduplicationKey
          if (typeof id !== "string" || id === "" || typeof key !== "string" || key === "") {
            return yield* new FanoutEnqueueError({ message: "Message IDs and deduplication keys must be non-empty strings" })
          }
          const checked = message.body === undefined ? { ok: true as const } : Json.check(message.body)
          if (!checked.ok) {
            return yield* new FanoutEnqueueError({ message: `messages[${index}].body must be JSON: ${checked.reason.replace(/^value/, "body")}` })
          }
          entries.push({ id, key, payload: wrap(message.body) })
        }
        const now = yield* Clock.currentTimeMillis
        const due = batchDelayMs > 0 ? Math.ceil(now / batchDelayMs) * batchDelayMs : now
        const targetsJson = JSON.stringify(targets)
        const body = Effect.gen(function*() {
          const registered: Array<{ readonly id: string; readonly generation: string }> = []
          let seq = yield* Table.readSeq(storage)
          for (const entry of entries) {
            const existing = yield* Table.readManifest(storage, entry.key)
            if (existing !== undefined) {
              if (existing.id === entry.id && existing.payload === entry.payload && existing.targets === targetsJson) continue
              return yield* new FanoutEnqueueError({ message: `Deduplication key "${entry.key}" already identifies different work` })
            }
            seq += 1
            const generation = crypto.randomUUID()
            yield* Table.insertMessage(storage, {
              key: entry.key,
              id: entry.id,
              payload: entry.payload,
              targets: targetsJson,
              count: targets.length,
              seq,
              createdAt: now,
              generation,
              due
            })
            registered.push({ id: entry.id, generation })
          }
          if (registered.length > 0) {
            yield* Table.writeSeq(storage, seq)
            yield* Table.wakeTargets(storage, targetsJson, due, now, GENERATION)
          }
          return registered
        })
        const registered = yield* recountOnFailure(engine().writePending(body, (made) =>
          made.length === 0 ? undefined : targets.map((target): PendingRecord => ({ key: target, at: due, start: batchDelayMs === 0 }))))
        yield* adjust(registered.length * targets.length)
        for (const message of registered) {
          for (const target of targets) {
            yield* emit((timestamp) => ({
              type: "registered",
              entityKind: ENTITY_KIND,
              id: message.id,
              target,
              generation: message.generation,
              timestamp,
              attempt: 0
            }), now)
          }
        }
        return entries.map((entry) => entry.id)
      })

    const load = Effect.flatMap(pendingCount, routing.snapshot)

    const enqueueResult = (
      input: FanoutInput<Body> | ReadonlyArray<FanoutInput<Body>>,
      enqueueOptions?: FanoutEnqueueOptions
    ) =>
      Effect.gen(function*() {
        const outcome = yield* routing.measure("inbound", Effect.either(enqueue(input, enqueueOptions)))
        if (outcome._tag === "Left" && outcome.left._tag !== "FanoutEnqueueError") return yield* outcome.left
        const snapshot = yield* load
        return outcome._tag === "Right"
          ? { success: true as const, value: outcome.right, load: snapshot }
          : { success: false as const, error: { name: "FanoutEnqueueError", message: outcome.left.message }, load: snapshot }
      })

    const service: Service<Body> = {
      enqueue: Effect.fn("Fanout.enqueue")(function*(input: FanoutInput<Body> | ReadonlyArray<FanoutInput<Body>>, enqueueOptions?: FanoutEnqueueOptions) {
        return yield* enqueue(input, enqueueOptions)
      }),
      enqueueResult: Effect.fn("Fanout.enqueueResult")(
        function*(input: FanoutInput<Body> | ReadonlyArray<FanoutInput<Body>>, enqueueOptions?: FanoutEnqueueOptions) {
          return yield* enqueueResult(input, enqueueOptions)
        }
      ),
      load: Effect.withSpan(load, "Fanout.load")
    }
    return service
  })
