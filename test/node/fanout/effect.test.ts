/**
 * The `Fanout` Effect module on TestClock: settlement as Effects, lifecycle events of `fanout_delivery`
 * only, the load through the object's `RoutingLoad`, typed errors naming the field with storage
 * unchanged, a delivery evicted mid-batch delivered again after its claim's deadline and never after
 * its ack.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, TestClock } from "effect"
import { Fanout, type Lifecycle } from "durability/effect"
import * as Load from "../../../src/routing/RoutingLoad.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"

const rows = (object: TestDurability.TestObject, sql: string) => object.storage.sql.exec(sql).toArray()

describe("Fanout (Effect)", () => {
  it.scoped("delivers batches whose messages settle as Effects; events are the deliveries' own", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const events: Array<Lifecycle.LifecycleEvent> = []
      const seen: Array<string> = []
      const fanout = yield* object.run(Effect.provide(
        Fanout.make<{ readonly n: number }>({
          retries: { maxAttempts: 3, delay: () => 500 },
          onLifecycleEvent: (event) => void events.push(event),
          targets: {
            even: {
              deliver: (messages) =>
                Effect.forEach(messages, (m) => {
                  seen.push(`even:${m.id}:${m.attempt}`)
                  return m.body.n % 2 === 0 ? m.ack() : m.retry()
                })
            },
            all: { deliver: (messages) => Effect.forEach(messages, (m) => Effect.zipRight(Effect.sync(() => seen.push(`all:${m.id}`)), m.ack())) }
          }
        }),
        Load.layer
      ))
      const ids = yield* object.run(fanout.enqueue([{ id: "one", body: { n: 1 } }, { id: "two", body: { n: 2 } }]))
      expect(ids).toEqual(["one", "two"])
      yield* TestClock.adjust(0)
      expect(seen.sort()).toEqual(["all:one", "all:two", "even:one:1", "even:two:1"])
      expect((yield* object.run(fanout.load)).outbound.pendingDeliveries).toBe(1)
      yield* TestClock.adjust(500)
      expect(seen).toContain("even:one:2")
      expect(events.every((event) => event.entityKind === "fanout_delivery")).toBe(true)
      const ofOne = events.filter((event) => "id" in event && event.id === "one" && event.target === "even").map((event) =>
        event.type === "attempt_settled" ? `${event.type}:${event.outcome}` : event.type
      )
      expect(ofOne).toEqual(["registered", "attempt_started", "attempt_settled:retry_scheduled", "attempt_started", "attempt_settled:retry_scheduled"])
      const retried = events.find((event) => event.type === "attempt_settled" && event.outcome === "retry_scheduled")
      expect(retried).toMatchObject({ error: { name: "Retry", message: "Retried by consumer" }, nextAttemptAt: 500, attempt: 1 })
    }))

  it.scoped("rejects bad options and bad input with typed errors naming the field, writing nothing", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const make = (options: Fanout.FanoutOptions<string>) => object.run(Effect.provide(Fanout.make(options), Load.layer))
      const ok = { deliver: () => Effect.void }
      expect(yield* Effect.flip(make({ targets: {} }))).toMatchObject({ _tag: "InvalidOptionError", field: "targets", kind: "type" })
      expect(yield* Effect.flip(make({ targets: { a: ok }, maxBatchSize: 0 }))).toMatchObject({ _tag: "InvalidOptionError", field: "maxBatchSize", kind: "range" })
      expect(yield* Effect.flip(make({ targets: { a: ok }, batchDelayMs: 1.5 }))).toMatchObject({ _tag: "InvalidOptionError", field: "batchDelayMs" })
      expect(yield* Effect.flip(make({ targets: { a: { ...ok, retries: { maxAttempts: 0 } } } }))).toMatchObject({
        _tag: "InvalidOptionError",
        field: "targets.a.retries.maxAttempts"
      })
      expect(object.storage.statements).toEqual([])

      const fanout = yield* make({ targets: { a: ok, b: ok }, batchDelayMs: 60_000 })
      yield* object.run(fanout.enqueue({ id: "kept", body: "x" }))
      const snapshot = rows(object, "SELECT * FROM durability_fanout_deliveries")
      const before = object.storage.statements.length
      const failures = [
        yield* Effect.flip(object.run(fanout.enqueue({ body: "x" }, { targets: [] }))),
        yield* Effect.flip(object.run(fanout.enqueue({ body: "x" }, { targets: ["a", "zzz"] }))),
        yield* Effect.flip(object.run(fanout.enqueue({ id: "", body: "x" }))),
        yield* Effect.flip(object.run(fanout.enqueue({ body: "x" }, { targets: "a" as unknown as Array<string> }))),
        yield* Effect.flip(object.run(fanout.enqueue([{ id: "fine", body: "x" }, { id: "bad", body: { at: new Date(0) } as unknown as string }])))
      ]
      expect(failures.map((error) => error._tag)).toEqual(["FanoutEnqueueError", "FanoutEnqueueError", "FanoutEnqueueError", "FanoutEnqueueError", "FanoutEnqueueError"])
      expect(failures[4]!.message).toMatch(/^messages\[1\]\.body must be JSON/)
      expect(object.storage.statements.slice(before)).toEqual([])
      expect(rows(object, "SELECT * FROM durability_fanout_deliveries")).toEqual(snapshot)
      const result = yield* object.run(fanout.enqueueResult({ id: "kept", body: "different" }))
      expect(result).toMatchObject({ success: false, error: { name: "FanoutEnqueueError" }, load: { outbound: { pendingDeliveries: 2 } } })
      expect(rows(object, "SELECT * FROM durability_fanout_deliveries")).toEqual(snapshot)
    }))

  it.scoped("an eviction mid-batch: delivered again after the claim's deadline, never again after its ack", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const options = (hang: boolean): Fanout.FanoutOptions<string> => ({
        attemptTimeoutMs: 5_000,
        targets: {
          acked: { deliver: (messages) => Effect.zipRight(Effect.sync(() => calls.push(`acked:${messages[0]!.attempt}`)), Effect.forEach(messages, (m) => m.ack())) },
          hung: {
            deliver: (messages) =>
              Effect.zipRight(Effect.sync(() => calls.push(`hung:${messages[0]!.attempt}`)), hang ? Effect.never : Effect.forEach(messages, (m) => m.ack()))
          }
        }
      })
      const fanout = yield* object.run(Effect.provide(Fanout.make(options(true)), Load.layer))
      yield* object.run(fanout.enqueue({ id: "m", body: "x" }))
      yield* TestClock.adjust(1_000)
      expect(calls.sort()).toEqual(["acked:1", "hung:1"])
      expect(rows(object, "SELECT target_id, attempt, next_attempt_at FROM durability_fanout_deliveries")).toEqual([
        { target_id: "hung", attempt: 1, next_attempt_at: 5_000 }
      ])
      const next = yield* object.restart
      const again = yield* next.run(Effect.provide(Fanout.make(options(false)), Load.layer))
      expect(next.storage.alarmAt).not.toBeNull()
      yield* TestClock.adjust(4_000)
      yield* next.fireAlarm()
      yield* TestClock.adjust(0)
      expect(calls.sort()).toEqual(["acked:1", "hung:1", "hung:2"])
      expect((yield* next.run(again.load)).outbound.pendingDeliveries).toBe(0)
      expect(rows(next, "SELECT * FROM durability_fanout_messages")).toEqual([])
      expect(Exit.isSuccess(yield* Effect.exit(next.run(again.load)))).toBe(true)
    }))
})

describe("Fanout (Effect): the layer", () => {
  it.scoped("provides the object's fanout under its tag, with the object's RoutingLoad", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const delivered: Array<unknown> = []
      const program = Effect.gen(function*() {
        const fanout = yield* Fanout.Fanout
        yield* fanout.enqueue({ id: "x", body: { any: "json" } })
        yield* TestClock.adjust(0)
        return yield* fanout.load
      })
      const load = yield* object.run(program.pipe(
        Effect.provide(Fanout.layer({ targets: { t: { deliver: (ms) => Effect.forEach(ms, (m) => Effect.zipRight(Effect.sync(() => delivered.push(m.body)), m.ack())) } } })),
        Effect.provide(Load.layer)
      ))
      expect(delivered).toEqual([{ any: "json" }])
      expect(load.outbound).toMatchObject({ pendingDeliveries: 0, completed: 1, inFlight: 0 })
    }))
})

describe("Fanout (Effect): reports, claims and counts", () => {
  it.scoped("reports a removed target's postponed work and a failed dead-letter write, retried 60 s later", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let dlqUp = false
      const written: Array<unknown> = []
      const make = (targets: Fanout.FanoutOptions<string>["targets"]) =>
        Effect.provide(
          Fanout.make<string>({
            retries: { maxAttempts: 1 },
            targets,
            dlq: (message) => dlqUp ? Effect.sync(() => void written.push(message)) : Effect.fail(new Error("dlq down"))
          }),
          Load.layer
        )
      const fanout = yield* object.run(make({
        gone: { deliver: () => Effect.void, retries: { maxAttempts: 3, delay: () => 1_000 } },
        bad: { deliver: (ms) => Effect.forEach(ms, (m) => m.deadLetter()) }
      }))
      yield* object.run(fanout.enqueue({ id: "m", body: "x" }))
      yield* TestClock.adjust(0)
      const failed = (yield* object.background.reports).filter((report) => report.event === "durability.fanout.dead_letter_failed")
      expect(failed).toMatchObject([{ details: { messageId: "m", target: "bad", error: { name: "Error", message: "dlq down" } } }])
      expect(rows(object, "SELECT target_id, phase, next_attempt_at FROM durability_fanout_deliveries ORDER BY target_id")).toEqual([
        { target_id: "bad", phase: "dead_letter", next_attempt_at: 60_000 },
        { target_id: "gone", phase: "delivery", next_attempt_at: 1_000 }
      ])

      const next = yield* object.restart
      const again = yield* next.run(make({ bad: { deliver: () => Effect.void } }))
      dlqUp = true
      yield* TestClock.adjust(60_000)
      yield* next.fireAlarm()
      yield* TestClock.adjust(0)
      expect(written).toHaveLength(1)
      expect(written[0]).toMatchObject({ messageId: "m", target: "bad", failure: { reason: "explicit", error: null }, storedAt: 0, attempts: 1 })
      const missing = (yield* next.background.reports).filter((report) => report.event === "durability.fanout.target_missing")
      // Each pass that finds it due postpones it 60 s (the first at the restarted object's first alarm, 15 s).
      expect(missing.map((report) => report.details)).toEqual([
        { target: "gone", deliveries: 1, retryAt: 75_000 },
        { target: "gone", deliveries: 1, retryAt: 135_000 }
      ])
      expect((yield* next.run(again.load)).outbound.pendingDeliveries).toBe(1)
    }))

  it.scoped("claims a batch in one statement and one transaction; enqueue never counts the table again", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const fanout = yield* object.run(Effect.provide(
        Fanout.make<number>({ batchDelayMs: 1_000, maxBatchSize: 20, targets: { t: { deliver: (ms) => Effect.forEach(ms, (m) => m.ack()) } } }),
        Load.layer
      ))
      yield* object.run(fanout.enqueueResult(Array.from({ length: 5 }, (_, i) => ({ id: `a${i}`, body: i }))))
      const second = yield* object.run(fanout.enqueueResult(Array.from({ length: 5 }, (_, i) => ({ id: `b${i}`, body: i }))))
      expect(second).toMatchObject({ success: true, load: { outbound: { pendingDeliveries: 10 } } })
      const counts = object.storage.statements.filter((sql) => /COUNT\(\*\)/.test(sql) && sql.includes("durability_fanout_deliveries"))
      expect(counts).toHaveLength(1)
      const before = object.storage.statements.length
      yield* TestClock.adjust(1_000)
      const pass = object.storage.statements.slice(before)
      expect(pass.filter((sql) => sql.startsWith("UPDATE durability_fanout_deliveries SET attempt"))).toHaveLength(1)
      expect((yield* object.run(fanout.load)).outbound.pendingDeliveries).toBe(0)
      expect(object.storage.statements.filter((sql) => /COUNT\(\*\)/.test(sql) && sql.includes("durability_fanout_deliveries"))).toHaveLength(1)
    }))
})
