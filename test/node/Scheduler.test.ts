import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Fiber, TestClock } from "effect"
import * as TaskTable from "../shared/TaskTable.js"
import * as TestScheduler from "../../src/testing/TestScheduler.js"
import * as AlarmService from "../../src/AlarmService.js"
import { fresh } from "./support/harness.js"

const ok: TaskTable.Handler = () => Effect.succeed("done")

describe("reconciliation of the physical alarm", () => {
  it.effect("tracks the earliest pending work, never earlier than the minimum delay", () =>
    Effect.gen(function*() {
      const object = yield* fresh({ handler: ok })
      yield* object.run(TaskTable.register(object.handle, "late", 60_000))
      expect(object.storage.alarmAt).toBe(60_000)
      yield* object.run(TaskTable.register(object.handle, "sooner", 30_000))
      expect(object.storage.alarmAt).toBe(30_000)
      yield* object.run(TaskTable.register(object.handle, "now", 0))
      expect(object.storage.alarmAt).toBe(15_000)
    }))

  it.effect("frequent writes cannot postpone an alarm already inside [earliest, now + min delay]", () =>
    Effect.gen(function*() {
      // The first task stays pending (running) for the whole test.
      const object = yield* fresh({ handler: () => Effect.never })
      yield* object.run(TaskTable.register(object.handle, "a", 0))
      expect(object.storage.alarmAt).toBe(15_000)
      for (let i = 1; i <= 5; i++) {
        yield* TestClock.adjust(2_000)
        yield* object.run(TaskTable.register(object.handle, `b${i}`, 100_000))
      }
      expect(object.storage.alarmAt).toBe(15_000)
    }))

  it.effect("deletes the alarm once nothing is pending", () =>
    Effect.gen(function*() {
      const object = yield* fresh({ handler: ok })
      yield* object.run(TaskTable.register(object.handle, "a", 20_000))
      expect(object.storage.alarmAt).toBe(20_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect((yield* object.run(TaskTable.read("a")))?.status).toBe("completed")
      expect(object.storage.alarmAt).toBeNull()
    }))
})

describe("early timer", () => {
  it.effect("runs work due inside the min-delay window at its due time", () =>
    Effect.gen(function*() {
      const ranAt: Array<number> = []
      const object = yield* fresh({ handler: () => Effect.map(Clock.currentTimeMillis, (now) => ranAt.push(now)) })
      yield* object.run(TaskTable.register(object.handle, "soon", 5_000))
      expect(object.storage.alarmAt).toBe(15_000)
      expect(yield* object.run(Effect.flatMap(AlarmService.AlarmService, (a) => a.timerAt))).toBe(5_000)
      yield* TestClock.adjust(4_999)
      expect(ranAt).toEqual([])
      yield* TestClock.adjust(1)
      expect(ranAt).toEqual([5_000])
      expect((yield* object.run(TaskTable.read("soon")))?.status).toBe("completed")
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.effect("leaves work due after the window to the physical alarm", () =>
    Effect.gen(function*() {
      const ranAt: Array<number> = []
      const object = yield* fresh({ handler: () => Effect.map(Clock.currentTimeMillis, (now) => ranAt.push(now)) })
      yield* object.run(TaskTable.register(object.handle, "later", 20_000))
      expect(yield* object.run(Effect.flatMap(AlarmService.AlarmService, (a) => a.timerAt))).toBeNull()
      yield* TestClock.adjust(30_000)
      expect(ranAt).toEqual([])
      expect(object.storage.alarmAt).toBe(20_000)
    }))
})

describe("liveTimers", () => {
  it.effect("runs work at its exact due time beyond the min-delay window", () =>
    Effect.gen(function*() {
      const ranAt: Array<number> = []
      const object = yield* fresh(
        { handler: () => Effect.map(Clock.currentTimeMillis, (now) => ranAt.push(now)) },
        { liveTimers: true }
      )
      yield* object.run(TaskTable.register(object.handle, "exact", 42_000))
      yield* TestClock.adjust(42_000)
      expect(ranAt).toEqual([42_000])
    }))

  it.effect("does not spin on a due key that is still running", () =>
    Effect.gen(function*() {
      let calls = 0
      const gate = yield* Deferred.make<void>()
      const object = yield* fresh(
        { handler: () => Effect.zipRight(Effect.sync(() => calls++), Deferred.await(gate)) },
        { liveTimers: true }
      )
      yield* object.run(TaskTable.register(object.handle, "busy", 1_000))
      yield* TestClock.adjust(1_000)
      expect(calls).toBe(1)
      expect(yield* object.run(Effect.flatMap(AlarmService.AlarmService, (a) => a.timerAt))).toBeNull()
      yield* TestClock.adjust(10_000)
      expect(calls).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(1)
      expect((yield* object.run(TaskTable.read("busy")))?.status).toBe("completed")
      expect(calls).toBe(1)
    }))
})

describe("handoff", () => {
  it.effect("returns after alarmHandoffMs and the next pass attaches to the running work", () =>
    Effect.gen(function*() {
      let calls = 0
      const object = yield* fresh(
        { handler: () => Effect.zipRight(Effect.sync(() => calls++), Effect.sleep("25 seconds")) },
        { alarmHandoffMs: 10_000 }
      )
      yield* object.run(TaskTable.register(object.handle, "long", 20_000))
      yield* TestClock.setTime(20_000)
      const first = yield* Effect.fork(object.run(TestScheduler.fireAlarm(object.storage)))
      yield* TestClock.adjust(10_000)
      console.log("adjusted", first.unsafePoll())
      yield* Fiber.join(first)
      expect(yield* Clock.currentTimeMillis).toBe(30_000)
      const row = yield* object.run(TaskTable.read("long"))
      expect(row).toMatchObject({ status: "pending", attempt: 1 })
      expect(object.storage.alarmAt).toBe(45_000)
      const second = yield* Effect.fork(object.run(TestScheduler.fireAlarm(object.storage)))
      yield* TestClock.adjust(0)
      yield* Fiber.join(second)
      expect(calls).toBe(1)
      expect((yield* object.run(TaskTable.read("long")))?.status).toBe("completed")
    }))
})
