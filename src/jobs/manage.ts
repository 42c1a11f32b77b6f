/**
 * Steering jobs and queues: cancel, remove, promote, retry, change priority, clean, pause and
 * resume, rate limits, dead-letter redrive. Each is one transaction with the wake-up reconciled;
 * what it changes around a job (parents, siblings) follows `Flow`.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { PendingRecord } from "../engine/DurableTable.js"
import { InvalidInputError, JobCanceledError, type StorageError } from "../shared/Errors.js"
import type { Row } from "../engine/StorageService.js"
import * as Time from "../shared/duration.js"
import * as Validate from "../shared/validate.js"
import { canceledMessage, type Core, invalidInput, type QueueRuntime, rankOf, readJob, tell, trimChained } from "./core.js"
import * as DeadLettersTable from "./deadLettersTable.js"
import * as Flow from "./flow.js"
import * as JobsTable from "./jobsTable.js"
import * as Keyed from "./keyed.js"
import * as Options from "./options.js"
import * as QueuesTable from "./queuesTable.js"
import type { CleanOptions, RateLimit } from "./types.js"

const invalid = invalidInput

/** Retention counts are only a cache: after a delete by hand, they are counted again. */
export const forgetCounts = (core: Core, queue: string) => {
  core.retained.delete(`${queue}/completed`)
  core.retained.delete(`${queue}/failed`)
}

/** A write that may make jobs pending (released parents): they get the wake-up and an eager start. */
export const writeChanges = <A>(
  core: Core,
  body: (out: Flow.Changes) => Effect.Effect<A, StorageError>
): Effect.Effect<A, StorageError> =>
  Effect.gen(function*() {
    const out = Flow.changes()
    const now = yield* Clock.currentTimeMillis
    // A cancel or a removal takes pending work away: the alarm is reconciled, not only moved earlier.
    const result = yield* core.handle.writePending(
      Effect.tap(body(out), () => trimChained(core, out, now)),
      () => out.pending,
      { reconcile: true }
    )
    yield* tell(core, out.events, out.finished)
    return result
  })

/**
 * A waiting job becomes `canceled` at once; an active one has its signal aborted with
 * `JobCanceledError`, is not retried, and is `canceled` when its handler ends.
 */
export const cancel = (core: Core, queue: QueueRuntime, id: string, reason: string): Effect.Effect<boolean, StorageError> =>
  Effect.gen(function*() {
    const key = Flow.keyOf(queue.name, id)
    const row = yield* readJob(core, key)
    if (row === undefined || (row.status !== "pending" && row.status !== "waiting_children")) return false
    if (core.handle.executing(key)) {
      yield* JobsTable.requestCancel(core.storage, key, reason)
      // Inside a caller's transaction, memory acts once the request committed.
      yield* core.storage.afterCommit(abortRunning(core, row, reason))
      return true
    }
    return yield* cancelStored(core, key, reason)
  })

/** An executing job's cancel, in memory: its end is `canceled`, its signal aborted. */
export const abortRunning = (core: Core, row: Row, reason: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const key = String(row.key)
    core.canceling.set(key, reason)
    return Effect.asVoid(core.handle.abort((running) => running === key, new JobCanceledError({ message: canceledMessage(row, reason) })))
  })

/** Cancels a job that is not executing here (waiting, delayed, waiting for children, or left by an eviction). */
const cancelStored = (core: Core, key: string, reason: string) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => writeChanges(core, (out) => cancelIn(core, out, key, reason, now)))

/** Inside a write: an unfinished job not executing here is `canceled`, with what that changes in its flow. */
export const cancelIn = (core: Core, out: Flow.Changes, key: string, reason: string, now: number): Effect.Effect<boolean, StorageError> =>
  Effect.gen(function*() {
    const [row] = yield* JobsTable.cancel(core.storage, key, reason, now)
    if (row === undefined) return false
    yield* Flow.canceled(core.flow, out, row, reason, now, true)
    return true
  })

/** Jobs whose cancel was asked while they ran, when an eviction ended that run: canceled now. */
export const cancelInterrupted = (core: Core): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const rows = yield* JobsTable.cancelsAsked(core.storage)
    for (const row of rows) yield* cancelStored(core, String(row.key), String(row.cancel_reason ?? ""))
  })

/**
 * Deletes a job that is not active, with its descendants, logs and dependency rows. An unfinished
 * child's parent learns it as a failure (so it is never left waiting).
 */
export const remove = (core: Core, queue: QueueRuntime, id: string): Effect.Effect<boolean, StorageError> =>
  Effect.gen(function*() {
    const key = Flow.keyOf(queue.name, id)
    if (core.handle.executing(key)) return false
    const now = yield* Clock.currentTimeMillis
    const removed = yield* writeChanges(core, (out) => removeIn(core, out, queue.name, id, now))
    if (removed.length === 0) return false
    yield* abortRemoved(core, removed, `Job "${id}" was removed`)
    forgetCounts(core, queue.name)
    return true
  })

/** Inside a write: deletes the job with its descendants (see `remove`); returns their rows. */
export const removeIn = (core: Core, out: Flow.Changes, queue: string, id: string, now: number): Effect.Effect<ReadonlyArray<Row>, StorageError> =>
  Effect.gen(function*() {
    const key = Flow.keyOf(queue, id)
    const gone = yield* JobsTable.removeTree(core.storage, key)
    const root = gone.find((row) => row.key === key)
    if (root === undefined) return []
    if (root.status === "pending" || root.status === "waiting_children") {
      yield* Flow.childEndedOf(core.flow, out, root, {
        ok: false,
        error: { name: "JobRemovedError", message: `Job "${id}" of queue "${queue}" was removed` }
      }, now)
    }
    for (const row of gone) {
      out.events.push({ type: "removed", queue: String(row.queue), id: String(row.id), reason: "remove" })
      out.finished.push(String(row.key))
    }
    return gone
  })

/** After a removal committed: a descendant still running here loses its row; its settle no longer matches anything. */
export const abortRemoved = (core: Core, removed: ReadonlyArray<Row>, message: string): Effect.Effect<number> => {
  const keys = new Set(removed.map((row) => String(row.key)))
  return core.handle.abort((running) => keys.has(running), new JobCanceledError({ message }), { release: true })
}

/** A delayed job (or one waiting for its retry) becomes due now. */
export const promote = (core: Core, queue: QueueRuntime, id: string): Effect.Effect<boolean, StorageError> =>
  Effect.gen(function*() {
    const key = Flow.keyOf(queue.name, id)
    const now = yield* Clock.currentTimeMillis
    const rows = yield* core.handle.writePending(
      JobsTable.promote(core.storage, key, now),
      (rows): ReadonlyArray<PendingRecord> => rows.length === 0 ? [] : [{ key, at: now, start: true }]
    )
    return rows.length > 0
  })

/** A failed or canceled job runs again with fresh attempts (a new idempotency key); its dead letter goes. */
export const retry = (core: Core, queue: QueueRuntime, id: string): Effect.Effect<boolean, StorageError> =>
  Effect.gen(function*() {
    const key = Flow.keyOf(queue.name, id)
    const now = yield* Clock.currentTimeMillis
    const rows = yield* core.handle.writePending(
      retryIn(core, queue.name, id, now),
      (rows): ReadonlyArray<PendingRecord> => rows.length === 0 ? [] : [{ key, at: now, start: true }]
    )
    if (rows.length > 0) forgetCounts(core, queue.name)
    return rows.length > 0
  })

/** Inside a write: a failed or canceled job is pending again with fresh attempts, its dead letter gone; returns its key. */
export const retryIn = (core: Core, queue: string, id: string, now: number): Effect.Effect<ReadonlyArray<Row>, StorageError> =>
  Effect.zipLeft(
    JobsTable.reset(core.storage, Flow.keyOf(queue, id), crypto.randomUUID(), now),
    DeadLettersTable.remove(core.storage, queue, id)
  )

export const changePriority = (core: Core, queue: QueueRuntime, id: string, priority: number): Effect.Effect<boolean, StorageError> =>
  Effect.map(
    JobsTable.setPriority(core.storage, Flow.keyOf(queue.name, id), priority),
    ([row]) => {
      if (row === undefined) return false
      // Already waiting for its queue's slot: it waits at its new place.
      queue.slot?.rerank(String(row.key), rankOf(row))
      return true
    }
  )

export const DEFAULT_CLEAN_LIMIT = 1_000
export const MAX_CLEAN_LIMIT = 10_000
const FINISHED = ["completed", "failed", "canceled"] as const

/** Deletes finished jobs of the states given, finished at least `olderThanMs` ago, oldest first; returns how many. */
export const clean = (core: Core, queue: QueueRuntime, options: CleanOptions): Effect.Effect<number, InvalidInputError | StorageError> =>
  Effect.gen(function*() {
    if (typeof options !== "object" || options === null) return yield* invalid("options", "type", "options must be an object { states, olderThanMs, limit? }")
    const { limit = DEFAULT_CLEAN_LIMIT, states } = options
    if (!Array.isArray(states) || states.length === 0 || states.some((state) => !FINISHED.includes(state))) {
      return yield* invalid("states", "type", `states must be a non-empty array of ${FINISHED.join(", ")}`)
    }
    const olderThanMs = yield* Time.milliseconds("olderThanMs", options.olderThanMs)
    if (!(Number.isSafeInteger(limit) && limit >= 1 && limit <= MAX_CLEAN_LIMIT)) {
      return yield* invalid("limit", "range", `limit must be an integer from 1 to ${MAX_CLEAN_LIMIT}, got ${Validate.shown(limit)}`)
    }
    const now = yield* Clock.currentTimeMillis
    const gone = yield* JobsTable.clean(core.storage, queue.name, states, now - olderThanMs, limit)
    forgetCounts(core, queue.name)
    yield* tell(core, gone.map((row) => ({ type: "removed" as const, queue: queue.name, id: String(row.id), reason: "clean" })))
    return gone.length
  })

/** Pausing is durable: a paused queue starts nothing, on every path, until resumed. */
export const setPaused = (core: Core, queue: QueueRuntime, paused: boolean): Effect.Effect<void, StorageError> =>
  Effect.map(
    core.handle.write(QueuesTable.setPaused(core.storage, queue.name, paused)),
    () => {
      queue.paused = paused
    }
  )

export const isPaused = (core: Core, queue: QueueRuntime): Effect.Effect<boolean, StorageError> =>
  Effect.map(QueuesTable.readPaused(core.storage, queue.name), ([row]) => Number(row?.paused ?? 0) === 1)

/** Replaces the queue's rate limit durably (`null`: none), over what its definition says. */
export const setRateLimit = (core: Core, queue: QueueRuntime, limit: RateLimit | null): Effect.Effect<void, InvalidInputError | StorageError> =>
  Effect.gen(function*() {
    if (limit !== null) {
      const problem = Options.rateLimitProblem("limit", limit, (field, kind, message, value) =>
        invalid(field, kind, `${field} ${message}, got ${Validate.shown(value)}`))
      if (problem !== undefined) return yield* Effect.fail(problem as InvalidInputError)
    }
    const stored = limit === null ? null : { capacity: limit.capacity, refillPerSecond: limit.refillPerSecond }
    yield* QueuesTable.setRateLimit(core.storage, queue.name, JSON.stringify(stored))
    queue.override = stored
  })

/** The overrides stored by `setRateLimit` and the pause flags, read once when the queues are made. */
export const loadOverrides = (core: Core): Effect.Effect<void, StorageError> =>
  Effect.map(QueuesTable.all(core.storage), (rows) => {
    for (const row of rows) {
      const queue = core.queues.get(String(row.queue))
      if (queue === undefined) continue
      queue.paused = Number(row.paused) === 1
      if (row.rate_limit !== null) queue.override = JSON.parse(String(row.rate_limit)) as RateLimit | null
    }
  })

export const MAX_REDRIVE = 1_000

/**
 * Puts dead letters back to `waiting` with fresh attempts (all of the queue's, oldest first, or
 * those of `ids`), up to `MAX_REDRIVE` per call, and removes them from the list; returns how many.
 * A job removed since it failed is added again from its dead letter.
 */
export const redrive = (core: Core, queue: QueueRuntime, ids: ReadonlyArray<string> | undefined): Effect.Effect<number, InvalidInputError | StorageError> =>
  Effect.gen(function*() {
    if (ids !== undefined) {
      if (!Array.isArray(ids)) return yield* invalid("ids", "type", "ids must be an array of job ids")
      if (ids.length > MAX_REDRIVE) return yield* invalid("ids", "range", `at most ${MAX_REDRIVE} ids per call`)
      for (const [index, id] of ids.entries()) yield* Validate.key(`ids[${index}]`, id)
    }
    const now = yield* Clock.currentTimeMillis
    const letters: Array<Row> = []
    const made: Array<PendingRecord> = []
    yield* core.handle.writePending(
      Effect.gen(function*() {
        const found = ids === undefined
          ? yield* DeadLettersTable.oldest(core.storage, queue.name, MAX_REDRIVE)
          : yield* Effect.map(
            Effect.forEach(ids, (id) => DeadLettersTable.read(core.storage, queue.name, id)),
            (rows) => rows.flat()
          )
        for (const letter of found) {
          yield* redriveIn(core, queue.name, letter, now, made)
          letters.push(letter)
        }
      }),
      () => made
    )
    forgetCounts(core, queue.name)
    return letters.length
  })

/**
 * Inside a write: one dead letter (a full row) back to `waiting` with fresh attempts, and off the list; the
 * job's pending record goes to `made`.
 */
export const redriveIn = (core: Core, queue: string, letter: Row, now: number, made: Array<PendingRecord>): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const id = String(letter.id)
    const key = Flow.keyOf(queue, id)
    const runtime = core.queues.get(queue)
    const [reset] = yield* JobsTable.reset(core.storage, key, crypto.randomUUID(), now)
    if (reset === undefined) {
      const [again] = yield* JobsTable.insertRedriven(core.storage, {
        key,
        queue,
        id,
        generation: crypto.randomUUID(),
        at: now,
        seq: core.seq.next++,
        payload: String(letter.payload),
        concurrencyKey: runtime === undefined ? null : yield* Keyed.storedKeyOf(runtime, String(letter.payload)),
        turn: (yield* Keyed.floorOf(core)) ?? 0
      })
      // Otherwise the id belongs to a job that is unfinished again (retried meanwhile): that is the redrive.
      if (again !== undefined) made.push({ key, at: now, start: true })
    } else {
      made.push({ key, at: now, start: true })
    }
    yield* DeadLettersTable.remove(core.storage, queue, id)
  })
