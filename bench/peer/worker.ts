/**
 * The peer: Cloudflare's Agents SDK scheduler (`this.schedule(...)`, agents@0.21.0) as a benchmark
 * target, over the same counted `ctx.storage` and the same driver as the library and the floor.
 * Stubs come from `getAgentByName` (agents 0.21 needs its `setName` step on this workerd).
 */
import { Agent, getAgentByName } from "agents"
import { Counter, countingContext } from "../workers/counting.js"
import { BACKLOG_DELAY_MS, type BenchTarget, makeDriver, Tracker } from "../workers/driver.js"

export class PeerBench extends Agent<Record<string, unknown>> implements BenchTarget {
  readonly counter = new Counter()
  readonly tracker = new Tracker()

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env)
    // The runtime's base class wants the real state; Agent reads `this.ctx` at each call.
    Object.defineProperty(this, "ctx", { value: countingContext(ctx, this.counter), configurable: true })
  }

  reset(): void {
    this.counter.reset()
    this.tracker.reset()
  }

  async register(start: number, count: number): Promise<void> {
    for (let i = start; i < start + count; i++) await this.schedule(0, "tick", { n: i })
  }

  tick(_payload: { n: number }): void {
    this.tracker.ran()
  }

  waitDone(target: number, timeoutMs: number) {
    return this.tracker.waitDone(target, timeoutMs)
  }

  async scheduleAlarms(items: ReadonlyArray<{ readonly name: string; readonly at: number }>): Promise<void> {
    for (const { name, at } of items) await this.schedule(new Date(at), "fire", { name, at })
  }

  fire(payload: { name: string; at: number }): void {
    this.tracker.fired(payload.name, payload.at)
  }

  waitAlarms(target: number, timeoutMs: number) {
    return this.tracker.waitAlarms(target, timeoutMs)
  }

  alarmSamples() {
    return this.tracker.alarmSamples()
  }

  async seed(start: number, count: number): Promise<void> {
    for (let i = start; i < start + count; i++) await this.schedule(BACKLOG_DELAY_MS / 1000, "later", { n: i })
  }

  later(_payload: { n: number }): void {}

  seeded(count: number): number {
    const row = this.ctx.storage.sql
      .exec<{ n: number }>("SELECT COUNT(*) AS n FROM cf_agents_schedules WHERE callback = 'later'")
      .one()
    return Math.min(count, row.n)
  }

  counts() {
    return this.counter.snapshot()
  }
}

export default makeDriver((env: any, binding, name) => getAgentByName(env[binding], name) as any)
