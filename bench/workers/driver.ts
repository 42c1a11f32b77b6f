/**
 * The part every benchmark worker shares: the progress tracker its object uses, the RPC shape the
 * library, peer and floor objects all implement, and the `fetch` handler that drives a scenario
 * against one object and returns its figures as JSON. Times are `Date.now()` inside workerd, which
 * advances across I/O (every RPC and timer here is I/O).
 */
import type { Counts } from "./counting.js"

/** The names a benchmark object can schedule as named alarms (B3). */
export const ALARM_NAMES: ReadonlyArray<string> = Array.from({ length: 64 }, (_, i) => `a${i}`)

/** The backlog's due time: far enough that no seeded row becomes due during a run. */
export const BACKLOG_DELAY_MS = 3_600_000

export interface Progress {
  readonly done: number
  readonly firstAt: number | null
  readonly lastAt: number | null
}

export interface AlarmSample {
  readonly name: string
  readonly scheduledAt: number
  readonly startedAt: number
}

/** What each benchmark object (library, peer, floor) implements, one RPC method each. */
export interface BenchTarget {
  /** Clears the counters and samples (after the instance is warm). */
  reset(): void
  /** Registers `count` operations due now, ids `op-<start + i>`, one after another. */
  register(start: number, count: number): Promise<void>
  /** The same calls through the implementation's batch API (one transaction), where it has one. */
  registerBatch?(start: number, count: number): Promise<void>
  /** Resolves once `target` operations have run (or the timeout passed). */
  waitDone(target: number, timeoutMs: number): Promise<Progress>
  /** Schedules each named alarm at its time. */
  scheduleAlarms(items: ReadonlyArray<{ readonly name: string; readonly at: number }>): Promise<void>
  /** Resolves once `target` named alarms have started (or the timeout passed). */
  waitAlarms(target: number, timeoutMs: number): Promise<number>
  alarmSamples(): ReadonlyArray<AlarmSample>
  /** Adds `count` pending work items not due for an hour (B4/B5 backlog), through the implementation's API. */
  seed(start: number, count: number): Promise<void>
  /** Resolves once `count` backlog items are pending and idle; returns how many are. */
  seeded(count: number, timeoutMs: number): Promise<number> | number
  counts(): Counts
}

export class Tracker {
  private done = 0
  private firstAt: number | null = null
  private lastAt: number | null = null
  private samples: Array<AlarmSample> = []
  private waiters: Array<() => void> = []

  ran(): void {
    const now = Date.now()
    this.done++
    this.firstAt ??= now
    this.lastAt = now
    this.wake()
  }

  fired(name: string, scheduledAt: number): void {
    this.samples.push({ name, scheduledAt, startedAt: Date.now() })
    this.wake()
  }

  reset(): void {
    this.done = 0
    this.firstAt = this.lastAt = null
    this.samples = []
  }

  progress(): Progress {
    return { done: this.done, firstAt: this.firstAt, lastAt: this.lastAt }
  }

  alarmSamples(): ReadonlyArray<AlarmSample> {
    return this.samples
  }

  private wake(): void {
    const waiters = this.waiters
    this.waiters = []
    for (const wake of waiters) wake()
  }

  private async until(ready: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!ready() && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(1_000, Math.max(1, deadline - Date.now())))
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  async waitDone(target: number, timeoutMs: number): Promise<Progress> {
    await this.until(() => this.done >= target, timeoutMs)
    return this.progress()
  }

  async waitAlarms(target: number, timeoutMs: number): Promise<number> {
    await this.until(() => this.samples.length >= target, timeoutMs)
    return this.samples.length
  }
}

export type StubOf = (env: any, binding: string, name: string) => Promise<BenchTarget> | BenchTarget

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

interface Params {
  readonly binding?: string
  readonly name: string
  readonly n?: number
  readonly batch?: number
  readonly start?: number
  readonly count?: number
  readonly chunk?: number
  readonly rounds?: number
  readonly alarms?: number
  readonly leadMs?: number
  readonly spreadMs?: number
  readonly loadBatch?: number
  readonly loadEveryMs?: number
  readonly timeoutMs?: number
  /** B1: "batch" registers each RPC batch through the implementation's batch API. */
  readonly api?: "single" | "batch"
}

const scenarios: Record<string, (stub: BenchTarget, p: Params) => Promise<unknown>> = {
  /** Creates the instance and clears its counters. */
  async warm(stub) {
    await stub.reset()
    return { ok: true }
  },

  /** B1/B2/B5: `n` operations registered in RPC batches, then drained to completion. */
  async drain(stub, p) {
    const n = p.n ?? 1_000
    const batch = p.batch ?? 100
    const timeoutMs = p.timeoutMs ?? 300_000
    const before = (await stub.waitDone(0, 0)).done
    await stub.reset()
    const start = p.start ?? 0
    const t0 = Date.now()
    const api = p.api ?? "single"
    for (let i = 0; i < n; i += batch) {
      if (api === "batch") await stub.registerBatch!(start + i, Math.min(batch, n - i))
      else await stub.register(start + i, Math.min(batch, n - i))
    }
    const registeredAt = Date.now()
    const progress = await stub.waitDone(n, timeoutMs)
    const t1 = Date.now()
    const counts = await stub.counts()
    return {
      n,
      batch,
      api,
      before,
      done: progress.done,
      registerMs: registeredAt - t0,
      totalMs: t1 - t0,
      drainAfterRegisterMs: t1 - registeredAt,
      firstRunAfterStartMs: progress.firstAt === null ? null : progress.firstAt - t0,
      counts
    }
  },

  /**
   * B3: rounds of named alarms due within the next seconds, under a background load of operations.
   * Every alarm must be scheduled before it is due: the lead grows with how long scheduling a round
   * takes here, and a sample whose due time passed before its round's scheduling call returned is
   * dropped (counted in `scheduledLate`), so only due->start is measured.
   */
  async latency(stub, p) {
    const rounds = p.rounds ?? 3
    const alarms = Math.min(p.alarms ?? ALARM_NAMES.length, ALARM_NAMES.length)
    const spreadMs = p.spreadMs ?? 2_000
    const loadBatch = p.loadBatch ?? 10
    const loadEveryMs = p.loadEveryMs ?? 25
    await stub.reset()
    const names = ALARM_NAMES.slice(0, alarms)
    // How long one round's scheduling call takes (the same names, an hour away: replaced below).
    const probe = Date.now()
    await stub.scheduleAlarms(names.map((name) => ({ name, at: probe + BACKLOG_DELAY_MS })))
    const scheduleMs = Date.now() - probe
    const leadMs = Math.max(p.leadMs ?? 500, 2 * scheduleMs + 200)
    let loaded = 0
    const windows: Array<{ readonly from: number; readonly to: number; readonly scheduledBy: number }> = []
    for (let round = 0; round < rounds; round++) {
      const now = Date.now()
      const items = names.map((name, i) => ({ name, at: now + leadMs + Math.floor((i * spreadMs) / alarms) }))
      const end = now + leadMs + spreadMs + 200
      const load = (async () => {
        while (Date.now() < end) {
          await stub.register(1_000_000 * (round + 1) + loaded, loadBatch)
          loaded += loadBatch
          await sleep(loadEveryMs)
        }
      })()
      await stub.scheduleAlarms(items)
      windows.push({ from: items[0]!.at, to: items[items.length - 1]!.at, scheduledBy: Date.now() })
      await load
      await stub.waitAlarms(alarms * (round + 1), 10_000)
    }
    const progress = await stub.waitDone(loaded, 60_000)
    const all = await stub.alarmSamples()
    const samples = all.filter((sample) => {
      const window = windows.find((w) => sample.scheduledAt >= w.from && sample.scheduledAt <= w.to)
      return window !== undefined && sample.scheduledAt >= window.scheduledBy
    })
    return {
      rounds,
      alarms,
      leadMs,
      scheduleMs,
      loaded,
      loadDone: progress.done,
      scheduledLate: all.length - samples.length,
      samples
    }
  },

  /** B4/B5: adds `count` backlog items (pending, due in an hour) from `start`, in RPC chunks; does not wait for them. */
  async seed(stub, p) {
    const count = p.count ?? 1_000
    const chunk = p.chunk ?? 500
    const start = p.start ?? 0
    const t0 = Date.now()
    for (let i = 0; i < count; i += chunk) await stub.seed(start + i, Math.min(chunk, count - i))
    return { count, ms: Date.now() - t0 }
  },

  /** Waits until `count` backlog items sit pending and idle. */
  async seeded(stub, p) {
    const t0 = Date.now()
    const pending = await stub.seeded(p.count ?? 0, p.timeoutMs ?? 120_000)
    return { pending, ms: Date.now() - t0 }
  }
}

/** The worker's `fetch`: `POST /<scenario>` with JSON params, answers JSON. */
export const makeDriver = (stubOf: StubOf) => ({
  async fetch(request: Request, env: unknown): Promise<Response> {
    const scenario = scenarios[new URL(request.url).pathname.slice(1)]
    if (scenario === undefined) return new Response("unknown scenario", { status: 404 })
    const params = (await request.json()) as Params
    try {
      const stub = await stubOf(env, params.binding ?? "TARGET", params.name)
      return Response.json(await scenario(stub, params))
    } catch (error) {
      const message = error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : String(error)
      return Response.json({ error: message }, { status: 500 })
    }
  }
})
