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

/**
 * Resets the object in the same turn as it finds `key`'s row as `when` wants it (no await between the look
 * and the reset, so the reset surely lands in that state). Returns whether it reset, and the row it found.
 */
const resetWhen = async (
  wf: Wf,
  key: string,
  when: (row: InstanceRow | null) => boolean
): Promise<{ readonly reset: boolean; readonly row: InstanceRow | null }> => {
  let seen: InstanceRow | null = null
  let aborted = false
  await runInDurableObject(wf.stub, (instance: WorkflowsObject, state) => {
    seen = instance.row(key)
    if (when(seen)) {
      aborted = true
      state.abort("reset by the scenario")
    }
  }).catch(() => undefined)
  if (aborted) wf.stub = env.WORKFLOWS_OBJECT.get(wf.id)
  return { reset: aborted, row: seen }
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

  it("a wait gets an event sent before it was reached (while a step runs) and one sent while it waits", async () => {
    const wf = fresh()
    await wf.stub.create("gated", "early", {})
    // Held in its first step: the first event is sent before any wait is reached.
    await waitFor(() => wf.stub.effects(), (effects) => effects.some((effect) => effect.wf === "gated/early"))
    expect(await wf.stub.sendOnce("gated", "early", WF.eventType, 1)).toEqual({ ok: true, value: "sent" })
    expect(await wf.stub.row("gated/early")).toMatchObject({ status: "pending" })
    await wf.stub.open("gated/early")
    // The first wait consumed it; the second waits for the next (an hour's timeout: a state that stays).
    const row = await suspended(wf, "gated/early", "event:go")
    const steps = (await wf.stub.steps()).filter((step) => step.instance === "gated/early")
    expect(steps.map((step) => [step.name, step.status])).toEqual([["gate", "completed"], ["e0", "completed"], ["e1", "waiting"]])
    expect(await wf.stub.timers()).toEqual([{ key: "gated/early", at: row.wake_at }])
    expect(await wf.stub.sendOnce("gated", "early", WF.eventType, 2)).toEqual({ ok: true, value: "sent" })
    const done = await ended(wf, "gated/early")
    expect(done.status).toBe("complete")
    expect(Json.decode(done.output!)).toEqual({ events: [{ n: 1 }, { n: 2 }] })
    // Each event consumed once, by the wait at its position (e0 is step 2, e1 step 3).
    expect((await wf.stub.events()).map((event) => [Json.decode(event.payload), event.consumed_seq])).toEqual([
      [{ n: 1 }, 2],
      [{ n: 2 }, 3]
    ])
    await expectIdle(wf)
  })

  it("a wait times out with WorkflowTimeoutError; an event after the end is refused", async () => {
    const wf = fresh()
    await wf.stub.create("waiter", "late", { type: "approval", timeoutMs: 200 })
    // Seen waiting (unless a busy machine let the 200 ms pass first), it holds its timer at the timeout.
    const row = await rowWhere(wf, "waiter/late", (row) => row?.status === "suspended" || row?.status === "complete")
    if (row!.status === "suspended") {
      const timers = await wf.stub.timers()
      if (timers.length > 0) expect(timers).toEqual([{ key: "waiter/late", at: row!.wake_at }])
    }
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
    await wf.stub.create("parent", "p", { ms: 200, gate: "kid-p" })
    // The child holds in its step until the gate opens: the parent waits for it on no time.
    const waiting = await suspended(wf, "parent/p", "child:kid/p-1")
    expect(waiting.wake_at).toBeNull()
    expect(await wf.stub.row("kid/p-1")).toMatchObject({ parent: "parent/p", status: "pending" })
    expect(await wf.stub.timers()).toEqual([])
    await wf.stub.open("kid-p")
    const done = await ended(wf, "parent/p")
    expect(Json.decode(done.output!)).toEqual({ child: "kid p-1" })
    const kid = await wf.stub.row("kid/p-1")
    expect(kid).toMatchObject({ status: "complete" })
    const kidNap = (await wf.stub.steps()).find((step) => step.instance === "kid/p-1" && step.name === "kid nap")!
    expect(kidNap.ended_at!).toBeGreaterThanOrEqual(kidNap.wake_at!)
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
    // The reset lands in the same turn as the look that finds the instance asleep. A busy machine may let a
    // short sleep end before any look finds it: then again with a new instance sleeping twice as long.
    let id = ""
    let asleep: InstanceRow | undefined
    for (let ms = 300; asleep === undefined; ms *= 2) {
      if (ms > 5_000) throw new Error("never found an instance asleep")
      id = `r-${ms}`
      await wf.stub.create("sleeper", id, { ms, report: true })
      const key = `sleeper/${id}`
      const looked = await waitFor(
        () => resetWhen(wf, key, (row) => row?.status === "suspended"),
        (looked) => looked.reset || looked.row?.status === "complete"
      )
      if (looked.reset) asleep = looked.row!
    }
    // Storage and the alarm survived (the row is as the reset found it, asleep). The scenario waits on the
    // ledger (another object), so nothing but the platform alarm starts the object: the step after the sleep
    // reports there.
    await waitFor(() => ledger.effects(), (effects) => effects.some((effect) => effect.source === `sleeper/${id}`))
    const done = await ended(wf, `sleeper/${id}`)
    expect(done.status).toBe("complete")
    const effects = (await wf.stub.effects()).filter((effect) => effect.wf === `sleeper/${id}`)
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

  it("a reset while a child runs: its step runs again in a fresh instance, the child ends and wakes its parent", async () => {
    const wf = fresh()
    const first = await wf.stub.whoami()
    await wf.stub.create("parent", "pr", { ms: 100, gate: "kid-pr" })
    // The child holds in its step (the gate is in memory: the reset loses it) while its parent waits.
    await suspended(wf, "parent/pr", "child:kid/pr-1")
    await waitFor(() => wf.stub.effects(), (effects) => effects.some((effect) => effect.wf === "kid/pr-1"))
    await reset(wf)
    // The fresh instance runs the child again (its cut step's attempt 2), held on the new gate.
    const effects = await waitFor(
      () => wf.stub.effects(),
      (effects) => effects.filter((effect) => effect.wf === "kid/pr-1").length === 2
    )
    const kidRuns = effects.filter((effect) => effect.wf === "kid/pr-1")
    expect(kidRuns.map((effect) => [effect.attempt, effect.object === first])).toEqual([[1, true], [2, false]])
    await wf.stub.open("kid-pr")
    const done = await ended(wf, "parent/pr")
    expect(Json.decode(done.output!)).toEqual({ child: "kid pr-1" })
    const [work] = (await wf.stub.steps()).filter((step) => step.instance === "kid/pr-1" && step.name === "work")
    expect(work).toMatchObject({ status: "completed", attempt: 2 })
    expect((Json.decode(work!.result!) as StepResult).effect).toBe(kidRuns[1]!.seq)
    await expectIdle(wf)
  })
})
