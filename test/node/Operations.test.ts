/**
 * The operations capability on one simulated Durable Object (TestDurability):
 * in-memory SQLite, the whole engine, everything on TestClock (no real waiting).
 * Assertions look at what is durable (`durability_calls` rows, the physical
 * alarm), at handler calls and at lifecycle events.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Deferred, Effect, Fiber, identity, Layer, Random, Schedule, Schema, TestClock } from "effect"
import { NonRetryableError } from "../../src/shared/Errors.js"
import type * as Lifecycle from "../../src/engine/Lifecycle.js"
import * as Operations from "../../src/operations/Operations.js"
import * as PermitSemaphore from "../../src/engine/PermitSemaphore.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import * as FaultyStorage from "../../src/testing/FaultyStorage.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

type TestObject = TestDurability.TestObject
type Call<P = unknown> = Operations.DurableCall<P>

const rowOf = (object: TestObject, id: string) =>
  Effect.sync(() => object.storage.sql.exec("SELECT * FROM durability_calls WHERE id = ?", id).toArray()[0])

const allRows = (object: TestObject) =>
  Effect.sync(() => object.storage.sql.exec("SELECT * FROM durability_calls ORDER BY id").toArray())

const stored = (value: unknown) => JSON.stringify({ kind: "value", value })

/** Lets promise callbacks (hook rejections handed to waitUntil) run; no time passes. */
const flushMicrotasks = Effect.promise(() => Promise.resolve()).pipe(Effect.repeatN(5))

const recorder = () => {
  const events: Array<Lifecycle.LifecycleEvent> = []
  return { events, hook: (event: Lifecycle.LifecycleEvent) => void events.push(event) }
}

/** `type[:outcome]#attempt` (or `purged`), for order assertions. */
const brief = (event: Lifecycle.LifecycleEvent) =>
  event.type === "purged"
    ? "purged"
    : `${event.type}${event.type === "attempt_settled" ? `:${event.outcome}` : ""}#${event.attempt}`

const fails = (message: string) => Effect.fail(new Error(message))

describe("Operations.layer", () => {
  it.scoped("builds the capability as a service under an application's tag", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const definitions = {
        charge: Operations.operation({ handler: (call: Call<{ readonly cents: number }>) => Effect.succeed(call.payload.cents * 2) })
      }
      const Billing = Operations.tag<typeof definitions>("app/Billing")
      const context = yield* object.run(Layer.build(Operations.layer(Billing, definitions)))
      const ops = yield* Effect.provide(Billing, context)
      yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 500 } }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("charge", "inv-1"))).toMatchObject({ status: "completed", result: 1000 })
      expect(yield* rowOf(object, "inv-1")).toMatchObject({ status: "completed", result: stored(1000) })
    }))
})

describe("registration", () => {
  it.scoped("commits the row and arms the alarm before the handler runs; the row is pending during the handler", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const gate = yield* Deferred.make<void>()
      const seen: Array<{ readonly row: unknown; readonly alarmAt: number | null; readonly call: Call }> = []
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          handler: (call: Call<{ readonly cents: number }>) =>
            Effect.gen(function*() {
              seen.push({ row: yield* rowOf(object, call.id), alarmAt: object.storage.alarmAt, call })
              yield* Deferred.await(gate)
              return { charged: call.payload.cents }
            })
        })
      }))
      // Registration resolves without waiting for the handler (still blocked on the gate).
      yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 500 } }))
      yield* TestClock.adjust(0)
      expect(seen).toHaveLength(1)
      expect(seen[0]?.alarmAt).toBe(15_000)
      expect(seen[0]?.row).toMatchObject({
        id: "inv-1",
        operation: "charge",
        payload: stored({ cents: 500 }),
        status: "pending",
        attempt: 1,
        next_attempt_at: 0,
        result: null,
        created_at: 0,
        generation_id: expect.stringMatching(/^[0-9a-f-]{36}$/)
      })
      expect(seen[0]?.call).toMatchObject({ id: "inv-1", operation: "charge", payload: { cents: 500 }, attempt: 1 })
      expect(seen[0]?.call.signal.aborted).toBe(false)
      expect(yield* object.run(ops.getResult("charge", "inv-1"))).toEqual({
        status: "pending",
        attempt: 1,
        nextAttemptAt: 0,
        lastError: null,
        error: null
      })

      yield* TestClock.adjust(1_000)
      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(0)
      expect(yield* rowOf(object, "inv-1")).toMatchObject({
        status: "completed",
        attempt: 1,
        result: stored({ charged: 500 }),
        completed_at: 1_000,
        last_error: null
      })
      expect(yield* object.run(ops.getResult("charge", "inv-1"))).toEqual({
        status: "completed",
        result: { charged: 500 }
      })
      // The alarm is reconciled once the engine has been idle for Scheduler.UPKEEP_DELAY.
      expect(object.storage.alarmAt).toBe(15_000)
      yield* TestClock.adjust(Scheduler.UPKEEP_DELAY)
      expect(object.storage.alarmAt).toBeNull()
      expect(seen).toHaveLength(1)
    }))

  it.scoped("starts eagerly only when a permit is free now; a saturated registration waits for the release", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 1 } })
      const log: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const ops = yield* object.run(Operations.make({
        work: Operations.operation({
          handler: (call: Call) =>
            Effect.gen(function*() {
              log.push(`start ${call.id} at ${yield* Clock.currentTimeMillis}`)
              if (call.id === "a") yield* Deferred.await(gate)
              log.push(`end ${call.id}`)
            })
        })
      }))
      const permits = yield* object.run(PermitSemaphore.PermitSemaphore)
      yield* object.run(ops.register("work", { id: "a", payload: null }))
      yield* TestClock.adjust(0)
      expect(log).toEqual(["start a at 0"])
      expect(yield* permits.available).toBe(0)

      for (const id of ["b", "c", "d"]) yield* object.run(ops.register("work", { id, payload: null }))
      yield* TestClock.adjust(10_000)
      expect(log).toEqual(["start a at 0"])
      for (const id of ["b", "c", "d"]) {
        expect(yield* rowOf(object, id)).toMatchObject({ status: "pending", attempt: 0, next_attempt_at: 0 })
      }
      // Registrations queue nothing in memory: at most the one due-work pass waits for a permit.
      expect(yield* permits.waiting).toBeLessThanOrEqual(1)
      expect(object.storage.alarmAt).toBe(15_000)

      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(0)
      expect(log).toEqual([
        "start a at 0",
        "end a",
        "start b at 10000",
        "end b",
        "start c at 10000",
        "end c",
        "start d at 10000",
        "end d"
      ])
      expect((yield* allRows(object)).map((row) => row.status)).toEqual(["completed", "completed", "completed", "completed"])
      expect(object.storage.alarmAt).toBeNull()
      expect(yield* object.background.reports).toEqual([])
    }))

  it.scoped("the same id for the same operation is a silent no-op, whatever the payload and the status", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      const calls: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          handler: (call: Call<{ readonly cents: number }>) =>
            Effect.gen(function*() {
              calls.push(`${call.id}:${call.payload.cents}#${call.attempt}`)
              if (call.id === "running") yield* Deferred.await(gate)
              if (call.id === "failed") return yield* new NonRetryableError({ message: "declined" })
              return call.payload.cents
            })
        })
      }, { onLifecycleEvent: hook }))
      for (const id of ["done", "failed", "running"]) {
        yield* object.run(ops.register("charge", { id, payload: { cents: 1 } }))
      }
      yield* TestClock.adjust(0)
      const before = object.storage.snapshot()
      const eventCount = events.length
      for (const id of ["done", "failed", "running"]) {
        yield* object.run(ops.register("charge", { id, payload: { cents: 2 } }))
      }
      yield* TestClock.adjust(60_000)
      expect(object.storage.snapshot()).toEqual(before)
      expect(events).toHaveLength(eventCount)
      expect(calls.sort()).toEqual(["done:1#1", "failed:1#1", "running:1#1"])

      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("charge", "running"))).toEqual({ status: "completed", result: 1 })
      expect(yield* rowOf(object, "done")).toMatchObject({ payload: stored({ cents: 1 }), attempt: 1 })
      expect(yield* object.run(ops.getResult("charge", "failed"))).toEqual({
        status: "failed",
        attempt: 1,
        error: { name: "NonRetryableError", message: "declined" }
      })
      expect(events.filter((event) => event.type === "registered")).toHaveLength(3)
      expect(calls).toHaveLength(3)
    }))

  it.scoped("the same id for another operation is a DuplicateDurableCallError and writes nothing", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      const gate = yield* Deferred.make<void>()
      let refunds = 0
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({ handler: (call: Call) => call.id === "slow" ? Deferred.await(gate) : Effect.void }),
        refund: Operations.operation({ handler: () => Effect.sync(() => refunds++) })
      }, { onLifecycleEvent: hook }))
      yield* object.run(ops.register("charge", { id: "done", payload: 1 }))
      yield* object.run(ops.register("charge", { id: "slow", payload: 1 }))
      yield* TestClock.adjust(0)
      for (const id of ["done", "slow"]) {
        const before = object.storage.snapshot()
        const alarmBefore = object.storage.alarmAt
        const eventCount = events.length
        const error = yield* Effect.flip(object.run(ops.register("refund", { id, payload: 1 })))
        expect(error).toMatchObject({
          _tag: "DuplicateDurableCallError",
          id,
          existing: "charge",
          requested: "refund",
          message: `Durable call "${id}" already belongs to operation "charge", not "refund"`
        })
        expect(object.storage.snapshot()).toEqual(before)
        expect(object.storage.alarmAt).toBe(alarmBefore)
        expect(events).toHaveLength(eventCount)
      }
      yield* TestClock.adjust(60_000)
      expect(refunds).toBe(0)
      expect((yield* allRows(object)).map((row) => row.operation)).toEqual(["charge", "charge"])
    }))

  it.scoped("concurrent registrations of one id by two operations: exactly one wins, the other is a duplicate", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({ handler: (call: Call) => Effect.sync(() => calls.push(`charge ${call.id}`)) }),
        refund: Operations.operation({ handler: (call: Call) => Effect.sync(() => calls.push(`refund ${call.id}`)) })
      }))
      const outcomes = yield* Effect.all([
        Effect.either(object.run(ops.register("charge", { id: "x", payload: 1 }))),
        Effect.either(object.run(ops.register("refund", { id: "x", payload: 2 })))
      ], { concurrency: "unbounded" })
      yield* TestClock.adjust(0)
      const winners = outcomes.filter((outcome) => outcome._tag === "Right")
      const losers = outcomes.flatMap((outcome) => outcome._tag === "Left" ? [outcome.left] : [])
      expect(winners).toHaveLength(1)
      expect(losers).toEqual([expect.objectContaining({ _tag: "DuplicateDurableCallError", id: "x" })])
      const row = yield* rowOf(object, "x")
      expect(losers[0]).toMatchObject({ existing: row?.operation })
      expect(calls).toEqual([`${String(row?.operation)} x`])
    }))

  it.scoped("an eager start and an alarm pass for one id run the handler once", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ alarms: "manual" })
      const gate = yield* Deferred.make<void>()
      let calls = 0
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({ handler: () => Effect.zipRight(Effect.sync(() => calls++), Deferred.await(gate)) })
      }))
      yield* object.run(ops.register("charge", { id: "x", payload: null }))
      // The platform fires the alarm while the eager attempt is still running.
      yield* TestClock.setTime(15_000)
      const pass = yield* Effect.fork(object.fireAlarm())
      yield* TestClock.adjust(0)
      expect(calls).toBe(1)
      expect(pass.unsafePoll()).toBeNull()
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(pass)).toBe(true)
      expect(calls).toBe(1)
      expect(yield* rowOf(object, "x")).toMatchObject({ status: "completed", attempt: 1 })
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("rejects an unknown operation and a bad id before touching storage", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({ charge: Operations.operation({ handler: () => Effect.void }) }))
      const before = object.storage.snapshot()
      const statements = object.storage.statements.length
      const unknown = yield* Effect.flip(object.run(ops.register("nope" as "charge", { id: "a", payload: 1 })))
      expect(unknown).toMatchObject({ _tag: "InvalidInputError", field: "operation", message: "Unknown operation \"nope\"" })
      for (const id of ["", "x".repeat(513), 42 as unknown as string]) {
        const error = yield* Effect.flip(object.run(ops.register("charge", { id, payload: 1 })))
        expect(error).toMatchObject({
          _tag: "InvalidInputError",
          field: "id",
          kind: "type",
          message: `id must be a non-empty string of at most 512 characters, got ${
            typeof id === "string" && id.length > 60 ? "a string of 513 characters" : JSON.stringify(id)
          }`
        })
        expect(yield* Effect.flip(object.run(ops.getResult("charge", id)))).toMatchObject({ field: "id" })
      }
      expect(yield* Effect.flip(object.run(ops.getResult("nope" as "charge", "a")))).toMatchObject({
        field: "operation"
      })
      expect(yield* Effect.flip(object.run(ops.register("charge", null as never)))).toMatchObject({
        _tag: "InvalidInputError",
        field: "call",
        message: "call must be { id, payload }, got null"
      })
      expect(object.storage.statements).toHaveLength(statements)
      expect(object.storage.snapshot()).toEqual(before)
    }))
})

describe("registerMany", () => {
  const pendingIds = (object: TestObject) =>
    object.storage.sql.exec("SELECT id FROM durability_calls WHERE status = 'pending' ORDER BY id").toArray().map((row) => row.id)

  it.scoped("writes a batch in one transaction; free permits start calls at once, the timer the rest; events for new ids only", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 3 } })
      const gate = yield* Deferred.make<void>()
      const started: Array<string> = []
      const { events, hook } = recorder()
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          handler: (call: Call<number>) => Effect.zipRight(Effect.sync(() => started.push(call.id)), Deferred.await(gate))
        })
      }, { onLifecycleEvent: hook }))
      yield* object.run(ops.register("charge", { id: "c-0", payload: 0, delayMs: 60_000 }))
      const calls = Array.from({ length: 6 }, (_, i) => ({ id: `c-${i}`, payload: i }))
      yield* object.run(ops.registerMany("charge", [...calls, { id: "later", payload: 9, delayMs: 30_000 }]))
      expect(pendingIds(object)).toEqual(["c-0", "c-1", "c-2", "c-3", "c-4", "c-5", "later"])
      // c-0 was already registered (for later): a no-op, as `register` is.
      expect(events.filter((event) => event.type === "registered").map((event) => "id" in event && event.id))
        .toEqual(["c-0", "c-1", "c-2", "c-3", "c-4", "c-5", "later"])
      expect(object.storage.alarmAt).toBe(15_000)
      yield* TestClock.adjust(0)
      expect(started).toEqual(["c-1", "c-2", "c-3"])
      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(0)
      expect(started).toEqual(["c-1", "c-2", "c-3", "c-4", "c-5"])
      yield* TestClock.adjust(60_000)
      expect(started).toEqual(["c-1", "c-2", "c-3", "c-4", "c-5", "later", "c-0"])
      expect(pendingIds(object)).toEqual([])
      yield* object.run(ops.registerMany("charge", []))
      expect(pendingIds(object)).toEqual([])
    }))

  it.scoped("a bad call fails the whole batch with an InvalidInputError naming it; storage is untouched", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({ charge: Operations.operation({ handler: () => Effect.void }) }))
      const before = object.storage.snapshot()
      const statements = object.storage.statements.length
      const badId = yield* Effect.flip(object.run(ops.registerMany("charge", [{ id: "a", payload: 1 }, { id: "", payload: 2 }])))
      expect(badId).toMatchObject({ _tag: "InvalidInputError", field: "calls[1].id" })
      const badPayload = yield* Effect.flip(
        object.run(ops.registerMany("charge", [{ id: "a", payload: 1 }, { id: "b", payload: 1 }, { id: "c", payload: () => 1 }]))
      )
      expect(badPayload).toMatchObject({ _tag: "InvalidInputError", field: "calls[2].payload" })
      const badDelay = yield* Effect.flip(
        object.run(ops.registerMany("charge", [{ id: "a", payload: 1 }, { id: "b", payload: 1, delayMs: -1 }]))
      )
      expect(badDelay).toMatchObject({ _tag: "InvalidInputError", field: "calls[1].delayMs" })
      const notCalls = yield* Effect.flip(object.run(ops.registerMany("charge", 42 as never)))
      expect(notCalls).toMatchObject({
        _tag: "InvalidInputError",
        field: "calls",
        message: "calls must be an array (or iterable) of { id, payload }, got 42"
      })
      expect(yield* Effect.flip(object.run(ops.registerMany("charge", [null as never])))).toMatchObject({
        field: "calls[0]",
        message: "calls[0] must be { id, payload }, got null"
      })
      expect(object.storage.statements).toHaveLength(statements)
      expect(object.storage.snapshot()).toEqual(before)
    }))

  it.scoped("all or none: an id owned by another operation, or a failed statement, rolls the whole batch back", () =>
    Effect.gen(function*() {
      const storage = FaultyStorage.make(yield* MemoryStorage.make)
      const object = yield* TestDurability.make({ storage })
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({ handler: () => Effect.never }),
        refund: Operations.operation({ handler: () => Effect.never })
      }))
      yield* object.run(ops.register("refund", { id: "r-1", payload: 1, delayMs: 60_000 }))
      const before = storage.inner.snapshot()
      const duplicate = yield* Effect.flip(
        object.run(ops.registerMany("charge", [{ id: "c-1", payload: 1 }, { id: "r-1", payload: 2 }, { id: "c-2", payload: 3 }]))
      )
      expect(duplicate).toMatchObject({ _tag: "DuplicateDurableCallError", id: "r-1", existing: "refund", requested: "charge" })
      expect(storage.inner.snapshot()).toEqual(before)
      storage.failCall("sql", storage.calls("sql") + 2)
      const failed = yield* Effect.flip(
        object.run(ops.registerMany("charge", [{ id: "c-1", payload: 1 }, { id: "c-2", payload: 2 }, { id: "c-3", payload: 3 }]))
      )
      expect(failed).toMatchObject({ _tag: "StorageError" })
      expect(storage.inner.snapshot()).toEqual(before)
      expect(pendingIds(object)).toEqual(["r-1"])
    }))
})

describe("transactions on the hot path", () => {
  it.scoped("a single registration the known alarm covers and a one-statement settle run without a transaction; a batch, a retry and an uncovered registration in one each", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStorage.make
      let transactions = 0
      // `intercept` reads everything else (the alarm, the rows) through to `inner`.
      const storage = MemoryStorage.intercept(inner, {})
      Object.assign(storage, {
        transactionSync: <T>(closure: () => T): T => {
          transactions++
          return inner.transactionSync(closure)
        }
      })
      const object = yield* TestDurability.make({ storage, alarms: "manual" })
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({ handler: (call: Call<number>) => Effect.succeed(call.payload * 2) }),
        flaky: Operations.operation({
          retries: { maxAttempts: 2, delay: () => 60_000 },
          handler: () => Effect.fail(new Error("down"))
        })
      }))
      const settled = (id: string) =>
        object.storage.sql.exec("SELECT status FROM durability_calls WHERE id = ?", id).toArray()[0]?.status

      const count = <A, E>(effect: Effect.Effect<A, E>) =>
        Effect.gen(function*() {
          const before = transactions
          yield* effect
          yield* TestClock.adjust(0)
          return transactions - before
        })
      // Nothing pending yet: the first registration sets the alarm inside its transaction.
      expect(yield* count(object.run(ops.register("charge", { id: "a", payload: 1 })))).toBe(1)
      expect(object.storage.alarmAt).toBe(15_000)
      expect(settled("a")).toBe("completed")
      expect(yield* object.run(ops.getResult("charge", "a"))).toMatchObject({ status: "completed", result: 2 })
      // The alarm covers the next one (due now, alarm inside [now, now + alarmMinDelayMs]): one
      // statement, no transaction; its completion is one conditional statement too.
      expect(yield* count(object.run(ops.register("charge", { id: "b", payload: 2 })))).toBe(0)
      expect(settled("b")).toBe("completed")
      expect(yield* object.run(ops.getResult("charge", "b"))).toMatchObject({ status: "completed", result: 4 })
      // A batch: one transaction for every call (their completions still need none).
      const batch = Array.from({ length: 3 }, (_, i) => ({ id: `m-${i}`, payload: i }))
      expect(yield* count(object.run(ops.registerMany("charge", batch)))).toBe(1)
      expect(batch.map(({ id }) => settled(id))).toEqual(["completed", "completed", "completed"])
      // A retry moves the row: its settle reconciles the alarm in the same transaction.
      expect(yield* count(object.run(ops.register("flaky", { id: "f", payload: 0 })))).toBe(1)
      expect(settled("f")).toBe("pending")
      // Not covered (an hour away, past the known alarm's window): a transaction, for the alarm.
      expect(yield* count(object.run(ops.register("charge", { id: "later", payload: 3, delayMs: 3_600_000 })))).toBe(1)
    }))
})

describe("getResult", () => {
  it.scoped("reports not_found, pending {attempt, nextAttemptAt, lastError}, failed and completed", () =>
    Effect.gen(function*() {
      class CardDeclined extends Error {
        override readonly name = "CardDeclined"
      }
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          retries: { maxAttempts: 2, delay: () => 1_000 },
          handler: (call: Call<{ readonly ok: boolean }>) =>
            call.payload.ok ? Effect.succeed({ receipt: `r-${call.id}` }) : Effect.fail(new CardDeclined("card declined"))
        })
      }))
      expect(yield* object.run(ops.getResult("charge", "x"))).toEqual({ status: "not_found" })
      yield* object.run(ops.register("charge", { id: "x", payload: { ok: false } }))
      yield* object.run(ops.register("charge", { id: "y", payload: { ok: true } }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("charge", "x"))).toEqual({
        status: "pending",
        attempt: 1,
        nextAttemptAt: 1_000,
        lastError: "card declined",
        error: { name: "CardDeclined", message: "card declined" }
      })
      expect(yield* rowOf(object, "x")).toMatchObject({ last_error_name: "CardDeclined" })
      expect(yield* object.run(ops.getResult("charge", "y"))).toEqual({
        status: "completed",
        result: { receipt: "r-y" }
      })
      yield* TestClock.adjust(1_000)
      expect(yield* object.run(ops.getResult("charge", "x"))).toEqual({
        status: "failed",
        attempt: 2,
        error: { name: "CardDeclined", message: "card declined" }
      })
      expect(yield* rowOf(object, "x")).toMatchObject({ status: "failed", attempt: 2, next_attempt_at: 1_000 })
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("getResult and wait with an id owned by another operation fail with DuplicateDurableCallError", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({ handler: () => Effect.succeed(1) }),
        refund: Operations.operation({ handler: () => Effect.succeed("refunded") })
      }))
      yield* object.run(ops.register("charge", { id: "inv-1", payload: null }))
      yield* TestClock.adjust(0)
      const expected = {
        _tag: "DuplicateDurableCallError",
        id: "inv-1",
        existing: "charge",
        requested: "refund",
        message: "Durable call \"inv-1\" already belongs to operation \"charge\", not \"refund\""
      }
      expect(yield* Effect.flip(object.run(ops.getResult("refund", "inv-1")))).toMatchObject(expected)
      expect(yield* Effect.flip(object.run(ops.wait("refund", "inv-1", 0)))).toMatchObject(expected)
      expect(yield* Effect.flip(object.run(ops.wait("refund", "inv-1", 1_000)))).toMatchObject(expected)
      expect(yield* object.run(ops.getResult("charge", "inv-1"))).toEqual({ status: "completed", result: 1 })
    }))
})

describe("payloads and results", () => {
  /** The stored JSON of `{ blob: "" }`: `{"kind":"value","value":{"blob":""}}`. */
  const WRAPPER = 36
  class Money {
    constructor(readonly cents: number) {}
  }
  const cyclic: Record<string, unknown> = { name: "loop" }
  cyclic.self = cyclic
  const invalid: ReadonlyArray<readonly [string, unknown, string, "type" | "range"]> = [
    ["a BigInt", { amount: 10n }, "payload must be JSON-serializable: payload.amount is a BigInt", "type"],
    ["a cycle", cyclic, "payload must be JSON-serializable: payload.self is a circular reference", "type"],
    ["a function", { run: () => 1 }, "payload must be JSON-serializable: payload.run is a function", "type"],
    ["NaN", { n: Number.NaN }, "payload must be JSON-serializable: payload.n is NaN", "type"],
    ["Infinity", [1, Number.POSITIVE_INFINITY], "payload must be JSON-serializable: payload[1] is Infinity", "type"],
    ["a class instance", new Money(5), "payload must be JSON-serializable: payload is a Money", "type"],
    ["a Date", { at: new Date(0) }, "payload must be JSON-serializable: payload.at is a Date", "type"],
    ["a Map", { m: new Map() }, "payload must be JSON-serializable: payload.m is a Map", "type"],
    ["a nested undefined", { a: undefined }, "payload must be JSON-serializable: payload.a is undefined", "type"],
    [
      "over 2 MB",
      { blob: "x".repeat(2 * 1024 * 1024) },
      `payload is ${2 * 1024 * 1024 + WRAPPER} bytes as JSON; a stored row is limited to 2097152 bytes`,
      "range"
    ]
  ]

  it.scoped("a payload that is not plain JSON (or over 2 MB) is an InvalidInputError naming the field; storage is untouched", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      let calls = 0
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({ handler: (_: Call<unknown>) => Effect.sync(() => calls++) })
      }, { onLifecycleEvent: hook }))
      const before = object.storage.snapshot()
      for (const [label, payload, message, kind] of invalid) {
        const error = yield* Effect.flip(object.run(ops.register("charge", { id: "a", payload })))
        expect(error, label).toMatchObject({ _tag: "InvalidInputError", field: "payload", kind, message })
      }
      yield* TestClock.adjust(60_000)
      expect(object.storage.snapshot()).toEqual(before)
      expect(object.storage.alarmAt).toBeNull()
      expect(events).toEqual([])
      expect(calls).toBe(0)
      // A payload of exactly the limit is accepted.
      yield* object.run(ops.register("charge", { id: "a", payload: { blob: "x".repeat(2 * 1024 * 1024 - WRAPPER) } }))
      yield* TestClock.adjust(0)
      expect(calls).toBe(1)
    }))

  it.scoped("an undefined payload and an undefined result survive storage", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<Call> = []
      const ops = yield* object.run(Operations.make({
        ping: Operations.operation({
          handler: (call: Call<undefined>) => Effect.sync((): undefined => void seen.push(call))
        })
      }))
      yield* object.run(ops.register("ping", { id: "p", payload: undefined }))
      yield* TestClock.adjust(0)
      expect(seen).toHaveLength(1)
      expect("payload" in seen[0]!).toBe(true)
      expect(seen[0]?.payload).toBeUndefined()
      expect(yield* rowOf(object, "p")).toMatchObject({
        payload: "{\"kind\":\"undefined\"}",
        status: "completed",
        result: "{\"kind\":\"undefined\"}"
      })
      const result = yield* object.run(ops.getResult("ping", "p"))
      expect(result).toStrictEqual({ status: "completed", result: undefined })
      expect("result" in result).toBe(true)
    }))

  it.scoped("Schema payloads and results: validated and encoded at registration, decoded at execution and on read", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<unknown> = []
      const Payload = Schema.Struct({ at: Schema.DateFromString, cents: Schema.Number.pipe(Schema.int(), Schema.positive()) })
      const Receipt = Schema.Struct({ chargedAt: Schema.DateFromString, cents: Schema.Number })
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          payload: Payload,
          result: Receipt,
          handler: (call) =>
            Effect.sync(() => {
              seen.push(call.payload.at)
              return { chargedAt: new Date(call.payload.at.getTime() + 1_000), cents: call.payload.cents }
            })
        })
      }))
      const before = object.storage.snapshot()
      const bad = yield* Effect.flip(object.run(ops.register("charge", { id: "bad", payload: { at: new Date(0), cents: -5 } })))
      expect(bad).toMatchObject({ _tag: "InvalidInputError", field: "payload", kind: "type" })
      // The field and the path inside it first, not a dump of the schema.
      expect(bad.message).toBe("payload.cents: Expected a positive number, actual -5")
      expect(object.storage.snapshot()).toEqual(before)

      yield* object.run(ops.register("charge", { id: "ok", payload: { at: new Date(5_000), cents: 250 } }))
      yield* TestClock.adjust(0)
      expect(seen).toEqual([new Date(5_000)])
      expect(seen[0]).toBeInstanceOf(Date)
      expect(yield* rowOf(object, "ok")).toMatchObject({
        payload: stored({ at: "1970-01-01T00:00:05.000Z", cents: 250 }),
        status: "completed",
        result: stored({ chargedAt: "1970-01-01T00:00:06.000Z", cents: 250 })
      })
      const result = yield* object.run(ops.getResult("charge", "ok"))
      expect(result).toEqual({ status: "completed", result: { chargedAt: new Date(6_000), cents: 250 } })
      if (result.status === "completed") expect(result.result.chargedAt).toBeInstanceOf(Date)
    }))

  it("a result (or a result schema's encoded form) that is not JSON is a compile error", () => {
    const typeOnly = (): void => {
      void Operations.operation({ handler: () => Effect.succeed({ ok: true, at: 1 }) })
      void Operations.operation({ handler: () => Effect.void })
      // A schema that encodes the Date as a string: stored as JSON.
      void Operations.operation({ result: Schema.Date, handler: () => Effect.succeed(new Date(0)) })
      // @ts-expect-error a Date result without a schema
      void Operations.operation({ handler: () => Effect.succeed(new Date(0)) })
      // @ts-expect-error a schema whose encoded form is a BigInt
      void Operations.operation({ result: Schema.BigIntFromSelf, handler: () => Effect.succeed(1n) })
    }
    expect(typeof typeOnly).toBe("function")
  })

  it.scoped("a result that cannot be stored fails terminally with DurableResultSerializationError after one call", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      const calls: Array<string> = []
      const ops = yield* object.run(Operations.make({
        // A compile error for typed callers; JavaScript callers (and `unknown` results) meet the run-time check.
        bigint: Operations.operation({
          handler: (call: Call) => Effect.sync((): unknown => (calls.push(call.id), { total: 10n }))
        }),
        mismatch: Operations.operation({
          result: Schema.Number,
          handler: (call: Call) => Effect.sync(() => (calls.push(call.id), "not a number" as unknown as number))
        })
      }, { onLifecycleEvent: hook }))
      yield* object.run(ops.register("bigint", { id: "a", payload: null }))
      yield* object.run(ops.register("mismatch", { id: "b", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* rowOf(object, "a")).toMatchObject({
        status: "failed",
        attempt: 1,
        result: null,
        last_error_name: "DurableResultSerializationError",
        last_error: expect.stringMatching(/^The result of operation "bigint" is not JSON-serializable: .*BigInt/)
      })
      expect(yield* rowOf(object, "b")).toMatchObject({
        status: "failed",
        attempt: 1,
        last_error_name: "DurableResultSerializationError",
        last_error: expect.stringMatching(/^The result of operation "mismatch" does not match its schema/)
      })
      yield* TestClock.adjust(Scheduler.UPKEEP_DELAY)
      expect(object.storage.alarmAt).toBeNull()
      yield* TestClock.adjust(600_000)
      expect(calls).toEqual(["a", "b"])
      expect(events.filter((event) => event.type === "attempt_settled").map(brief)).toEqual([
        "attempt_settled:failed#1",
        "attempt_settled:failed#1"
      ])
    }))

  it.scoped("a stored row whose operation has no handler any more fails terminally with NonRetryableError", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const ops = yield* first.run(Operations.make({
        legacy: Operations.operation({ handler: () => Effect.never }),
        current: Operations.operation({ handler: () => Effect.void })
      }))
      yield* first.run(ops.register("legacy", { id: "old", payload: { v: 1 } }))
      yield* TestClock.adjust(0)
      expect(yield* rowOf(first, "old")).toMatchObject({ status: "pending", attempt: 1 })

      const second = yield* first.restart
      const { events, hook } = recorder()
      const next = yield* second.run(Operations.make({ current: Operations.operation({ handler: () => Effect.void }) }, {
        onLifecycleEvent: hook
      }))
      expect(yield* second.run(next.getResult("current", "other"))).toEqual({ status: "not_found" })
      expect(yield* second.fireAlarm()).toBe(true)
      expect(yield* rowOf(second, "old")).toMatchObject({
        status: "failed",
        attempt: 2,
        last_error_name: "NonRetryableError",
        last_error: "No handler registered for operation \"legacy\""
      })
      expect(events.map(brief)).toEqual(["attempt_started#2", "attempt_settled:failed#2"])
      expect(second.storage.alarmAt).toBeNull()
      const unknown = yield* Effect.flip(second.run(next.getResult("legacy" as "current", "old")))
      expect(unknown).toMatchObject({ _tag: "InvalidInputError", field: "operation" })
    }))
})

describe("retries and timeouts", () => {
  it.scoped("default policy: 5 attempts, exponential from 1 s with equal jitter (Random 0.5 → +750 ms, +1500 ms …)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ranAt: Array<number> = []
      const ops = yield* object.run(Operations.make({
        flaky: Operations.operation({
          handler: () => Effect.zipRight(Effect.map(Clock.currentTimeMillis, (now) => ranAt.push(now)), fails("transient"))
        })
      }))
      yield* object.run(ops.register("flaky", { id: "a", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("flaky", "a"))).toEqual({
        status: "pending",
        attempt: 1,
        nextAttemptAt: 750,
        lastError: "transient",
        error: { name: "Error", message: "transient" }
      })
      expect(object.storage.alarmAt).toBe(15_000)
      yield* TestClock.adjust(750)
      expect(yield* rowOf(object, "a")).toMatchObject({ status: "pending", attempt: 2, next_attempt_at: 2_250 })
      yield* TestClock.adjust(60_000)
      expect(ranAt).toEqual([0, 750, 2_250, 5_250, 11_250])
      expect(yield* object.run(ops.getResult("flaky", "a"))).toEqual({
        status: "failed",
        attempt: 5,
        error: { name: "Error", message: "transient" }
      })
      expect(object.storage.alarmAt).toBeNull()
    }).pipe(Effect.withRandom(Random.fixed([0.5]))))

  it.scoped("per-operation retries and attemptTimeoutMs override the capability's options", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ranAt: Record<string, Array<number>> = { inherits: [], own: [], scheduled: [] }
      const record = (name: string) => Effect.map(Clock.currentTimeMillis, (now) => ranAt[name]?.push(now))
      const ops = yield* object.run(Operations.make({
        inherits: Operations.operation({
          handler: () => Effect.zipRight(record("inherits"), Effect.sleep("30 seconds"))
        }),
        own: Operations.operation({
          attemptTimeoutMs: 1_000,
          retries: { maxAttempts: 2, delay: () => 100 },
          handler: () => Effect.zipRight(record("own"), Effect.sleep("30 seconds"))
        }),
        scheduled: Operations.operation({
          retries: { maxAttempts: 2, schedule: Schedule.spaced("3 seconds") },
          handler: () => Effect.zipRight(record("scheduled"), fails("nope"))
        })
      }, { attemptTimeoutMs: 10_000, retries: { maxAttempts: 3, delay: (attempt) => attempt * 1_000 } }))
      yield* object.run(ops.register("inherits", { id: "i", payload: null }))
      yield* object.run(ops.register("own", { id: "o", payload: null }))
      yield* object.run(ops.register("scheduled", { id: "s", payload: null }))
      yield* TestClock.adjust(60_000)
      expect(ranAt).toEqual({ inherits: [0, 11_000, 23_000], own: [0, 1_100], scheduled: [0, 3_000] })
      expect(yield* object.run(ops.getResult("own", "o"))).toEqual({
        status: "failed",
        attempt: 2,
        error: { name: "DurableAttemptTimeoutError", message: "Durable operation \"own\" timed out after 1000ms" }
      })
      expect(yield* object.run(ops.getResult("inherits", "i"))).toEqual({
        status: "failed",
        attempt: 3,
        error: {
          name: "DurableAttemptTimeoutError",
          message: "Durable operation \"inherits\" timed out after 10000ms"
        }
      })
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("a timeout aborts the signal with the exact message and is retried per policy", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const signals: Array<AbortSignal> = []
      const ops = yield* object.run(Operations.make({
        slow: Operations.operation({
          attemptTimeoutMs: 1_000,
          retries: { maxAttempts: 3, delay: () => 500 },
          handler: (call: Call) =>
            Effect.zipRight(
              Effect.sync(() => signals.push(call.signal)),
              call.attempt < 3 ? Effect.sleep("10 seconds") : Effect.succeed("third time lucky")
            )
        })
      }))
      const message = "Durable operation \"slow\" timed out after 1000ms"
      yield* object.run(ops.register("slow", { id: "s", payload: null }))
      yield* TestClock.adjust(999)
      expect(signals[0]?.aborted).toBe(false)
      yield* TestClock.adjust(1)
      expect(signals[0]?.aborted).toBe(true)
      expect(signals[0]?.reason).toMatchObject({ _tag: "DurableAttemptTimeoutError", message, timeoutMs: 1_000 })
      expect(yield* object.run(ops.getResult("slow", "s"))).toEqual({
        status: "pending",
        attempt: 1,
        nextAttemptAt: 1_500,
        lastError: message,
        error: { name: "DurableAttemptTimeoutError", message }
      })
      expect(yield* rowOf(object, "s")).toMatchObject({ last_error_name: "DurableAttemptTimeoutError" })
      yield* TestClock.adjust(1_500)
      expect(yield* object.run(ops.getResult("slow", "s"))).toEqual({
        status: "pending",
        attempt: 2,
        nextAttemptAt: 3_000,
        lastError: message,
        error: { name: "DurableAttemptTimeoutError", message }
      })
      yield* TestClock.adjust(500)
      expect(signals).toHaveLength(3)
      expect(yield* object.run(ops.getResult("slow", "s"))).toEqual({ status: "completed", result: "third time lucky" })
      expect(yield* rowOf(object, "s")).toMatchObject({ attempt: 3, last_error: null, last_error_name: null })
    }))

  it.scoped("an abort-ignoring handler keeps the id locked: attempt 2 starts only after attempt 1 really ended", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const log: Array<string> = []
      let active = 0
      let maxActive = 0
      const ops = yield* object.run(Operations.make({
        stubborn: Operations.operation({
          attemptTimeoutMs: 1_000,
          retries: { maxAttempts: 3, delay: () => 10 },
          handler: (call: Call) =>
            Effect.acquireUseRelease(
              Effect.gen(function*() {
                maxActive = Math.max(maxActive, ++active)
                log.push(`start ${call.attempt} at ${yield* Clock.currentTimeMillis}`)
              }),
              () => call.attempt === 1 ? Effect.uninterruptible(Effect.sleep("5 seconds")) : Effect.void,
              () =>
                Effect.gen(function*() {
                  active--
                  log.push(`end ${call.attempt} at ${yield* Clock.currentTimeMillis}`)
                })
            ).pipe(Effect.as(`attempt ${call.attempt}`))
        })
      }))
      yield* object.run(ops.register("stubborn", { id: "x", payload: null }))
      yield* TestClock.adjust(1_000)
      expect(yield* rowOf(object, "x")).toMatchObject({
        status: "pending",
        attempt: 1,
        next_attempt_at: 1_010,
        last_error_name: "DurableAttemptTimeoutError"
      })
      yield* TestClock.adjust(3_999)
      expect(log).toEqual(["start 1 at 0"])
      expect(yield* rowOf(object, "x")).toMatchObject({ attempt: 1 })
      yield* TestClock.adjust(1)
      expect(log).toEqual(["start 1 at 0", "end 1 at 5000", "start 2 at 5000", "end 2 at 5000"])
      expect(maxActive).toBe(1)
      expect(yield* object.run(ops.getResult("stubborn", "x"))).toEqual({ status: "completed", result: "attempt 2" })
      expect(yield* rowOf(object, "x")).toMatchObject({ attempt: 2 })
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("any failure is stored as {name, message}; NonRetryableError (ours or so named) is terminal at once", () =>
    Effect.gen(function*() {
      class ForeignNonRetryable extends Error {
        override readonly name = "NonRetryableError"
      }
      const hostile = {
        get message(): string {
          throw new Error("getter bomb")
        }
      }
      const thrown: Record<string, unknown> = {
        null: null,
        number: 42,
        hostile,
        foreign: new ForeignNonRetryable("from another package"),
        ours: new NonRetryableError({ message: "bad input" })
      }
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const ops = yield* object.run(Operations.make({
        boom: Operations.operation({
          retries: { maxAttempts: 2, delay: () => 1_000 },
          handler: (call: Call) =>
            Effect.suspend(() => {
              calls.push(call.id)
              return call.id === "died" ? Effect.die(new TypeError("bug")) : Effect.fail(thrown[call.id])
            })
        })
      }))
      for (const id of [...Object.keys(thrown), "died"]) yield* object.run(ops.register("boom", { id, payload: null }))
      yield* TestClock.adjust(0)
      const result = (id: string) => object.run(ops.getResult("boom", id))
      expect(yield* result("null")).toEqual({ status: "pending", attempt: 1, nextAttemptAt: 1_000, lastError: "null", error: { name: "Error", message: "null" } })
      expect(yield* result("number")).toMatchObject({ status: "pending", lastError: "42" })
      expect(yield* result("hostile")).toMatchObject({ status: "pending", lastError: "Unserializable error" })
      expect(yield* result("died")).toMatchObject({ status: "pending", lastError: "bug" })
      expect(yield* rowOf(object, "died")).toMatchObject({ last_error_name: "TypeError" })
      expect(yield* result("foreign")).toEqual({
        status: "failed",
        attempt: 1,
        error: { name: "NonRetryableError", message: "from another package" }
      })
      expect(yield* result("ours")).toEqual({
        status: "failed",
        attempt: 1,
        error: { name: "NonRetryableError", message: "bad input" }
      })
      yield* TestClock.adjust(1_000)
      expect(yield* result("null")).toEqual({ status: "failed", attempt: 2, error: { name: "Error", message: "null" } })
      expect(calls.filter((id) => id === "foreign" || id === "ours")).toEqual(["foreign", "ours"])
      expect(calls).toHaveLength(10)
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("never claims an exhausted operation: an attempt lost to eviction counts", () =>
    Effect.gen(function*() {
      let calls = 0
      const definitions = {
        once: Operations.operation({
          retries: { maxAttempts: 1 },
          handler: () => Effect.zipRight(Effect.sync(() => calls++), Effect.never)
        })
      }
      const first = yield* TestDurability.make()
      const ops = yield* first.run(Operations.make(definitions))
      yield* first.run(ops.register("once", { id: "x", payload: null }))
      yield* TestClock.adjust(0)
      expect(calls).toBe(1)
      const generation = (yield* rowOf(first, "x"))?.generation_id

      const second = yield* first.restart
      const { events, hook } = recorder()
      const again = yield* second.run(Operations.make(definitions, { onLifecycleEvent: hook }))
      expect(yield* second.fireAlarm()).toBe(true)
      expect(calls).toBe(1)
      const message = "Durable operation \"once\" (id \"x\") exhausted its 1 attempts"
      expect(yield* rowOf(second, "x")).toMatchObject({
        status: "failed",
        attempt: 1,
        last_error_name: "DurableAttemptsExhaustedError",
        last_error: message
      })
      expect(events).toEqual([{
        type: "terminal",
        entityKind: "operation",
        operation: "once",
        id: "x",
        generation,
        timestamp: 15_000,
        attempt: 1,
        reason: "attempts_exhausted",
        error: { name: "DurableAttemptsExhaustedError", message }
      }])
      expect(yield* second.run(again.getResult("once", "x"))).toEqual({
        status: "failed",
        attempt: 1,
        error: { name: "DurableAttemptsExhaustedError", message }
      })
      expect(second.storage.alarmAt).toBeNull()
    }))

  for (
    const [label, delay, message] of [
      ["throws", () => {
        throw new Error("policy bug")
      }, "Retry policy failed: policy bug"],
      [
        "is NaN",
        () => Number.NaN,
        "Retry delay for attempt 1 must be a finite non-negative number of milliseconds, got NaN"
      ],
      ["is -1", () => -1, "Retry delay for attempt 1 must be a finite non-negative number of milliseconds, got -1"],
      [
        "is -0.1",
        () => -0.1,
        "Retry delay for attempt 1 must be a finite non-negative number of milliseconds, got -0.1"
      ],
      [
        "overflows the timestamp",
        () => Number.MAX_SAFE_INTEGER,
        `Retry delay for attempt 1 (${Number.MAX_SAFE_INTEGER} ms) does not give a safe integer timestamp`
      ]
    ] as const
  ) {
    it.scoped(`a retry delay that ${label} makes the operation fail terminally with DurableRetryPolicyError`, () =>
      Effect.gen(function*() {
        // A realistic clock, so an enormous delay overflows the timestamp.
        yield* TestClock.setTime(1_700_000_000_000)
        const object = yield* TestDurability.make()
        let calls = 0
        const ops = yield* object.run(Operations.make({
          flaky: Operations.operation({
            retries: { delay },
            handler: () => Effect.zipRight(Effect.sync(() => calls++), fails("transient"))
          })
        }))
        yield* object.run(ops.register("flaky", { id: "a", payload: null }))
        yield* TestClock.adjust(600_000)
        expect(calls).toBe(1)
        expect(yield* rowOf(object, "a")).toMatchObject({
          status: "failed",
          attempt: 1,
          last_error_name: "DurableRetryPolicyError",
          last_error: message
        })
        expect(yield* object.run(ops.getResult("flaky", "a"))).toEqual({
          status: "failed",
          attempt: 1,
          error: { name: "DurableRetryPolicyError", message }
        })
        expect(object.storage.alarmAt).toBeNull()
      }))
  }
})

describe("eviction and alarm passes", () => {
  it.scoped("a restarted object resumes a pending operation: attempt 2, same id, payload and generation", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const before = recorder()
      const ops = yield* first.run(Operations.make({
        ship: Operations.operation({ handler: (_: Call<{ readonly sku: string }>) => Effect.never })
      }, { onLifecycleEvent: before.hook }))
      yield* first.run(ops.register("ship", { id: "order-7", payload: { sku: "A-1" } }))
      yield* TestClock.adjust(0)
      const registered = before.events[0]
      expect(registered).toMatchObject({ type: "registered", id: "order-7", attempt: 0 })
      const generation = registered !== undefined && "generation" in registered ? registered.generation : undefined
      expect(generation).toEqual(expect.any(String))
      expect(first.storage.alarmAt).toBe(15_000)

      const second = yield* first.restart
      const after = recorder()
      const seen: Array<Call<{ readonly sku: string }>> = []
      const next = yield* second.run(Operations.make({
        ship: Operations.operation({
          handler: (call: Call<{ readonly sku: string }>) => Effect.sync(() => (seen.push(call), "shipped"))
        })
      }, { onLifecycleEvent: after.hook }))
      expect(yield* second.fireAlarm()).toBe(true)
      expect(seen.map(({ attempt, id, operation, payload }) => ({ id, operation, payload, attempt }))).toEqual([
        { id: "order-7", operation: "ship", payload: { sku: "A-1" }, attempt: 2 }
      ])
      expect(yield* rowOf(second, "order-7")).toMatchObject({
        status: "completed",
        attempt: 2,
        generation_id: generation,
        result: stored("shipped")
      })
      expect(after.events.map(brief)).toEqual(["attempt_started#2", "attempt_settled:completed#2"])
      expect(after.events.every((event) => "generation" in event && event.generation === generation)).toBe(true)
      expect(yield* second.run(next.getResult("ship", "order-7"))).toEqual({ status: "completed", result: "shipped" })
      expect(second.storage.alarmAt).toBeNull()
    }))

  it.scoped("101 due rows, alarmConcurrency 2: the alarm pass runs 100 with at most 2 active, the timer the rest", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ alarms: "manual", scheduler: { alarmConcurrency: 2 } })
      let active = 0
      let maxActive = 0
      const retried: Array<string> = []
      let failures = 0
      const ops = yield* object.run(Operations.make({
        batch: Operations.operation({
          retries: { delay: () => 20_000 + failures++ },
          handler: (call: Call) =>
            call.attempt === 1
              ? fails("first attempt fails")
              : Effect.acquireUseRelease(
                Effect.sync(() => {
                  maxActive = Math.max(maxActive, ++active)
                  retried.push(call.id)
                }),
                () => Effect.repeatN(Effect.yieldNow(), 3),
                () => Effect.sync(() => active--)
              )
        })
      }))
      const ids = Array.from({ length: 101 }, (_, i) => `op-${String(i).padStart(3, "0")}`)
      for (const id of ids) yield* object.run(ops.register("batch", { id, payload: null }))
      yield* TestClock.adjust(0)
      // Every first attempt failed, each retry due 1 ms after the previous one.
      const rows = [...(yield* allRows(object))].sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at))
      expect(rows.map((row) => [row.status, row.attempt, row.next_attempt_at])).toEqual(
        ids.map((_, i) => ["pending", 1, 20_000 + i])
      )
      expect(object.storage.alarmAt).toBe(20_000)
      yield* TestClock.setTime(20_100)
      expect(retried).toEqual([])

      const dueScans = () =>
        object.storage.statements.filter((query) => query.startsWith("SELECT") && query.includes("next_attempt_at <= ?"))
          .length
      const scansBefore = dueScans()
      expect(yield* object.fireAlarm()).toBe(true)
      // The pass returned once its batch (the 100 earliest) was done.
      const afterPass = new Map((yield* allRows(object)).map((row) => [row.id, row.status]))
      expect(rows.slice(0, 100).every((row) => afterPass.get(row.id) === "completed")).toBe(true)
      yield* TestClock.adjust(0)
      expect([...retried].sort()).toEqual(ids)
      expect(maxActive).toBe(2)
      expect((yield* allRows(object)).every((row) => row.status === "completed" && row.attempt === 2)).toBe(true)
      // Two passes in all: the physical alarm's and one timer pass for the remainder.
      expect(dueScans() - scansBefore).toBe(2)
      expect(object.storage.alarmAt).toBeNull()
    }))
})

describe("wait", () => {
  const make = Effect.gen(function*() {
    const object = yield* TestDurability.make({ alarms: "manual" })
    const ops = yield* object.run(Operations.make({
      job: Operations.operation({
        retries: { maxAttempts: 2, delay: () => 1_000 },
        handler: (call: Call<{ readonly ms: number; readonly fail?: boolean }>) =>
          Effect.zipRight(
            Effect.sleep(call.payload.ms),
            call.payload.fail === true
              ? Effect.fail(new Error(`failed ${call.attempt}`))
              : Effect.succeed(`done ${call.id}`)
          )
      })
    }))
    return { object, ops }
  })

  it.scoped("returns once the record settles, not on a scheduled retry", () =>
    Effect.gen(function*() {
      const { object, ops } = yield* make
      yield* object.run(ops.register("job", { id: "ok", payload: { ms: 5_000 } }))
      yield* object.run(ops.register("job", { id: "bad", payload: { ms: 100, fail: true } }))
      const ok = yield* Effect.fork(object.run(ops.wait("job", "ok", 60_000)))
      const bad = yield* Effect.fork(object.run(ops.wait("job", "bad", 60_000)))
      yield* TestClock.adjust(100)
      // Attempt 1 of "bad" failed with a retry scheduled: still waiting.
      expect(bad.unsafePoll()).toBeNull()
      yield* TestClock.adjust(1_099)
      expect(bad.unsafePoll()).toBeNull()
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(bad)).toEqual({
        status: "failed",
        attempt: 2,
        error: { name: "Error", message: "failed 2" }
      })
      expect(ok.unsafePoll()).toBeNull()
      yield* TestClock.adjust(3_800)
      expect(yield* Fiber.join(ok)).toEqual({ status: "completed", result: "done ok" })
      expect(yield* Clock.currentTimeMillis).toBe(5_000)
    }))

  it.scoped("timeoutMs 0 returns the current state at once; a timeout returns the state still pending", () =>
    Effect.gen(function*() {
      const { object, ops } = yield* make
      expect(yield* object.run(ops.wait("job", "missing", 60_000))).toEqual({ status: "not_found" })
      yield* object.run(ops.register("job", { id: "long", payload: { ms: 10_000 } }))
      yield* TestClock.adjust(0)
      const pending = { status: "pending", attempt: 1, nextAttemptAt: 0, lastError: null, error: null }
      expect(yield* object.run(ops.wait("job", "long", 0))).toEqual(pending)
      const waiting = yield* Effect.fork(object.run(ops.wait("job", "long", 2_000)))
      yield* TestClock.adjust(1_999)
      expect(waiting.unsafePoll()).toBeNull()
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(waiting)).toEqual(pending)
      yield* TestClock.adjust(8_000)
      expect(yield* object.run(ops.wait("job", "long", 0))).toEqual({ status: "completed", result: "done long" })
      // A settled record returns at once whatever the timeout.
      expect(yield* object.run(ops.wait("job", "long", 60_000))).toEqual({ status: "completed", result: "done long" })
    }))

  it.scoped("rejects a timeoutMs that is not a non-negative safe integer", () =>
    Effect.gen(function*() {
      const { object, ops } = yield* make
      for (const timeoutMs of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1]) {
        const error = yield* Effect.flip(object.run(ops.wait("job", "x", timeoutMs)))
        expect(error).toMatchObject({
          _tag: "InvalidInputError",
          field: "timeoutMs",
          kind: "range",
          message: `timeoutMs must be a non-negative safe integer, got ${timeoutMs}`
        })
      }
    }))

  it.scoped("a waiter is resolved by a purge of its record", () =>
    Effect.gen(function*() {
      const { object, ops } = yield* make
      yield* object.run(ops.register("job", { id: "doomed", payload: { ms: 600_000 } }))
      const waiting = yield* Effect.fork(object.run(ops.wait("job", "doomed", 300_000)))
      yield* TestClock.adjust(10)
      expect(waiting.unsafePoll()).toBeNull()
      expect(yield* object.run(ops.purgeBefore(10))).toBe(1)
      expect(yield* Fiber.join(waiting)).toEqual({ status: "not_found" })
      expect(yield* Clock.currentTimeMillis).toBe(10)
    }))
})

describe("purgeBefore", () => {
  it.scoped("deletes records created strictly before the cutoff, aborts their handlers, returns the count", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      const signals = new Map<string, AbortSignal>()
      const ops = yield* object.run(Operations.make({
        task: Operations.operation({
          handler: (call: Call<"ok" | "fail" | "hang">) =>
            Effect.gen(function*() {
              signals.set(call.id, call.signal)
              if (call.payload === "fail") return yield* new NonRetryableError({ message: "no" })
              if (call.payload === "hang") return yield* Effect.never
              return call.id
            })
        })
      }, { onLifecycleEvent: hook }))
      const register = (id: string, payload: "ok" | "fail" | "hang") => object.run(ops.register("task", { id, payload }))
      yield* register("a", "ok")
      yield* TestClock.adjust(1_000)
      yield* register("b", "fail")
      yield* TestClock.adjust(1_000)
      yield* register("c", "hang")
      yield* TestClock.adjust(1_000)
      yield* register("d", "ok")
      yield* TestClock.adjust(0)
      // Registered at 2000 and never settling: the alarm is at 2000 + the minimum delay.
      expect(object.storage.alarmAt).toBe(17_000)
      events.length = 0

      expect(yield* object.run(ops.purgeBefore(2_000))).toBe(2)
      expect((yield* allRows(object)).map((row) => [row.id, row.created_at])).toEqual([["c", 2_000], ["d", 3_000]])
      expect(yield* object.run(ops.getResult("task", "a"))).toEqual({ status: "not_found" })
      expect(signals.get("c")?.aborted).toBe(false)
      expect(events).toEqual([{ type: "purged", entityKind: "operation", timestamp: 3_000, before: 2_000, count: 2 }])

      expect(yield* object.run(ops.purgeBefore(2_001))).toBe(1)
      expect(signals.get("c")?.aborted).toBe(true)
      expect(signals.get("c")?.reason).toEqual(new Error("Durable operation was purged"))
      expect(signals.get("d")?.aborted).toBe(false)
      yield* TestClock.adjust(0)
      expect((yield* allRows(object)).map((row) => row.id)).toEqual(["d"])
      expect(object.storage.alarmAt).toBeNull()
      expect(events.map(brief)).toEqual(["purged", "purged"])
      expect(events[1]).toMatchObject({ before: 2_001, count: 1 })

      expect(yield* object.run(ops.purgeBefore(0))).toBe(0)
      for (const before of [-1, 0.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1]) {
        expect(yield* Effect.flip(object.run(ops.purgeBefore(before)))).toMatchObject({
          _tag: "InvalidInputError",
          field: "timestamp",
          kind: "range",
          message: `timestamp must be a non-negative safe integer or a Date, got ${before}`
        })
      }
      expect(yield* object.background.reports).toEqual([])
    }))

  it.scoped("an id reused after a purge is protected from the late completion of the purged generation", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      const gate = yield* Deferred.make<void>()
      const log: Array<string> = []
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({
          handler: (call: Call<{ readonly version: number }>) =>
            // Version 1 ignores its abort signal and finishes late.
            Effect.gen(function*() {
              log.push(`start v${call.payload.version}#${call.attempt}`)
              if (call.payload.version === 1) yield* Deferred.await(gate)
              log.push(`end v${call.payload.version}`)
              return `sent v${call.payload.version}`
            }).pipe(call.payload.version === 1 ? Effect.uninterruptible : identity)
        })
      }, { onLifecycleEvent: hook }))
      yield* object.run(ops.register("send", { id: "msg", payload: { version: 1 } }))
      yield* TestClock.adjust(1)
      const oldGeneration = (yield* rowOf(object, "msg"))?.generation_id
      expect(yield* object.run(ops.purgeBefore(1))).toBe(1)
      yield* object.run(ops.register("send", { id: "msg", payload: { version: 2 } }))
      const newGeneration = (yield* rowOf(object, "msg"))?.generation_id
      expect(newGeneration).not.toBe(oldGeneration)
      yield* TestClock.adjust(0)

      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(0)
      expect(log).toContain("end v1")
      expect(log.filter((entry) => entry.startsWith("start"))).toEqual(["start v1#1", "start v2#1"])
      expect(yield* rowOf(object, "msg")).toMatchObject({
        generation_id: newGeneration,
        payload: stored({ version: 2 }),
        status: "completed",
        attempt: 1,
        result: stored("sent v2")
      })
      expect(yield* object.run(ops.getResult("send", "msg"))).toEqual({ status: "completed", result: "sent v2" })
      const settled = events.filter((event) => event.type === "attempt_settled")
      expect(settled).toEqual([expect.objectContaining({ outcome: "completed", generation: newGeneration })])
      expect(object.storage.alarmAt).toBeNull()
    }))
})

describe("purgeBefore and id reuse", () => {
  it.scoped("a purged id runs again at once while its purged handler never settles; the old one cannot overwrite it", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const gate = yield* Deferred.make<void>()
      const signals: Array<AbortSignal> = []
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({
          handler: (call: Call<{ readonly version: number }>) =>
            Effect.gen(function*() {
              signals.push(call.signal)
              // Version 1 ignores its abort signal and cannot be interrupted: it runs until the gate opens.
              if (call.payload.version === 1) yield* Deferred.await(gate)
              return `sent v${call.payload.version}`
            }).pipe(call.payload.version === 1 ? Effect.uninterruptible : identity)
        })
      }))
      yield* object.run(ops.register("send", { id: "reuse", payload: { version: 1 } }))
      yield* TestClock.adjust(1)
      expect(yield* object.run(ops.purgeBefore(1))).toBe(1)
      expect(signals[0]?.aborted).toBe(true)
      yield* object.run(ops.register("send", { id: "reuse", payload: { version: 2 } }))
      yield* TestClock.adjust(0)
      // The old handler is still running (it ignored the abort); the new generation did not wait for it.
      expect(signals).toHaveLength(2)
      expect(yield* object.run(ops.getResult("send", "reuse"))).toEqual({ status: "completed", result: "sent v2" })

      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(0)
      expect(yield* rowOf(object, "reuse")).toMatchObject({ status: "completed", attempt: 1, result: stored("sent v2") })
    }))
})

describe("lifecycle events", () => {
  it.scoped("are emitted in order after each commit, with entity fields, errors and durations", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          retries: { maxAttempts: 2, delay: () => 1_000 },
          handler: (call: Call<{ readonly ok: boolean }>) =>
            Effect.zipRight(
              Effect.sleep("250 millis"),
              call.payload.ok && call.attempt === 2 ? Effect.succeed("ok") : fails(`attempt ${call.attempt} failed`)
            )
        })
      }, { onLifecycleEvent: hook }))
      yield* object.run(ops.register("charge", { id: "good", payload: { ok: true } }))
      yield* TestClock.adjust(10_000)
      const generation = (yield* rowOf(object, "good"))?.generation_id
      const entity = { entityKind: "operation", operation: "charge", id: "good", generation }
      expect(events).toEqual([
        { ...entity, type: "registered", timestamp: 0, attempt: 0 },
        { ...entity, type: "attempt_started", timestamp: 0, attempt: 1 },
        {
          ...entity,
          type: "attempt_settled",
          outcome: "retry_scheduled",
          timestamp: 250,
          attempt: 1,
          durationMs: 250,
          error: { name: "Error", message: "attempt 1 failed" },
          nextAttemptAt: 1_250
        },
        { ...entity, type: "attempt_started", timestamp: 1_250, attempt: 2 },
        { ...entity, type: "attempt_settled", outcome: "completed", timestamp: 1_500, attempt: 2, durationMs: 250 }
      ])

      events.length = 0
      yield* object.run(ops.register("charge", { id: "bad", payload: { ok: false } }))
      yield* TestClock.adjust(10_000)
      expect(events.map(brief)).toEqual([
        "registered#0",
        "attempt_started#1",
        "attempt_settled:retry_scheduled#1",
        "attempt_started#2",
        "attempt_settled:failed#2"
      ])
      expect(events[4]).toMatchObject({
        id: "bad",
        durationMs: 250,
        error: { name: "Error", message: "attempt 2 failed" }
      })
      expect(events[4]).not.toHaveProperty("nextAttemptAt")

      events.length = 0
      expect(yield* object.run(ops.purgeBefore(100_000))).toBe(2)
      expect(events).toEqual([
        { type: "purged", entityKind: "operation", timestamp: 20_000, before: 100_000, count: 2 }
      ])
    }))

  it.scoped("a hook that throws or rejects is reported as durability.lifecycle_hook.failed and changes nothing", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<string> = []
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({ handler: () => Effect.succeed("charged") })
      }, {
        onLifecycleEvent: (event) => {
          seen.push(brief(event))
          if (event.type === "registered") throw new Error("hook threw")
          if (event.type === "attempt_settled") return Promise.reject(new Error("hook rejected"))
        }
      }))
      yield* object.run(ops.register("charge", { id: "x", payload: null }))
      yield* TestClock.adjust(0)
      yield* flushMicrotasks
      expect(seen).toEqual(["registered#0", "attempt_started#1", "attempt_settled:completed#1"])
      expect(yield* object.run(ops.getResult("charge", "x"))).toEqual({ status: "completed", result: "charged" })
      yield* TestClock.adjust(Scheduler.UPKEEP_DELAY)
      expect(object.storage.alarmAt).toBeNull()
      expect(yield* object.background.reports).toEqual([
        {
          event: "durability.lifecycle_hook.failed",
          details: {
            entityKind: "operation",
            lifecycleType: "registered",
            entityId: "x",
            error: { name: "Error", message: "hook threw" }
          }
        },
        {
          event: "durability.lifecycle_hook.failed",
          details: {
            entityKind: "operation",
            lifecycleType: "attempt_settled",
            entityId: "x",
            error: { name: "Error", message: "hook rejected" }
          }
        }
      ])
    }))
})

describe("construction", () => {
  const handler = () => Effect.void

  it.scoped("invalid options are InvalidOptionErrors with exact messages, before any write", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const cases: ReadonlyArray<
        readonly [Record<string, Operations.AnyOperationDefinition>, Operations.OperationsOptions, string, string, string]
      > = [
        [{ charge: Operations.operation({ handler }) }, { attemptTimeoutMs: 0 }, "attemptTimeoutMs", "range", "attemptTimeoutMs must be a positive integer, got 0"],
        [{ charge: Operations.operation({ handler }) }, { attemptTimeoutMs: 1.5 }, "attemptTimeoutMs", "range", "attemptTimeoutMs must be a positive integer, got 1.5"],
        [{ charge: Operations.operation({ handler }) }, { attemptTimeoutMs: Number.NaN }, "attemptTimeoutMs", "range", "attemptTimeoutMs must be a positive integer, got NaN"],
        [{ charge: Operations.operation({ handler }) }, { retries: { maxAttempts: 0 } }, "retries.maxAttempts", "range", "retries.maxAttempts must be a positive integer, got 0"],
        [{ charge: Operations.operation({ handler }) }, { retries: { maxAttempts: 2.5 } }, "retries.maxAttempts", "range", "retries.maxAttempts must be a positive integer, got 2.5"],
        [{ charge: Operations.operation({ handler }) }, { retries: { delay: 100 as unknown as () => number } }, "retries.delay", "type", "retries.delay must be a function, got 100"],
        [{ charge: Operations.operation({ handler }) }, { retries: "often" as never }, "retries", "type", "retries must be an object, got \"often\""],
        [
          { charge: Operations.operation({ handler, attemptTimeoutMs: -5 }) },
          {},
          "methods.charge.attemptTimeoutMs",
          "range",
          "methods.charge.attemptTimeoutMs must be a positive integer, got -5"
        ],
        [
          { charge: Operations.operation({ handler, retries: { maxAttempts: 0 } }) },
          {},
          "methods.charge.retries.maxAttempts",
          "range",
          "methods.charge.retries.maxAttempts must be a positive integer, got 0"
        ],
        [
          { charge: Operations.operation({ handler, retries: { delay: "soon" as unknown as () => number } }) },
          {},
          "methods.charge.retries.delay",
          "type",
          "methods.charge.retries.delay must be a function, got \"soon\""
        ],
        [
          { charge: { ...Operations.operation({ handler }), handler: "nope" as never } },
          {},
          "handlers.charge",
          "type",
          "handlers.charge must be a function"
        ]
      ]
      for (const [definitions, options, field, kind, message] of cases) {
        const error = yield* Effect.flip(object.run(Operations.make(definitions, options)))
        expect(error, message).toMatchObject({ _tag: "InvalidOptionError", field, kind, message })
      }
      expect(object.storage.statements).toEqual([])
    }))

  it.scoped("handler names that collide with Durability members are rejected", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      for (const name of ["constructor", "alarm", "purgeBefore", "__proto__"]) {
        const definitions: Record<string, Operations.AnyOperationDefinition> = {}
        Object.defineProperty(definitions, name, {
          value: Operations.operation({ handler }),
          enumerable: true,
          configurable: true,
          writable: true
        })
        expect(Object.keys(definitions)).toEqual([name])
        const error = yield* Effect.flip(object.run(Operations.make(definitions)))
        expect(error).toMatchObject({
          _tag: "InvalidOptionError",
          field: `handlers.${name}`,
          kind: "type",
          message: `"${name}" is reserved by Durability`
        })
      }
      expect(object.storage.statements).toEqual([])
    }))

  it.scoped("handler requirements are provided once to Operations.make and reach every attempt", () =>
    Effect.gen(function*() {
      class Ledger extends Context.Tag("test/Ledger")<Ledger, { readonly entries: Array<string> }>() {}
      let builds = 0
      const LedgerLive = Layer.sync(Ledger, () => (builds++, { entries: [] }))
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        book: Operations.operation({
          retries: { delay: () => 100 },
          handler: (call: Call<string>) =>
            Effect.gen(function*() {
              const ledger = yield* Ledger
              ledger.entries.push(`${call.payload}#${call.attempt}`)
              if (call.attempt === 1) return yield* fails("first attempt fails")
              return ledger.entries.length
            })
        })
      }).pipe(Effect.provide(LedgerLive)))
      yield* object.run(ops.register("book", { id: "a", payload: "rent" }))
      yield* object.run(ops.register("book", { id: "b", payload: "food" }))
      yield* TestClock.adjust(100)
      expect(builds).toBe(1)
      expect(yield* object.run(ops.getResult("book", "a"))).toEqual({ status: "completed", result: 3 })
      expect(yield* object.run(ops.getResult("book", "b"))).toEqual({ status: "completed", result: 4 })
    }))

  it.scoped("a second operations capability on one scheduler is a ParticipantConflictError", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      yield* object.run(Operations.make({ a: Operations.operation({ handler }) }))
      const error = yield* Effect.flip(object.run(Operations.make({ b: Operations.operation({ handler }) })))
      expect(error).toMatchObject({ _tag: "ParticipantConflictError", kind: "operations" })
      expect(yield* object.run(Effect.map(Scheduler.Scheduler, (scheduler) => scheduler.config.alarmConcurrency)))
        .toBe(10)
    }))
})

describe("registration to start later (runAt / delayMs)", () => {
  const make = Effect.gen(function*() {
    const object = yield* TestDurability.make()
    const ran: Array<string> = []
    const ops = yield* object.run(Operations.make({
      send: Operations.operation({
        handler: (call: Call) => Effect.map(Clock.currentTimeMillis, (now) => void ran.push(`${call.id}@${now}`))
      })
    }))
    return { object, ops, ran }
  })

  it.scoped("delayMs inside the minimum delay runs on the early timer at its time; runAt beyond it on the alarm", () =>
    Effect.gen(function*() {
      const { object, ops, ran } = yield* make
      yield* TestClock.setTime(1_000)
      yield* object.run(ops.register("send", { id: "soon", payload: null, delayMs: 4_000 }))
      yield* object.run(ops.register("send", { id: "later", payload: null, runAt: 60_000 }))
      yield* object.run(ops.register("send", { id: "date", payload: null, runAt: new Date(90_000) }))
      // Nothing starts at registration; the rows wait for their times.
      yield* TestClock.adjust(0)
      expect(ran).toEqual([])
      expect(yield* rowOf(object, "soon")).toMatchObject({ status: "pending", attempt: 0, next_attempt_at: 5_000, created_at: 1_000 })
      expect(yield* rowOf(object, "date")).toMatchObject({ next_attempt_at: 90_000 })
      expect(object.storage.alarmAt).toBe(5_000 + 11_000)
      yield* TestClock.adjust(3_999)
      expect(ran).toEqual([])
      yield* TestClock.adjust(1)
      expect(ran).toEqual(["soon@5000"])
      // The alarm follows the earliest pending call; the platform delivers it at its time.
      yield* TestClock.adjust(Scheduler.UPKEEP_DELAY)
      expect(object.storage.alarmAt).toBe(60_000)
      yield* object.fireAlarm()
      expect(ran).toEqual(["soon@5000", "later@60000"])
      expect(object.storage.alarmAt).toBe(90_000)
      yield* object.fireAlarm()
      expect(ran).toEqual(["soon@5000", "later@60000", "date@90000"])
    }))

  it.scoped("a runAt in the past starts at once; the same id again is a no-op whatever its time", () =>
    Effect.gen(function*() {
      const { object, ops, ran } = yield* make
      yield* TestClock.setTime(10_000)
      yield* object.run(ops.register("send", { id: "overdue", payload: null, runAt: 2_000 }))
      yield* TestClock.adjust(0)
      expect(ran).toEqual(["overdue@10000"])
      yield* object.run(ops.register("send", { id: "overdue", payload: null, delayMs: 1_000 }))
      yield* TestClock.adjust(60_000)
      expect(ran).toEqual(["overdue@10000"])
    }))

  it.scoped("bad runAt / delayMs are InvalidInputErrors naming the field, before any write", () =>
    Effect.gen(function*() {
      const { object, ops } = yield* make
      const before = object.storage.snapshot()
      const statements = object.storage.statements.length
      const cases: ReadonlyArray<readonly [Partial<Operations.RegisterCall<null>>, string, string]> = [
        [{ runAt: -1 }, "runAt", "runAt must be a non-negative safe integer or a Date, got -1"],
        [{ runAt: new Date(Number.NaN) }, "runAt", "runAt must be a non-negative safe integer or a Date, got an invalid Date"],
        [{ delayMs: 1.5 }, "delayMs", "delayMs must be a non-negative safe integer, got 1.5"],
        [{ delayMs: Number.MAX_SAFE_INTEGER }, "delayMs", `delayMs ${Number.MAX_SAFE_INTEGER} from now is not a safe integer timestamp`],
        [{ runAt: 5, delayMs: 5 }, "runAt", "runAt and delayMs cannot both be given"]
      ]
      yield* TestClock.setTime(1_000)
      for (const [timing, field, message] of cases) {
        const error = yield* Effect.flip(object.run(ops.register("send", { id: "x", payload: null, ...timing })))
        expect(error).toMatchObject({ _tag: "InvalidInputError", field, message })
      }
      expect(object.storage.statements).toHaveLength(statements)
      expect(object.storage.snapshot()).toEqual(before)
    }))
})

describe("cancel", () => {
  it.scoped("a waiting call fails with DurableCanceledError at once and never runs; its wait resolves", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      let calls = 0
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({ handler: () => Effect.sync(() => void calls++) })
      }, { onLifecycleEvent: hook }))
      yield* object.run(ops.register("send", { id: "later", payload: null, delayMs: 60_000 }))
      const waiter = yield* Effect.fork(object.run(ops.wait("send", "later", 600_000)))
      yield* TestClock.adjust(1_000)
      expect(yield* object.run(ops.cancel("send", "later"))).toBe(true)
      const expected = {
        status: "failed",
        attempt: 0,
        error: { name: "DurableCanceledError", message: 'Durable operation "send" (id "later") was canceled' }
      }
      expect(yield* Fiber.join(waiter)).toEqual(expected)
      expect(yield* object.run(ops.getResult("send", "later"))).toEqual(expected)
      expect(events.map(brief)).toEqual(["registered#0", "terminal#0"])
      expect(events[1]).toMatchObject({ reason: "canceled", error: expected.error })
      // Nothing is pending: the alarm goes once the engine is idle.
      yield* TestClock.adjust(Scheduler.UPKEEP_DELAY)
      expect(object.storage.alarmAt).toBeNull()
      yield* TestClock.adjust(120_000)
      expect(calls).toBe(0)
      // Settled calls, unknown ids: nothing to cancel.
      expect(yield* object.run(ops.cancel("send", "later"))).toBe(false)
      expect(yield* object.run(ops.cancel("send", "missing"))).toBe(false)
    }))

  it.scoped("a running call has its signal aborted with DurableCanceledError; its late success changes nothing, no retry", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const gate = yield* Deferred.make<void>()
      const signals: Array<AbortSignal> = []
      const ops = yield* object.run(Operations.make({
        // Ignores its signal and cannot be interrupted: it finishes when the gate opens.
        send: Operations.operation({
          retries: { maxAttempts: 5, delay: () => 1_000 },
          handler: (call: Call) =>
            Effect.uninterruptible(Effect.zipRight(Effect.sync(() => signals.push(call.signal)), Deferred.await(gate)))
        })
      }))
      yield* object.run(ops.register("send", { id: "running", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.cancel("send", "running"))).toBe(true)
      expect(signals[0]?.aborted).toBe(true)
      expect(signals[0]?.reason).toMatchObject({ _tag: "DurableCanceledError" })
      const canceled = yield* rowOf(object, "running")
      expect(canceled).toMatchObject({ status: "failed", attempt: 1, last_error_name: "DurableCanceledError" })
      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(60_000)
      expect(yield* rowOf(object, "running")).toEqual(canceled)
      expect(signals).toHaveLength(1)
    }))

  it.scoped("an id of another operation is a DuplicateDurableCallError; a bad id an InvalidInputError", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({ handler: () => Effect.void }),
        other: Operations.operation({ handler: () => Effect.void })
      }))
      yield* object.run(ops.register("other", { id: "x", payload: null, delayMs: 5_000 }))
      expect(yield* Effect.flip(object.run(ops.cancel("send", "x")))).toMatchObject({ _tag: "DuplicateDurableCallError" })
      expect(yield* Effect.flip(object.run(ops.cancel("send", "")))).toMatchObject({ _tag: "InvalidInputError", field: "id" })
      expect(yield* rowOf(object, "x")).toMatchObject({ status: "pending" })
    }))
})

describe("list", () => {
  it.scoped("pages an operation's calls in registration order, filtered by status, with a cursor", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({
          retries: { maxAttempts: 1 },
          handler: (call: Call<{ readonly ok: boolean }>) =>
            call.payload.ok ? Effect.succeed(`sent ${call.id}`) : fails(`${call.id} bounced`)
        }),
        other: Operations.operation({ handler: () => Effect.void })
      }))
      const register = (id: string, ok: boolean, delayMs?: number) =>
        object.run(ops.register("send", { id, payload: { ok }, ...(delayMs === undefined ? {} : { delayMs }) }))
      yield* register("b", true)
      yield* TestClock.adjust(10)
      yield* register("a", false)
      yield* TestClock.adjust(10)
      yield* register("c", true, 60_000)
      yield* object.run(ops.register("other", { id: "z", payload: null }))
      yield* TestClock.adjust(0)

      expect(yield* object.run(ops.list("send"))).toEqual({
        items: [
          { id: "b", createdAt: 0, status: "completed", result: "sent b" },
          { id: "a", createdAt: 10, status: "failed", attempt: 1, error: { name: "Error", message: "a bounced" } },
          { id: "c", createdAt: 20, status: "pending", attempt: 0, nextAttemptAt: 60_020, lastError: null, error: null }
        ]
      })
      const first = yield* object.run(ops.list("send", { limit: 2 }))
      expect(first.items.map((item) => item.id)).toEqual(["b", "a"])
      expect(first.cursor).toBeDefined()
      const second = yield* object.run(ops.list("send", { limit: 2, cursor: first.cursor }))
      expect(second).toEqual({ items: [expect.objectContaining({ id: "c" })] })
      expect((yield* object.run(ops.list("send", { status: "pending" }))).items.map((item) => item.id)).toEqual(["c"])
      expect((yield* object.run(ops.list("send", { status: ["completed", "failed"] }))).items.map((item) => item.id))
        .toEqual(["b", "a"])
    }))

  it.scoped("bad options are InvalidInputErrors naming the field", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({ send: Operations.operation({ handler: () => Effect.void }) }))
      const cases: ReadonlyArray<readonly [Operations.ListOptions, string, string]> = [
        [{ limit: 0 }, "limit", "limit must be an integer from 1 to 1000, got 0"],
        [{ limit: 1_001 }, "limit", "limit must be an integer from 1 to 1000, got 1001"],
        [{ status: "done" as never }, "status", 'status must be one of pending, completed, failed, got "done"'],
        [{ status: [] }, "status", "status must be one of pending, completed, failed or a non-empty array of them"],
        [{ cursor: "nope" }, "cursor", 'cursor must be a cursor returned by list, got "nope"']
      ]
      for (const [options, field, message] of cases) {
        expect(yield* Effect.flip(object.run(ops.list("send", options)))).toMatchObject({
          _tag: "InvalidInputError",
          field,
          message
        })
      }
    }))
})

describe("observability by default", () => {
  it.scoped("a failure for good and each timeout are logged once through Effect's Logger, with no hook; retries are not", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({
          attemptTimeoutMs: 1_000,
          retries: { maxAttempts: 3, delay: () => 500 },
          handler: (call: Call<{ readonly mode: "fail" | "hang" | "flaky" }>) =>
            call.payload.mode === "fail"
              ? Effect.fail(new NonRetryableError({ message: "card declined" }))
              : call.payload.mode === "hang" && call.attempt === 1
              ? Effect.never
              : call.payload.mode === "flaky" && call.attempt < 3
              ? fails("try again")
              : Effect.succeed("ok")
        })
      }))
      yield* object.run(ops.register("send", { id: "declined", payload: { mode: "fail" } }))
      yield* object.run(ops.register("send", { id: "slow", payload: { mode: "hang" } }))
      yield* object.run(ops.register("send", { id: "flaky", payload: { mode: "flaky" } }))
      yield* TestClock.adjust(5_000)
      expect(yield* object.run(ops.getResult("send", "slow"))).toEqual({ status: "completed", result: "ok" })
      expect(yield* object.run(ops.getResult("send", "flaky"))).toEqual({ status: "completed", result: "ok" })
      const logs = yield* object.logs
      expect(logs).toEqual([
        expect.objectContaining({
          level: "ERROR",
          event: "durability.attempt.failed",
          message: 'Durable operation "send" (id "declined") failed for good on attempt 1: NonRetryableError: card declined',
          entityKind: "operation",
          operation: "send",
          id: "declined",
          attempt: 1,
          error: { name: "NonRetryableError", message: "card declined" }
        }),
        expect.objectContaining({
          level: "WARN",
          event: "durability.attempt.timed_out",
          message: 'Durable operation "send" (id "slow"): attempt 1 timed out after 1000ms',
          id: "slow",
          attempt: 1,
          timeoutMs: 1_000
        })
      ])
    }))
})
