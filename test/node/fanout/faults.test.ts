/**
 * Fanout under storage faults (FaultyStorage): an enqueue whose transaction fails is uncertain, so it
 * throws (never `success: false`) and stores nothing; an ack that failed is looked up again and its
 * delivery retried; a settlement started before the consumer threw is kept; a storage target's batch
 * waits for every sibling write.
 */
import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { DurabilityFanout, type DurabilityFanoutMessage } from "durability"
import { TestObjectState } from "durability/testing"
import * as FaultyStorage from "../../../src/testing/FaultyStorage.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import { RoutingLoad } from "../../../src/facade/RoutingLoad.js"

const START = 1_800_000_000_000

const faulty = async () => {
  const storage = FaultyStorage.make(await Effect.runPromise(MemoryStorage.make))
  const state = await TestObjectState.make({ storage, startTime: START })
  return { storage, state }
}

const rows = (storage: FaultyStorage.FaultyStorage, sql: string) => storage.inner.sql.exec(sql).toArray()

describe("Fanout under faults", () => {
  it("throws an uncertain enqueue (storage failed) instead of a definite rejection; nothing is stored", async () => {
    const { state, storage } = await faulty()
    const routing = new RoutingLoad()
    const fanout = new DurabilityFanout<string>({ context: state.context, routing, targets: { t: { deliver: () => undefined } } })
    storage.failNext("sql")
    await expect(fanout.enqueue({ id: "x", body: "x" })).rejects.toMatchObject({ name: "StorageError" })
    expect((await fanout.load()).inbound).toMatchObject({ inFlight: 0, completed: 1 })
    expect(rows(storage, "SELECT * FROM durability_fanout_messages")).toEqual([])
    expect(rows(storage, "SELECT * FROM durability_fanout_deliveries")).toEqual([])
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(0)
    expect(await fanout.enqueue({ id: "x", body: "x" })).toMatchObject({ success: true, load: { outbound: { pendingDeliveries: 1 } } })
  })

  it("retries a delivery whose ack failed (the row as stored decides), keeps an ack started before a throw", async () => {
    const { state, storage } = await faulty()
    let round = 0
    const fanout = new DurabilityFanout<string>({
      context: state.context,
      retries: { maxAttempts: 3, delay: () => 1_000 },
      targets: {
        t: { deliver: async (messages: Array<DurabilityFanoutMessage<string>>) => {
          round++
          if (round === 1) {
            storage.failNext("sql")
            await expect(messages[0]!.ack()).rejects.toMatchObject({ name: "StorageError" })
            return
          }
          void messages.find((m) => m.id === "a")?.ack()
          throw new Error("later message failed")
        } }
      }
    })
    await fanout.enqueue({ id: "a", body: "a" })
    await fanout.alarm()
    expect(rows(storage, "SELECT attempt, last_error_name, next_attempt_at FROM durability_fanout_deliveries")).toEqual([
      { attempt: 1, last_error_name: "StorageError", next_attempt_at: START + 1_000 }
    ])
    await fanout.enqueue({ id: "b", body: "b" })
    await state.advance(1_000)
    await fanout.alarm()
    expect(rows(storage, "SELECT message_key, attempt, last_error FROM durability_fanout_deliveries")).toEqual([
      { message_key: "b", attempt: 2, last_error: "later message failed" }
    ])
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(1)
  })

  it("waits for a sibling storage write still completing before retrying the failed one", async () => {
    const { state, storage } = await faulty()
    let release!: () => void
    const slow = new Promise<void>((resolve) => (release = resolve))
    const written: Array<string> = []
    const fanout = new DurabilityFanout<string>({
      context: state.context,
      retries: { maxAttempts: 3, delay: () => 1_000 },
      targets: {
        archive: { storage: async (message) => {
          if (message.messageId === "bad") throw new Error("write failed")
          await slow
          written.push(message.messageId)
        } }
      }
    })
    await fanout.enqueue([{ id: "slow", body: "slow" }, { id: "bad", body: "bad" }])
    await state.advance(0)
    expect((await fanout.load()).outbound).toMatchObject({ inFlight: 1, pendingDeliveries: 2 })
    release()
    await fanout.alarm()
    expect(written).toEqual(["slow"])
    expect(rows(storage, "SELECT message_key, last_error FROM durability_fanout_deliveries")).toEqual([
      { message_key: "bad", last_error: "write failed" }
    ])
    expect((await fanout.load()).outbound).toMatchObject({ inFlight: 0, pendingDeliveries: 1 })
  })
})
