/**
 * `DurabilityFanout` (the promise face) on a simulated object with its clock moved by hand: acceptance,
 * independent per-target delivery, dedup and conflict rollback, removed targets, storage targets, the
 * DLQ path, settlement rules, ordering, batching and the shared alarm, asserted through rows, calls,
 * events and the load.
 */
import { describe, expect, it } from "vitest"
import {
  Durability,
  DurabilityAlarms,
  DurabilityFanout,
  type DurabilityFanoutMessage,
  DurabilityScheduler,
  FanoutSettlementError,
  type FanoutTarget
} from "durability"
import { TestObjectState } from "durability/testing"
import { RoutingLoad } from "../../../src/facade/RoutingLoad.js"
import type { StoredMessage } from "../../../src/shared/StoredMessage.js"

class Sink {
  readonly entries = new Map<string, StoredMessage<string>>()
  fail = false
  readonly write = async (entry: StoredMessage<string>): Promise<void> => {
    if (this.fail) throw new Error("sink unavailable")
    this.entries.set(entry.id, entry)
  }
}

const START = 1_800_000_000_000

const fixture = async (targets: Record<string, FanoutTarget<string>>, sink = new Sink(), extra: Record<string, unknown> = {}) => {
  const state = await TestObjectState.make({ startTime: START })
  const routing = new RoutingLoad()
  const config = {
    context: state.context,
    targets,
    routing,
    dlq: sink.write,
    retries: { maxAttempts: 2, delay: () => 1_000 },
    ...extra
  }
  return { state, routing, sink, config, fanout: new DurabilityFanout<string>(config) }
}

const rows = (state: TestObjectState, sql: string) => state.storage.sql.exec(sql).toArray()
const deliveries = (state: TestObjectState) =>
  rows(state, "SELECT target_id, attempt, phase FROM durability_fanout_deliveries ORDER BY seq, target_id")

describe("DurabilityFanout", () => {
  it("accepts durably with load, then delivers each target independently", async () => {
    const a: Array<string> = []
    let bCalls = 0
    const { fanout, sink, state } = await fixture({
      a: { deliver: async (messages) => {
        a.push(...messages.map((m) => m.id))
        await Promise.all(messages.map((m) => m.ack()))
      } },
      b: { deliver: async () => {
        bCalls++
      } }
    })
    const result = await fanout.enqueue([{ id: "one", body: "1" }, { id: "two", body: "2" }])
    expect(result).toMatchObject({ success: true, value: ["one", "two"], load: { inbound: { completed: 1 }, outbound: { pendingDeliveries: 4 } } })
    await fanout.alarm()
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(2)
    expect(deliveries(state)).toEqual([
      { target_id: "b", attempt: 1, phase: "delivery" },
      { target_id: "b", attempt: 1, phase: "delivery" }
    ])
    await state.advance(1_000)
    await fanout.alarm()
    expect(a).toEqual(["one", "two"])
    expect(bCalls).toBe(2)
    expect([...sink.entries.values()].map((e) => [e.messageId, e.target, e.attempts, e.failure?.reason])).toEqual([
      ["one", "b", 2, "exhausted"],
      ["two", "b", 2, "exhausted"]
    ])
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(0)
    expect(rows(state, "SELECT * FROM durability_fanout_messages")).toEqual([])
  })
})
