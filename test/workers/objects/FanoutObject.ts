/**
 * `FanoutObject`: a `DurabilityFanout` written against the public promise API, over real SQLite storage,
 * the real alarm and a real (miniflare) R2 bucket. Targets:
 * - `consumer`: records each delivery it receives (the object's own table, which survives resets), waits while
 *   the test holds deliveries (`hold`) until `release` or a reset (so a reset lands mid-delivery, whatever the
 *   machine's speed), acks it, then records the ack;
 * - `flaky`: asks for a retry on a message's first attempt, then acks as `consumer` does;
 * - `archive`: a storage target writing each `StoredMessage` to R2 under `archive/<id>`, refusing to
 *   overwrite (`onlyIf: { etagDoesNotMatch: "*" }`): a retried write collapses onto the first.
 * Dead letters go to R2 under `dlq/<id>` the same way.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  DurabilityFanout,
  type DurabilityFanoutMessage,
  DurabilityScheduler,
  type FanoutInput
} from "../../../src/index.js"
import type { StoredMessage } from "../../../src/shared/StoredMessage.js"
import { Deliveries, type Idleness } from "./idle.js"

export const FANOUT = { alarmMinDelayMs: 1_000 } as const

/** One event of the consumers' log, in order. */
export interface FanoutLogRow {
  readonly seq: number
  readonly target: string
  readonly message_id: string
  readonly attempt: number
  readonly event: "delivered" | "acked"
}

interface Env {
  readonly FANOUT_ARCHIVE: R2Bucket
}

const putOnce = async (bucket: R2Bucket, key: string, message: StoredMessage<unknown>): Promise<void> => {
  // null: an entry is there already (a retried write): the first one stands.
  await bucket.put(key, JSON.stringify(message), { onlyIf: { etagDoesNotMatch: "*" } })
}

export class FanoutObject extends DurableObject<Env> {
  private readonly deliveries = new Deliveries()
  /** While set, consumers wait for it after recording a delivery (in memory: a reset releases nothing, it ends them). */
  private gate: { readonly opened: Promise<void>; readonly open: () => void } | undefined

  readonly scheduler: DurabilityScheduler
  readonly fanout: DurabilityFanout<string>

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    ctx.storage.sql.exec(
      `CREATE TABLE IF NOT EXISTS fanout_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL,
        message_id TEXT NOT NULL, attempt INTEGER NOT NULL, event TEXT NOT NULL)`
    )
    this.scheduler = new DurabilityScheduler({
      context: ctx,
      alarmMinDelayMs: FANOUT.alarmMinDelayMs,
      // Not the console: the test pool hangs when an instance it reset writes to the console.
      log: () => undefined
    })
    const record = (target: string, message: DurabilityFanoutMessage<string>, event: "delivered" | "acked") =>
      ctx.storage.sql.exec("INSERT INTO fanout_log (target, message_id, attempt, event) VALUES (?, ?, ?, ?)", target, message.id, message.attempt, event)
    const consume = (target: string, retryFirst: boolean) => async (messages: Array<DurabilityFanoutMessage<string>>) => {
      for (const message of messages) record(target, message, "delivered")
      if (this.gate !== undefined) await this.gate.opened
      for (const message of messages) {
        if (retryFirst && message.attempt === 1) {
          await message.retry(20)
          continue
        }
        await message.ack()
        record(target, message, "acked")
      }
    }
    this.fanout = new DurabilityFanout<string>({
      scheduler: this.scheduler,
      maxBatchSize: 5,
      retries: { maxAttempts: 10, delay: () => 50 },
      attemptTimeoutMs: 2_000,
      dlq: (message) => putOnce(env.FANOUT_ARCHIVE, `dlq/${message.id}`, message),
      targets: {
        consumer: { deliver: consume("consumer", false) },
        flaky: { deliver: consume("flaky", true) },
        archive: { storage: (message) => putOnce(env.FANOUT_ARCHIVE, `archive/${message.id}`, message) }
      }
    })
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.deliveries.around(() => this.scheduler.alarm(info))
  }

  // RPC surface used by the scenarios.

  async enqueue(messages: Array<FanoutInput<string>>, targets?: Array<string>) {
    const result = await this.fanout.enqueue(messages, targets === undefined ? undefined : { targets })
    return result.success ? { success: true as const, value: result.value, pending: result.load.outbound.pendingDeliveries } : {
      success: false as const,
      error: result.error,
      pending: result.load.outbound.pendingDeliveries
    }
  }

  /** Consumers hold every delivery after recording it, until `release` (or a reset ends them). */
  hold(): void {
    let open!: () => void
    const opened = new Promise<void>((resolve) => {
      open = resolve
    })
    this.gate = { opened, open }
  }

  release(): void {
    this.gate?.open()
    this.gate = undefined
  }

  async pending(): Promise<number> {
    return (await this.fanout.load()).outbound.pendingDeliveries
  }

  log(): Array<FanoutLogRow> {
    return this.ctx.storage.sql.exec("SELECT * FROM fanout_log ORDER BY seq").toArray() as unknown as Array<FanoutLogRow>
  }

  rows(sql: string): Array<Record<string, SqlStorageValue>> {
    return this.ctx.storage.sql.exec(sql).toArray()
  }

  idle(): Promise<Idleness> {
    return this.deliveries.idleness(this.ctx.storage)
  }
}
