/**
 * Jobs processed by external workers: a due job of an external queue waits until a worker leases
 * it. A lease counts an attempt and gives a fencing token that grows with every lease of the job;
 * every later write of the worker (`heartbeat`, `log`, `complete`, `fail`) is conditional on that
 * token and on the lease not having expired, so a worker that lost its lease changes nothing.
 *
 * A lease is the engine's (`TableHandle.lease`): its claim counts the attempt and its timer wakes the
 * object at `leased_until`, where an expired lease is reclaimed (`expired` in `core.ts`).
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Time from "../shared/duration.js"
import type { CallDuration } from "../shared/duration.js"
import { type InvalidInputError, StaleLeaseError } from "../shared/Errors.js"
import type { Row } from "../engine/StorageService.js"
import * as Json from "../shared/json.js"
import * as Validate from "../shared/validate.js"
import * as Bucket from "./bucket.js"
import * as BucketsTable from "./bucketsTable.js"
import * as Metrics from "./metrics.js"
import {
  appendLog,
  bucketsOf,
  type Core,
  IDEMPOTENCY_PREFIX,
  invalidInput,
  logLine,
  progressText,
  type QueueRuntime,
  rateLimitOf,
  readJob,
  tell
} from "./core.js"
import * as JobsTable from "./jobsTable.js"
import * as Keyed from "./keyed.js"
import * as Options from "./options.js"
import * as QueuesTable from "./queuesTable.js"
import * as Transport from "./transport.js"

/** A job handed to an external worker. */
export interface Lease<P = unknown> {
  /** The job's id. */
  readonly id: string
  /** The job's payload. */
  readonly payload: P
  /** 1-based; counted by this lease. */
  readonly attempt: number
  /** The fencing token: pass it with every call about this job; it grows with every lease. */
  readonly token: number
  /** The lease ends then unless `heartbeat` extends it (epoch ms). */
  readonly leaseUntil: number
  /** Stable for the job across its leases (new after `retry`/`redrive`): pass it to the provider you call. */
  readonly idempotencyKey: string
}

/**
 * `Time`: how `leaseMs` is given, a Duration or milliseconds on the Effect face, milliseconds
 * (`LeaseOptions<number>`) on the promise face.
 */
export interface LeaseOptions<Time = CallDuration> {
  /** At most this many jobs (1 to 100; default 1). */
  readonly limit?: number | undefined
  /** This lease's length, 1 second to 1 day (default the queue's `leaseMs`). */
  readonly leaseMs?: Time | undefined
  /** Who holds it, for `get` and logs (at most 256 characters). */
  readonly workerId?: string | undefined
}

export const MAX_LEASE_BATCH = 100

const external = (queue: QueueRuntime): Effect.Effect<Options.External, InvalidInputError> =>
  queue.options.external === undefined
    ? Effect.fail(invalidInput("queue", "type", `Queue "${queue.name}" is processed inline: only a queue with processing: "external" is leased`))
    : Effect.succeed(queue.options.external)

const LEASE_RANGE = {
  number: `an integer from ${Options.MIN_LEASE_MS} to ${Options.MAX_LEASE_MS}`,
  duration: "a Duration from 1 second to 1 day"
}

const leaseLength = (field: string, value: unknown, fallback: number): Effect.Effect<number, InvalidInputError> =>
  value === undefined
    ? Effect.succeed(fallback)
    : Time.input(
      field,
      value,
      (ms) => Number.isSafeInteger(ms) && ms >= Options.MIN_LEASE_MS && ms <= Options.MAX_LEASE_MS,
      LEASE_RANGE
    )

const tokenOf = (token: unknown) =>
  typeof token === "number" && Number.isSafeInteger(token) && token >= 1
    ? Effect.succeed(token)
    : Effect.fail(invalidInput("token", "type", `token must be the positive integer a lease returned, got ${Validate.shown(token)}`))

const stale = (queue: QueueRuntime, id: string, token: number) =>
  new StaleLeaseError({
    queue: queue.name,
    id,
    token,
    message: `The lease of job "${id}" of queue "${queue.name}" with token ${token} no longer holds the job ` +
      "(it expired or was reclaimed, or the job was leased again, settled, canceled or removed); nothing was written"
  })

/**
 * A write under `token` that found no lease: stale, and said to be canceled when the job was canceled
 * while this token held it (its last lease is `token`'s), so the worker's next heartbeat tells it to stop.
 */
const refused = (core: Core, queue: QueueRuntime, id: string, token: number) =>
  Effect.flatMap(readJob(core, `${queue.name}/${id}`), (row) => {
    if (row === undefined || row.status !== "canceled" || Number(row.lease_token) !== token) return Effect.fail(stale(queue, id, token))
    const reason = String(row.cancel_reason ?? "")
    return Effect.fail(
      new StaleLeaseError({
        queue: queue.name,
        id,
        token,
        canceled: { reason },
        message: `Job "${id}" of queue "${queue.name}" was canceled${reason === "" ? "" : ` (${reason})`} while the lease with token ` +
          `${token} held it; nothing was written`
      })
    )
  })

/**
 * Leases up to `limit` due jobs of the queue, by priority then insertion order, within its
 * concurrency (leases out at once), its rate limits and its pause, in one transaction.
 */
export const lease = (core: Core, queue: QueueRuntime, options: LeaseOptions = {}) =>
  Effect.gen(function*() {
    const settings = yield* external(queue)
    if (typeof options !== "object" || options === null) return yield* invalidInput("options", "type", "options must be an object")
    const limit = options.limit ?? 1
    if (!(typeof limit === "number" && Number.isSafeInteger(limit) && limit >= 1 && limit <= MAX_LEASE_BATCH)) {
      return yield* invalidInput("limit", "range", `limit must be an integer from 1 to ${MAX_LEASE_BATCH}, got ${Validate.shown(limit)}`)
    }
    const length = yield* leaseLength("leaseMs", options.leaseMs, settings.leaseMs)
    const workerId = options.workerId ?? null
    if (workerId !== null && (typeof workerId !== "string" || workerId.length > 256)) {
      return yield* invalidInput("workerId", "type", `workerId must be a string of at most 256 characters, got ${Validate.shown(workerId)}`)
    }
    const now = yield* Clock.currentTimeMillis
    const until = now + length
    const { storage } = core
    // When each candidate became due (a lease moves `next_attempt_at` to its end): its wait, once leased.
    const dueAt = new Map<string, number>()
    const body = Effect.gen(function*() {
      const [paused] = yield* QueuesTable.readPaused(storage, queue.name)
      if (Number(paused?.paused ?? 0) === 1) return []
      let room = limit
      if (queue.options.concurrency !== undefined) {
        const [out] = yield* JobsTable.leasedCount(storage, queue.name)
        room = Math.min(room, queue.options.concurrency - Number(out?.n ?? 0))
      }
      if (room <= 0) return []
      const limited = rateLimitOf(queue) !== undefined || queue.options.groupRateLimit !== undefined
      // Each key's leases out, counted from the rows: a key at its limit is skipped.
      const keyRoom = yield* Keyed.leaseRoom(core, queue)
      // With group or key limits some candidates may be skipped: look a little further.
      const further = limited || keyRoom !== undefined
      const found = yield* JobsTable.leasable(storage, queue.name, now, further ? Math.min(room * 4, 400) : room)
      const candidates = keyRoom === undefined || limited ? found : found.filter(keyRoom)
      for (const row of candidates) dueAt.set(String(row.key), Number(row.next_attempt_at))
      const chosen: Array<string> = []
      if (!limited) chosen.push(...candidates.slice(0, room).map((row) => String(row.key)))
      else {
        const states = new Map<string, Bucket.State | undefined>()
        for (const row of yield* BucketsTable.readAll(storage, queue.name)) {
          states.set(String(row.group_key), { tokens: Number(row.tokens), updatedAt: Number(row.updated_at) })
        }
        for (const row of candidates) {
          if (chosen.length >= room) break
          const decisions = bucketsOf(queue, row).map((bucket) => ({ bucket, decision: Bucket.decide(bucket.limit, states.get(bucket.key), now) }))
          const queueEmpty = decisions.some((entry) => entry.bucket.key === "" && !entry.decision.take)
          if (queueEmpty) break
          if (decisions.some((entry) => !entry.decision.take)) continue
          // Its key's room is taken only with its tokens.
          if (keyRoom !== undefined && !keyRoom(row)) continue
          for (const { bucket, decision } of decisions) if (decision.take) states.set(bucket.key, decision.after)
          chosen.push(String(row.key))
        }
        for (const [key, state] of states) {
          if (state === undefined) continue
          yield* BucketsTable.store(storage, queue.name, key, state.tokens, state.updatedAt)
        }
      }
      const leased: Array<Row> = []
      for (const key of chosen) {
        // The engine's claim (the attempt counted, the lease's timer set), with this queue's lease state.
        const row = yield* core.handle.lease(key, until, now, JobsTable.leaseState(until, workerId))
        if (row === undefined) continue
        leased.push(row)
        Keyed.started(core, row.turn)
      }
      return leased
    })
    // The leases' timers keep the alarm: no record is made pending.
    const rows = yield* core.handle.writePending(body, () => undefined)
    const leases: Array<Lease> = []
    for (const row of rows) {
      // Leased (committed) now: how long it waited since it was due (its start is counted with its event below).
      const due = dueAt.get(String(row.key))
      if (due !== undefined) Metrics.waited(queue.name, now - due)
      const payload = yield* Effect.orElseSucceed(
        queue.definition.payload.decode(Json.decode(String(row.payload))),
        () => Json.decode(String(row.payload))
      )
      leases.push({
        id: String(row.id),
        payload,
        attempt: Number(row.attempt),
        token: Number(row.lease_token),
        leaseUntil: until,
        idempotencyKey: `${IDEMPOTENCY_PREFIX}${String(row.generation_id)}`
      })
    }
    yield* tell(core, leases.map((job) => ({ type: "started" as const, queue: queue.name, id: job.id, attempt: job.attempt })))
    return leases
  }).pipe(Effect.withSpan("Jobs.lease"))

/** Extends the lease (never shortens it) and stores the job's progress, if given. */
export const heartbeat = (
  core: Core,
  queue: QueueRuntime,
  id: string,
  token: number,
  options: { readonly progress?: unknown; readonly extendMs?: CallDuration | undefined } = {}
) =>
  Effect.gen(function*() {
    const settings = yield* external(queue)
    const held = yield* tokenOf(token)
    if (typeof options !== "object" || options === null) return yield* invalidInput("options", "type", "options must be an object")
    const extend = yield* leaseLength("extendMs", options.extendMs, settings.leaseMs)
    const progress = options.progress === undefined ? null : yield* progressText(options.progress)
    const now = yield* Clock.currentTimeMillis
    // Only later: the alarm armed for the old end fires, finds nothing due and moves on.
    const [row] = yield* JobsTable.extendLease(core.storage, `${queue.name}/${id}`, held, now, now + extend, progress)
    if (row === undefined) return yield* refused(core, queue, id, held)
    if (progress !== null) yield* tell(core, [{ type: "progress", queue: queue.name, id, progress: options.progress }])
    return { leaseUntil: Number(row.leased_until) }
  }).pipe(Effect.withSpan("Jobs.heartbeat"))

/** Appends a line to the leased job's log. */
export const log = (core: Core, queue: QueueRuntime, id: string, token: number, message: string) =>
  Effect.gen(function*() {
    yield* external(queue)
    const held = yield* tokenOf(token)
    const line = yield* logLine(message)
    const now = yield* Clock.currentTimeMillis
    const appended = yield* appendLog(core, `${queue.name}/${id}`, line, now, queue.options.keepLogs, JobsTable.leaseHeld(held, now))
    if (!appended) return yield* refused(core, queue, id, held)
  }).pipe(Effect.withSpan("Jobs.leaseLog"))

/** The leased job as stored, when `token` still holds it; the settle's guard checks it again in its transaction. */
const held = (core: Core, queue: QueueRuntime, id: string, token: number) =>
  Effect.gen(function*() {
    const row = yield* readJob(core, `${queue.name}/${id}`)
    const now = yield* Clock.currentTimeMillis
    const holds = row !== undefined && row.status === "pending" && Number(row.lease_token) === token &&
      row.leased_until !== null && Number(row.leased_until) >= now
    if (!holds) return yield* stale(queue, id, token)
    // In the settle's transaction: the lease is consumed, or nothing is written.
    const guard = Effect.flatMap(
      JobsTable.consumeLease(
        core.storage,
        { key: String(row.key), generation: String(row.generation_id), attempt: Number(row.attempt) },
        token,
        now
      ),
      (rows): Effect.Effect<void, StaleLeaseError> => rows.length > 0 ? Effect.void : Effect.fail(stale(queue, id, token))
    )
    return { row, guard }
  })

/** Completes the leased job with `result` (JSON, or the queue's result schema's input). */
export const complete = (core: Core, queue: QueueRuntime, id: string, token: number, result: unknown) =>
  Effect.gen(function*() {
    yield* external(queue)
    const fence = yield* tokenOf(token)
    const text = yield* Effect.mapError(Json.encodeStored(queue.definition.result, result, "result"), (failure) =>
      failure._tag === "Schema"
        ? invalidInput("result", "type", `result does not match the queue's result schema: ${String(failure.cause.message).slice(0, 300)}`)
        : Validate.unstorableInput("result", failure))
    const { guard, row } = yield* held(core, queue, id, fence)
    yield* core.handle.settle(row, { _tag: "Success", value: text }, guard)
    yield* afterSettle(core, queue, row)
  }).pipe(Effect.withSpan("Jobs.complete"))

/**
 * A transport queue at its concurrency dispatches the job it held back, now that a lease ended; at a
 * concurrency by key, the first job waiting for the settled job's key.
 */
const afterSettle = (core: Core, queue: QueueRuntime, settled: Row) =>
  Effect.zipRight(
    queue.options.external?.transport === undefined || queue.options.concurrency === undefined
      ? Effect.void
      : Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.asVoid(core.handle.writePending(
          Transport.freeSlot(core, queue, now),
          (rows) => rows.map((row) => ({ key: String(row.key), at: now, start: true }))
        ))),
    queue.options.external?.transport === undefined || typeof settled.concurrency_key !== "string"
      ? Effect.void
      : Keyed.release(core, queue, settled.concurrency_key)
  )

/**
 * Fails the leased attempt with `error`: retried under the queue's policy (it waits for a later lease
 * from its retry time), or failed for good when attempts are spent or `retryable` is false.
 */
export const fail = (
  core: Core,
  queue: QueueRuntime,
  id: string,
  token: number,
  error: unknown,
  options: { readonly retryable?: boolean | undefined } = {}
) =>
  Effect.gen(function*() {
    yield* external(queue)
    const fence = yield* tokenOf(token)
    const described = typeof error === "string"
      ? { name: "Error", message: error }
      : typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string"
      ? {
        name: typeof (error as { name?: unknown }).name === "string" ? String((error as { name: string }).name) : "Error",
        message: String((error as { message: string }).message)
      }
      : undefined
    if (described === undefined) {
      return yield* invalidInput("error", "type", `error must be a string or an object with a message, got ${Validate.shown(error)}`)
    }
    // The worker's error as it named it; `retryable: false` ends the job whatever its name.
    const failure = Object.assign(new Error(described.message), { name: described.name })
    const { guard, row } = yield* held(core, queue, id, fence)
    yield* core.handle.settle(row, { _tag: "Failure", error: failure, terminal: options?.retryable === false }, guard)
    yield* afterSettle(core, queue, row)
  }).pipe(Effect.withSpan("Jobs.fail"))

/** A consumer's first call about an envelope: the job and this delivery's own token, if `token` still holds it. */
export const start = (core: Core, queue: QueueRuntime, id: string, token: number) =>
  Effect.gen(function*() {
    const settings = yield* external(queue)
    const fence = yield* tokenOf(token)
    const now = yield* Clock.currentTimeMillis
    // Single use: the delivery that starts takes the next token, so a duplicate of its message is stale
    // and its handler never runs twice at once.
    const [row] = yield* JobsTable.startDelivery(core.storage, `${queue.name}/${id}`, fence, now)
    if (row === undefined) return yield* stale(queue, id, fence)
    // A Cloudflare Queue's consumer starts the delivery: its attempt starts now (counted once, the token is single use).
    Metrics.started(queue.name, undefined)
    const payload = yield* Effect.orElseSucceed(
      queue.definition.payload.decode(Json.decode(String(row.payload))),
      () => Json.decode(String(row.payload))
    )
    return {
      token: Number(row.lease_token),
      payload,
      attempt: Number(row.attempt),
      leaseUntil: Number(row.leased_until),
      leaseMs: settings.leaseMs,
      idempotencyKey: `${IDEMPOTENCY_PREFIX}${String(row.generation_id)}`
    }
  }).pipe(Effect.withSpan("Jobs.start"))
