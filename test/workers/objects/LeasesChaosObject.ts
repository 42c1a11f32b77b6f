/**
 * `LeasesChaosObject`: the application of the external workers' eviction chaos test, on the PUBLIC
 * promise API: one `DurabilityScheduler` and a `DurabilityJobs` with two external queues (no handler
 * here: workers elsewhere lease the jobs):
 * - `loose`: up to 5 attempts, a job survives 3 expired leases;
 * - `tight`: up to 3 attempts, 1 expired lease survived (the second fails it, `JobStalledError`),
 *   at most 6 leases out at once, and 2 per key (a concurrency by key: job n's key is `k<n % 3>`).
 *
 * Every lease handed out (job, token, attempt, lease end, worker) and every write a worker asks
 * (`heartbeat`, `complete`, `fail`, with its token) is recorded in the object's own table, which
 * survives resets, as is every `alarm(info)` delivery (its start and end). A write's row is
 * inserted before the library is called (so its time and order come before the library's check of
 * the token), and its outcome filled in after: a reset can cut the outcome (it stays `pending`),
 * never the request. A lease's row is written after the lease committed (a reset
 * in between loses the reply: no worker holds that token). Each call takes a `replyDelayMs`, a
 * slow network between the commit and the answer, so that resets land there too (a write that
 * landed but whose answer was lost; a lease no worker got). Every RPC resolves (a rejected RPC breaks
 * the pool's isolated storage): a `StaleLeaseError` comes back as `{ outcome: "stale" }`.
 */
import { DurableObject } from "cloudflare:workers"
import { type AlarmInvocationInfo, DurabilityJobs, DurabilityScheduler } from "../../../src/index.js"
import { deliveriesAround, recordDelivery } from "./deliveryLog.js"

export type LeasesChaosQueue = "loose" | "tight"

export const LEASES_CHAOS = {
  /** The library's minimums for both (a shorter lease or alarm delay is rejected). */
  leaseMs: 1_000,
  alarmMinDelayMs: 1_000,
  retryDelayMs: 60,
  queues: {
    loose: { maxAttempts: 5, maxStalled: 3, concurrency: undefined, keyLimit: undefined },
    tight: { maxAttempts: 3, maxStalled: 1, concurrency: 6, keyLimit: 2 }
  }
} as const

export interface LeasesChaosPayload {
  readonly n: number
}

/** What a worker completes a job with: which lease, and the ledger effect it wrote first. */
export interface LeasesChaosResult {
  readonly token: number
  readonly worker: string
  readonly effect: number
}

/** A lease as the RPC returns it (the library's `Lease`, with its queue). */
export interface LeasesChaosLease {
  readonly queue: LeasesChaosQueue
  readonly id: string
  readonly token: number
  readonly attempt: number
  readonly leaseUntil: number
  readonly idempotencyKey: string
}

/** A write's answer: `stale` when the token no longer held the job (nothing written). */
export interface WriteOutcome {
  readonly outcome: "accepted" | "stale" | "error"
  /** A heartbeat's new lease end. */
  readonly leaseUntil: number | null
  readonly error: string | null
}

export interface LeaseAnswer {
  readonly leases: ReadonlyArray<LeasesChaosLease>
  readonly error: string | null
}

/** One row of the object's history: a lease handed out, or a write asked and what became of it. */
export interface LeasesChaosOp {
  readonly seq: number
  readonly op: "lease" | "heartbeat" | "complete" | "fail"
  readonly queue: LeasesChaosQueue
  readonly id: string
  readonly token: number
  readonly worker: string
  /** `Date.now()` when the lease was recorded (after its commit) or the write asked (before the library ran). */
  readonly at: number
  /** `pending` when a reset cut the write before its outcome was recorded. */
  readonly outcome: "accepted" | "stale" | "error" | "pending"
  /** The lease's attempt (leases only). */
  readonly attempt: number | null
  /** The lease's end: as leased, or as a heartbeat extended it. */
  readonly lease_until: number | null
  /** A heartbeat's `extendMs`; a failure's error name and retryable flag; an error's message. */
  readonly detail: string | null
  readonly instance: string
}

export interface LeasesChaosEvent {
  readonly seq: number
  readonly type: string
  readonly queue: string
  readonly id: string
  readonly attempt: number | null
  readonly error_name: string | null
  readonly at: number
}

export interface LeasesChaosJobRow {
  readonly key: string
  readonly queue: LeasesChaosQueue
  readonly id: string
  readonly generation_id: string
  readonly status: string
  readonly attempt: number
  readonly lease_token: number
  readonly leased_until: number | null
  readonly stalled: number
  readonly worker_id: string | null
  readonly next_attempt_at: number
  readonly last_error_name: string | null
  readonly last_error: string | null
  readonly result: string | null
  readonly finished_at: number | null
}

export interface LeasesChaosDelivery {
  readonly seq: number
  readonly at: number
  /** When `alarm()` returned (null while it runs, and for ever once a reset cut it). */
  readonly ended_at: number | null
  readonly instance: string
  readonly info: string
}

/** The stored state the invariants are checked on after every reset, with the platform alarm. */
export interface LeasesChaosAudit {
  readonly instance: string
  readonly now: number
  readonly alarm: number | null
  /** Leases out: pending jobs with `leased_until` set, and the earliest end among them. */
  readonly leased: number
  readonly earliestLeaseEnd: number | null
  /** Final jobs that still hold a lease, or a worker. */
  readonly finalHolding: ReadonlyArray<string>
  /** Jobs whose token is below their attempt count (a lease counted without a token). */
  readonly tokenBehind: ReadonlyArray<string>
  /** Leases out in `tight`, against its concurrency. */
  readonly tightLeased: number
  /** The most leases out in `tight` for one key, against its limit by key. */
  readonly tightMostPerKey: number
  readonly unfinished: number
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS leases_chaos_ops (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    token INTEGER NOT NULL,
    worker TEXT NOT NULL,
    at INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    attempt INTEGER,
    lease_until INTEGER,
    detail TEXT,
    instance TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS leases_chaos_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    attempt INTEGER,
    error_name TEXT,
    at INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS leases_chaos_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    ended_at INTEGER,
    instance TEXT NOT NULL,
    info TEXT NOT NULL
  );
`

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const describe = (error: unknown): { readonly name: string; readonly message: string } =>
  error instanceof Error ? { name: error.name, message: error.message } : { name: "Unknown", message: String(error) }

const external = (queue: LeasesChaosQueue) => {
  const { concurrency, keyLimit, maxAttempts, maxStalled } = LEASES_CHAOS.queues[queue]
  return {
    processing: "external" as const,
    leaseMs: LEASES_CHAOS.leaseMs,
    maxStalled,
    retries: { maxAttempts, delay: () => LEASES_CHAOS.retryDelayMs },
    ...(concurrency === undefined
      ? {}
      : keyLimit === undefined
      ? { concurrency }
      : { concurrency: { key: (payload: LeasesChaosPayload) => `k${payload.n % 3}`, limit: keyLimit, total: concurrency } })
  }
}

export class LeasesChaosObject extends DurableObject {
  readonly instance = crypto.randomUUID()
  /** What the library logged in this instance: kept in memory (the pool hangs when a reset instance writes to the console). */
  readonly logged: Array<Readonly<Record<string, unknown>>> = []
  readonly scheduler = new DurabilityScheduler({
    context: this.ctx,
    alarmMinDelayMs: LEASES_CHAOS.alarmMinDelayMs,
    log: (entry) => void this.logged.push(entry)
  })
  readonly jobs = new DurabilityJobs({
    scheduler: this.scheduler,
    queues: { loose: external("loose"), tight: external("tight") },
    onLifecycleEvent: (event) => {
      const attempt = "attempt" in event && typeof event.attempt === "number" ? event.attempt : null
      const errorName = event.type === "failed" ? event.error.name : null
      this.ctx.storage.sql.exec(
        "INSERT INTO leases_chaos_events (type, queue, id, attempt, error_name, at) VALUES (?, ?, ?, ?, ?, ?)",
        event.type,
        event.queue,
        event.id,
        attempt,
        errorName,
        Date.now()
      )
    }
  })

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec(CREATE)
  }

  /** Recorded, start and end: the audit reads a null alarm as a loss only when no delivery is in flight. */
  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await recordDelivery(this.ctx.storage.sql, "leases_chaos_deliveries", this.instance, info, () => this.jobs.alarm(info))
  }

  // RPC surface used by the chaos test. Every call resolves.

  /** Adds jobs by id (a resubmission after a reset is deduplicated by its id). */
  async add(queue: LeasesChaosQueue, ids: ReadonlyArray<string>): Promise<{ readonly added: number; readonly error: string | null }> {
    try {
      const results = await this.jobs[queue].addBulk(ids.map((id) => ({ id, payload: { n: Number(id.split("-")[1]) } })))
      return { added: results.filter((result) => !result.deduplicated).length, error: null }
    } catch (error) {
      return { added: 0, error: `${describe(error).name}: ${describe(error).message}` }
    }
  }

  async lease(queue: LeasesChaosQueue, limit: number, worker: string, replyDelayMs = 0): Promise<LeaseAnswer> {
    try {
      const leased = await this.jobs[queue].lease({ limit, workerId: worker })
      if (replyDelayMs > 0) await sleep(replyDelayMs)
      const at = Date.now()
      for (const lease of leased) {
        this.ctx.storage.sql.exec(
          `INSERT INTO leases_chaos_ops (op, queue, id, token, worker, at, outcome, attempt, lease_until, instance)
           VALUES ('lease', ?, ?, ?, ?, ?, 'accepted', ?, ?, ?)`,
          queue,
          lease.id,
          lease.token,
          worker,
          at,
          lease.attempt,
          lease.leaseUntil,
          this.instance
        )
      }
      return {
        leases: leased.map((lease) => ({
          queue,
          id: lease.id,
          token: lease.token,
          attempt: lease.attempt,
          leaseUntil: lease.leaseUntil,
          idempotencyKey: lease.idempotencyKey
        })),
        error: null
      }
    } catch (error) {
      return { leases: [], error: `${describe(error).name}: ${describe(error).message}` }
    }
  }

  /** Records the write asked, runs it, records its outcome: a stale token is an answer, not a rejection. */
  private async write(
    op: "heartbeat" | "complete" | "fail",
    queue: LeasesChaosQueue,
    id: string,
    token: number,
    worker: string,
    detail: string | null,
    replyDelayMs: number,
    body: () => Promise<number | undefined>
  ): Promise<WriteOutcome> {
    const sql = this.ctx.storage.sql
    const { seq } = sql.exec<{ seq: number }>(
      `INSERT INTO leases_chaos_ops (op, queue, id, token, worker, at, outcome, detail, instance)
       VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?) RETURNING seq`,
      op,
      queue,
      id,
      token,
      worker,
      Date.now(),
      detail,
      this.instance
    ).one()
    try {
      const leaseUntil = await body()
      if (replyDelayMs > 0) await sleep(replyDelayMs)
      sql.exec("UPDATE leases_chaos_ops SET outcome = 'accepted', lease_until = ? WHERE seq = ?", leaseUntil ?? null, seq)
      return { outcome: "accepted", leaseUntil: leaseUntil ?? null, error: null }
    } catch (error) {
      const { message, name } = describe(error)
      if (name === "StaleLeaseError") {
        sql.exec("UPDATE leases_chaos_ops SET outcome = 'stale' WHERE seq = ?", seq)
        return { outcome: "stale", leaseUntil: null, error: null }
      }
      sql.exec("UPDATE leases_chaos_ops SET outcome = 'error', detail = ? WHERE seq = ?", `${name}: ${message}`, seq)
      return { outcome: "error", leaseUntil: null, error: `${name}: ${message}` }
    }
  }

  heartbeat(queue: LeasesChaosQueue, id: string, token: number, worker: string, extendMs: number, replyDelayMs = 0): Promise<WriteOutcome> {
    return this.write("heartbeat", queue, id, token, worker, String(extendMs), replyDelayMs, async () => {
      const { leaseUntil } = await this.jobs[queue].heartbeat(id, token, { progress: { token, worker }, extendMs })
      return leaseUntil
    })
  }

  complete(
    queue: LeasesChaosQueue,
    id: string,
    token: number,
    worker: string,
    result: LeasesChaosResult,
    replyDelayMs = 0
  ): Promise<WriteOutcome> {
    return this.write("complete", queue, id, token, worker, null, replyDelayMs, async () => {
      await this.jobs[queue].complete(id, token, result)
      return undefined
    })
  }

  fail(
    queue: LeasesChaosQueue,
    id: string,
    token: number,
    worker: string,
    error: { readonly name: string; readonly message: string },
    retryable: boolean,
    replyDelayMs = 0
  ): Promise<WriteOutcome> {
    const detail = `${error.name}${retryable ? "" : " (not retryable)"}`
    return this.write("fail", queue, id, token, worker, detail, replyDelayMs, async () => {
      await this.jobs[queue].fail(id, token, error, { retryable })
      return undefined
    })
  }

  async audit(): Promise<LeasesChaosAudit> {
    const sql = this.ctx.storage.sql
    const [leased] = sql.exec<{ n: number; earliest: number | null; tight: number }>(
      `SELECT COUNT(*) AS n, MIN(leased_until) AS earliest, SUM(CASE WHEN queue = 'tight' THEN 1 ELSE 0 END) AS tight
       FROM durability_jobs WHERE status = 'pending' AND leased_until IS NOT NULL`
    ).toArray()
    const finalHolding = sql.exec<{ key: string }>(
      "SELECT key FROM durability_jobs WHERE status NOT IN ('pending', 'waiting_children') AND (leased_until IS NOT NULL OR worker_id IS NOT NULL)"
    ).toArray().map((row) => row.key)
    const tokenBehind = sql.exec<{ key: string }>("SELECT key FROM durability_jobs WHERE lease_token < attempt").toArray()
      .map((row) => row.key)
    const [unfinished] = sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM durability_jobs WHERE status IN ('pending', 'waiting_children')"
    ).toArray()
    const [perKey] = sql.exec<{ n: number | null }>(
      `SELECT MAX(n) AS n FROM (SELECT COUNT(*) AS n FROM durability_jobs
       WHERE queue = 'tight' AND status = 'pending' AND leased_until IS NOT NULL GROUP BY concurrency_key)`
    ).toArray()
    const now = Date.now()
    const alarm = await this.ctx.storage.getAlarm()
    return {
      instance: this.instance,
      now,
      alarm,
      leased: leased!.n,
      earliestLeaseEnd: leased!.earliest,
      finalHolding,
      tokenBehind,
      tightLeased: leased!.tight ?? 0,
      tightMostPerKey: perKey?.n ?? 0,
      unfinished: unfinished!.n
    }
  }

  state() {
    const sql = this.ctx.storage.sql
    const all = <T>(query: string) => sql.exec(query).toArray() as unknown as ReadonlyArray<T>
    return {
      instance: this.instance,
      jobs: all<LeasesChaosJobRow>(
        `SELECT key, queue, id, generation_id, status, attempt, lease_token, leased_until, stalled, worker_id, next_attempt_at,
           last_error_name, last_error, result, finished_at
         FROM durability_jobs ORDER BY key`
      ),
      ops: all<LeasesChaosOp>("SELECT * FROM leases_chaos_ops ORDER BY seq"),
      events: all<LeasesChaosEvent>("SELECT * FROM leases_chaos_events ORDER BY seq")
    }
  }

  /** The `alarm(info)` deliveries still running (or cut by a reset), or begun or ended at or after `at`. */
  deliveriesAround(at: number): ReadonlyArray<LeasesChaosDelivery> {
    return deliveriesAround<LeasesChaosDelivery>(this.ctx.storage.sql, "leases_chaos_deliveries", at)
  }

  /** As the platform keeps a failed alarm for its retry (`runDurableObjectAlarm` deletes it first and never retries). */
  async restoreAlarm(at: number): Promise<boolean> {
    if ((await this.ctx.storage.getAlarm()) !== null) return false
    await this.ctx.storage.setAlarm(at)
    return true
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }
}
