/**
 * Durable steps across a forced reset of the object (`state.abort()`) in workerd, with real SQLite
 * (the memo table's triggers) and the real alarm: a handler stored step "a", then the object was
 * reset mid-handler; the retry in a fresh instance gets "a"'s stored value without running it again,
 * and the memo rows are gone once the record completed. For an operation and for a job.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import * as Json from "../../src/shared/json.js"
import type { StepA, StepsObject } from "./objects/StepsObject.js"
import { IDLE, isIdle } from "./objects/idle.js"
import { waitFor } from "./support/lab.js"

interface Steps {
  readonly id: DurableObjectId
  stub: DurableObjectStub<StepsObject>
}

const fresh = (): Steps => {
  const id = env.STEPS_OBJECT.newUniqueId()
  return { id, stub: env.STEPS_OBJECT.get(id) }
}

/** In-memory state, timers and the running handler are gone; storage and the alarm stay. */
const reset = async (steps: Steps): Promise<void> => {
  await expect(runInDurableObject(steps.stub, (_instance, state) => state.abort("reset by the scenario"))).rejects.toThrow()
  steps.stub = env.STEPS_OBJECT.get(steps.id)
}

describe.each([
  { kind: "operation" as const, capability: "operations", key: "order-1", start: (steps: Steps) => steps.stub.order("order-1", { hold: true }) },
  { kind: "job" as const, capability: "jobs", key: "render/order-1", start: (steps: Steps) => steps.stub.render("order-1", { hold: true }) }
])("steps of an $kind across a reset mid-handler", ({ capability, key, kind, start }) => {
  it("the retry gets step \"a\" as stored, without running it again; the memos are gone after completion", async () => {
    const steps = fresh()
    const first = await steps.stub.whoami()
    await start(steps)
    // Step "a" is stored and the handler holds (attempt 1, no timeout in reach) until the object is reset.
    const [memo] = await waitFor(() => steps.stub.memos(), (rows) => rows.length === 1)
    expect(memo).toMatchObject({ capability, record_key: key, name: "a" })
    const stored = Json.decode(memo!.value) as StepA
    expect(stored).toEqual({ instance: first, attempt: 1 })
    expect(await steps.stub.record(kind, "order-1")).toMatchObject({ status: "pending", attempt: 1 })
    await waitFor(() => steps.stub.calls(), (calls) => calls.length === 1)

    await reset(steps)
    // Nothing calls the new instance: the alarm armed with the record wakes it (within alarmMinDelayMs, or
    // workerd's retry of an alarm the reset cut short, ~2 s later); lab's deadline is a bound, not a premise.
    const done = await waitFor(() => steps.stub.record(kind, "order-1"), (row) => row?.status === "completed")
    expect(done?.attempt).toBe(2)
    expect(Json.decode(done!.result!)).toEqual({ a: stored, b: "b of attempt 2" })

    const calls = await steps.stub.calls()
    expect(calls.map((call) => [call.attempt, call.instance === first])).toEqual([[1, true], [2, false]])
    expect(JSON.parse(calls[1]!.a)).toEqual(stored)
    // "a" really ran once (in the first instance), "b" once (in the second).
    const runs = await steps.stub.runs()
    expect(runs.map((run) => [run.step, run.attempt, run.instance === first])).toEqual([["a", 1, true], ["b", 2, false]])
    expect(await steps.stub.memos()).toEqual([])
    expect(await waitFor(() => steps.stub.idle(), isIdle)).toEqual(IDLE)
  })
})
