/**
 * `LogObject`: a retained log written against the public promise API (`DurabilityLog` on a shared
 * `DurabilityScheduler`, inspectable through `inspect`), over real
 * SQLite storage, flushing to a real R2 bucket (`LOG_COLD`, miniflare's). It keeps the three newest
 * records in the object (`maxRecords: 3`), flushes one record per trim step (`maxBatchSize: 3`, so a
 * longer trim has several steps), and leases for up to two workers per consumer, for one second.
 *
 * For the chaos scenarios a flush can be held: `holdFlush(n)` makes the n-th next cold write put its
 * segment in R2, count it (`coldWrites`), then wait forever, until the test resets the object (a
 * reset between the write and the delete that follows it).
 */
import { DurableObject } from "cloudflare:workers"
import { answerInspection, DurabilityLog, DurabilityScheduler, type LogRecord } from "../../../src/index.js"

/** What each record carries. */
export interface Event {
  readonly topic: string
  readonly value: number
}

export const LOG = { maxRecords: 3, maxBatchSize: 3, leaseMs: 1_000 } as const

interface LogEnv {
  readonly LOG_COLD: R2Bucket
}

export class LogObject extends DurableObject<LogEnv> {
  private readonly scheduler: DurabilityScheduler
  private readonly log: DurabilityLog<Event>
  /** Cold writes this instance completed in R2 (held ones included). */
  private writes = 0
  /** The cold write, counted from now, to hold after its put (0: none). */
  private holdAt = 0

  constructor(ctx: DurableObjectState, env: LogEnv) {
    super(ctx, env)
    const prefix = ctx.id.toString()
    this.scheduler = new DurabilityScheduler({ context: ctx, alarmMinDelayMs: 1_000 })
    this.log = new DurabilityLog<Event>({
      scheduler: this.scheduler,
      maxBatchSize: LOG.maxBatchSize,
      retention: { maxRecords: LOG.maxRecords },
      leases: { maxParallelism: 2, leaseMs: LOG.leaseMs },
      cold: {
        write: async (segment) => {
          // Keyed by the segment's range: a flush written again after a reset (at least once) lands beside
          // the first, never over a shorter one.
          const key = `${prefix}/${segment.firstOffset}-${segment.lastOffset}`
          await env.LOG_COLD.put(key, JSON.stringify(segment.records))
          this.writes += 1
          if (this.holdAt !== 0 && this.writes === this.holdAt) await new Promise<never>(() => undefined)
          return key
        },
        read: async (locator) => {
          const object = await env.LOG_COLD.get(locator)
          return object === null ? undefined : (await object.json<Array<LogRecord<Event>>>())
        }
      }
    })
  }

  append(records: Array<{ readonly body: Event; readonly deduplicationKey?: string }>) {
    return this.log.append(records)
  }

  read(from: number, limit?: number) {
    return this.log.read(limit === undefined ? { from } : { from, limit })
  }

  bounds() {
    return this.log.bounds()
  }

  commit(consumer: string, offset: number) {
    return this.log.commit(consumer, offset)
  }

  cursor(consumer: string) {
    return this.log.cursor(consumer)
  }

  cursors() {
    return this.log.cursors()
  }

  /** Applies retention; a hold (`holdFlush`) lasts for this trim only. */
  async trim() {
    try {
      return await this.log.trim()
    } finally {
      this.holdAt = 0
    }
  }

  forgetColdBefore(offset: number) {
    return this.log.forgetColdBefore(offset)
  }

  lease(consumer: string, limit?: number) {
    return this.log.lease(consumer, limit)
  }

  ackLease(consumer: string, batchId: string) {
    return this.log.ack(consumer, batchId)
  }

  load() {
    return this.log.load()
  }

  /** The inspector's entry point. */
  inspect(request: unknown) {
    return answerInspection(this.scheduler, request)
  }

  /** Holds the `nth` cold write of the next trim (1: its first) after its put, until the object is reset. */
  holdFlush(nth: number): void {
    this.holdAt = this.writes + nth
  }

  /** Cold writes this instance put in R2. */
  coldWrites(): number {
    return this.writes
  }

  /** The keys in R2 under this object's prefix. */
  async coldKeys(): Promise<Array<string>> {
    const listed = await this.env.LOG_COLD.list({ prefix: `${this.ctx.id.toString()}/` })
    return listed.objects.map((object) => object.key)
  }

  /** The cold-segment index, as stored. */
  segments(): Array<{ readonly first: number; readonly last: number; readonly locator: string }> {
    return this.ctx.storage.sql.exec("SELECT first_offset, last_offset, locator FROM durability_log_segments ORDER BY first_offset")
      .toArray().map((row) => ({ first: Number(row.first_offset), last: Number(row.last_offset), locator: String(row.locator) }))
  }
}
