/**
 * The Cloudflare Queues transport of an external queue: when one of its jobs comes due, the engine's
 * claim gate leases it (its token, its lease's end armed) and writes its envelope to the outbox, in
 * the claim's transaction. The outbox is a table of its own on the engine: each envelope is a record
 * whose run sends it (with the other envelopes waiting, `sendBatch` of at most 100 / 256 KB) and
 * whose completion deletes it, so a failed send is retried by the scheduler, and one an eviction cut
 * is sent again (a duplicate is harmless: its token is stale or its job settled).
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { Admission, type DurableTable, type TableHandle } from "../engine/DurableTable.js"
import { DurableAttemptTimeoutError, NonRetryableError, type StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as Json from "../shared/json.js"
import type * as Policy from "../engine/policy.js"
import * as Slot from "../engine/slot.js"
import type * as Options from "./options.js"
import { JOBS, OUTBOX } from "./schema.js"

/** What of the jobs' state the transport uses (a part of `core.ts`'s `Core`, which imports this module). */
interface Core {
  readonly storage: StorageService
  readonly handle: TableHandle
  readonly queues: ReadonlyMap<string, QueueRuntime>
}

interface QueueRuntime {
  readonly name: string
  readonly options: Options.Resolved
}

/** What a consumer receives: where the job lives and the lease to start it with. */
export interface Envelope {
  readonly v: 1
  /** The owning object's id (`ctx.id.toString()`). */
  readonly object: string
  readonly queue: string
  readonly jobId: string
  readonly token: number
  /** Only when the queue opted in (`includePayload`). */
  readonly payload?: unknown
}

/** Cloudflare Queues' limits per `sendBatch`. */
export const MAX_BATCH_MESSAGES = 100
export const MAX_BATCH_BYTES = 256_000

/**
 * The admission of a due transport job that is not leased: leases it and writes its envelope (see the
 * module), and `Skip`s: the engine runs nothing for it; the envelope's record is due at once.
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
      const [out] = yield* storage.exec(
        `SELECT COUNT(*) AS n, MIN(leased_until) AS soonest FROM ${JOBS} WHERE queue = ? AND status = 'pending' AND leased_until IS NOT NULL`,
        [queue.name]
      )
      if (Number(out?.n ?? 0) >= queue.options.concurrency) {
        yield* storage.exec(`UPDATE ${JOBS} SET waiting_slot = 1 WHERE key = ? AND generation_id = ?`, [key, generation])
        return Admission.Defer({ at: Math.max(now + 1, Number(out?.soonest ?? now + 1)) })
      }
    }
    if (buckets !== undefined) {
      const limited = yield* buckets(now)
      if (limited._tag !== "Run") return limited
    }
    const until = now + settings.leaseMs
    if ((yield* core.handle.lease(key, until, now)) === undefined) return Admission.Skip()
    const [leased] = yield* storage.exec(
      `UPDATE ${JOBS} SET lease_token = lease_token + 1, leased_until = ?, next_attempt_at = ?, waiting_slot = 0
       WHERE key = ? AND generation_id = ? RETURNING id, lease_token, payload`,
      [until, until, key, generation]
    )
    if (leased === undefined) return Admission.Skip()
    const token = Number(leased.lease_token)
    const envelope: Envelope = {
      v: 1,
      object: objectId,
      queue: queue.name,
      jobId: String(leased.id),
      token,
      ...(settings.transport?.includePayload === true ? { payload: Json.decode(String(leased.payload)) } : {})
    }
    yield* storage.exec(
      `INSERT INTO ${OUTBOX} (key, queue, body, generation_id, status, attempt, next_attempt_at, created_at)
       VALUES (?, ?, ?, ?, 'pending', 0, ?, ?) ON CONFLICT (key) DO NOTHING`,
      [`${key}#${token}`, queue.name, JSON.stringify(envelope), crypto.randomUUID(), now, now]
    )
    return Admission.Skip()
  })

/** A queue at its concurrency: once a lease ends or settles, the first job it held back is due at once. */
export const freeSlot = (core: Core, queue: QueueRuntime, now: number) =>
  core.storage.exec(
    `UPDATE ${JOBS} SET next_attempt_at = ?, waiting_slot = 0 WHERE key = (
       SELECT key FROM ${JOBS} WHERE queue = ? AND status = 'pending' AND waiting_slot = 1 AND leased_until IS NULL
       ORDER BY priority DESC, seq LIMIT 1
     ) RETURNING key`,
    [now, queue.name]
  )

/** The outbox's engine table: one record per envelope; at most one send at a time. */
export const outbox = (core: Core, policy: Policy.Resolved): DurableTable<void> => {
  const slot = Slot.make(1)
  const { storage } = core
  return {
    kind: "jobsOutbox",
    table: OUTBOX,
    keyColumn: "key",
    policy: () => ({
      maxAttempts: policy.maxAttempts,
      schedule: policy.schedule,
      attemptTimeoutMs: policy.attemptTimeoutMs,
      timeoutError: (timeoutMs) =>
        new DurableAttemptTimeoutError({ message: `Sending job envelopes timed out after ${timeoutMs}ms`, timeoutMs })
    }),
    run: (execution) =>
      Effect.gen(function*() {
        const name = String(execution.row.queue)
        const producer = core.queues.get(name)?.options.external?.transport?.producer
        if (producer === undefined) {
          return yield* new NonRetryableError({ message: `Queue "${name}" has no Cloudflare Queue to send its jobs to any more` })
        }
        const now = yield* Clock.currentTimeMillis
        // The envelopes waiting with this one go in the same batch (they are deleted once sent).
        const others = yield* storage.exec(
          `SELECT key, body FROM ${OUTBOX} WHERE queue = ? AND status = 'pending' AND attempt = 0 AND next_attempt_at <= ? AND key <> ?
           ORDER BY created_at, key LIMIT ?`,
          [name, now, execution.key, MAX_BATCH_MESSAGES - 1]
        )
        const batch: Array<Row> = [execution.row]
        let bytes = String(execution.row.body).length
        for (const row of others) {
          bytes += String(row.body).length
          if (bytes > MAX_BATCH_BYTES) break
          batch.push(row)
        }
        yield* Effect.tryPromise({
          try: () => producer.sendBatch(batch.map((row) => ({ body: JSON.parse(String(row.body)) as unknown, contentType: "json" as const }))),
          catch: (cause) => cause
        })
        const sent = batch.slice(1).map((row) => String(row.key))
        if (sent.length > 0) {
          yield* storage.exec(`DELETE FROM ${OUTBOX} WHERE attempt = 0 AND key IN (${sent.map(() => "?").join(", ")})`, sent)
        }
      }),
    complete: (execution) =>
      Effect.map(
        storage.exec(
          `DELETE FROM ${OUTBOX} WHERE key = ? AND generation_id = ? AND status = 'pending' AND attempt = ? RETURNING key`,
          [execution.key, execution.generation, execution.attempt]
        ),
        (rows) => rows.length > 0
      ),
    completesInOneStatement: true,
    describe: (row) => `envelope "${String(row.key)}"`,
    entity: (row) => ({ entityKind: "job_envelope", id: String(row.key), generation: String(row.generation_id) }),
    dispatch: { slotOf: () => slot }
  }
}

