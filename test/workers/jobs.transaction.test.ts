/**
 * `scheduler.transaction(fn)` in workerd, over real DO SQLite and the real alarm: the application's own
 * row and the job commit together or not at all (a throw after the add leaves neither, nor an alarm);
 * a committed job runs once, also when the object is reset right after the commit, before the job
 * started; `cancelOn` jobs are canceled by `jobs.event(key)` in the same transaction as the
 * application's delete, and not at all when that transaction rolls back.
 */
import { describe, expect, it } from "vitest"
import { callsOf, expectIdle, finishedRow, freshJobs, reset, rowOf, waitFor } from "./support/jobs.js"

describe("jobs: the caller's own transaction", () => {
  it("a throw after the add: neither the user's row nor the job, and no alarm", async () => {
    const jobs = freshJobs()
    expect(await jobs.stub.signUp("ada", { fail: true })).toEqual({ error: "sign-up of ada refused" })
    expect(await jobs.stub.appUsers()).toEqual([])
    expect(await jobs.stub.rows()).toEqual([])
    expect(await jobs.stub.alarmAt()).toBeNull()
    expect(await jobs.stub.events()).toEqual([])
    // A later sign-up commits and runs; the refused one never appears.
    await jobs.stub.signUp("bob")
    await finishedRow(jobs, "bob")
    const calls = await expectIdle(jobs)
    expect(calls.map((call) => call.id)).toEqual(["bob"])
    expect(await jobs.stub.appUsers()).toEqual(["bob"])
  })

  it("a commit keeps both; the job runs once", async () => {
    const jobs = freshJobs()
    expect(await jobs.stub.signUp("ada")).toEqual({ added: { id: "ada", state: "waiting", deduplicated: false } })
    expect(await jobs.stub.appUsers()).toEqual(["ada"])
    expect((await finishedRow(jobs, "ada")).status).toBe("completed")
    const calls = await expectIdle(jobs)
    expect(calls.map((call) => [call.id, call.attempt])).toEqual([["ada", 1]])
    const events = await jobs.stub.events()
    expect(events.filter((event) => event.type === "added").map((event) => event.id)).toEqual(["ada"])
  })

  it("a reset right after the commit, before the job started: a new instance runs it once", async () => {
    const jobs = freshJobs()
    // The queue's one slot is held, so the commit's eager start cannot take the job.
    await jobs.stub.add("ordered", { id: "blocker", payload: { holdUntil: "blocker" } })
    await callsOf(jobs, "ordered", 1, "blocker")
    const before = await jobs.stub.whoami()
    // Committed (and durable) once the call returned.
    expect(await jobs.stub.signUp("carl", { queue: "ordered" })).toEqual({ added: { id: "carl", state: "waiting", deduplicated: false } })
    expect(await rowOf(jobs, "carl", "ordered")).toMatchObject({ status: "pending", attempt: 0 })
    expect(await jobs.stub.alarmAt()).not.toBeNull()
    await reset(jobs)
    // In the new instance the blocker's next run goes on at once; then the committed job runs.
    await jobs.stub.release("blocker")
    expect(await finishedRow(jobs, "carl", "ordered")).toMatchObject({ status: "completed", attempt: 1 })
    const calls = await expectIdle(jobs)
    const carl = calls.filter((call) => call.id === "carl")
    expect(carl.map((call) => call.attempt)).toEqual([1])
    expect(carl[0]!.instance).not.toBe(before)
    expect(await jobs.stub.appUsers()).toEqual(["carl"])
  })

  it("cancelOn: the event in the caller's transaction cancels the jobs naming it; a rollback cancels none", async () => {
    const jobs = freshJobs()
    // Held until its signal is aborted (a cancel).
    await jobs.stub.signUp("u42", { queue: "slow", payload: { tag: "held", holdAttempts: 1 }, cancelOn: "user.deleted:u42" })
    await callsOf(jobs, "slow", 1, "u42")
    await jobs.stub.add("plain", { id: "later", payload: { tag: "later" }, delayMs: 60_000, cancelOn: "user.deleted:u42" })
    await jobs.stub.add("plain", { id: "other", payload: { tag: "other" }, delayMs: 60_000, cancelOn: "user.deleted:u43" })
    expect(await jobs.stub.event("")).toEqual({ error: expect.stringContaining("key must be a non-empty string") })

    expect(await jobs.stub.deleteUser("u42", "user.deleted:u42", true)).toEqual({ error: "deleting u42 refused" })
    expect(await jobs.stub.appUsers()).toEqual(["u42"])
    expect((await jobs.stub.rows()).map((row) => [row.id, row.status])).toEqual([
      ["u42", "pending"],
      ["later", "pending"],
      ["other", "pending"]
    ])
    expect((await jobs.stub.get("slow", "u42"))?.state).toBe("active")

    expect(await jobs.stub.deleteUser("u42", "user.deleted:u42")).toEqual({ canceled: 2 })
    expect(await jobs.stub.appUsers()).toEqual([])
    expect(await finishedRow(jobs, "u42")).toMatchObject({ status: "canceled", cancel_reason: `event "user.deleted:u42"` })
    expect(await rowOf(jobs, "later")).toMatchObject({ status: "canceled", cancel_reason: `event "user.deleted:u42"` })
    expect(await rowOf(jobs, "other")).toMatchObject({ status: "pending" })
    expect(await jobs.stub.event("user.deleted:u43")).toEqual({ canceled: 1 })
    const calls = await expectIdle(jobs)
    expect(calls.map((call) => call.id)).toEqual(["u42"])
    const events = await waitFor(() => jobs.stub.events(), (list) => list.filter((event) => event.type === "canceled").length === 3)
    expect(events.filter((event) => event.type === "canceled").map((event) => event.id).sort()).toEqual(["later", "other", "u42"])
  })
})
