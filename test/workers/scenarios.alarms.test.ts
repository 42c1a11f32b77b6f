/**
 * Fault scenarios for named alarms (and the pending work of both capabilities
 * across an eviction) inside workerd: real SQLite storage, real alarms, real
 * timers. See scenarios.operations.test.ts for the lab.
 */
import { describe, expect, it } from "vitest"
import { LAB } from "./objects/LabObject.js"
import { allEnded, expectIdle, freshLab, type Lab, reset, rowOf, waitFor } from "./support/lab.js"

/** The documented shape of `DurableAlarmInfo.idempotencyKey`: stable per occurrence (generation). */
const IDEMPOTENCY_PREFIX = "durability-alarm:v1:"

const alarmRow = async (lab: Lab, name: string) => (await lab.stub.alarmRows()).find((row) => row.name === name)

/** Waits until the occurrence of `name` is gone (deleted by its success). */
const alarmDone = (lab: Lab, name: string, timeoutMs?: number) =>
  waitFor(() => alarmRow(lab, name), (row) => row === undefined, timeoutMs)

describe("named alarms", () => {
  it("a retried occurrence keeps its idempotencyKey: the ledger sees the same key on every attempt", async () => {
    const lab = freshLab()
    const now = await lab.stub.now()
    // The row as the schedule left it (due now: its attempts may all have run by the next call).
    const scheduled = await lab.stub.schedule("alpha", now, { mode: "after-effect-idempotent", failTimes: 2 })
    expect(scheduled).toMatchObject({ status: "pending", attempt: 0, scheduled_at: now })
    const key = `${IDEMPOTENCY_PREFIX}${scheduled!.generation_id}`

    await alarmDone(lab, "alpha")
    const calls = await allEnded(lab)
    expect(calls.map((call) => [call.attempt, call.dedup_key, call.outcome, call.scheduled_time])).toEqual([
      [1, key, "failed", now],
      [2, key, "failed", now],
      [3, key, "completed", now]
    ])
    expect((await lab.ledger.deliveries()).map((delivery) => [delivery.key, delivery.attempt, delivery.outcome]))
      .toEqual([
        [key, 1, "applied"],
        [key, 2, "deduplicated"],
        [key, 3, "deduplicated"]
      ])
    expect(await lab.ledger.effects()).toMatchObject([{ source: "alpha", key, attempt: 1 }])
    await expectIdle(lab)
  })

  it("the same name scheduled twice: only the replacement runs, with its own key", async () => {
    const lab = freshLab()
    const now = await lab.stub.now()
    // The first occurrence is due long after the test ends, so it can run only if the replacement failed to
    // replace it, however slow the calls below are.
    const replaced = await lab.stub.schedule("beta", now + 60_000, { mode: "ok" })
    // The row as the replacement left it (due 600 ms after `now`: on a busy machine it may run right after).
    const replacement = await lab.stub.schedule("beta", now + 600, { mode: "ok" })
    expect(replacement).toMatchObject({ status: "pending", attempt: 0, scheduled_at: now + 600 })
    expect(replacement!.generation_id).not.toBe(replaced!.generation_id)

    await alarmDone(lab, "beta")
    const calls = await allEnded(lab)
    const key = `${IDEMPOTENCY_PREFIX}${replacement!.generation_id}`
    expect(calls).toHaveLength(1)
    expect(calls).toMatchObject([{ source: "beta", attempt: 1, dedup_key: key, scheduled_time: now + 600 }])
    expect(calls[0]!.started_at).toBeGreaterThanOrEqual(now + 600)
    expect(await lab.ledger.effects()).toMatchObject([{ source: "beta", key }])
    await expectIdle(lab)
  })

  it("a replacement scheduled while the occurrence runs waits for it, then runs once with a new key", async () => {
    const lab = freshLab()
    const now = await lab.stub.now()
    // `gamma` (a 10 s attempt timeout) held at its gate: the first occurrence is still running whenever the
    // replacement comes, and no timeout cuts it short while the test looks.
    const first = await lab.stub.schedule("gamma", now, { mode: "gated" })
    await waitFor(() => lab.stub.calls(), (calls) => calls.length === 1)
    const second = await lab.stub.schedule("gamma", now, { mode: "ok" })
    expect(second).toMatchObject({ status: "pending", attempt: 0 })
    await lab.stub.open("gamma")

    await alarmDone(lab, "gamma")
    const calls = await allEnded(lab)
    const firstKey = `${IDEMPOTENCY_PREFIX}${first!.generation_id}`
    const secondKey = `${IDEMPOTENCY_PREFIX}${second!.generation_id}`
    expect(calls.map((call) => [call.attempt, call.dedup_key, call.outcome])).toEqual([
      [1, firstKey, "completed"],
      [1, secondKey, "completed"]
    ])
    // One handler per name at a time: the replacement started after the first really ended.
    expect(calls[1]!.started_at).toBeGreaterThanOrEqual(calls[0]!.ended_at!)
    expect((await lab.ledger.effects()).map((effect) => effect.key)).toEqual([firstKey, secondKey])
    await expectIdle(lab)
  })
})

describe("eviction", () => {
  it("graceful eviction (a reset while idle) keeps pending work: rows and alarm survive, the work completes later", async () => {
    const lab = freshLab()
    const now = await lab.stub.now()
    const before = await lab.stub.whoami()
    // The reset must come while nothing is due. The first thing due is `later`'s retry, deferredDelayMs
    // (1.5 s) after its attempt 1 failed, and three calls separate that failure from the reset; `beta` is due
    // after it, 3 s from `now`, which seven calls (the attempt included) separate from the reset.
    const due = now + 3_000
    await lab.stub.schedule("beta", due, { mode: "ok" })
    await lab.stub.submit("deferred", "later", { mode: "transient-before-effect", failTimes: 1 })
    const failed = await waitFor(
      () => rowOf(lab, "later"),
      (row) => row?.attempt === 1 && row.last_error_name === "TransientError"
    )
    expect(failed).toMatchObject({ status: "pending" })
    expect(failed!.next_attempt_at).toBeGreaterThanOrEqual(now + LAB.deferredDelayMs)
    await allEnded(lab)
    const alarm = await lab.stub.alarmAt()
    // The earliest pending time: the retry (no earlier than the alarm's minimum delay).
    expect(alarm).toBe(Math.min(due, failed!.next_attempt_at))

    await reset(lab)
    expect(await lab.stub.whoami()).not.toBe(before)
    // What survived: both pending records and the platform alarm.
    expect(await rowOf(lab, "later")).toEqual(failed)
    expect(await alarmRow(lab, "beta")).toMatchObject({ status: "pending", attempt: 0, scheduled_at: due })
    expect(await lab.stub.alarmAt()).toBe(alarm)

    await alarmDone(lab, "beta")
    const completed = await waitFor(() => rowOf(lab, "later"), (row) => row?.status !== "pending")
    expect(completed).toMatchObject({ status: "completed", attempt: 2 })
    const calls = await allEnded(lab)
    const [attempt1, attempt2] = calls.filter((call) => call.source === "later")
    const [named] = calls.filter((call) => call.source === "beta")
    expect(attempt1).toMatchObject({ attempt: 1, instance: before, outcome: "failed" })
    expect(attempt2).toMatchObject({ attempt: 2, outcome: "completed" })
    expect(attempt2!.instance).not.toBe(before)
    expect(attempt2!.started_at).toBeGreaterThanOrEqual(failed!.next_attempt_at)
    // The named alarm ran on the new instance, not before its time: started by the stored alarm, or by the new
    // instance's own timer (the test's calls start that instance, and `later`'s recovery ran there first; which
    // of the two comes first is a race with the clock, and either is the engine's to choose).
    expect(named).toMatchObject({ attempt: 1, outcome: "completed" })
    expect(named!.instance).not.toBe(before)
    expect(named!.started_at).toBeGreaterThanOrEqual(due)
    expect((await lab.ledger.effects()).map((effect) => effect.source).sort()).toEqual(["beta", "later"])
    await expectIdle(lab)
  })
})
