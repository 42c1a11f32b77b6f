/**
 * The J5–J7 scenarios' `fetch` handler: drives fresh `JobsExternalBench` objects (bench/workers/
 * jobsExternal.ts) over RPC, or through `DurabilityJobs.router` as Worker code would, and returns the
 * raw figures (times are `Date.now()` inside workerd; bench/run.mjs derives rates and percentiles).
 */
import type { Counts } from "./counting.js"

export interface J6Progress {
  /** When `counts()` first said every job of the object was completed (null: not within the timeout). */
  readonly completedAt: number | null
  readonly completed: number
  readonly handled: number
  /** The object's SQL statements, transactions and alarm writes over its life (the waits' counts() included). */
  readonly statements: number
  readonly transactions: number
  readonly alarmWrites: number
}

export interface J7Sample {
  /** The lease's end the object returned. */
  readonly leasedUntil: number
  /** When the probe's `lease` call that got the job again had returned (an upper bound of the reclaim). */
  readonly reclaimedBy: number
}

export interface J7Run {
  readonly total: number
  readonly samples: ReadonlyArray<J7Sample>
  /** The probe's `lease` calls. */
  readonly passes: number
  /** Jobs leased again before their lease ended (must be 0). */
  readonly early: number
  /** The attempt of job "0" after the run: 2 (its expired lease counted one, the probe's lease the next). */
  readonly firstAttempt: number | null
}

/** The RPC shape of the benchmark object. */
export interface JobsExternalTarget {
  addJ5(start: number, count: number): Promise<void>
  waitJ5(n: number, everyMs: number, timeoutMs: number): Promise<{ completedAt: number | null; polls: number; counts: Record<string, number>; statements: Counts }>
  addJ6(first: number, count: number): Promise<void>
  waitJ6(n: number, timeoutMs: number): Promise<J6Progress>
  j7(groups: number, perGroup: number, everyMs: number, timeoutMs: number, leaseMs?: number): Promise<J7Run>
}

/** What J6 uses of `DurabilityJobs.router`. */
export interface J6Router {
  shardOf(key: string): number
  queue(name: "j6"): { addBulk(jobs: ReadonlyArray<{ readonly id: string; readonly payload: unknown }>): Promise<unknown> }
}

/** What the worker's Queues consumer was given, counted as it comes. */
export interface ConsumerStats {
  batches: number
  messages: number
  largest: number
}

export interface Targets<Env> {
  readonly consumer: ConsumerStats
  readonly target: (env: Env, binding: string, name: string) => JobsExternalTarget
  /** Shard `i` is the object named `${name}:${i}` of the `TARGET` class. */
  readonly router: (env: Env, name: string, shards: number) => J6Router
}

interface Params {
  readonly binding?: string
  readonly name: string
  readonly n?: number
  readonly batch?: number
  readonly everyMs?: number
  readonly timeoutMs?: number
  readonly variant?: "direct" | "router"
  readonly shards?: number
  readonly groups?: number
  readonly perGroup?: number
  readonly leaseMs?: number
}

type Scenario<Env> = (env: Env, targets: Targets<Env>, p: Params) => Promise<unknown>

const jobsOf = (first: number, count: number) =>
  Array.from({ length: count }, (_, k) => ({ id: String(first + k), payload: { i: first + k } }))

const scenarios: Record<string, Scenario<any>> = {
  /**
   * J5: `n` trivial jobs added to the transport queue in sequential `addBulk`s of `batch`; the object
   * leases each due job and sends its envelope, the Queues consumer starts, runs and completes it over
   * RPC. Clock from the first add to `counts()` (polled in the object every `everyMs`) saying all are completed.
   */
  async j5(env, targets, p) {
    const n = p.n ?? 2_000
    const batch = p.batch ?? 100
    const stub = targets.target(env, "TARGET", p.name)
    const before = { ...targets.consumer }
    const t0 = Date.now()
    for (let i = 0; i < n; i += batch) await stub.addJ5(i, Math.min(batch, n - i))
    const addMs = Date.now() - t0
    const done = await stub.waitJ5(n, p.everyMs ?? 10, p.timeoutMs ?? 300_000)
    const batches = targets.consumer.batches - before.batches
    const messages = targets.consumer.messages - before.messages
    return {
      n,
      batch,
      addMs,
      ms: done.completedAt === null ? null : done.completedAt - t0,
      polls: done.polls,
      counts: done.counts,
      statements: done.statements,
      // Over the whole run (a late duplicate delivery of an earlier run would count here too).
      consumer: { batches, messages, meanBatch: batches === 0 ? null : messages / batches, largestEver: targets.consumer.largest }
    }
  },

  /**
   * J6: `n` trivial jobs into the inline queue `j6` (concurrency 10 per object) in sequential bulks
   * of `batch`: `direct` calls one object's `addBulk`; `router` goes through `DurabilityJobs.router`
   * over `shards` objects (each bulk split by shard, one call per shard). Clock from the first add
   * to every object holding jobs saying all of its jobs are completed.
   */
  async j6(env, targets, p) {
    const n = p.n ?? 2_000
    const batch = p.batch ?? 100
    const variant = p.variant ?? "direct"
    const shards = variant === "direct" ? 1 : p.shards ?? 16
    const timeoutMs = p.timeoutMs ?? 300_000
    const t0 = Date.now()
    let waits: Array<Promise<J6Progress>>
    if (variant === "direct") {
      const stub = targets.target(env, "TARGET", p.name)
      for (let i = 0; i < n; i += batch) await stub.addJ6(i, Math.min(batch, n - i))
      waits = [stub.waitJ6(n, timeoutMs)]
    } else {
      const router = targets.router(env, p.name, shards)
      const queue = router.queue("j6")
      for (let i = 0; i < n; i += batch) await queue.addBulk(jobsOf(i, Math.min(batch, n - i)))
      const expected = new Map<number, number>()
      for (let i = 0; i < n; i++) {
        const shard = router.shardOf(String(i))
        expected.set(shard, (expected.get(shard) ?? 0) + 1)
      }
      waits = [...expected].map(([shard, count]) => targets.target(env, "TARGET", `${p.name}:${shard}`).waitJ6(count, timeoutMs))
    }
    const addMs = Date.now() - t0
    const progress = await Promise.all(waits)
    const finished = progress.every((one) => one.completedAt !== null)
    return {
      variant,
      shards,
      objectsWithJobs: progress.length,
      n,
      batch,
      addMs,
      ms: finished ? Math.max(...progress.map((one) => one.completedAt!)) - t0 : null,
      completed: progress.reduce((sum, one) => sum + one.completed, 0),
      statements: progress.reduce((sum, one) => sum + one.statements, 0),
      transactions: progress.reduce((sum, one) => sum + one.transactions, 0),
      alarmWrites: progress.reduce((sum, one) => sum + one.alarmWrites, 0)
    }
  },

  /** J7: see `JobsExternalBench.j7` (the run is inside the object: its leases, their expiry, the probe). */
  async j7(env, targets, p) {
    const stub = targets.target(env, p.binding ?? "TARGET", p.name)
    return stub.j7(p.groups ?? 20, p.perGroup ?? 10, p.everyMs ?? 37, p.timeoutMs ?? 10_000, p.leaseMs ?? 1_000)
  }
}

/** The worker's `fetch`: `POST /<scenario>` with JSON params, answers JSON. */
export const makeJobsExternalDriver = <Env>(targets: Targets<Env>) => ({
  async fetch(request: Request, env: Env): Promise<Response> {
    const scenario = scenarios[new URL(request.url).pathname.slice(1)]
    if (scenario === undefined) return new Response("unknown scenario", { status: 404 })
    const params = (await request.json()) as Params
    try {
      return Response.json(await scenario(env, targets, params))
    } catch (error) {
      const message = error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : String(error)
      return Response.json({ error: message }, { status: 500 })
    }
  }
})
