/**
 * Job queue limits in workerd (real SQLite storage, real alarms): token buckets checked when a
 * job would start, with the wake-up at the next token (no polling) and no fresh burst after a
 * reset; and calls over a limit, rejected with errors that name the field and leave storage as it was.
 */
import { runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import { JOBS, type JobRow, type JobsObject } from "./objects/JobsObject.js"
import { callsOf, expectIdle, finishedRow, freshJobs, reset, rowOf, stored, waitFor } from "./support/jobs.js"

/** Float slack in the bound (a bucket's tokens are a float). */
const EPSILON = 1e-6

/**
 * The largest excess over the token bucket bound of `starts` (claim times, ms): for every window
 * between two starts, how many started in it beyond `capacity + refill × length`. At most 0 holds the bound.
 */
const excessOverBound = (starts: ReadonlyArray<number>, limit: { readonly capacity: number; readonly refillPerSecond: number }) => {
  const sorted = [...starts].sort((a, b) => a - b)
  let worst = Number.NEGATIVE_INFINITY
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i; j < sorted.length; j++) {
      const allowed = limit.capacity + (limit.refillPerSecond * (sorted[j]! - sorted[i]!)) / 1000
      worst = Math.max(worst, j - i + 1 - allowed)
    }
  }
  return worst
}

/**
 * 0.5 tokens/s: the next token is 2 s after the last one was taken, a second beyond the alarm's minimum delay.
 * That second is the margin for what must happen between the take and the wake-up's arming: the engine's idle
 * upkeep (100 ms after the settle) must reconcile the alarm to the token before the add's own alarm (the minimum
 * delay after the add) fires, and by the token's time minus the minimum delay, or the alarm floor is later than the
 * token. At 0.8 tokens/s (1 250 ms) that left 150 ms, which a saturated machine overran.
 */
const SLOW = { capacity: 1, refillPerSecond: 0.5 } as const

describe("jobs: rate limits", () => {
  it("a saturated queue starts at most capacity + refill * t in any window, per queue and per group, and faster than waking at the alarm floor would", async () => {
    const jobs = freshJobs()
    const tenants = ["a", "b", "c", "a", "b", "c", "a", "b", "a"]
    await jobs.stub.addBulk("limited", tenants.map((tenant, index) => ({ id: `r${index}`, payload: { tag: `r${index}`, tenant } })))
    // Nothing else limits them: the first `capacity` start at once, in order (by the first poll, later tokens may
    // have started more: the bound below is what limits them).
    const first = await callsOf(jobs, "limited", JOBS.limited.capacity)
    expect(first.slice(0, JOBS.limited.capacity).map((call) => call.id)).toEqual(["r0", "r1", "r2"])

    await callsOf(jobs, "limited", tenants.length)
    const rows = await waitFor(() => jobs.stub.rows("limited"), (list) => list.every((row) => row.status === "completed"))
    // started_at is the claim's time, the one the bucket was charged at (same transaction).
    const startsOf = (list: ReadonlyArray<JobRow>) => list.map((row) => row.started_at!)
    expect(excessOverBound(startsOf(rows), JOBS.limited)).toBeLessThanOrEqual(EPSILON)
    for (const tenant of ["a", "b", "c"]) {
      const group = rows.filter((row) => row.group_key === tenant)
      expect(group).toHaveLength(tenants.filter((t) => t === tenant).length)
      expect(excessOverBound(startsOf(group), JOBS.limitedGroup)).toBeLessThanOrEqual(EPSILON)
    }
    // Saturated: the wake-up is the next token, not the alarm's floor. Here the queue's bucket is the bottleneck
    // (each tenant's bucket refills in time), so the backlog after the first burst is done by its last token,
    // (n - capacity) / refill = 1.5 s after the first start, plus however late that last wake-up is; the span does
    // not grow with earlier late wake-ups (tokens accrue meanwhile). Waking at the floor instead (the minimum delay
    // after each pass) starts at most `capacity` per wake-up, a floor apart: ceil((n - capacity) / capacity) floors
    // = 2 s. Between the two, 500 ms is the margin for the last wake-up's lateness. Token by token, at every
    // millisecond, this is proven under TestClock in test/node/jobs/rate-limit.test.ts.
    const starts = startsOf(rows).sort((a, b) => a - b)
    const span = starts[starts.length - 1]! - starts[0]!
    const backlog = tenants.length - JOBS.limited.capacity
    const atTheFloor = Math.ceil(backlog / JOBS.limited.capacity) * JOBS.alarmMinDelayMs
    expect(span).toBeLessThan(atTheFloor)
    expect(rows.every((row) => row.attempt === 1)).toBe(true)

    const buckets = await jobs.stub.table("buckets")
    expect(buckets.map((bucket) => bucket.group_key).sort()).toEqual(["", "g:a", "g:b", "g:c"])
    for (const bucket of buckets) {
      const capacity = bucket.group_key === "" ? JOBS.limited.capacity : JOBS.limitedGroup.capacity
      expect(Number(bucket.tokens)).toBeGreaterThanOrEqual(0)
      expect(Number(bucket.tokens)).toBeLessThanOrEqual(capacity)
    }
    await expectIdle(jobs)
  })

  it("a waiting job's wake-up is the next token: the alarm is set there and nothing runs before it", async () => {
    const jobs = freshJobs()
    await jobs.stub.setRateLimit("plain", SLOW)
    await jobs.stub.addBulk("plain", [{ id: "x", payload: { tag: "x" } }, { id: "y", payload: { tag: "y" } }])
    const x = await finishedRow(jobs, "x")
    const y = (await rowOf(jobs, "y"))!
    expect(y).toMatchObject({ status: "pending", attempt: 0, started_at: null })
    const nextToken = x.started_at! + 1_000 / SLOW.refillPerSecond
    expect(y.next_attempt_at).toBeGreaterThanOrEqual(nextToken)
    expect(y.next_attempt_at).toBeLessThanOrEqual(nextToken + 1)
    // x's settle leaves the alarm to the engine's idle upkeep (100 ms), which must come before the alarm the add set
    // (its minimum delay after the add, which was before this wait began) fires.
    expect(await waitFor(() => jobs.stub.alarmAt(), (at) => at === y.next_attempt_at, JOBS.alarmMinDelayMs)).toBe(y.next_attempt_at)
    expect(await jobs.stub.table("buckets")).toEqual([{ queue: "plain", group_key: "", tokens: 0, updated_at: x.started_at }])
    expect((await jobs.stub.get("plain", "y"))?.state).toBe("delayed")

    const [yCall] = await callsOf(jobs, "plain", 1, "y")
    expect(yCall!.started_at).toBeGreaterThanOrEqual(y.next_attempt_at)
    // No polling: the alarm was delivered at the next token, not before.
    const alarms = await jobs.stub.alarms()
    expect(alarms.length).toBeGreaterThanOrEqual(1)
    expect(alarms.every((alarm) => alarm.at >= y.next_attempt_at)).toBe(true)
    expect((await jobs.stub.calls()).map((call) => call.id)).toEqual(["x", "y"])
    await expectIdle(jobs)
  })

  it("a reset grants no fresh burst: a job added to the spent bucket waits for its token, and the alarm is there", async () => {
    const jobs = freshJobs()
    await jobs.stub.setRateLimit("plain", SLOW)
    await jobs.stub.add("plain", { id: "x", payload: { tag: "x" } })
    const x = await finishedRow(jobs, "x")
    await waitFor(() => jobs.stub.alarmAt(), (at) => at === null)

    await reset(jobs)
    await jobs.stub.add("plain", { id: "z", payload: { tag: "z" } })
    const z = (await rowOf(jobs, "z"))!
    const nextToken = x.started_at! + 1_000 / SLOW.refillPerSecond
    // The spent bucket and the limit set by setRateLimit survived the eviction.
    expect(z).toMatchObject({ status: "pending", attempt: 0, started_at: null })
    expect(z.next_attempt_at).toBeGreaterThanOrEqual(nextToken)
    expect(z.next_attempt_at).toBeLessThanOrEqual(nextToken + 1)
    expect(await jobs.stub.table("buckets")).toEqual([{ queue: "plain", group_key: "", tokens: 0, updated_at: x.started_at }])

    const [zCall] = await callsOf(jobs, "plain", 1, "z")
    expect(zCall!.started_at).toBeGreaterThanOrEqual(z.next_attempt_at)
    // The wake-up went to the token: no alarm was delivered between z's add and it (the add's own alarm was moved
    // there). One before the add could only be x's, had its idle upkeep come after the minimum delay.
    const alarms = (await jobs.stub.alarms()).filter((alarm) => alarm.at >= z.created_at)
    expect(alarms.map((alarm) => alarm.at - z.next_attempt_at).filter((early) => early < 0)).toEqual([])
    await expectIdle(jobs)
  })
})

const rejection = (promise: Promise<unknown>): Promise<Error | undefined> =>
  promise.then(() => undefined, (error: Error) => error)

/** Everything the jobs tables hold. */
const snapshot = (state: DurableObjectState) =>
  ["durability_jobs", "durability_job_dedup", "durability_job_logs", "durability_job_queues", "durability_job_buckets"].map(
    (table) => state.storage.sql.exec(`SELECT * FROM ${table}`).toArray()
  )

describe("jobs: limits with clear errors", () => {
  it("oversized, non-JSON and malformed adds are refused naming the field; storage is unchanged", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("plain", { id: "existing", payload: { tag: "existing" } })
    await finishedRow(jobs, "existing")
    // A rejection crossing RPC would break the pool's isolated storage: assert inside the object.
    await runInDurableObject(jobs.stub, async (instance: JobsObject, state) => {
      const before = snapshot(state)
      const plain = instance.queue("plain")
      const big = { tag: "x".repeat(JOBS.plainMaxPayloadBytes) }

      const oversized = await rejection(plain.add({ id: "big", payload: big, dedup: { key: "big" } }))
      expect(oversized).toBeInstanceOf(RangeError)
      expect(oversized!.message).toMatch(/^payload is \d+ bytes as JSON; queue "plain" takes at most 1024 \(maxPayloadBytes\)$/)

      const bulk = await rejection(plain.addBulk([{ id: "fine", payload: { tag: "fine" } }, { id: "big", payload: big }]))
      expect(bulk).toBeInstanceOf(RangeError)
      expect(bulk!.message).toContain("jobs[1].payload is")

      const notJson = await rejection(plain.add({ payload: { tag: "f", fn: () => 1 } as never }))
      expect(notJson).toBeInstanceOf(TypeError)
      expect(notJson!.message).toContain("payload")

      const badId = await rejection(plain.add({ id: "", payload: {} }))
      expect(badId).toBeInstanceOf(Error)
      expect(badId!.message).toContain("id")

      const both = await rejection(plain.add({ payload: {}, delayMs: 10, runAt: Date.now() + 10 }))
      expect(both).toBeInstanceOf(TypeError)
      expect(both!.message).toBe("delayMs and runAt cannot both be given")

      const priority = await rejection(plain.add({ payload: {}, priority: 1.5 }))
      expect(priority).toBeInstanceOf(RangeError)
      expect(priority!.message).toBe("priority must be a safe integer, got 1.5")

      const rate = await rejection(plain.setRateLimit({ capacity: 0, refillPerSecond: 1 }))
      expect(rate).toBeInstanceOf(RangeError)
      expect(rate!.message).toContain("limit.capacity must be a positive integer")

      const unknown = await rejection(instance.jobs.flow({ queue: "report", payload: {}, children: [{ queue: "nope", payload: {} }] }))
      expect(unknown).toBeInstanceOf(TypeError)
      expect(unknown!.message).toContain('Unknown queue "nope"')

      // Checked inside the transaction: the parent and first child were written, then all rolled back.
      const taken = await rejection(instance.jobs.flow({
        queue: "report",
        id: "parent",
        payload: {},
        children: [{ queue: "plain", id: "fresh", payload: {} }, { queue: "plain", id: "existing", payload: {} }]
      }))
      expect(taken).toBeInstanceOf(TypeError)
      expect(taken!.message).toBe('Job "existing" of queue "plain" exists already')

      expect(snapshot(state)).toEqual(before)
    })
    expect((await jobs.stub.calls()).map((call) => call.id)).toEqual(["existing"])
    await expectIdle(jobs)
  })

  it("a progress value over 64 KiB is refused in the handler; the stored progress stays", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("plain", { id: "chatty", payload: { tag: "chatty", bigProgress: true } })
    const row = await finishedRow(jobs, "chatty")
    expect(row.status).toBe("completed")
    expect(stored(row.progress)).toBe(50)
    const [call] = await jobs.stub.calls()
    expect(call!.note).toMatch(/^RangeError: progress is \d+ bytes; at most 65536 bytes are stored$/)
    await expectIdle(jobs)
  })
})
