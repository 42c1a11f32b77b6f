/**
 * Job queues beyond one object as a benchmark target (J5–J7), built the way the README shows:
 * `DurabilityScheduler` + `DurabilityJobs`, the class handing router and consumer calls to
 * `DurabilityJobs.serve` (`jobsCall`), and this worker's own `queue` export as the Queues consumer
 * (`DurabilityJobs.consumer`). Every handler does trivial work.
 * - `j5`: a transport queue (`processing: { queue: env.J5_QUEUE }`), run by the consumer below.
 * - `j6`: an inline queue (concurrency 10, as J1), filled directly or through `DurabilityJobs.router`.
 * - `j7`: an external queue (`leaseMs` 1 000) whose leases the object takes and never settles.
 * `JobsExternalBenchLive` is the same with `liveTimers: true`.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  DurabilityJobs,
  type DurabilityJobsInstance,
  DurabilityScheduler,
  type DurableJob
} from "../../src/index.js"
import { Counter, countingContext } from "./counting.js"
import {
  type ConsumerStats,
  type J6Progress,
  type J7Run,
  type JobsExternalTarget,
  makeJobsExternalDriver
} from "./jobsExternalDriver.js"

/** Jobs of `j6` running at once, as J1's queue. */
const CONCURRENCY = 10
/** J7's lease: the shortest the library takes. */
const J7_LEASE_MS = 1_000
/** A lease the J7 probe takes once a job is leasable again: long enough never to come back within the run. */
const PROBE_LEASE_MS = 600_000

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

interface Env {
  readonly TARGET: DurableObjectNamespace
  readonly TARGET_LIVE: DurableObjectNamespace
  readonly J5_QUEUE: Queue
}

/** `j6`'s handlers: how many returned, and a wake-up for the one waiter (no promise or timer per job). */
class J6Tracker {
  handled = 0
  lastHandledAt: number | null = null
  #waiter: { readonly n: number; readonly resume: () => void } | undefined

  handle(): void {
    this.handled++
    this.lastHandledAt = Date.now()
    if (this.#waiter !== undefined && this.handled >= this.#waiter.n) this.#waiter.resume()
  }

  until(n: number, timeoutMs: number): Promise<void> {
    if (this.handled >= n) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.#waiter?.resume(), timeoutMs)
      this.#waiter = {
        n,
        resume: () => {
          clearTimeout(timer)
          this.#waiter = undefined
          resolve()
        }
      }
    })
  }
}

const queues = (env: Env, tracker: J6Tracker) => ({
  j5: { processing: { queue: env.J5_QUEUE } },
  j6: {
    concurrency: CONCURRENCY,
    handler: (_job: DurableJob<{ readonly i: number }>) => tracker.handle()
  },
  j7: { processing: "external" as const, leaseMs: J7_LEASE_MS }
})

export class JobsExternalBench extends DurableObject<Env> implements JobsExternalTarget {
  static readonly liveTimers: boolean = false
  readonly scheduler: DurabilityScheduler
  readonly jobs: DurabilityJobsInstance<ReturnType<typeof queues>>
  readonly tracker = new J6Tracker()
  // Every statement counted (as J1–J4's object): J5's statements per job; J6's one object is J1's.
  readonly counter = new Counter()

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.scheduler = new DurabilityScheduler({
      context: countingContext(ctx, this.counter),
      liveTimers: (this.constructor as typeof JobsExternalBench).liveTimers
    })
    this.jobs = new DurabilityJobs({ scheduler: this.scheduler, queues: queues(env, this.tracker) })
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  /** The router's and the consumer's calls. */
  jobsCall(call: unknown): Promise<unknown> {
    return DurabilityJobs.serve(this.jobs, call)
  }

  /** J5: `count` trivial jobs in one `addBulk`. */
  async addJ5(start: number, count: number): Promise<void> {
    await this.jobs.j5.addBulk(Array.from({ length: count }, (_, k) => ({ payload: { i: start + k } })))
  }

  /**
   * J5: polls `counts()` every `everyMs` until `n` are completed; when that was first seen, how many
   * polls it took, and the object's statements over the run (the polls' own included).
   */
  async waitJ5(n: number, everyMs: number, timeoutMs: number) {
    const deadline = Date.now() + timeoutMs
    let polls = 0
    for (;;) {
      polls++
      const counts = await this.jobs.j5.counts()
      if (counts.completed >= n) return { completedAt: Date.now(), polls, counts, statements: this.counter.snapshot() }
      if (Date.now() >= deadline) return { completedAt: null, polls, counts, statements: this.counter.snapshot() }
      await sleep(everyMs)
    }
  }

  /** J6 direct: `count` jobs with ids `first..` in one `addBulk` on this object's queue. */
  async addJ6(first: number, count: number): Promise<void> {
    await this.jobs.j6.addBulk(Array.from({ length: count }, (_, k) => ({ id: String(first + k), payload: { i: first + k } })))
  }

  /** J6: waits until `n` handlers returned, then until `counts()` says `n` are completed (their settles follow the handlers). */
  async waitJ6(n: number, timeoutMs: number): Promise<J6Progress> {
    const deadline = Date.now() + timeoutMs
    await this.tracker.until(n, timeoutMs)
    let completed = 0
    const progress = (completedAt: number | null): J6Progress => {
      const counts = this.counter.snapshot()
      return {
        completedAt,
        completed,
        handled: this.tracker.handled,
        statements: Object.values(counts.statements).reduce((sum, one) => sum + one.n, 0),
        transactions: counts.transactions,
        alarmWrites: counts.setAlarm + counts.deleteAlarm
      }
    }
    while (this.tracker.handled >= n && Date.now() < deadline) {
      completed = (await this.jobs.j6.counts()).completed
      if (completed >= n) return progress(Date.now())
      await sleep(1)
    }
    return progress(null)
  }

  /**
   * J7: `groups` leases of `perGroup` jobs each, `everyMs` apart, every one for `leaseMs` (default
   * the queue's, `J7_LEASE_MS`) and never settled; then a worker's loop (`lease`, 1 ms pause) until
   * every job was leased again. A job is leasable again only once the scheduler reclaimed its expired
   * lease, so the first loop pass that gets it bounds the reclaim from above.
   */
  async j7(groups: number, perGroup: number, everyMs: number, timeoutMs: number, leaseMs = J7_LEASE_MS): Promise<J7Run> {
    const total = groups * perGroup
    await this.jobs.j7.addBulk(Array.from({ length: total }, (_, i) => ({ id: String(i), payload: { i } })))
    const leasedUntil = new Map<string, number>()
    for (let group = 0; group < groups; group++) {
      if (group > 0) await sleep(everyMs)
      const leases = await this.jobs.j7.lease({ limit: perGroup, leaseMs, workerId: `holder-${group}` })
      for (const lease of leases) leasedUntil.set(lease.id, lease.leaseUntil)
    }
    if (leasedUntil.size !== total) throw new Error(`J7: ${leasedUntil.size} of ${total} jobs leased`)
    const reclaimedBy = new Map<string, number>()
    const deadline = Math.max(...leasedUntil.values()) + timeoutMs
    let passes = 0
    let early = 0
    while (reclaimedBy.size < total && Date.now() < deadline) {
      await sleep(1)
      passes++
      const leases = await this.jobs.j7.lease({ limit: 100, leaseMs: PROBE_LEASE_MS, workerId: "probe" })
      // Once the lease call returned: an upper bound of the reclaim.
      const at = Date.now()
      for (const lease of leases) {
        if (!reclaimedBy.has(lease.id)) reclaimedBy.set(lease.id, at)
        // Leasable before its lease ended would be a fencing bug, not latency.
        if (at < leasedUntil.get(lease.id)!) early++
      }
    }
    const samples = [...reclaimedBy].map(([id, at]) => ({ leasedUntil: leasedUntil.get(id)!, reclaimedBy: at }))
    const info = await this.jobs.j7.get("0")
    return { total, samples, passes, early, firstAttempt: info?.attempt ?? null }
  }
}

export class JobsExternalBenchLive extends JobsExternalBench {
  static override readonly liveTimers: boolean = true
}

const consume = DurabilityJobs.consumer<Env>({
  namespace: (env) => env.TARGET,
  handlers: { j5: (job) => job.attempt }
})

/** The batches Queues delivered to this worker (the driver and the consumer share the module: one isolate). */
const consumer: ConsumerStats = { batches: 0, messages: 0, largest: 0 }

export default {
  ...makeJobsExternalDriver<Env>({
    consumer,
    target: (env, binding, name) => {
      const namespace = binding === "TARGET_LIVE" ? env.TARGET_LIVE : env.TARGET
      return namespace.get(namespace.idFromName(name)) as unknown as JobsExternalTarget
    },
    router: (env, name, shards) => DurabilityJobs.router({ namespace: env.TARGET, shards, name })
  }),
  queue: (batch: MessageBatch, env: Env) => {
    consumer.batches++
    consumer.messages += batch.messages.length
    consumer.largest = Math.max(consumer.largest, batch.messages.length)
    return consume(batch, env)
  }
}
