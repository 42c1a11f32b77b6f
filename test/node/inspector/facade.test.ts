/**
 * The promise face: `answerInspection(scheduler, request)` on an object built with `TestObjectState`
 * (its clock moved by the test), answering encoded requests as they arrive over RPC, never rejecting.
 */
import { describe, expect, it } from "vitest"
import { answerInspection, DurabilityJobs, type DurabilityInspectAnswer, type DurableJob, DurabilityScheduler } from "../../../src/index.js"
import { TestObjectState } from "../../../src/testing.js"

const quiet = () => undefined

const valueOf = (answer: DurabilityInspectAnswer): any => {
  if (!answer.ok) throw new Error(`expected a value, got ${answer.failure._tag}: ${answer.failure.message}`)
  return answer.value
}

describe("DurabilityScheduler.inspect", () => {
  it("answers the overview, jobs, a job and dead letters; retry, pause and redrive act through the queue", async () => {
    const state = await TestObjectState.make({ startTime: 1_000 })
    const scheduler = new DurabilityScheduler({ context: state.context, log: quiet })
    const jobs = new DurabilityJobs({
      scheduler,
      queues: {
        email: {
          retries: { maxAttempts: 1 },
          deadLetter: true,
          handler: async (job: DurableJob<{ readonly to: string }>) => {
            if (job.payload.to === "bounce") throw new Error("mailbox full")
            return `sent to ${job.payload.to}`
          }
        }
      }
    })
    await jobs.email.add({ id: "ok", payload: { to: "ann" } })
    await jobs.email.add({ id: "bad", payload: { to: "bounce" } })
    await state.advance("1 second")

    const overview = valueOf(await answerInspection(scheduler, { _tag: "Overview" }))
    // Plain JSON: what crosses RPC and HTTP unchanged.
    expect(JSON.parse(JSON.stringify(overview))).toEqual(overview)
    expect(overview.scheduler.capabilities).toEqual(["jobs"])
    expect(overview.jobs.queues).toEqual([
      expect.objectContaining({ name: "email", processing: "inline", paused: false, deadLetters: 1 })
    ])
    expect(overview.jobs.queues[0].counts).toMatchObject({ completed: 1, failed: 1 })

    const page = valueOf(await answerInspection(scheduler, { _tag: "Jobs", queue: "email" }))
    expect(page.items.map((item: { id: string; state: string }) => [item.id, item.state])).toEqual([["ok", "completed"], ["bad", "failed"]])
    expect(page.items[0].payload).toEqual({ json: "{\"to\":\"ann\"}", truncated: false })
    expect(page.items[0].result).toEqual({ json: "\"sent to ann\"", truncated: false })

    const detail = valueOf(await answerInspection(scheduler, { _tag: "Job", queue: "email", id: "bad" }))
    expect(detail.job).toMatchObject({ id: "bad", state: "failed", error: { name: "Error", message: "mailbox full" } })

    const letters = valueOf(await answerInspection(scheduler, { _tag: "DeadLetters", queue: "email" }))
    expect(letters.items).toEqual([expect.objectContaining({ id: "bad", attempts: 1, error: { name: "Error", message: "mailbox full" } })])

    expect(valueOf(await answerInspection(scheduler, { _tag: "PauseQueue", queue: "email" }))).toEqual({ changed: 1 })
    expect(await jobs.email.isPaused()).toBe(true)
    expect(valueOf(await answerInspection(scheduler, { _tag: "RedriveDeadLetters", queue: "email" }))).toEqual({ changed: 1 })
    expect((await jobs.email.get("bad"))?.state).toBe("waiting")
    expect(valueOf(await answerInspection(scheduler, { _tag: "RetryJob", queue: "email", id: "bad" }))).toEqual({ changed: 0 })

    const missing = await answerInspection(scheduler, { _tag: "Jobs", queue: "sms" })
    expect(missing).toEqual({ ok: false, failure: { _tag: "NotFound", message: "No queue \"sms\" in this object (queues: email)" } })
    for (const request of [{ _tag: "Nope" }, undefined, "Overview", { _tag: "Jobs", queue: "email", limit: 500 }]) {
      const bad = await answerInspection(scheduler, request)
      expect(bad.ok ? undefined : bad.failure._tag).toBe("BadRequest")
    }
    expect(await answerInspection(scheduler, { _tag: "Schedules" })).toEqual({
      ok: false,
      failure: { _tag: "NotFound", message: "This object has no schedules (attached: jobs)" }
    })
  })
})
