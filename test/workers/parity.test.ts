/**
 * Regressions from the reference library's own suites, in workerd: real SQLite
 * storage, real alarms, real `cloudflare:workflows`.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect, it } from "vitest"
import { Durability, DurabilityAlarms, type DurableOperationResult } from "../../src/index.js"
import { HandoffObject, type ParityObject } from "./objects/ParityObject.js"
import { sleep, waitFor } from "./support/lab.js"

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
  await sleep(50)
  expect(await stub.sendRow("reuse")).toEqual(row)
  expect(await stub.result("send", "reuse")).toEqual({ status: "completed", result: "sent v2" })
})

it("Cloudflare Workflows' NonRetryableError with a custom name is terminal after one attempt", async () => {
  const stub = parity()
  await stub.failWithWorkflowsError("wf")
  expect(await waitFor(resultOf(stub, "workflowsFailure", "wf"), (result) => result.status !== "pending")).toEqual({
    status: "failed",
    attempt: 1,
    error: { name: "AuthError", message: "token revoked" }
  })
})

it("two helpers built from { context } share one scheduler: an operation's completion cannot delete the named alarm's wake-up", async () => {
  const stub = parity()
  const renewAt = Date.now() + 2_000
  await stub.renew(renewAt)
  await stub.ping("p")
  await waitFor(resultOf(stub, "ping", "p"), (result) => result.status === "completed")
  // Past the idle reconciliation (Scheduler.UPKEEP_DELAY): the alarm still covers the renewal.
  await sleep(300)
  expect(await stub.alarmAt()).toBe(renewAt)
  const runs = await waitFor(() => stub.runs(), (list) => list.some((run) => run.what === "renew#1"), 5_000)
  expect(runs.find((run) => run.what === "renew#1")!.at).toBeGreaterThanOrEqual(renewAt)
  expect(await waitFor(() => stub.alarmAt(), (at) => at === null)).toBeNull()
})

it("a handoff later than alarmMinDelayMs leaves the alarm at now + alarmMinDelayMs, not in the past", async () => {
  const stub = env.HANDOFF_OBJECT.get(env.HANDOFF_OBJECT.newUniqueId())
  await stub.start()
  const [first] = await waitFor(() => stub.deliveries(), (list) => list.length >= 1, 6_000)
  // The pass re-armed the alarm at its start + 1 s; at the handoff (start + 1.2 s) that is past.
  expect(first!.returnedAt - first!.startedAt).toBeGreaterThanOrEqual(HandoffObject.HANDOFF_MS)
  expect(first!.alarmLeft).toBeGreaterThanOrEqual(first!.returnedAt + HandoffObject.MIN_DELAY_MS - 50)
  // The handed-off handler finishes in the background, once.
  await waitFor(() => stub.pending(), (pending) => pending === 0, 6_000)
  expect(await stub.calls()).toEqual([{ attempt: 1 }])
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
