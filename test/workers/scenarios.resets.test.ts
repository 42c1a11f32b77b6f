/**
 * Fault scenarios with forced resets of the object (`state.abort()`) in the
 * middle of an attempt, inside workerd: in-memory state, timers and running
 * handlers are lost; storage and the platform alarm survive; the work is
 * recovered by a fresh instance. The `EffectLedger` is a separate object, so
 * its record of external effects is unaffected by the resets. See
 * scenarios.operations.test.ts for the lab.
 */
import { runDurableObjectAlarm } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import { LAB } from "./objects/LabObject.js"
import { allEnded, callsOf, expectIdle, freshLab, type Lab, reset, rowOf, settledRow, waitFor } from "./support/lab.js"

/** Registers `id` on `guarded` (long timeout) and resets the object once attempt 1 is running. */
const crashDuringAttempt1 = async (
  lab: Lab,
  id: string,
  mode: "hang-before-effect" | "hang-after-idempotent" | "hang-after-unprotected",
  beforeReset: () => Promise<unknown>
) => {
  const first = await lab.stub.whoami()
  await lab.stub.submit("guarded", id, { mode })
  await callsOf(lab, id, 1)
  await beforeReset()
  const claimed = await rowOf(lab, id)
  expect(claimed).toMatchObject({ status: "pending", attempt: 1 })
  // The registration armed the alarm, and it is still armed while the attempt runs (the platform reports none
  // while it delivers one, so a delivery in flight stands for it).
  const before = await lab.stub.idle()
  if (before.delivering === 0) expect(before.alarm).not.toBeNull()
  await reset(lab)
  // What survived the reset: the claimed row, and an alarm that covers it. The alarm is checked against the
  // lost-wake-up bound (set, and no later than alarmMinDelayMs after the last commit, so after this look),
  // not for equality with the one read before: the engine may move it within that bound as it runs (an
  // upkeep of the old instance before the reset, the fresh instance's reconcile as it starts).
  const after = await lab.stub.idle()
  const looked = await lab.stub.now()
  // Read after the alarm: a row still pending now was pending when the alarm was read.
  const row = await rowOf(lab, id)
  // A delivery the reset cut short (the alarm came due while attempt 1 ran, on a busy machine) leaves no alarm
  // to read: workerd delivers it again later, a retry getAlarm does not show. The bound applies otherwise.
  const cut = (await lab.stub.deliveries()).some((delivery) => delivery.instance === first)
  if (row!.status === "pending" && after.delivering === 0 && !cut) {
    expect(after.alarm).not.toBeNull()
    expect(after.alarm!).toBeLessThanOrEqual(looked + LAB.alarmMinDelayMs)
  }
  // As claimed, unless (a busy machine) the alarm came due before this look and the fresh instance already
  // took attempt 2 of the same generation (maybe to its end); the calls the callers check show which.
  if (row!.attempt === 1) expect(row).toEqual(claimed)
  else expect(row).toMatchObject({ attempt: 2, generation_id: claimed!.generation_id })
  return { first, claimed: claimed! }
}

describe("forced object reset during an attempt", () => {
  it("before the effect: the work is recovered in a fresh instance, one effect", async () => {
    const lab = freshLab()
    const { claimed, first } = await crashDuringAttempt1(lab, "crash-before", "hang-before-effect", async () => {
      expect(await lab.ledger.deliveries()).toEqual([])
    })
    const row = await settledRow(lab, "crash-before")
    expect(row).toMatchObject({ status: "completed", attempt: 2, generation_id: claimed.generation_id })

    const calls = await lab.stub.calls()
    expect(calls.map((call) => [call.attempt, call.outcome])).toEqual([[1, "running"], [2, "completed"]])
    expect(calls[0]!.instance).toBe(first)
    expect(calls[1]!.instance).not.toBe(first)
    expect(await lab.ledger.effects()).toMatchObject([{ source: "crash-before", key: "crash-before", attempt: 2 }])
    await expectIdle(lab)
  })

  it("after an idempotent effect: the recovered attempt is deduplicated by the stable key, one effect", async () => {
    const lab = freshLab()
    const { first } = await crashDuringAttempt1(lab, "crash-keyed", "hang-after-idempotent", () =>
      waitFor(() => lab.ledger.effects(), (effects) => effects.length === 1))
    const row = await settledRow(lab, "crash-keyed")
    expect(row).toMatchObject({ status: "completed", attempt: 2 })

    const calls = await lab.stub.calls()
    expect(calls.map((call) => [call.attempt, call.outcome])).toEqual([[1, "running"], [2, "completed"]])
    expect(calls[1]!.instance).not.toBe(first)
    expect((await lab.ledger.deliveries()).map((delivery) => [delivery.key, delivery.attempt, delivery.outcome]))
      .toEqual([
        ["crash-keyed", 1, "applied"],
        ["crash-keyed", 2, "deduplicated"]
      ])
    expect(await lab.ledger.effects()).toHaveLength(1)
    await expectIdle(lab)
  })

  it("after an unprotected effect: the recovered attempt applies it again (a visible duplicate)", async () => {
    const lab = freshLab()
    const { first } = await crashDuringAttempt1(lab, "crash-unkeyed", "hang-after-unprotected", () =>
      waitFor(() => lab.ledger.effects(), (effects) => effects.length === 1))
    const row = await settledRow(lab, "crash-unkeyed")
    expect(row).toMatchObject({ status: "completed", attempt: 2 })

    const calls = await lab.stub.calls()
    expect(calls.map((call) => [call.attempt, call.outcome])).toEqual([[1, "running"], [2, "completed"]])
    expect(calls[1]!.instance).not.toBe(first)
    expect((await lab.ledger.effects()).map((effect) => [effect.source, effect.key, effect.attempt])).toEqual([
      ["crash-unkeyed", null, 1],
      ["crash-unkeyed", null, 2]
    ])
    await expectIdle(lab)
  })

  it("a named alarm reset mid-attempt is retried with the same idempotencyKey", async () => {
    const lab = freshLab()
    const first = await lab.stub.whoami()
    await lab.stub.schedule("gamma", await lab.stub.now(), { mode: "hang-after-idempotent" })
    const scheduled = (await lab.stub.alarmRows())[0]!
    await waitFor(() => lab.ledger.effects(), (effects) => effects.length === 1)
    expect(await lab.stub.alarmRows()).toMatchObject([{ name: "gamma", status: "pending", attempt: 1 }])
    // The alarm armed with the occurrence covers the running attempt (a delivery in flight stands for it: the
    // platform reports no alarm while it delivers one).
    const before = await lab.stub.idle()
    if (before.delivering === 0) expect(before.alarm).not.toBeNull()
    await reset(lab)

    await waitFor(() => lab.stub.alarmRows(), (rows) => rows.length === 0)
    const calls = await allEnded(lab)
    const key = `durability-alarm:v1:${scheduled.generation_id}`
    expect(calls.map((call) => [call.attempt, call.dedup_key, call.outcome])).toEqual([
      [1, key, "running"],
      [2, key, "completed"]
    ])
    expect(calls[0]!.instance).toBe(first)
    // The recovery came from the platform alarm, on a new instance.
    expect(calls[1]).toMatchObject({ from_alarm: 1 })
    expect(calls[1]!.instance).not.toBe(first)
    expect((await lab.ledger.deliveries()).map((delivery) => [delivery.key, delivery.outcome])).toEqual([
      [key, "applied"],
      [key, "deduplicated"]
    ])
    await expectIdle(lab)
  })
})

describe("repeated resets", () => {
  it("an operation never exceeds maxAttempts when every attempt is cut short by a reset", async () => {
    const lab = freshLab()
    const id = "always-reset"
    await lab.stub.submit("guarded", id, { mode: "hang-before-effect", failTimes: 99 })
    const instances = new Set<string>()
    for (let attempt = 1; attempt <= LAB.guardedMaxAttempts; attempt++) {
      // Attempt 1 runs eagerly; attempt 2 comes from the alarm the registration armed; attempt 3
      // from the platform's retry of the alarm invocation the reset cut short.
      const calls = await callsOf(lab, id, attempt)
      expect(calls.map((call) => call.attempt)).toEqual(Array.from({ length: attempt }, (_, index) => index + 1))
      instances.add(calls[attempt - 1]!.instance)
      expect(await rowOf(lab, id)).toMatchObject({ status: "pending", attempt })
      await reset(lab)
    }
    expect(instances.size).toBe(LAB.guardedMaxAttempts)

    // The next delivery of the alarm (the platform would retry it; run it now) finds every
    // attempt used: the call fails without running the handler again.
    expect(await rowOf(lab, id)).toMatchObject({ status: "pending", attempt: LAB.guardedMaxAttempts })
    expect(await runDurableObjectAlarm(lab.stub)).toBe(true)
    const row = await settledRow(lab, id)
    expect(row).toMatchObject({
      status: "failed",
      attempt: LAB.guardedMaxAttempts,
      last_error_name: "DurableAttemptsExhaustedError",
      last_error: `Durable operation "guarded" (id "${id}") exhausted its ${LAB.guardedMaxAttempts} attempts`
    })
    expect(await lab.stub.result("guarded", id)).toMatchObject({
      status: "failed",
      attempt: LAB.guardedMaxAttempts,
      error: { name: "DurableAttemptsExhaustedError" }
    })
    expect((await lab.stub.calls()).map((call) => call.attempt)).toEqual([1, 2, 3])
    expect(await lab.ledger.deliveries()).toEqual([])
    expect(await lab.stub.alarmAt()).toBeNull()
    expect(await runDurableObjectAlarm(lab.stub)).toBe(false)
  })
})
