/**
 * The stated limits of a workflow instance: at most `MAX_STEPS` steps (the next one rejects, catchable),
 * a step's result within the payload limit (a larger one fails the step for good without a retry), and
 * a bad step config as the step's own `RangeError`.
 */
import { describe, expect, it } from "vitest"
import { DurabilityWorkflows, type WorkflowEvent, type WorkflowStep } from "durability"
import { TestObjectState } from "durability/testing"

describe("workflow limits", () => {
  it("takes at most 10 000 steps, stores a step's result within 1 MiB, and checks a step's config", async () => {
    const state = await TestObjectState.make()
    let calls = 0
    const workflows = new DurabilityWorkflows({
      context: state.context,
      workflows: {
        many: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) => {
          for (let i = 1; i <= 10_000; i++) await step.do(`s${i}`, () => i)
          return step.do("one too many", () => 0).catch((error: Error) => `${error.name}: ${error.message}`)
        },
        big: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) =>
          step.do("huge", { retries: { limit: 3, delay: 1 } }, () => {
            calls++
            return "x".repeat(1024 * 1024)
          }).catch((error: Error) => error.message),
        config: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) =>
          Promise.all([
            step.do("limit", { retries: { limit: -1, delay: 0 } }, () => 1).catch((error: Error) => error.name),
            step.do("delay", { retries: { limit: 1, delay: "soon" as never } }, () => 1).catch((error: Error) => error.name),
            step.do("timeout", { timeout: 0 }, () => 1).catch((error: Error) => error.name)
          ])
      }
    })
    const many = await workflows.many.create({ id: "m" })
    const big = await workflows.big.create({ id: "b" })
    const config = await workflows.config.create({ id: "c" })
    await state.advance(0)
    const manyInfo = await many.wait({ timeoutMs: 0 })
    expect(manyInfo.output).toBe("RangeError: A workflow instance takes at most 10000 steps")
    expect(state.storage.sql.exec("SELECT COUNT(*) AS n FROM durability_workflow_steps WHERE instance = 'many/m'").toArray()[0]).toEqual({ n: 10_000 })
    expect((await big.status()).output).toMatch(/The result of step "huge" is \d+ bytes as JSON; the limit is 1048576/)
    expect(calls).toBe(1)
    expect((await config.status()).output).toEqual(["RangeError", "RangeError", "RangeError"])
  }, 120_000)
})
