/**
 * `RoutingObject`: the shard a routing client pushes to, through the public `durability/routing` API.
 * Each `enqueue` is counted inbound by the object's `DurabilityRouting` (its load telemetry), stores
 * the batch's items in the object's own table (the backlog, counted from SQLite, never from
 * telemetry), and answers an `EnqueueResult` with the load; a batch asking to be refused is rejected
 * with nothing stored. `drain` delivers the backlog (counted outbound).
 */
import { DurableObject } from "cloudflare:workers"
import { DurabilityRouting, type EnqueueResult } from "../../../src/routing.js"

/** One push: items to store, or a refusal. */
export interface RoutedBatch {
  readonly items: ReadonlyArray<string>
  readonly refuse?: boolean
}

/** What an accepted batch answers: where it landed. */
export interface Landed {
  /** The object's id (hex): the caller compares it with the id of the name it meant. */
  readonly id: string
  readonly stored: number
}

export class RoutingObject extends DurableObject {
  readonly routing = new DurabilityRouting()

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS backlog (seq INTEGER PRIMARY KEY AUTOINCREMENT, item TEXT NOT NULL)")
  }

  private pending(): number {
    return this.ctx.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM backlog").one().n
  }

  /** Stores the batch (one transaction) unless it asks to be refused; answers with the load either way. */
  async enqueue(batch: RoutedBatch): Promise<EnqueueResult<Landed>> {
    // Refused as a failed call (a throw over RPC), before any storage is touched.
    if (!Array.isArray(batch.items)) throw new TypeError("items must be an array")
    const finish = this.routing.begin("inbound")
    const refused = batch.refuse === true
    try {
      if (!refused) {
        this.ctx.storage.transactionSync(() => {
          for (const item of batch.items) this.ctx.storage.sql.exec("INSERT INTO backlog (item) VALUES (?)", item)
        })
      }
    } finally {
      finish()
    }
    // Taken after the call is counted as finished, so the answer includes it.
    const load = this.routing.snapshot(this.pending())
    if (refused) return { success: false, error: { name: "Refused", message: "this batch asked to be refused" }, load }
    return { success: true, value: { id: this.ctx.id.toString(), stored: batch.items.length }, load }
  }

  /** The items stored, in order. */
  items(): Array<string> {
    return this.ctx.storage.sql.exec<{ item: string }>("SELECT item FROM backlog ORDER BY seq").toArray().map((row) => row.item)
  }

  /** Delivers (deletes) the backlog, counted as one outbound call. */
  drain(): number {
    const finish = this.routing.begin("outbound")
    const n = this.ctx.storage.sql.exec("DELETE FROM backlog").rowsWritten
    finish()
    return n
  }

  /** The load now. */
  load() {
    return this.routing.snapshot(this.pending())
  }
}
