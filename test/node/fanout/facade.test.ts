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
  durabilityFanoutMigrations,
  type DurabilityFanoutMessage,
  DurabilityScheduler,
  FanoutSettlementError,
  type FanoutTarget,
  NonRetryableError
} from "durability"
import { TestObjectState } from "durability/testing"

type State = TestObjectState.TestObjectState
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

const rows = (state: State, sql: string) => state.storage.sql.exec(sql).toArray()
const deliveries = (state: State) =>
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

  it("dedups against the original recipients while siblings remain; a conflict rolls back the whole batch", async () => {
    const delivered: Array<string> = []
    const { config, fanout, state } = await fixture({
      fast: { deliver: async (messages) => {
        delivered.push(...messages.map((m) => m.id))
        await Promise.all(messages.map((m) => m.ack()))
      } },
      slow: { deliver: async () => undefined }
    })
    await fanout.enqueue({ id: "same", body: "payload" })
    await fanout.alarm()
    const restarted = await state.restart()
    const recreated = new DurabilityFanout<string>({ ...config, context: restarted.context })
    expect(await recreated.enqueue({ id: "same", body: "payload" })).toMatchObject({ success: true, value: ["same"] })
    await recreated.alarm()
    expect(delivered).toEqual(["same"])
    expect((await recreated.load()).outbound.pendingDeliveries).toBe(1)

    const before = rows(restarted, "SELECT * FROM durability_fanout_deliveries")
    const conflict = await recreated.enqueue([{ id: "new", body: "first" }, { id: "same", body: "different" }])
    expect(conflict).toMatchObject({
      success: false,
      error: { name: "FanoutEnqueueError", message: 'Deduplication key "same" already identifies different work' },
      load: { outbound: { pendingDeliveries: 1 } }
    })
    expect(rows(restarted, "SELECT * FROM durability_fanout_deliveries")).toEqual(before)
    expect(rows(restarted, "SELECT key FROM durability_fanout_messages")).toEqual([{ key: "same" }])
    expect(await recreated.enqueue({ body: "x" }, { targets: ["missing"] })).toMatchObject({
      success: false,
      error: { name: "FanoutEnqueueError", message: "Enqueue targets must be distinct configured target IDs" }
    })
    expect(await recreated.enqueue({ body: "x" }, { targets: ["fast", "fast"] })).toMatchObject({ success: false })
    expect(await recreated.enqueue({ id: "", body: "x" })).toMatchObject({
      success: false,
      error: { message: "Message IDs and deduplication keys must be non-empty strings" }
    })
    const invalid = { id: "bad", body: (() => undefined) as unknown as string }
    expect(await recreated.enqueue([{ id: "good", body: "good" }, invalid])).toMatchObject({ success: false })
    expect(rows(restarted, "SELECT * FROM durability_fanout_deliveries")).toEqual(before)
  })

  it("keeps a removed target's work, postponed and reported; new targets never see old messages", async () => {
    const { config, fanout, state } = await fixture({ removed: { deliver: async () => undefined } })
    await fanout.enqueue({ id: "old", body: "x" })
    await fanout.alarm()
    const restarted = await state.restart()
    const added: Array<unknown> = []
    const recreated = new DurabilityFanout<string>({
      ...config,
      context: restarted.context,
      targets: { added: { deliver: async (messages) => void added.push(...messages) } }
    })
    await restarted.advance(1_000)
    await recreated.alarm()
    expect(added).toEqual([])
    expect((await recreated.load()).outbound.pendingDeliveries).toBe(1)
    const [row] = rows(restarted, "SELECT target_id, attempt, next_attempt_at FROM durability_fanout_deliveries")
    expect(row).toEqual({ target_id: "removed", attempt: 1, next_attempt_at: restarted.now() + 60_000 })
    expect(restarted.storage.alarmAt).not.toBeNull()
  })

  it("lets a healthy target complete while another's consumer is still running", async () => {
    let finish!: () => void
    const gate = new Promise<void>((resolve) => (finish = resolve))
    const healthy: Array<string> = []
    const { fanout, state } = await fixture({
      slow: { deliver: () => gate },
      healthy: { deliver: async (messages) => {
        healthy.push(...messages.map((m) => m.id))
        await Promise.all(messages.map((m) => m.ack()))
      } }
    })
    await fanout.enqueue({ id: "x", body: "x" })
    await state.advance(0)
    expect(healthy).toEqual(["x"])
    expect((await fanout.load()).outbound).toMatchObject({ pendingDeliveries: 1, inFlight: 1 })
    finish()
    await fanout.alarm()
    expect((await fanout.load()).outbound.inFlight).toBe(0)
  })

  it("uses storage as an ordinary target: one StoredMessage per message, retried under the same id", async () => {
    const written: Array<StoredMessage<string>> = []
    const { fanout, state } = await fixture({
      archive: { storage: async (message) => {
        written.push(message)
        if (written.length === 1) throw new Error("storage failed")
      } }
    })
    await fanout.enqueue({ id: "stored", body: "x" })
    await fanout.alarm()
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(1)
    await state.advance(1_000)
    await fanout.alarm()
    expect(written).toHaveLength(2)
    expect(written[1]!.id).toBe(written[0]!.id)
    expect(written.map((m) => [m.messageId, m.target, m.body, m.attempts, m.failure])).toEqual([
      ["stored", "archive", "x", 1, undefined],
      ["stored", "archive", "x", 2, undefined]
    ])
    expect(written[0]!.id).toBe(JSON.stringify([rowsGeneration(state, written), "archive"]))
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(0)
  })

  it("keeps an explicit dead letter's intent and target across a DLQ outage and a restart", async () => {
    const sink = new Sink()
    sink.fail = true
    let calls = 0
    const { config, fanout, state } = await fixture({
      destination: { deliver: async (messages) => {
        calls++
        await Promise.all(messages.map((m) => m.deadLetter()))
      } }
    }, sink)
    await fanout.enqueue({ id: "bad", body: "bad" })
    await fanout.alarm()
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(1)
    expect(rows(state, "SELECT phase, dead_letter_reason FROM durability_fanout_deliveries")).toEqual([
      { phase: "dead_letter", dead_letter_reason: "explicit" }
    ])
    sink.fail = false
    const restarted = await state.restart()
    const recovered = new DurabilityFanout<string>({ ...config, context: restarted.context })
    await restarted.advance(60_000)
    await recovered.alarm()
    expect(calls).toBe(1)
    expect([...sink.entries.values()]).toEqual([
      expect.objectContaining({ messageId: "bad", target: "destination", failure: { reason: "explicit", error: null }, attempts: 1, storedAt: START })
    ])
    expect((await recovered.load()).outbound.pendingDeliveries).toBe(0)
    expect(restarted.storage.alarmAt).toBeNull()
  })

  it("drops a dead letter still waiting for its write once the object runs without a DLQ", async () => {
    const sink = new Sink()
    sink.fail = true
    const events: Array<{ readonly type: string; readonly reason?: unknown }> = []
    const { config, fanout, state } = await fixture({ t: { deliver: async (messages) => void (await Promise.all(messages.map((m) => m.deadLetter()))) } }, sink)
    await fanout.enqueue({ id: "x", body: "x" })
    await fanout.alarm()
    expect(rows(state, "SELECT phase FROM durability_fanout_deliveries")).toEqual([{ phase: "dead_letter" }])
    const restarted = await state.restart()
    const { dlq: _dlq, ...withoutDlq } = config
    const recovered = new DurabilityFanout<string>({ ...withoutDlq, context: restarted.context, onLifecycleEvent: (event) => void events.push(event) })
    await restarted.advance(60_000)
    await recovered.alarm()
    expect(rows(restarted, "SELECT * FROM durability_fanout_deliveries")).toEqual([])
    expect(events).toMatchObject([{ type: "terminal", reason: "dead_lettered" }])
    expect(restarted.storage.alarmAt).toBeNull()
  })

  it("redrives only the failed target with a fresh attempt budget", async () => {
    const seen: Array<[string, number]> = []
    let recover = false
    const targets: Record<string, FanoutTarget<string>> = {
      a: { deliver: async (messages) => {
        seen.push(...messages.map((m): [string, number] => ["a", m.attempt]))
        await Promise.all(messages.map((m) => m.ack()))
      } },
      b: { deliver: async (messages) => {
        seen.push(...messages.map((m): [string, number] => ["b", m.attempt]))
        if (recover) await Promise.all(messages.map((m) => m.ack()))
      } }
    }
    const { fanout, sink, state } = await fixture(targets)
    await fanout.enqueue({ id: "redrive", body: "x" })
    await fanout.alarm()
    await state.advance(1_000)
    await fanout.alarm()
    const entry = [...sink.entries.values()][0]!
    expect(entry).toMatchObject({ messageId: "redrive", target: "b", attempts: 2, failure: { reason: "exhausted" } })
    recover = true
    const accepted = await fanout.enqueue({ id: entry.messageId, body: entry.body, deduplicationKey: entry.id }, { targets: [entry.target] })
    expect(accepted).toMatchObject({ success: true })
    if (accepted.success) sink.entries.delete(entry.id)
    await fanout.alarm()
    expect(seen).toEqual([["a", 1], ["b", 1], ["b", 2], ["b", 1]])
    expect(sink.entries.size).toBe(0)
  })

  it("retry(10) is due after 10 ms while the alarm stays at min delay; a second settlement and a late one reject", async () => {
    const captured: Array<DurabilityFanoutMessage<string>> = []
    const { fanout, state } = await fixture({
      one: { deliver: async (messages) => {
        captured.push(...messages)
        await Promise.all(messages.map((m) => m.retry(10)))
        await expect(messages[0]!.ack()).rejects.toThrow('was already settled as "retry"')
      } }
    })
    await fanout.enqueue({ id: "one", body: "x" })
    await fanout.alarm()
    expect(captured).toHaveLength(1)
    const late = await captured[0]!.ack().then(() => undefined, (error: unknown) => error)
    expect(late).toBeInstanceOf(FanoutSettlementError)
    expect((late as Error).message).toMatch(/was already settled as "retry"$/)
    expect(state.storage.alarmAt).toBeGreaterThanOrEqual(state.now() + 10)
    await state.advance(9)
    expect(captured).toHaveLength(1)
    await state.advance(1)
    expect(captured).toHaveLength(2)
    expect(captured[1]!.attempt).toBe(2)
    const bad = await captured[1]!.retry(-1).then(() => undefined, (error: unknown) => error)
    expect(bad).toBeInstanceOf(RangeError)
  })

  it("prioritizes never-attempted messages over immediately due retries", async () => {
    const seen: Array<string> = []
    const { fanout, state } = await fixture({
      one: { deliver: async (messages) => {
        seen.push(...messages.map((m) => `${m.id}:${m.attempt}`))
        await Promise.all(messages.map((m) => (m.id === "a" ? m.retry(0) : m.ack())))
      } }
    }, new Sink(), { maxBatchSize: 1 })
    await fanout.enqueue([{ id: "a", body: "a" }, { id: "b", body: "b" }])
    await state.advance(0)
    await fanout.alarm()
    await fanout.alarm()
    expect(seen.slice(0, 3)).toEqual(["a:1", "b:1", "a:2"])
  })

  it("bounds a timed-out batch, counts its duration, and rejects its late settlement", async () => {
    const captured: Array<DurabilityFanoutMessage<string>> = []
    const { fanout, state } = await fixture({
      slow: { deliver: (messages) => {
        captured.push(...messages)
        return new Promise(() => undefined)
      } }
    }, new Sink(), { attemptTimeoutMs: 25 })
    await fanout.enqueue({ body: "slow" })
    await state.advance(25)
    const late = await captured[0]!.ack().then(() => undefined, (error: unknown) => error)
    expect(late).toBeInstanceOf(FanoutSettlementError)
    expect((late as Error).message).toMatch(/^Fanout delivery ".*" is stale$/)
    expect((await fanout.load()).outbound).toEqual({ completed: 1, inFlight: 0, averageProcessingMs: 25, pendingDeliveries: 1 })
    expect(rows(state, "SELECT attempt, last_error_name, last_error FROM durability_fanout_deliveries")).toEqual([
      { attempt: 1, last_error_name: "FanoutTimeoutError", last_error: "Fanout delivery timed out after 25ms" }
    ])
  })

  it("records a consumer that returns without settling as a failure", async () => {
    const { fanout, state } = await fixture({ lazy: { deliver: () => undefined } })
    await fanout.enqueue({ id: "m", body: "x" })
    await fanout.alarm()
    expect(rows(state, "SELECT attempt, last_error, next_attempt_at FROM durability_fanout_deliveries")).toEqual([
      { attempt: 1, last_error: "Consumer returned without settling the message", next_attempt_at: START + 1_000 }
    ])
  })

  it("acks what an ackOnReturn consumer leaves unsettled, keeps its explicit settlements, and acks nothing when it throws", async () => {
    let fail = false
    const { fanout, state } = await fixture({
      auto: {
        ackOnReturn: true,
        deliver: async (messages) => {
          await messages.find((m) => m.id === "again")?.retry(5_000)
          if (fail) throw new Error("consumer failed")
        }
      }
    })
    await fanout.enqueue([{ id: "done", body: "1" }, { id: "again", body: "2" }])
    await fanout.alarm()
    expect(rows(state, "SELECT message_key, attempt FROM durability_fanout_deliveries")).toEqual([{ message_key: "again", attempt: 1 }])
    fail = true
    await fanout.enqueue({ id: "thrown", body: "3" })
    await fanout.alarm()
    expect(rows(state, "SELECT message_key, last_error FROM durability_fanout_deliveries ORDER BY seq")).toEqual([
      { message_key: "again", last_error: "Retried by consumer" },
      { message_key: "thrown", last_error: "consumer failed" }
    ])
  })

  it("holds first deliveries for batchDelayMs so nearby messages share one batch; rejects a bad batchDelayMs", async () => {
    const batches: Array<Array<string>> = []
    const { fanout, state } = await fixture({
      one: { deliver: async (messages) => {
        batches.push(messages.map((m) => m.id))
        await Promise.all(messages.map((m) => m.ack()))
      } }
    }, new Sink(), { batchDelayMs: 1_000 })
    await state.advance(100)
    await fanout.enqueue({ id: "a", body: "a" })
    await state.advance(100)
    await fanout.enqueue({ id: "b", body: "b" })
    expect(batches).toEqual([])
    await state.advance(800)
    expect(batches).toEqual([["a", "b"]])
    for (const batchDelayMs of [-1, 1.5]) {
      const { config } = await fixture({ one: { deliver: () => undefined } })
      expect(() => new DurabilityFanout({ ...config, batchDelayMs })).toThrow(new RangeError("batchDelayMs must be a non-negative integer"))
    }
  })

  it("drops exhausted and dead-lettered deliveries when no DLQ is configured, reporting terminal", async () => {
    const events: Array<unknown> = []
    const state = await TestObjectState.make({ startTime: START })
    const fanout = new DurabilityFanout<string>({
      context: state.context,
      retries: { maxAttempts: 1 },
      onLifecycleEvent: (event) => void events.push(event),
      targets: {
        one: { deliver: async (messages) => {
          await messages.find((m) => m.id === "dead")?.deadLetter()
        } }
      }
    })
    await fanout.enqueue([{ id: "dead", body: "a" }, { id: "tired", body: "b" }])
    await fanout.alarm()
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(0)
    expect(rows(state, "SELECT * FROM durability_fanout_messages")).toEqual([])
    expect(events.filter((e) => (e as { type: string }).type === "terminal")).toEqual([
      expect.objectContaining({ entityKind: "fanout_delivery", id: "dead", target: "one", reason: "dead_lettered", error: { name: "DeadLetter", message: "Dead-lettered by consumer" } }),
      expect.objectContaining({ id: "tired", reason: "attempts_exhausted", error: { name: "Error", message: "Consumer returned without settling the message" } })
    ])
    expect(events.map((e) => (e as { type: string }).type)).toEqual(["registered", "registered", "attempt_started", "attempt_started", "terminal", "terminal"])
  })

  it("shares the physical alarm with operations and named alarms", async () => {
    const state = await TestObjectState.make({ startTime: START })
    const scheduler = new DurabilityScheduler({ context: state.context })
    const fanout = new DurabilityFanout<string>({
      scheduler,
      targets: { target: { deliver: async (messages) => void (await Promise.all(messages.map((m) => m.ack()))) } }
    })
    let work = 0
    let cleanup = 0
    const operations = new Durability({ scheduler, handlers: { work: async () => void work++ } })
    const alarms = new DurabilityAlarms({ scheduler, handlers: { cleanup: async () => void cleanup++ } })
    await alarms.cleanup(state.now() + 10)
    await fanout.enqueue({ body: "message" })
    await operations.work({ id: "work", payload: undefined })
    await scheduler.alarm()
    await state.advance(10)
    await scheduler.alarm()
    expect([work, cleanup]).toEqual([1, 1])
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(0)
    expect(state.storage.alarmAt).toBeNull()
    expect(() => new DurabilityFanout<string>({ scheduler, targets: { t: { deliver: () => undefined } } })).toThrow(
      "A deliveries helper is already attached to this scheduler"
    )
  })

  it("a later fanout over the same object takes over (newest targets and options), as the reference's private schedulers do", async () => {
    const first: Array<string> = []
    const second: Array<string> = []
    const { config, fanout, state } = await fixture({ t: { deliver: async (messages) => void first.push(...messages.map((m) => m.id)) } })
    await fanout.enqueue({ id: "a", body: "a" }, { targets: ["t"] })
    await fanout.alarm()
    const newer = new DurabilityFanout<string>({
      ...config,
      maxBatchSize: 1,
      targets: { t: { deliver: async (messages) => {
        second.push(...messages.map((m) => `${m.id}:${m.attempt}`))
        await Promise.all(messages.map((m) => m.ack()))
      } } }
    })
    await newer.enqueue({ id: "b", body: "b" })
    await state.advance(1_000)
    await newer.alarm()
    expect(first).toEqual(["a"])
    expect(second).toEqual(["b:1", "a:2"])
    expect((await newer.load()).outbound.pendingDeliveries).toBe(0)
  })

  it("migrate applies and reverts fanout's one migration without a scheduler", async () => {
    const state = await TestObjectState.make({ startTime: START })
    const tables = () =>
      state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'durability_fanout%' ORDER BY name").toArray()
        .map((row) => row.name)
    expect(durabilityFanoutMigrations.map((migration) => migration.name)).toEqual(["durability_0023_fanout"])
    expect(DurabilityFanout.migrate(state.context)).toEqual({ applied: ["durability_0023_fanout"], rolledBack: [] })
    expect(tables()).toEqual(["durability_fanout_deliveries", "durability_fanout_messages", "durability_fanout_seq", "durability_fanout_targets"])
    expect(DurabilityFanout.migrate(state.context)).toEqual({ applied: [], rolledBack: [] })
    expect(DurabilityFanout.migrate(state.context, null)).toEqual({ applied: [], rolledBack: ["durability_0023_fanout"] })
    expect(tables()).toEqual([])
  })

  it("a consumer failing with NonRetryableError is dead-lettered at once, its attempts unspent", async () => {
    let calls = 0
    const { fanout, sink, state } = await fixture({
      hopeless: { deliver: async () => {
        calls++
        throw new NonRetryableError("the payload can never be delivered")
      } }
    }, new Sink(), { retries: { maxAttempts: 5, delay: () => 1_000 } })
    await fanout.enqueue({ id: "doomed", body: "x" })
    await fanout.alarm()
    expect(calls).toBe(1)
    expect([...sink.entries.values()].map((e) => [e.messageId, e.attempts, e.failure])).toEqual([
      ["doomed", 1, { reason: "exhausted", error: { name: "NonRetryableError", message: "the payload can never be delivered" } }]
    ])
    expect(deliveries(state)).toEqual([])
    expect((await fanout.load()).outbound.pendingDeliveries).toBe(0)
  })

  it("rejects bad configuration with the reference's errors", async () => {
    const state = await TestObjectState.make({ startTime: START })
    const context = state.context
    expect(() => new DurabilityFanout({ context, targets: {} })).toThrow(new TypeError("Fanout requires at least one static target"))
    expect(() => new DurabilityFanout({ context, targets: { x: {} as FanoutTarget<string> } })).toThrow(new TypeError('Invalid fanout target "x"'))
    expect(() => new DurabilityFanout({ context, targets: { x: { deliver: () => undefined } }, maxBatchSize: 0 })).toThrow(RangeError)
    expect(() => new DurabilityFanout({ context, targets: { x: { deliver: () => undefined, attemptTimeoutMs: -1 } } })).toThrow(/targets\.x\.attemptTimeoutMs/)
    expect(() => new DurabilityFanout({ context, storageBackend: "kv", targets: { x: { deliver: () => undefined } } })).toThrow(TypeError)
    expect(state.storage.sql.exec("SELECT name FROM sqlite_master WHERE name LIKE 'durability_fanout%'").toArray()).toEqual([])
    expect(state.storage.alarmAt).toBeNull()
  })
})

const rowsGeneration = (state: State, written: ReadonlyArray<StoredMessage<string>>): string => {
  const parsed = JSON.parse(written[0]!.id) as [string, string]
  void state
  return parsed[0]
}
