/**
 * Workflows bugs found by the reliability suites (issue 27), each with the scenario that showed it, under the
 * test kit's clock.
 */
import { describe, expect, it } from "vitest"
import { DurabilityWorkflows, type WorkflowEvent, type WorkflowStep } from "durability"
import { TestObjectState } from "durability/testing"

describe("workflows regressions", () => {
  it("an id created again after purge does not inherit a pause asked during the old instance's last step", async () => {
    const state = await TestObjectState.make({ startTime: 1_000 })
    let release: () => void = () => undefined
    let hold = true
    const workflows = new DurabilityWorkflows({
      context: state.context,
      workflows: {
        last: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) => {
          await step.do("only", () => (hold ? new Promise<number>((resolve) => (release = () => resolve(1))) : 2))
          return "done"
        }
      }
    })
    const first = await workflows.last.create({ id: "x" })
    await state.advance(0)
    // Paused while its last step runs: the step finishes and the handler returns, so the instance completes.
    await first.pause()
    release()
    await state.advance(0)
    expect((await first.status()).status).toBe("complete")
    await state.advance(1_000)
    expect(await workflows.purgeBefore(state.now())).toBe(1)

    hold = false
    const again = await workflows.last.create({ id: "x" })
    await state.advance(0)
    // Before the fix: "waiting" for nothing (no timer, no event, no child), never woken while the object lived.
    const info = await again.status()
    expect(info.status).toBe("complete")
    expect(info.output).toBe("done")
    expect(state.storage.sql.exec("SELECT COUNT(*) AS n FROM durability_timers").toArray()).toEqual([{ n: 0 }])
  })
})
