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
import { WorkflowEngine } from "../../../src/workflowEngine.js"
import { Deliveries, type Idleness } from "./idle.js"

export const Nap = Workflow.make({
  name: "Nap",
  payload: { id: Schema.String, seconds: Schema.Number },
  success: Schema.String,
  idempotencyKey: ({ id }) => id
})

/** One activity run: which step, in which instance, and whether an `alarm()` delivery was running it. */
export interface NapRun {
  readonly step: string
  readonly instance: string
  readonly duringAlarm: boolean
}

export class WorkflowEngineObject extends DurableObject {
  private readonly instance = crypto.randomUUID()
  private readonly deliveries = new Deliveries()
  private delivering = 0

  private readonly workflows = Nap.toLayer(({ id, seconds }) =>
    Effect.gen(function*(this: WorkflowEngineObject) {
      const before = yield* this.step(`before ${id}`)
      yield* DurableClock.sleep({ name: "nap", duration: Duration.seconds(seconds), inMemoryThreshold: Duration.zero })
      const after = yield* this.step(`after ${id}`)
      return `${before} -> ${after}`
    }.bind(this))
  )

  private readonly runtime = ManagedRuntime.make(
    Layer.provideMerge(
      this.workflows,
      Layer.provideMerge(WorkflowEngine.layerEngine(), Scheduler.layerDurableObject(this.ctx, { alarmMinDelayMs: 1_000 }))
    )
  )

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS nap_runs (seq INTEGER PRIMARY KEY, step TEXT NOT NULL, instance TEXT NOT NULL, during_alarm INTEGER NOT NULL)")
    void ctx.blockConcurrencyWhile(() => this.runtime.runPromise(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.warm)))
  }

  /** A journaled activity that records its run. */
  private step(name: string) {
    return Activity.make({
      name,
      success: Schema.String,
      execute: Effect.sync(() => {
        this.ctx.storage.sql.exec(
          "INSERT INTO nap_runs (step, instance, during_alarm) VALUES (?, ?, ?)",
          name,
          this.instance,
          this.delivering > 0 ? 1 : 0
        )
        return name
      })
    })
  }

  whoami(): string {
    return this.instance
  }

  /** Starts `Nap` (discarded: the caller polls); returns its execution id. */
  start(id: string, seconds: number): Promise<string> {
    return this.runtime.runPromise(Nap.execute({ id, seconds }, { discard: true }))
  }

  /** The execution's result as `poll` reads it: its tag and, when complete, its value. */
  poll(executionId: string): Promise<{ readonly tag: string; readonly value?: string }> {
    return this.runtime.runPromise(Effect.map(Nap.poll(executionId), (result) =>
      result === undefined
        ? { tag: "Running" }
        : result._tag === "Suspended"
        ? { tag: "Suspended" }
        : { tag: "Complete", value: result.exit._tag === "Success" ? result.exit.value : "failure" }))
  }

  runs(): Array<NapRun> {
    return this.ctx.storage.sql.exec<{ step: string; instance: string; during_alarm: number }>(
      "SELECT step, instance, during_alarm FROM nap_runs ORDER BY seq"
    ).toArray().map(({ during_alarm, instance, step }) => ({ step, instance, duringAlarm: during_alarm === 1 }))
  }

  /** The durable timers the workflow engine has set. */
  timers(): Array<{ readonly owner: string; readonly at: number }> {
    return this.ctx.storage.sql.exec<{ owner: string; at: number }>("SELECT owner, at FROM durability_timers").toArray()
      .map(({ at, owner }) => ({ owner, at }))
  }

  idle(): Promise<Idleness> {
    return this.deliveries.idleness(this.ctx.storage)
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    this.delivering++
    return this.deliveries.around(() =>
      this.runtime.runPromise(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm(info)))
    ).finally(() => this.delivering--)
  }
}
