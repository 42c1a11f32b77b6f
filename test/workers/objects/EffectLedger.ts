/**
 * `EffectLedger`: the "outside world" of the fault scenarios. A separate
 * Durable Object, reached through its stub, so what it records survives any
 * reset of the `LabObject` that calls it.
 *
 * `apply` is one external side effect. With a `key` it is idempotent: a key
 * already applied is recorded as a deduplicated delivery and changes nothing.
 * Without a key every delivery is a new effect (deliberate duplicates). During
 * an outage (`setOutage(n)`) the next `n` deliveries are rejected before
 * anything is written, so a rejected delivery never leaves a phantom effect.
 */
import { DurableObject } from "cloudflare:workers"

/** One external effect that really happened. */
export interface LedgerEffect {
  readonly seq: number
  readonly source: string
  /** The dedup key it was applied with, or null when unprotected. */
  readonly key: string | null
  readonly attempt: number
  readonly at: number
}

/** One delivery the ledger received, whatever became of it. */
export interface LedgerDelivery {
  readonly seq: number
  readonly source: string
  readonly key: string | null
  readonly attempt: number
  readonly outcome: "applied" | "deduplicated" | "rejected"
  readonly at: number
}

export interface ApplyRequest {
  /** Who delivers, e.g. the operation call id or the alarm name. */
  readonly source: string
  readonly key: string | null
  readonly attempt: number
}

export interface ApplyResult {
  readonly applied: boolean
  /** The effect this delivery created or matched. */
  readonly effect: number
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS ledger_effects (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    key TEXT UNIQUE,
    attempt INTEGER NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS ledger_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    key TEXT,
    attempt INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS ledger_outage (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    remaining INTEGER NOT NULL
  );
`

export class DownstreamUnavailableError extends Error {
  override readonly name = "DownstreamUnavailableError"
}

export class EffectLedger extends DurableObject {
  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec(CREATE)
  }

  /** The next `deliveries` deliveries are rejected (the downstream is unavailable). */
  setOutage(deliveries: number): void {
    this.ctx.storage.sql.exec(
      "INSERT INTO ledger_outage (id, remaining) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET remaining = excluded.remaining",
      deliveries
    )
  }

  apply(request: ApplyRequest): ApplyResult {
    const sql = this.ctx.storage.sql
    const now = Date.now()
    const deliver = (outcome: LedgerDelivery["outcome"]) =>
      sql.exec(
        "INSERT INTO ledger_deliveries (source, key, attempt, outcome, at) VALUES (?, ?, ?, ?, ?)",
        request.source,
        request.key,
        request.attempt,
        outcome,
        now
      )
    const [outage] = sql.exec<{ remaining: number }>("SELECT remaining FROM ledger_outage WHERE id = 1").toArray()
    if (outage !== undefined && outage.remaining > 0) {
      sql.exec("UPDATE ledger_outage SET remaining = remaining - 1 WHERE id = 1")
      deliver("rejected")
      throw new DownstreamUnavailableError(`downstream unavailable (delivery from ${request.source})`)
    }
    if (request.key !== null) {
      const [existing] = sql.exec<{ seq: number }>("SELECT seq FROM ledger_effects WHERE key = ?", request.key)
        .toArray()
      if (existing !== undefined) {
        deliver("deduplicated")
        return { applied: false, effect: existing.seq }
      }
    }
    const [inserted] = sql.exec<{ seq: number }>(
      "INSERT INTO ledger_effects (source, key, attempt, at) VALUES (?, ?, ?, ?) RETURNING seq",
      request.source,
      request.key,
      request.attempt,
      now
    ).toArray()
    deliver("applied")
    return { applied: true, effect: inserted!.seq }
  }

  effects(): ReadonlyArray<LedgerEffect> {
    return this.ctx.storage.sql.exec("SELECT * FROM ledger_effects ORDER BY seq").toArray() as unknown as ReadonlyArray<
      LedgerEffect
    >
  }

  /** The deliveries made with one of `keys` (a light read, cheap enough to poll). */
  deliveriesOf(keys: ReadonlyArray<string>): ReadonlyArray<LedgerDelivery> {
    return this.ctx.storage.sql.exec(
      "SELECT * FROM ledger_deliveries WHERE key IN (SELECT value FROM json_each(?)) ORDER BY seq",
      JSON.stringify(keys)
    ).toArray() as unknown as ReadonlyArray<LedgerDelivery>
  }

  deliveries(): ReadonlyArray<LedgerDelivery> {
    return this.ctx.storage.sql.exec("SELECT * FROM ledger_deliveries ORDER BY seq").toArray() as unknown as ReadonlyArray<
      LedgerDelivery
    >
  }
}
