/**
 * The retained log inside workerd (objects/LogObject.ts): real SQLite storage, a real R2 bucket for
 * cold storage, resets of the object (`state.abort()`). The reference's workerd guarantees —
 * history replayed after a reset, monotonic offsets and dedup, a flush to R2 read back by a late
 * reader, leases surviving a reset and fencing an expired holder, backlog — and two resets in the
 * middle of retention: during a multi-step trim, and between a segment's R2 write and its delete.
 * Nothing is lost: every offset appended stays readable, from the object or from R2 through an
 * indexed segment (this object's cold storage keeps everything; no record expires for good).
 */
import { env, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import { DurabilityInspector } from "../../src/inspector.js"
import { LOG, type LogObject } from "./objects/LogObject.js"
import { waitFor } from "./support/lab.js"

type Stub = DurableObjectStub<LogObject>

const fresh = () => {
  const id = env.LOG_OBJECT.newUniqueId()
  return { id, stub: (): Stub => env.LOG_OBJECT.get(id) }
}

const events = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({ body: { topic: "a", value: from + i } }))

/** Appends `count` events from `from` on, in batches the object takes (at most `maxBatchSize`). */
const appendAll = async (stub: Stub, from: number, count: number): Promise<void> => {
  for (let at = from; at < from + count; at += LOG.maxBatchSize) {
    const result = await stub.append(events(at, Math.min(LOG.maxBatchSize, from + count - at)))
    expect(result.success).toBe(true)
  }
}

/**
 * Resets the object: its in-memory state is gone, storage stays. Also how a test ends an object one of
 * whose RPC methods rejected: workerd counts that rejection as an uncaught exception of the instance,
 * which then keeps its SQLite file open past the test (a `.sqlite-shm` file the pool's storage
 * isolation refuses).
 */
const reset = async (stub: Stub): Promise<void> => {
  await expect(runInDurableObject(stub, (_instance, state) => state.abort("reset by the log test"))).rejects.toThrow()
}

/** Every value from `from` on, page by page (the object's pages, then R2's). */
const readAll = async (stub: Stub, from: number): Promise<Array<number>> => {
  const seen: Array<number> = []
  let at = from
  for (;;) {
    const page = await stub.read(at)
    if (page.records.length === 0) return seen
    seen.push(...page.records.map((record) => record.body.value))
    at = page.nextOffset
  }
}

describe("retained log in workerd", () => {
  it("retains records across a reset so a consumer replays history", async () => {
    const object = fresh()
    expect(await object.stub().append(events(1, 2))).toMatchObject({ success: true, value: [0, 1] })
    await object.stub().commit("search", 2)
    await reset(object.stub())
    const revived = object.stub()
    expect(await revived.cursors()).toEqual({ search: 2 })
    const page = await revived.read(0)
    expect(page.records.map((record) => record.body.value)).toEqual([1, 2])
    expect(page).toMatchObject({ nextOffset: 2, lag: 0 })
  })

  it("keeps offsets monotonic and deduplicates a repeated append", async () => {
    const stub = fresh().stub()
    const first = await stub.append([{ deduplicationKey: "k1", body: { topic: "a", value: 1 } }])
    const repeat = await stub.append([
      { deduplicationKey: "k1", body: { topic: "a", value: 1 } },
      { deduplicationKey: "k2", body: { topic: "b", value: 2 } }
    ])
    expect(first).toMatchObject({ success: true, value: [0] })
    expect(repeat).toMatchObject({ success: true, value: [0, 1] })
    expect(await stub.bounds()).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 2 })
  })

  it("flushes to R2 beyond retention and rehydrates a late reader; forgetting a segment truncates", async () => {
    const stub = fresh().stub()
    await appendAll(stub, 1, 5)
    expect(await stub.trim()).toBe(2)
    expect(await stub.bounds()).toEqual({ oldestOffset: 0, hotOffset: 2, nextOffset: 5 })
    expect(await stub.coldKeys()).toHaveLength(1)
    const rehydrated = await stub.read(0, 2)
    expect(rehydrated.records.map((record) => record.body.value)).toEqual([1, 2])
    expect((await stub.read(rehydrated.nextOffset)).records).toHaveLength(3)
    expect(await stub.forgetColdBefore(2)).toBe(1)
    await expect(async () => {
      await stub.read(0)
    }).rejects.toThrow(/was trimmed; the oldest retained offset is 2/)
    expect((await stub.read(2)).records).toHaveLength(3)
    await reset(stub)
  })

  it("leases distinct ranges and survives a reset mid-flight", async () => {
    const object = fresh()
    await object.stub().append(events(1, 3))
    const first = await object.stub().lease("search", 1)
    const second = await object.stub().lease("search", 1)
    expect(first?.firstOffset).toBe(0)
    expect(second?.firstOffset).toBe(1)
    expect(await object.stub().lease("search", 1)).toBeUndefined()
    await reset(object.stub())
    const revived = object.stub()
    // Leases are durable: the reset hands offset 0 to nobody else.
    expect(await revived.lease("search", 1)).toBeUndefined()
    await revived.ackLease("search", second!.batchId)
    expect(await revived.cursor("search")).toBeUndefined()
    await revived.ackLease("search", first!.batchId)
    expect(await revived.cursor("search")).toBe(2)
  })

  it("fences the previous holder once its lease expires", async () => {
    const stub = fresh().stub()
    await stub.append(events(1, 1))
    const held = await stub.lease("search", 1)
    expect(held?.expiresAt).toBeGreaterThan(0)
    // Nothing to lease until the lease lapses; then the range comes back, one attempt further.
    const stolen = await waitFor(() => stub.lease("search", 1), (lease) => lease !== undefined, 5 * LOG.leaseMs + 10_000, 50)
    expect(stolen).toMatchObject({ firstOffset: 0, attempt: 2 })
    expect(stolen!.batchId).not.toBe(held!.batchId)
    await expect(async () => {
      await stub.ackLease("search", held!.batchId)
    }).rejects.toThrow(/is not held/)
    await stub.ackLease("search", stolen!.batchId)
    expect(await stub.cursor("search")).toBe(1)
    await reset(stub)
  })

  it("reports backlog from the furthest-behind consumer", async () => {
    const stub = fresh().stub()
    await stub.append(events(1, 3))
    await stub.commit("fast", 3)
    await stub.commit("slow", 1)
    expect((await stub.load()).outbound.pendingDeliveries).toBe(2)
  })
})

describe("retained log in the inspector", () => {
  it("GET /api/objects/:object/log shows the window, the consumers' lag, the R2 segments and the leases held", async () => {
    const name = `inspected-${crypto.randomUUID()}`
    const stub = env.LOG_OBJECT.get(env.LOG_OBJECT.idFromName(name))
    await appendAll(stub, 0, 5)
    expect(await stub.trim()).toBe(2)
    await stub.commit("slow", 1)
    // A worker of a new consumer starts at offset 0, read back from R2.
    const lease = await stub.lease("workers", 1)
    expect(lease?.records.map((record) => record.body.value)).toEqual([0])
    const token = "log-inspector-token-0123456789"
    const handler = DurabilityInspector.handler({ objects: { namespace: env.LOG_OBJECT, names: [name] }, token, log: () => undefined })
    const get = async (path: string) => {
      const response = await handler(new Request(`https://worker.test/_durability/api/objects/${name}${path}`, { headers: { Authorization: `Bearer ${token}` } }))
      return { status: response!.status, body: await response!.json() as Record<string, unknown> }
    }
    const overview = await get("")
    expect(overview.status).toBe(200)
    expect(overview.body).toMatchObject({
      scheduler: { capabilities: ["log"] },
      log: { oldestOffset: 0, hotOffset: 2, nextOffset: 5, consumers: 1, segments: 1, leasesHeld: 1 }
    })
    const view = await get("/log")
    expect(view.status).toBe(200)
    expect(view.body).toMatchObject({
      consumers: [{ consumer: "slow", offset: 1, lag: 4 }],
      segments: { count: 1, first: [{ firstOffset: 0, lastOffset: 1, locator: (await stub.coldKeys())[0] }] },
      leases: [{ consumer: "workers", batchId: lease!.batchId, firstOffset: 0, lastOffset: 0, state: "active", attempt: 1 }]
    })
  })
})

describe("retained log chaos: resets during retention", () => {
  it("a reset during a multi-step trim loses nothing: the steps done stay done, the next trim finishes", async () => {
    const object = fresh()
    await appendAll(object.stub(), 0, 12)
    // Nine records expire, three per step: hold the second step's flush, after its R2 write.
    await object.stub().holdFlush(2)
    const trimming = object.stub().trim().catch((error: unknown) => error)
    await waitFor(() => object.stub().coldWrites(), (writes) => writes === 2)
    await reset(object.stub())
    expect(await trimming).toBeInstanceOf(Error)
    const revived = object.stub()
    // The first step committed (indexed and deleted); the second's records are still in the object.
    expect(await revived.bounds()).toEqual({ oldestOffset: 0, hotOffset: 3, nextOffset: 12 })
    expect(await readAll(revived, 0)).toEqual(Array.from({ length: 12 }, (_, i) => i))
    expect(await revived.trim()).toBe(6)
    expect(await revived.bounds()).toEqual({ oldestOffset: 0, hotOffset: 9, nextOffset: 12 })
    expect(await readAll(revived, 0)).toEqual(Array.from({ length: 12 }, (_, i) => i))
    expect((await revived.segments()).map((segment) => [segment.first, segment.last])).toEqual([[0, 2], [3, 5], [6, 8]])
  })

  it("a reset between a segment's R2 write and its delete loses nothing: the records stay hot, the next flush writes them again", async () => {
    const object = fresh()
    await appendAll(object.stub(), 0, 6)
    await object.stub().holdFlush(1)
    const trimming = object.stub().trim().catch((error: unknown) => error)
    await waitFor(() => object.stub().coldWrites(), (writes) => writes === 1)
    await reset(object.stub())
    expect(await trimming).toBeInstanceOf(Error)
    const revived = object.stub()
    // Written to R2 but never indexed: the object still holds the records and reads them itself.
    expect(await revived.segments()).toEqual([])
    expect(await revived.coldKeys()).toHaveLength(1)
    expect(await revived.bounds()).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 6 })
    expect(await readAll(revived, 0)).toEqual([0, 1, 2, 3, 4, 5])
    // Appends go on meanwhile; the next trim flushes everything beyond retention, the held range again.
    await revived.append(events(6, 2))
    expect(await revived.trim()).toBe(5)
    expect(await revived.bounds()).toEqual({ oldestOffset: 0, hotOffset: 5, nextOffset: 8 })
    expect(await readAll(revived, 0)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect((await revived.segments()).map((segment) => [segment.first, segment.last])).toEqual([[0, 2], [3, 4]])
  })
})
