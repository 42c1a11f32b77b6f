/**
 * Flows, cancel, retention and dead letters of job queues in workerd (real SQLite storage, real
 * alarms): a parent is released or failed in its child's settle transaction, across queues;
 * cancel aborts a running handler or ends a waiting job; retention keeps a bound on stored rows
 * (logs included); dead letters are listed and redriven.
 */
import { describe, expect, it } from "vitest"
import { JOBS } from "./objects/JobsObject.js"
import { callsOf, expectIdle, finishedRow, freshJobs, rowOf, stored, waitFor } from "./support/jobs.js"

describe("jobs: flows", () => {
  it("a child failing for good with onFailure fail: the parent fails with ChildJobFailedError, siblings not started are canceled", async () => {
    const jobs = freshJobs()
    const flow = await jobs.stub.flow({
      queue: "report",
      id: "parent",
      payload: { tag: "parent" },
      children: [
        { queue: "flaky", id: "bad", payload: { tag: "bad", fatal: true } },
        { queue: "plain", id: "later", payload: { tag: "later" }, delayMs: 60_000 },
        { queue: "slow", id: "deep", payload: { tag: "deep" }, delayMs: 60_000, children: [{ queue: "plain", id: "leaf", payload: {}, delayMs: 60_000 }] }
      ]
    })
    expect(flow).toEqual({
      queue: "report",
      id: "parent",
      children: [
        { queue: "flaky", id: "bad", children: [] },
        { queue: "plain", id: "later", children: [] },
        { queue: "slow", id: "deep", children: [{ queue: "plain", id: "leaf", children: [] }] }
      ]
    })

    const parent = await finishedRow(jobs, "parent", "report")
    expect(parent).toMatchObject({ status: "failed", attempt: 0, last_error_name: "ChildJobFailedError" })
    expect(parent.last_error).toBe('Child job "bad" of queue "flaky" failed: NonRetryableError: bad cannot succeed')
    expect(await jobs.stub.get("report", "parent")).toMatchObject({
      state: "failed",
      error: { name: "ChildJobFailedError" },
      children: [{ queue: "flaky", id: "bad" }, { queue: "plain", id: "later" }, { queue: "slow", id: "deep" }]
    })
    expect(await rowOf(jobs, "bad", "flaky")).toMatchObject({ status: "failed", attempt: 1, last_error_name: "NonRetryableError" })
    // The whole subtree that never started, grandchildren included.
    for (const [queue, id] of [["plain", "later"], ["slow", "deep"], ["plain", "leaf"]] as const) {
      expect(await rowOf(jobs, id, queue)).toMatchObject({ status: "canceled", attempt: 0 })
    }
    const calls = await expectIdle(jobs)
    expect(calls.map((call) => [call.queue, call.id])).toEqual([["flaky", "bad"]])
    const events = await waitFor(() => jobs.stub.events(), (list) => list.some((e) => e.type === "failed" && e.id === "parent"))
    expect(events.filter((event) => event.type === "failed").map((event) => event.id).sort()).toEqual(["bad", "parent"])
    expect(events.filter((event) => event.type === "canceled").map((event) => event.id).sort()).toEqual(["deep", "later", "leaf"])
  })

  it("a failing child with onFailure ignore: the parent still runs once every child finished and sees the failure", async () => {
    const jobs = freshJobs()
    await jobs.stub.flow({
      queue: "report",
      id: "parent",
      payload: { tag: "parent" },
      children: [
        { queue: "flaky", id: "bad", payload: { tag: "bad", fatal: true }, onFailure: "ignore" },
        { queue: "slow", id: "mid", payload: { tag: "mid" }, children: [{ queue: "plain", id: "leaf", payload: { tag: "leaf" } }] },
        { queue: "flaky", id: "retried", payload: { tag: "retried", failTimes: 1 } }
      ]
    })
    const parent = await finishedRow(jobs, "parent", "report")
    expect(parent).toMatchObject({ status: "completed", attempt: 1, children_pending: 0 })
    const calls = await expectIdle(jobs)
    const parentCall = calls.find((call) => call.queue === "report")!
    // The parent ran once, after every child (and grandchild) had ended.
    expect(calls.filter((call) => call.queue === "report")).toHaveLength(1)
    for (const call of calls.filter((c) => c.queue !== "report")) {
      expect(parentCall.started_at).toBeGreaterThanOrEqual(call.ended_at!)
    }
    expect(calls.filter((call) => call.id === "retried").map((call) => call.outcome)).toEqual(["failed", "completed"])
    expect(stored(parent.result)).toEqual({
      children: {
        bad: { queue: "flaky", state: "failed", error: { name: "NonRetryableError", message: "bad cannot succeed" } },
        mid: { queue: "slow", state: "completed", result: { tag: "mid", attempt: 1 } },
        retried: { queue: "flaky", state: "completed", result: { tag: "retried", calls: 2 } }
      }
    })
    expect(await rowOf(jobs, "leaf", "plain")).toMatchObject({ status: "completed", parent_key: "slow/mid" })
  })
})

describe("jobs: cancel", () => {
  it("an active job: its signal is aborted with JobCanceledError, it is not retried and ends canceled", async () => {
    const jobs = freshJobs()
    // Only attempt 1 holds: were the cancel to turn into a retry, attempt 2 would complete (and show it) at once.
    await jobs.stub.add("slow", { id: "running", payload: { tag: "running", holdAttempts: 1 } })
    await callsOf(jobs, "slow", 1)
    expect(await jobs.stub.cancel("slow", "running", "no longer needed")).toBe(true)
    const row = await finishedRow(jobs, "running", "slow")
    expect(row).toMatchObject({ status: "canceled", attempt: 1, cancel_reason: "no longer needed" })
    expect(await jobs.stub.get("slow", "running")).toMatchObject({ state: "canceled", attempt: 1 })
    const calls = await expectIdle(jobs)
    expect(calls).toMatchObject([{ id: "running", attempt: 1, aborted: 1, abort_reason: "JobCanceledError", outcome: "failed" }])
    const events = await waitFor(() => jobs.stub.events(), (list) => list.some((event) => event.type === "canceled"))
    expect(events.map((event) => event.type)).toEqual(["added", "started", "canceled"])
    expect(JSON.parse(events[2]!.event)).toMatchObject({ reason: "no longer needed" })
    // Finished: a second cancel changes nothing.
    expect(await jobs.stub.cancel("slow", "running")).toBe(false)
  })

  it("a waiting job becomes canceled at once and never runs; no alarm is left for it", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("plain", { id: "waiting", payload: { tag: "waiting" }, delayMs: JOBS.alarmMinDelayMs + 200 })
    const row = (await rowOf(jobs, "waiting"))!
    expect(await jobs.stub.alarmAt()).toBe(row.next_attempt_at)
    expect(await jobs.stub.cancel("plain", "waiting", "changed my mind")).toBe(true)
    expect(await rowOf(jobs, "waiting")).toMatchObject({ status: "canceled", attempt: 0, cancel_reason: "changed my mind" })
    expect(await jobs.stub.counts("plain")).toMatchObject({ delayed: 0, canceled: 1 })
    expect(await jobs.stub.cancel("plain", "waiting")).toBe(false)

    // Past the job's time: it never ran, and nothing woke the object for it.
    await waitFor(async () => Date.now(), (now) => now >= row.next_attempt_at + 200, 3_000)
    expect(await jobs.stub.calls()).toEqual([])
    expect(await jobs.stub.alarms()).toEqual([])
    expect(await jobs.stub.alarmAt()).toBeNull()
    await expectIdle(jobs)
  })
})

describe("jobs: retention and dead letters", () => {
  it("removeOnComplete count: the queue keeps the newest jobs only, with their logs (rows counted)", async () => {
    const jobs = freshJobs()
    const total = 30
    await jobs.stub.addBulk("retained", Array.from({ length: total }, (_, index) => ({ id: `k${index}`, payload: { tag: `k${index}` } })))
    await callsOf(jobs, "retained", total)
    const calls = await expectIdle(jobs)
    expect(calls.every((call) => call.outcome === "completed")).toBe(true)

    const rows = await jobs.stub.rows("retained")
    expect(rows).toHaveLength(JOBS.retained)
    expect(rows.every((row) => row.status === "completed")).toBe(true)
    // The newest by finish: every removed job finished no later than the oldest kept one.
    const kept = new Set(rows.map((row) => row.id))
    const oldestKept = Math.min(...rows.map((row) => row.finished_at!))
    const removedCalls = calls.filter((call) => !kept.has(call.id))
    expect(removedCalls).toHaveLength(total - JOBS.retained)
    expect(removedCalls.every((call) => call.ended_at! <= oldestKept)).toBe(true)
    // Their logs went with them.
    const logs = await jobs.stub.table("logs")
    expect(logs.map((line) => line.key).sort()).toEqual(rows.map((row) => row.key).sort())
    const events = await waitFor(() => jobs.stub.events(), (list) => list.filter((e) => e.type === "removed").length === total - JOBS.retained)
    expect(events.filter((event) => event.type === "removed").every((event) => event.event.includes('"reason":"retention"'))).toBe(true)
  })

  it("a job failing for good is dead-lettered; redrive puts it back with fresh attempts and it completes", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("flaky", { id: "provider", payload: { tag: "provider", failTimes: JOBS.maxAttempts } })
    const failed = await finishedRow(jobs, "provider", "flaky")
    expect(failed).toMatchObject({ status: "failed", attempt: JOBS.maxAttempts, last_error_name: "FlakyError" })
    const letters = await jobs.stub.deadLetters("flaky")
    expect(letters.items).toHaveLength(1)
    expect(letters.items[0]).toMatchObject({
      queue: "flaky",
      id: "provider",
      payload: { tag: "provider", failTimes: JOBS.maxAttempts },
      attempts: JOBS.maxAttempts,
      error: { name: "FlakyError", message: "provider failed on call 3" },
      failedAt: failed.finished_at
    })
    expect(await jobs.stub.table("dead_letters")).toHaveLength(1)
    const events = await waitFor(() => jobs.stub.events(), (list) => list.some((event) => event.type === "dead_lettered"))
    expect(events.filter((event) => event.type === "retry_scheduled")).toHaveLength(JOBS.maxAttempts - 1)
    expect(events.filter((event) => event.type === "failed")).toHaveLength(1)

    expect(await jobs.stub.redrive("flaky")).toBe(1)
    expect((await jobs.stub.deadLetters("flaky")).items).toEqual([])
    expect(await jobs.stub.table("dead_letters")).toEqual([])
    const done = await finishedRow(jobs, "provider", "flaky")
    expect(done).toMatchObject({ status: "completed", attempt: 1, last_error: null })
    expect(done.generation_id).not.toBe(failed.generation_id)
    const calls = await expectIdle(jobs)
    expect(calls.map((call) => [call.attempt, call.outcome])).toEqual([[1, "failed"], [2, "failed"], [3, "failed"], [1, "completed"]])
    // A redrive is a new run: a new idempotency key.
    expect(calls[3]!.idempotency_key).not.toBe(calls[0]!.idempotency_key)
    expect(new Set(calls.slice(0, 3).map((call) => call.idempotency_key)).size).toBe(1)
    expect(stored(done.result)).toEqual({ tag: "provider", calls: 4 })
  })
})
