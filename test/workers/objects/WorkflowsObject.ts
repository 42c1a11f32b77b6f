/**
 * `WorkflowsObject`: durable workflows on the PUBLIC promise API (`DurabilityWorkflows`) over real SQLite
 * storage and the real alarm, for the workflows scenarios (workflows.test.ts) and their eviction chaos
 * (chaos.workflows.test.ts). Its workflows:
 * - `sleeper` ({ ms }): a step, a sleep of `ms`, a step that records when it ran;
 * - `waiter` ({ type, timeoutMs }): one waitForEvent; returns the payload, or the timeout's error name;
 * - `parent` ({ ms, gate? }): runs `kid` with its params as a child and returns its output;
 * - `kid` ({ ms, gate? }): a step (held until `gate` is opened, if given), a sleep of `ms`, returns "kid <id>";
 * - `gated`: one step held until the scenario opens its gate (`open`), then two waits for "go" events;
 * - `hang`: one step that waits for its signal (terminate aborts it) and records the reason;
 * - `mixed` (see `MixedParams`): the chaos workflow: steps (one flaky, one that holds a while), a sleep,
 *   waits for events of one type, maybe a child.
 *
 * Every real run of a `do` step's callback (with its attempt, this instance of the object and the object's
 * clock) and every abort a step saw are recorded in the object's own tables, which survive resets. Every RPC
 * resolves: an expected error comes back as a value (a rejected RPC breaks the pool's isolated storage).
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  DurabilityScheduler,
  DurabilityWorkflows,
  type WorkflowEvent,
  type WorkflowStep
} from "../../../src/index.js"
import * as Json from "../../../src/shared/json.js"
import { deliveriesAround, recordDelivery } from "./deliveryLog.js"
import type { EffectLedger } from "./EffectLedger.js"
import { Gates } from "./gates.js"
import { Deliveries, type Idleness } from "./idle.js"

export const WF = {
  alarmMinDelayMs: 1_000,
  /** Runs cut short by resets count as a run's attempts: far more than any run of the chaos meets. */
  runMaxAttempts: 100,
  /** A step's retries: resets inside a step use its attempts too. */
  stepRetries: { limit: 30, delay: 20, backoff: "constant" as const },
  /** How long `mixed`'s step "hold" holds (real time): resets land inside it. */
  holdMs: 60,
  eventType: "go"
} as const

export interface MixedParams {
  readonly sleepMs: number
  /** How many waits for an event of type "go" (the driver sends as many). */
  readonly waits: number
  /** Runs `kid` as a child, sleeping this long; none when null. */
  readonly kidMs: number | null
  /** Step "s1" fails on its first attempt (a durable retry delay). */
  readonly flaky: boolean
}

export interface StepEffect {
  readonly seq: number
  /** The instance's key, `<workflow>/<id>`. */
  readonly wf: string
  readonly step: string
  readonly attempt: number
  readonly object: string
  readonly at: number
}

export interface StepResult {
  readonly step: string
  readonly attempt: number
  readonly effect: number
}

export interface InstanceRow {
  readonly key: string
  readonly workflow: string
  readonly instance_id: string
  readonly generation_id: string
  readonly status: "pending" | "suspended" | "complete" | "failed" | "terminated"
  readonly attempt: number
  readonly next_attempt_at: number
  readonly paused: number
  readonly waiting: string | null
  readonly wake_at: number | null
  readonly output: string | null
  readonly last_error_name: string | null
  readonly last_error: string | null
  readonly parent: string | null
}

export interface StepRow {
  readonly instance: string
  readonly seq: number
  readonly name: string
  readonly kind: "do" | "sleep" | "event" | "child"
  readonly status: string
  readonly attempt: number
  readonly result: string | null
  readonly wake_at: number | null
  readonly started_at: number
  readonly ended_at: number | null
}

export interface EventRow {
  readonly id: number
  readonly instance: string
  readonly type: string
  readonly payload: string
  readonly sent_at: number
  readonly consumed_seq: number | null
}

export interface WfDelivery {
  readonly seq: number
  readonly at: number
  readonly ended_at: number | null
  readonly instance: string
  readonly info: string
}

export interface WfAudit {
  readonly instance: string
  readonly now: number
  readonly alarm: number | null
  /** Instances to run (pending, not paused) and their earliest due, with the workflows' durable timers. */
  readonly pending: number
  readonly earliest: number | null
  readonly unfinished: number
  /** Suspended instances (not paused) that wait on time but have no durable timer at their wake-up. */
  readonly sleepersWithoutTimer: ReadonlyArray<string>
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS wf_effects (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    wf TEXT NOT NULL,
    step TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    object TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS wf_aborts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    wf TEXT NOT NULL,
    reason TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS wf_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    ended_at INTEGER,
    instance TEXT NOT NULL,
    info TEXT NOT NULL
  );
`

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A call's outcome as a value (one shape: RPC types of a union do not narrow). */
export interface Answer<A> {
  readonly ok: boolean
  readonly value?: A
  readonly error?: string
  readonly message?: string
}

const answer = async <A>(body: () => Promise<A>): Promise<Answer<A>> => {
  try {
    const value = await body()
    return value === undefined ? { ok: true } : { ok: true, value }
  } catch (error) {
    return { ok: false, error: (error as Error).name, message: (error as Error).message }
  }
}

export interface WorkflowsEnv {
  readonly EFFECT_LEDGER: DurableObjectNamespace<EffectLedger>
}

export class WorkflowsObject extends DurableObject<WorkflowsEnv> {
  readonly instance = crypto.randomUUID()
  /** In memory: a reset loses them, and a step held on one waits again in the fresh instance. */
  readonly gates = new Gates()
  readonly records = this.ctx.storage.sql.exec(CREATE)
  private readonly deliveries = new Deliveries()

  readonly scheduler = new DurabilityScheduler({
    context: this.ctx,
    alarmMinDelayMs: WF.alarmMinDelayMs,
    // Not the console: the test pool hangs when an instance it reset writes to the console.
    log: () => undefined
  })

  readonly workflows = new DurabilityWorkflows({
    scheduler: this.scheduler,
    retries: { maxAttempts: WF.runMaxAttempts, delay: () => 20 },
    workflows: {
      sleeper: async (event: WorkflowEvent<{ readonly ms: number; readonly report?: boolean }>, step: WorkflowStep) => {
        const before = await step.do("before", ({ attempt }) => this.effect("sleeper", event.instanceId, "before", attempt))
        await step.sleep("nap", event.payload.ms)
        const after = await step.do("after", async ({ attempt }) => {
          const done = this.effect("sleeper", event.instanceId, "after", attempt)
          // Told to another object: a scenario can wait for it without calling (so starting) this one.
          if (event.payload.report === true) await this.ledger().apply({ source: `sleeper/${event.instanceId}`, key: null, attempt })
          return done
        })
        return { before, after }
      },
      waiter: async (event: WorkflowEvent<{ readonly type: string; readonly timeoutMs: number }>, step: WorkflowStep) => {
        try {
          const got = await step.waitForEvent("wait", { type: event.payload.type, timeout: event.payload.timeoutMs })
          return { got: got.payload }
        } catch (error) {
          return { timedOut: (error as Error).name }
        }
      },
      parent: async (event: WorkflowEvent<{ readonly ms: number; readonly gate?: string }>, step: WorkflowStep) => {
        const child = await step.child<string>("kid", "kid", { params: event.payload })
        return { child }
      },
      kid: async (event: WorkflowEvent<{ readonly ms: number; readonly gate?: string }>, step: WorkflowStep) => {
        await step.do("work", async ({ attempt }) => {
          const done = this.effect("kid", event.instanceId, "work", attempt)
          if (event.payload.gate !== undefined) await this.gates.opened(event.payload.gate)
          return done
        })
        await step.sleep("kid nap", event.payload.ms)
        return `kid ${event.instanceId}`
      },
      gated: async (event: WorkflowEvent<unknown>, step: WorkflowStep) => {
        // Held in its first step until the scenario opens the gate: an event sent meanwhile comes before any wait.
        await step.do("gate", async ({ attempt }) => {
          const done = this.effect("gated", event.instanceId, "gate", attempt)
          await this.gates.opened(`gated/${event.instanceId}`)
          return done
        })
        const first = await step.waitForEvent("e0", { type: WF.eventType, timeout: "1 hour" })
        const second = await step.waitForEvent("e1", { type: WF.eventType, timeout: "1 hour" })
        return { events: [first.payload, second.payload] }
      },
      hang: async (event: WorkflowEvent<unknown>, step: WorkflowStep) =>
        step.do("forever", ({ attempt, signal }) => {
          this.effect("hang", event.instanceId, "forever", attempt)
          return new Promise<never>((_resolve, reject) => {
            signal.addEventListener("abort", () => {
              this.ctx.storage.sql.exec(
                "INSERT INTO wf_aborts (wf, reason, at) VALUES (?, ?, ?)",
                `hang/${event.instanceId}`,
                String((signal.reason as Error | undefined)?.name ?? signal.reason),
                Date.now()
              )
              reject(signal.reason)
            }, { once: true })
          })
        }),
      mixed: async (event: WorkflowEvent<MixedParams>, step: WorkflowStep) => {
        const id = event.instanceId
        const params = event.payload
        const config = { retries: WF.stepRetries }
        const s1 = await step.do("s1", config, ({ attempt }) => {
          const done = this.effect("mixed", id, "s1", attempt)
          if (params.flaky && attempt === 1) throw new Error("s1 fails on attempt 1")
          return done
        })
        await step.sleep("nap", params.sleepMs)
        const s2 = await step.do("s2", config, ({ attempt }) => this.effect("mixed", id, "s2", attempt))
        const events: Array<unknown> = []
        for (let n = 0; n < params.waits; n++) {
          const got = await step.waitForEvent(`e${n}`, { type: WF.eventType, timeout: "1 hour" })
          events.push(got.payload)
        }
        const kid = params.kidMs === null ? null : await step.child<string>("kid", "kid", { params: { ms: params.kidMs } })
        const s3 = await step.do("hold", config, async ({ attempt }) => {
          const done = this.effect("mixed", id, "hold", attempt)
          await sleep(WF.holdMs)
          return done
        })
        return { s1, s2, events, kid, s3 }
      }
    }
  })

  private ledger(): DurableObjectStub<EffectLedger> {
    return this.env.EFFECT_LEDGER.get(this.env.EFFECT_LEDGER.idFromName(this.ctx.id.toString()))
  }

  /** A step's side effect: one row per real run of its callback. */
  private effect(workflow: string, id: string, step: string, attempt: number): StepResult {
    const { seq } = this.ctx.storage.sql.exec<{ seq: number }>(
      "INSERT INTO wf_effects (wf, step, attempt, object, at) VALUES (?, ?, ?, ?, ?) RETURNING seq",
      `${workflow}/${id}`,
      step,
      attempt,
      this.instance,
      Date.now()
    ).one()
    return { step, attempt, effect: seq }
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.deliveries.around(() =>
      recordDelivery(this.ctx.storage.sql, "wf_deliveries", this.instance, info, () => this.workflows.alarm(info))
    )
  }

  // RPC surface (every call resolves).

  open(gate: string): void {
    this.gates.open(gate)
  }

  create(workflow: "sleeper" | "waiter" | "parent" | "kid" | "hang" | "mixed" | "gated", id: string, params: unknown): Promise<Answer<string>> {
    return answer(async () => (await this.workflows[workflow].create({ id, params: params as never })).id)
  }

  /**
   * Sends event `n` (payload `{ n }`) to a `mixed` or `waiter` instance, once: an event already stored with
   * this payload is not sent again (a try a reset cut may have committed).
   */
  sendOnce(workflow: "mixed" | "waiter" | "gated", id: string, type: string, n: number): Promise<Answer<"sent" | "already">> {
    return answer(async () => {
      const payload = Json.encode({ n })
      const [known] = this.ctx.storage.sql.exec(
        "SELECT 1 FROM durability_workflow_events WHERE instance = ? AND type = ? AND payload = ?",
        `${workflow}/${id}`,
        type,
        payload
      ).toArray()
      if (known !== undefined) return "already" as const
      const handle = await this.workflows[workflow].get(id)
      await handle.sendEvent({ type, payload: { n } })
      return "sent" as const
    })
  }

  terminate(workflow: "hang" | "mixed" | "sleeper", id: string): Promise<Answer<void>> {
    return answer(async () => (await this.workflows[workflow].get(id)).terminate())
  }

  rows(): ReadonlyArray<InstanceRow> {
    return this.ctx.storage.sql.exec("SELECT * FROM durability_workflows ORDER BY key").toArray() as unknown as ReadonlyArray<InstanceRow>
  }

  row(key: string): InstanceRow | null {
    return (this.ctx.storage.sql.exec("SELECT * FROM durability_workflows WHERE key = ?", key).toArray()[0] ?? null) as InstanceRow | null
  }

  steps(): ReadonlyArray<StepRow> {
    return this.ctx.storage.sql.exec("SELECT * FROM durability_workflow_steps ORDER BY instance, seq").toArray() as unknown as ReadonlyArray<
      StepRow
    >
  }

  events(): ReadonlyArray<EventRow> {
    return this.ctx.storage.sql.exec("SELECT * FROM durability_workflow_events ORDER BY id").toArray() as unknown as ReadonlyArray<EventRow>
  }

  effects(): ReadonlyArray<StepEffect> {
    return this.ctx.storage.sql.exec("SELECT * FROM wf_effects ORDER BY seq").toArray() as unknown as ReadonlyArray<StepEffect>
  }

  aborts(): ReadonlyArray<{ readonly wf: string; readonly reason: string }> {
    return this.ctx.storage.sql.exec("SELECT wf, reason FROM wf_aborts ORDER BY seq").toArray() as unknown as ReadonlyArray<{
      wf: string
      reason: string
    }>
  }

  /** The workflows' durable timers (the engine's table, owner "workflows"). */
  timers(): ReadonlyArray<{ readonly key: string; readonly at: number }> {
    return this.ctx.storage.sql.exec("SELECT key, at FROM durability_timers WHERE owner = 'workflows' ORDER BY key").toArray() as unknown as ReadonlyArray<
      { key: string; at: number }
    >
  }

  /** The stored state the lost-wake-up invariant is checked on, with the platform alarm. */
  async audit(): Promise<WfAudit> {
    const sql = this.ctx.storage.sql
    const due = sql.exec<{ pending: number; earliest: number | null }>(
      `SELECT COUNT(*) AS pending, MIN(next_attempt_at) AS earliest FROM durability_workflows WHERE status = 'pending' AND paused = 0`
    ).one()
    const timer = sql.exec<{ at: number | null }>("SELECT MIN(at) AS at FROM durability_timers WHERE owner = 'workflows'").one()
    const unfinished = sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM durability_workflows WHERE status IN ('pending', 'suspended')").one()
    const sleepersWithoutTimer = sql.exec<{ key: string }>(
      `SELECT w.key FROM durability_workflows w WHERE w.status = 'suspended' AND w.paused = 0 AND w.wake_at IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM durability_timers t WHERE t.owner = 'workflows' AND t.key = w.key AND t.at <= w.wake_at)`
    ).toArray().map((row) => row.key)
    const times = [due.earliest, timer.at].filter((at): at is number => at !== null)
    const now = Date.now()
    const alarm = await this.ctx.storage.getAlarm()
    return {
      instance: this.instance,
      now,
      alarm,
      pending: due.pending + (timer.at === null ? 0 : 1),
      earliest: times.length === 0 ? null : Math.min(...times),
      unfinished: unfinished.n,
      sleepersWithoutTimer
    }
  }

  /** Every `alarm(info)` delivery (info "null" for `runDurableObjectAlarm`). */
  alarmDeliveries(): ReadonlyArray<WfDelivery> {
    return this.ctx.storage.sql.exec("SELECT * FROM wf_deliveries ORDER BY seq").toArray() as unknown as ReadonlyArray<WfDelivery>
  }

  deliveriesAround(at: number): ReadonlyArray<WfDelivery> {
    return deliveriesAround<WfDelivery>(this.ctx.storage.sql, "wf_deliveries", at)
  }

  /** Step callbacks a reset cut short: an effect of an instance that is gone, of a step never completed by it. */
  running(): number {
    // The `hold` step runs for a while: one of this instance with no completed step row is running.
    return this.ctx.storage.sql.exec<{ n: number }>(
      `SELECT COUNT(*) AS n FROM wf_effects e WHERE e.object = ? AND e.step = 'hold' AND NOT EXISTS (
         SELECT 1 FROM durability_workflow_steps s WHERE s.instance = e.wf AND s.name = 'hold' AND s.status = 'completed'
       )`,
      this.instance
    ).one().n
  }

  /** What the instances are doing now: a reset's moment, as the chaos test counts them. */
  phases(): { readonly stepRunning: number; readonly betweenSteps: number; readonly sleeping: number; readonly waitingEvent: number; readonly waitingChild: number } {
    const sql = this.ctx.storage.sql
    const count = (query: string) => sql.exec<{ n: number }>(query).one().n
    return {
      stepRunning: count(
        `SELECT COUNT(*) AS n FROM durability_workflow_steps s JOIN durability_workflows w ON w.key = s.instance
         WHERE w.status = 'pending' AND s.status = 'running'`
      ),
      betweenSteps: count(
        `SELECT COUNT(*) AS n FROM durability_workflows w WHERE w.status = 'pending' AND w.started_at IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM durability_workflow_steps s WHERE s.instance = w.key AND s.status = 'running')`
      ),
      sleeping: count("SELECT COUNT(*) AS n FROM durability_workflows WHERE status = 'suspended' AND waiting IS NULL"),
      waitingEvent: count("SELECT COUNT(*) AS n FROM durability_workflows WHERE status = 'suspended' AND waiting LIKE '%event:%'"),
      waitingChild: count("SELECT COUNT(*) AS n FROM durability_workflows WHERE status = 'suspended' AND waiting LIKE '%child:%'")
    }
  }

  /** As the platform keeps a failed alarm for its retry (`runDurableObjectAlarm` deletes it first and never retries). */
  async restoreAlarm(at: number): Promise<boolean> {
    if ((await this.ctx.storage.getAlarm()) !== null) return false
    await this.ctx.storage.setAlarm(at)
    return true
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  idle(): Promise<Idleness> {
    return this.deliveries.idleness(this.ctx.storage)
  }

  now(): number {
    return Date.now()
  }

  whoami(): string {
    return this.instance
  }
}
