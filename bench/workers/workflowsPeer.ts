/**
 * Cloudflare Workflows as the workflow benchmarks' peer (W1–W3), run locally by Miniflare in the same
 * workerd as the library: three `WorkflowEntrypoint` classes, one per workflow binding, with the bodies
 * the library's bench/workers/workflows.ts gives `DurabilityWorkflows`, and the shared driver
 * (bench/workers/workflowsDriver.ts) on the bindings. Locally each instance is its own engine Durable
 * Object (SQLite) in a Miniflare-owned service; this worker runs only the workflow bodies and the driver.
 */
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers"
import {
  EVENT_TYPE,
  type Kind,
  makeWorkflowsDriver,
  type SleeperOutput,
  type TenOutput,
  type WaiterOutput,
  type WorkflowsTarget
} from "./workflowsDriver.js"

interface Env {
  readonly WF_TEN: Workflow
  readonly WF_SLEEPER: Workflow
  readonly WF_WAITER: Workflow
}

/** W1: ten trivial steps. */
export class TenWorkflow extends WorkflowEntrypoint<Env, Record<string, never>> {
  override async run(_event: WorkflowEvent<Record<string, never>>, step: WorkflowStep): Promise<TenOutput> {
    for (let i = 0; i < 10; i++) await step.do(`s${i}`, async () => i)
    return { doneAt: Date.now() }
  }
}

/** W2: one sleep of `ms`; when it started (a step) and when it woke. */
export class SleeperWorkflow extends WorkflowEntrypoint<Env, { ms: number }> {
  override async run(event: WorkflowEvent<{ ms: number }>, step: WorkflowStep): Promise<SleeperOutput> {
    const startedAt = await step.do("start", async () => Date.now())
    const sleepAt = Date.now()
    await step.sleep("nap", event.payload.ms)
    return { startedAt, sleepAt, wokeAt: Date.now(), ms: event.payload.ms }
  }
}

/** W3: a step marking it armed, then a wait for an event of type "go"; when it resumed. */
export class WaiterWorkflow extends WorkflowEntrypoint<Env, Record<string, never>> {
  override async run(_event: WorkflowEvent<Record<string, never>>, step: WorkflowStep): Promise<WaiterOutput> {
    const armedAt = await step.do("armed", async () => Date.now())
    const event = await step.waitForEvent("wait", { type: EVENT_TYPE, timeout: "1 hour" })
    return { armedAt, resumedAt: Date.now(), payload: event.payload }
  }
}

const bindingOf = (env: Env, kind: Kind): Workflow =>
  kind === "ten" ? env.WF_TEN : kind === "sleeper" ? env.WF_SLEEPER : env.WF_WAITER

/** Local Workflows' status carries the steps' outputs (`__LOCAL_DEV_STEP_OUTPUTS`, local only). */
interface LocalStatus {
  readonly status: string
  readonly output?: unknown
  readonly error?: unknown
  readonly __LOCAL_DEV_STEP_OUTPUTS?: ReadonlyArray<unknown>
}

const target = (env: Env): WorkflowsTarget => ({
  async create(kind, items) {
    // createBatch takes at most 100 instances on Cloudflare; the driver's batches are that size.
    await bindingOf(env, kind).createBatch(items.map(({ id, params }) => ({ id, params })))
  },
  statuses(kind, ids) {
    return Promise.all(ids.map(async (id) => {
      const instance = await bindingOf(env, kind).get(id)
      const s = (await instance.status()) as unknown as LocalStatus
      return {
        id,
        status: s.status,
        output: s.output ?? null,
        error: s.error ?? null,
        // The waiter's only step before the wait is "armed": its output there means the wait is (about to be) registered.
        armed: s.status === "waiting" || (kind === "waiter" && (s.__LOCAL_DEV_STEP_OUTPUTS?.length ?? 0) >= 1)
      }
    }))
  },
  async sendEvent(kind, id, event) {
    const instance = await bindingOf(env, kind).get(id)
    await instance.sendEvent(event)
  }
})

export default makeWorkflowsDriver((env: Env) => target(env))
