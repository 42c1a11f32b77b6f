import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer, Option, Random, TestClock } from "effect"
import { DurableAlarmTimeoutError, NonRetryableError } from "../../src/shared/Errors.js"
import type * as Lifecycle from "../../src/engine/Lifecycle.js"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

type TestObject = TestDurability.TestObject

/** The stored row of a name (read straight from the in-memory SQLite). */
const rowOf = (object: TestObject, name: string) =>
  object.storage.sql.exec("SELECT * FROM durability_alarms WHERE name = ?", name).toArray()[0]

const keyOf = (object: TestObject, name: string) =>
  `${NamedAlarms.IDEMPOTENCY_PREFIX}${String(rowOf(object, name)?.generation_id)}`

/** An alarm pass as the platform would start it, without moving the clock (for a second, concurrent pass). */
const pass = (object: TestObject) => object.run(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm()))

const boom = () => Effect.fail(new Error("boom"))

const recorder = () => {
  const events: Array<Lifecycle.LifecycleEvent> = []
  return { events, hook: (event: Lifecycle.LifecycleEvent) => void events.push(event) }
}

describe("NamedAlarms smoke", () => {
  it.scoped("schedules, fires at the time, deletes the occurrence", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<NamedAlarms.DurableAlarmInfo> = []
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: (info) => Effect.sync(() => seen.push(info)) })
      }))
      yield* object.run(alarms.schedule("renew", 60_000))
      expect(object.storage.alarmAt).toBe(60_000)
      yield* object.fireAlarm()
      expect(seen).toHaveLength(1)
      expect(seen[0]).toMatchObject({ name: "renew", scheduledTime: 60_000, attempt: 1, isRetry: false, retryCount: 0 })
      expect(seen[0]?.idempotencyKey).toMatch(/^durability-alarm:v1:/)
      expect(object.storage.alarmAt).toBeNull()
      yield* TestClock.adjust(0)
    }))
})

describe("NamedAlarms.layer", () => {
  it.scoped("builds the capability as a service under an application's tag", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const fired: Array<string> = []
      const definitions = { renew: NamedAlarms.alarm({ handler: (info) => Effect.sync(() => fired.push(info.name)) }) }
      const Reminders = NamedAlarms.tag<typeof definitions>("app/Reminders")
      const layer = NamedAlarms.layer(Reminders, definitions)
      const context = yield* object.run(Layer.build(layer))
      const alarms = yield* Effect.provide(Reminders, context)
      yield* object.run(alarms.schedule("renew", 60_000))
      expect(object.storage.alarmAt).toBe(60_000)
      yield* TestClock.adjust(60_000)
      expect(fired).toEqual(["renew"])
      expect(rowOf(object, "renew")).toBeUndefined()
    }))
})

describe("handler info", () => {
  it.scoped("is the exact info object; platform is the alarm's info, or undefined from the early timer", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ alarms: "manual" })
      const seen: Array<NamedAlarms.DurableAlarmInfo> = []
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: (info) => Effect.sync(() => seen.push(info)) })
      }))
      yield* object.run(alarms.schedule("renew", 60_000))
      const first = keyOf(object, "renew")
      yield* object.fireAlarm({ isRetry: true, retryCount: 3 })
      expect(seen).toStrictEqual([{
        name: "renew",
        payload: undefined,
        scheduledTime: 60_000,
        attempt: 1,
        isRetry: false,
        retryCount: 0,
        idempotencyKey: first,
        signal: expect.any(AbortSignal),
        platform: { isRetry: true, retryCount: 3 }
      }])
      expect(first).toMatch(/^durability-alarm:v1:[0-9a-f-]{36}$/)
      expect(seen[0]?.signal.aborted).toBe(false)
      expect(rowOf(object, "renew")).toBeUndefined()

      // Due inside the min-delay window: the in-memory timer runs it, with no platform info.
      yield* object.run(alarms.schedule("renew", 65_000))
      const second = keyOf(object, "renew")
      expect(second).not.toBe(first)
      yield* TestClock.adjust(4_999)
      expect(seen).toHaveLength(1)
      yield* TestClock.adjust(1)
      expect(seen[1]).toStrictEqual({
        name: "renew",
        payload: undefined,
        scheduledTime: 65_000,
        attempt: 1,
        isRetry: false,
        retryCount: 0,
        idempotencyKey: second,
        signal: expect.any(AbortSignal),
        platform: undefined
      })
      expect(rowOf(object, "renew")).toBeUndefined()
      expect(object.storage.alarmAt).toBeNull()
    }))
})

describe("due passes", () => {
  it.scoped("runs the due names and keeps the next one scheduled", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ran: Array<string> = []
      const handler = (info: NamedAlarms.DurableAlarmInfo) =>
        Effect.map(Clock.currentTimeMillis, (now) => ran.push(`${info.name}@${now}`))
      const alarms = yield* object.run(NamedAlarms.make({
        a: NamedAlarms.alarm({ handler }),
        b: NamedAlarms.alarm({ handler }),
        c: NamedAlarms.alarm({ handler })
      }))
      yield* object.run(alarms.schedule("c", 90_000))
      yield* object.run(alarms.schedule("a", 20_000))
      yield* object.run(alarms.schedule("b", 20_000))
      expect(object.storage.alarmAt).toBe(20_000)

      yield* object.fireAlarm()
      expect([...ran].sort()).toEqual(["a@20000", "b@20000"])
      expect(rowOf(object, "a")).toBeUndefined()
      expect(rowOf(object, "b")).toBeUndefined()
      expect(rowOf(object, "c")).toMatchObject({ status: "pending", attempt: 0, next_attempt_at: 90_000 })
      expect(object.storage.alarmAt).toBe(90_000)

      yield* object.fireAlarm()
      expect(ran).toHaveLength(3)
      expect(ran[2]).toBe("c@90000")
      expect(rowOf(object, "c")).toBeUndefined()
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("scheduling moves the physical alarm earlier for newly earlier work, never later", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const handler = () => Effect.void
      const alarms = yield* object.run(NamedAlarms.make({
        a: NamedAlarms.alarm({ handler }),
        b: NamedAlarms.alarm({ handler }),
        c: NamedAlarms.alarm({ handler })
      }))
      yield* object.run(alarms.schedule("a", 100_000))
      expect(object.storage.alarmAt).toBe(100_000)
      // Replacing a name with an earlier occurrence moves the alarm too.
      yield* object.run(alarms.schedule("a", 50_000))
      expect(object.storage.alarmAt).toBe(50_000)
      yield* object.run(alarms.schedule("b", 30_000))
      expect(object.storage.alarmAt).toBe(30_000)
      yield* object.run(alarms.schedule("c", 200_000))
      expect(object.storage.alarmAt).toBe(30_000)
      // Earlier than the minimum delay: the alarm goes to now + 15 s, never sooner.
      yield* object.run(alarms.schedule("c", 1_000))
      expect(object.storage.alarmAt).toBe(15_000)
    }))
})

describe("retries", () => {
  it.scoped("keeps the idempotency key stable across the retries of one occurrence", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<NamedAlarms.DurableAlarmInfo> = []
      const alarms = yield* object.run(NamedAlarms.make({
        sync: NamedAlarms.alarm({
          retries: { delay: () => 1_000 },
          handler: (info) =>
            Effect.suspend(() => {
              seen.push(info)
              return info.attempt < 3 ? boom() : Effect.void
            })
        })
      }))
      yield* object.run(alarms.schedule("sync", 20_000))
      const key = keyOf(object, "sync")
      yield* object.fireAlarm()
      expect(rowOf(object, "sync")).toMatchObject({
        status: "pending",
        attempt: 1,
        next_attempt_at: 21_000,
        last_error: "boom",
        last_error_name: "Error"
      })
      yield* TestClock.adjust(1_000)
      yield* TestClock.adjust(1_000)
      expect(seen.map(({ attempt, idempotencyKey, isRetry, retryCount, scheduledTime }) => ({
        attempt,
        idempotencyKey,
        isRetry,
        retryCount,
        scheduledTime
      }))).toEqual([
        { attempt: 1, idempotencyKey: key, isRetry: false, retryCount: 0, scheduledTime: 20_000 },
        { attempt: 2, idempotencyKey: key, isRetry: true, retryCount: 1, scheduledTime: 20_000 },
        { attempt: 3, idempotencyKey: key, isRetry: true, retryCount: 2, scheduledTime: 20_000 }
      ])
      expect(rowOf(object, "sync")).toBeUndefined()
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("uses the jittered default backoff (Random 0.5 → +750 ms, then +1500 ms)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      const alarms = yield* object.run(NamedAlarms.make({
        flaky: NamedAlarms.alarm({ handler: () => Effect.zipRight(Effect.sync(() => calls++), boom()) })
      }))
      yield* object.run(alarms.schedule("flaky", 20_000))
      yield* object.fireAlarm()
      expect(rowOf(object, "flaky")).toMatchObject({ status: "pending", attempt: 1, next_attempt_at: 20_750 })
      expect(object.storage.alarmAt).toBe(35_000)
      yield* TestClock.adjust(749)
      expect(calls).toBe(1)
      yield* TestClock.adjust(1)
      expect(calls).toBe(2)
      expect(rowOf(object, "flaky")).toMatchObject({ status: "pending", attempt: 2, next_attempt_at: 22_250 })
    }).pipe(Effect.withRandom(Random.fixed([0.5]))))

  it.scoped("a non-retryable failure is terminal: row failed at attempt 1, alarm cleared", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      const alarms = yield* object.run(NamedAlarms.make({
        bad: NamedAlarms.alarm({
          handler: () => Effect.zipRight(Effect.sync(() => calls++), new NonRetryableError({ message: "bad data" }))
        })
      }))
      yield* object.run(alarms.schedule("bad", 20_000))
      yield* object.fireAlarm()
      yield* TestClock.adjust(60_000)
      expect(calls).toBe(1)
      expect(rowOf(object, "bad")).toMatchObject({
        status: "failed",
        attempt: 1,
        last_error: "bad data",
        last_error_name: "NonRetryableError"
      })
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("stops after the configured attempts", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      const alarms = yield* object.run(NamedAlarms.make({
        flaky: NamedAlarms.alarm({
          retries: { maxAttempts: 3, delay: () => 10 },
          handler: () => Effect.zipRight(Effect.sync(() => calls++), boom())
        })
      }))
      yield* object.run(alarms.schedule("flaky", 20_000))
      yield* object.fireAlarm()
      yield* TestClock.adjust(10)
      yield* TestClock.adjust(10)
      yield* TestClock.adjust(60_000)
      expect(calls).toBe(3)
      expect(rowOf(object, "flaky")).toMatchObject({
        status: "failed",
        attempt: 3,
        last_error: "boom",
        last_error_name: "Error"
      })
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("a negative fractional retry delay is a terminal DurableRetryPolicyError", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      const alarms = yield* object.run(NamedAlarms.make({
        flaky: NamedAlarms.alarm({
          retries: { delay: () => -0.1 },
          handler: () => Effect.zipRight(Effect.sync(() => calls++), boom())
        })
      }))
      yield* object.run(alarms.schedule("flaky", 20_000))
      yield* object.fireAlarm()
      yield* TestClock.adjust(60_000)
      expect(calls).toBe(1)
      expect(rowOf(object, "flaky")).toMatchObject({
        status: "failed",
        attempt: 1,
        last_error_name: "DurableRetryPolicyError"
      })
      expect(String(rowOf(object, "flaky")?.last_error)).toContain("-0.1")
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("never claims an exhausted named alarm: failed as exhausted, handler not called", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      const events: Array<Lifecycle.LifecycleEvent> = []
      const alarms = yield* object.run(NamedAlarms.make({
        worn: NamedAlarms.alarm({ retries: { maxAttempts: 2 }, handler: () => Effect.sync(() => calls++) })
      }, { onLifecycleEvent: (event) => void events.push(event) }))
      yield* object.run(alarms.schedule("worn", 20_000))
      object.storage.sql.exec("UPDATE durability_alarms SET attempt = 2 WHERE name = 'worn'")
      yield* object.fireAlarm()
      expect(calls).toBe(0)
      expect(rowOf(object, "worn")).toMatchObject({
        status: "failed",
        attempt: 2,
        last_error: "Durable named alarm \"worn\" exhausted its 2 attempts",
        last_error_name: "DurableAttemptsExhaustedError"
      })
      expect(events.map((event) => event.type)).toEqual(["scheduled", "terminal"])
      expect(events[1]).toMatchObject({ reason: "attempts_exhausted", alarm: "worn", attempt: 2 })
      expect(object.storage.alarmAt).toBeNull()
    }))
})

describe("timeouts", () => {
  it.scoped("a timed-out attempt is terminal by default, with a DurableAlarmTimeoutError", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      let signal: AbortSignal | undefined
      const alarms = yield* object.run(NamedAlarms.make({
        slow: NamedAlarms.alarm({
          attemptTimeoutMs: 1_000,
          handler: (info) => Effect.zipRight(Effect.sync(() => (calls++, signal = info.signal)), Effect.never)
        })
      }))
      yield* object.run(alarms.schedule("slow", 20_000))
      yield* TestClock.setTime(20_000)
      const fired = yield* Effect.fork(object.fireAlarm())
      yield* TestClock.adjust(999)
      expect(signal?.aborted).toBe(false)
      yield* TestClock.adjust(1)
      yield* Fiber.join(fired)
      const message = "Durable alarm \"slow\" timed out after 1000ms"
      expect(signal?.aborted).toBe(true)
      expect(signal?.reason).toBeInstanceOf(DurableAlarmTimeoutError)
      expect(signal?.reason).toMatchObject({ message, timeoutMs: 1_000 })
      expect(rowOf(object, "slow")).toMatchObject({
        status: "failed",
        attempt: 1,
        last_error: message,
        last_error_name: "DurableAlarmTimeoutError"
      })
      yield* TestClock.adjust(600_000)
      expect(calls).toBe(1)
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("retryTimeouts retries, holding the name lock until the abort-ignoring handler settles", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ alarms: "manual" })
      const log: Array<string> = []
      const at = (text: string) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => log.push(`${text}@${now}`)))
      const alarms = yield* object.run(NamedAlarms.make({
        stubborn: NamedAlarms.alarm({
          attemptTimeoutMs: 1_000,
          retryTimeouts: true,
          retries: { delay: () => 0 },
          handler: (info) =>
            info.attempt === 1
              ? at("start 1").pipe(
                Effect.zipRight(Effect.sleep("5 seconds")),
                Effect.zipRight(at("end 1")),
                Effect.uninterruptible
              )
              : at(`start ${info.attempt}`)
        })
      }))
      yield* object.run(alarms.schedule("stubborn", 20_000))
      yield* TestClock.setTime(20_000)
      const fired = yield* Effect.fork(object.fireAlarm())
      yield* TestClock.adjust(1_000)
      yield* Fiber.join(fired)
      // The timeout is persisted as a retry due now, but the handler is still running.
      expect(rowOf(object, "stubborn")).toMatchObject({
        status: "pending",
        attempt: 1,
        next_attempt_at: 21_000,
        last_error: "Durable alarm \"stubborn\" timed out after 1000ms",
        last_error_name: "DurableAlarmTimeoutError"
      })
      // Another pass finds the retry due and the name locked: it starts nothing.
      yield* TestClock.adjust(1_000)
      yield* pass(object)
      expect(log).toEqual(["start 1@20000"])
      yield* TestClock.adjust(2_999)
      expect(log).toEqual(["start 1@20000"])
      yield* TestClock.adjust(1)
      expect(log).toEqual(["start 1@20000", "end 1@25000", "start 2@25000"])
      expect(rowOf(object, "stubborn")).toBeUndefined()
    }))
})

describe("one invocation per name", () => {
  it.scoped("a concurrent pass never starts a second invocation of a running name", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let calls = 0
      let active = 0
      let maxActive = 0
      const alarms = yield* object.run(NamedAlarms.make({
        busy: NamedAlarms.alarm({
          handler: () =>
            Effect.acquireUseRelease(
              Effect.sync(() => (calls++, maxActive = Math.max(maxActive, ++active))),
              () => Effect.sleep("5 seconds"),
              () => Effect.sync(() => active--)
            )
        })
      }))
      yield* object.run(alarms.schedule("busy", 20_000))
      yield* TestClock.setTime(20_000)
      const first = yield* Effect.fork(object.fireAlarm())
      yield* TestClock.adjust(1_000)
      const second = yield* Effect.fork(pass(object))
      yield* TestClock.adjust(1_000)
      const third = yield* Effect.fork(pass(object))
      yield* TestClock.adjust(3_000)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      yield* Fiber.join(third)
      expect(calls).toBe(1)
      expect(maxActive).toBe(1)
      expect(rowOf(object, "busy")).toBeUndefined()
    }))

  it.scoped("a replacement scheduled while running waits, then runs as its own occurrence", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ alarms: "manual" })
      const seen: Array<NamedAlarms.DurableAlarmInfo & { readonly startedAt: number }> = []
      const events: Array<string> = []
      let active = 0
      let maxActive = 0
      const alarms = yield* object.run(NamedAlarms.make({
        job: NamedAlarms.alarm({
          handler: (info) =>
            Effect.acquireUseRelease(
              Effect.flatMap(Clock.currentTimeMillis, (startedAt) =>
                Effect.sync(() => {
                  seen.push({ ...info, startedAt })
                  maxActive = Math.max(maxActive, ++active)
                })),
              () => (seen.length === 1 ? Effect.sleep("5 seconds") : Effect.void),
              () => Effect.sync(() => active--)
            )
        })
      }, {
        onLifecycleEvent: (event) =>
          void events.push(
            `${event.type}${"outcome" in event ? `:${event.outcome}` : ""}${"generation" in event ? ` ${event.generation}` : ""}`
          )
      }))
      yield* object.run(alarms.schedule("job", 20_000))
      const oldGeneration = String(rowOf(object, "job")?.generation_id)
      yield* TestClock.setTime(20_000)
      const fired = yield* Effect.fork(object.fireAlarm())
      yield* TestClock.adjust(0)
      expect(seen).toHaveLength(1)

      yield* object.run(alarms.schedule("job", 22_000))
      const newGeneration = String(rowOf(object, "job")?.generation_id)
      expect(newGeneration).not.toBe(oldGeneration)
      yield* TestClock.adjust(2_000)
      // Due, but the old occurrence still holds the name.
      expect(seen).toHaveLength(1)
      expect(rowOf(object, "job")).toMatchObject({ generation_id: newGeneration, status: "pending", attempt: 0 })
      yield* TestClock.adjust(3_000)
      yield* Fiber.join(fired)

      expect(seen).toHaveLength(2)
      expect(seen[1]).toMatchObject({
        name: "job",
        attempt: 1,
        isRetry: false,
        retryCount: 0,
        scheduledTime: 22_000,
        idempotencyKey: `durability-alarm:v1:${newGeneration}`,
        startedAt: 25_000
      })
      expect(seen[0]?.idempotencyKey).toBe(`durability-alarm:v1:${oldGeneration}`)
      expect(maxActive).toBe(1)
      // The old success matched nothing (its row was replaced): no completion event for it.
      expect(events).toEqual([
        `scheduled ${oldGeneration}`,
        `attempt_started ${oldGeneration}`,
        `scheduled ${newGeneration}`,
        `attempt_started ${newGeneration}`,
        `attempt_settled:completed ${newGeneration}`
      ])
      expect(rowOf(object, "job")).toBeUndefined()
      expect(object.storage.alarmAt).toBeNull()
    }))
})

describe("purgeBefore", () => {
  it.scoped("deletes occurrences created strictly before the cutoff and reconciles the alarm", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const alarms = yield* object.run(NamedAlarms.make({
        a: NamedAlarms.alarm({ handler: () => Effect.void }),
        b: NamedAlarms.alarm({ handler: () => Effect.void })
      }))
      yield* object.run(alarms.schedule("a", 20_000))
      yield* TestClock.adjust(1_000)
      yield* object.run(alarms.schedule("b", 30_000))
      expect(object.storage.alarmAt).toBe(20_000)
      expect(yield* object.run(alarms.purgeBefore(1_000))).toBe(1)
      expect(rowOf(object, "a")).toBeUndefined()
      expect(rowOf(object, "b")).toMatchObject({ status: "pending", created_at: 1_000 })
      expect(object.storage.alarmAt).toBe(30_000)
      expect(yield* object.run(alarms.purgeBefore(1_000))).toBe(0)
      expect(yield* object.run(alarms.purgeBefore(1_001))).toBe(1)
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("aborts a running handler; its replacement is serialized behind the abort-ignoring handler", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ alarms: "manual" })
      const seen: Array<NamedAlarms.DurableAlarmInfo & { readonly startedAt: number }> = []
      let active = 0
      let maxActive = 0
      const alarms = yield* object.run(NamedAlarms.make({
        job: NamedAlarms.alarm({
          handler: (info) =>
            Effect.acquireUseRelease(
              Effect.flatMap(Clock.currentTimeMillis, (startedAt) =>
                Effect.sync(() => {
                  seen.push({ ...info, startedAt })
                  maxActive = Math.max(maxActive, ++active)
                })),
              // The first occurrence ignores its signal and cannot be interrupted.
              () => (seen.length === 1 ? Effect.uninterruptible(Effect.sleep("5 seconds")) : Effect.void),
              () => Effect.sync(() => active--)
            )
        })
      }))
      yield* object.run(alarms.schedule("job", 20_000))
      yield* TestClock.setTime(20_000)
      const fired = yield* Effect.fork(object.fireAlarm())
      yield* TestClock.adjust(0)
      expect(seen).toHaveLength(1)

      expect(yield* object.run(alarms.purgeBefore(20_000))).toBe(1)
      const purged = seen[0]!.signal
      expect(purged.aborted).toBe(true)
      expect(purged.reason).toBeInstanceOf(Error)
      expect((purged.reason as Error).message).toBe("Durable alarm was purged")
      expect(rowOf(object, "job")).toBeUndefined()

      yield* object.run(alarms.schedule("job", 21_000))
      yield* TestClock.adjust(1_000)
      // A pass finds the replacement due and the name still held: it waits, starting nothing.
      const second = yield* Effect.fork(pass(object))
      yield* TestClock.adjust(0)
      expect(seen).toHaveLength(1)
      yield* TestClock.adjust(3_999)
      expect(seen).toHaveLength(1)
      yield* TestClock.adjust(1)
      yield* Fiber.join(fired)
      yield* Fiber.join(second)
      expect(seen).toHaveLength(2)
      expect(seen[1]).toMatchObject({ attempt: 1, scheduledTime: 21_000, startedAt: 25_000 })
      expect(seen[1]?.idempotencyKey).not.toBe(seen[0]?.idempotencyKey)
      expect(maxActive).toBe(1)
      expect(rowOf(object, "job")).toBeUndefined()
      expect(object.storage.alarmAt).toBeNull()
    }))
})

describe("validation", () => {
  it.scoped("a bad scheduledTime is an InvalidInputError and leaves storage byte-identical", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const alarms = yield* object.run(NamedAlarms.make({ renew: NamedAlarms.alarm({ handler: () => Effect.void }) }))
      yield* object.run(alarms.schedule("renew", 60_000))
      const before = object.storage.snapshot()
      const statements = object.storage.statements.length
      for (
        const bad of [Number.NaN, -1, 1.5, Number.MAX_SAFE_INTEGER + 1, Number.POSITIVE_INFINITY, "5" as unknown as number]
      ) {
        const error = yield* Effect.flip(object.run(alarms.schedule("renew", bad)))
        expect(error).toMatchObject({
          _tag: "InvalidInputError",
          field: "scheduledTime",
          kind: "range",
          message: `scheduledTime must be a non-negative safe integer or a Date, got ${
            typeof bad === "string" ? JSON.stringify(bad) : bad
          }`
        })
      }
      const unknown = yield* Effect.flip(object.run(alarms.schedule("nope" as "renew", 1_000)))
      expect(unknown).toMatchObject({ _tag: "InvalidInputError", field: "name", message: "Unknown named alarm \"nope\"" })
      for (const bad of [Number.NaN, -1, 0.5]) {
        const error = yield* Effect.flip(object.run(alarms.purgeBefore(bad)))
        expect(error).toMatchObject({
          _tag: "InvalidInputError",
          kind: "range",
          message: `timestamp must be a non-negative safe integer or a Date, got ${bad}`
        })
      }
      expect(object.storage.snapshot()).toEqual(before)
      expect(object.storage.statements.length).toBe(statements)
      expect(object.storage.alarmAt).toBe(60_000)
    }))

  it.scoped("reserved or non-function handlers and bad options are rejected before any storage access", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const handler = () => Effect.void
      for (const name of ["constructor", "alarm", "purgeBefore", "then", "prototype"]) {
        const error = yield* Effect.flip(object.run(NamedAlarms.make({ [name]: NamedAlarms.alarm({ handler }) })))
        expect(error).toMatchObject({
          _tag: "InvalidOptionError",
          field: `handlers.${name}`,
          message: `"${name}" is reserved by DurabilityAlarms`
        })
      }
      const notFunction = yield* Effect.flip(object.run(NamedAlarms.make({
        renew: { handler: "later" } as unknown as NamedAlarms.AlarmDefinition<never, never>
      })))
      expect(notFunction).toMatchObject({ _tag: "InvalidOptionError", kind: "type", message: "handlers.renew must be a function" })
      const cases: Array<[NamedAlarms.AlarmDefinition<never, never>, string, "range" | "type"]> = [
        [{ handler, retryTimeouts: "yes" as unknown as boolean }, "methods.renew.retryTimeouts must be a boolean, got \"yes\"", "type"],
        [{ handler, attemptTimeoutMs: 0 }, "methods.renew.attemptTimeoutMs must be a positive integer, got 0", "range"],
        [{ handler, retries: { maxAttempts: 1.5 } }, "methods.renew.retries.maxAttempts must be a positive integer, got 1.5", "range"],
        [{ handler, retries: { delay: 5 as unknown as () => number } }, "methods.renew.retries.delay must be a function, got 5", "type"]
      ]
      for (const [definition, message, kind] of cases) {
        const error = yield* Effect.flip(object.run(NamedAlarms.make({ renew: definition })))
        expect(error).toMatchObject({ _tag: "InvalidOptionError", kind, message })
      }
      const global = yield* Effect.flip(object.run(NamedAlarms.make({ renew: { handler } }, { attemptTimeoutMs: -5 })))
      expect(global).toMatchObject({ _tag: "InvalidOptionError", message: "attemptTimeoutMs must be a positive integer, got -5" })
      expect(object.storage.statements).toEqual([])
    }))
})

describe("eviction", () => {
  it.scoped("after a restart the interrupted occurrence runs again with the same key and attempt 2", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<NamedAlarms.DurableAlarmInfo> = []
      const hang = (info: NamedAlarms.DurableAlarmInfo) => Effect.zipRight(Effect.sync(() => seen.push(info)), Effect.never)
      const alarms = yield* object.run(NamedAlarms.make({ renew: NamedAlarms.alarm({ handler: hang }) }))
      // Due inside the min-delay window: the early timer starts it, the physical alarm stays armed.
      yield* object.run(alarms.schedule("renew", 5_000))
      const key = keyOf(object, "renew")
      expect(object.storage.alarmAt).toBe(15_000)
      yield* TestClock.adjust(5_000)
      expect(seen.map((info) => info.attempt)).toEqual([1])
      expect(rowOf(object, "renew")).toMatchObject({ status: "pending", attempt: 1 })

      const next = yield* object.restart
      expect(next.storage).toBe(object.storage)
      const recovered: Array<NamedAlarms.DurableAlarmInfo> = []
      yield* next.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: (info) => Effect.sync(() => recovered.push(info)) })
      }))
      expect(yield* next.fireAlarm()).toBe(true)
      expect(recovered).toHaveLength(1)
      expect(recovered[0]).toMatchObject({
        name: "renew",
        scheduledTime: 5_000,
        attempt: 2,
        isRetry: true,
        retryCount: 1,
        idempotencyKey: key,
        platform: { isRetry: false, retryCount: 0 }
      })
      expect(seen).toHaveLength(1)
      expect(rowOf(next, "renew")).toBeUndefined()
      expect(next.storage.alarmAt).toBeNull()
    }))
})

describe("get, cancel and list", () => {
  it.scoped("get reads a name's occurrence; list every one, soonest first; a Date schedules as its time", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ retries: { delay: () => 30_000 }, handler: boom }),
        expire: NamedAlarms.alarm({ handler: () => Effect.void }),
        digest: NamedAlarms.alarm({ handler: () => Effect.void })
      }))
      yield* TestClock.setTime(1_000)
      yield* object.run(alarms.schedule("renew", 20_000))
      yield* object.run(alarms.schedule("expire", new Date(90_000)))
      expect(yield* object.run(alarms.get("digest"))).toEqual(Option.none())
      expect(yield* object.run(alarms.get("expire"))).toEqual(Option.some({
        name: "expire",
        status: "pending",
        scheduledTime: 90_000,
        nextAttemptAt: 90_000,
        attempt: 0,
        lastError: null,
        idempotencyKey: keyOf(object, "expire"),
        createdAt: 1_000
      }))
      yield* object.fireAlarm()
      // renew failed once: its retry is due 30 s later, after expire.
      expect(yield* object.run(alarms.get("renew"))).toEqual(Option.some(expect.objectContaining({
        status: "pending",
        attempt: 1,
        scheduledTime: 20_000,
        nextAttemptAt: 50_000,
        lastError: { name: "Error", message: "boom" }
      })))
      expect((yield* object.run(alarms.list())).items.map((state) => [state.name, state.nextAttemptAt])).toEqual([
        ["renew", 50_000],
        ["expire", 90_000]
      ])
      const unknown = yield* Effect.flip(object.run(alarms.get("nope" as "renew")))
      expect(unknown).toMatchObject({ _tag: "InvalidInputError", field: "name", message: 'Unknown named alarm "nope"' })
    }))

  it.scoped("cancel deletes a pending occurrence before it runs; the alarm follows; canceling nothing is false", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, hook } = recorder()
      let ran = 0
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: () => Effect.sync(() => void ran++) }),
        expire: NamedAlarms.alarm({ handler: () => Effect.void })
      }, { onLifecycleEvent: hook }))
      yield* object.run(alarms.schedule("renew", 20_000))
      yield* object.run(alarms.schedule("expire", 90_000))
      expect(object.storage.alarmAt).toBe(20_000)
      expect(yield* object.run(alarms.cancel("renew"))).toBe(true)
      expect(rowOf(object, "renew")).toBeUndefined()
      expect(object.storage.alarmAt).toBe(90_000)
      expect(events.at(-1)).toMatchObject({
        type: "terminal",
        alarm: "renew",
        reason: "canceled",
        attempt: 0,
        error: { name: "DurableCanceledError", message: 'Durable alarm "renew" was canceled' }
      })
      expect(yield* object.run(alarms.cancel("renew"))).toBe(false)
      yield* object.fireAlarm()
      expect(ran).toBe(0)
    }))

  it.scoped("cancel aborts a running handler with DurableCanceledError; the name stays locked until it ends", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<NamedAlarms.DurableAlarmInfo> = []
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({
          handler: (info) =>
            Effect.uninterruptible(Effect.zipRight(Effect.sync(() => seen.push(info)), Effect.sleep("10 seconds")))
        })
      }))
      yield* object.run(alarms.schedule("renew", 0))
      yield* TestClock.adjust(0)
      expect(seen).toHaveLength(1)
      expect(yield* object.run(alarms.cancel("renew"))).toBe(true)
      expect(seen[0]?.signal.aborted).toBe(true)
      expect(seen[0]?.signal.reason).toMatchObject({ _tag: "DurableCanceledError" })
      // A new occurrence scheduled now waits for the canceled handler to end.
      yield* object.run(alarms.schedule("renew", 1_000))
      yield* TestClock.adjust(5_000)
      expect(seen).toHaveLength(1)
      yield* TestClock.adjust(5_000)
      expect(seen.map((info) => info.scheduledTime)).toEqual([0, 1_000])
    }))
})
