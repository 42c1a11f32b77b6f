/**
 * The test-kit example of docs/workflows.md ("Testing workflows"), run as it is printed: the code below the
 * marker is the page's block, character for character (the first test checks that), so the page shows a test
 * that passes.
 */
import { readFileSync } from "node:fs"
import { describe } from "vitest"

const MARKER = "// ---- docs/workflows.md, verbatim: ----"

describe("docs/workflows.md's test-kit example", () => {
  it("is this file's code below the marker, verbatim", () => {
    const own = readFileSync(new URL(import.meta.url), "utf8")
    const printed = own.slice(own.lastIndexOf(MARKER) + MARKER.length + 1)
    const page = readFileSync(new URL("../../../docs/workflows.md", import.meta.url), "utf8")
    expect(page).toContain("```ts\n" + printed + "```\n")
  })
})

// ---- docs/workflows.md, verbatim: ----
import { expect, it } from "vitest"
import { DurabilityWorkflows, type WorkflowEvent, type WorkflowStep, WorkflowTimeoutError } from "durability"
import { TestObjectState } from "durability/testing"

it("sleeps 30 days and times a 24-hour wait out, in milliseconds", async () => {
  const start = Date.parse("2026-03-01T09:00:00Z")
  const state = await TestObjectState.make({ startTime: start })
  const mails: Array<string> = []
  const workflows = new DurabilityWorkflows({
    context: state.context,
    workflows: {
      trial: async (event: WorkflowEvent<{ readonly email: string }>, step: WorkflowStep) => {
        await step.sleep("trial period", "30 days")
        await step.do("offer a plan", () => {
          mails.push(`offer to ${event.payload.email}`)
        })
        try {
          const answer = await step.waitForEvent<{ readonly plan: string }>("answer", { type: "plan.chosen", timeout: "24 hours" })
          return answer.payload.plan
        } catch (error) {
          if (error instanceof WorkflowTimeoutError) return "lapsed"
          throw error
        }
      }
    }
  })
  const ana = await workflows.trial.create({ id: "ana", params: { email: "ana@example.com" } })
  const bo = await workflows.trial.create({ id: "bo", params: { email: "bo@example.com" } })

  await state.advance("30 days")
  expect(mails).toEqual(["offer to ana@example.com", "offer to bo@example.com"])
  const waiting = await bo.status()
  expect(waiting.status).toBe("waiting")
  expect(waiting.waitingFor).toEqual(["event:plan.chosen"])
  expect(waiting.wakeAt).toBe(start + 31 * 24 * 60 * 60 * 1000)

  await ana.sendEvent({ type: "plan.chosen", payload: { plan: "pro" } })
  await state.advance("24 hours")
  expect((await ana.status()).output).toBe("pro")
  expect((await bo.status()).output).toBe("lapsed")
  expect(state.now()).toBe(start + 31 * 24 * 60 * 60 * 1000)
})
