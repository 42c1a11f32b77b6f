/**
 * Fencing: two executions of one key race; exactly one may settle it, and the
 * stale one's completion, failure or retry is refused (the row, the alarm and
 * the lifecycle events stay as the current execution left them).
 *
 * Races, for operations and named alarms, each with every stale outcome
 * (complete / retryable failure / terminal failure) × every current outcome ×
 * both settle orders:
 * - one instance: the eager start (or the early timer) and a platform alarm
 *   pass for one key: the per-key lock makes the pass attach, one handler call;
 * - one instance: an old generation still running (it ignores its abort) and its
 *   replacement (purge + re-register, or a re-scheduled name);
 * - two instances over one storage (a zombie: the old instance's handler keeps
 *   running after a new instance took over, so no in-memory lock helps):
 *   eager attempt 1 vs. the new instance's alarm attempt 2 (same generation),
 *   and old generation attempt 1 vs. the replacement's attempt 1 (same attempt
 *   number: only the generation fences it).
 *
 * Everything runs on TestClock over in-memory SQLite.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, TestClock } from "effect"
import { NonRetryableError } from "../../src/shared/Errors.js"
import type * as Lifecycle from "../../src/engine/Lifecycle.js"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Operations from "../../src/operations/Operations.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

type Outcome = "complete" | "fail" | "fail-terminal"
const OUTCOMES: ReadonlyArray<Outcome> = ["complete", "fail", "fail-terminal"]
const ORDERS = ["stale first", "current first"] as const

const RETRY_MS = 5_000
const MAX_ATTEMPTS = 5

interface Started {
  readonly who: string
  readonly key: string
  readonly attempt: number
  /** The generation (named alarms: from the idempotency key; operations: read from the row at start). */
  readonly generation: string
  readonly outcome: Deferred.Deferred<Outcome>
}

interface Recorded {
  readonly who: string
  readonly event: Lifecycle.LifecycleEvent
}

/** Handlers that wait for the test to decide their outcome, and ignore interruption (an abort-ignoring zombie). */
const harness = () => {
  const started: Array<Started> = []
  const events: Array<Recorded> = []
  const run = (who: string, key: string, attempt: number, generation: string) =>
    Effect.gen(function*() {
      const outcome = yield* Deferred.make<Outcome>()
      started.push({ who, key, attempt, generation, outcome })
      const decided = yield* Deferred.await(outcome)
      if (decided === "complete") return `${who}#${attempt}`
      if (decided === "fail") return yield* Effect.fail(new Error(`${who}#${attempt} failed`))
      return yield* new NonRetryableError({ message: `${who}#${attempt} failed for good` })
    }).pipe(Effect.uninterruptible)
  const record = (who: string): Lifecycle.LifecycleHook => (event) => void events.push({ who, event })
  const settles = () =>
    events.filter(({ event }) =>
      event.type === "terminal" || event.type === "attempt_settled"
    )
  const release = (index: number, outcome: Outcome) =>
    Effect.zipRight(Deferred.succeed(started[index]!.outcome, outcome), TestClock.adjust(0))
  return { started, events, run, record, settles, release }
}

type Harness = ReturnType<typeof harness>

const operationsOf = (object: TestDurability.TestObject, h: Harness, who: string) =>
  object.run(Operations.make({
    send: Operations.operation({
      retries: { maxAttempts: MAX_ATTEMPTS, delay: () => RETRY_MS },
      handler: (call: Operations.DurableCall<null>) =>
        Effect.suspend(() =>
          h.run(who, call.id, call.attempt, String(rowOf(object.storage, "durability_calls", "id", call.id)?.generation_id))
        )
    })
  }, { onLifecycleEvent: h.record(who) }))

const alarmsOf = (object: TestDurability.TestObject, h: Harness, who: string) =>
  object.run(NamedAlarms.make({
    renew: NamedAlarms.alarm({
      retries: { maxAttempts: MAX_ATTEMPTS, delay: () => RETRY_MS },
      handler: (info) =>
        h.run(who, info.name, info.attempt, info.idempotencyKey.slice(NamedAlarms.IDEMPOTENCY_PREFIX.length))
    })
  }, { onLifecycleEvent: h.record(who) }))

/**
 * The old instance's view of the storage once the new one took over: like a
 * reset instance, it starts nothing new (its due scans find nothing), but the
 * handler it already runs may still try to settle: that is what fencing must refuse.
 */
const zombieView = (inner: MemoryStorage.MemoryStorage) => {
  let frozen = false
  const storage = MemoryStorage.intercept(inner, {
    exec: (query, bindings) =>
      frozen && query.includes("ORDER BY next_attempt_at LIMIT")
        ? { toArray: () => [] }
        : inner.sql.exec(query, ...bindings)
  })
  return { storage, freeze: () => void (frozen = true) }
}

const rowOf = (storage: MemoryStorage.MemoryStorage, table: string, column: string, key: string) =>
  storage.sql.exec(`SELECT * FROM ${table} WHERE ${column} = ?`, key).toArray()[0]

const opRow = (storage: MemoryStorage.MemoryStorage) => rowOf(storage, "durability_calls", "id", "x")
const alarmRow = (storage: MemoryStorage.MemoryStorage) => rowOf(storage, "durability_alarms", "name", "renew")

/** What the operation row must be after the current execution (`who`, `attempt`, `generation`) settled with `outcome`. */
const expectOperationSettled = (
  storage: MemoryStorage.MemoryStorage,
  current: Started,
  outcome: Outcome,
  settledAt: number,
  label: string
) => {
  const row = opRow(storage)
  const common = { generation_id: current.generation, attempt: current.attempt }
  if (outcome === "complete") {
    expect(row, label).toMatchObject({
      ...common,
      status: "completed",
      result: JSON.stringify({ kind: "value", value: `${current.who}#${current.attempt}` }),
      last_error: null
    })
  } else if (outcome === "fail") {
    expect(row, label).toMatchObject({
      ...common,
      status: "pending",
      next_attempt_at: settledAt + RETRY_MS,
      last_error: `${current.who}#${current.attempt} failed`
    })
  } else {
    expect(row, label).toMatchObject({
      ...common,
      status: "failed",
      last_error_name: "NonRetryableError",
      last_error: `${current.who}#${current.attempt} failed for good`
    })
  }
}

const expectAlarmSettled = (
  storage: MemoryStorage.MemoryStorage,
  current: Started,
  outcome: Outcome,
  settledAt: number,
  label: string
) => {
  const row = alarmRow(storage)
  if (outcome === "complete") return expect(row, label).toBeUndefined()
  const common = { generation_id: current.generation, attempt: current.attempt }
  if (outcome === "fail") {
    expect(row, label).toMatchObject({ ...common, status: "pending", next_attempt_at: settledAt + RETRY_MS })
  } else {
    expect(row, label).toMatchObject({ ...common, status: "failed", last_error_name: "NonRetryableError" })
  }
}

/** The settle events: exactly one, by the current execution, with its outcome. */
const expectOneSettle = (h: Harness, current: Started, outcome: Outcome, label: string) => {
  const settles = h.settles()
  expect(settles.map(({ event, who }) => [who, event.type, "attempt" in event ? event.attempt : null]), label).toEqual([
    [current.who, "attempt_settled", current.attempt]
  ])
  const event = settles[0]!.event
  expect(event, label).toMatchObject({
    generation: current.generation,
    outcome: outcome === "complete" ? "completed" : outcome === "fail" ? "retry_scheduled" : "failed"
  })
}

/**
 * Settles the stale and the current execution in `order`, checking after the
 * stale one's settle that nothing changed, and at the end that only the
 * current one settled.
 */
const race = (options: {
  readonly h: Harness
  readonly storage: MemoryStorage.MemoryStorage
  readonly row: () => unknown
  readonly stale: number
  readonly current: number
  readonly staleOutcome: Outcome
  readonly currentOutcome: Outcome
  readonly order: typeof ORDERS[number]
  readonly expectSettled: typeof expectOperationSettled
  readonly label: string
  /** Across instances the zombie's engine reconciles from its own stale view of the alarm. */
  readonly checkAlarm: boolean
}) =>
  Effect.gen(function*() {
    const { h, label, storage } = options
    const current = h.started[options.current]!
    const settleStale = Effect.gen(function*() {
      const before = options.row()
      const alarm = storage.alarmAt
      yield* h.release(options.stale, options.staleOutcome)
      expect(options.row(), `${label}: the stale settle changed the row`).toEqual(before)
      if (options.checkAlarm) expect(storage.alarmAt, `${label}: the stale settle moved the alarm`).toBe(alarm)
    })
    let settledAt = 0
    if (options.order === "stale first") yield* settleStale
    settledAt = yield* TestClock.currentTimeMillis
    yield* h.release(options.current, options.currentOutcome)
    options.expectSettled(storage, current, options.currentOutcome, settledAt, label)
    if (options.order === "current first") yield* settleStale
    options.expectSettled(storage, current, options.currentOutcome, settledAt, label)
    expectOneSettle(h, current, options.currentOutcome, label)
  })

describe("fencing within one instance", () => {
  it.scoped("operations: an eager start and a platform alarm pass for one id run one handler and settle once", () =>
    Effect.gen(function*() {
      for (const outcome of OUTCOMES) {
        const object = yield* TestDurability.make({ alarms: "manual" })
        const h = harness()
        const ops = yield* operationsOf(object, h, "A")
        yield* object.run(ops.register("send", { id: "x", payload: null }))
        yield* TestClock.adjust(0)
        yield* TestClock.setTime(15_000)
        const pass = yield* Effect.fork(object.fireAlarm())
        yield* TestClock.adjust(0)
        expect(h.started.map((s) => [s.who, s.attempt]), outcome).toEqual([["A", 1]])
        expect(pass.unsafePoll(), outcome).toBeNull()
        yield* h.release(0, outcome)
        expect(yield* Fiber.join(pass)).toBe(true)
        expect(h.started, outcome).toHaveLength(1)
        expectOperationSettled(object.storage, h.started[0]!, outcome, 15_000, outcome)
        expectOneSettle(h, h.started[0]!, outcome, outcome)
        yield* object.evict
        yield* TestClock.setTime(0)
      }
    }))

  it.scoped("named alarms: the early timer and a platform alarm pass for one name run one handler and settle once", () =>
    Effect.gen(function*() {
      for (const outcome of OUTCOMES) {
        const object = yield* TestDurability.make({ alarms: "manual" })
        const h = harness()
        const alarms = yield* alarmsOf(object, h, "A")
        yield* object.run(alarms.schedule("renew", 1_000))
        yield* TestClock.adjust(1_000)
        expect(h.started.map((s) => [s.who, s.attempt]), outcome).toEqual([["A", 1]])
        yield* TestClock.setTime(15_000)
        const pass = yield* Effect.fork(object.fireAlarm())
        yield* TestClock.adjust(0)
        expect(h.started, outcome).toHaveLength(1)
        const settledAt = yield* TestClock.currentTimeMillis
        yield* h.release(0, outcome)
        expect(yield* Fiber.join(pass)).toBe(true)
        expect(h.started, outcome).toHaveLength(1)
        expectAlarmSettled(object.storage, h.started[0]!, outcome, settledAt, outcome)
        expectOneSettle(h, h.started[0]!, outcome, outcome)
        yield* object.evict
        yield* TestClock.setTime(0)
      }
    }))

  it.scoped("operations: the purged generation's late settle is refused; its replacement settles", () =>
    Effect.gen(function*() {
      for (const staleOutcome of OUTCOMES) {
        for (const currentOutcome of OUTCOMES) {
          const label = `stale ${staleOutcome}, current ${currentOutcome}`
          const object = yield* TestDurability.make()
          const h = harness()
          const ops = yield* operationsOf(object, h, "A")
          yield* object.run(ops.register("send", { id: "x", payload: null }))
          yield* TestClock.adjust(1)
          expect(yield* object.run(ops.purgeBefore(1)), label).toBe(1)
          yield* object.run(ops.register("send", { id: "x", payload: null }))
          yield* TestClock.adjust(0)
          // The old handler ignores its abort, but the purge freed the id: the replacement runs at once.
          const replacement = String(opRow(object.storage)?.generation_id)
          expect(replacement, label).not.toBe(h.started[0]!.generation)
          expect(h.started.map((s) => [s.who, s.attempt, s.generation]), label).toEqual([
            ["A", 1, h.started[0]!.generation],
            ["A", 1, replacement]
          ])
          const before = opRow(object.storage)
          yield* h.release(0, staleOutcome)
          // Refused: the replacement's row is untouched by the stale settle.
          expect(opRow(object.storage), label).toEqual(before)
          const settledAt = yield* TestClock.currentTimeMillis
          yield* h.release(1, currentOutcome)
          expectOperationSettled(object.storage, h.started[1]!, currentOutcome, settledAt, label)
          expectOneSettle(h, h.started[1]!, currentOutcome, label)
          yield* object.evict
          yield* TestClock.setTime(0)
        }
      }
    }))

  it.scoped("named alarms: the replaced occurrence's late settle is refused; the replacement runs with its own key", () =>
    Effect.gen(function*() {
      for (const staleOutcome of OUTCOMES) {
        for (const currentOutcome of OUTCOMES) {
          const label = `stale ${staleOutcome}, current ${currentOutcome}`
          const object = yield* TestDurability.make()
          const h = harness()
          const alarms = yield* alarmsOf(object, h, "A")
          yield* object.run(alarms.schedule("renew", 0))
          yield* TestClock.adjust(0)
          expect(h.started.map((s) => [s.who, s.attempt]), label).toEqual([["A", 1]])
          yield* object.run(alarms.schedule("renew", 0))
          const replacement = String(alarmRow(object.storage)?.generation_id)
          expect(replacement, label).not.toBe(h.started[0]!.generation)
          const before = alarmRow(object.storage)
          yield* h.release(0, staleOutcome)
          expect({ ...alarmRow(object.storage), attempt: 0 }, label).toEqual({ ...before, attempt: 0 })
          expect(h.started.map((s) => [s.attempt, s.generation]), label).toEqual([
            [1, h.started[0]!.generation],
            [1, replacement]
          ])
          const settledAt = yield* TestClock.currentTimeMillis
          yield* h.release(1, currentOutcome)
          expectAlarmSettled(object.storage, h.started[1]!, currentOutcome, settledAt, label)
          expectOneSettle(h, h.started[1]!, currentOutcome, label)
          yield* object.evict
          yield* TestClock.setTime(0)
        }
      }
    }))
})

describe("fencing across instances (a zombie handler of an old instance)", () => {
  it.scoped("operations: the old instance's eager attempt 1 vs. the new instance's alarm attempt 2", () =>
    Effect.gen(function*() {
      for (const staleOutcome of OUTCOMES) {
        for (const currentOutcome of OUTCOMES) {
          for (const order of ORDERS) {
            const label = `stale ${staleOutcome}, current ${currentOutcome}, ${order}`
            const storage = yield* MemoryStorage.make
            const zombie = zombieView(storage)
            const h = harness()
            const a = yield* TestDurability.make({ alarms: "manual", storage: zombie.storage })
            const opsA = yield* operationsOf(a, h, "A")
            yield* a.run(opsA.register("send", { id: "x", payload: null }))
            yield* TestClock.adjust(0)
            // A new instance over the same storage; A's handler keeps running, unseen by B.
            zombie.freeze()
            const b = yield* TestDurability.make({ alarms: "manual", storage })
            yield* operationsOf(b, h, "B")
            yield* TestClock.setTime(15_000)
            const pass = yield* Effect.fork(b.fireAlarm())
            yield* TestClock.adjust(0)
            expect(h.started.map((s) => [s.who, s.attempt]), label).toEqual([["A", 1], ["B", 2]])
            expect(h.started[1]!.generation, label).toBe(h.started[0]!.generation)
            yield* race({
              h,
              storage,
              row: () => opRow(storage),
              stale: 0,
              current: 1,
              staleOutcome,
              currentOutcome,
              order,
              expectSettled: expectOperationSettled,
              label,
              checkAlarm: false
            })
            yield* Fiber.join(pass)
            yield* a.evict
            yield* b.evict
            yield* TestClock.setTime(0)
          }
        }
      }
    }))

  it.scoped("operations: the purged generation's attempt 1 vs. the replacement's attempt 1 (only the generation differs)", () =>
    Effect.gen(function*() {
      for (const staleOutcome of OUTCOMES) {
        for (const currentOutcome of OUTCOMES) {
          for (const order of ORDERS) {
            const label = `stale ${staleOutcome}, current ${currentOutcome}, ${order}`
            const storage = yield* MemoryStorage.make
            const zombie = zombieView(storage)
            const h = harness()
            const a = yield* TestDurability.make({ storage: zombie.storage })
            const opsA = yield* operationsOf(a, h, "A")
            yield* a.run(opsA.register("send", { id: "x", payload: null }))
            yield* TestClock.adjust(1)
            zombie.freeze()
            const b = yield* TestDurability.make({ storage })
            const opsB = yield* operationsOf(b, h, "B")
            expect(yield* b.run(opsB.purgeBefore(1)), label).toBe(1)
            yield* b.run(opsB.register("send", { id: "x", payload: null }))
            yield* TestClock.adjust(0)
            expect(h.started.map((s) => [s.who, s.attempt]), label).toEqual([["A", 1], ["B", 1]])
            expect(h.started[1]!.generation, label).not.toBe(h.started[0]!.generation)
            yield* race({
              h,
              storage,
              row: () => opRow(storage),
              stale: 0,
              current: 1,
              staleOutcome,
              currentOutcome,
              order,
              expectSettled: expectOperationSettled,
              label,
              checkAlarm: false
            })
            yield* a.evict
            yield* b.evict
            yield* TestClock.setTime(0)
          }
        }
      }
    }))

  it.scoped("named alarms: the replaced occurrence's attempt 1 vs. the replacement's attempt 1 in a new instance", () =>
    Effect.gen(function*() {
      for (const staleOutcome of OUTCOMES) {
        for (const currentOutcome of OUTCOMES) {
          for (const order of ORDERS) {
            const label = `stale ${staleOutcome}, current ${currentOutcome}, ${order}`
            const storage = yield* MemoryStorage.make
            const zombie = zombieView(storage)
            const h = harness()
            const a = yield* TestDurability.make({ alarms: "manual", storage: zombie.storage })
            const alarmsA = yield* alarmsOf(a, h, "A")
            yield* a.run(alarmsA.schedule("renew", 0))
            yield* TestClock.adjust(0)
            zombie.freeze()
            const b = yield* TestDurability.make({ alarms: "manual", storage })
            const alarmsB = yield* alarmsOf(b, h, "B")
            yield* b.run(alarmsB.schedule("renew", 0))
            expect(storage.alarmAt, label).toBe(15_000)
            yield* TestClock.setTime(15_000)
            const pass = yield* Effect.fork(b.fireAlarm())
            yield* TestClock.adjust(0)
            expect(h.started.map((s) => [s.who, s.attempt]), label).toEqual([["A", 1], ["B", 1]])
            expect(h.started[1]!.generation, label).not.toBe(h.started[0]!.generation)
            yield* race({
              h,
              storage,
              row: () => alarmRow(storage),
              stale: 0,
              current: 1,
              staleOutcome,
              currentOutcome,
              order,
              expectSettled: expectAlarmSettled,
              label,
              checkAlarm: false
            })
            yield* Fiber.join(pass)
            yield* a.evict
            yield* b.evict
            yield* TestClock.setTime(0)
          }
        }
      }
    }))

  it.scoped("the stale execution's retry is refused even when it runs after the current one scheduled its own", () =>
    Effect.gen(function*() {
      // Attempt 2 (current) fails and schedules its retry; the zombie's attempt 1 then fails too:
      // its retry time must not replace the current one's.
      const storage = yield* MemoryStorage.make
      const zombie = zombieView(storage)
      const h = harness()
      const a = yield* TestDurability.make({ alarms: "manual", storage: zombie.storage })
      const opsA = yield* operationsOf(a, h, "A")
      yield* a.run(opsA.register("send", { id: "x", payload: null }))
      yield* TestClock.adjust(0)
      zombie.freeze()
      const b = yield* TestDurability.make({ alarms: "manual", storage })
      yield* operationsOf(b, h, "B")
      yield* TestClock.setTime(15_000)
      const pass = yield* Effect.fork(b.fireAlarm())
      yield* TestClock.adjust(0)
      yield* h.release(1, "fail")
      const scheduled = opRow(storage)
      expect(scheduled).toMatchObject({ status: "pending", attempt: 2, next_attempt_at: 15_000 + RETRY_MS })
      yield* TestClock.adjust(1_000)
      yield* h.release(0, "fail")
      expect(opRow(storage)).toEqual(scheduled)
      expect(h.settles().map(({ who }) => who)).toEqual(["B"])
      yield* Fiber.join(pass)
    }))
})
