/**
 * Batched job queues in workerd (real SQLite storage, real alarms), through `JobsObject`'s `batched`
 * queue (the public promise API, `batchHandler`): jobs added together run in calls of at most
 * `batch.size`, each settled on its own; a lone job waits `batch.waitMs` for more, on the real alarm,
 * across a reset of the object.
 */
import { describe, expect, it } from "vitest"
import { JOBS } from "./objects/JobsObject.js"
import { callsOf, expectIdle, finishedRow, freshJobs, reset, rowOf, stored } from "./support/jobs.js"

describe("jobs: batched queues", () => {
  it("jobs added together run in calls of at most `size`; one job's failure is retried alone", async () => {
    const jobs = freshJobs()
    const ids = ["a", "b", "c", "d", "e", "f"]
    await jobs.stub.addBulk("batched", ids.map((id) => ({ id, payload: { tag: id, ...(id === "b" ? { failTimes: 1 } : {}) } })))
    for (const id of ids) expect((await finishedRow(jobs, id, "batched")).status).toBe("completed")
    const calls = await expectIdle(jobs)
    // By job (the two calls run side by side: which one records first is theirs to decide).
    const first = calls.filter((call) => call.attempt === 1).sort((x, y) => x.id.localeCompare(y.id))
    // Every job's first call in a batch of the jobs added with it: the first `size`, then the rest.
    expect(first.map((call) => [call.id, call.note])).toEqual([
      ["a", "a,b,c,d"],
      ["b", "a,b,c,d"],
      ["c", "a,b,c,d"],
      ["d", "a,b,c,d"],
      ["e", "e,f"],
      ["f", "e,f"]
    ])
    // b failed alone: its retry is a batch of its own; the others completed on their first call.
    expect(calls.filter((call) => call.attempt === 2).map((call) => [call.id, call.note])).toEqual([["b", "b"]])
    const b = (await rowOf(jobs, "b", "batched"))!
    expect([b.attempt, stored(b.result)]).toEqual([2, { tag: "b", calls: 2 }])
    const events = await jobs.stub.events()
    expect(events.filter((event) => event.type === "retry_scheduled").map((event) => event.id)).toEqual(["b"])
    expect(events.filter((event) => event.type === "completed").map((event) => event.id).sort()).toEqual(ids)
  })

  it("a lone job waits `waitMs` for more on the real alarm, across a reset, then runs with those that came", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("batched", { id: "first", payload: {} })
    // The wait is stored with the queue, and the job is moved to its end.
    const until = (await jobs.stub.table("queues")).find((row) => row.queue === "batched")?.batch_until
    expect(typeof until).toBe("number")
    const waiting = (await rowOf(jobs, "first", "batched"))!
    expect(waiting.next_attempt_at).toBe(until)
    expect(Number(until) - waiting.created_at).toBeGreaterThanOrEqual(JOBS.batchWaitMs)
    // Memory is lost; the stored wait and the alarm are not.
    // `waitMs` (3 s) leaves a loaded machine room for the reset and the add before the wait's end.
    await reset(jobs)
    await jobs.stub.add("batched", { id: "second", payload: {} })
    expect((await rowOf(jobs, "second", "batched"))!.next_attempt_at).toBe(until)
    const calls = await callsOf(jobs, "batched", 2)
    expect(calls.map((call) => [call.id, call.note])).toEqual([["first", "first,second"], ["second", "first,second"]])
    // Not before the wait's end.
    for (const call of calls) expect(call.started_at).toBeGreaterThanOrEqual(Number(until))
    await finishedRow(jobs, "second", "batched")
    await expectIdle(jobs)
    expect((await jobs.stub.table("queues")).find((row) => row.queue === "batched")?.batch_until).toBeNull()
  })
})
