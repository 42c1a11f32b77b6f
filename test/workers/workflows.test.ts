/**
 * Durable workflows inside workerd, with real SQLite storage and the real alarm (objects/WorkflowsObject.ts,
 * public promise API): an instance sleeping is woken by the platform alarm, never before its time; a wait
 * gets an event sent before it was reached and one sent while it waits; a wait times out; a child runs and
 * its parent gets its output; terminate aborts a running step's signal; a reset of the object while an
 * instance is suspended loses nothing (a fresh instance is woken by the alarm, or by the event sent to it);
 * a suspended instance holds no alarm beyond its own timer. Every scenario waits for what the object stores
 * (rows, steps, effects), never for a length of time, and ends with the object idle.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import type { InstanceRow, StepResult, WorkflowsObject } from "./objects/WorkflowsObject.js"
import { WF } from "./objects/WorkflowsObject.js"
import { IDLE, isIdle } from "./objects/idle.js"
import { waitFor } from "./support/lab.js"
import * as Json from "../../src/shared/json.js"

interface Wf {
  readonly id: DurableObjectId
  stub: DurableObjectStub<WorkflowsObject>
}

const fresh = (): Wf => {
  const id = env.WORKFLOWS_OBJECT.newUniqueId()
  return { id, stub: env.WORKFLOWS_OBJECT.get(id) }
}

/** In-memory state, timers and running runs are gone; storage and the alarm stay. */
const reset = async (wf: Wf): Promise<void> => {
  await expect(runInDurableObject(wf.stub, (_instance, state) => state.abort("reset by the scenario"))).rejects.toThrow()
  wf.stub = env.WORKFLOWS_OBJECT.get(wf.id)
}

const rowWhere = (wf: Wf, key: string, done: (row: InstanceRow | null) => boolean) => waitFor(() => wf.stub.row(key), done)

const ended = (wf: Wf, key: string) =>
  rowWhere(wf, key, (row) => row !== null && ["complete", "failed", "terminated"].includes(row.status)) as Promise<InstanceRow>

const suspended = (wf: Wf, key: string, waiting?: string) =>
  rowWhere(wf, key, (row) => row?.status === "suspended" && (waiting === undefined || (row.waiting ?? "").includes(waiting))) as Promise<
    InstanceRow
  >

/** Nothing left: every instance ended, no workflow timer, no alarm, no delivery in flight. */
const expectIdle = async (wf: Wf): Promise<void> => {
  const rows = await wf.stub.rows()
  expect(rows.filter((row) => row.status === "pending" || row.status === "suspended").map((row) => row.key)).toEqual([])
  expect(await wf.stub.timers()).toEqual([])
  expect(await waitFor(() => wf.stub.idle(), isIdle)).toEqual(IDLE)
}

describe("workflows in workerd", () => {
  it("a sleeping instance wakes at its time, never before it by the object's clock, each step run once", async () => {
    const wf = fresh()
    expect(await wf.stub.create("sleeper", "s1", { ms: 250 })).toEqual({ ok: true, value: "s1" })
    const done = await ended(wf, "sleeper/s1")
    expect(done.status).toBe("complete")
    const steps = (await wf.stub.steps()).filter((step) => step.instance === "sleeper/s1")
    expect(steps.map((step) => [step.seq, step.name, step.kind, step.status, step.attempt])).toEqual([
      [1, "before", "do", "completed", 1],
      [2, "nap", "sleep", "completed", 0],
      [3, "after", "do", "completed", 1]
    ])
    const nap = steps[1]!
    expect(nap.wake_at).toBe(nap.started_at + 250)
    // Woken no earlier than its wake time, by the object's clock: the sleep's end and the next step's effect.
    expect(nap.ended_at!).toBeGreaterThanOrEqual(nap.wake_at!)
    const effects = (await wf.stub.effects()).filter((effect) => effect.wf === "sleeper/s1")
    expect(effects.map((effect) => [effect.step, effect.attempt])).toEqual([["before", 1], ["after", 1]])
    expect(effects[1]!.at).toBeGreaterThanOrEqual(nap.wake_at!)
    const output = Json.decode(done.output!) as { before: StepResult; after: StepResult }
    expect(output.before.effect).toBe(effects[0]!.seq)
    expect(output.after.effect).toBe(effects[1]!.seq)
    await expectIdle(wf)
  })

  it("a suspended instance holds no alarm beyond its own timer; terminating it leaves none", async () => {
    const wf = fresh()
    await wf.stub.create("sleeper", "long", { ms: 3_600_000 })
    const row = await suspended(wf, "sleeper/long")
    expect(row.wake_at).not.toBeNull()
    expect(await wf.stub.timers()).toEqual([{ key: "sleeper/long", at: row.wake_at }])
    // No record to run, nothing else due: the alarm is the sleep's wake-up (the engine moves it there once idle).
    await waitFor(() => wf.stub.alarmAt(), (alarm) => alarm === row.wake_at)
    const audit = await wf.stub.audit()
    expect(audit).toMatchObject({ earliest: row.wake_at, unfinished: 1, sleepersWithoutTimer: [] })
    expect(await wf.stub.terminate("sleeper", "long")).toEqual({ ok: true })
    expect(await wf.stub.row("sleeper/long")).toMatchObject({ status: "terminated", last_error_name: "WorkflowTerminatedError" })
    await expectIdle(wf)
  })

  it("a wait gets an event sent before it was reached (while sleeping) and one sent while it waits", async () => {
    const wf = fresh()
    await wf.stub.create("mixed", "early", { sleepMs: 300, waits: 2, kidMs: null, flaky: false })
    // Sleeping at step 2: the first event is sent before any wait is reached.
    const asleep = await rowWhere(wf, "mixed/early", (row) => row?.status === "suspended" && row.waiting === null)
    expect(asleep!.wake_at).not.toBeNull()
    expect(await wf.stub.sendOnce("mixed", "early", WF.eventType, 1)).toEqual({ ok: true, value: "sent" })
    // The first wait consumed it; the second waits for the next.
    await suspended(wf, "mixed/early", "event:go")
    const steps = await waitFor(
      () => wf.stub.steps(),
      (steps) => steps.some((step) => step.instance === "mixed/early" && step.name === "e1" && step.status === "waiting")
    )
    expect(steps.find((step) => step.instance === "mixed/early" && step.name === "e0")).toMatchObject({ status: "completed" })
    expect(await wf.stub.sendOnce("mixed", "early", WF.eventType, 2)).toEqual({ ok: true, value: "sent" })
    const done = await ended(wf, "mixed/early")
    expect(done.status).toBe("complete")
    expect((Json.decode(done.output!) as { events: unknown }).events).toEqual([{ n: 1 }, { n: 2 }])
    // Each event consumed once, by the wait at its position (e0 is step 4, e1 step 5).
    expect((await wf.stub.events()).map((event) => [Json.decode(event.payload), event.consumed_seq])).toEqual([
      [{ n: 1 }, 4],
      [{ n: 2 }, 5]
    ])
    await expectIdle(wf)
  })

  it("a wait times out with WorkflowTimeoutError; an event after the end is refused", async () => {
    const wf = fresh()
    await wf.stub.create("waiter", "late", { type: "approval", timeoutMs: 200 })
    const row = await suspended(wf, "waiter/late", "event:approval")
    expect(await wf.stub.timers()).toEqual([{ key: "waiter/late", at: row.wake_at }])
    const done = await ended(wf, "waiter/late")
    expect(Json.decode(done.output!)).toEqual({ timedOut: "WorkflowTimeoutError" })
    const [step] = (await wf.stub.steps()).filter((step) => step.instance === "waiter/late")
    expect(step).toMatchObject({ kind: "event", status: "failed" })
    expect(step!.ended_at!).toBeGreaterThanOrEqual(step!.wake_at!)
    expect(await wf.stub.sendOnce("waiter", "late", "approval", 1)).toMatchObject({ ok: false, error: "WorkflowFinishedError" })
    expect(await wf.stub.events()).toEqual([])
    await expectIdle(wf)
  })

  it("a child runs (and sleeps) while its parent waits holding no timer; the parent gets its output", async () => {
    const wf = fresh()
    await wf.stub.create("parent", "p", { ms: 200 })
    const waiting = await suspended(wf, "parent/p", "child:kid/p-1")
    expect(waiting.wake_at).toBeNull()
    expect(await wf.stub.row("kid/p-1")).toMatchObject({ parent: "parent/p" })
    // While the child sleeps, only the child's timer is there: the parent waits on no time.
    const timers = await wf.stub.timers()
    expect(timers.every((timer) => timer.key === "kid/p-1")).toBe(true)
    const done = await ended(wf, "parent/p")
    expect(Json.decode(done.output!)).toEqual({ child: "kid p-1" })
    expect(await wf.stub.row("kid/p-1")).toMatchObject({ status: "complete" })
    expect((await wf.stub.effects()).filter((effect) => effect.wf === "kid/p-1").map((effect) => effect.attempt)).toEqual([1])
    await expectIdle(wf)
  })

  it("terminate aborts a running step's signal with WorkflowTerminatedError", async () => {
    const wf = fresh()
    await wf.stub.create("hang", "h", {})
    await waitFor(() => wf.stub.effects(), (effects) => effects.some((effect) => effect.wf === "hang/h"))
    expect(await wf.stub.row("hang/h")).toMatchObject({ status: "pending" })
    expect(await wf.stub.terminate("hang", "h")).toEqual({ ok: true })
    expect(await waitFor(() => wf.stub.aborts(), (aborts) => aborts.length > 0)).toEqual([{ wf: "hang/h", reason: "WorkflowTerminatedError" }])
    const row = await ended(wf, "hang/h")
    expect(row).toMatchObject({ status: "terminated", last_error_name: "WorkflowTerminatedError" })
    // The aborted step's late failure is fenced off: its row stays as it was when terminated.
    const [step] = (await wf.stub.steps()).filter((step) => step.instance === "hang/h")
    expect(step).toMatchObject({ name: "forever", status: "running", attempt: 1 })
    await expectIdle(wf)
  })

  it("a reset while sleeping: nothing calls the object, the platform alarm starts a fresh instance that wakes it", async () => {
    const wf = fresh()
    const ledger = env.EFFECT_LEDGER.get(env.EFFECT_LEDGER.idFromName(wf.id.toString()))
    const first = await wf.stub.whoami()
    await wf.stub.create("sleeper", "r", { ms: 300, report: true })
    const asleep = await suspended(wf, "sleeper/r")
    await reset(wf)
    // Storage and the alarm survived. The scenario waits on the ledger (another object), so nothing but the
    // platform alarm starts the object again: the step after the sleep reports there.
    await waitFor(() => ledger.effects(), (effects) => effects.some((effect) => effect.source === "sleeper/r"))
    const done = await ended(wf, "sleeper/r")
    expect(done.status).toBe("complete")
    const effects = (await wf.stub.effects()).filter((effect) => effect.wf === "sleeper/r")
    expect(effects.map((effect) => [effect.step, effect.attempt])).toEqual([["before", 1], ["after", 1]])
    expect(effects[0]!.object).toBe(first)
    expect(effects[1]!.object).not.toBe(first)
    expect(effects[1]!.at).toBeGreaterThanOrEqual(asleep.wake_at!)
    // The instance that ran it was started by a platform delivery (info given), not by runDurableObjectAlarm.
    const deliveries = await wf.stub.alarmDeliveries()
    expect(deliveries.some((delivery) => delivery.instance === effects[1]!.object && delivery.info !== "null")).toBe(true)
    await expectIdle(wf)
  })

  it("a reset while waiting for an event: the event sent to the fresh instance wakes it, consumed once", async () => {
    const wf = fresh()
    await wf.stub.create("waiter", "w", { type: "approval", timeoutMs: 3_600_000 })
    const row = await suspended(wf, "waiter/w", "event:approval")
    await reset(wf)
    expect(await wf.stub.row("waiter/w")).toEqual(row)
    expect(await wf.stub.sendOnce("waiter", "w", "approval", 7)).toEqual({ ok: true, value: "sent" })
    const done = await ended(wf, "waiter/w")
    expect(Json.decode(done.output!)).toEqual({ got: { n: 7 } })
    expect((await wf.stub.events()).map((event) => event.consumed_seq)).toEqual([1])
    await expectIdle(wf)
  })

  it("a reset while a child runs: the child finishes in a fresh instance and wakes its parent", async () => {
    const wf = fresh()
    await wf.stub.create("parent", "pr", { ms: 300 })
    await suspended(wf, "parent/pr", "child:kid/pr-1")
    await suspended(wf, "kid/pr-1")
    await reset(wf)
    const done = await ended(wf, "parent/pr")
    expect(Json.decode(done.output!)).toEqual({ child: "kid pr-1" })
    expect((await wf.stub.effects()).filter((effect) => effect.wf === "kid/pr-1").map((effect) => effect.attempt)).toEqual([1])
    await expectIdle(wf)
  })
})
