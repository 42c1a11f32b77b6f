/**
 * Example: subscription renewals with the promise API (`durability`).
 *
 * Each `Subscription` object is one customer's subscription. A `renew` named
 * alarm fires at the end of every period; its handler registers a
 * `chargeInvoice` durable operation whose id is the occurrence's
 * `idempotencyKey` (stable across retries of that occurrence, new for the next
 * one), so a retried renewal can never charge twice, then schedules `renew`
 * again for the next period. Cancelling only sets a flag in the object's own
 * table: the next `renew` sees it and stops.
 *
 * `chargeInvoice` calls `Payments`, a stub payments service (its own Durable
 * Object) that records charges by idempotency key and can be told to fail the
 * next N charges so you can watch the retries.
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  type DurabilityAlarmsInstance,
  type DurabilityInstance,
  type DurabilityLifecycleEvent,
  DurabilityScheduler,
  type DurableAlarmInfo,
  type DurableCall,
  type DurableOperationResult,
  answerInspection
} from "durability"

export interface Env {
  readonly SUBSCRIPTIONS: DurableObjectNamespace<Subscription>
  readonly PAYMENTS: DurableObjectNamespace<Payments>
}

/** The demo's default billing period; pass `periodMs` to `subscribe` to change it. */
export const DEFAULT_PERIOD_MS = 10_000

// ---------------------------------------------------------------------------------------------
// Payments: a stub payment provider
// ---------------------------------------------------------------------------------------------

export interface ChargeRequest {
  readonly idempotencyKey: string
  readonly customer: string
  readonly amountCents: number
  readonly description: string
}

export interface ChargeReceipt {
  readonly chargeId: string
  readonly amountCents: number
  /** True when this idempotency key had already been charged: the earlier charge is returned. */
  readonly replayed: boolean
}

/**
 * A declined charge is an answer, not an exception: an exception thrown by an RPC method is logged by
 * workerd as "Uncaught" in the callee even when the caller catches it, so the provider returns it.
 */
export type ChargeOutcome =
  | { readonly ok: true; readonly receipt: ChargeReceipt }
  | { readonly ok: false; readonly declined: string }

export interface PaymentsLedger {
  readonly failNext: number
  readonly charges: ReadonlyArray<Record<string, SqlStorageValue>>
  readonly attempts: ReadonlyArray<Record<string, SqlStorageValue>>
}

/**
 * Records one charge per idempotency key, like a real provider's idempotent
 * API. `failNext(n)` makes the next n charge requests fail (a simulated outage).
 */
export class Payments extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    ctx.storage.sql.exec(`
      CREATE TABLE IF NOT EXISTS charges (
        idempotency_key TEXT PRIMARY KEY,
        charge_id TEXT NOT NULL,
        customer TEXT NOT NULL,
        amount_cents INTEGER NOT NULL,
        description TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS charge_attempts (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        idempotency_key TEXT NOT NULL,
        outcome TEXT NOT NULL,
        at INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS outage (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        remaining INTEGER NOT NULL
      );
      INSERT OR IGNORE INTO outage (id, remaining) VALUES (1, 0);
    `)
  }

  async charge(request: ChargeRequest): Promise<ChargeOutcome> {
    const sql = this.ctx.storage.sql
    const now = Date.now()
    const [outage] = sql.exec<{ remaining: number }>("SELECT remaining FROM outage WHERE id = 1").toArray()
    if (outage !== undefined && outage.remaining > 0) {
      sql.exec("UPDATE outage SET remaining = remaining - 1 WHERE id = 1")
      sql.exec(
        "INSERT INTO charge_attempts (idempotency_key, outcome, at) VALUES (?, 'declined', ?)",
        request.idempotencyKey,
        now
      )
      return { ok: false, declined: `payments unavailable (simulated outage, ${outage.remaining - 1} more failure(s) queued)` }
    }
    const [existing] = sql.exec<{ charge_id: string; amount_cents: number }>(
      "SELECT charge_id, amount_cents FROM charges WHERE idempotency_key = ?",
      request.idempotencyKey
    ).toArray()
    if (existing !== undefined) {
      sql.exec(
        "INSERT INTO charge_attempts (idempotency_key, outcome, at) VALUES (?, 'replayed', ?)",
        request.idempotencyKey,
        now
      )
      return { ok: true, receipt: { chargeId: existing.charge_id, amountCents: existing.amount_cents, replayed: true } }
    }
    const chargeId = `ch_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`
    sql.exec(
      `INSERT INTO charges (idempotency_key, charge_id, customer, amount_cents, description, created_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
      request.idempotencyKey,
      chargeId,
      request.customer,
      request.amountCents,
      request.description,
      now
    )
    sql.exec(
      "INSERT INTO charge_attempts (idempotency_key, outcome, at) VALUES (?, 'charged', ?)",
      request.idempotencyKey,
      now
    )
    return { ok: true, receipt: { chargeId, amountCents: request.amountCents, replayed: false } }
  }

  /** Makes the next `count` charge requests fail. */
  async failNext(count: number): Promise<{ failNext: number }> {
    this.ctx.storage.sql.exec("UPDATE outage SET remaining = ? WHERE id = 1", count)
    return { failNext: count }
  }

  async ledger(customer?: string): Promise<PaymentsLedger> {
    const sql = this.ctx.storage.sql
    const [outage] = sql.exec<{ remaining: number }>("SELECT remaining FROM outage WHERE id = 1").toArray()
    const charges = customer === undefined
      ? sql.exec("SELECT * FROM charges ORDER BY created_at").toArray()
      : sql.exec("SELECT * FROM charges WHERE customer = ? ORDER BY created_at", customer).toArray()
    const keys = new Set(charges.map((charge) => String(charge.idempotency_key)))
    const attempts = sql.exec("SELECT * FROM charge_attempts ORDER BY seq DESC LIMIT 50").toArray()
      .filter((attempt) => customer === undefined || keys.has(String(attempt.idempotency_key)) ||
        String(attempt.outcome) === "declined")
      .reverse()
    return { failNext: outage?.remaining ?? 0, charges, attempts }
  }
}

// ---------------------------------------------------------------------------------------------
// Subscription: renewals on named alarms, invoices as durable operations
// ---------------------------------------------------------------------------------------------

export interface InvoicePayload {
  readonly subscriptionId: string
  readonly period: number
  readonly amountCents: number
}

export interface SubscriptionRow {
  readonly id: string
  readonly plan: string
  readonly amount_cents: number
  readonly period_ms: number
  readonly status: "active" | "canceled"
  readonly subscribed_at: number
  readonly canceled_at: number | null
  readonly next_renewal_at: number | null
  /** Demo knob: 1 makes the next `renew` throw after registering its invoice. */
  readonly crash_next_renewal: number
}

export interface InvoiceRow {
  /** The `renew` occurrence's idempotency key, which is also the `chargeInvoice` call id. */
  readonly id: string
  readonly period: number
  readonly amount_cents: number
  readonly renewal_time: number
  readonly created_at: number
}

export interface StatusWait {
  readonly invoices?: number | undefined
  readonly untilIdle?: boolean | undefined
  readonly timeoutMs?: number | undefined
}

export interface SubscriptionStatus {
  readonly now: number
  /** The object's physical alarm (ms since epoch), or null. */
  readonly alarm: number | null
  readonly subscription: SubscriptionRow | null
  /** The pending `renew` occurrence as stored by `DurabilityAlarms` (debug view of its table). */
  readonly renewal: Record<string, SqlStorageValue> | null
  /** The most recent invoices with the outcome of their `chargeInvoice` call. */
  readonly invoices: ReadonlyArray<InvoiceRow & { readonly charge: DurableOperationResult<ChargeReceipt> }>
}

export interface SubscribeInput {
  readonly plan: string
  readonly amountCents: number
  readonly periodMs?: number | undefined
}

type BillingHandlers = { chargeInvoice: (call: DurableCall<InvoicePayload>) => Promise<ChargeReceipt> }
type RenewalHandlers = { renew: (info: DurableAlarmInfo) => Promise<void> }

/** Every state change of both helpers, one line each, in the `wrangler dev` output. */
const logEvent = (event: DurabilityLifecycleEvent): void => {
  const { type, timestamp: _timestamp, ...rest } = event
  console.log(`[durability] ${type} ${JSON.stringify(rest)}`)
}

export class Subscription extends DurableObject<Env> {
  private readonly scheduler: DurabilityScheduler
  private readonly billing: DurabilityInstance<BillingHandlers>
  private readonly renewals: DurabilityAlarmsInstance<RenewalHandlers>

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    ctx.storage.sql.exec(`
      CREATE TABLE IF NOT EXISTS subscription (
        id TEXT PRIMARY KEY,
        plan TEXT NOT NULL,
        amount_cents INTEGER NOT NULL,
        period_ms INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'canceled')),
        subscribed_at INTEGER NOT NULL,
        canceled_at INTEGER,
        next_renewal_at INTEGER,
        crash_next_renewal INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE IF NOT EXISTS invoices (
        id TEXT PRIMARY KEY,
        period INTEGER NOT NULL,
        amount_cents INTEGER NOT NULL,
        renewal_time INTEGER NOT NULL,
        created_at INTEGER NOT NULL
      );
    `)
    // One scheduler per object: it owns the object's single alarm, for both helpers.
    this.scheduler = new DurabilityScheduler({ context: ctx, alarmConcurrency: 5 })
    this.billing = new Durability({
      scheduler: this.scheduler,
      handlers: { chargeInvoice: (call: DurableCall<InvoicePayload>) => this.chargeInvoice(call) },
      // Short, predictable retries for the demo (the default is jitter(exponential(n)), 5 attempts).
      methods: { chargeInvoice: { retries: { maxAttempts: 5, delay: (attempt) => attempt * 1_000 } } },
      onLifecycleEvent: logEvent
    })
    this.renewals = new DurabilityAlarms({
      scheduler: this.scheduler,
      handlers: { renew: (info: DurableAlarmInfo) => this.renew(info) },
      methods: { renew: { retries: { maxAttempts: 10, delay: (attempt) => attempt * 1_000 } } },
      onLifecycleEvent: logEvent
    })
  }

  // The platform alarm runs whatever is due, for both helpers.
  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  /** The inspector's RPC (examples/index.ts mounts it at /_durability): the scheduler answers. */
  inspect(request: unknown) {
    return answerInspection(this.scheduler, request)
  }

  /** Starts (or restarts) the subscription; the first renewal is one period from now. */
  async subscribe(id: string, input: SubscribeInput): Promise<SubscriptionRow> {
    const current = this.row()
    if (current?.status === "active") throw new Error(`subscription "${id}" is already active`)
    const now = Date.now()
    const periodMs = input.periodMs ?? DEFAULT_PERIOD_MS
    const nextRenewalAt = now + periodMs
    this.ctx.storage.sql.exec(
      `INSERT INTO subscription (id, plan, amount_cents, period_ms, status, subscribed_at, canceled_at, next_renewal_at)
       VALUES (?, ?, ?, ?, 'active', ?, NULL, ?)
       ON CONFLICT (id) DO UPDATE SET plan = excluded.plan, amount_cents = excluded.amount_cents,
         period_ms = excluded.period_ms, status = 'active', subscribed_at = excluded.subscribed_at,
         canceled_at = NULL, next_renewal_at = excluded.next_renewal_at, crash_next_renewal = 0`,
      id,
      input.plan,
      input.amountCents,
      periodMs,
      now,
      nextRenewalAt
    )
    // Resolves once the occurrence (and the alarm) is stored; never waits for the handler.
    await this.renewals.renew(nextRenewalAt)
    return this.row()!
  }

  /** An app-level flag: the pending `renew` still fires, sees it, and neither charges nor re-schedules. */
  async cancel(): Promise<SubscriptionRow | null> {
    this.ctx.storage.sql.exec(
      "UPDATE subscription SET status = 'canceled', canceled_at = ? WHERE status = 'active'",
      Date.now()
    )
    return this.row() ?? null
  }

  /** Demo: the next `renew` throws right after registering its invoice, so the occurrence is retried. */
  async crashNextRenewal(): Promise<SubscriptionRow | null> {
    this.ctx.storage.sql.exec("UPDATE subscription SET crash_next_renewal = 1")
    return this.row() ?? null
  }

  /**
   * The object's state. With `invoices`, first waits (up to `timeoutMs`) until that many invoices
   * exist, their charges settled and no renewal is being retried; with `untilIdle`, until no renewal
   * is pending. So each step of the
   * README's walkthrough shows the same state however long you take between steps.
   */
  async status(wait: StatusWait = {}): Promise<SubscriptionStatus> {
    const deadline = Date.now() + (wait.timeoutMs ?? 30_000)
    while (Date.now() < deadline && !(await this.reached(wait))) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    return this.snapshot()
  }

  private async reached(wait: StatusWait): Promise<boolean> {
    const sql = this.ctx.storage.sql
    if (wait.untilIdle === true) {
      return sql.exec("SELECT name FROM durability_alarms WHERE name = 'renew' AND status = 'pending'").toArray().length === 0
    }
    if (wait.invoices === undefined) return true
    const ids = sql.exec<{ id: string }>("SELECT id FROM invoices").toArray().map((row) => row.id)
    if (ids.length < wait.invoices) return false
    // A renewal being retried (it crashed after invoicing) is not settled yet either.
    const retrying = sql.exec("SELECT name FROM durability_alarms WHERE name = 'renew' AND attempt > 0").toArray()
    if (retrying.length > 0) return false
    const results = await Promise.all(ids.map((id) => this.billing.chargeInvoice.getResult(id)))
    return results.every((result) => result.status === "completed" || result.status === "failed")
  }

  private async snapshot(): Promise<SubscriptionStatus> {
    const sql = this.ctx.storage.sql
    const invoices = sql.exec<Record<keyof InvoiceRow, SqlStorageValue>>(
      "SELECT id, period, amount_cents, renewal_time, created_at FROM invoices ORDER BY created_at DESC LIMIT 5"
    ).toArray() as unknown as ReadonlyArray<InvoiceRow>
    const [renewal] = sql.exec(
      `SELECT name, status, scheduled_at, next_attempt_at, attempt, last_error, generation_id
       FROM durability_alarms WHERE name = 'renew'`
    ).toArray()
    return {
      now: Date.now(),
      alarm: await this.ctx.storage.getAlarm(),
      subscription: this.row() ?? null,
      renewal: renewal ?? null,
      invoices: await Promise.all(
        invoices.map(async (invoice) => ({ ...invoice, charge: await this.billing.chargeInvoice.getResult(invoice.id) }))
      )
    }
  }

  /**
   * Forgets invoices and charge records created more than `olderThanMs` ago. `purgeBefore`
   * deletes every record created before the cutoff, pending ones included, so the cutoff is
   * kept below any invoice still being charged, and a purged pending `renew` is scheduled again.
   */
  async purgeHistory(olderThanMs: number): Promise<{ before: number; invoices: number; calls: number; alarms: number; renewRearmed: boolean }> {
    const sql = this.ctx.storage.sql
    let before = Date.now() - olderThanMs
    const old = sql.exec<{ id: string; created_at: number }>(
      "SELECT id, created_at FROM invoices WHERE created_at < ? ORDER BY created_at",
      before
    ).toArray()
    for (const invoice of old) {
      const result = await this.billing.chargeInvoice.getResult(invoice.id)
      if (result.status === "pending") {
        before = invoice.created_at
        break
      }
    }
    const invoices = sql.exec("DELETE FROM invoices WHERE created_at < ? RETURNING id", before).toArray().length
    const calls = await this.billing.purgeBefore(before)
    const alarms = await this.renewals.purgeBefore(before)
    // A pending `renew` created before the cutoff is gone too: schedule the next renewal again.
    const sub = this.row()
    let renewRearmed = false
    const pending = sql.exec("SELECT 1 FROM durability_alarms WHERE name = 'renew' AND status = 'pending'").toArray()
    if (sub?.status === "active" && sub.next_renewal_at !== null && pending.length === 0) {
      await this.renewals.renew(sub.next_renewal_at)
      renewRearmed = true
    }
    return { before, invoices, calls, alarms, renewRearmed }
  }

  /** The `renew` handler: bill the period that starts now, then schedule the next renewal. */
  private async renew(info: DurableAlarmInfo): Promise<void> {
    const sub = this.row()
    if (sub === undefined || sub.status !== "active") {
      console.log(`renew: subscription is ${sub?.status ?? "missing"}, not charging or re-scheduling`)
      return
    }
    const period = Math.max(1, Math.round((info.scheduledTime - sub.subscribed_at) / sub.period_ms))
    // One invoice per occurrence: a retry of this occurrence has the same idempotencyKey.
    this.ctx.storage.sql.exec(
      `INSERT INTO invoices (id, period, amount_cents, renewal_time, created_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (id) DO NOTHING`,
      info.idempotencyKey,
      period,
      sub.amount_cents,
      info.scheduledTime,
      Date.now()
    )
    // Insert-if-absent by id: registering the same invoice again is a no-op, so at most one charge.
    await this.billing.chargeInvoice({
      id: info.idempotencyKey,
      payload: { subscriptionId: sub.id, period, amountCents: sub.amount_cents }
    })
    if (sub.crash_next_renewal === 1) {
      this.ctx.storage.sql.exec("UPDATE subscription SET crash_next_renewal = 0 WHERE id = ?", sub.id)
      throw new Error(`renew crashed after registering invoice ${info.idempotencyKey} (simulated)`)
    }
    // Next period on the same grid; periods missed while nothing ran are skipped, not billed.
    const missed = Math.max(0, Math.floor((Date.now() - info.scheduledTime) / sub.period_ms))
    const next = info.scheduledTime + (missed + 1) * sub.period_ms
    this.ctx.storage.sql.exec("UPDATE subscription SET next_renewal_at = ? WHERE id = ?", next, sub.id)
    // Replaces this occurrence's row with a new generation (a new idempotency key); the
    // replacement runs after this handler returns, and this success cannot delete it.
    await this.renewals.renew(next)
    console.log(`renew: period ${period} of "${sub.id}" invoiced (attempt ${info.attempt}), next at ${new Date(next).toISOString()}`)
  }

  /** The `chargeInvoice` handler: one call to the payment provider, keyed by the invoice id. */
  private async chargeInvoice(call: DurableCall<InvoicePayload>): Promise<ChargeReceipt> {
    const payments = this.env.PAYMENTS.get(this.env.PAYMENTS.idFromName("payments"))
    const outcome = await payments.charge({
      idempotencyKey: call.id,
      customer: call.payload.subscriptionId,
      amountCents: call.payload.amountCents,
      description: `${call.payload.subscriptionId} period ${call.payload.period}`
    })
    // Thrown here, in the handler: the library records it and retries on its schedule.
    if (!outcome.ok) throw new Error(outcome.declined)
    const { receipt } = outcome
    console.log(`chargeInvoice: ${call.id} attempt ${call.attempt} -> ${receipt.chargeId}`)
    return { chargeId: receipt.chargeId, amountCents: receipt.amountCents, replayed: receipt.replayed }
  }

  private row(): SubscriptionRow | undefined {
    return this.ctx.storage.sql.exec("SELECT * FROM subscription LIMIT 1").toArray()[0] as SubscriptionRow | undefined
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP routes: /subscriptions/...
// ---------------------------------------------------------------------------------------------

export const HELP = `  # subscription-renewals (promise API): renew every 10 s, charge each invoice once
  curl -X POST http://127.0.0.1:8787/subscriptions/alice/subscribe -d '{"plan":"pro","amountCents":1200,"periodMs":10000}'
  curl http://127.0.0.1:8787/subscriptions/alice/status
  curl 'http://127.0.0.1:8787/subscriptions/alice/status?invoices=1'   # waits until 1 invoice is settled
  curl -X POST http://127.0.0.1:8787/subscriptions/payments/fail-next -d '{"count":2}'   # next 2 charges fail
  curl http://127.0.0.1:8787/subscriptions/payments          # charges by idempotency key + every attempt
  curl -X POST http://127.0.0.1:8787/subscriptions/alice/crashNextRenewal   # next renew throws once, is retried
  curl -X POST http://127.0.0.1:8787/subscriptions/alice/cancel
  curl 'http://127.0.0.1:8787/subscriptions/alice/status?until=idle'   # waits until no renewal is pending
  curl -X POST http://127.0.0.1:8787/subscriptions/alice/purgeHistory -d '{"olderThanMs":0}'
`

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body, null, 2) + "\n", { status, headers: { "content-type": "application/json" } })

const readJson = async (request: Request): Promise<Record<string, unknown> | undefined> => {
  const text = await request.text()
  if (text.trim() === "") return {}
  try {
    const body: unknown = JSON.parse(text)
    return typeof body === "object" && body !== null && !Array.isArray(body) ? body as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

const isInt = (value: unknown, min: number, max: number): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= min && value <= max

const errorMessage = (error: unknown) => error instanceof Error ? `${error.name}: ${error.message}` : String(error)

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const parts = new URL(request.url).pathname.split("/").filter((part) => part.length > 0).map(decodeURIComponent)
    const [route, id, action = "status"] = parts
    if (route !== "subscriptions" || id === undefined || parts.length > 3) {
      return json({ error: "Not found; see GET /" }, 404)
    }
    const get = request.method === "GET"
    const post = request.method === "POST"

    if (id === "payments") {
      const payments = env.PAYMENTS.get(env.PAYMENTS.idFromName("payments"))
      if (parts.length === 2 && get) return json(await payments.ledger())
      if (action === "fail-next" && post) {
        const body = await readJson(request)
        if (body === undefined || !isInt(body.count, 0, 100)) return json({ error: "Body must be {\"count\": 0..100}" }, 400)
        return json(await payments.failNext(body.count))
      }
      return json({ error: "Use GET /subscriptions/payments or POST /subscriptions/payments/fail-next" }, 405)
    }

    const subscription = env.SUBSCRIPTIONS.get(env.SUBSCRIPTIONS.idFromName(id))
    try {
      switch (action) {
        case "status": {
          if (!get) break
          const query = new URL(request.url).searchParams
          const invoices = query.get("invoices")
          if (invoices !== null && !isInt(Number(invoices), 0, 1_000)) return json({ error: "invoices must be 0..1000" }, 400)
          return json(await subscription.status({
            invoices: invoices === null ? undefined : Number(invoices),
            untilIdle: query.get("until") === "idle"
          }))
        }
        case "subscribe": {
          if (!post) break
          const body = await readJson(request)
          if (
            body === undefined || typeof body.plan !== "string" || body.plan.length === 0 ||
            !isInt(body.amountCents, 1, 1_000_000) || (body.periodMs !== undefined && !isInt(body.periodMs, 1_000, 86_400_000))
          ) {
            return json({ error: "Body must be {\"plan\": string, \"amountCents\": 1..1000000, \"periodMs\"?: 1000..86400000}" }, 400)
          }
          return json(
            await subscription.subscribe(id, {
              plan: body.plan,
              amountCents: body.amountCents,
              periodMs: body.periodMs as number | undefined
            }),
            201
          )
        }
        case "cancel":
          if (!post) break
          return json(await subscription.cancel())
        case "crashNextRenewal":
          if (!post) break
          return json(await subscription.crashNextRenewal())
        case "purgeHistory": {
          if (!post) break
          const body = await readJson(request)
          const olderThanMs = body?.olderThanMs ?? 0
          if (!isInt(olderThanMs, 0, Number.MAX_SAFE_INTEGER)) {
            return json({ error: "Body must be {\"olderThanMs\"?: non-negative integer}" }, 400)
          }
          return json(await subscription.purgeHistory(olderThanMs))
        }
        default:
          return json({ error: "Not found; see GET /" }, 404)
      }
    } catch (error) {
      return json({ error: errorMessage(error) }, 409)
    }
    return json({ error: `${request.method} not allowed here; see GET /` }, 405)
  }
} satisfies ExportedHandler<Env>
