/**
 * F1: fanout deliveries per second to 4 consumer targets, and statements per message, for this library
 * (`DurabilityFanout`, as the README shows it, default options, over a counted `ctx.storage`) and a raw-SQL
 * floor doing the same durable work by hand: each batch's messages and their 4 deliveries inserted in one
 * transaction, then each target's deliveries read a batch at a time, handed to its consumer, and deleted
 * with their manifests once acked. Consumers ack every message (trivial work).
 */
import { DurableObject } from "cloudflare:workers"
import { type AlarmInvocationInfo, DurabilityFanout, type DurabilityFanoutMessage, DurabilityScheduler } from "../../src/index.js"
import { Counter, type Counts, countingContext } from "./counting.js"

const TARGETS = ["a", "b", "c", "d"] as const

export interface F1Params {
  readonly n: number
  readonly batch: number
  /** `ack`: the consumer acks each message (one transaction each); `return`: it returns and `ackOnReturn` acks the batch in one. */
  readonly settle?: "ack" | "return"
}

export interface F1Result {
  readonly n: number
  readonly deliveries: number
  readonly ms: number
  readonly counts: Counts
}

const waitUntil = async (done: () => boolean, timeoutMs: number): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (!done()) {
    if (Date.now() > deadline) throw new Error("F1 did not drain in time")
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
}

export class FanoutBench extends DurableObject {
  private readonly counter = new Counter()
  private acked = 0
  private readonly scheduler: DurabilityScheduler
  private fanout: DurabilityFanout<number> | undefined

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env as never)
    this.scheduler = new DurabilityScheduler({ context: countingContext(ctx, this.counter), log: () => undefined })
  }

  /** Built at the first run, in the run's settle mode (each run uses a fresh object). */
  private fanoutFor(settle: "ack" | "return"): DurabilityFanout<number> {
    const consume = async (messages: Array<DurabilityFanoutMessage<number>>) => {
      if (settle === "ack") for (const message of messages) await message.ack()
      this.acked += messages.length
    }
    this.fanout ??= new DurabilityFanout<number>({
      scheduler: this.scheduler,
      targets: Object.fromEntries(TARGETS.map((target) => [target, { deliver: consume, ackOnReturn: settle === "return" }]))
    })
    return this.fanout
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.scheduler.alarm(info)
  }

  async f1({ batch, n, settle = "ack" }: F1Params): Promise<F1Result> {
    const fanout = this.fanoutFor(settle)
    this.counter.reset()
    this.acked = 0
    const started = Date.now()
    for (let at = 0; at < n; at += batch) {
      const messages = Array.from({ length: Math.min(batch, n - at) }, (_, i) => ({ id: `m${at + i}`, body: at + i }))
      const result = await fanout.enqueue(messages)
      if (!result.success) throw new Error(result.error.message)
    }
    await waitUntil(() => this.acked >= n * TARGETS.length, 120_000)
    return { n, deliveries: this.acked, ms: Date.now() - started, counts: this.counter.snapshot() }
  }
}

export class FanoutFloorBench extends DurableObject {
  private readonly counter = new Counter()
  private readonly sql: SqlStorage
  private readonly storage: DurableObjectStorage

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env as never)
    const counted = countingContext(ctx, this.counter)
    this.storage = counted.storage
    this.sql = counted.storage.sql
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS floor_messages (key TEXT PRIMARY KEY, body TEXT NOT NULL, remaining INTEGER NOT NULL)`)
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS floor_deliveries (id TEXT PRIMARY KEY, message_key TEXT NOT NULL, target TEXT NOT NULL, seq INTEGER NOT NULL)`)
    ctx.storage.sql.exec(`CREATE INDEX IF NOT EXISTS floor_deliveries_target ON floor_deliveries (target, seq)`)
  }

  async f1({ batch, n }: F1Params): Promise<F1Result> {
    this.counter.reset()
    const started = Date.now()
    let delivered = 0
    for (let at = 0; at < n; at += batch) {
      const count = Math.min(batch, n - at)
      this.storage.transactionSync(() => {
        for (let i = 0; i < count; i++) {
          const key = `m${at + i}`
          this.sql.exec("INSERT INTO floor_messages (key, body, remaining) VALUES (?, ?, ?)", key, JSON.stringify(at + i), TARGETS.length)
          this.sql.exec(
            "INSERT INTO floor_deliveries (id, message_key, target, seq) SELECT json_array(?, value), ?, value, ? FROM json_each(?)",
            key,
            key,
            at + i,
            JSON.stringify(TARGETS)
          )
        }
      })
      // Each target's pass: a batch read, handed over, deleted once acked (with the manifests at zero).
      for (const target of TARGETS) {
        for (;;) {
          const rows = this.sql.exec("SELECT id, message_key FROM floor_deliveries WHERE target = ? ORDER BY seq LIMIT 10", target).toArray()
          if (rows.length === 0) break
          await Promise.resolve(rows)
          this.storage.transactionSync(() => {
            for (const row of rows) {
              this.sql.exec("DELETE FROM floor_deliveries WHERE id = ?", row.id as string)
              this.sql.exec("UPDATE floor_messages SET remaining = remaining - 1 WHERE key = ?", row.message_key as string)
              this.sql.exec("DELETE FROM floor_messages WHERE key = ? AND remaining <= 0", row.message_key as string)
            }
          })
          delivered += rows.length
        }
      }
    }
    return { n, deliveries: delivered, ms: Date.now() - started, counts: this.counter.snapshot() }
  }
}

export default {
  async fetch(request: Request, env: Record<string, DurableObjectNamespace<FanoutBench | FanoutFloorBench>>): Promise<Response> {
    try {
      const scenario = new URL(request.url).pathname.slice(1)
      const params = await request.json() as F1Params & { readonly name: string; readonly binding: string }
      if (scenario !== "f1") throw new Error(`unknown scenario ${scenario}`)
      const namespace = env[params.binding]!
      const stub = namespace.get(namespace.idFromName(params.name)) as unknown as { f1(params: F1Params): Promise<F1Result> }
      return Response.json(await stub.f1({ n: params.n, batch: params.batch, ...(params.settle === undefined ? {} : { settle: params.settle }) }))
    } catch (error) {
      return Response.json({ error: String(error instanceof Error ? error.stack ?? error.message : error) })
    }
  }
}
