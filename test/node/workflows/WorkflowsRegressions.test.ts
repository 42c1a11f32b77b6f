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

describe("workflows regressions: pause", () => {
  it("no step's callback begins after pause() resolved, whatever moment of the run the pause lands in", async () => {
    // The pause lands at a different moment of the run for each offset: some while step "two" is being recorded.
    const began: Array<{ readonly offset: number; readonly pausedRow: boolean; readonly afterPause: boolean }> = []
    let pausedFirst = 0
    for (let offset = 0; offset < 24; offset++) {
      const state = await TestObjectState.make({ startTime: 1_000 })
      let release: () => void = () => undefined
      /** Between pause() resolving and resume() being called. */
      let paused = false
      const workflows = new DurabilityWorkflows({
        context: state.context,
        workflows: {
          two: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) => {
            await step.do("one", () => new Promise<number>((resolve) => (release = () => resolve(1))))
            await step.do("two", () => {
              const [row] = state.storage.sql.exec("SELECT paused FROM durability_workflows").toArray()
              began.push({ offset, pausedRow: Number(row?.paused) === 1, afterPause: paused })
              return 2
            })
            return "done"
          }
        }
      })
      const instance = await workflows.two.create({ id: "p" })
      await state.advance(0)
      release()
      for (let turn = 0; turn < offset; turn++) await Promise.resolve()
      // At the later offsets the run has ended before the pause: it is refused, and that offset proves nothing.
      const accepted = await instance.pause().then(() => true, (error: Error) => {
        expect(error.name).toBe("WorkflowFinishedError")
        return false
      })
      paused = accepted
      if (accepted && began.length === offset) pausedFirst++
      await state.advance(0)
      // A pause that lands while step "two" runs lets it finish, and the instance completes: nothing to resume.
      if (accepted && (await instance.status()).status === "paused") {
        paused = false
        await instance.resume()
      }
      await state.advance(0)
      expect((await instance.status()).output).toBe("done")
    }
    // Step "two" ran once per offset, never once its instance's pause had committed (or resolved).
    expect(began).toHaveLength(24)
    expect(began.filter((run) => run.pausedRow || run.afterPause)).toEqual([])
    // The offsets reach the run at every stage: some pauses land before step "two", some after the run ended.
    expect(pausedFirst).toBeGreaterThan(0)
  })
})
