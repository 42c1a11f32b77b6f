/**
 * This library's job queues as a benchmark target (J1–J4, J8, J9): one object per run, built the way the
 * README shows (`DurabilityScheduler` + `DurabilityJobs`, default options), over a counted
 * `ctx.storage`. Each scenario has its own queue; every handler does trivial work (count, note
 * `Date.now()`). `JobsBenchLive` is the same with `liveTimers: true`.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  DurabilityJobs,
  type DurabilityJobsInstance,
  DurabilityScheduler,
  type DurableBatchJob,
  type DurableJob
} from "../../src/index.js"
import { Counter, countingContext } from "./counting.js"
import {
  J2_KEYS,
  J2_LIMITS,
  type J1Progress,
  type J2KeysRun,
  type J2Queue,
  type J8Progress,
  type JBResult,
  type JBRun,
  type J8Queue,
  type J9Progress,
  type J9Queue,
  type J3Sample,
  type JobsTarget,
  makeJobsDriver
} from "./jobsDriver.js"

/** Jobs per queue running at once, as the peers' workers. */
const CONCURRENCY = 10

/**
 * Resolves when `ready()` holds or at the deadline. `wake()` (from every handler) only checks the
 * condition: no promise or timer per job, so waiting costs the measured run almost nothing.
 */
class Waiters {
  private waiting = new Set<{ readonly ready: () => boolean; readonly resume: () => void }>()

  wake(): void {
    for (const waiter of this.waiting) if (waiter.ready()) waiter.resume()
  }

  until(ready: () => boolean, timeoutMs: number): Promise<void> {
    if (ready()) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const waiter = {
        ready,
        resume: () => {
          clearTimeout(timer)
          this.waiting.delete(waiter)
          resolve()
        }
      }
      const timer = setTimeout(waiter.resume, timeoutMs)
      this.waiting.add(waiter)
    })
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** What the handlers saw. */
class Tracker {
  readonly waiters = new Waiters()
  j1 = { handled: 0, firstStartAt: null as number | null, lastHandledAt: null as number | null }
  j2Starts: Array<number> = []
  /** J2 with keys: each start's key, what runs per key now, and the most seen. */
  keyStarts: Array<string> = []
  keyRunning = new Map<string, number>()
  keyMost = 0
  keyMostAll = 0
  keyDone = 0
  j3Samples: Array<J3Sample> = []
  j3LoadDone = 0
  j8 = 0
  /** J9: jobs handled, and handler calls (a batch's call handles many). */
  j9 = { handled: 0, calls: 0 }

  reset(): void {
    this.j8 = 0
    this.j9 = { handled: 0, calls: 0 }
    this.j1 = { handled: 0, firstStartAt: null, lastHandledAt: null }
    this.j2Starts = []
    this.keyStarts = []
    this.keyRunning = new Map()
    this.keyMost = 0
    this.keyMostAll = 0
    this.keyDone = 0
    this.j3Samples = []
    this.j3LoadDone = 0
  }
}

/** One of J8's ten pieces of work: a little arithmetic on the job's number, the step's index and the last result. */
const piece = (i: number, k: number, last: number): number => {
  let acc = last
  for (let r = 0; r < 50; r++) acc = (acc * 31 + i + k + r) % 1_000_003
  return acc
}

const queues = (tracker: Tracker) => {
  const j2 = (job: DurableJob<{ readonly i: number }>) => {
    tracker.j2Starts.push(Date.now())
    tracker.waiters.wake()
    return job.payload.i
  }
  return {
    j1: {
      concurrency: CONCURRENCY,
      handler: (_job: DurableJob<{ readonly i: number }>) => {
        const now = Date.now()
        tracker.j1.handled++
        tracker.j1.firstStartAt ??= now
        tracker.j1.lastHandledAt = now
        tracker.waiters.wake()
      }
    },
    j2: { concurrency: CONCURRENCY, rateLimit: J2_LIMITS.j2, handler: j2 },
    j2fast: { concurrency: CONCURRENCY, rateLimit: J2_LIMITS.j2fast, handler: j2 },
    j2keys: {
      concurrency: { key: (payload: { readonly key: string }) => payload.key, limit: J2_KEYS.limit, total: J2_KEYS.total },
      handler: async (job: DurableJob<{ readonly key: string }>) => {
        const key = job.payload.key
        const running = (tracker.keyRunning.get(key) ?? 0) + 1
        tracker.keyRunning.set(key, running)
        tracker.keyMost = Math.max(tracker.keyMost, running)
        tracker.keyMostAll = Math.max(tracker.keyMostAll, [...tracker.keyRunning.values()].reduce((a, b) => a + b, 0))
        tracker.keyStarts.push(key)
        try {
          await sleep(J2_KEYS.holdMs)
        } finally {
          tracker.keyRunning.set(key, tracker.keyRunning.get(key)! - 1)
        }
        tracker.keyDone++
        tracker.waiters.wake()
      }
    },
    // JB: jobs a bulk cancel and remove act on; the queue stays paused, so none runs.
    jb: { handler: (_job: DurableJob<{ readonly i: number }>) => undefined },
    // J8: the same ten pieces, each a durable step (memoised: stored once, replayed on a retry) or inline.
    j8steps: {
      concurrency: CONCURRENCY,
      handler: async (job: DurableJob<{ readonly i: number }>) => {
        let acc = 0
        for (let k = 0; k < 10; k++) {
          const last = acc
          acc = await job.step(`piece-${k}`, () => piece(job.payload.i, k, last))
        }
        tracker.j8++
        tracker.waiters.wake()
        return acc
      }
    },
    j8plain: {
      concurrency: CONCURRENCY,
      handler: (job: DurableJob<{ readonly i: number }>) => {
        let acc = 0
        for (let k = 0; k < 10; k++) acc = piece(job.payload.i, k, acc)
        tracker.j8++
        tracker.waiters.wake()
        return acc
      }
    },
    // J9: J1's trivial work, in batches of up to CONCURRENCY (the scheduler's permits: 10 by default) or one by one.
    j9batched: {
      concurrency: CONCURRENCY,
      batch: { size: CONCURRENCY },
      batchHandler: (batch: ReadonlyArray<DurableBatchJob<{ readonly i: number }>>) => {
        tracker.j9.handled += batch.length
        tracker.j9.calls++
        tracker.waiters.wake()
        return batch.map((job) => ({ ok: true as const, value: job.payload.i }))
      }
    },
    j9plain: {
      concurrency: CONCURRENCY,
      handler: (job: DurableJob<{ readonly i: number }>) => {
        tracker.j9.handled++
        tracker.j9.calls++
        tracker.waiters.wake()
        return job.payload.i
      }
    },
    j3: {
      concurrency: CONCURRENCY,
      handler: (job: DurableJob<{ readonly i: number; readonly due?: number }>) => {
        const started = Date.now()
        if (job.payload.due !== undefined) tracker.j3Samples.push({ due: job.payload.due, started })
        else tracker.j3LoadDone++
        tracker.waiters.wake()
      }
    }
  }
}

export class JobsBench extends DurableObject<Record<string, unknown>> implements JobsTarget {
  static readonly liveTimers: boolean = false
  readonly counter = new Counter()
  readonly scheduler: DurabilityScheduler
  readonly jobs: DurabilityJobsInstance<ReturnType<typeof queues>>
  readonly tracker = new Tracker()

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env)
    this.scheduler = new DurabilityScheduler({
      context: countingContext(ctx, this.counter),
      liveTimers: (this.constructor as typeof JobsBench).liveTimers
    })
    this.jobs = new DurabilityJobs({ scheduler: this.scheduler, queues: queues(this.tracker) })
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  reset(): void {
    this.counter.reset()
    this.tracker.reset()
  }

  /** J1: `count` trivial jobs `{ i }` in one `addBulk`. */
  async addJ1(start: number, count: number): Promise<void> {
    await this.jobs.j1.addBulk(Array.from({ length: count }, (_, k) => ({ payload: { i: start + k } })))
  }

  /**
   * J1: waits until `n` handlers returned, then until `counts()` says `n` jobs are completed (their
   * settles commit right after the handlers return), and takes the statement counts.
   */
  async waitJ1(n: number, timeoutMs: number): Promise<J1Progress> {
    const deadline = Date.now() + timeoutMs
    await this.tracker.waiters.until(() => this.tracker.j1.handled >= n, timeoutMs)
    let probes = 0
    let completed = 0
    let completedAt: number | null = null
    while (this.tracker.j1.handled >= n && Date.now() < deadline) {
      probes++
      completed = (await this.jobs.j1.counts()).completed
      if (completed >= n) {
        completedAt = Date.now()
        break
      }
      await sleep(1)
    }
    return { ...this.tracker.j1, completedAt, completed, probes, counts: this.counter.snapshot() }
  }

  /**
   * JB: `n` waiting jobs on the paused `jb` queue (in `addBulk`s of `batch`), then every one of them canceled
   * and the canceled ones removed, each by filter, `limit` jobs per `bulk` call, one call after another until
   * done: per action its time, calls, transactions and statements.
   */
  async bulkJB(n: number, batch: number, limit: number): Promise<JBResult> {
    await this.jobs.jb.pause()
    for (let i = 0; i < n; i += batch) {
      await this.jobs.jb.addBulk(Array.from({ length: Math.min(batch, n - i) }, (_, k) => ({ payload: { i: i + k } })))
    }
    const run = async (action: "cancel" | "remove"): Promise<JBRun> => {
      this.counter.reset()
      const filter = action === "cancel" ? { queue: "jb" } : { queue: "jb", states: ["canceled" as const] }
      const t0 = Date.now()
      let calls = 0
      let affected = 0
      let result = await this.jobs.bulk(action, filter, { limit })
      for (;;) {
        calls++
        affected += result.affected
        if (result.cursor === undefined) break
        result = await this.jobs.bulk(action, filter, { limit, cursor: result.cursor })
      }
      const ms = Date.now() - t0
      const counts = this.counter.snapshot()
      const statements = Object.values(counts.statements).reduce((sum, entry) => sum + entry.n, 0)
      return { ms, calls, affected, transactions: counts.transactions, statements }
    }
    const cancel = await run("cancel")
    const remove = await run("remove")
    return { n, limit, cancel, remove }
  }

  /** J1 split: a paused queue takes adds without starting them; resuming starts the drain. */
  async pauseJ1(paused: boolean): Promise<void> {
    await (paused ? this.jobs.j1.pause() : this.jobs.j1.resume())
  }

  /**
   * J1's SQL alone: the library's own statements for the J1 workload (per bulk, one transaction of
   * `batch` inserts; per job, the claim and the completing update), run in a plain loop on a copy
   * of the jobs table with its indexes, through the raw, uncounted `ctx.storage.sql`: what the
   * schema and statements cost before any library code runs.
   */
  sqlFloor(n: number, batch: number): { readonly ms: number; readonly insertMs: number } {
    const sql = this.ctx.storage.sql
    const exec = (query: string, ...bindings: Array<SqlStorageValue>) => sql.exec(query, ...bindings).toArray()
    const ddl = exec(
      `SELECT sql FROM sqlite_master WHERE tbl_name = 'durability_jobs' AND type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC`
    )
    if (ddl.length === 0) throw new Error("the jobs table does not exist yet")
    exec("DROP TABLE IF EXISTS floor_jobs")
    for (const { sql: statement } of ddl) exec(String(statement).replaceAll("durability_jobs", "floor_jobs"))
    const notPaused = "queue NOT IN (SELECT queue FROM durability_job_queues WHERE paused = 1)"
    const insert = `INSERT INTO floor_jobs (key, queue, id, generation_id, status, attempt, next_attempt_at, run_at, priority, seq,
        payload, group_key, parent_key, on_failure, children_pending, created_at)
      VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (key) DO NOTHING RETURNING key`
    const claim = `UPDATE floor_jobs SET attempt = attempt + 1, started_at = ? WHERE key = ? AND status = 'pending'
      AND (${notPaused}) AND next_attempt_at <= ? AND attempt < ? RETURNING *`
    const complete = `UPDATE floor_jobs SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'completed' END,
        result = ?, finished_at = ?, last_error = NULL, last_error_name = NULL
      WHERE key = ? AND generation_id = ? AND status = 'pending' AND attempt = ? RETURNING key`
    let insertMs = 0
    const t0 = Date.now()
    for (let start = 0, seq = 1; start < n; start += batch) {
      const now = Date.now()
      const jobs = Array.from({ length: Math.min(batch, n - start) }, () => {
        const id = crypto.randomUUID()
        return { key: `j1/${id}`, id, generation: crypto.randomUUID(), payload: JSON.stringify({ i: seq }), seq: seq++ }
      })
      this.ctx.storage.transactionSync(() => {
        for (const job of jobs) {
          exec(insert, job.key, "j1", job.id, job.generation, "pending", now, now, 0, job.seq, job.payload, null, null, "fail", 0, now)
        }
      })
      insertMs += Date.now() - now
      for (const job of jobs) {
        const [row] = exec(claim, Date.now(), job.key, Date.now(), 3)
        if (row === undefined) throw new Error(`floor: ${job.key} not claimed`)
        exec(complete, "{\"kind\":\"undefined\"}", Date.now(), job.key, job.generation, Number(row.attempt))
      }
    }
    const ms = Date.now() - t0
    exec("DROP TABLE floor_jobs")
    return { ms, insertMs }
  }

  /** J8: `count` jobs `{ i }` on `queue` in one `addBulk`. */
  async addJ8(queue: J8Queue, start: number, count: number): Promise<void> {
    await this.jobs[queue].addBulk(Array.from({ length: count }, (_, k) => ({ payload: { i: start + k } })))
  }

  /** J8: waits until `n` handlers returned, then until `counts()` of both queues says `n` jobs are completed. */
  async waitJ8(n: number, timeoutMs: number): Promise<J8Progress> {
    const deadline = Date.now() + timeoutMs
    await this.tracker.waiters.until(() => this.tracker.j8 >= n, timeoutMs)
    let completedAt: number | null = null
    while (this.tracker.j8 >= n && Date.now() < deadline) {
      const [steps, plain] = await Promise.all([this.jobs.j8steps.counts(), this.jobs.j8plain.counts()])
      if (steps.completed + plain.completed >= n) {
        completedAt = Date.now()
        break
      }
      await sleep(1)
    }
    return { handled: this.tracker.j8, completedAt, counts: this.counter.snapshot() }
  }

  /** J9: `count` jobs `{ i }` on `queue` in one `addBulk`. */
  async addJ9(queue: J9Queue, start: number, count: number): Promise<void> {
    await this.jobs[queue].addBulk(Array.from({ length: count }, (_, k) => ({ payload: { i: start + k } })))
  }

  /** J9: waits until `n` jobs were handled, then until `counts()` of `queue` says `n` are completed. */
  async waitJ9(queue: J9Queue, n: number, timeoutMs: number): Promise<J9Progress> {
    const deadline = Date.now() + timeoutMs
    await this.tracker.waiters.until(() => this.tracker.j9.handled >= n, timeoutMs)
    let completedAt: number | null = null
    while (this.tracker.j9.handled >= n && Date.now() < deadline) {
      if ((await this.jobs[queue].counts()).completed >= n) {
        completedAt = Date.now()
        break
      }
      await sleep(1)
    }
    return { ...this.tracker.j9, completedAt, counts: this.counter.snapshot() }
  }

  /** J2: `count` jobs in one `addBulk`, all due now: the bucket alone sets the pace. */
  async addJ2(queue: J2Queue, count: number): Promise<void> {
    await this.jobs[queue].addBulk(Array.from({ length: count }, (_, i) => ({ payload: { i } })))
  }

  async waitJ2Starts(count: number, timeoutMs: number): Promise<ReadonlyArray<number>> {
    await this.tracker.waiters.until(() => this.tracker.j2Starts.length >= count, timeoutMs)
    return this.tracker.j2Starts
  }

  /** Ends a J2 run: pauses the queue and deletes its jobs, so the object goes idle. */
  async stopJ2(queue: J2Queue): Promise<ReadonlyArray<number>> {
    await this.jobs[queue].pause()
    const starts = [...this.tracker.j2Starts]
    await this.jobs.purgeBefore(Date.now() + 1)
    return starts
  }

  /** J2 with keys: one job per entry of `keys` (its key), in one `addBulk`. */
  async addJ2Keys(keys: ReadonlyArray<string>): Promise<void> {
    await this.jobs.j2keys.addBulk(keys.map((key) => ({ payload: { key } })))
  }

  async waitJ2Keys(count: number, timeoutMs: number): Promise<J2KeysRun> {
    await this.tracker.waiters.until(() => this.tracker.keyDone >= count, timeoutMs)
    return {
      starts: this.tracker.keyStarts,
      mostRunningPerKey: this.tracker.keyMost,
      mostRunning: this.tracker.keyMostAll,
      counts: (({ statements, transactions }) => ({
        statements: Object.values(statements).reduce((sum, statement) => sum + statement.n, 0),
        transactions
      }))(this.counter.snapshot())
    }
  }

  /** J3: the delayed jobs, each `{ i, due }` with `runAt: due`, in one `addBulk`. */
  async addJ3Delayed(due: ReadonlyArray<number>): Promise<void> {
    await this.jobs.j3.addBulk(due.map((at, i) => ({ payload: { i, due: at }, runAt: at })))
  }

  /** J3's background load: `count` immediate jobs on the same queue. */
  async addJ3Load(start: number, count: number): Promise<void> {
    await this.jobs.j3.addBulk(Array.from({ length: count }, (_, k) => ({ payload: { i: start + k } })))
  }

  async waitJ3(delayed: number, load: number, timeoutMs: number): Promise<{ samples: ReadonlyArray<J3Sample>; loadDone: number }> {
    await this.tracker.waiters.until(() => this.tracker.j3Samples.length >= delayed && this.tracker.j3LoadDone >= load, timeoutMs)
    return { samples: this.tracker.j3Samples, loadDone: this.tracker.j3LoadDone }
  }
}

export class JobsBenchLive extends JobsBench {
  static override readonly liveTimers: boolean = true
}

export default makeJobsDriver((env: any, binding, name) => env[binding].get(env[binding].idFromName(name)))
