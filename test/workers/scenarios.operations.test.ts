/**
 * Fault scenarios for durable operations inside workerd: real SQLite storage,
 * real alarms, real timers. `LabObject` (objects/LabObject.ts) uses the public
 * promise API; its handlers misbehave as their payload says and report their
 * external effects to an `EffectLedger` object. Every scenario asserts the
 * persisted invariants: `durability_calls`, the platform alarm, the lab's own
 * record of handler calls, and the ledger.
 */
import { describe, expect, it } from "vitest"
import { LAB } from "./objects/LabObject.js"
import { allEnded, callsOf, expectIdle, freshLab, reset, rowOf, settledRow, WAIT_MS, waitFor } from "./support/lab.js"

const resultOf = (row: { readonly result: string | null }) => JSON.parse(row.result ?? "null") as unknown

describe("operations: retries and effects", () => {
  it("happy path: one completed call, one effect", async () => {
    const lab = freshLab()
    await lab.stub.submit("effect", "happy", { mode: "ok" })
    const outcome = await lab.stub.wait("effect", "happy", WAIT_MS)
    expect(outcome).toMatchObject({ status: "completed", result: { source: "happy", attempt: 1 } })

    const rows = await lab.stub.operationRows()
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({
      id: "happy",
      operation: "effect",
      status: "completed",
      attempt: 1,
      last_error: null,
      last_error_name: null
    })
    expect(rows[0]!.completed_at).not.toBeNull()
    const effects = await lab.ledger.effects()
    expect(effects).toMatchObject([{ source: "happy", key: "happy", attempt: 1 }])
    expect(resultOf(rows[0]!)).toEqual({ kind: "value", value: { source: "happy", attempt: 1, effect: effects[0]!.seq } })
    expect(await lab.stub.calls()).toMatchObject([{ source: "happy", attempt: 1, outcome: "completed" }])
    await expectIdle(lab)
  })

  it("transient failure before the effect: attempt 3 completes with one effect", async () => {
    const lab = freshLab()
    await lab.stub.submit("effect", "transient", { mode: "transient-before-effect", failTimes: 2 })
    const row = await settledRow(lab, "transient")
    expect(row).toMatchObject({ status: "completed", attempt: 3, last_error: null, last_error_name: null })

    const calls = await lab.stub.calls()
    expect(calls.map((call) => [call.attempt, call.outcome])).toEqual([[1, "failed"], [2, "failed"], [3, "completed"]])
    // Each retry waited for its persisted retry time.
    for (const [previous, next] of [[calls[0]!, calls[1]!], [calls[1]!, calls[2]!]] as const) {
      expect(next.started_at).toBeGreaterThanOrEqual(previous.ended_at! + LAB.retryDelayMs)
    }
    expect(await lab.ledger.effects()).toMatchObject([{ source: "transient", key: "transient", attempt: 3 }])
    expect(await lab.ledger.deliveries()).toMatchObject([{ attempt: 3, outcome: "applied" }])
    await expectIdle(lab)
  })

  it("downstream unavailable: rejected deliveries leave no phantom effect; the retry after the outage applies once", async () => {
    const lab = freshLab()
    await lab.ledger.setOutage(2)
    // `guarded`: 3 attempts, the last one held at its gate (a 10 s timeout, which no wait here reaches) so the
    // call is seen pending after the outage, however fast the retries come.
    await lab.stub.submit("guarded", "downstream", { mode: "downstream", failTimes: 2, gate: "downstream" })

    // While the ledger rejected, the call stayed pending with the downstream's error and nothing was applied.
    await callsOf(lab, "downstream", 3)
    const during = await rowOf(lab, "downstream")
    expect(during).toMatchObject({ status: "pending", attempt: 3 })
    expect(during!.last_error).toContain("downstream unavailable")
    expect(await lab.ledger.effects()).toEqual([])
    await lab.stub.open("downstream")

    const row = await settledRow(lab, "downstream")
    expect(row).toMatchObject({ status: "completed", attempt: 3, last_error: null })
    expect((await lab.ledger.deliveries()).map((delivery) => [delivery.attempt, delivery.outcome])).toEqual([
      [1, "rejected"],
      [2, "rejected"],
      [3, "applied"]
    ])
    expect(await lab.ledger.effects()).toMatchObject([{ source: "downstream", key: "downstream", attempt: 3 }])
    expect((await lab.stub.calls()).map((call) => call.outcome)).toEqual(["failed", "failed", "completed"])
    await expectIdle(lab)
  })

  it("failure after an idempotent effect: several deliveries, one effect (the call id is the dedup key)", async () => {
    const lab = freshLab()
    await lab.stub.submit("effect", "lost-ack", { mode: "after-effect-idempotent", failTimes: 2 })
    const row = await settledRow(lab, "lost-ack")
    expect(row).toMatchObject({ status: "completed", attempt: 3 })

    const deliveries = await lab.ledger.deliveries()
    expect(deliveries.map((delivery) => [delivery.key, delivery.attempt, delivery.outcome])).toEqual([
      ["lost-ack", 1, "applied"],
      ["lost-ack", 2, "deduplicated"],
      ["lost-ack", 3, "deduplicated"]
    ])
    const effects = await lab.ledger.effects()
    expect(effects).toMatchObject([{ source: "lost-ack", key: "lost-ack", attempt: 1 }])
    // The stored result names the one effect.
    expect(resultOf(row)).toEqual({ kind: "value", value: { source: "lost-ack", attempt: 3, effect: effects[0]!.seq } })
    await expectIdle(lab)
  })

  it("failure after an unprotected effect: the deliberate duplicates are visible in the ledger", async () => {
    const lab = freshLab()
    await lab.stub.submit("effect", "no-key", { mode: "after-effect-unprotected", failTimes: 2 })
    const row = await settledRow(lab, "no-key")
    expect(row).toMatchObject({ status: "completed", attempt: 3 })
    const effects = await lab.ledger.effects()
    expect(effects.map((effect) => [effect.source, effect.key, effect.attempt])).toEqual([
      ["no-key", null, 1],
      ["no-key", null, 2],
      ["no-key", null, 3]
    ])
    expect(await lab.stub.calls()).toHaveLength(3)
    await expectIdle(lab)
  })
})

describe("operations: timeouts", () => {
  // `timed` cuts every attempt at timedTimeoutMs (150 ms), a later attempt's ledger call included: on a busy machine
  // that call can take longer, and then that attempt times out too and one more runs. Attempt 1 is the one these
  // scenarios make slow; what they assert holds for every attempt after it.

  it("timeout then success: the handler honors abort, a later attempt completes", async () => {
    const lab = freshLab()
    await lab.stub.submit("timed", "honors", { mode: "honor-abort" })
    const outcome = await lab.stub.wait("timed", "honors", WAIT_MS)
    const calls = await allEnded(lab)
    const last = calls.at(-1)!
    expect(outcome).toMatchObject({ status: "completed", result: { source: "honors", attempt: last.attempt } })
    expect(await rowOf(lab, "honors")).toMatchObject({ status: "completed", attempt: last.attempt, last_error: null })
    expect(calls.map((call) => call.attempt)).toEqual(calls.map((_, index) => index + 1))
    expect(calls.length).toBeGreaterThanOrEqual(2)

    // Attempt 1 saw its signal aborted by the timeout and stopped.
    const first = calls[0]!
    expect(first).toMatchObject({ attempt: 1, aborted_at_start: 0, aborted: 1, outcome: "failed" })
    expect(first.ended_at! - first.started_at).toBeGreaterThanOrEqual(LAB.timedTimeoutMs - 5)
    expect(last).toMatchObject({ aborted_at_start: 0, aborted: 0, outcome: "completed" })
    for (const [previous, next] of calls.slice(1).map((call, index) => [calls[index]!, call] as const)) {
      expect(next.aborted_at_start).toBe(0)
      expect(next.started_at).toBeGreaterThanOrEqual(previous.ended_at!)
    }
    // One effect, the call id its key (an attempt cut after applying it would have been deduplicated).
    const effects = await lab.ledger.effects()
    expect(effects).toMatchObject([{ source: "honors", key: "honors" }])
    expect(effects[0]!.attempt).toBeGreaterThanOrEqual(2)
    await expectIdle(lab)
  })

  it("timeout where the handler ignores abort: attempt 2 starts only after attempt 1 really ended", async () => {
    const lab = freshLab()
    // Attempt 1 ignores its signal and holds until the test opens its gate; later attempts find it open.
    await lab.stub.submit("timed", "ignores", { mode: "gated" })

    // The timeout is persisted as a retry while attempt 1 still runs.
    const retrying = await waitFor(
      () => rowOf(lab, "ignores"),
      (row) => row?.last_error_name === "DurableAttemptTimeoutError"
    )
    expect(retrying).toMatchObject({ status: "pending", attempt: 1 })
    expect((await lab.stub.calls()).map((call) => call.outcome)).toEqual(["running"])
    await lab.stub.open("ignores")

    const row = await settledRow(lab, "ignores")
    const calls = await allEnded(lab)
    expect(row).toMatchObject({ status: "completed", attempt: calls.length })
    expect(calls.map((call) => call.attempt)).toEqual(calls.map((_, index) => index + 1))
    const [first, second] = calls
    expect(first).toMatchObject({ attempt: 1, aborted: 1, outcome: "completed" })
    expect(first!.ended_at! - first!.started_at).toBeGreaterThanOrEqual(LAB.timedTimeoutMs - 5)
    expect(second).toMatchObject({ attempt: 2, instance: first!.instance, aborted_at_start: 0 })
    // No overlap in one isolate: each retry was due after the timeout, but waited for the handler before it.
    for (const [previous, next] of calls.slice(1).map((call, index) => [calls[index]!, call] as const)) {
      expect(next.started_at).toBeGreaterThanOrEqual(previous.ended_at!)
      expect(next.concurrent).toBe(1)
    }
    // The late effect of attempt 1 and the retries' share the call id: one effect.
    expect((await lab.ledger.deliveries()).map((delivery) => [delivery.attempt, delivery.outcome])).toEqual(
      calls.map((call) => [call.attempt, call.attempt === 1 ? "applied" : "deduplicated"])
    )
    expect(await lab.ledger.effects()).toHaveLength(1)
    await expectIdle(lab)
  })
})

describe("operations: terminal failures", () => {
  it("non-retryable error: one attempt, failed with NonRetryableError", async () => {
    const lab = freshLab()
    await lab.stub.submit("effect", "fatal", { mode: "non-retryable" })
    const outcome = await lab.stub.wait("effect", "fatal", WAIT_MS)
    expect(outcome).toEqual({
      status: "failed",
      attempt: 1,
      error: { name: "NonRetryableError", message: "fatal cannot succeed" }
    })
    expect(await rowOf(lab, "fatal")).toMatchObject({
      status: "failed",
      attempt: 1,
      last_error_name: "NonRetryableError",
      result: null
    })
    // Idle (nothing pending, no alarm): no retry can come after the calls counted here.
    await expectIdle(lab)
    expect(await lab.stub.calls()).toHaveLength(1)
    expect(await lab.ledger.deliveries()).toEqual([])
  })

  it("retry exhaustion: 5 attempts, then failed with the last error", async () => {
    const lab = freshLab()
    await lab.stub.submit("effect", "doomed", { mode: "always-fail" })
    const row = await settledRow(lab, "doomed")
    expect(row).toMatchObject({
      status: "failed",
      attempt: LAB.defaultMaxAttempts,
      last_error_name: "TransientError",
      last_error: `doomed: always fails on attempt ${LAB.defaultMaxAttempts}`
    })
    // Idle (nothing pending, no alarm): no attempt can come after the ones counted here.
    await expectIdle(lab)
    expect((await lab.stub.calls()).map((call) => call.attempt)).toEqual([1, 2, 3, 4, 5])
    expect(await lab.stub.result("effect", "doomed")).toMatchObject({
      status: "failed",
      attempt: LAB.defaultMaxAttempts,
      error: { name: "TransientError" }
    })
    expect(await lab.ledger.deliveries()).toEqual([])
  })
})

describe("operations: identity", () => {
  it("20 concurrent submissions of one id: one row, one handler call, one effect", async () => {
    const lab = freshLab()
    await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        // Payloads differ on purpose: a repeated id is a no-op whatever its payload.
        lab.stub.submit("effect", "same", { mode: "after-effect-unprotected", failTimes: 0, holdMs: index }))
    )
    const row = await settledRow(lab, "same")
    expect(row).toMatchObject({ status: "completed", attempt: 1 })
    expect(JSON.parse(row.payload)).toEqual({ kind: "value", value: expect.objectContaining({ mode: "after-effect-unprotected" }) })
    expect(await lab.stub.operationRows()).toHaveLength(1)
    // Idle (nothing pending, no alarm): no execution can come after the ones counted here.
    await expectIdle(lab)
    expect(await lab.stub.calls()).toMatchObject([{ source: "same", attempt: 1 }])
    expect(await lab.stub.calls()).toHaveLength(1)
    // Even without a dedup key there is only one effect: only one execution ever happened.
    expect(await lab.ledger.effects()).toMatchObject([{ source: "same", key: null }])
  })

  it("id collision across operations: DuplicateDurableCallError, nothing written", async () => {
    const lab = freshLab()
    await lab.stub.submit("effect", "shared-id", { mode: "ok" })
    const first = await settledRow(lab, "shared-id")
    expect(first).toMatchObject({ operation: "effect", status: "completed" })

    await expect(lab.stub.submit("timed", "shared-id", { mode: "ok" })).rejects.toThrow(
      /Durable call "shared-id" already belongs to operation "effect", not "timed"/
    )
    await expect(lab.stub.result("timed", "shared-id")).rejects.toThrow(/already belongs to operation "effect"/)
    // The original record is untouched, nothing else was written and nothing ran.
    expect(await lab.stub.operationRows()).toEqual([first])
    await expectIdle(lab)
    expect(await lab.stub.calls()).toHaveLength(1)
    expect(await lab.ledger.effects()).toHaveLength(1)

    // Also while the first one is still pending.
    await lab.stub.submit("guarded", "busy-id", { mode: "hang-before-effect" })
    await callsOf(lab, "busy-id", 1)
    const pending = await rowOf(lab, "busy-id")
    await expect(lab.stub.submit("effect", "busy-id", { mode: "ok" })).rejects.toThrow(/already belongs to operation "guarded"/)
    expect(await rowOf(lab, "busy-id")).toEqual(pending)
    // The pending call stays covered: an alarm no later than alarmMinDelayMs after the last commit (the engine
    // may move it within that bound while attempt 1 runs), or a delivery of it in flight.
    const covered = await lab.stub.idle()
    const looked = await lab.stub.now()
    if (covered.delivering === 0) {
      expect(covered.alarm).not.toBeNull()
      expect(covered.alarm!).toBeLessThanOrEqual(looked + LAB.alarmMinDelayMs)
    }
    // The stored alarm recovers it on a fresh instance; the test ends with nothing left to run (an object
    // still running when a test ends meets the pool's storage isolation).
    await reset(lab)
    expect(await settledRow(lab, "busy-id")).toMatchObject({ operation: "guarded", status: "completed", attempt: 2 })
    await expectIdle(lab)
  })

  it("12 failing calls due together: at most alarmConcurrency handlers at once, each completes exactly once", async () => {
    const lab = freshLab()
    const ids = Array.from({ length: 12 }, (_, index) => `burst-${String(index).padStart(2, "0")}`)
    // Every first attempt holds at one gate: the permits fill up whatever the machine's speed, and the rest wait.
    await Promise.all(ids.map((id) => lab.stub.submit("effect", id, { mode: "burst", gate: "burst" })))
    const held = await waitFor(() => lab.stub.calls(), (calls) => calls.length >= LAB.alarmConcurrency)
    expect(held).toHaveLength(LAB.alarmConcurrency)
    await lab.stub.open("burst")

    const rows = await waitFor(
      () => lab.stub.operationRows(),
      (all) => all.length === ids.length && all.every((row) => row.status !== "pending")
    )
    expect(rows.map((row) => [row.id, row.status, row.attempt]).sort()).toEqual(
      ids.map((id) => [id, "completed", 2])
    )
    const calls = await allEnded(lab)
    expect(calls).toHaveLength(ids.length * 2)
    const peak = Math.max(...calls.map((call) => call.concurrent))
    expect(peak).toBeLessThanOrEqual(LAB.alarmConcurrency)
    // The burst did run in parallel, up to the bound.
    expect(peak).toBe(LAB.alarmConcurrency)
    expect(held.every((call) => call.outcome === "running")).toBe(true)
    for (const id of ids) {
      const mine = calls.filter((call) => call.source === id)
      expect(mine.map((call) => [call.attempt, call.outcome])).toEqual([[1, "failed"], [2, "completed"]])
      expect(mine[1]!.started_at).toBeGreaterThanOrEqual(mine[0]!.ended_at!)
    }
    // Unprotected effects: exactly one per call proves that no call ran its successful attempt twice.
    const effects = await lab.ledger.effects()
    expect(effects.map((effect) => effect.source).sort()).toEqual(ids)
    expect(effects.every((effect) => effect.attempt === 2)).toBe(true)
    await expectIdle(lab)
  })
})
