/**
 * A queue's concurrency by key in workerd (real SQLite storage, real alarms): one running job per
 * tenant and two in all; a job waiting for its key is not claimed and starts when its key's running
 * job ends; a reset mid-run loses nothing and still runs one job of a key at a time; keys take turns.
 */
import { describe, expect, it } from "vitest"
import { JOBS, type JobCall } from "./objects/JobsObject.js"
import { callsOf, expectIdle, freshJobs, reset, rowOf, waitFor } from "./support/jobs.js"

/** No two calls of one tenant overlap in time within an instance (an ended call's end is its last moment). */
const overlapping = (calls: ReadonlyArray<JobCall>, tenantOf: (call: JobCall) => string): Array<string> => {
  const found: Array<string> = []
  for (const a of calls) {
    for (const b of calls) {
      if (a.seq >= b.seq || a.instance !== b.instance || tenantOf(a) !== tenantOf(b)) continue
      const aEnd = a.ended_at ?? Number.MAX_SAFE_INTEGER
      if (b.started_at < aEnd) found.push(`${a.id}#${a.attempt} and ${b.id}#${b.attempt}`)
    }
  }
  return found
}

describe("jobs: concurrency by key", () => {
  it("one running job per tenant: the next of a tenant waits unclaimed and starts when the running one ends", async () => {
    const jobs = freshJobs()
    await jobs.stub.addBulk("keyed", [
      { id: "a1", payload: { tenant: "a", holdUntil: "a1" } },
      { id: "a2", payload: { tenant: "a", holdUntil: "a2" } },
      { id: "a3", payload: { tenant: "a" } },
      { id: "b1", payload: { tenant: "b", holdUntil: "b1" } }
    ])
    const first = await callsOf(jobs, "keyed", 2)
    expect(first.map((call) => call.id).sort()).toEqual(["a1", "b1"])
    // Stored with its key, waiting for it; its attempt not counted.
    expect(await rowOf(jobs, "a2", "keyed")).toMatchObject({ concurrency_key: "a", waiting_key: 1, attempt: 0, status: "pending" })

    await jobs.stub.release("a1")
    await callsOf(jobs, "keyed", 1, "a2")
    expect(await rowOf(jobs, "a3", "keyed")).toMatchObject({ waiting_key: 1, attempt: 0 })
    await jobs.stub.release("a2")
    await jobs.stub.release("b1")
    await callsOf(jobs, "keyed", 1, "a3")
    const calls = (await expectIdle(jobs)).filter((call) => call.queue === "keyed")
    expect(calls.map((call) => call.id)).toEqual(["a1", "b1", "a2", "a3"])
    expect(calls.every((call) => call.note === "tenant 1" && call.attempt === 1)).toBe(true)
    expect(Math.max(...calls.map((call) => call.concurrent))).toBeLessThanOrEqual(JOBS.keyedTotal)
    expect(overlapping(calls, (call) => call.id.slice(0, 1))).toEqual([])
  })

  it("a reset mid-run: the evicted job runs again first, then the others of its key, one at a time; none is lost", async () => {
    const jobs = freshJobs()
    await jobs.stub.addBulk("keyed", [
      { id: "a1", payload: { tenant: "a", holdAttempts: 1 } },
      { id: "a2", payload: { tenant: "a" } },
      { id: "a3", payload: { tenant: "a" } }
    ])
    await callsOf(jobs, "keyed", 1, "a1")
    await waitFor(() => rowOf(jobs, "a2", "keyed"), (row) => row?.waiting_key === 1)
    await reset(jobs)
    // The platform's alarm wakes the new instance: a1 runs again (attempt 2); its end lets a2, then a3, start.
    await waitFor(() => jobs.stub.rows("keyed"), (rows) => rows.every((row) => row.status === "completed"))
    const calls = (await expectIdle(jobs)).filter((call) => call.queue === "keyed")
    expect(calls.map((call) => `${call.id}#${call.attempt}`)).toEqual(["a1#1", "a1#2", "a2#1", "a3#1"])
    expect(calls.every((call) => call.note === "tenant 1")).toBe(true)
    expect(overlapping(calls, () => "a")).toEqual([])
  })

  it("keys take turns: with the queue's total binding, a tenant with many jobs waiting does not go first", async () => {
    const jobs = freshJobs()
    // Two tenants hold the two slots; then a busy tenant's backlog and two quiet tenants' jobs.
    await jobs.stub.addBulk("keyed", [
      { id: "x1", payload: { tenant: "x", holdUntil: "x1" } },
      { id: "y1", payload: { tenant: "y", holdUntil: "y1" } }
    ])
    await callsOf(jobs, "keyed", 2)
    await jobs.stub.addBulk("keyed", [
      ...[1, 2, 3, 4].map((i) => ({ id: `h${i}`, payload: { tenant: "h" } })),
      { id: "q1", payload: { tenant: "q" } },
      { id: "r1", payload: { tenant: "r" } }
    ])
    const turns = Object.fromEntries((await jobs.stub.rows("keyed")).map((row) => [row.id, row.turn]))
    expect(turns).toMatchObject({ h1: 0, h2: 1, h3: 2, h4: 3, q1: 0, r1: 0 })
    await jobs.stub.release("x1")
    await jobs.stub.release("y1")
    await waitFor(() => jobs.stub.rows("keyed"), (rows) => rows.every((row) => row.status === "completed"))
    const calls = (await expectIdle(jobs)).filter((call) => call.queue === "keyed")
    const order = calls.map((call) => call.id)
    // The quiet tenants' first jobs start before the busy tenant's second.
    expect(order.indexOf("q1")).toBeLessThan(order.indexOf("h2"))
    expect(order.indexOf("r1")).toBeLessThan(order.indexOf("h2"))
    expect(Math.max(...calls.map((call) => call.concurrent))).toBeLessThanOrEqual(JOBS.keyedTotal)
    expect(overlapping(calls, (call) => call.id.slice(0, 1))).toEqual([])
  })
})
