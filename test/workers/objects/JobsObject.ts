/**
 * `JobsObject`: job queues written against the public promise API (`DurabilityJobs` on a shared
 * `DurabilityScheduler`), over real SQLite storage and the real alarm, as an application would.
 * Every handler call, lifecycle event and `alarm()` delivery is recorded in the object's own
 * tables, which survive resets; the scenarios read them over RPC.
 *
 * Queues (every payload is a `Work`):
 * - `plain`: stores progress 50, logs a line, returns `{ tag }`.
 * - `ordered`: concurrency 1; holds `holdMs`, then returns.
 * - `limited`: a queue token bucket and a bucket per `tenant`.
 * - `flaky`: fails (retryable) on the job's first `failTimes` calls, counted over all its runs
 *   (a redrive included); `fatal` fails with `NonRetryableError`; dead letters on.
 * - `retained`: keeps the newest `JOBS.retained` completed jobs; logs a line per job.
 * - `slow`: attempts up to `holdAttempts` wait for their signal (a cancel, or a reset of the object).
 * - `report`: a flow's parent; returns its children's values.
 * - `keyed`: one running job per `tenant`, `JOBS.keyedTotal` in all; attempts up to `holdAttempts` wait for their
 *   signal, `holdUntil` for its gate; each call notes how many of its tenant ran in this instance as it started.
 * - `batched`: batches of up to `JOBS.batchSize`, waiting up to `JOBS.batchWaitMs` for more; each job's call
 *   notes the ids of its batch, and fails as `flaky`'s do (`failTimes`).
 */
import { DurableObject } from "cloudflare:workers"
import { Gates } from "./gates.js"
import { Deliveries, type Idleness } from "./idle.js"
import {
  type AlarmInvocationInfo,
  DurabilityJobs,
  DurabilityScheduler,
  type DurableBatchJob,
  type DurableJob,
  type DurableJobAddOptions,
  type DurableJobAddResult,
  type DurableJobBulkAction,
  type DurableJobBulkOptions,
  type DurableJobBulkResult,
  type DurableJobFilter,
  type DurableJobDeadLetterPage,
  type DurableJobEvent,
  type DurableJobFlowNode,
  type DurableJobFlowResult,
  type DurableJobInfo,
  type DurableJobListOptions,
  type DurableJobLogs,
  type DurableJobRateLimit,
  type DurableJobState,
  type DurableQueue,
  NonRetryableError
} from "../../../src/index.js"

/** The settings the scenarios compute their expectations from. */
export const JOBS = {
  alarmMinDelayMs: 1_000,
  retryDelayMs: 20,
  maxAttempts: 3,
  attemptTimeoutMs: 10_000,
  limited: { capacity: 3, refillPerSecond: 4 },
  limitedGroup: { capacity: 2, refillPerSecond: 2 },
  retained: 5,
  plainMaxPayloadBytes: 1_024,
  keyedTotal: 2,
  batchSize: 4,
  batchWaitMs: 3_000
} as const

export type QueueName = "plain" | "ordered" | "limited" | "flaky" | "retained" | "slow" | "report" | "keyed" | "batched"

export interface Work {
  readonly tag?: string
  readonly tenant?: string
  readonly holdMs?: number
  /** `ordered`: holds until the test calls `release` with this name (no timing involved). */
  readonly holdUntil?: string
  readonly holdAttempts?: number
  readonly failTimes?: number
  readonly fatal?: boolean
  /** `plain`: also tries to store a progress value over the 64 KiB limit (and records the error). */
  readonly bigProgress?: boolean
}

/** A child's value as a `report` job saw it. */
export interface ChildSeen {
  readonly queue: string
  readonly state: DurableJobState
  readonly result?: JobResult
  readonly error?: { readonly name: string; readonly message: string }
}

/** What the handlers return (one shape for every queue). */
export interface JobResult {
  readonly tag?: string | null
  readonly calls?: number
  readonly attempt?: number
  readonly children?: Readonly<Record<string, ChildSeen>>
}

/** A job's info as the scenarios get it over RPC (`unknown` does not cross it). */
export type JobView = Omit<DurableJobInfo<Work, JobResult>, "progress"> & { readonly progress: number | string }

export interface JobViewPage {
  readonly items: ReadonlyArray<JobView>
  readonly cursor?: string
}

/** One handler call, as the object recorded it. */
export interface JobCall {
  readonly seq: number
  readonly queue: string
  readonly id: string
  readonly tag: string | null
  readonly attempt: number
  readonly idempotency_key: string
  readonly instance: string
  readonly started_at: number
  readonly ended_at: number | null
  readonly outcome: "running" | "completed" | "failed"
  /** Calls of the same queue running in this instance when this one started, itself included. */
  readonly concurrent: number
  readonly aborted: number
  /** The name of the signal's reason, once aborted. */
  readonly abort_reason: string | null
  /** What the handler noted (e.g. the error of an oversized progress). */
  readonly note: string | null
}

export interface JobEventRecord {
  readonly seq: number
  readonly type: DurableJobEvent["type"]
  readonly queue: string
  readonly id: string
  readonly instance: string
  readonly event: string
}

export interface JobAlarmRecord {
  readonly seq: number
  readonly at: number
  readonly instance: string
  /** `getAlarm()` when `alarm()` was entered. */
  readonly seen: number | null
}

/** A stored job row (the columns the scenarios read). */
export interface JobRow {
  readonly key: string
  readonly queue: string
  readonly id: string
  readonly generation_id: string
  readonly status: string
  readonly attempt: number
  readonly next_attempt_at: number
  readonly run_at: number
  readonly priority: number
  readonly seq: number
  readonly payload: string
  readonly result: string | null
  readonly progress: string | null
  readonly group_key: string | null
  readonly concurrency_key: string | null
  readonly waiting_key: number
  readonly turn: number
  readonly parent_key: string | null
  readonly children_pending: number
  readonly last_error: string | null
  readonly last_error_name: string | null
  readonly cancel_reason: string | null
  readonly created_at: number
  readonly started_at: number | null
  readonly finished_at: number | null
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS jobs_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    tag TEXT,
    attempt INTEGER NOT NULL,
    idempotency_key TEXT NOT NULL,
    instance TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    outcome TEXT NOT NULL DEFAULT 'running',
    concurrent INTEGER NOT NULL,
    aborted INTEGER NOT NULL DEFAULT 0,
    abort_reason TEXT,
    note TEXT
  );
  CREATE TABLE IF NOT EXISTS jobs_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    instance TEXT NOT NULL,
    event TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS jobs_alarms (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    instance TEXT NOT NULL,
    seen INTEGER
  );
`

class FlakyError extends Error {
  override readonly name = "FlakyError"
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Rejects with the signal's reason once it is aborted; never settles if the object resets first. */
const untilAborted = (signal: AbortSignal): Promise<never> =>
  new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener("abort", () => reject(signal.reason), { once: true })
  })

const APP_USERS = "CREATE TABLE IF NOT EXISTS app_users (id TEXT PRIMARY KEY)"

/** A call's value, or its error's message (thrown at once or rejected). */
const answer = async <A>(call: () => Promise<A>): Promise<A | { readonly error: string }> => {
  try {
    return await call()
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) }
  }
}

export class JobsObject extends DurableObject {
  readonly instance = crypto.randomUUID()
  private readonly deliveries = new Deliveries()
  // Created before the queues are built: they may tell events (to `jobs_events`) as soon as they exist.
  readonly records = this.ctx.storage.sql.exec(CREATE)
  /** Handlers running in this instance, per queue. */
  private readonly active = new Map<string, number>()
  /** Lost on a reset, so tests that reset do not use them. */
  private readonly gates = new Gates()

  /** Opens the named gate: handlers held on it return. */
  async release(name: string): Promise<void> {
    this.gates.open(name)
  }

  readonly scheduler = new DurabilityScheduler({
    context: this.ctx,
    alarmMinDelayMs: JOBS.alarmMinDelayMs,
    // Not the console: the test pool hangs when an instance it reset writes to the console.
    log: () => undefined
  })

  readonly jobs = new DurabilityJobs({
    scheduler: this.scheduler,
    attemptTimeoutMs: JOBS.attemptTimeoutMs,
    retries: { maxAttempts: JOBS.maxAttempts, delay: () => JOBS.retryDelayMs },
    onLifecycleEvent: (event) => this.recordEvent(event),
    queues: {
      plain: {
        maxPayloadBytes: JOBS.plainMaxPayloadBytes,
        handler: (job: DurableJob<Work>) =>
          this.call(job, async (note) => {
            await job.progress(50)
            if (job.payload.bigProgress === true) {
              await job.progress("x".repeat(70_000)).catch((error: Error) => note(`${error.name}: ${error.message}`))
            }
            await job.log(`ran ${job.payload.tag ?? job.id}`)
            return { tag: job.payload.tag ?? null }
          })
      },
      ordered: {
        concurrency: 1,
        handler: (job: DurableJob<Work>) =>
          this.call(job, async () => {
            if (job.payload.holdMs !== undefined) await sleep(job.payload.holdMs)
            if (job.payload.holdUntil !== undefined) await this.gates.opened(job.payload.holdUntil)
            return { tag: job.payload.tag ?? null }
          })
      },
      limited: {
        rateLimit: JOBS.limited,
        groupRateLimit: { ...JOBS.limitedGroup, key: (payload: Work) => payload.tenant ?? "none" },
        handler: (job: DurableJob<Work>) => this.call(job, async () => ({ tag: job.payload.tag ?? null }))
      },
      flaky: {
        deadLetter: true,
        handler: (job: DurableJob<Work>) =>
          this.call(job, async () => {
            if (job.payload.fatal === true) throw new NonRetryableError(`${job.id} cannot succeed`)
            // Counted over every call of the job (this one included), so a redrive sees the earlier ones.
            const calls = this.callCount("flaky", job.id)
            if (calls <= (job.payload.failTimes ?? 0)) throw new FlakyError(`${job.id} failed on call ${calls}`)
            return { tag: job.payload.tag ?? null, calls }
          })
      },
      retained: {
        removeOnComplete: { count: JOBS.retained },
        handler: (job: DurableJob<Work>) =>
          this.call(job, async () => {
            await job.log(`kept ${job.id}`)
            return { tag: job.payload.tag ?? null }
          })
      },
      slow: {
        handler: (job: DurableJob<Work>) =>
          this.call(job, async () => {
            if (job.attempt <= (job.payload.holdAttempts ?? 0)) await untilAborted(job.signal)
            if (job.payload.holdMs !== undefined) await sleep(job.payload.holdMs)
            return { tag: job.payload.tag ?? null, attempt: job.attempt }
          })
      },
      report: {
        handler: (job: DurableJob<Work>) => this.call(job, async () => ({ children: await job.childrenValues() }))
      },
      keyed: {
        concurrency: { key: (payload: Work) => payload.tenant ?? "none", limit: 1, total: JOBS.keyedTotal },
        handler: (job: DurableJob<Work>) =>
          this.call(job, async (note) => {
            const tenant = `keyed/${job.payload.tenant ?? "none"}`
            const running = (this.active.get(tenant) ?? 0) + 1
            this.active.set(tenant, running)
            note(`tenant ${running}`)
            try {
              if (job.attempt <= (job.payload.holdAttempts ?? 0)) await untilAborted(job.signal)
              if (job.payload.holdUntil !== undefined) await this.gates.opened(job.payload.holdUntil)
              return { tag: job.payload.tag ?? null }
            } finally {
              this.active.set(tenant, (this.active.get(tenant) ?? 1) - 1)
            }
          })
      },
      batched: {
        batch: { size: JOBS.batchSize, waitMs: JOBS.batchWaitMs },
        batchHandler: (batch: ReadonlyArray<DurableBatchJob<Work>>) =>
          Promise.all(batch.map((job) =>
            this.call(job, async (note) => {
              note(batch.map((other) => other.id).join(","))
              const calls = this.callCount("batched", job.id)
              if (calls <= (job.payload.failTimes ?? 0)) throw new FlakyError(`${job.id} failed on call ${calls}`)
              return { tag: job.payload.tag ?? null, calls }
            }).then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))
          ))
      }
    }
  })

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    const seen = await this.ctx.storage.getAlarm()
    this.ctx.storage.sql.exec("INSERT INTO jobs_alarms (at, instance, seen) VALUES (?, ?, ?)", Date.now(), this.instance, seen)
    await this.deliveries.around(() => this.jobs.alarm(info))
  }

  /** The alarm and the deliveries in flight, for a scenario that ends once the object is idle. */
  idle(): Promise<Idleness> {
    return this.deliveries.idleness(this.ctx.storage)
  }

  private recordEvent(event: DurableJobEvent): void {
    this.ctx.storage.sql.exec(
      "INSERT INTO jobs_events (type, queue, id, instance, event) VALUES (?, ?, ?, ?, ?)",
      event.type,
      event.queue,
      event.id,
      this.instance,
      JSON.stringify(event)
    )
  }

  private callCount(queue: string, id: string): number {
    const [row] = this.ctx.storage.sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM jobs_calls WHERE queue = ? AND id = ?",
      queue,
      id
    ).toArray()
    return row?.n ?? 0
  }

  /** Runs one attempt, recording it in `jobs_calls`. */
  private async call<A>(job: DurableBatchJob<Work>, body: (note: (text: string) => void) => Promise<A>): Promise<A> {
    const sql = this.ctx.storage.sql
    const running = (this.active.get(job.queue) ?? 0) + 1
    this.active.set(job.queue, running)
    const [row] = sql.exec<{ seq: number }>(
      `INSERT INTO jobs_calls (queue, id, tag, attempt, idempotency_key, instance, started_at, concurrent)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
      job.queue,
      job.id,
      job.payload.tag ?? null,
      job.attempt,
      job.idempotencyKey,
      this.instance,
      Date.now(),
      running
    ).toArray()
    const seq = row!.seq
    job.signal.addEventListener("abort", () => {
      const reason = job.signal.reason as { readonly name?: unknown } | undefined
      sql.exec("UPDATE jobs_calls SET aborted = 1, abort_reason = ? WHERE seq = ?", String(reason?.name ?? reason), seq)
    }, { once: true })
    const note = (text: string) => void sql.exec("UPDATE jobs_calls SET note = ? WHERE seq = ?", text, seq)
    const end = (outcome: "completed" | "failed") =>
      sql.exec("UPDATE jobs_calls SET ended_at = ?, outcome = ? WHERE seq = ?", Date.now(), outcome, seq)
    try {
      const result = await body(note)
      end("completed")
      return result
    } catch (error) {
      end("failed")
      throw error
    } finally {
      this.active.set(job.queue, (this.active.get(job.queue) ?? 1) - 1)
    }
  }

  /** One queue, as a caller with `Work` payloads sees it. */
  queue(name: QueueName): DurableQueue<Work, unknown> {
    return this.jobs[name] as DurableQueue<Work, unknown>
  }

  // RPC surface used by the scenarios (none of them rejects: a rejected RPC breaks isolated storage).

  add(queue: QueueName, options: DurableJobAddOptions<Work>): Promise<DurableJobAddResult> {
    return this.queue(queue).add(options)
  }

  addBulk(queue: QueueName, jobs: ReadonlyArray<DurableJobAddOptions<Work>>): Promise<ReadonlyArray<DurableJobAddResult>> {
    return this.queue(queue).addBulk(jobs)
  }

  async get(queue: QueueName, id: string): Promise<JobView | undefined> {
    return (await this.queue(queue).get(id)) as JobView | undefined
  }

  async list(queue: QueueName, options?: DurableJobListOptions): Promise<JobViewPage> {
    return (await this.queue(queue).list(options)) as JobViewPage
  }

  counts(queue: QueueName): Promise<Record<DurableJobState, number>> {
    return this.queue(queue).counts()
  }

  logs(queue: QueueName, id: string): Promise<DurableJobLogs> {
    return this.queue(queue).logs(id)
  }

  async wait(queue: QueueName, id: string, timeoutMs: number): Promise<JobView | undefined> {
    return (await this.queue(queue).job(id).wait({ timeoutMs })) as JobView | undefined
  }

  pause(queue: QueueName): Promise<void> {
    return this.queue(queue).pause()
  }

  resume(queue: QueueName): Promise<void> {
    return this.queue(queue).resume()
  }

  isPaused(queue: QueueName): Promise<boolean> {
    return this.queue(queue).isPaused()
  }

  promote(queue: QueueName, id: string): Promise<boolean> {
    return this.queue(queue).promote(id)
  }

  cancel(queue: QueueName, id: string, reason?: string): Promise<boolean> {
    return this.queue(queue).cancel(id, reason)
  }

  remove(queue: QueueName, id: string): Promise<boolean> {
    return this.queue(queue).remove(id)
  }

  changePriority(queue: QueueName, id: string, priority: number): Promise<boolean> {
    return this.queue(queue).changePriority(id, priority)
  }

  setRateLimit(queue: QueueName, limit: DurableJobRateLimit | null): Promise<void> {
    return this.queue(queue).setRateLimit(limit)
  }

  deadLetters(queue: QueueName): Promise<DurableJobDeadLetterPage<Work>> {
    return this.queue(queue).deadLetters.list()
  }

  redrive(queue: QueueName, ids?: ReadonlyArray<string>): Promise<number> {
    return this.queue(queue).deadLetters.redrive(ids === undefined ? {} : { ids })
  }

  flow(root: DurableJobFlowNode): Promise<DurableJobFlowResult> {
    return this.jobs.flow(root)
  }

  bulk(action: DurableJobBulkAction, filter: DurableJobFilter, options?: DurableJobBulkOptions): Promise<DurableJobBulkResult> {
    return this.jobs.bulk(action, filter, options)
  }

  /** The stored job rows, in insertion order. */
  rows(queue?: QueueName): ReadonlyArray<JobRow> {
    const sql = this.ctx.storage.sql
    const rows = queue === undefined
      ? sql.exec("SELECT * FROM durability_jobs ORDER BY seq")
      : sql.exec("SELECT * FROM durability_jobs WHERE queue = ? ORDER BY seq", queue)
    return rows.toArray() as unknown as ReadonlyArray<JobRow>
  }

  /** Rows of one of the jobs tables (`dedup`, `buckets`, `logs`, `dead_letters`, `queues`). */
  table(name: "dedup" | "buckets" | "logs" | "dead_letters" | "queues"): ReadonlyArray<Record<string, string | number | null>> {
    return this.ctx.storage.sql.exec(`SELECT * FROM durability_job_${name}`).toArray() as ReadonlyArray<
      Record<string, string | number | null>
    >
  }

  calls(): ReadonlyArray<JobCall> {
    return this.ctx.storage.sql.exec("SELECT * FROM jobs_calls ORDER BY seq").toArray() as unknown as ReadonlyArray<JobCall>
  }

  events(): ReadonlyArray<JobEventRecord> {
    return this.ctx.storage.sql.exec("SELECT * FROM jobs_events ORDER BY seq").toArray() as unknown as ReadonlyArray<
      JobEventRecord
    >
  }

  alarms(): ReadonlyArray<JobAlarmRecord> {
    return this.ctx.storage.sql.exec("SELECT * FROM jobs_alarms ORDER BY seq").toArray() as unknown as ReadonlyArray<
      JobAlarmRecord
    >
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  // The application's own rows (`app_users`), written with the library's in one transaction. A refusal is
  // answered (`{ error }`), not thrown: a call rejected over RPC leaves the test pool's storage unpoppable.

  /** A user row and a job for it in one transaction; with `fail`, throws after the add (then neither stays). */
  async signUp(
    id: string,
    options: { readonly fail?: boolean; readonly queue?: QueueName; readonly payload?: Work; readonly cancelOn?: string } = {}
  ): Promise<{ readonly added: DurableJobAddResult } | { readonly error: string }> {
    this.ctx.storage.sql.exec(APP_USERS)
    return answer(() =>
      this.scheduler.transaction(() => {
        this.ctx.storage.sql.exec("INSERT INTO app_users (id) VALUES (?)", id)
        const added = this.queue(options.queue ?? "plain").add({
          id,
          payload: options.payload ?? { tag: id },
          ...(options.cancelOn === undefined ? {} : { cancelOn: options.cancelOn })
        })
        if (options.fail === true) throw new Error(`sign-up of ${id} refused`)
        return added
      }).then((added) => ({ added }))
    )
  }

  /** Deletes the user row and sends the event in one transaction; with `fail`, throws after both (neither stays). */
  async deleteUser(id: string, event: string, fail = false): Promise<{ readonly canceled: number } | { readonly error: string }> {
    this.ctx.storage.sql.exec(APP_USERS)
    return answer(() =>
      this.scheduler.transaction(() => {
        this.ctx.storage.sql.exec("DELETE FROM app_users WHERE id = ?", id)
        const canceled = this.jobs.event(event)
        if (fail) throw new Error(`deleting ${id} refused`)
        return canceled
      }).then((canceled) => ({ canceled }))
    )
  }

  event(key: string): Promise<{ readonly canceled: number } | { readonly error: string }> {
    return answer(() => this.jobs.event(key).then((canceled) => ({ canceled })))
  }

  appUsers(): ReadonlyArray<string> {
    this.ctx.storage.sql.exec(APP_USERS)
    return this.ctx.storage.sql.exec("SELECT id FROM app_users ORDER BY id").toArray().map((row) => String(row.id))
  }

  whoami(): string {
    return this.instance
  }
}
