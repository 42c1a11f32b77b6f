/**
 * The engine's durable timers: covered by the physical alarm like pending records, fired once, in
 * the transaction that takes them, by the alarm, the early timer or a new instance after an eviction.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import * as AlarmService from "../../../src/engine/AlarmService.js"
import type * as Scheduler from "../../../src/engine/Scheduler.js"
import { StorageService } from "../../../src/engine/StorageService.js"
import { StorageError } from "../../../src/shared/Errors.js"
import * as TestScheduler from "../../../src/testing/TestScheduler.js"
import * as TaskTable from "../../shared/TaskTable.js"
import { fresh, instance } from "../support/harness.js"

const ok: TaskTable.Handler = () => Effect.succeed("done")

interface Fired {
  readonly key: string
  readonly at: number
  readonly data: string | null
  readonly firedAt: number
}

/** A timer owner that records its fires; a fire whose data names a task makes that task due now. */
const recording = (fired: Array<Fired>): Scheduler.Timers => ({
  fire: (timer, now) =>
    Effect.gen(function*() {
      fired.push({ ...timer, firedAt: now })
      if (timer.data === null || !timer.data.startsWith("task:")) return { pending: [] }
      const id = timer.data.slice("task:".length)
      const storage = yield* StorageService
      yield* storage.exec(
        `INSERT INTO test_tasks (id, generation_id, status, attempt, next_attempt_at) VALUES (?, 'g', 'pending', 0, ?)`,
        [id, now]
      )
      return { pending: [{ key: id, at: now, start: true }] }
    }).pipe(Effect.provideService(StorageService, storage))
})

// The owner's fire reads storage from the instance it runs in: tests set it before attaching.
let storage: StorageService

const timerRows = Effect.flatMap(StorageService, (sql) => sql.exec("SELECT owner, key, at, data FROM durability_timers ORDER BY key"))

const setTimer = (handle: Scheduler.TableHandle, key: string, at: number, data?: string) =>
  handle.write(handle.timers.set(key, at, data))

const withStorage = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(StorageService, (sql) => {
    storage = sql
    return effect
  })

describe("durable timers", () => {
  it.effect("a timer is covered by the physical alarm and fires once at its time, in the alarm's pass", () =>
    Effect.gen(function*() {
      const fired: Array<Fired> = []
      const object = yield* fresh({ handler: ok, timers: recording(fired) })
      yield* object.run(withStorage(setTimer(object.handle, "t1", 60_000, "hello")))
      expect(object.storage.alarmAt).toBe(60_000)
      expect(yield* object.run(timerRows)).toEqual([{ owner: "tasks", key: "t1", at: 60_000, data: "hello" }])

      yield* TestClock.adjust(60_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(fired).toEqual([{ key: "t1", at: 60_000, data: "hello", firedAt: 60_000 }])
      expect(yield* object.run(timerRows)).toEqual([])
      expect(object.storage.alarmAt).toBeNull()

      // Fired for good: another alarm finds nothing.
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(fired).toHaveLength(1)
    }))

  it.effect("the alarm covers the earliest of timers and records; a moved timer keeps one row", () =>
    Effect.gen(function*() {
      const fired: Array<Fired> = []
      const object = yield* fresh({ handler: ok, timers: recording(fired) })
      yield* object.run(withStorage(TaskTable.register(object.handle, "task", 90_000)))
      yield* object.run(setTimer(object.handle, "t", 70_000))
      expect(object.storage.alarmAt).toBe(70_000)
      yield* object.run(setTimer(object.handle, "t", 40_000))
      expect(object.storage.alarmAt).toBe(40_000)
      expect(yield* object.run(timerRows)).toHaveLength(1)
      expect(yield* object.run(object.handle.timers.get("t"))).toEqual({ key: "t", at: 40_000, data: null })

      yield* TestClock.adjust(40_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(fired.map((f) => f.firedAt)).toEqual([40_000])
      // Next: the record.
      expect(object.storage.alarmAt).toBe(90_000)
    }))

  it.effect("a canceled timer never fires", () =>
    Effect.gen(function*() {
      const fired: Array<Fired> = []
      const object = yield* fresh({ handler: ok, timers: recording(fired) })
      yield* object.run(withStorage(setTimer(object.handle, "t", 20_000)))
      expect(yield* object.run(object.handle.write(object.handle.timers.cancel("t")))).toBe(true)
      expect(object.storage.alarmAt).toBeNull()
      yield* TestClock.adjust(30_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(fired).toEqual([])
    }))

  it.effect("the early timer fires a timer due inside the min-delay window at its time", () =>
    Effect.gen(function*() {
      const fired: Array<Fired> = []
      const object = yield* fresh({ handler: ok, timers: recording(fired) })
      yield* object.run(withStorage(setTimer(object.handle, "soon", 5_000)))
      expect(object.storage.alarmAt).toBe(15_000)
      expect(yield* object.run(Effect.flatMap(AlarmService.AlarmService, (a) => a.timerAt))).toBe(5_000)
      yield* TestClock.adjust(4_999)
      expect(fired).toEqual([])
      yield* TestClock.adjust(1)
      expect(fired.map((f) => f.firedAt)).toEqual([5_000])
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.effect("a fire that makes a record pending starts it in the same pass", () =>
    Effect.gen(function*() {
      const fired: Array<Fired> = []
      const ran: Array<number> = []
      const object = yield* fresh({
        handler: () => Effect.map(Clock.currentTimeMillis, (now) => void ran.push(now)),
        timers: recording(fired)
      })
      yield* object.run(withStorage(Effect.flatMap(StorageService, (sql) => sql.exec(TaskTable.CREATE_TABLE))))
      yield* object.run(setTimer(object.handle, "wake", 30_000, "task:made"))
      yield* TestClock.adjust(30_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(ran).toEqual([30_000])
      expect((yield* object.run(TaskTable.read("made")))?.status).toBe("completed")
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.effect("a fire may set its timer again (a periodic timer): it fires again at the new time, not in the same pass", () =>
    Effect.gen(function*() {
      const fired: Array<number> = []
      let handle: Scheduler.TableHandle | undefined
      const object = yield* fresh({
        handler: ok,
        timers: {
          fire: (timer, now) =>
            Effect.gen(function*() {
              fired.push(now)
              if (fired.length < 3) yield* handle!.timers.set(timer.key, now + 20_000)
              return { pending: [] }
            })
        }
      })
      handle = object.handle
      yield* object.run(setTimer(object.handle, "tick", 20_000))
      for (const at of [20_000, 40_000, 60_000]) {
        yield* TestClock.adjust(20_000)
        expect(object.storage.alarmAt).toBe(at)
        yield* object.run(TestScheduler.fireAlarm(object.storage))
      }
      expect(fired).toEqual([20_000, 40_000, 60_000])
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.effect("a fire whose transaction fails leaves the timer due: the fallback alarm fires it", () =>
    Effect.gen(function*() {
      const fired: Array<Fired> = []
      const inner = recording(fired)
      let failures = 1
      const object = yield* fresh({
        handler: ok,
        timers: {
          // Fails after its own write, so the rollback of the take and of the write shows.
          fire: (timer, now, timers) =>
            Effect.flatMap(inner.fire(timer, now, timers), (made) =>
              failures-- > 0 ? Effect.fail(new StorageError({ operation: "exec", message: "injected fire failure" })) : Effect.succeed(made))
        }
      })
      yield* object.run(withStorage(setTimer(object.handle, "t", 20_000, "task:side")))
      yield* TestClock.adjust(20_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(fired).toHaveLength(1)
      expect(yield* object.run(timerRows)).toHaveLength(1)
      expect(yield* object.run(TaskTable.read("side"))).toBeUndefined()
      // The fallback alarm, after the minimum delay.
      expect(object.storage.alarmAt).toBe(35_000)
      yield* TestClock.adjust(15_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(fired.map((f) => f.firedAt)).toEqual([20_000, 35_000])
      expect(yield* object.run(timerRows)).toEqual([])
      expect((yield* object.run(TaskTable.read("side")))?.status).toBe("completed")
    }))

  it.effect("after an eviction, a new instance fires the stored timer from the alarm", () =>
    Effect.gen(function*() {
      const fired: Array<Fired> = []
      const object = yield* fresh({ handler: ok, timers: recording(fired) })
      yield* object.run(withStorage(setTimer(object.handle, "t", 50_000, "kept")))
      yield* object.evict
      const next = yield* instance(object.storage, object.background, { handler: ok, timers: recording(fired) })
      yield* TestClock.adjust(50_000)
      yield* next.run(withStorage(TestScheduler.fireAlarm(object.storage)))
      expect(fired).toEqual([{ key: "t", at: 50_000, data: "kept", firedAt: 50_000 }])
    }))

  it.effect("a timer whose owner is not attached does not keep the alarm armed", () =>
    Effect.gen(function*() {
      const fired: Array<Fired> = []
      const object = yield* fresh({ handler: ok, timers: recording(fired) })
      yield* object.run(withStorage(setTimer(object.handle, "orphan", 20_000)))
      yield* object.evict
      // The new instance attaches the table without timers: nothing of its own is pending.
      const next = yield* instance(object.storage, object.background, { handler: ok })
      yield* next.run(next.handle.write(Effect.void))
      expect(object.storage.alarmAt).toBeNull()
      expect(fired).toEqual([])
    }))
})
