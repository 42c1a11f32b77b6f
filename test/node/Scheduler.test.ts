import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Fiber, Random, Schedule, TestClock } from "effect"
import * as AlarmService from "../../src/engine/AlarmService.js"
import { NonRetryableError } from "../../src/shared/Errors.js"
import type * as Lifecycle from "../../src/engine/Lifecycle.js"
import * as PermitSemaphore from "../../src/engine/PermitSemaphore.js"
import * as RetryPolicy from "../../src/engine/RetryPolicy.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import * as SchedulerConfig from "../../src/engine/SchedulerConfig.js"
import { StorageService } from "../../src/engine/StorageService.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import * as TestBackground from "../../src/testing/TestBackground.js"
import * as TestScheduler from "../../src/testing/TestScheduler.js"
import * as TaskTable from "../shared/TaskTable.js"
import { type Faults, withFaults } from "./support/faults.js"
import { fresh, instance } from "./support/harness.js"

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

describe("warm-up", () => {
  it.effect("a stored alarm already past (not delivered, as after a wrangler dev reload) runs the overdue work at once", () =>
    Effect.gen(function*() {
      const storage = yield* MemoryStorage.make
      const background = yield* TestBackground.make
      const ranAt: Array<number> = []
      const tasks = { handler: () => Effect.map(Clock.currentTimeMillis, (now) => void ranAt.push(now)) }
      const first = yield* instance(storage, background, tasks)
      yield* first.run(TaskTable.register(first.handle, "overdue", 20_000))
      expect(storage.alarmAt).toBe(20_000)
      yield* first.evict
      // The alarm's time passes with no delivery (the platform lost it); the next instance starts later.
      yield* TestClock.setTime(30_000)
      const next = yield* instance(storage, background, tasks)
      yield* next.run(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.warm))
      yield* TestClock.adjust(0)
      expect(ranAt).toEqual([30_000])
      expect((yield* next.run(TaskTable.read("overdue")))?.status).toBe("completed")
      expect(storage.alarmAt).toBeNull()
    }))

  it.effect("a stored alarm still ahead leaves the early timer unarmed", () =>
    Effect.gen(function*() {
      const object = yield* fresh({ handler: ok })
      yield* object.run(TaskTable.register(object.handle, "later", 60_000))
      yield* object.run(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.warm))
      expect(yield* object.run(Effect.flatMap(AlarmService.AlarmService, (a) => a.timerAt))).toBeNull()
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
      yield* Fiber.join(first)
      expect(yield* Clock.currentTimeMillis).toBe(30_000)
      const row = yield* object.run(TaskTable.read("long"))
      expect(row).toMatchObject({ status: "pending", attempt: 1 })
      // Re-armed when the pass started (20 000 + 15 000), which already covers the continuation.
      expect(object.storage.alarmAt).toBe(35_000)
      yield* TestClock.setTime(35_000)
      const second = yield* Effect.fork(object.run(TestScheduler.fireAlarm(object.storage)))
      // The second pass attaches: it ends when the handler (started at 20 000) ends at 45 000.
      yield* TestClock.adjust(10_000)
      yield* Fiber.join(second)
      expect(calls).toBe(1)
      expect((yield* object.run(TaskTable.read("long")))?.status).toBe("completed")
    }))

  it.effect("a handoff later than the minimum delay re-arms the alarm at now + alarmMinDelayMs, not in the past", () =>
    Effect.gen(function*() {
      const object = yield* fresh(
        { handler: () => Effect.sleep("25 seconds") },
        { alarmHandoffMs: 10_000, alarmMinDelayMs: 1_000 }
      )
      yield* object.run(TaskTable.register(object.handle, "long", 20_000))
      yield* TestClock.setTime(20_000)
      const first = yield* Effect.fork(object.run(TestScheduler.fireAlarm(object.storage)))
      yield* TestClock.adjust(0)
      // Re-armed when the pass started: 20 000 + 1 000, which the handoff at 30 000 has passed.
      expect(object.storage.alarmAt).toBe(21_000)
      yield* TestClock.adjust(10_000)
      yield* Fiber.join(first)
      expect(yield* Clock.currentTimeMillis).toBe(30_000)
      expect(object.storage.alarmAt).toBe(31_000)
    }))
})

describe("alarm failure handling", () => {
  const dueScan = (query: string) => query.includes("next_attempt_at <= ?")

  it.effect("a failed pass arms a fallback alarm and calls onAlarmRetry once", () =>
    Effect.gen(function*() {
      const faults: Faults = {}
      const storage = withFaults(yield* MemoryStorage.make, faults)
      const background = yield* TestBackground.make
      const retries: Array<Scheduler.AlarmRetryInfo> = []
      const object = yield* instance(storage, background, { handler: ok }, {
        onAlarmRetry: (info) => void retries.push(info)
      })
      yield* object.run(TaskTable.register(object.handle, "a", 20_000))
      faults.sql = dueScan
      yield* object.run(TestScheduler.fireAlarm(storage, { isRetry: false, retryCount: 0 }))
      expect(storage.alarmAt).toBe(35_000)
      expect(retries).toEqual([{
        error: { name: "StorageError", message: expect.stringContaining("injected SQL failure") },
        retryInMs: 15_000,
        isRetry: false,
        retryCount: 0
      }])
      const reports = yield* background.reports
      expect(reports.map((r) => r.event)).toEqual(["durability.alarm.failed"])
      expect(reports[0]?.details).toMatchObject({ retryInMs: 15_000 })

      faults.sql = undefined
      yield* object.run(TestScheduler.fireAlarm(storage))
      expect((yield* object.run(TaskTable.read("a")))?.status).toBe("completed")
      expect(retries).toHaveLength(1)
    }))

  it.effect("a throwing or rejecting onAlarmRetry is reported and changes nothing", () =>
    Effect.gen(function*() {
      for (const hook of [() => {
        throw new Error("hook threw")
      }, () => Promise.reject(new Error("hook rejected"))]) {
        const faults: Faults = { sql: dueScan }
        const storage = withFaults(yield* MemoryStorage.make, faults)
        const background = yield* TestBackground.make
        const object = yield* instance(storage, background, { handler: ok }, { onAlarmRetry: hook })
        faults.sql = undefined
        const now = yield* Clock.currentTimeMillis
        yield* object.run(TaskTable.register(object.handle, "a", now + 20_000))
        faults.sql = dueScan
        const firedAt = storage.alarmAt!
        yield* object.run(TestScheduler.fireAlarm(storage))
        yield* flushMicrotasks
        expect(storage.alarmAt).toBe(firedAt + 15_000)
        expect((yield* background.reports).map((r) => r.event)).toEqual([
          "durability.alarm.failed",
          "durability.alarm.retry_hook_failed"
        ])
      }
    }))

  it.effect("when even the fallback alarm cannot be armed, the error reaches the platform", () =>
    Effect.gen(function*() {
      const faults: Faults = {}
      const storage = withFaults(yield* MemoryStorage.make, faults)
      const background = yield* TestBackground.make
      let hookCalls = 0
      const object = yield* instance(storage, background, { handler: ok }, { onAlarmRetry: () => void hookCalls++ })
      yield* object.run(TaskTable.register(object.handle, "a", 20_000))
      faults.sql = dueScan
      faults.setAlarm = true
      const exit = yield* Effect.exit(object.run(TestScheduler.fireAlarm(storage)))
      expect(exit._tag).toBe("Failure")
      expect(String(exit)).toContain("injected SQL failure")
      expect(hookCalls).toBe(0)
      expect(storage.alarmAt).toBeNull()
      expect((yield* object.run(TaskTable.read("a")))).toMatchObject({ status: "pending", attempt: 0 })
    }))
})

describe("concurrency", () => {
  it.effect("due work from one pass shares the permit pool (alarmConcurrency 1 → one at a time)", () =>
    Effect.gen(function*() {
      let active = 0
      let maxActive = 0
      const object = yield* fresh({
        handler: () =>
          Effect.acquireUseRelease(
            Effect.sync(() => (maxActive = Math.max(maxActive, ++active))),
            () => Effect.sleep("1 second"),
            () => Effect.sync(() => active--)
          )
      }, { alarmConcurrency: 1 })
      for (const id of ["a", "b", "c"]) yield* object.run(TaskTable.register(object.handle, id, 20_000))
      yield* TestClock.setTime(20_000)
      const pass = yield* Effect.fork(object.run(TestScheduler.fireAlarm(object.storage)))
      yield* TestClock.adjust(3_000)
      yield* Fiber.join(pass)
      expect(maxActive).toBe(1)
      expect((yield* object.run(TaskTable.all)).map((r) => r.status)).toEqual(["completed", "completed", "completed"])
    }))

  it.effect("a pass starts at most 100 due rows; the rest follow from the re-armed timer", () =>
    Effect.gen(function*() {
      // Work started by the physical alarm carries its info; the timer's pass has none.
      const started: Array<"alarm" | "timer"> = []
      const object = yield* fresh({
        handler: (execution) => Effect.sync(() => started.push(execution.platform === undefined ? "timer" : "alarm"))
      }, { alarmConcurrency: 2 })
      for (let i = 0; i < 101; i++) {
        yield* object.run(TaskTable.register(object.handle, `t${String(i).padStart(3, "0")}`, 20_000 + i))
      }
      yield* TestClock.setTime(20_200)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      yield* TestClock.adjust(0)
      expect(started.filter((s) => s === "alarm")).toHaveLength(100)
      expect(started.filter((s) => s === "timer")).toHaveLength(1)
      expect((yield* object.run(TaskTable.read("t100")))?.status).toBe("completed")
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.effect("an abort-ignoring handler keeps its permit and its key after the timeout is persisted", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      let signal: AbortSignal | undefined
      const object = yield* fresh({
        attemptTimeoutMs: 1_000,
        handler: (execution) =>
          execution.key === "stubborn"
            ? Effect.sync(() => (signal = execution.signal)).pipe(
              Effect.zipRight(Effect.sleep("5 seconds")),
              Effect.zipRight(Effect.sync(() => events.push(`stubborn ended ${execution.attempt}`))),
              Effect.uninterruptible
            )
            : Effect.map(Clock.currentTimeMillis, (now) => events.push(`${execution.key} started at ${now}`))
      }, { alarmConcurrency: 1 })
      yield* object.run(TaskTable.register(object.handle, "stubborn", 20_000))
      yield* object.run(TaskTable.register(object.handle, "next", 20_001))
      yield* TestClock.setTime(20_001)
      const pass = yield* Effect.fork(object.run(TestScheduler.fireAlarm(object.storage)))
      yield* TestClock.adjust(1_000)
      expect(yield* object.run(TaskTable.read("stubborn"))).toMatchObject({
        status: "pending",
        attempt: 1,
        last_error_name: "DurableAttemptTimeoutError"
      })
      expect(signal?.aborted).toBe(true)
      expect(String((signal?.reason as Error).message)).toContain("timed out after 1000 ms")
      expect(yield* object.run(Effect.flatMap(PermitSemaphore.PermitSemaphore, (p) => p.available))).toBe(0)
      expect(events).toEqual([])
      yield* TestClock.adjust(4_000)
      yield* Fiber.join(pass)
      expect(events).toEqual(["stubborn ended 1", "next started at 25001"])
    }))
})

describe("retry decisions persisted from a Schedule", () => {
  const failing: TaskTable.Handler = () => Effect.fail(new Error("transient"))

  it.effect("default policy: exponential from 1 s with equal jitter (Random 0.5 → +750 ms, then +1500 ms)", () =>
    Effect.gen(function*() {
      const object = yield* fresh({ handler: failing })
      yield* object.run(TaskTable.register(object.handle, "a", 20_000))
      yield* TestClock.setTime(20_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(yield* object.run(TaskTable.read("a"))).toMatchObject({
        status: "pending",
        attempt: 1,
        next_attempt_at: 20_750,
        last_error: "transient",
        last_error_name: "Error"
      })
      yield* TestClock.adjust(750)
      expect(yield* object.run(TaskTable.read("a"))).toMatchObject({ attempt: 2, next_attempt_at: 22_250 })
    }).pipe(Effect.withRandom(Random.fixed([0.5]))))

  it.effect("a custom Schedule decides the delay; a finished Schedule makes the failure final", () =>
    Effect.gen(function*() {
      const object = yield* fresh({
        handler: failing,
        schedule: Schedule.spaced("3 seconds").pipe(Schedule.intersect(Schedule.recurs(1)))
      })
      yield* object.run(TaskTable.register(object.handle, "a", 20_000))
      yield* TestClock.setTime(20_000)
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(yield* object.run(TaskTable.read("a"))).toMatchObject({ status: "pending", next_attempt_at: 23_000 })
      yield* TestClock.adjust(3_000)
      expect(yield* object.run(TaskTable.read("a"))).toMatchObject({
        status: "failed",
        attempt: 2,
        last_error_name: "Error"
      })
    }))

  it.effect("stops after maxAttempts", () =>
    Effect.gen(function*() {
      let calls = 0
      const object = yield* fresh({
        handler: () => Effect.zipRight(Effect.sync(() => calls++), failing({} as Scheduler.Execution)),
        maxAttempts: 3,
        schedule: RetryPolicy.fromDelay(() => 10)
      })
      yield* object.run(TaskTable.register(object.handle, "a", 0))
      yield* TestClock.adjust(100)
      expect(calls).toBe(3)
      expect(yield* object.run(TaskTable.read("a"))).toMatchObject({ status: "failed", attempt: 3 })
      expect(object.storage.alarmAt).toBeNull()
    }))

  for (
    const [label, delay] of [
      ["throws", () => {
        throw new Error("policy bug")
      }],
      ["NaN", () => Number.NaN],
      ["negative", () => -1],
      ["negative fraction", () => -0.1],
      ["unsafe timestamp", () => Number.MAX_SAFE_INTEGER],
      ["Infinity", () => Number.POSITIVE_INFINITY]
    ] as const
  ) {
    it.effect(`a delay that ${label === "throws" ? "throws" : `is ${label}`} is a terminal DurableRetryPolicyError`, () =>
      Effect.gen(function*() {
        let calls = 0
        const object = yield* fresh({
          handler: () => Effect.zipRight(Effect.sync(() => calls++), Effect.fail(new Error("transient"))),
          schedule: RetryPolicy.fromDelay(delay)
        })
        // A realistic clock, so an enormous delay overflows the timestamp.
        yield* object.run(TaskTable.register(object.handle, "a", 1_000))
        yield* TestClock.adjust(1_000)
        expect(calls).toBe(1)
        expect(yield* object.run(TaskTable.read("a"))).toMatchObject({
          status: "failed",
          attempt: 1,
          last_error_name: "DurableRetryPolicyError"
        })
      }))
  }
})

describe("terminal rules", () => {
  it.effect("NonRetryableError (ours or any error so named) fails after one attempt", () =>
    Effect.gen(function*() {
      class ForeignNonRetryable extends Error {
        override readonly name = "NonRetryableError"
      }
      const object = yield* fresh({
        handler: (execution) =>
          Effect.fail(
            execution.key === "ours"
              ? new NonRetryableError({ message: "bad input" })
              : new ForeignNonRetryable("from another package")
          )
      })
      yield* object.run(TaskTable.register(object.handle, "ours", 0))
      yield* object.run(TaskTable.register(object.handle, "foreign", 0))
      yield* TestClock.adjust(0)
      expect(yield* object.run(TaskTable.read("ours"))).toMatchObject({
        status: "failed",
        attempt: 1,
        last_error: "bad input",
        last_error_name: "NonRetryableError"
      })
      expect(yield* object.run(TaskTable.read("foreign"))).toMatchObject({
        status: "failed",
        attempt: 1,
        last_error_name: "NonRetryableError"
      })
    }))

  it.effect("classes named NonRetryableError without a name, branded errors with a custom name and subclasses are terminal", () =>
    Effect.gen(function*() {
      // A package's own class that never sets `name` (its name stays "Error").
      class NonRetryableError_ extends Error {}
      Object.defineProperty(NonRetryableError_, "name", { value: "NonRetryableError" })
      // Cloudflare Workflows' class: a custom name, and a public `__brand`.
      class WorkflowsNonRetryable extends Error {
        readonly __brand = "NonRetryableError"
        constructor(message: string, name = "NonRetryableError") {
          super(message)
          this.name = name
        }
      }
      class AuthError extends NonRetryableError {}
      const errors: Record<string, () => unknown> = {
        unnamed: () => new NonRetryableError_("never named"),
        branded: () => new WorkflowsNonRetryable("token revoked", "AuthError"),
        subclass: () => new AuthError({ message: "subclass of ours" }),
        plain: () => new Error("transient")
      }
      const object = yield* fresh({
        maxAttempts: 3,
        schedule: RetryPolicy.fromDelay(() => 1_000),
        handler: (execution) => Effect.fail(errors[execution.key]!())
      })
      for (const key of Object.keys(errors)) yield* object.run(TaskTable.register(object.handle, key, 0))
      yield* TestClock.adjust(0)
      expect(new NonRetryableError_("x").name).toBe("Error")
      for (const key of ["unnamed", "branded", "subclass"]) {
        expect(yield* object.run(TaskTable.read(key))).toMatchObject({ status: "failed", attempt: 1 })
      }
      expect(yield* object.run(TaskTable.read("branded"))).toMatchObject({ last_error_name: "AuthError" })
      expect(yield* object.run(TaskTable.read("plain"))).toMatchObject({ status: "pending", attempt: 1 })
    }))

  it.effect("a row already at maxAttempts is never claimed: failed as exhausted, handler not called", () =>
    Effect.gen(function*() {
      let calls = 0
      const events: Array<Lifecycle.LifecycleEvent> = []
      const object = yield* fresh({
        handler: () => Effect.sync(() => calls++),
        maxAttempts: 2,
        onEvent: (event) => void events.push(event)
      })
      yield* object.run(TaskTable.register(object.handle, "a", 20_000, "gen-a"))
      yield* object.run(
        Effect.flatMap(StorageService, (s) => s.exec("UPDATE test_tasks SET attempt = 2 WHERE id = 'a'"))
      )
      yield* object.run(TestScheduler.fireAlarm(object.storage))
      expect(calls).toBe(0)
      expect(yield* object.run(TaskTable.read("a"))).toMatchObject({
        status: "failed",
        attempt: 2,
        last_error_name: "DurableAttemptsExhaustedError"
      })
      expect(events).toEqual([expect.objectContaining({
        type: "terminal",
        reason: "attempts_exhausted",
        id: "a",
        generation: "gen-a",
        attempt: 2
      })])
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.effect("a stale generation never settles its replacement", () =>
    Effect.gen(function*() {
      const gates = new Map<string, Deferred.Deferred<void>>()
      const ran: Array<string> = []
      const object = yield* fresh({
        handler: (execution) =>
          Effect.gen(function*() {
            ran.push(`${execution.generation}#${execution.attempt}`)
            const gate = gates.get(execution.generation)
            if (gate !== undefined) yield* Deferred.await(gate)
            return execution.generation
          })
      })
      gates.set("old", yield* Deferred.make<void>())
      yield* object.run(TaskTable.register(object.handle, "x", 0, "old"))
      yield* TestClock.adjust(0)
      expect(ran).toEqual(["old#1"])
      yield* object.run(TaskTable.register(object.handle, "x", 0, "new"))
      yield* Deferred.succeed(gates.get("old")!, undefined)
      yield* TestClock.adjust(0)
      const row = yield* object.run(TaskTable.read("x"))
      expect(row).toMatchObject({ generation_id: "new", status: "completed", attempt: 1, result: "\"new\"" })
      expect(ran).toEqual(["old#1", "new#1"])
    }))
})

describe("eviction", () => {
  it.effect("a fresh instance on the same storage runs the interrupted work with attempt+1 and the same generation", () =>
    Effect.gen(function*() {
      const storage = yield* MemoryStorage.make
      const background = yield* TestBackground.make
      const seen: Array<string> = []
      const first = yield* instance(storage, background, {
        handler: (execution) => Effect.zipRight(Effect.sync(() => seen.push(`${execution.generation}#${execution.attempt}`)), Effect.never)
      })
      yield* first.run(TaskTable.register(first.handle, "a", 0, "gen-1"))
      expect(yield* first.run(first.handle.tryStart("a"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["gen-1#1"])
      yield* first.evict
      expect(storage.alarmAt).toBe(15_000)

      const second = yield* instance(storage, background, {
        handler: (execution) => Effect.sync(() => seen.push(`${execution.generation}#${execution.attempt}`))
      })
      yield* second.run(TestScheduler.fireAlarm(storage))
      expect(seen).toEqual(["gen-1#1", "gen-1#2"])
      expect(yield* second.run(TaskTable.read("a"))).toMatchObject({ status: "completed", attempt: 2 })
      expect(storage.alarmAt).toBeNull()
    }))
})

describe("participants and lifecycle events", () => {
  it.effect("a second participant of one kind is rejected", () =>
    Effect.gen(function*() {
      const object = yield* fresh({ handler: ok })
      const error = yield* Effect.flip(object.run(TaskTable.attach({ handler: ok })))
      expect(error).toMatchObject({
        _tag: "ParticipantConflictError",
        message: 'A "tasks" helper is already attached to this scheduler: an object takes one helper of each kind, ' +
          "so put all of its handlers in that one helper"
      })
    }))

  it.effect("events follow commits in order; a throwing hook is reported and changes nothing", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      let failNext = true
      const object = yield* fresh({
        handler: () => (failNext ? ((failNext = false), Effect.fail(new Error("once"))) : Effect.succeed(1)),
        schedule: RetryPolicy.fromDelay(() => 100),
        onEvent: (event) => {
          events.push("outcome" in event ? `${event.type}:${event.outcome}` : event.type)
          if (event.type === "attempt_started") throw new Error("hook bug")
        }
      })
      yield* object.run(TaskTable.register(object.handle, "a", 0))
      yield* TestClock.adjust(100)
      expect(events).toEqual([
        "attempt_started",
        "attempt_settled:retry_scheduled",
        "attempt_started",
        "attempt_settled:completed"
      ])
      expect((yield* object.run(TaskTable.read("a")))?.status).toBe("completed")
      const reports = yield* object.background.reports
      expect(reports.map((r) => r.event)).toEqual([
        "durability.lifecycle_hook.failed",
        "durability.lifecycle_hook.failed"
      ])
      expect(reports[0]?.details).toMatchObject({ entityKind: "task", lifecycleType: "attempt_started", entityId: "a" })
    }))
})

describe("options", () => {
  it.effect("bad options fail with a typed error naming the field", () =>
    Effect.gen(function*() {
      const cases: Array<[Scheduler.SchedulerOptions, string, "range" | "type"]> = [
        [{ alarmConcurrency: 0 }, "alarmConcurrency must be a positive integer, got 0", "range"],
        [{ alarmConcurrency: 1.5 }, "alarmConcurrency must be a positive integer, got 1.5", "range"],
        [{ alarmMinDelayMs: 999 }, "alarmMinDelayMs must be between 1000 and 15000, got 999", "range"],
        [{ alarmMinDelayMs: 15_001 }, "alarmMinDelayMs must be between 1000 and 15000, got 15001", "range"],
        [{ alarmMinDelayMs: Number.NaN }, "alarmMinDelayMs must be a positive integer, got NaN", "range"],
        [{ alarmHandoffMs: -1 }, "alarmHandoffMs must be a positive integer, got -1", "range"],
        [{ liveTimers: "yes" as unknown as boolean }, "liveTimers must be a boolean, got \"yes\"", "type"],
        [{ onAlarmRetry: 1 as unknown as () => void }, "onAlarmRetry must be a function, got 1", "type"]
      ]
      for (const [options, message, kind] of cases) {
        const error = yield* Effect.flip(SchedulerConfig.resolve(options))
        expect(error).toMatchObject({ _tag: "InvalidOptionError", message, kind })
      }
      expect(yield* SchedulerConfig.resolve({})).toMatchObject({
        alarmConcurrency: 10,
        alarmMinDelayMs: 15_000,
        alarmHandoffMs: 840_000,
        liveTimers: false
      })
    }))
})

const flushMicrotasks = Effect.promise(() => Promise.resolve()).pipe(Effect.repeatN(5))
