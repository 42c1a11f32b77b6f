/**
 * Bulk operations by filter in workerd (real SQLite storage, real alarms), through `JobsObject` (the
 * public promise API): a cancel of every queue's jobs in chunks by cursor, a running handler's signal
 * aborted among them, then a removal of what it canceled; the object ends idle (no job, no alarm).
 */
import { describe, expect, it } from "vitest"
import type { DurableJobBulkResult, DurableJobFilter } from "../../src/index.js"
import { callsOf, expectIdle, finishedRow, freshJobs, type Jobs } from "./support/jobs.js"
import { waitFor } from "./support/lab.js"

/** Every chunk of one run, following its cursor. */
const run = async (jobs: Jobs, action: "cancel" | "remove", filter: DurableJobFilter, limit: number) => {
  const chunks: Array<DurableJobBulkResult> = []
  let cursor: string | undefined
  do {
    const chunk = await jobs.stub.bulk(action, filter, cursor === undefined ? { limit, reason: "bulk" } : { limit, reason: "bulk", cursor })
    chunks.push(chunk)
    cursor = chunk.cursor
  } while (cursor !== undefined)
  return chunks
}

describe("jobs: bulk operations", () => {
  it("cancel every queue's jobs in chunks: waiting and delayed ones at once, a running one through its signal; then remove them", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("slow", { id: "running", payload: { holdAttempts: 1 } })
    await callsOf(jobs, "slow", 1, "running")
    await jobs.stub.pause("plain")
    for (let batch = 0; batch < 3; batch++) {
      await jobs.stub.addBulk("plain", Array.from({ length: 80 }, (_, n) => ({ id: `w-${batch}-${n}`, payload: {} })))
    }
    await jobs.stub.addBulk("ordered", Array.from({ length: 10 }, (_, n) => ({ id: `d-${n}`, payload: {}, delayMs: 60_000 })))
    // The delayed jobs armed the alarm (read after any alarm handler running now, during which workerd shows none).
    expect(await waitFor(() => jobs.stub.alarmAt(), (at) => at !== null)).not.toBeNull()

    const canceled = await run(jobs, "cancel", { allQueues: true }, 100)
    expect(canceled.map((chunk) => chunk.affected)).toEqual([100, 100, 51])
    expect(canceled.map((chunk) => chunk.done)).toEqual([false, false, true])

    const aborted = await finishedRow(jobs, "running", "slow")
    expect(aborted).toMatchObject({ status: "canceled", cancel_reason: "bulk", attempt: 1 })
    const [call] = await callsOf(jobs, "slow", 1, "running")
    // The handler threw the signal's reason; the job is canceled all the same, not failed nor retried.
    expect(call).toMatchObject({ aborted: 1, abort_reason: "JobCanceledError", outcome: "failed" })
    const rows = await jobs.stub.rows()
    expect(rows.filter((row) => row.status !== "canceled")).toEqual([])
    const events = (await jobs.stub.events()).filter((event) => event.type === "canceled")
    expect(new Set(events.map((event) => `${event.queue}/${event.id}`)).size).toBe(251)
    expect(events).toHaveLength(251)

    const removed = await run(jobs, "remove", { allQueues: true, states: ["canceled"] }, 500)
    expect(removed).toEqual([{ matched: 251, affected: 251, examined: 251, done: true }])
    expect(await jobs.stub.rows()).toEqual([])
    await jobs.stub.resume("plain")
    await expectIdle(jobs)
  })
})
