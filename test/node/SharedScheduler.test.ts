/**
 * Operations and NamedAlarms attached to ONE engine: one physical alarm for
 * both tables, one alarm pass running both, one permit pool.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, TestClock } from "effect"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Operations from "../../src/operations/Operations.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

type TestObject = TestDurability.TestObject

const callOf = (object: TestObject, id: string) =>
  object.storage.sql.exec("SELECT * FROM durability_calls WHERE id = ?", id).toArray()[0]

const alarmOf = (object: TestObject, name: string) =>
  object.storage.sql.exec("SELECT * FROM durability_alarms WHERE name = ?", name).toArray()[0]

describe("one scheduler for operations and named alarms", () => {
  it.scoped("reconciles the physical alarm to the earliest of an operation retry and a named alarm", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ran: Array<string> = []
      const record = (what: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => ran.push(`${what}@${now}`)))
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          retries: { delay: () => 40_000 },
          handler: (call: Operations.DurableCall<{ readonly cents: number }>) =>
            Effect.zipRight(
              record(`charge#${call.attempt}`),
              call.attempt === 1 ? Effect.fail(new Error("gateway down")) : Effect.succeed(call.payload.cents)
            )
        })
      }))
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: (info) => record(`renew#${info.attempt}`) })
      }))

      yield* object.run(alarms.schedule("renew", 60_000))
      expect(object.storage.alarmAt).toBe(60_000)
      // Registration runs the first attempt eagerly; it fails and its retry is due at 40 s.
      yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 500 } }))
      yield* TestClock.adjust(0)
      expect(ran).toEqual(["charge#1@0"])
      expect(callOf(object, "inv-1")).toMatchObject({ status: "pending", attempt: 1, next_attempt_at: 40_000 })
      expect(object.storage.alarmAt).toBe(40_000)

      // A named alarm earlier than the retry takes the alarm; a later one does not.
      yield* object.run(alarms.schedule("renew", 30_000))
      expect(object.storage.alarmAt).toBe(30_000)
      yield* object.run(alarms.schedule("renew", 70_000))
      expect(object.storage.alarmAt).toBe(40_000)

      yield* object.fireAlarm()
      expect(ran).toEqual(["charge#1@0", "charge#2@40000"])
      expect(yield* object.run(ops.getResult("charge", "inv-1"))).toEqual({ status: "completed", result: 500 })
      expect(object.storage.alarmAt).toBe(70_000)

      yield* object.fireAlarm()
      expect(ran).toEqual(["charge#1@0", "charge#2@40000", "renew#1@70000"])
      expect(alarmOf(object, "renew")).toBeUndefined()
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("runs both from one alarm pass under one concurrency bound (alarmConcurrency 1)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ alarms: "manual", scheduler: { alarmConcurrency: 1 } })
      const started: Array<string> = []
      let active = 0
      let maxActive = 0
      const tracked = (what: string) =>
        Effect.acquireUseRelease(
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.sync(() => {
              started.push(`${what}@${now}`)
              maxActive = Math.max(maxActive, ++active)
            })),
          () => Effect.sleep("1 second"),
          () => Effect.sync(() => active--)
        )
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          retries: { delay: () => 20_000 },
          handler: (call: Operations.DurableCall<null>) =>
            call.attempt === 1 ? Effect.fail(new Error("not yet")) : tracked(`${call.id}#${call.attempt}`)
        })
      }))
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ handler: (info) => tracked(`renew#${info.attempt}`) })
      }))
      // Both first attempts run eagerly (one after the other) and fail; both retries are due at 20 s.
      yield* object.run(ops.register("charge", { id: "a", payload: null }))
      yield* TestClock.adjust(0)
      yield* object.run(ops.register("charge", { id: "b", payload: null }))
      yield* TestClock.adjust(0)
      expect(callOf(object, "a")).toMatchObject({ status: "pending", attempt: 1, next_attempt_at: 20_000 })
      expect(callOf(object, "b")).toMatchObject({ status: "pending", attempt: 1, next_attempt_at: 20_000 })
      yield* object.run(alarms.schedule("renew", 20_000))
      expect(object.storage.alarmAt).toBe(20_000)

      yield* TestClock.setTime(20_000)
      const fired = yield* Effect.fork(object.fireAlarm())
      yield* TestClock.adjust(0)
      expect(started).toHaveLength(1)
      yield* TestClock.adjust(1_000)
      expect(started).toHaveLength(2)
      yield* TestClock.adjust(1_000)
      expect(started).toHaveLength(3)
      yield* TestClock.adjust(1_000)
      yield* Fiber.join(fired)

      expect(started.map((s) => s.split("@")[0]).sort()).toEqual(["a#2", "b#2", "renew#1"])
      expect(started.map((s) => s.split("@")[1]).sort()).toEqual(["20000", "21000", "22000"])
      expect(maxActive).toBe(1)
      expect(yield* object.run(ops.getResult("charge", "a"))).toEqual({ status: "completed", result: undefined })
      expect(yield* object.run(ops.getResult("charge", "b"))).toEqual({ status: "completed", result: undefined })
      expect(alarmOf(object, "renew")).toBeUndefined()
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("rejects a second helper of the same kind on one scheduler; the first keeps working", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        echo: Operations.operation({ handler: (call: Operations.DurableCall<string>) => Effect.succeed(call.payload) })
      }))
      yield* object.run(NamedAlarms.make({ renew: NamedAlarms.alarm({ handler: () => Effect.void }) }))

      const secondOps = yield* Effect.flip(object.run(Operations.make({
        other: Operations.operation({ handler: () => Effect.void })
      })))
      expect(secondOps).toMatchObject({
        _tag: "ParticipantConflictError",
        kind: "operations",
        message: 'A "operations" helper is already attached to this scheduler: an object takes one helper of each ' +
          "kind, so put all of its handlers in that one helper"
      })
      const secondAlarms = yield* Effect.flip(object.run(NamedAlarms.make({
        other: NamedAlarms.alarm({ handler: () => Effect.void })
      })))
      expect(secondAlarms).toMatchObject({
        _tag: "ParticipantConflictError",
        kind: "namedAlarms",
        message: 'A "namedAlarms" helper is already attached to this scheduler: an object takes one helper of each ' +
          "kind, so put all of its handlers in that one helper"
      })

      yield* object.run(ops.register("echo", { id: "e", payload: "hi" }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("echo", "e"))).toEqual({ status: "completed", result: "hi" })
    }))
})
