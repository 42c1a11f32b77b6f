/**
 * Regressions from the reference library's own suites, in workerd: real SQLite
 * storage, real alarms, real `cloudflare:workflows`.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect, it } from "vitest"
import { Durability, DurabilityAlarms, type DurableOperationResult } from "../../src/index.js"
import { HandoffObject, ParityObject } from "./objects/ParityObject.js"
import { IDLE, isIdle } from "./objects/idle.js"
import { waitFor } from "./support/lab.js"

const parity = () => env.PARITY_OBJECT.get(env.PARITY_OBJECT.newUniqueId())

type Parity = ReturnType<typeof parity>
type Operation = Parameters<ParityObject["result"]>[0]

const resultOf = (stub: Parity, operation: Operation, id: string) => async (): Promise<DurableOperationResult<unknown>> =>
  (await stub.result(operation, id)) as DurableOperationResult<unknown>

it("a purged id runs again at once while the purged handler never settles; its late settle changes nothing", async () => {
  const stub = parity()
  await stub.send("reuse", 1)
  await waitFor(() => stub.runs(), (runs) => runs.some((run) => run.what === "send v1#1"))
  expect(await stub.purge(Date.now() + 1)).toBe(1)
  await stub.send("reuse", 2)
  expect(await waitFor(resultOf(stub, "send", "reuse"), (result) => result.status === "completed")).toEqual({
    status: "completed",
    result: "sent v2"
  })
  const runs = await stub.runs()
  expect(runs.map((run) => [run.what, run.aborted])).toEqual([["send v1#1", 1], ["send v2#1", 0]])
  const row = await stub.sendRow("reuse")

  expect(await stub.releaseHeldSend()).toBe(true)
  // Its execution has ended and made its late settle (its permit is back), however slow the machine.
  await waitFor(() => stub.executing(), (executing) => executing === 0)
  expect(await stub.sendRow("reuse")).toEqual(row)
  expect(await stub.result("send", "reuse")).toEqual({ status: "completed", result: "sent v2" })
  // End idle (the reconciliation after the last settle deletes the alarm), so the pool can pop the storage.
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("Cloudflare Workflows' NonRetryableError with a custom name is terminal after one attempt", async () => {
  const stub = parity()
  await stub.failWithWorkflowsError("wf")
  expect(await waitFor(resultOf(stub, "workflowsFailure", "wf"), (result) => result.status !== "pending")).toEqual({
    status: "failed",
    attempt: 1,
    error: { name: "AuthError", message: "token revoked" }
  })
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("two helpers built from { context } share one scheduler: an operation's completion cannot delete the named alarm's wake-up", async () => {
  const stub = parity()
  const { MIN_DELAY_MS } = ParityObject
  // The ping's write pulls the alarm in (to its time + MIN_DELAY_MS); once the ping has completed, the engine
  // reconciles (after Scheduler.UPKEEP_DELAY idle, or at that pulled-in alarm at the latest) and the alarm
  // moves back to the renewal: that move is the signal to wait for, instead of a pause. A reconciliation
  // sets renewAt itself only while renewAt is MIN_DELAY_MS ahead of it; with renewAt 3 × MIN_DELAY_MS after
  // its write, that leaves about MIN_DELAY_MS for the one call in between and the pulled-in alarm's lateness
  // (a call took ~250 ms at worst with two CPU hogs beside the suite).
  const renewAt = await stub.renewIn(3 * MIN_DELAY_MS)
  const pulledIn = await stub.ping("p")
  expect(pulledIn).toBeLessThan(renewAt)
  await waitFor(resultOf(stub, "ping", "p"), (result) => result.status === "completed")
  // With a scheduler of its own, the operations' reconciliation would delete the alarm (null).
  expect(await waitFor(() => stub.alarmAt(), (at) => at !== pulledIn)).toBe(renewAt)
  const runs = await waitFor(() => stub.runs(), (list) => list.some((run) => run.what === "renew#1"))
  expect(runs.find((run) => run.what === "renew#1")!.at).toBeGreaterThanOrEqual(renewAt)
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("a handoff later than alarmMinDelayMs leaves the alarm at now + alarmMinDelayMs, not in the past", async () => {
  const stub = env.HANDOFF_OBJECT.get(env.HANDOFF_OBJECT.newUniqueId())
  await stub.start()
  const [first] = await waitFor(() => stub.deliveries(), (list) => list.length >= 1)
  // The pass re-armed the alarm at its start + 1 s; at the handoff (start + 1.2 s) that is past.
  const { HANDOFF_MS, MIN_DELAY_MS } = HandoffObject
  expect(first!.returnedAt - first!.startedAt).toBeGreaterThanOrEqual(HANDOFF_MS)
  // The handoff left it at its own now + MIN_DELAY_MS, and its now lies between startedAt + HANDOFF_MS
  // (its timer cannot fire sooner) and returnedAt: bounds that hold however late the timer fired.
  expect(first!.alarmLeft).toBeGreaterThanOrEqual(first!.startedAt + HANDOFF_MS + MIN_DELAY_MS)
  expect(first!.alarmLeft).toBeLessThanOrEqual(first!.returnedAt + MIN_DELAY_MS)
  // The handed-off handler finishes in the background, once. It is released while the continuation alarm's
  // delivery runs (that pass attaches to the running handler for up to HANDOFF_MS), so its settle, which deletes
  // the alarm, happens inside a delivery and leaves workerd nothing scheduled. Released between deliveries, the
  // delete raced workerd's alarm scheduler, which delivered the deleted alarm anyway ("alarm overdue, running
  // despite AlarmManager mismatch") after the test had seen the object idle.
  await waitFor(() => stub.idle(), (state) => state.delivering > 0)
  await stub.finish()
  await waitFor(() => stub.pending(), (pending) => pending === 0)
  expect(await stub.calls()).toEqual([{ attempt: 1 }])
  // End idle, so the pool can pop this test's storage: the continuation alarm is deleted or has run.
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("migrate on a 2.x history (combined 0004 row, no split row) records 0004 and leaves live rows untouched", async () => {
  const stub = env.STORAGE_OBJECT.get(env.STORAGE_OBJECT.newUniqueId())
  await runInDurableObject(stub, (_instance, state) => {
    Durability.migrate(state)
    DurabilityAlarms.migrate(state)
    const sql = state.storage.sql
    sql.exec(
      `INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, generation_id, created_at)
       VALUES ('live', 'charge', '{"kind":"value","value":1}', 'pending', 1, 5000, 'g-live', 123)`
    )
    sql.exec(
      `DELETE FROM durability_migrations WHERE name LIKE 'durability_0004_%';
       INSERT INTO durability_migrations (name) VALUES ('durability_0004_generation_and_created_at')`
    )
    const before = sql.exec("SELECT * FROM durability_calls").toArray()
    expect(Durability.migrate(state)).toEqual({ applied: [], rolledBack: [] })
    expect(DurabilityAlarms.migrate(state)).toEqual({ applied: [], rolledBack: [] })
    expect(sql.exec("SELECT * FROM durability_calls").toArray()).toEqual(before)
    expect(before[0]).toMatchObject({ generation_id: "g-live", created_at: 123 })
    expect(sql.exec("SELECT name FROM durability_migrations WHERE name LIKE 'durability_0004_%' ORDER BY name").toArray())
      .toEqual([
        { name: "durability_0004_alarms_generation_and_created_at" },
        { name: "durability_0004_calls_generation_and_created_at" },
        { name: "durability_0004_generation_and_created_at" }
      ])
  })
})
