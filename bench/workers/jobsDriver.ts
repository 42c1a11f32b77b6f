/**
 * The job-queue scenarios' `fetch` handler (J1–J4): drives one fresh `JobsBench` object through
 * RPC, as bench/jobs-peer/run.mjs drives BullMQ and pg-boss from a client, and returns the raw
 * figures (times are `Date.now()` inside workerd; bench/run.mjs derives rates and percentiles).
 */
import type { Counts } from "./counting.js"

/** J2's buckets: `j2` matches the peer's BullMQ limiter (10 per second), `j2fast` is five times faster. */
export const J2_LIMITS = {
  j2: { capacity: 10, refillPerSecond: 10 },
  j2fast: { capacity: 5, refillPerSecond: 50 }
} as const

export type J2Queue = keyof typeof J2_LIMITS

/**
 * J2 with a concurrency by key (`j2keys`): at most `limit` jobs of one key and `total` in all, each job
 * holding `holdMs`, so the total binds and the keys take turns.
 */
export const J2_KEYS = { limit: 2, total: 4, holdMs: 2 } as const

/** What the keyed J2 run saw: every start's key in start order, the most running for one key, the SQL counts. */
export interface J2KeysRun {
  readonly starts: ReadonlyArray<string>
  readonly mostRunningPerKey: number
  readonly mostRunning: number
  readonly counts: { readonly statements: number; readonly transactions: number }
}

export interface J1Progress {
  readonly handled: number
  readonly firstStartAt: number | null
  readonly lastHandledAt: number | null
  /** When `counts()` first said every job was completed (null: not within the timeout). */
  readonly completedAt: number | null
  readonly completed: number
  /** `counts()` calls it took (their statements are not the jobs'). */
  readonly probes: number
  readonly counts: Counts
}

export interface J3Sample {
  readonly due: number
  readonly started: number
}

/** J9's two queues: J1's trivial work, in batches (`batch`) or one job per call. */
export type J9Queue = "j9batched" | "j9plain"

/** Where a J9 run ended: jobs handled, handler calls, when every job was completed, the statement counts. */
export interface J9Progress {
  readonly handled: number
  readonly calls: number
  readonly completedAt: number | null
  readonly counts: Counts
}

/** J8's two queues: the same ten pieces of work per job, as durable steps or inline. */
export type J8Queue = "j8steps" | "j8plain"

/** Where a J8 run ended: when every job was completed, and the object's statement counts. */
export interface J8Progress {
  readonly handled: number
  readonly completedAt: number | null
  readonly counts: unknown
}

/** One JB action's run: its time, the `bulk` calls it took, the jobs changed, transactions and statements. */
export interface JBRun {
  readonly ms: number
  readonly calls: number
  readonly affected: number
  readonly transactions: number
  readonly statements: number
}

/** JB: a bulk cancel of `n` waiting jobs, then a bulk remove of them, `limit` jobs per call. */
export interface JBResult {
  readonly n: number
  readonly limit: number
  readonly cancel: JBRun
  readonly remove: JBRun
}

/** The RPC shape of the benchmark object (bench/workers/jobs.ts). */
export interface JobsTarget {
  reset(): void
  addJ1(start: number, count: number): Promise<void>
  waitJ1(n: number, timeoutMs: number): Promise<J1Progress>
  pauseJ1(paused: boolean): Promise<void>
  sqlFloor(n: number, batch: number): { readonly ms: number; readonly insertMs: number } | Promise<{ readonly ms: number; readonly insertMs: number }>
  addJ8(queue: J8Queue, start: number, count: number): Promise<void>
  waitJ8(n: number, timeoutMs: number): Promise<J8Progress>
  addJ9(queue: J9Queue, start: number, count: number): Promise<void>
  waitJ9(queue: J9Queue, n: number, timeoutMs: number): Promise<J9Progress>
  bulkJB(n: number, batch: number, limit: number): Promise<JBResult>
  addJ2(queue: J2Queue, count: number): Promise<void>
  waitJ2Starts(count: number, timeoutMs: number): Promise<ReadonlyArray<number>>
  stopJ2(queue: J2Queue): Promise<ReadonlyArray<number>>
  addJ2Keys(jobs: ReadonlyArray<string>): Promise<void>
  waitJ2Keys(count: number, timeoutMs: number): Promise<J2KeysRun>
  addJ3Delayed(due: ReadonlyArray<number>): Promise<void>
  addJ3Load(start: number, count: number): Promise<void>
  waitJ3(delayed: number, load: number, timeoutMs: number): Promise<{ samples: ReadonlyArray<J3Sample>; loadDone: number }>
}

export type JobsStubOf = (env: any, binding: string, name: string) => JobsTarget

interface Params {
  readonly binding?: string
  readonly name: string
  readonly n?: number
  readonly batch?: number
  readonly timeoutMs?: number
  readonly queue?: J2Queue
  /** J8: which of its queues. */
  readonly j8Queue?: J8Queue
  /** J9: which of its queues. */
  readonly j9Queue?: J9Queue
  readonly queued?: number
  readonly runMs?: number
  /** J2 with keys: jobs per key, keys besides the hot one, and the hot key's jobs. */
  readonly each?: number
  readonly keys?: number
  readonly hot?: number
  readonly jobs?: number
  readonly leadMs?: number
  readonly spreadMs?: number
  readonly seed?: number
  readonly loadBatch?: number
  readonly loadEveryMs?: number
  readonly load?: boolean
  /** JB: jobs per `bulk` call. */
  readonly limit?: number
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

/** xorshift32, as bench/jobs-peer/run.mjs: J3's due times are the same as the peers'. */
const randomFrom = (seed: number) => {
  let state = seed >>> 0 || 1
  return () => {
    state = (state ^ (state << 13)) >>> 0
    state = (state ^ (state >>> 17)) >>> 0
    state = (state ^ (state << 5)) >>> 0
    return state / 0x1_0000_0000
  }
}

const scenarios: Record<string, (stub: JobsTarget, p: Params) => Promise<unknown>> = {
  /**
   * J1/J4: `n` trivial jobs added in sequential `addBulk`s of `batch` while the queue (10 at a time)
   * drains them; clock from the first add to `counts()` saying all are completed.
   */
  async j1(stub, p) {
    const n = p.n ?? 10_000
    const batch = p.batch ?? 100
    await stub.reset()
    const t0 = Date.now()
    for (let i = 0; i < n; i += batch) await stub.addJ1(i, Math.min(batch, n - i))
    const addMs = Date.now() - t0
    const progress = await stub.waitJ1(n, p.timeoutMs ?? 300_000)
    const returnedAt = Date.now()
    const { counts, ...rest } = progress
    return {
      n,
      batch,
      addMs,
      ms: progress.completedAt === null ? null : progress.completedAt - t0,
      handledMs: progress.lastHandledAt === null ? null : progress.lastHandledAt - t0,
      firstStartMs: progress.firstStartAt === null ? null : progress.firstStartAt - t0,
      rpcMs: returnedAt - t0,
      ...rest,
      counts
    }
  },

  /**
   * J8: `n` jobs of ten pieces of work each, on `queue` (`j8steps`: each piece a durable step;
   * `j8plain`: the same pieces inline), added in sequential `addBulk`s of `batch`; clock from the first
   * add to `counts()` saying all are completed.
   */
  async j8(stub, p) {
    const n = p.n ?? 2_000
    const batch = p.batch ?? 100
    const queue: J8Queue = p.j8Queue ?? "j8steps"
    await stub.reset()
    const t0 = Date.now()
    for (let i = 0; i < n; i += batch) await stub.addJ8(queue, i, Math.min(batch, n - i))
    const progress = await stub.waitJ8(n, p.timeoutMs ?? 300_000)
    return { n, batch, queue, ms: progress.completedAt === null ? null : progress.completedAt - t0, ...progress }
  },

  /** J9: `n` trivial jobs in sequential `addBulk`s of `batch` on a batched queue or a plain one, to completion. */
  async j9(stub, p) {
    const n = p.n ?? 2_000
    const batch = p.batch ?? 100
    const queue: J9Queue = p.j9Queue ?? "j9batched"
    await stub.reset()
    const t0 = Date.now()
    for (let i = 0; i < n; i += batch) await stub.addJ9(queue, i, Math.min(batch, n - i))
    const progress = await stub.waitJ9(queue, n, p.timeoutMs ?? 300_000)
    return { n, batch, queue, ms: progress.completedAt === null ? null : progress.completedAt - t0, ...progress }
  },

  /** JB: a bulk cancel, then a bulk remove, of `n` waiting jobs (see `JobsBench.bulkJB`). */
  async jb(stub, p) {
    await stub.reset()
    return stub.bulkJB(p.n ?? 10_000, p.batch ?? 500, p.limit ?? 500)
  },

  /**
   * J1 split in two: the same adds into the paused queue (adding alone), then the drain of the
   * `n` pending jobs once it is resumed (running alone). Where J1's time goes, not a peer figure.
   */
  async j1split(stub, p) {
    const n = p.n ?? 10_000
    const batch = p.batch ?? 100
    await stub.pauseJ1(true)
    await stub.reset()
    const t0 = Date.now()
    for (let i = 0; i < n; i += batch) await stub.addJ1(i, Math.min(batch, n - i))
    const t1 = Date.now()
    await stub.pauseJ1(false)
    const progress = await stub.waitJ1(n, p.timeoutMs ?? 300_000)
    return {
      n,
      batch,
      addMs: t1 - t0,
      drainMs: progress.completedAt === null ? null : progress.completedAt - t1,
      firstStartAfterResumeMs: progress.firstStartAt === null ? null : progress.firstStartAt - t1,
      completed: progress.completed
    }
  },

  /** J1's statements alone on a copy of the jobs table (see `JobsBench.sqlFloor`), after a warm-up J1 run made the schema. */
  async j1floor(stub, p) {
    const n = p.n ?? 10_000
    const batch = p.batch ?? 100
    const floor = await stub.sqlFloor(n, batch)
    return { n, batch, ...floor }
  },

  /**
   * J2: `queued` jobs due now added at once to a rate-limited queue (the bucket starts full), then
   * `runMs` from the first start; every start time, then the queue is paused and emptied.
   */
  async j2(stub, p) {
    const queue = p.queue ?? "j2"
    const queued = p.queued ?? 200
    const runMs = p.runMs ?? 5_000
    await stub.reset()
    const t0 = Date.now()
    await stub.addJ2(queue, queued)
    const addMs = Date.now() - t0
    const [first] = await stub.waitJ2Starts(1, 10_000)
    if (first === undefined) throw new Error(`J2 ${queue}: no job started within 10 s`)
    await sleep(first + runMs + 100 - Date.now())
    const starts = await stub.stopJ2(queue)
    return { queue, limit: J2_LIMITS[queue], queued, runMs, addMs, starts }
  },

  /**
   * J2 with keys: one hot key with `hot` jobs, then `keys` other keys with `each` jobs, added at once
   * (the hot key's first); runs to the end. The shares of starts per key are counted over the starts
   * made while every key still had work waiting (up to the start of the first key's last job).
   */
  async j2keys(stub, p) {
    const each = p.each ?? 40
    const keys = p.keys ?? 9
    const hot = p.hot ?? each * 10
    await stub.reset()
    const jobs = [
      ...Array.from({ length: hot }, () => "hot"),
      ...Array.from({ length: keys }, (_, k) => Array.from({ length: each }, () => `k${k}`)).flat()
    ]
    const t0 = Date.now()
    await stub.addJ2Keys(jobs)
    const addMs = Date.now() - t0
    const run = await stub.waitJ2Keys(jobs.length, 60_000)
    const left = new Map<string, number>()
    for (const key of jobs) left.set(key, (left.get(key) ?? 0) + 1)
    const prefix = new Map<string, number>()
    let n = 0
    for (const key of run.starts) {
      n++
      prefix.set(key, (prefix.get(key) ?? 0) + 1)
      left.set(key, left.get(key)! - 1)
      if (left.get(key) === 0) break
    }
    const equal = n / left.size
    const shares = Object.fromEntries([...prefix].map(([key, count]) => [key, Math.round((count / n) * 1000) / 1000]))
    const worstDeviation = Math.max(...[...left.keys()].map((key) => Math.abs((prefix.get(key) ?? 0) - equal) / equal))
    return {
      limit: J2_KEYS,
      jobs: jobs.length,
      hot,
      each,
      keys: keys + 1,
      addMs,
      started: run.starts.length,
      mostRunningPerKey: run.mostRunningPerKey,
      mostRunning: run.mostRunning,
      fairWindow: n,
      shares,
      worstDeviation: Math.round(worstDeviation * 1000) / 1000,
      statementsPerJob: Math.round((run.counts.statements / jobs.length) * 100) / 100,
      transactionsPerJob: Math.round((run.counts.transactions / jobs.length) * 100) / 100
    }
  },

  /**
   * J3: `jobs` delayed jobs due `leadMs`..`leadMs + spreadMs` ahead (fixed seed), with `loadBatch`
   * immediate jobs every `loadEveryMs` on the same queue until the last is due (unless `load` is false).
   */
  async j3(stub, p) {
    const jobs = p.jobs ?? 64
    const leadMs = p.leadMs ?? 500
    const spreadMs = p.spreadMs ?? 2_000
    const loadBatch = p.loadBatch ?? 10
    const loadEveryMs = p.loadEveryMs ?? 100
    const load = p.load ?? true
    await stub.reset()
    const random = randomFrom(p.seed ?? 0x5eed)
    const now = Date.now()
    const due = Array.from({ length: jobs }, () => now + leadMs + Math.floor(random() * spreadMs))
    const end = Math.max(...due) + 200
    let loaded = 0
    const background = (async () => {
      while (load && Date.now() < end) {
        await stub.addJ3Load(loaded, loadBatch)
        loaded += loadBatch
        await sleep(loadEveryMs)
      }
    })()
    const addStart = Date.now()
    await stub.addJ3Delayed(due)
    const addedAt = Date.now()
    await background
    const { samples, loadDone } = await stub.waitJ3(jobs, loaded, 30_000)
    return {
      jobs,
      addMs: addedAt - addStart,
      // Due before the add returned: such a job could not start on time (none with the default lead).
      dueBeforeAdded: due.filter((at) => at < addedAt).length,
      background: load ? { jobs: loaded, done: loadDone, batch: loadBatch, everyMs: loadEveryMs } : null,
      samples
    }
  }
}

/** The worker's `fetch`: `POST /<scenario>` with JSON params, answers JSON. */
export const makeJobsDriver = (stubOf: JobsStubOf) => ({
  async fetch(request: Request, env: unknown): Promise<Response> {
    const scenario = scenarios[new URL(request.url).pathname.slice(1)]
    if (scenario === undefined) return new Response("unknown scenario", { status: 404 })
    const params = (await request.json()) as Params
    try {
      return Response.json(await scenario(stubOf(env, params.binding ?? "TARGET", params.name), params))
    } catch (error) {
      const message = error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : String(error)
      return Response.json({ error: message }, { status: 500 })
    }
  }
})
