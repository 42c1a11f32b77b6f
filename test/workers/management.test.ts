/**
 * Managing work over RPC in workerd (real SQLite, real alarms): registrations that
 * start later, batches, cancel and list of operations, get / cancel / list of named alarms.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect, it } from "vitest"
import type { DurableOperationResult } from "../../src/index.js"
import { ManagedObject } from "./objects/ManagedObject.js"
import { IDLE, isIdle } from "./objects/idle.js"
import { sleep, waitFor } from "./support/lab.js"

const managed = () => env.MANAGED_OBJECT.get(env.MANAGED_OBJECT.newUniqueId())
type Managed = ReturnType<typeof managed>

const resultOf = (stub: Managed, operation: "send" | "hold", id: string) =>
async (): Promise<DurableOperationResult<unknown>> =>
  (await stub.result(operation, id)) as DurableOperationResult<unknown>

it("delayMs and runAt (a number or a Date) start a call no earlier than its time, through the real alarm", async () => {
  const stub = managed()
  const start = Date.now()
  const delay = ManagedObject.MIN_DELAY_MS + 500
  await stub.send("delayed", { delayMs: delay })
  await stub.send("at", { runAt: start + delay })
  // Read in the call that wrote the last registration, so no alarm can have fired before it is read.
  expect(await stub.send("date", { runAtDate: start + delay + 200 })).toBeGreaterThanOrEqual(
    start + ManagedObject.MIN_DELAY_MS
  )
  // That none ran early is what each run's time says (checking for no runs here would race the alarm).
  const runs = await waitFor(() => stub.runs(), (list) => list.length === 3)
  expect(runs.map((run) => run.what).sort()).toEqual(["send at", "send date", "send delayed"])
  for (const run of runs) {
    expect(run.at).toBeGreaterThanOrEqual(start + delay)
  }
  expect(runs.find((run) => run.what === "send date")!.at).toBeGreaterThanOrEqual(start + delay + 200)
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("many(): a batch commits in one transaction; due calls run at once, a later one through the real alarm", async () => {
  const stub = managed()
  const start = Date.now()
  const delay = ManagedObject.MIN_DELAY_MS + 300
  await stub.sendMany([{ id: "b-1" }, { id: "b-2" }, { id: "b-later", delayMs: delay }])
  // Checked in the first call after the batch's write, 1.3 s before b-later is due: a margin, since the real
  // alarm is the point (a call took ~250 ms at worst with two CPU hogs beside the suite). That it did not
  // run early is what its run's time says below.
  expect(await stub.result("send", "b-later")).toMatchObject({ status: "pending", attempt: 0 })
  const first = await waitFor(() => stub.runs(), (runs) => runs.length >= 2)
  expect(first.slice(0, 2).map((run) => run.what).sort()).toEqual(["send b-1", "send b-2"])
  const all = await waitFor(() => stub.runs(), (runs) => runs.length === 3)
  expect(all[2]).toMatchObject({ what: "send b-later" })
  expect(all[2]!.at).toBeGreaterThanOrEqual(start + delay)
  expect(await stub.result("send", "b-later")).toMatchObject({ status: "completed", result: { to: "b-later" } })
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("many(): all or none; an id owned by another operation rejects the batch and writes none of it", async () => {
  const stub = managed()
  await stub.send("taken", {})
  await waitFor(resultOf(stub, "send", "taken"), (result) => result.status === "completed")
  // A rejection crossing RPC would break the pool's isolated storage: assert inside the object.
  await runInDurableObject(stub, async (instance: ManagedObject, state) => {
    const error = await instance.durability.hold.many([{ id: "fresh", payload: null }, { id: "taken", payload: null }])
      .then(() => undefined, (e: Error) => e)
    expect(error?.name).toBe("DuplicateDurableCallError")
    const rows = state.storage.sql.exec("SELECT id, operation FROM durability_calls ORDER BY id").toArray()
    expect(rows).toEqual([{ id: "taken", operation: "send" }])
  })
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("cancel: a waiting call never runs; a running one has its signal aborted; neither is retried", async () => {
  const stub = managed()
  await stub.send("waiting", { delayMs: 60_000 })
  expect(await stub.cancel("send", "waiting")).toBe(true)
  expect(await stub.result("send", "waiting")).toMatchObject({
    status: "failed",
    attempt: 0,
    error: { name: "DurableCanceledError" }
  })
  // Nothing else pending: the engine deletes the alarm once it is idle.
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)

  await stub.hold("running")
  await waitFor(() => stub.runs(), (runs) => runs.some((run) => run.what === "hold running"))
  expect(await stub.cancel("hold", "running")).toBe(true)
  await waitFor(() => stub.runs(), (runs) => runs.some((run) => run.what.startsWith("aborted running")))
  expect((await stub.runs()).map((run) => run.what)).toContain("aborted running: DurableCanceledError")
  // The canceled execution has ended and settled (its permit is back): what it left stored is final.
  await waitFor(() => stub.executing(), (executing) => executing === 0)
  expect(await waitFor(resultOf(stub, "hold", "running"), (result) => result.status === "failed")).toMatchObject({
    status: "failed",
    attempt: 1,
    error: { name: "DurableCanceledError" }
  })
  expect((await stub.runs()).filter((run) => run.what === "hold running")).toHaveLength(1)
  expect(await stub.cancel("hold", "running")).toBe(false)
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("list pages an operation's calls in registration order, with a cursor and a status filter", async () => {
  const stub = managed()
  for (const id of ["one", "two", "three"]) {
    await stub.send(id, { delayMs: 60_000 })
    // The list orders by (created_at in ms, id): distinct times make it registration order, not id order.
    // A floor, not a premise: a slower machine only spreads the times further.
    await sleep(2)
  }
  await stub.cancel("send", "two")
  const first = await stub.list({ limit: 2 })
  expect(first.items.map((item) => item.id)).toEqual(["one", "two"])
  const second = await stub.list({ limit: 2, cursor: first.cursor })
  expect(second.items.map((item) => item.id)).toEqual(["three"])
  expect(second.cursor).toBeUndefined()
  expect((await stub.list({ status: "pending" })).items.map((item) => item.id)).toEqual(["one", "three"])
  expect((await stub.list({ status: "failed" })).items).toEqual([
    expect.objectContaining({ id: "two", status: "failed", error: expect.objectContaining({ name: "DurableCanceledError" }) })
  ])
  // In the object, not over RPC: a rejected RPC call trips the pool's isolated storage (workers-sdk#11031).
  await runInDurableObject(stub, async (instance: ManagedObject) => {
    const error = await instance.list({ limit: 5_000 }).then(() => undefined, (e: Error) => e)
    expect(error).toBeInstanceOf(RangeError)
    expect(error?.message).toBe("limit must be an integer from 1 to 1000, got 5000")
  })
  // End idle, so the pool can pop this test's storage.
  await stub.cancel("send", "one")
  await stub.cancel("send", "three")
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("named alarms: get, list and cancel over RPC; a Date schedules; the physical alarm follows a cancel", async () => {
  const stub = managed()
  const renewAt = Date.now() + 60_000
  const expireAt = Date.now() + 120_000
  await stub.schedule("renew", renewAt, true)
  await stub.schedule("expire", expireAt, false)
  expect(await stub.getAlarm("renew")).toMatchObject({ name: "renew", status: "pending", scheduledTime: renewAt, attempt: 0 })
  expect((await stub.listAlarms()).names).toEqual(["renew", "expire"])
  // A page at a time, as every capability's list.
  const first = await stub.listAlarms({ limit: 1 })
  expect(first.names).toEqual(["renew"])
  expect((await stub.listAlarms({ limit: 1, cursor: first.cursor })).names).toEqual(["expire"])
  expect(await stub.alarmAt()).toBe(renewAt)
  expect(await stub.cancelAlarm("renew")).toBe(true)
  expect(await stub.getAlarm("renew")).toBeUndefined()
  expect(await stub.alarmAt()).toBe(expireAt)
  expect(await stub.cancelAlarm("renew")).toBe(false)
  await stub.cancelAlarm("expire")
  expect(await stub.alarmAt()).toBeNull()
})
