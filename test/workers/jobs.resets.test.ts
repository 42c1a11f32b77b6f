/**
 * Job queues across forced resets of the object (`state.abort()`) in workerd: in-memory state,
 * timers and running handlers are gone, storage and the alarm stay. A pause holds across a reset
 * on every path; a job whose handler a reset cut short runs again, counted, and completes once.
 */
import { describe, expect, it } from "vitest"
import { callsOf, expectIdle, finishedRow, freshJobs, reset, rowOf, waitFor } from "./support/jobs.js"

describe("jobs: pause", () => {
  it("a pause survives a reset: nothing starts (eager, timer or alarm) until resume, which runs them", async () => {
    const jobs = freshJobs()
    await jobs.stub.pause("plain")
    await jobs.stub.add("plain", { id: "now", payload: { tag: "now" } })
    await jobs.stub.add("plain", { id: "soon", payload: { tag: "soon" }, delayMs: 200 })
    // A paused queue's jobs are not due: they do not wake the object.
    expect(await waitFor(() => jobs.stub.alarmAt(), (at) => at === null)).toBeNull()

    await reset(jobs)
    expect(await jobs.stub.isPaused("plain")).toBe(true)
    expect(await jobs.stub.table("queues")).toMatchObject([{ queue: "plain", paused: 1 }])
    // Past the delayed job's time by a while (a timer would have run it), and nothing woke the object. A machine too
    // slow for the 200 ms could only make these checks pass without meaning, never fail them.
    const soon = (await rowOf(jobs, "soon"))!
    await waitFor(async () => Date.now(), (now) => now >= soon.next_attempt_at + 200, 3_000)
    expect(await jobs.stub.calls()).toEqual([])
    expect(await jobs.stub.alarmAt()).toBeNull()
    expect(await jobs.stub.alarms()).toEqual([])
    expect(await jobs.stub.counts("plain")).toMatchObject({ waiting: 2, active: 0, completed: 0 })
    expect((await jobs.stub.rows()).map((row) => [row.id, row.status, row.attempt])).toEqual([
      ["now", "pending", 0],
      ["soon", "pending", 0]
    ])

    const resumedAt = Date.now()
    await jobs.stub.resume("plain")
    expect(await jobs.stub.isPaused("plain")).toBe(false)
    const calls = await callsOf(jobs, "plain", 2)
    expect(calls.map((call) => call.id).sort()).toEqual(["now", "soon"])
    expect(calls.every((call) => call.started_at >= resumedAt)).toBe(true)
    expect((await finishedRow(jobs, "now")).status).toBe("completed")
    expect((await finishedRow(jobs, "soon")).status).toBe("completed")
    await expectIdle(jobs)
  })
})

describe("jobs: eviction mid-job", () => {
  it("a reset while the handler runs: the job runs again after it, attempt counted, completes once", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("slow", { id: "evicted", payload: { tag: "evicted", holdAttempts: 1 } })
    const [first] = await callsOf(jobs, "slow", 1)
    expect(first).toMatchObject({ attempt: 1, outcome: "running" })
    expect(await rowOf(jobs, "evicted")).toMatchObject({ status: "pending", attempt: 1 })
    expect((await jobs.stub.get("slow", "evicted"))?.state).toBe("active")

    await reset(jobs)
    // The stored alarm (armed with the job) wakes the new instance: nothing else calls it.
    const row = await finishedRow(jobs, "evicted", "slow")
    expect(row).toMatchObject({ status: "completed", attempt: 2, last_error: null })
    const calls = await expectIdle(jobs)
    expect(calls.map((call) => [call.attempt, call.outcome])).toEqual([[1, "running"], [2, "completed"]])
    expect(calls[1]!.instance).not.toBe(calls[0]!.instance)
    // The same job for the provider: one idempotency key across the eviction.
    expect(calls[1]!.idempotency_key).toBe(calls[0]!.idempotency_key)
    expect(await jobs.stub.get("slow", "evicted")).toMatchObject({ state: "completed", attempt: 2, result: { attempt: 2 } })
    const events = await waitFor(() => jobs.stub.events(), (list) => list.some((event) => event.type === "completed"))
    expect(events.filter((event) => event.type === "completed")).toHaveLength(1)
    expect(events.filter((event) => event.type === "failed" || event.type === "canceled")).toEqual([])
  })
})
