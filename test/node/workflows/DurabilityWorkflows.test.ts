/**
 * The promise face of workflows under the test kit's clock: steps stored once, sleeps and event waits
 * that suspend the instance (no permit, no fiber) and wake by the object's alarm, events sent before
 * the wait, timeouts, retries with backoff, children, pause/resume/terminate/restart, replay checks.
 */
import { describe, expect, it } from "vitest"
import {
  DurabilityScheduler,
  DurabilityWorkflows,
  NonRetryableError,
  type WorkflowEvent,
  type WorkflowStep,
  WorkflowTimeoutError
} from "durability"
import { TestObjectState } from "durability/testing"

const rows = (state: TestObjectState.TestObjectState, sql: string) => state.storage.sql.exec(sql).toArray()

describe("DurabilityWorkflows", () => {
  it("runs steps once, sleeps for days on the alarm, and completes with its output", async () => {
    const state = await TestObjectState.make({ startTime: 1_000 })
    const calls: Array<string> = []
    const build = (context: typeof state.context) => {
      const scheduler = new DurabilityScheduler({ context })
      return new DurabilityWorkflows({
        scheduler,
        workflows: {
          signup: async (event: WorkflowEvent<{ readonly email: string }>, step: WorkflowStep) => {
            const sent = await step.do("send mail", async () => {
              calls.push(`mail:${event.payload.email}`)
              return { messageId: "m-1" }
            })
            await step.sleep("wait three days", "3 days")
            const tips = await step.do("send tips", () => {
              calls.push("tips")
              return 2
            })
            return { sent: sent.messageId, tips }
          }
        }
      })
    }
    const workflows = build(state.context)
    const instance = await workflows.signup.create({ id: "alice", params: { email: "a@example.com" } })
    await state.advance(0)
    expect(calls).toEqual(["mail:a@example.com"])
    const waiting = await instance.status()
    expect(waiting.status).toBe("waiting")
    expect(waiting.wakeAt).toBe(1_000 + 3 * 86_400_000)
    expect(waiting.steps.map((s) => [s.name, s.status])).toEqual([["send mail", "completed"], ["wait three days", "waiting"]])
    // A suspended instance is no record to claim: only a durable timer at its wake-up holds the alarm.
    expect(rows(state, "SELECT status FROM durability_workflows")).toEqual([{ status: "suspended" }])
    expect(state.storage.alarmAt).toBe(1_000 + 3 * 86_400_000)

    // Evicted while asleep: a new instance of the object wakes it from storage alone.
    const next = await state.restart()
    const again = build(next.context)
    await next.advance("3 days")
    const done = await again.signup.get("alice").then((handle) => handle.status())
    expect(done.status).toBe("complete")
    expect(done.output).toEqual({ sent: "m-1", tips: 2 })
    expect(calls).toEqual(["mail:a@example.com", "tips"])
  })

  it("keeps an event sent before the wait and gives it to the first matching wait, once", async () => {
    const state = await TestObjectState.make()
    const seen: Array<unknown> = []
    const workflows = new DurabilityWorkflows({
      context: state.context,
      workflows: {
        verify: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) => {
          await step.sleep("a while", 1_000)
          const first = await step.waitForEvent<{ code: number }>("verified", { type: "email.verified", timeout: "1 hour" })
          seen.push(first.payload)
          const second = await step.waitForEvent<{ code: number }>("again", { type: "email.verified", timeout: "1 hour" })
          seen.push(second.payload)
          return first.payload.code + second.payload.code
        }
      }
    })
    const instance = await workflows.verify.create({ id: "v1" })
    await state.advance(0)
    // Sent while it sleeps, before it reaches the wait.
    await instance.sendEvent({ type: "email.verified", payload: { code: 1 } })
    await state.advance(1_000)
    expect(seen).toEqual([{ code: 1 }])
    expect((await instance.status()).status).toBe("waiting")
    await instance.sendEvent({ type: "email.verified", payload: { code: 2 } })
    await state.advance(0)
    const done = await instance.status()
    expect(done.status).toBe("complete")
    expect(done.output).toBe(3)
    expect(rows(state, "SELECT consumed_seq FROM durability_workflow_events ORDER BY id")).toEqual([
      { consumed_seq: 2 },
      { consumed_seq: 3 }
    ])
  })

  it("times a wait out with WorkflowTimeoutError, catchable in the handler", async () => {
    const state = await TestObjectState.make()
    const workflows = new DurabilityWorkflows({
      context: state.context,
      workflows: {
        wait: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) => {
          try {
            await step.waitForEvent("approval", { type: "approved", timeout: "24 hours" })
            return "approved"
          } catch (error) {
            return error instanceof WorkflowTimeoutError ? `timed out: ${error.name}` : "other"
          }
        }
      }
    })
    const instance = await workflows.wait.create({ id: "w" })
    await state.advance("23 hours")
    expect((await instance.status()).status).toBe("waiting")
    await state.advance("1 hour")
    expect((await instance.status()).output).toBe("timed out: WorkflowTimeoutError")
    await expect(instance.sendEvent({ type: "approved" })).rejects.toMatchObject({ name: "WorkflowFinishedError" })
  })

  it("retries a failing step durably with backoff, and ends retries on NonRetryableError", async () => {
    const state = await TestObjectState.make()
    const attempts: Array<number> = []
    const workflows = new DurabilityWorkflows({
      context: state.context,
      workflows: {
        flaky: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) =>
          step.do("call", { retries: { limit: 3, delay: "1 second", backoff: "exponential" } }, ({ attempt }) => {
            attempts.push(attempt)
            if (attempt < 3) throw new Error(`boom ${attempt}`)
            return "ok"
          }),
        fatal: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) =>
          step.do("call", () => {
            throw new NonRetryableError("no point")
          })
      }
    })
    const flaky = await workflows.flaky.create({ id: "f" })
    await state.advance(0)
    expect(attempts).toEqual([1])
    await state.advance(999)
    expect(attempts).toEqual([1])
    await state.advance(1)
    expect(attempts).toEqual([1, 2])
    await state.advance(2_000)
    expect(attempts).toEqual([1, 2, 3])
    expect((await flaky.status()).output).toBe("ok")
    const fatal = await workflows.fatal.create({ id: "x" })
    await state.advance(0)
    const info = await fatal.status()
    expect(info.status).toBe("errored")
    expect(info.error).toEqual({ name: "NonRetryableError", message: "no point" })
  })

  it("runs a child and surfaces its failure as WorkflowChildError", async () => {
    const state = await TestObjectState.make()
    const workflows = new DurabilityWorkflows({
      context: state.context,
      workflows: {
        parent: async (event: WorkflowEvent<{ readonly fail: boolean }>, step: WorkflowStep) => {
          try {
            return await step.child<number>("report", "child", { params: { fail: event.payload.fail } })
          } catch (error) {
            return `${(error as Error).name}`
          }
        },
        child: async (event: WorkflowEvent<{ readonly fail: boolean }>, step: WorkflowStep) => {
          await step.sleep("work", "1 minute")
          if (event.payload.fail) throw new Error("child broke")
          return 42
        }
      }
    })
    const ok = await workflows.parent.create({ id: "p1", params: { fail: false } })
    const bad = await workflows.parent.create({ id: "p2", params: { fail: true } })
    await state.advance(0)
    expect((await ok.status()).waitingFor).toEqual(["child:child/p1-1"])
    await state.advance("1 minute")
    expect((await ok.status()).output).toBe(42)
    expect((await bad.status()).output).toBe("WorkflowChildError")
    expect((await (await workflows.child.get("p2-1")).status()).error).toEqual({ name: "Error", message: "child broke" })
  })

  it("fails the instance with WorkflowReplayError when the code asks for another step at a stored position", async () => {
    const state = await TestObjectState.make()
    let version = 1
    const workflows = new DurabilityWorkflows({
      context: state.context,
      workflows: {
        change: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) => {
          await step.do(version === 1 ? "first" : "renamed", () => 1)
          await step.sleep("nap", 1_000)
          return "done"
        }
      }
    })
    const instance = await workflows.change.create({ id: "c" })
    await state.advance(0)
    version = 2
    await state.advance(1_000)
    const info = await instance.status()
    expect(info.status).toBe("errored")
    expect(info.error?.name).toBe("WorkflowReplayError")
    expect(info.error?.message).toContain(`do "first"`)
    expect(info.error?.message).toContain(`do "renamed"`)
  })

  it("pauses after the running step, resumes, and terminates with an aborted signal", async () => {
    const state = await TestObjectState.make()
    let release: () => void = () => undefined
    const aborted: Array<string> = []
    const ran: Array<string> = []
    const workflows = new DurabilityWorkflows({
      context: state.context,
      workflows: {
        long: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) => {
          await step.do("one", () => new Promise<string>((resolve) => {
            release = () => resolve("1")
          }))
          await step.do("two", () => {
            ran.push("two")
            return 2
          })
          return "end"
        },
        hang: async (_event: WorkflowEvent<unknown>, step: WorkflowStep) =>
          step.do("forever", ({ signal }) =>
            new Promise((_, reject) => {
              signal.addEventListener("abort", () => {
                aborted.push(String((signal.reason as Error).name))
                reject(signal.reason)
              })
            }))
      }
    })
    const long = await workflows.long.create({ id: "l" })
    await state.advance(0)
    expect((await long.status()).status).toBe("running")
    await long.pause()
    release()
    await state.advance(0)
    const paused = await long.status()
    expect(paused.status).toBe("paused")
    expect(paused.steps.map((s) => s.name)).toEqual(["one"])
    expect(ran).toEqual([])
    await long.resume()
    await state.advance(0)
    expect((await long.status()).output).toBe("end")

    const hang = await workflows.hang.create({ id: "h" })
    await state.advance(0)
    await hang.terminate()
    await state.advance(0)
    expect(aborted).toEqual(["WorkflowTerminatedError"])
    expect((await hang.status()).status).toBe("terminated")
    await hang.restart()
    await state.advance(0)
    expect((await hang.status()).status).toBe("running")
    await hang.terminate()
  })
})
