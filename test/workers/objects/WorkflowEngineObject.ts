/**
 * `WorkflowEngineObject`: `@effect/workflow` on the object through `durability/workflow-engine`, on the
 * Effect face alone (one `ManagedRuntime` per instance). `Nap` sleeps with `DurableClock.sleep` (a durable
 * timer, never an in-memory sleep) between two journaled activities; every activity run is recorded with
 * the instance that ran it in the object's own table, which survives resets.
 */
import { Activity, DurableClock, Workflow } from "@effect/workflow"
import { DurableObject } from "cloudflare:workers"
import { Duration, Effect, Layer, ManagedRuntime, Schema } from "effect"
import { Scheduler } from "../../../src/effect.js"
import type { AlarmInvocationInfo } from "../../../src/index.js"
import { DurableWorkflowEngine } from "../../../src/workflowEngine.js"
import type { EffectLedger } from "./EffectLedger.js"
import { Deliveries, type Idleness } from "./idle.js"

export const Nap = Workflow.make({
  name: "Nap",
  payload: { id: Schema.String, seconds: Schema.Number },
  success: Schema.String,
  idempotencyKey: ({ id }) => id
})

/** One activity run: which step, in which instance, and what first woke that instance (`alarm` or `call`). */
export interface NapRun {
  readonly step: string
  readonly instance: string
  readonly wokenBy: string
}

export class WorkflowEngineObject extends DurableObject<{ readonly EFFECT_LEDGER: DurableObjectNamespace<EffectLedger> }> {
  private readonly instance = crypto.randomUUID()
  private readonly deliveries = new Deliveries()
  /** What first entered this instance: the platform's `alarm()` or a call. */
  private wokenBy: "alarm" | "call" | undefined

  private readonly workflows = Nap.toLayer(({ id, seconds }) =>
    Effect.gen(function*(this: WorkflowEngineObject) {
      const before = yield* this.step(`before ${id}`)
      yield* DurableClock.sleep({ name: "nap", duration: Duration.seconds(seconds), inMemoryThreshold: Duration.zero })
      const after = yield* this.step(`after ${id}`)
      // Told to another object: a scenario can wait for it without calling (so starting) this one.
      yield* Effect.promise(() => this.ledger().apply({ source: `nap/${id}`, key: `nap/${id}`, attempt: 1 }))
      return `${before} -> ${after}`
    }.bind(this))
  )

  private readonly runtime = ManagedRuntime.make(
    Layer.provideMerge(
      this.workflows,
      Layer.provideMerge(DurableWorkflowEngine.layerEngine(), Scheduler.layerDurableObject(this.ctx, { alarmMinDelayMs: 1_000 }))
    )
  )

  constructor(ctx: DurableObjectState, env: { readonly EFFECT_LEDGER: DurableObjectNamespace<EffectLedger> }) {
    super(ctx, env)
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS nap_runs (seq INTEGER PRIMARY KEY, step TEXT NOT NULL, instance TEXT NOT NULL, woken_by TEXT NOT NULL)")
    void ctx.blockConcurrencyWhile(() => this.runtime.runPromise(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.warm)))
  }

  private ledger(): DurableObjectStub<EffectLedger> {
    return this.env.EFFECT_LEDGER.get(this.env.EFFECT_LEDGER.idFromName(this.ctx.id.toString()))
  }

  /** A journaled activity that records its run. */
  private step(name: string) {
    return Activity.make({
      name,
      success: Schema.String,
      execute: Effect.sync(() => {
        this.ctx.storage.sql.exec(
          "INSERT INTO nap_runs (step, instance, woken_by) VALUES (?, ?, ?)",
          name,
          this.instance,
          this.wokenBy ?? "call"
        )
        return name
      })
    })
  }

  whoami(): string {
    this.wokenBy ??= "call"
    return this.instance
  }

  /** Starts `Nap` (discarded: the caller polls); returns its execution id. */
  start(id: string, seconds: number): Promise<string> {
    this.wokenBy ??= "call"
    return this.runtime.runPromise(Nap.execute({ id, seconds }, { discard: true }))
  }

  /** The execution's result as `poll` reads it: its tag and, when complete, its value. */
  poll(executionId: string): Promise<{ readonly tag: string; readonly value?: string }> {
    this.wokenBy ??= "call"
    return this.runtime.runPromise(Effect.map(Nap.poll(executionId), (result) =>
      result === undefined
        ? { tag: "Running" }
        : result._tag === "Suspended"
        ? { tag: "Suspended" }
        : { tag: "Complete", value: result.exit._tag === "Success" ? result.exit.value : "failure" }))
  }

  runs(): Array<NapRun> {
    this.wokenBy ??= "call"
    return this.ctx.storage.sql.exec<{ step: string; instance: string; woken_by: string }>(
      "SELECT step, instance, woken_by FROM nap_runs ORDER BY seq"
    ).toArray().map(({ instance, step, woken_by }) => ({ step, instance, wokenBy: woken_by }))
  }

  /** The durable timers the workflow engine has set. */
  timers(): Array<{ readonly owner: string; readonly at: number }> {
    this.wokenBy ??= "call"
    return this.ctx.storage.sql.exec<{ owner: string; at: number }>("SELECT owner, at FROM durability_timers").toArray()
      .map(({ at, owner }) => ({ owner, at }))
  }

  idle(): Promise<Idleness> {
    this.wokenBy ??= "call"
    return this.deliveries.idleness(this.ctx.storage)
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    this.wokenBy ??= "alarm"
    return this.deliveries.around(() =>
      this.runtime.runPromise(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm(info)))
    )
  }
}
