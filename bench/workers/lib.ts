/**
 * This library as a benchmark target: one object per run, built the way the README shows
 * (`DurabilityScheduler` + `Durability` + `DurabilityAlarms`, default options), over a counted
 * `ctx.storage`. `LibBenchLive` is the same with `liveTimers: true`.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  DurabilityScheduler,
  type DurableAlarmInfo,
  type DurableCall
} from "../../src/index.js"
import { Counter, countingContext } from "./counting.js"
import { ALARM_NAMES, BACKLOG_DELAY_MS, type BenchTarget, makeDriver, Tracker } from "./driver.js"

class BacklogError extends Error {
  override readonly name = "BacklogError"
}

export class LibBench extends DurableObject<Record<string, unknown>> implements BenchTarget {
  static readonly liveTimers: boolean = false
  readonly counter = new Counter()
  readonly tracker = new Tracker()
  readonly scheduler: DurabilityScheduler
  readonly ops: any
  readonly alarms: any

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env)
    const context = countingContext(ctx, this.counter)
    this.scheduler = new DurabilityScheduler({
      context,
      liveTimers: (this.constructor as typeof LibBench).liveTimers
    })
    this.ops = new Durability({
      scheduler: this.scheduler,
      handlers: {
        tick: (_call: DurableCall<{ n: number }>) => {
          this.tracker.ran()
          return null
        },
        // The backlog: each call fails its first attempt and waits an hour for its retry.
        backlog: (_call: DurableCall<{ n: number }>): null => {
          throw new BacklogError("backlog item: retried in an hour")
        }
      },
      methods: { backlog: { retries: { maxAttempts: 2, delay: () => BACKLOG_DELAY_MS } } }
    })
    const handler = (info: DurableAlarmInfo) => {
      this.tracker.fired(info.name, info.scheduledTime)
    }
    this.alarms = new DurabilityAlarms({
      scheduler: this.scheduler,
      handlers: Object.fromEntries(ALARM_NAMES.map((name) => [name, handler]))
    })
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  reset(): void {
    this.counter.reset()
    this.tracker.reset()
  }

  async register(start: number, count: number): Promise<void> {
    for (let i = start; i < start + count; i++) await this.ops.tick({ id: `op-${i}`, payload: { n: i } })
  }

  async registerBatch(start: number, count: number): Promise<void> {
    const calls = Array.from({ length: count }, (_, i) => ({ id: `op-${start + i}`, payload: { n: start + i } }))
    await this.ops.tick.many(calls)
  }

  waitDone(target: number, timeoutMs: number) {
    return this.tracker.waitDone(target, timeoutMs)
  }

  async scheduleAlarms(items: ReadonlyArray<{ readonly name: string; readonly at: number }>): Promise<void> {
    for (const { name, at } of items) await this.alarms[name](at)
  }

  waitAlarms(target: number, timeoutMs: number) {
    return this.tracker.waitAlarms(target, timeoutMs)
  }

  alarmSamples() {
    return this.tracker.alarmSamples()
  }

  async seed(start: number, count: number): Promise<void> {
    for (let i = start; i < start + count; i++) await this.ops.backlog({ id: `backlog-${i}`, payload: { n: i } })
  }

  /** Waits (uncounted reads) until `count` backlog calls sit pending with their retry an hour away. */
  async seeded(count: number, timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const row = this.ctx.storage.sql
        .exec(
          `SELECT COUNT(*) AS n FROM durability_calls
           WHERE operation = 'backlog' AND status = 'pending' AND attempt = 1 AND next_attempt_at > ?`,
          Date.now() + BACKLOG_DELAY_MS / 2
        )
        .one()
      const n = Number(row.n)
      if (n >= count || Date.now() > deadline) return n
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  counts() {
    return this.counter.snapshot()
  }
}

export class LibBenchLive extends LibBench {
  static override readonly liveTimers: boolean = true
}

export default makeDriver((env: any, binding, name) => env[binding].get(env[binding].idFromName(name)))
