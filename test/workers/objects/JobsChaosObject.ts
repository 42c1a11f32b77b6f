/**
 * `JobsChaosObject`: the application of the job queues' eviction chaos test, on the PUBLIC
 * promise API: one `DurabilityScheduler` and a `DurabilityJobs` with six queues:
 * - `work`: plain jobs and the children of flows;
 * - `parent`: the parents of flows (they, and those in `kept`, check their children when they run);
 * - `limited`: a queue token bucket and one bucket per tenant, concurrency 3;
 * - `keyed`: a concurrency by tenant: one running job per tenant, `keyedTotal` in all;
 * - `kept`: retention by count (`removeOnComplete`, `removeOnFail`); some flow parents too;
 * - `batched`: a `batchHandler` taking up to `batch.size` jobs per call, with a durable `waitMs`; each call
 *   is logged (the ids of its jobs, when it started and ended), and each of its jobs as a handler call of
 *   its own (with the call's `batch_seq`), so the per-job checks hold for batched jobs too.
 * A job's payload says what its handler does (see `JobBehaviour`).
 *
 * Every handler call (with the claim time its row holds when it starts), every job event, every
 * cancel, pause and resume asked, every add's result and every `alarm(info)` delivery are
 * recorded in the object's own tables, which survive resets. External effects go to an
 * `EffectLedger` keyed by the job's `idempotencyKey`, so a repeated effect is visible there.
 * Every RPC resolves (a rejected RPC breaks the pool's isolated storage): an expected error comes
 * back as a value.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  type DurableBatchJob,
  type DurableBatchOutcome,
  DurabilityJobs,
  type DurabilityJobsInstance,
  DurabilityScheduler,
  type DurableJob,
  type DurableJobAddResult,
  type DurableJobEvent,
  type DurableJobFlowNode,
  NonRetryableError
} from "../../../src/index.js"
import { deliveriesAround, recordDelivery } from "./deliveryLog.js"
import type { ApplyResult, EffectLedger } from "./EffectLedger.js"

/**
 * What a job's handler does on attempt n:
 * - `ok`: applies its effect, succeeds;
 * - `flaky`: fails (retryable) on attempt 1, then as `ok`;
 * - `doomed`: throws NonRetryableError before any effect;
 * - `slow`: applies its effect, holds `slowHoldMs` (resets cut it there), succeeds;
 * - `exhaust`: fails (retryable) on every attempt, before any effect.
 */
export type JobBehaviour = "ok" | "flaky" | "doomed" | "slow" | "exhaust"

export type JobsChaosQueue = "work" | "parent" | "limited" | "keyed" | "kept" | "batched"

export interface JobsChaosPayload {
  readonly behaviour: JobBehaviour
  readonly tenant?: string
}

export const JOBS_CHAOS = {
  alarmConcurrency: 8,
  alarmMinDelayMs: 1_000,
  maxAttempts: 4,
  retryDelayMs: 40,
  attemptTimeoutMs: 3_000,
  slowHoldMs: 250,
  rateLimit: { capacity: 5, refillPerSecond: 8 },
  groupRateLimit: { capacity: 3, refillPerSecond: 4 },
  limitedConcurrency: 3,
  keyedTotal: 2,
  kept: { completed: 5, failed: 3 },
  batch: { size: 3, waitMs: 300 }
} as const

export interface JobsChaosResult {
  readonly key: string
  readonly attempt: number
  readonly effect: number
}

export interface JobsChaosCall {
  readonly seq: number
  readonly queue: JobsChaosQueue
  readonly id: string
  readonly behaviour: JobBehaviour
  readonly tenant: string | null
  readonly attempt: number
  readonly idempotency_key: string
  readonly instance: string
  /** The claim's time, as the row's `started_at` reads when the handler starts. */
  readonly claimed_at: number
  readonly started_at: number
  readonly ended_at: number | null
  readonly outcome: "running" | "completed" | "failed"
  readonly error: string | null
  /** A parent's findings about its children when it ran (null: none wrong). */
  readonly note: string | null
  /** The batch handler's call this job was part of (`batched` only; null for the other queues). */
  readonly batch_seq: number | null
}

/** One call of the `batched` queue's batch handler. */
export interface JobsChaosBatchCall {
  readonly seq: number
  readonly instance: string
  /** The call's jobs, in its order, as a JSON array of ids. */
  readonly ids: string
  readonly started_at: number
  /** Null while it runs, and for ever once a reset cut it. */
  readonly ended_at: number | null
}

export interface JobsChaosEvent {
  readonly seq: number
  readonly type: DurableJobEvent["type"]
  readonly queue: string
  readonly id: string
  readonly at: number
  readonly instance: string
}

export interface JobsChaosAdd {
  readonly seq: number
  readonly queue: string
  readonly id: string
  readonly dedup_key: string | null
  readonly ttl_ms: number | null
  readonly deduplicated: number
  readonly result_id: string
  readonly at: number
}

export interface JobsChaosCancel {
  readonly seq: number
  readonly queue: string
  readonly id: string
  /** Null when a reset cut the call before its answer was recorded. */
  readonly accepted: number | null
  readonly at: number
}

export interface JobsChaosPause {
  readonly seq: number
  readonly queue: string
  /** When the pause had committed. */
  readonly paused_at: number
  /** When the resume was asked (null: not yet). */
  readonly resume_at: number | null
}

export interface JobRow {
  readonly key: string
  readonly queue: JobsChaosQueue
  readonly id: string
  readonly generation_id: string
  readonly status: "pending" | "waiting_children" | "completed" | "failed" | "canceled"
  readonly attempt: number
  readonly next_attempt_at: number
  readonly last_error_name: string | null
  readonly result: string | null
  readonly payload: string
  readonly parent_key: string | null
  readonly on_failure: "fail" | "ignore"
  readonly children_pending: number
  readonly cancel_requested: number
  readonly created_at: number
  readonly started_at: number | null
  readonly finished_at: number | null
}

export interface JobsChaosAudit {
  readonly instance: string
  readonly now: number
  readonly alarm: number | null
  /** Pending jobs of queues that are not paused, and the earliest due. */
  readonly pending: number
  readonly earliest: number | null
  readonly unfinished: number
  /** Parents waiting with no unfinished child, or a counter that differs from them. */
  readonly stuckParents: ReadonlyArray<{ readonly key: string; readonly children_pending: number; readonly unfinished: number }>
  readonly kept: { readonly completed: number; readonly failed: number }
  /** Dedup keys (without ttl) held by more than one unfinished job. */
  readonly doubleHolders: ReadonlyArray<{ readonly dedup_key: string; readonly holders: number }>
  /** The `batched` queue's open wait (its stored end, null: none), and its pending jobs held until then at least. */
  readonly batchWait: { readonly until: number | null; readonly held: number }
}

export interface JobsChaosDelivery {
  readonly seq: number
  readonly at: number
  /** When `alarm()` returned (null while it runs, and for ever once a reset cut it). */
  readonly ended_at: number | null
  readonly instance: string
  readonly info: string
}

export interface JobsChaosEnv {
  readonly EFFECT_LEDGER: DurableObjectNamespace<EffectLedger>
}

export interface JobsChaosAddSpec {
  readonly queue: JobsChaosQueue
  readonly id: string
  readonly payload: JobsChaosPayload
  readonly delayMs?: number
  readonly priority?: number
  readonly dedup?: { readonly key: string; readonly ttlMs?: number; readonly mode?: "drop" | "replace" }
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS jobs_chaos_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    behaviour TEXT NOT NULL,
    tenant TEXT,
    attempt INTEGER NOT NULL,
    idempotency_key TEXT NOT NULL,
    instance TEXT NOT NULL,
    claimed_at INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    outcome TEXT NOT NULL DEFAULT 'running',
    error TEXT,
    note TEXT,
    batch_seq INTEGER
  );
  CREATE TABLE IF NOT EXISTS jobs_chaos_batch_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    instance TEXT NOT NULL,
    ids TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER
  );
  CREATE TABLE IF NOT EXISTS jobs_chaos_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    at INTEGER NOT NULL,
    instance TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS jobs_chaos_adds (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    dedup_key TEXT,
    ttl_ms INTEGER,
    deduplicated INTEGER NOT NULL,
    result_id TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS jobs_chaos_cancels (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    accepted INTEGER,
    at INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS jobs_chaos_pauses (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    paused_at INTEGER NOT NULL,
    resume_at INTEGER
  );
  CREATE TABLE IF NOT EXISTS jobs_chaos_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    ended_at INTEGER,
    instance TEXT NOT NULL,
    info TEXT NOT NULL
  );
`

class TransientError extends Error {
  override readonly name = "TransientError"
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

type Handler = (job: DurableJob<JobsChaosPayload>) => Promise<JobsChaosResult>
type BatchHandler = (jobs: ReadonlyArray<DurableBatchJob<JobsChaosPayload>>) => Promise<ReadonlyArray<DurableBatchOutcome<JobsChaosResult>>>
type Queues =
  & Record<Exclude<JobsChaosQueue, "batched">, { readonly handler: Handler }>
  & { readonly batched: { readonly batchHandler: BatchHandler } }

/** A pending job of a paused queue waits: it needs no wake-up. */
const NOT_PAUSED = "queue NOT IN (SELECT queue FROM durability_job_queues WHERE paused = 1)"

export class JobsChaosObject extends DurableObject<JobsChaosEnv> {
  readonly instance = crypto.randomUUID()
  /** What the library logged in this instance: kept in memory (the pool hangs when a reset instance writes to the console). */
  readonly logged: Array<Readonly<Record<string, unknown>>> = []
  readonly scheduler: DurabilityScheduler
  readonly jobs: DurabilityJobsInstance<Queues>

  constructor(ctx: DurableObjectState, env: JobsChaosEnv) {
    super(ctx, env)
    ctx.storage.sql.exec(CREATE)
    this.scheduler = new DurabilityScheduler({
      context: ctx,
      alarmConcurrency: JOBS_CHAOS.alarmConcurrency,
      alarmMinDelayMs: JOBS_CHAOS.alarmMinDelayMs,
      log: (entry) => void this.logged.push(entry)
    })
    const retries = { maxAttempts: JOBS_CHAOS.maxAttempts, delay: () => JOBS_CHAOS.retryDelayMs }
    const common = { retries, attemptTimeoutMs: JOBS_CHAOS.attemptTimeoutMs }
    this.jobs = new DurabilityJobs({
      scheduler: this.scheduler,
      queues: {
        work: { ...common, handler: (job: DurableJob<JobsChaosPayload>) => this.invoke("work", job) },
        parent: { ...common, handler: (job: DurableJob<JobsChaosPayload>) => this.invoke("parent", job) },
        limited: {
          ...common,
          concurrency: JOBS_CHAOS.limitedConcurrency,
          rateLimit: JOBS_CHAOS.rateLimit,
          groupRateLimit: { ...JOBS_CHAOS.groupRateLimit, key: (payload: JobsChaosPayload) => payload.tenant ?? "none" },
          handler: (job: DurableJob<JobsChaosPayload>) => this.invoke("limited", job)
        },
        keyed: {
          ...common,
          concurrency: { key: (payload: JobsChaosPayload) => payload.tenant ?? "none", limit: 1, total: JOBS_CHAOS.keyedTotal },
          handler: (job: DurableJob<JobsChaosPayload>) => this.invoke("keyed", job)
        },
        kept: {
          ...common,
          removeOnComplete: { count: JOBS_CHAOS.kept.completed },
          removeOnFail: { count: JOBS_CHAOS.kept.failed },
          handler: (job: DurableJob<JobsChaosPayload>) => this.invoke("kept", job)
        },
        batched: {
          ...common,
          batch: JOBS_CHAOS.batch,
          batchHandler: (jobs: ReadonlyArray<DurableBatchJob<JobsChaosPayload>>) => this.invokeBatch(jobs)
        }
      },
      onLifecycleEvent: (event) => {
        ctx.storage.sql.exec(
          "INSERT INTO jobs_chaos_events (type, queue, id, at, instance) VALUES (?, ?, ?, ?, ?)",
          event.type,
          event.queue,
          event.id,
          Date.now(),
          this.instance
        )
      }
    })
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await recordDelivery(this.ctx.storage.sql, "jobs_chaos_deliveries", this.instance, info, () => this.jobs.alarm(info))
  }

  private ledger(): DurableObjectStub<EffectLedger> {
    return this.env.EFFECT_LEDGER.get(this.env.EFFECT_LEDGER.idFromName(this.ctx.id.toString()))
  }

  /** A parent's view of its children when it runs: every one finished, and none of its `fail` children failed. */
  private async childrenProblems(key: string, job: DurableJob<JobsChaosPayload>): Promise<string | null> {
    const children = this.ctx.storage.sql.exec<{ id: string; status: string; on_failure: string }>(
      "SELECT id, status, on_failure FROM durability_jobs WHERE parent_key = ? ORDER BY id",
      key
    ).toArray()
    const problems: Array<string> = []
    for (const child of children) {
      if (child.status === "pending" || child.status === "waiting_children") problems.push(`child ${child.id} is ${child.status}`)
      else if (child.on_failure === "fail" && child.status !== "completed") problems.push(`child ${child.id} (fail) ended ${child.status}`)
    }
    const values = Object.keys(await job.childrenValues()).sort()
    if (values.join() !== children.map((child) => child.id).join()) {
      problems.push(`childrenValues has ${values.join()}, stored ${children.map((child) => child.id).join()}`)
    }
    return problems.length === 0 ? null : problems.join("; ")
  }

  /** Records a job's handler call as it starts (with its claim time), and how to record its end. */
  private recordCall(queue: JobsChaosQueue, job: DurableBatchJob<JobsChaosPayload>, batchSeq: number | null) {
    const sql = this.ctx.storage.sql
    const [claim] = sql.exec<{ started_at: number }>("SELECT started_at FROM durability_jobs WHERE key = ?", `${queue}/${job.id}`).toArray()
    const [row] = sql.exec<{ seq: number }>(
      `INSERT INTO jobs_chaos_calls (queue, id, behaviour, tenant, attempt, idempotency_key, instance, claimed_at, started_at, batch_seq)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
      queue,
      job.id,
      job.payload.behaviour,
      job.payload.tenant ?? null,
      job.attempt,
      job.idempotencyKey,
      this.instance,
      claim?.started_at ?? -1,
      Date.now(),
      batchSeq
    ).toArray()
    return {
      seq: row!.seq,
      end: (outcome: "completed" | "failed", error: string | null) =>
        sql.exec("UPDATE jobs_chaos_calls SET ended_at = ?, outcome = ?, error = ? WHERE seq = ?", Date.now(), outcome, error, row!.seq)
    }
  }

  /** The `batched` queue's handler: one logged call, each job behaving on its own and answering its own outcome. */
  private async invokeBatch(
    jobs: ReadonlyArray<DurableBatchJob<JobsChaosPayload>>
  ): Promise<ReadonlyArray<DurableBatchOutcome<JobsChaosResult>>> {
    const sql = this.ctx.storage.sql
    const [call] = sql.exec<{ seq: number }>(
      "INSERT INTO jobs_chaos_batch_calls (instance, ids, started_at) VALUES (?, ?, ?) RETURNING seq",
      this.instance,
      JSON.stringify(jobs.map((job) => job.id)),
      Date.now()
    ).toArray()
    const outcomes = await Promise.all(jobs.map(async (job): Promise<DurableBatchOutcome<JobsChaosResult>> => {
      const { end } = this.recordCall("batched", job, call!.seq)
      try {
        const value = await this.behave(`batched/${job.id}`, job)
        end("completed", null)
        return { ok: true, value }
      } catch (error) {
        end("failed", error instanceof Error ? error.name : String(error))
        return { ok: false, error }
      }
    }))
    sql.exec("UPDATE jobs_chaos_batch_calls SET ended_at = ? WHERE seq = ?", Date.now(), call!.seq)
    return outcomes
  }

  private async invoke(queue: JobsChaosQueue, job: DurableJob<JobsChaosPayload>): Promise<JobsChaosResult> {
    const sql = this.ctx.storage.sql
    const key = `${queue}/${job.id}`
    const { seq, end } = this.recordCall(queue, job, null)
    try {
      if (queue === "parent" || queue === "kept") {
        const note = await this.childrenProblems(key, job)
        if (note !== null) sql.exec("UPDATE jobs_chaos_calls SET note = ? WHERE seq = ?", note, seq)
      }
      const result = await this.behave(key, job)
      end("completed", null)
      return result
    } catch (error) {
      end("failed", error instanceof Error ? error.name : String(error))
      throw error
    }
  }

  private async behave(key: string, job: DurableBatchJob<JobsChaosPayload>): Promise<JobsChaosResult> {
    const apply = async (): Promise<JobsChaosResult> => {
      const applied: ApplyResult = await this.ledger().apply({ source: key, key: job.idempotencyKey, attempt: job.attempt })
      return { key, attempt: job.attempt, effect: applied.effect }
    }
    switch (job.payload.behaviour) {
      case "ok":
        return apply()
      case "flaky":
        if (job.attempt === 1) throw new TransientError(`${key}: fails on attempt 1`)
        return apply()
      case "doomed":
        throw new NonRetryableError(`${key} cannot succeed`)
      case "slow": {
        const result = await apply()
        await sleep(JOBS_CHAOS.slowHoldMs)
        return result
      }
      case "exhaust":
        throw new TransientError(`${key}: fails on attempt ${job.attempt}`)
    }
  }

  // RPC surface used by the chaos test. Every call resolves; adds and flows are idempotent by id.

  async add(specs: ReadonlyArray<JobsChaosAddSpec>): Promise<ReadonlyArray<DurableJobAddResult>> {
    const results: Array<DurableJobAddResult> = []
    for (const spec of specs) {
      const result = await this.jobs[spec.queue].add({
        id: spec.id,
        payload: spec.payload,
        ...(spec.delayMs === undefined ? {} : { delayMs: spec.delayMs }),
        ...(spec.priority === undefined ? {} : { priority: spec.priority }),
        ...(spec.dedup === undefined ? {} : { dedup: spec.dedup })
      })
      this.ctx.storage.sql.exec(
        "INSERT INTO jobs_chaos_adds (queue, id, dedup_key, ttl_ms, deduplicated, result_id, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        spec.queue,
        spec.id,
        spec.dedup?.key ?? null,
        spec.dedup?.ttlMs ?? null,
        result.deduplicated ? 1 : 0,
        result.id,
        Date.now()
      )
      results.push(result)
    }
    return results
  }

  /** Adds a flow; "exists" when its root was added before (a resubmission after a reset). */
  async flow(root: DurableJobFlowNode): Promise<"added" | "exists"> {
    const [known] = this.ctx.storage.sql.exec("SELECT 1 FROM durability_jobs WHERE key = ?", `${root.queue}/${root.id}`).toArray()
    if (known !== undefined) return "exists"
    await this.jobs.flow(root)
    return "added"
  }

  async cancel(queue: JobsChaosQueue, id: string): Promise<boolean> {
    const sql = this.ctx.storage.sql
    // Recorded before the call: a reset may cut it after its commit.
    const [row] = sql.exec<{ seq: number }>(
      "INSERT INTO jobs_chaos_cancels (queue, id, at) VALUES (?, ?, ?) RETURNING seq",
      queue,
      id,
      Date.now()
    ).toArray()
    const accepted = await this.jobs[queue].cancel(id, "chaos")
    sql.exec("UPDATE jobs_chaos_cancels SET accepted = ? WHERE seq = ?", accepted ? 1 : 0, row!.seq)
    return accepted
  }

  async pause(queue: JobsChaosQueue): Promise<void> {
    await this.jobs[queue].pause()
    this.ctx.storage.sql.exec("INSERT INTO jobs_chaos_pauses (queue, paused_at) VALUES (?, ?)", queue, Date.now())
  }

  async resume(queue: JobsChaosQueue): Promise<void> {
    this.ctx.storage.sql.exec("UPDATE jobs_chaos_pauses SET resume_at = ? WHERE queue = ? AND resume_at IS NULL", Date.now(), queue)
    await this.jobs[queue].resume()
  }

  isPaused(queue: JobsChaosQueue): Promise<boolean> {
    return this.jobs[queue].isPaused()
  }

  /** The stored state the invariants are checked on, with the platform alarm. */
  async audit(): Promise<JobsChaosAudit> {
    const sql = this.ctx.storage.sql
    const [due] = sql.exec<{ pending: number; earliest: number | null }>(
      `SELECT COUNT(*) AS pending, MIN(next_attempt_at) AS earliest FROM durability_jobs WHERE status = 'pending' AND ${NOT_PAUSED}`
    ).toArray()
    const [unfinished] = sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM durability_jobs WHERE status IN ('pending', 'waiting_children')"
    ).toArray()
    const stuckParents = sql.exec<{ key: string; children_pending: number; unfinished: number }>(
      `SELECT p.key, p.children_pending, (
         SELECT COUNT(*) FROM durability_jobs c WHERE c.parent_key = p.key AND c.status IN ('pending', 'waiting_children')
       ) AS unfinished
       FROM durability_jobs p WHERE p.status = 'waiting_children'`
    ).toArray().filter((row) => row.unfinished === 0 || row.unfinished !== row.children_pending)
    const kept = sql.exec<{ status: string; n: number }>(
      "SELECT status, COUNT(*) AS n FROM durability_jobs WHERE queue = 'kept' GROUP BY status"
    ).toArray()
    const doubleHolders = sql.exec<{ dedup_key: string; holders: number }>(
      `SELECT a.dedup_key, COUNT(DISTINCT j.key) AS holders FROM jobs_chaos_adds a
       JOIN durability_jobs j ON j.queue = a.queue AND j.id = a.id
       WHERE a.dedup_key IS NOT NULL AND a.ttl_ms IS NULL AND j.status IN ('pending', 'waiting_children')
       GROUP BY a.dedup_key HAVING COUNT(DISTINCT j.key) > 1`
    ).toArray()
    const [batchWait] = sql.exec<{ until: number | null }>(
      "SELECT batch_until AS until FROM durability_job_queues WHERE queue = 'batched'"
    ).toArray()
    const [held] = sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM durability_jobs WHERE queue = 'batched' AND status = 'pending' AND next_attempt_at >= ?",
      batchWait?.until ?? 0
    ).toArray()
    const now = Date.now()
    const alarm = await this.ctx.storage.getAlarm()
    return {
      instance: this.instance,
      now,
      alarm,
      pending: due!.pending,
      earliest: due!.earliest,
      unfinished: unfinished!.n,
      stuckParents,
      kept: {
        completed: kept.find((row) => row.status === "completed")?.n ?? 0,
        failed: kept.find((row) => row.status === "failed")?.n ?? 0
      },
      doubleHolders,
      batchWait: {
        until: batchWait?.until ?? null,
        held: batchWait?.until === undefined || batchWait.until === null ? 0 : held!.n
      }
    }
  }

  state() {
    const sql = this.ctx.storage.sql
    const all = <T>(query: string) => sql.exec(query).toArray() as unknown as ReadonlyArray<T>
    return {
      instance: this.instance,
      jobs: all<JobRow>(
        `SELECT key, queue, id, generation_id, status, attempt, next_attempt_at, last_error_name, result, payload, parent_key,
           on_failure, children_pending, cancel_requested, created_at, started_at, finished_at
         FROM durability_jobs ORDER BY key`
      ),
      calls: all<JobsChaosCall>("SELECT * FROM jobs_chaos_calls ORDER BY seq"),
      batchCalls: all<JobsChaosBatchCall>("SELECT * FROM jobs_chaos_batch_calls ORDER BY seq"),
      events: all<JobsChaosEvent>("SELECT * FROM jobs_chaos_events ORDER BY seq"),
      adds: all<JobsChaosAdd>("SELECT * FROM jobs_chaos_adds ORDER BY seq"),
      cancels: all<JobsChaosCancel>("SELECT * FROM jobs_chaos_cancels ORDER BY seq"),
      pauses: all<JobsChaosPause>("SELECT * FROM jobs_chaos_pauses ORDER BY seq"),
      deliveries: all<JobsChaosDelivery>("SELECT * FROM jobs_chaos_deliveries ORDER BY seq"),
      buckets: all<{ readonly queue: string; readonly group_key: string; readonly tokens: number; readonly updated_at: number }>(
        "SELECT * FROM durability_job_buckets ORDER BY queue, group_key"
      )
    }
  }

  /** The deliveries still running (or cut by a reset), or begun or ended at or after `at`. */
  deliveriesAround(at: number): ReadonlyArray<JobsChaosDelivery> {
    return deliveriesAround<JobsChaosDelivery>(this.ctx.storage.sql, "jobs_chaos_deliveries", at)
  }

  /** Handler calls a reset cut short: begun in an instance that is gone, never ended. */
  callsCut(): number {
    return this.ctx.storage.sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM jobs_chaos_calls WHERE instance <> ? AND ended_at IS NULL",
      this.instance
    ).toArray()[0]!.n
  }

  /** As the platform keeps a failed alarm for its retry (`runDurableObjectAlarm` deletes it first and never retries). */
  async restoreAlarm(at: number): Promise<boolean> {
    if ((await this.ctx.storage.getAlarm()) !== null) return false
    await this.ctx.storage.setAlarm(at)
    return true
  }

  /** Handler calls of this instance still running (calls of reset instances never end). */
  running(): number {
    return this.ctx.storage.sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM jobs_chaos_calls WHERE instance = ? AND ended_at IS NULL",
      this.instance
    ).toArray()[0]!.n
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  now(): number {
    return Date.now()
  }
}
