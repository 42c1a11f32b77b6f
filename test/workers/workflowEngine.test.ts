/**
 * `durability/workflow-engine` in workerd: a workflow's `DurableClock.sleep` is a durable timer on the
 * object's one alarm. The object is reset while the workflow sleeps (no fiber, no memory of it left); the
 * real alarm wakes a fresh instance, which resumes the workflow through the engine: the activity before
 * the sleep is replayed from the journal, the one after runs once, in the new instance.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import type { WorkflowEngineObject } from "./objects/WorkflowEngineObject.js"
import { IDLE, isIdle } from "./objects/idle.js"
import { waitFor } from "./support/lab.js"

describe("durability/workflow-engine in workerd", () => {
  it("a DurableClock.sleep is woken by the real alarm, in a fresh instance after a reset", async () => {
    const id = env.WORKFLOW_ENGINE_OBJECT.newUniqueId()
    let stub: DurableObjectStub<WorkflowEngineObject> = env.WORKFLOW_ENGINE_OBJECT.get(id)
    const first = await stub.whoami()
    const executionId = await stub.start("nap-1", 2)
    expect(await waitFor(() => stub.poll(executionId), (result) => result.tag === "Suspended")).toEqual({ tag: "Suspended" })
    const [timer] = await stub.timers()
    expect(timer?.owner).toBe("effectWorkflows")

    // Reset: in-memory state is gone; storage (the execution, its journal, its timer) and the alarm stay.
    await expect(runInDurableObject(stub, (_instance, state) => state.abort("reset while the workflow sleeps"))).rejects
      .toThrow()
    stub = env.WORKFLOW_ENGINE_OBJECT.get(id)

    // Nothing calls the object until the workflow reports its end to the ledger (another object): the alarm's
    // delivery makes the fresh instance (a call before would make it, and its in-memory early timer could run the
    // due work first).
    const ledger = env.EFFECT_LEDGER.get(env.EFFECT_LEDGER.idFromName(id.toString()))
    await waitFor(() => ledger.effects(), (effects) => effects.some((effect) => effect.source === "nap/nap-1"))
    const done = await waitFor(() => stub.poll(executionId), (result) => result.tag === "Complete")
    expect(done).toEqual({ tag: "Complete", value: "before nap-1 -> after nap-1" })
    const runs = await stub.runs()
    // "before" ran once, in the first instance (replayed from the journal after); "after" ran once, in the
    // fresh instance that the platform's alarm() woke: the real alarm resumed it.
    expect(runs.map((run) => [run.step, run.instance === first, run.wokenBy])).toEqual([
      ["before nap-1", true, "call"],
      ["after nap-1", false, "alarm"]
    ])
    expect(await stub.timers()).toEqual([])
    expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
  })
})
