/**
 * The Cloudflare Queues transport of an external queue: when one of its jobs comes due, its admission
 * leases it (the engine's lease: its attempt counted, its lease's timer set) and writes its envelope
 * to the outbox, in the claim's transaction, with the queue's outbox timer due at once. The timer's
 * fire takes the waiting envelopes for one `sendBatch` (at most 100 / 256 KB) and sends them after its
 * commit; a sent envelope is deleted, a failed send is tried again later, and one an eviction cut is
 * sent again once its send's time is up (a duplicate is harmless: its token is stale or its job settled).
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Background from "../engine/Background.js"
import { Admission, type SettledWork, type TableHandle } from "../engine/DurableTable.js"
import { DurableAttemptTimeoutError, NonRetryableError, type StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as Json from "../shared/json.js"
import * as JobsTable from "./jobsTable.js"
import * as Protocol from "./JobsProtocol.js"
import type * as Options from "./options.js"
import * as OutboxTable from "./outboxTable.js"

/** What of the jobs' state the transport uses (a part of `core.ts`'s `Core`, which imports this module). */
interface Core {
  readonly storage: StorageService
  readonly handle: TableHandle
  readonly background: Background.Background
  readonly queues: ReadonlyMap<string, QueueRuntime>
}

interface QueueRuntime {
  readonly name: string
  readonly options: Options.Resolved
}

/** What a consumer receives: where the job lives and the lease to start it with (the protocol's envelope). */
export type Envelope = Protocol.Envelope

/** Cloudflare Queues' limits per `sendBatch`. */
export const MAX_BATCH_MESSAGES = 100
export const MAX_BATCH_BYTES = 256_000

/**
 * The admission of a due transport job that is not leased: a `Lease`, whose claim writes the job's
 * lease state and its envelope (see the module): the engine runs nothing for it; the outbox sends it.
 * At the queue's concurrency, the job is deferred until a lease ends or settles (`waiting_slot`).
 */
export const dispatch = (
  core: Core,
  queue: QueueRuntime,
  row: Row,
  objectId: string,
  buckets: ((now: number) => Effect.Effect<Admission, StorageError>) | undefined
) =>
(now: number): Effect.Effect<Admission, StorageError> =>
  Effect.gen(function*() {
    const { storage } = core
    const settings = queue.options.external!
    const key = String(row.key)
    const generation = String(row.generation_id)
    if (queue.options.concurrency !== undefined) {
      const [out] = yield* JobsTable.leasedSummary(storage, queue.name)
      if (Number(out?.n ?? 0) >= queue.options.concurrency) {
        yield* JobsTable.waitForSlot(storage, key, generation)
        return Admission.Defer({ at: Math.max(now + 1, Number(out?.soonest ?? now + 1)) })
      }
    }
    if (buckets !== undefined) {
      const limited = yield* buckets(now)
      if (limited._tag !== "Run") return limited
    }
    const until = now + settings.leaseMs
    return Admission.Lease({
      until,
      state: JobsTable.transportLeaseState(until),
      leased: (leased) =>
        Effect.gen(function*() {
          const token = Number(leased.lease_token)
          const envelope: Envelope = {
            v: Protocol.ENVELOPE_VERSION,
            object: objectId,
            queue: queue.name,
            jobId: String(leased.id),
            token,
            ...(settings.transport?.includePayload === true ? { payload: Json.decode(String(leased.payload)) } : {})
          }
          yield* OutboxTable.put(storage, `${key}#${token}`, queue.name, JSON.stringify(envelope), crypto.randomUUID(), now)
          yield* flushBy(core, queue.name, now)
        })
    })
  })

/** A queue at its concurrency: once a lease ends or settles, the first job it held back is due at once. */
export const freeSlot = (core: Core, queue: QueueRuntime, now: number) => JobsTable.freeSlot(core.storage, queue.name, now)

/** The jobs' timer that sends a queue's waiting envelopes (see `flush`). */
export const OUTBOX_TIMER = "outbox/"

/** How long a send may take; an envelope taken for a send cut short (an eviction) is sent again after it. */
export const SEND_TIMEOUT_MS = 30_000

/** Sends tried per envelope before it is given up (`status = 'failed'`, kept for inspection). */
export const MAX_SENDS = 12

const timerOf = (queue: string) => `${OUTBOX_TIMER}${queue}`

/** In a transaction that wrote envelopes of `queue` due at `at`: the queue's outbox timer fires by then. */
export const flushBy = (core: Core, queue: string, at: number): Effect.Effect<void, StorageError> =>
  core.handle.timers.setBy(timerOf(queue), at)

/** In a transaction: the queue's outbox timer at its next waiting envelope's time, or gone when none waits. */
const reschedule = (core: Core, queue: string, now: number): Effect.Effect<void, StorageError> =>
  Effect.flatMap(
    OutboxTable.nextAt(core.storage, queue),
    ([row]) =>
      typeof row?.at === "number"
        ? core.handle.timers.set(timerOf(queue), Math.max(row.at, now))
        : Effect.asVoid(core.handle.timers.cancel(timerOf(queue)))
  )

/**
 * The outbox timer of `queue` came due (in the transaction that took it): its due envelopes, oldest
 * first (one `sendBatch`: at most 100 messages and 256 KB), are taken for a send (a send counted, due
 * again once the send's time is up, so a send cut short is tried again), and the timer follows the
 * envelopes still waiting. The send itself runs after the commit (network I/O has no place in a
 * synchronous transaction).
 */
export const flush = (core: Core, timerKey: string, now: number): SettledWork =>
  Effect.gen(function*() {
    const queue = timerKey.slice(OUTBOX_TIMER.length)
    const due = yield* OutboxTable.due(core.storage, queue, now, MAX_BATCH_MESSAGES)
    const batch: Array<Row> = []
    let bytes = 0
    for (const row of due) {
      bytes += String(row.body).length
      if (batch.length > 0 && bytes > MAX_BATCH_BYTES) break
      batch.push(row)
    }
    const keys = batch.map((row) => String(row.key))
    if (keys.length > 0) yield* OutboxTable.take(core.storage, keys, now + SEND_TIMEOUT_MS)
    yield* reschedule(core, queue, now)
    return { pending: [], ...(keys.length === 0 ? {} : { after: send(core, queue, batch) }) }
  })

/**
 * One `sendBatch` of taken envelopes: deleted once sent; after a failure, due again after 1 s, doubling
 * up to a minute, or given up after `MAX_SENDS` sends (or at once when the queue has no producer any more).
 */
const send = (core: Core, queue: string, batch: ReadonlyArray<Row>): Effect.Effect<void> => {
  const keys = batch.map((row) => String(row.key))
  const sent = Effect.suspend(() => {
    const producer = core.queues.get(queue)?.options.external?.transport?.producer
    if (producer === undefined) {
      return Effect.fail(new NonRetryableError({ message: `Queue "${queue}" has no Cloudflare Queue to send its jobs to any more` }))
    }
    return Effect.tryPromise({
      try: () => producer.sendBatch(batch.map((row) => ({ body: JSON.parse(String(row.body)) as unknown, contentType: "json" as const }))),
      catch: (cause) => cause
    }).pipe(Effect.timeoutFail({
      duration: Duration.millis(SEND_TIMEOUT_MS),
      onTimeout: () =>
        new DurableAttemptTimeoutError({ message: `Sending job envelopes timed out after ${SEND_TIMEOUT_MS}ms`, timeoutMs: SEND_TIMEOUT_MS })
    }))
  })
  return Effect.gen(function*() {
    const outcome = yield* Effect.either(sent)
    const now = yield* Clock.currentTimeMillis
    if (outcome._tag === "Right") {
      yield* core.handle.writePending(
        Effect.zipRight(OutboxTable.remove(core.storage, keys), reschedule(core, queue, now)),
        () => undefined
      )
      return
    }
    const error = Background.serializeError(outcome.left)
    const final = outcome.left instanceof NonRetryableError
    const failed = yield* core.handle.writePending(
      Effect.gen(function*() {
        const rows = yield* OutboxTable.sendFailed(core.storage, keys, error, final, MAX_SENDS, now)
        yield* reschedule(core, queue, now)
        return rows.filter((row) => row.status === "failed")
      }),
      () => undefined
    )
    for (const row of failed) {
      yield* Effect.logError(`Durable envelope "${String(row.key)}" failed for good after ${Number(row.attempt)} sends: ${error.name}: ${error.message}`)
        .pipe(Effect.annotateLogs({ event: "durability.attempt.failed", entityKind: "job_envelope", id: String(row.key), error }))
    }
  }).pipe(
    Effect.catchAllCause((cause) =>
      core.background.report("durability.background_execution.failed", { kind: "jobsOutbox", error: Background.serializeError(Cause.squash(cause)) }))
  )
}

/** The envelopes waiting when the jobs are made (stored before the outbox had a timer, or by an instance evicted since): their queues' timers. */
export const resumeOutbox = (core: Core, queues: ReadonlyArray<string>): Effect.Effect<void, StorageError> =>
  queues.length === 0 ? Effect.void : core.handle.writePending(
    Effect.flatMap(
      OutboxTable.nextAtByQueue(core.storage, queues),
      (rows) => Effect.forEach(rows, (row) => flushBy(core, String(row.queue), Number(row.at)), { discard: true })
    ),
    () => undefined
  )
