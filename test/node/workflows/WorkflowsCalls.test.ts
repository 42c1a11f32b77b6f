/**
 * The workflows' calls beyond one instance's life: batches, pages by status, waiting for an end,
 * parallel steps, a run cut short by an eviction, a paused queued instance, and every refused call
 * leaving storage as it was.
 */
import { describe, expect, it } from "vitest"
import { DurabilityWorkflows, type WorkflowEvent, type WorkflowStep } from "durability"
import { TestObjectState } from "durability/testing"

const snapshot = (state: TestObjectState.TestObjectState) =>
  ["durability_workflows", "durability_workflow_steps", "durability_workflow_events"].map((table) =>
    state.storage.sql.exec(`SELECT * FROM ${table}`).toArray()
  )

const make = (context: TestObjectState.TestObjectState["context"], log: Array<string> = []) =>
  new DurabilityWorkflows({
    context,
    workflows: {
      nap: async (event: WorkflowEvent<{ readonly ms: number }>, step: WorkflowStep) => {
        await step.sleep("nap", event.payload.ms)
        return event.payload.ms
      },
      fan: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) => {
        const [a, b, c] = await Promise.all([
          step.do("a", () => (log.push("a"), 1)),
          step.do("b", () => (log.push("b"), 2)),
          step.sleep("c", 1_000).then(() => 3)
        ])
        return a + b + c
      },
      hang: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) =>
        step.do("slow", ({ attempt }) => {
          log.push(`slow:${attempt}`)
          return attempt === 1 ? new Promise(() => undefined) : "second"
        })
    }
  })

describe("DurabilityWorkflows calls", () => {
  it("creates a batch, pages instances by status and waits for an end", async () => {
    const state = await TestObjectState.make()
    const workflows = make(state.context)
    const made = await workflows.nap.createBatch([
      { id: "short", params: { ms: 1_000 } },
      { id: "long", params: { ms: 60_000 } },
      { id: "zero", params: { ms: 0 } }
    ])
    expect(made.map((one) => one.id)).toEqual(["short", "long", "zero"])
    // An existing id returns that instance unchanged.
    const again = await workflows.nap.create({ id: "short", params: { ms: 5 } })
    expect((await again.status()).params).toEqual({ ms: 1_000 })
    await state.advance(0)
    const waiting = await workflows.nap.list({ status: "waiting", limit: 1 })
    expect(waiting.items).toHaveLength(1)
    const rest = await workflows.nap.list({ status: "waiting", limit: 1, cursor: waiting.cursor! })
    expect([...waiting.items, ...rest.items].map((info) => info.id).sort()).toEqual(["long", "short"])
    expect(rest.cursor).toBeUndefined()
    expect((await workflows.nap.list({ status: "complete" })).items.map((info) => info.id)).toEqual(["zero"])

    const short = await workflows.nap.get("short")
    const ended = short.wait({ timeoutMs: 10_000 })
    await state.advance(1_000)
    expect((await ended).status).toBe("complete")
  })

  it("numbers parallel steps in call order and resumes them after the sleep among them", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    const workflows = make(state.context, log)
    const fan = await workflows.fan.create({ id: "f" })
    await state.advance(0)
    expect((await fan.status()).steps.map((s) => [s.position, s.name, s.status])).toEqual([
      [1, "a", "completed"],
      [2, "b", "completed"],
      [3, "c", "waiting"]
    ])
    await state.advance(1_000)
    expect((await fan.status()).output).toBe(6)
    expect(log).toEqual(["a", "b"])
  })

  it("counts a step cut short by an eviction as an attempt and runs the next one after the object restarts", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    await make(state.context, log).hang.create({ id: "h" })
    await state.advance(0)
    expect(log).toContain("slow:1")
    const next = await state.restart()
    const workflows = make(next.context, log)
    // The attempt's row says it ran; the new object's alarm runs the instance again (a fresh run replays).
    await next.advance("1 minute")
    const info = await (await workflows.hang.get("h")).status()
    expect(info.output).toBe("second")
    expect(info.steps[0]?.attempt).toBe(2)
  })

  it("keeps a paused sleeper asleep past its time until it is resumed", async () => {
    const state = await TestObjectState.make()
    const workflows = make(state.context)
    const sleeper = await workflows.nap.create({ id: "z", params: { ms: 1_000 } })
    await state.advance(0)
    await sleeper.pause()
    await state.advance("1 hour")
    expect((await sleeper.status()).status).toBe("paused")
    expect(state.storage.alarmAt).toBeNull()
    await sleeper.resume()
    await state.advance(0)
    expect((await sleeper.status()).status).toBe("complete")
  })

  it("refuses bad input with typed errors, writing nothing", async () => {
    const state = await TestObjectState.make()
    const workflows = make(state.context)
    const live = await workflows.nap.create({ id: "live", params: { ms: 60_000 } })
    await state.advance(0)
    const before = snapshot(state)
    await expect(workflows.nap.create({ id: "-bad" })).rejects.toThrow(TypeError)
    await expect(workflows.nap.create({ id: "x".repeat(101) })).rejects.toThrow(/1–100/)
    await expect(workflows.nap.create({ id: "ok", params: { when: new Date() } as never })).rejects.toThrow(/params must be JSON/)
    await expect(workflows.nap.create({ id: "ok", params: "x".repeat(1024 * 1024 + 1) as never })).rejects.toThrow(/limit is 1048576/)
    await expect(workflows.nap.createBatch([])).rejects.toThrow(RangeError)
    await expect(workflows.nap.createBatch([{ id: "d" }, { id: "d" }])).rejects.toThrow(/one id twice/)
    await expect(workflows.nap.createBatch([{ id: "fine" }, { id: "no good" }])).rejects.toThrow(TypeError)
    await expect(workflows.nap.get("missing")).rejects.toMatchObject({ name: "WorkflowNotFoundError" })
    await expect(live.sendEvent({ type: "has space" })).rejects.toThrow(TypeError)
    await expect(live.sendEvent({ type: "ok", payload: () => 1 })).rejects.toThrow(/payload must be JSON/)
    await expect(live.wait({ timeoutMs: -1 })).rejects.toThrow(RangeError)
    await expect(workflows.nap.list({ status: "sleeping" as never })).rejects.toThrow(/status must be one of/)
    await expect(workflows.nap.list({ limit: 0 })).rejects.toThrow(RangeError)
    const missing = (await workflows.nap.create({ id: "gone", params: { ms: 0 } }))
    await state.advance(0)
    await expect(missing.sendEvent({ type: "late" })).rejects.toMatchObject({ name: "WorkflowFinishedError" })
    await expect(missing.pause()).rejects.toMatchObject({ name: "WorkflowFinishedError" })
    const after = snapshot(state)
    // Only the instance made to be finished was written.
    expect(after[0]!.filter((row) => row.key !== "nap/gone")).toEqual(before[0])
    expect(after[1]!.filter((row) => row.instance !== "nap/gone")).toEqual(before[1])
    expect(after[2]).toEqual(before[2])
  })
})
