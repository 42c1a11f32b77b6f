import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { DurabilityJobs, type DurableJob } from "../../../src/index.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"

describe("DurabilityJobs smoke", () => {
  it("adds, runs, waits, flows", async () => {
    const memory = await Effect.runPromise(MemoryStorage.make)
    const jobs = new DurabilityJobs({
      context: { storage: memory },
      queues: {
        email: {
          handler: async (job: DurableJob<{ to: string }>) => {
            await job.progress(50)
            await job.log(`to ${job.payload.to}`)
            return { messageId: job.payload.to }
          }
        },
        report: {
          handler: async (job: DurableJob<{ n: number }>) => Object.keys(await job.childrenValues()).length
        }
      }
    })
    const added = await jobs.email.add({ payload: { to: "x" } })
    const done = await jobs.email.job(added.id).wait({ timeoutMs: 1000 })
    expect(done).toMatchObject({ state: "completed", result: { messageId: "x" }, progress: 50 })
    const flow = await jobs.flow({ queue: "report", payload: { n: 1 }, children: [{ queue: "email", payload: { to: "a" } }, { queue: "email", payload: { to: "b" } }] })
    const parent = await jobs.report.job(flow.id).wait({ timeoutMs: 1000 })
    expect(parent).toMatchObject({ state: "completed", result: 2 })
  })
})
