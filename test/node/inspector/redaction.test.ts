/**
 * The redaction hook of `answerInspection(scheduler, request, { redact })`: stored payloads, results,
 * progress, log lines and error messages pass through it before they leave the object, with where they
 * come from; a hook that throws hides the text. On `TestObjectState`.
 */
import { describe, expect, it } from "vitest"
import {
  answerInspection,
  type DurabilityInspectAnswer,
  DurabilityFanout,
  DurabilityJobs,
  type DurabilityRedactionTarget,
  DurabilityScheduler,
  type DurableJob
} from "../../../src/index.js"
import { TestObjectState } from "../../../src/testing.js"

const valueOf = (answer: DurabilityInspectAnswer): any => {
  if (!answer.ok) throw new Error(`expected a value, got ${answer.failure._tag}: ${answer.failure.message}`)
  return answer.value
}

const SECRET = "sk_live_0123456789"

describe("answerInspection: redaction", () => {
  it("passes payloads, results, progress, logs and errors through the hook, with their capability, queue and field", async () => {
    const state = await TestObjectState.make({ startTime: 1_000 })
    const scheduler = new DurabilityScheduler({ context: state.context, log: () => undefined })
    const jobs = new DurabilityJobs({
      scheduler,
      queues: {
        charge: {
          retries: { maxAttempts: 1 },
          handler: async (job: DurableJob<{ readonly card: string; readonly cents: number }>) => {
            await job.progress({ card: job.payload.card })
            await job.log(`charging card ${job.payload.card}`)
            if (job.payload.cents > 100) throw new Error(`card ${job.payload.card} declined`)
            return { receipt: `r-${job.payload.card}` }
          }
        }
      }
    })
    await jobs.charge.add({ id: "ok", payload: { card: SECRET, cents: 50 } })
    await jobs.charge.add({ id: "bad", payload: { card: SECRET, cents: 500 } })
    await state.advance("1 second")

    const seen: Array<Omit<DurabilityRedactionTarget, "text">> = []
    const redact = (target: DurabilityRedactionTarget) => {
      seen.push({ capability: target.capability, queue: target.queue, field: target.field })
      return target.text.replaceAll(SECRET, "[card]")
    }
    const detail = valueOf(await answerInspection(scheduler, { _tag: "Job", queue: "charge", id: "bad" }, { redact }))
    const page = valueOf(await answerInspection(scheduler, { _tag: "Jobs", queue: "charge" }, { redact }))
    expect(JSON.stringify([detail, page])).not.toContain(SECRET)
    expect(detail.job.payload.json).toBe('{"card":"[card]","cents":500}')
    expect(detail.job.error).toEqual({ name: "Error", message: "card [card] declined" })
    expect(detail.logs.items.map((line: { message: string }) => line.message)).toEqual(["charging card [card]"])
    expect(page.items.find((item: { id: string }) => item.id === "ok").result.json).toBe('{"receipt":"r-[card]"}')
    expect(new Set(seen.map((target) => `${target.capability}/${target.queue}/${target.field}`))).toEqual(
      new Set(["jobs/charge/payload", "jobs/charge/progress", "jobs/charge/error", "jobs/charge/log", "jobs/charge/result"])
    )
    // Without a hook, what is stored is shown.
    expect(JSON.stringify(valueOf(await answerInspection(scheduler, { _tag: "Job", queue: "charge", id: "bad" })))).toContain(SECRET)
    // A hook that throws hides the text rather than showing it.
    const failing = valueOf(await answerInspection(scheduler, { _tag: "Job", queue: "charge", id: "bad" }, {
      redact: () => {
        throw new Error("bug in the hook")
      }
    }))
    expect(JSON.stringify(failing)).not.toContain(SECRET)
    expect(failing.job.payload.json).toBe("[redaction failed]")
  })

  it("passes a fanout delivery's last error through the hook, with the capability and field", async () => {
    const state = await TestObjectState.make({ startTime: 1_000 })
    const scheduler = new DurabilityScheduler({ context: state.context, log: () => undefined })
    const fanout = new DurabilityFanout<{ readonly card: string }>({
      scheduler,
      retries: { maxAttempts: 3, delay: () => 60_000 },
      targets: {
        billing: { deliver: async (messages) => {
          throw new Error(`card ${messages[0]!.body.card} declined`)
        } }
      }
    })
    expect(await fanout.enqueue({ id: "m1", body: { card: SECRET } })).toMatchObject({ success: true })
    await fanout.alarm()
    const seen: Array<string> = []
    const redact = (target: DurabilityRedactionTarget) => {
      seen.push(`${target.capability}/${target.field}`)
      return target.text.replaceAll(SECRET, "[card]")
    }
    const page = valueOf(await answerInspection(scheduler, { _tag: "FanoutDeliveries" }, { redact }))
    expect(page.items).toEqual([expect.objectContaining({ messageId: "m1", target: "billing", attempt: 1, error: { name: "Error", message: "card [card] declined" } })])
    expect(JSON.stringify(page)).not.toContain(SECRET)
    expect(seen).toEqual(["fanout/error"])
  })
})
