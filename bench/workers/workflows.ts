/**
 * This library's workflows as the workflow benchmarks' target (W1–W4): `DurabilityWorkflows` in one
 * object per run, built as the README will show it (`DurabilityScheduler` + `DurabilityWorkflows`,
 * default options), over a counted `ctx.storage`, with the same three workflow bodies as the peer
 * (bench/workers/workflowsPeer.ts) and the shared driver (bench/workers/workflowsDriver.ts).
 *
 * The handles `create` answered are kept (the driver reads them); `get(id)` reads any other.
 */
import { DurableObject } from "cloudflare:workers"
import { type AlarmInvocationInfo, DurabilityScheduler, DurabilityWorkflows } from "../../src/index.js"
import { Counter, countingContext } from "./counting.js"
import {
  EVENT_TYPE,
  type InstanceStatus,
  type Kind,
  makeWorkflowsDriver,
  type SleeperOutput,
  type TenOutput,
  type WaiterOutput,
  type WorkflowsTarget
} from "./workflowsDriver.js"

/** A handle as `create` answers it (the announced API). */
interface Handle {
  readonly id: string
  status(): Promise<{ readonly status: string; readonly output?: unknown; readonly error?: unknown }>
  sendEvent(event: { readonly type: string; readonly payload: unknown }): Promise<void>
}

export class WorkflowsBench extends DurableObject<Record<string, unknown>> {
  readonly counter = new Counter()
  readonly scheduler: DurabilityScheduler
  readonly workflows: any
  /** The driver's handles (W1–W3 and W4's probes; never W4's background sleepers). */
  private readonly handles = new Map<string, Handle>()

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env)
    this.scheduler = new DurabilityScheduler({ context: countingContext(ctx, this.counter), liveTimers: this.liveTimers })
    this.workflows = new DurabilityWorkflows({
      scheduler: this.scheduler,
      workflows: {
        ten: async (_event: any, step: any): Promise<TenOutput> => {
          for (let i = 0; i < 10; i++) await step.do(`s${i}`, async () => i)
          return { doneAt: Date.now() }
        },
        sleeper: async (event: any, step: any): Promise<SleeperOutput> => {
          const startedAt: number = await step.do("start", async () => Date.now())
          const sleepAt = Date.now()
          await step.sleep("nap", event.payload.ms)
          return { startedAt, sleepAt, wokeAt: Date.now(), ms: event.payload.ms }
        },
        waiter: async (_event: any, step: any): Promise<WaiterOutput> => {
          const armedAt: number = await step.do("armed", async () => Date.now())
          const event = await step.waitForEvent("wait", { type: EVENT_TYPE, timeout: "1 hour" })
          return { armedAt, resumedAt: Date.now(), payload: event?.payload }
        }
      }
    })
  }

  /** Read by the constructor (a getter, so a subclass's answer is there before its fields are). */
  protected get liveTimers(): boolean {
    return false
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  async create(kind: Kind, items: ReadonlyArray<{ id: string; params: Record<string, unknown> }>, background: boolean): Promise<void> {
    for (const { id, params } of items) {
      const handle: Handle = await this.workflows[kind].create({ id, params })
      if (!background) this.handles.set(id, handle)
    }
  }

  /** A handle the driver created, else the instance read by id. */
  private handle(kind: Kind, id: string): Promise<Handle> | Handle {
    return this.handles.get(id) ?? this.workflows[kind].get(id)
  }

  async statuses(kind: Kind, ids: ReadonlyArray<string>): Promise<ReadonlyArray<InstanceStatus>> {
    const out: Array<InstanceStatus> = []
    for (const id of ids) {
      const s = await (await this.handle(kind, id)).status()
      out.push({ id, status: s.status, output: s.output ?? null, error: s.error ?? null, armed: s.status === "waiting" })
    }
    return out
  }

  async sendEvent(kind: Kind, id: string, event: { type: string; payload: unknown }): Promise<void> {
    await (await this.handle(kind, id)).sendEvent(event)
  }

  reset(): void {
    this.counter.reset()
  }

  counts() {
    return this.counter.snapshot()
  }
}

/** The same object with `liveTimers: true`: work runs at its exact due time on an in-memory timer. */
export class WorkflowsBenchLive extends WorkflowsBench {
  protected override get liveTimers(): boolean {
    return true
  }
}

const target = (env: any, name: string, live: boolean): WorkflowsTarget => {
  const namespace = live ? env.TARGET_LIVE : env.TARGET
  const stub = namespace.get(namespace.idFromName(name))
  return {
    create: (kind, items, options) => stub.create(kind, items, options?.background === true),
    statuses: (kind, ids) => stub.statuses(kind, ids),
    sendEvent: (kind, id, event) => stub.sendEvent(kind, id, event),
    counts: () => stub.counts(),
    reset: () => stub.reset()
  }
}

export default makeWorkflowsDriver((env, params) => target(env, params.name ?? "workflows", (params as { live?: boolean }).live === true))
