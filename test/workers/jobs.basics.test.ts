/**
 * Job queues in workerd (real SQLite storage, real alarms), through `JobsObject`
 * (objects/JobsObject.ts, the public promise API): a job's life and what it leaves in storage,
 * delayed jobs on the physical alarm, start order, dedup, and the jobs migration itself.
 */
import { runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import * as Text from "../../src/inspection/text.js"
import { JOBS } from "./objects/JobsObject.js"
import { callsOf, expectIdle, finishedRow, freshJobs, rowOf, stored, waitFor } from "./support/jobs.js"

describe("jobs: a job's life", () => {
  it("add, run, complete: the row, get, list, counts, logs and events agree", async () => {
    const jobs = freshJobs()
    const added = await jobs.stub.add("plain", { id: "one", payload: { tag: "first" } })
    expect(added).toEqual({ id: "one", state: "waiting", deduplicated: false })

    const row = await finishedRow(jobs, "one")
    expect(row).toMatchObject({
      key: "plain/one",
      queue: "plain",
      status: "completed",
      attempt: 1,
      last_error: null,
      parent_key: null
    })
    expect(stored(row.progress)).toBe(50)
    expect(stored(row.payload)).toEqual({ tag: "first" })
    expect(stored(row.result)).toEqual({ tag: "first" })
    expect(row.started_at).toBeGreaterThanOrEqual(row.created_at)
    expect(row.finished_at).toBeGreaterThanOrEqual(row.started_at!)

    const info = await jobs.stub.get("plain", "one")
    expect(info).toMatchObject({
      id: "one",
      queue: "plain",
      state: "completed",
      payload: { tag: "first" },
      result: { tag: "first" },
      attempt: 1,
      maxAttempts: JOBS.maxAttempts,
      priority: 0,
      progress: 50,
      createdAt: row.created_at,
      startedAt: row.started_at,
      finishedAt: row.finished_at
    })
    expect(await jobs.stub.get("plain", "missing")).toBeUndefined()
    expect((await jobs.stub.list("plain", { states: ["completed"] })).items.map((item) => item.id)).toEqual(["one"])
    expect((await jobs.stub.list("plain", { states: ["waiting", "delayed"] })).items).toEqual([])
    expect(await jobs.stub.counts("plain")).toEqual({
      waiting: 0,
      delayed: 0,
      active: 0,
      "waiting-children": 0,
      completed: 1,
      failed: 0,
      canceled: 0
    })
    const logs = await jobs.stub.logs("plain", "one")
    expect(logs).toMatchObject({ total: 1, items: [{ seq: 1, message: "ran first" }] })
    expect(await jobs.stub.table("logs")).toMatchObject([{ key: "plain/one", seq: 1, message: "ran first" }])

    const calls = await expectIdle(jobs)
    expect(calls).toMatchObject([{ queue: "plain", id: "one", attempt: 1, outcome: "completed", aborted: 0 }])
    expect(calls[0]!.idempotency_key).toBe(`durability-job:v1:${row.generation_id}`)
    const events = await waitFor(() => jobs.stub.events(), (list) => list.some((event) => event.type === "completed"))
    expect(events.map((event) => event.type)).toEqual(["added", "started", "progress", "completed"])
  })

  it("a delayed job runs at its time, never early, through the real alarm; the alarm is the earliest due job", async () => {
    const jobs = freshJobs()
    // A minute out: whatever the machine's pace between the two adds, it stays the later job (a delay a few hundred
    // ms longer than the other's made the order a race with the test's own RPCs).
    const late = await jobs.stub.add("plain", { id: "late", payload: { tag: "late" }, delayMs: 60_000 })
    expect(late.state).toBe("delayed")
    const lateRow = (await rowOf(jobs, "late"))!
    expect(await jobs.stub.alarmAt()).toBe(lateRow.next_attempt_at)

    // Beyond the minimum delay from its own add (the 300 ms is for the add's one call, where the alarm is set):
    // no early timer covers it, only the physical alarm.
    await jobs.stub.add("plain", { id: "soon", payload: { tag: "soon" }, delayMs: JOBS.alarmMinDelayMs + 300 })
    const soonRow = (await rowOf(jobs, "soon"))!
    expect(soonRow.next_attempt_at).toBeLessThan(lateRow.next_attempt_at)
    // The earlier job moved the alarm to its own time.
    expect(await jobs.stub.alarmAt()).toBe(soonRow.next_attempt_at)
    expect(await jobs.stub.counts("plain")).toMatchObject({ delayed: 2, waiting: 0 })
    expect((await jobs.stub.get("plain", "soon"))?.state).toBe("delayed")

    const [soonCall] = await callsOf(jobs, "plain", 1, "soon")
    expect(soonCall!.started_at).toBeGreaterThanOrEqual(soonRow.next_attempt_at)
    // The platform delivered the alarm (at or after the job's time) before the handler ran.
    const alarms = await jobs.stub.alarms()
    expect(alarms.length).toBeGreaterThanOrEqual(1)
    expect(alarms[0]!.at).toBeGreaterThanOrEqual(soonRow.next_attempt_at)
    expect(alarms[0]!.at).toBeLessThanOrEqual(soonCall!.started_at)
    expect((await finishedRow(jobs, "soon")).status).toBe("completed")

    // The alarm moves on to the earliest job still due, and the late one did not run early.
    expect(await waitFor(() => jobs.stub.alarmAt(), (at) => at === lateRow.next_attempt_at)).toBe(lateRow.next_attempt_at)
    expect((await jobs.stub.calls()).map((call) => call.id)).toEqual(["soon"])
    expect((await jobs.stub.get("plain", "late"))?.state).toBe("delayed")
    // Promoted rather than waited for (the minute is only there to keep the order): it runs now, and nothing is left.
    expect(await jobs.stub.promote("plain", "late")).toBe(true)
    expect((await finishedRow(jobs, "late")).status).toBe("completed")
    await expectIdle(jobs)
  })
})

describe("jobs: start order", () => {
  it("a paused concurrency-1 queue, resumed, runs one job at a time: higher priority first, FIFO within one", async () => {
    const jobs = freshJobs()
    await jobs.stub.pause("ordered")
    await jobs.stub.addBulk("ordered", [
      { id: "p0-a", payload: { tag: "p0-a", holdMs: 20 } },
      { id: "p5-a", payload: { tag: "p5-a", holdMs: 20 }, priority: 5 },
      { id: "p0-b", payload: { tag: "p0-b", holdMs: 20 } },
      { id: "p5-b", payload: { tag: "p5-b", holdMs: 20 }, priority: 5 },
      { id: "p10", payload: { tag: "p10", holdMs: 20 }, priority: 10 },
      { id: "neg", payload: { tag: "neg", holdMs: 20 }, priority: -1 }
    ])
    await jobs.stub.add("ordered", { id: "p0-c", payload: { tag: "p0-c", holdMs: 20 } })
    expect(await jobs.stub.changePriority("ordered", "p0-c", 20)).toBe(true)
    expect(await jobs.stub.calls()).toEqual([])
    await jobs.stub.resume("ordered")

    const calls = await callsOf(jobs, "ordered", 7)
    expect(calls.map((call) => call.id)).toEqual(["p0-c", "p10", "p5-a", "p5-b", "p0-a", "p0-b", "neg"])
    expect(calls.every((call) => call.concurrent === 1)).toBe(true)
    for (let index = 1; index < calls.length; index++) {
      expect(calls[index]!.started_at).toBeGreaterThanOrEqual(calls[index - 1]!.ended_at ?? Number.POSITIVE_INFINITY)
    }
    await expectIdle(jobs)
  })

  it("jobs that become due while the one slot is busy start by priority, FIFO within one", async () => {
    const jobs = freshJobs()
    // Holds the queue's one slot while the others are added.
    await jobs.stub.add("ordered", { id: "blocker", payload: { tag: "blocker", holdUntil: "blocker" } })
    await callsOf(jobs, "ordered", 1)
    await jobs.stub.add("ordered", { id: "p0-a", payload: { tag: "p0-a" } })
    await jobs.stub.add("ordered", { id: "p5-a", payload: { tag: "p5-a" }, priority: 5 })
    await jobs.stub.add("ordered", { id: "p0-b", payload: { tag: "p0-b" } })
    await jobs.stub.add("ordered", { id: "p5-b", payload: { tag: "p5-b" }, priority: 5 })
    await jobs.stub.add("ordered", { id: "p10", payload: { tag: "p10" }, priority: 10 })
    await jobs.stub.add("ordered", { id: "p0-c", payload: { tag: "p0-c" } })
    await jobs.stub.add("ordered", { id: "neg", payload: { tag: "neg" }, priority: -1 })
    // Raised while waiting: it goes before p10.
    expect(await jobs.stub.changePriority("ordered", "p0-c", 20)).toBe(true)
    expect(await jobs.stub.counts("ordered")).toMatchObject({ active: 1, waiting: 7 })
    await jobs.stub.release("blocker")

    const calls = await callsOf(jobs, "ordered", 8)
    expect(calls.map((call) => call.id)).toEqual(["blocker", "p0-c", "p10", "p5-a", "p5-b", "p0-a", "p0-b", "neg"])
    expect(calls.every((call) => call.concurrent === 1)).toBe(true)
    // One at a time: each started after the previous one ended.
    for (let index = 1; index < calls.length; index++) {
      expect(calls[index]!.started_at).toBeGreaterThanOrEqual(calls[index - 1]!.ended_at ?? Number.POSITIVE_INFINITY)
    }
    const rows = await jobs.stub.rows("ordered")
    expect(rows.every((row) => row.status === "completed" && row.attempt === 1)).toBe(true)
    expect(rows.find((row) => row.id === "p0-c")!.priority).toBe(20)
    await expectIdle(jobs)
  })
})

describe("jobs: dedup", () => {
  it("drop: a duplicate key is dropped while the first job is unfinished; then the key is free again", async () => {
    const jobs = freshJobs()
    const first = await jobs.stub.add("plain", { payload: { tag: "v1" }, delayMs: 60_000, dedup: { key: "k" } })
    expect(first).toMatchObject({ state: "delayed", deduplicated: false })
    const second = await jobs.stub.add("plain", { payload: { tag: "v2" }, dedup: { key: "k" } })
    expect(second).toEqual({ id: first.id, state: "delayed", deduplicated: true })
    expect((await jobs.stub.rows()).map((row) => [row.id, stored(row.payload)])).toEqual([[first.id, { tag: "v1" }]])
    expect(await jobs.stub.table("dedup")).toEqual([{ queue: "plain", dedup_key: "k", job_id: first.id, expires_at: null }])

    // Once the first finished, the key takes a new job (the key's one row now names it).
    expect(await jobs.stub.promote("plain", first.id)).toBe(true)
    expect((await finishedRow(jobs, first.id)).status).toBe("completed")
    const third = await jobs.stub.add("plain", { payload: { tag: "v3" }, dedup: { key: "k" } })
    expect(third.deduplicated).toBe(false)
    expect(third.id).not.toBe(first.id)
    expect((await finishedRow(jobs, third.id)).status).toBe("completed")
    expect(await jobs.stub.table("dedup")).toEqual([{ queue: "plain", dedup_key: "k", job_id: third.id, expires_at: null }])
    expect((await jobs.stub.calls()).map((call) => call.tag)).toEqual(["v1", "v3"])
    const events = await waitFor(() => jobs.stub.events(), (list) => list.filter((e) => e.type === "completed").length === 2)
    expect(events.filter((event) => event.type === "deduplicated").map((event) => JSON.parse(event.event))).toMatchObject([
      { queue: "plain", existingId: first.id, replaced: false, dedupKey: "k" }
    ])
    await expectIdle(jobs)
  })

  it("ttl (throttle): duplicates are dropped for ttlMs after the first add, even once it completed", async () => {
    const jobs = freshJobs()
    // The duplicate comes once the first completed: a trivial job started by its add, then a few polls, a few
    // hundred ms on a saturated machine. The rest of the window is margin (600 ms was not), paid once below.
    const ttlMs = 1_500
    const first = await jobs.stub.add("plain", { payload: { tag: "t1" }, dedup: { key: "t", ttlMs } })
    const firstRow = await finishedRow(jobs, first.id)
    expect(firstRow.status).toBe("completed")
    const dropped = await jobs.stub.add("plain", { payload: { tag: "t2" }, dedup: { key: "t", ttlMs } })
    expect(dropped).toEqual({ id: first.id, state: "completed", deduplicated: true })
    const [key] = await jobs.stub.table("dedup")
    expect(key).toMatchObject({ dedup_key: "t", job_id: first.id, expires_at: firstRow.created_at + ttlMs })

    await waitFor(async () => Date.now(), (now) => now >= firstRow.created_at + ttlMs + 20, ttlMs + 2_000)
    const next = await jobs.stub.add("plain", { payload: { tag: "t3" }, dedup: { key: "t", ttlMs } })
    expect(next.deduplicated).toBe(false)
    expect((await finishedRow(jobs, next.id)).status).toBe("completed")
    const keys = await jobs.stub.table("dedup")
    expect(keys).toHaveLength(1)
    expect(keys[0]).toMatchObject({ dedup_key: "t", job_id: next.id })
    expect((await jobs.stub.calls()).map((call) => call.tag)).toEqual(["t1", "t3"])
    await expectIdle(jobs)
  })

  it("replace (debounce): the waiting job takes the new payload and run time; the alarm follows", async () => {
    const jobs = freshJobs()
    const first = await jobs.stub.add("plain", { payload: { tag: "r1" }, delayMs: 60_000, dedup: { key: "r", mode: "replace" } })
    const before = Date.now()
    const replaced = await jobs.stub.add("plain", {
      payload: { tag: "r2" },
      delayMs: JOBS.alarmMinDelayMs + 200,
      dedup: { key: "r", mode: "replace" }
    })
    expect(replaced).toEqual({ id: first.id, state: "delayed", deduplicated: true })
    const rows = await jobs.stub.rows()
    expect(rows).toHaveLength(1)
    const row = rows[0]!
    expect(stored(row.payload)).toEqual({ tag: "r2" })
    expect(row.next_attempt_at).toBeGreaterThanOrEqual(before + JOBS.alarmMinDelayMs + 200)
    expect(row.next_attempt_at).toBeLessThan(before + 60_000)
    expect(await jobs.stub.alarmAt()).toBe(row.next_attempt_at)
    expect(await jobs.stub.table("dedup")).toHaveLength(1)

    const [call] = await callsOf(jobs, "plain", 1, first.id)
    expect(call).toMatchObject({ tag: "r2", attempt: 1 })
    expect(call!.started_at).toBeGreaterThanOrEqual(row.next_attempt_at)
    expect((await finishedRow(jobs, first.id)).status).toBe("completed")
    const events = await jobs.stub.events()
    expect(events.find((event) => event.type === "deduplicated")?.event).toContain('"replaced":true')
    await expectIdle(jobs)
  })
})

describe("jobs: the migration in real DO SQLite", () => {
  it("creates the tables and the trigger; deleting a job deletes its logs", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("plain", { id: "logged", payload: { tag: "a" } })
    await jobs.stub.add("plain", { id: "kept", payload: { tag: "b" } })
    await finishedRow(jobs, "logged")
    await finishedRow(jobs, "kept")
    await runInDurableObject(jobs.stub, async (_instance, state) => {
      const names = state.storage.sql
        .exec("SELECT type, name FROM sqlite_master WHERE name LIKE 'durability_job%' AND type IN ('table', 'trigger') ORDER BY type, name")
        .toArray()
      expect(names).toEqual([
        { type: "table", name: "durability_job_buckets" },
        { type: "table", name: "durability_job_dead_letters" },
        { type: "table", name: "durability_job_dedup" },
        { type: "table", name: "durability_job_logs" },
        { type: "table", name: "durability_job_outbox" },
        { type: "table", name: "durability_job_queues" },
        { type: "table", name: "durability_jobs" },
        { type: "trigger", name: "durability_jobs_logs_gone" },
        // The durable steps' memos go with their job (durability_0006_jobs_steps).
        { type: "trigger", name: "durability_jobs_steps_ended" },
        { type: "trigger", name: "durability_jobs_steps_gone" },
        { type: "trigger", name: "durability_jobs_steps_replaced" }
      ])
      expect(state.storage.sql.exec("SELECT name FROM durability_migrations WHERE name LIKE '%jobs%' ORDER BY id").toArray()).toEqual([
        { name: "durability_0005_create_jobs" },
        { name: "durability_0006_jobs_steps" },
        { name: "durability_0009_jobs_leases" },
        { name: "durability_0010_jobs_outbox" },
        { name: "durability_0011_jobs_queue_order" },
        { name: "durability_0012_jobs_retention_timer" },
        { name: "durability_0014_jobs_state_counts" },
        { name: "durability_0019_jobs_concurrency_keys" },
        { name: "durability_0020_jobs_cancel_on" },
        { name: "durability_0022_jobs_batches" }
      ])
      // The inspector's counts by state read index ranges, never the queue's rows one by one (SQLite's own
      // plans, on real DO SQLite): bounded by the cap and by what runs, whatever the queue holds.
      const plan = (where: string, ...bindings: Array<SqlStorageValue>) =>
        state.storage.sql.exec(`EXPLAIN QUERY PLAN ${Text.cappedCount("durability_jobs INDEXED BY durability_jobs_queue_due_idx", where)}`, ...bindings).toArray()
          .map((row) => String(row.detail)).filter((detail) => detail.includes("durability_jobs"))
      const counts: ReadonlyArray<[string, Array<SqlStorageValue>]> = [
        ["queue = ? AND status = 'pending' AND next_attempt_at <= ?", ["plain", 0]],
        ["queue = ? AND status = 'pending' AND next_attempt_at > ?", ["plain", 0]],
        ["queue = ? AND status = ?", ["plain", "failed"]]
      ]
      for (const [where, bindings] of counts) expect(plan(where, ...bindings), where).toEqual([expect.stringMatching(/^SEARCH durability_jobs USING COVERING INDEX/)])
      const leased = state.storage.sql.exec(
        "EXPLAIN QUERY PLAN SELECT key, next_attempt_at > ? AS later FROM durability_jobs INDEXED BY durability_jobs_queue_leased_idx WHERE queue = ? AND leased_until IS NOT NULL",
        0,
        "plain"
      ).toArray().map((row) => String(row.detail))
      expect(leased).toEqual([expect.stringContaining("USING INDEX durability_jobs_queue_leased_idx")])
    })
    expect((await jobs.stub.table("logs")).map((line) => line.key)).toEqual(["plain/logged", "plain/kept"])
    expect(await jobs.stub.remove("plain", "logged")).toBe(true)
    expect(await rowOf(jobs, "logged")).toBeUndefined()
    expect((await jobs.stub.table("logs")).map((line) => line.key)).toEqual(["plain/kept"])
    // And by plain SQL: the trigger, not the library, deletes them.
    await runInDurableObject(jobs.stub, async (_instance, state) => {
      state.storage.sql.exec("DELETE FROM durability_jobs WHERE key = 'plain/kept'")
      expect(state.storage.sql.exec("SELECT COUNT(*) AS n FROM durability_job_logs").one()).toEqual({ n: 0 })
    })
    await expectIdle(jobs)
  })
})
