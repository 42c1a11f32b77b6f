/**
 * The inspector over operations, named alarms and schedules: each one's overview counts, pages
 * walked by cursor, and its actions through the capability's own calls (asserted on the rows and
 * events they leave); a request about a call, alarm or schedule that is not there is `NotFound`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type * as Lifecycle from "../../../src/engine/Lifecycle.js"
import * as NamedAlarms from "../../../src/alarms/NamedAlarms.js"
import * as Operations from "../../../src/operations/Operations.js"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { rows } from "../jobs/support.js"
import { failureOf, valueOf, walk } from "./support.js"

describe("inspector: operations", () => {
  it.scoped("counts by status, pages across operations (filtered by status), cancel and purge", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const events: Array<Lifecycle.LifecycleEvent> = []
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          retries: { maxAttempts: 1 },
          handler: (call: Operations.DurableCall<{ readonly cents: number }>) =>
            call.payload.cents < 0 ? Effect.fail(new Error("negative amount")) : Effect.succeed({ ok: call.payload.cents })
        }),
        refund: Operations.operation({ handler: (_: Operations.DurableCall<null>) => Effect.succeed(null) })
      }, { onLifecycleEvent: (event) => void events.push(event) }))
      for (let i = 0; i < 7; i++) {
        yield* object.run(ops.register("charge", { id: `c${i}`, payload: { cents: i === 3 ? -1 : i * 100 } }))
        yield* TestClock.adjust(1)
      }
      yield* object.run(ops.register("refund", { id: "r1", payload: null, delayMs: 60_000 }))
      yield* object.run(ops.register("charge", { id: "c9", payload: { cents: 9 }, delayMs: 60_000 }))
      yield* TestClock.adjust(1)

      const overview = yield* valueOf(object, { _tag: "Overview" })
      expect(overview.scheduler.capabilities).toEqual(["operations"])
      expect(overview.operations).toEqual({ counts: { pending: 2, completed: 6, failed: 1 } })

      const all = yield* walk(object, { _tag: "Operations", limit: 4 })
      expect(all.pages).toBe(3)
      expect(all.items.map((item) => item.id)).toEqual(["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c9", "r1"])
      expect(all.items[1]).toEqual({
        id: "c1",
        operation: "charge",
        status: "completed",
        attempt: 1,
        nextAttemptAt: null,
        createdAt: 1,
        payload: { json: "{\"cents\":100}", truncated: false },
        result: { json: "{\"ok\":100}", truncated: false }
      })
      expect(all.items[3]).toMatchObject({ id: "c3", status: "failed", error: { name: "Error", message: "negative amount" } })
      expect(all.items[8]).toMatchObject({ id: "r1", operation: "refund", status: "pending", attempt: 0, nextAttemptAt: 60_007 })
      const pending = yield* walk(object, { _tag: "Operations", status: "pending", limit: 1 })
      expect(pending.items.map((item) => item.id)).toEqual(["c9", "r1"])

      expect(yield* valueOf(object, { _tag: "CancelOperation", operation: "refund", id: "r1" })).toEqual({ changed: 1 })
      expect(yield* rows(object, "SELECT status, last_error_name FROM durability_calls WHERE id = 'r1'")).toEqual([
        { status: "failed", last_error_name: "DurableCanceledError" }
      ])
      expect(events.filter((event) => event.type === "terminal" && event.id === "r1")).toHaveLength(1)
      expect(yield* valueOf(object, { _tag: "CancelOperation", operation: "refund", id: "r1" })).toEqual({ changed: 0 })
      expect(yield* failureOf(object, { _tag: "CancelOperation", operation: "refund", id: "c9" })).toEqual({
        _tag: "NotFound",
        message: "No call \"c9\" of operation \"refund\""
      })
      expect((yield* rows(object, "SELECT status FROM durability_calls WHERE id = 'c9'"))[0]?.status).toBe("pending")

      expect(yield* valueOf(object, { _tag: "PurgeBefore", capability: "operations", before: 3 })).toEqual({ changed: 3 })
      expect((yield* rows(object, "SELECT id FROM durability_calls ORDER BY id")).map((row) => row.id)).toEqual(["c3", "c4", "c5", "c6", "c9", "r1"])
    }))
})

describe("inspector: named alarms", () => {
  it.scoped("pending and failed counts, pages by cursor, cancel and purge", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const alarms = yield* object.run(NamedAlarms.make({
        a: NamedAlarms.alarm({ handler: () => Effect.void }),
        b: NamedAlarms.alarm({ handler: () => Effect.void }),
        c: NamedAlarms.alarm({ retries: { maxAttempts: 1 }, handler: () => Effect.fail(new Error("no luck")) })
      }))
      yield* object.run(alarms.schedule("c", 5))
      yield* TestClock.adjust(10)
      yield* object.run(alarms.schedule("b", 60_000))
      yield* TestClock.adjust(1)
      yield* object.run(alarms.schedule("a", 120_000))

      expect((yield* valueOf(object, { _tag: "Overview" })).alarms).toEqual({ pending: 2, failed: 1 })
      const all = yield* walk(object, { _tag: "Alarms", limit: 2 })
      expect(all.pages).toBe(2)
      expect(all.items).toEqual([
        { name: "c", status: "failed", scheduledTime: 5, nextAttemptAt: 5, attempt: 1, error: { name: "Error", message: "no luck" }, createdAt: 0 },
        { name: "b", status: "pending", scheduledTime: 60_000, nextAttemptAt: 60_000, attempt: 0, createdAt: 10 },
        { name: "a", status: "pending", scheduledTime: 120_000, nextAttemptAt: 120_000, attempt: 0, createdAt: 11 }
      ])

      expect(yield* valueOf(object, { _tag: "CancelAlarm", name: "b" })).toEqual({ changed: 1 })
      expect((yield* rows(object, "SELECT name FROM durability_alarms ORDER BY name")).map((row) => row.name)).toEqual(["a", "c"])
      expect(yield* failureOf(object, { _tag: "CancelAlarm", name: "b" })).toEqual({
        _tag: "NotFound",
        message: "No alarm \"b\" is scheduled in this object"
      })
      // The physical alarm follows: only "a" is pending now.
      expect(object.storage.alarmAt).toBe(120_000)
      expect(yield* valueOf(object, { _tag: "PurgeBefore", capability: "alarms", before: 1 })).toEqual({ changed: 1 })
      expect((yield* rows(object, "SELECT name FROM durability_alarms")).map((row) => row.name)).toEqual(["a"])
    }))
})

describe("inspector: schedules", () => {
  it.scoped("active, paused and ended counts; pages by row key; trigger, pause, resume and purge", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const runs: Array<string> = []
      const schedules = yield* object.run(Schedules.make({
        report: Schedules.schedule({
          handler: (run: Schedules.ScheduleRun<{ readonly to: string }>) => Effect.sync(() => void runs.push(`${run.key}${run.manual ? ":manual" : ""}`))
        }),
        sweep: Schedules.schedule({ handler: () => Effect.void })
      }))
      yield* object.run(schedules.report.upsert("daily", { everyMs: 86_400_000 }, { payload: { to: "ops" } }))
      yield* object.run(schedules.report.upsert("weekly", { cron: "0 9 * * 1" }, { payload: { to: "boss" } }))
      yield* object.run(schedules.sweep.upsert("once", { everyMs: 1_000 }, { limit: 1 }))
      yield* TestClock.adjust(1_000)
      yield* object.run(schedules.report.pause("weekly"))

      expect((yield* valueOf(object, { _tag: "Overview" })).schedules).toEqual({ active: 1, paused: 1, ended: 1 })
      const all = yield* walk(object, { _tag: "Schedules", limit: 2 })
      expect(all.pages).toBe(2)
      expect(all.items.map((item) => `${item.key}:${item.status}`)).toEqual(["report/daily:active", "report/weekly:paused", "sweep/once:ended"])
      expect(all.items[0]).toMatchObject({
        key: "report/daily",
        schedule: "report",
        description: expect.stringContaining("86400000"),
        nextRunAt: 86_400_000,
        currentRun: null,
        lastRun: null,
        runCount: 0,
        missedCount: 0,
        payload: { json: "{\"to\":\"ops\"}", truncated: false },
        createdAt: 0
      })
      expect(all.items[2]).toMatchObject({ lastRun: { outcome: "completed", scheduledTime: 1_000, runNumber: 1 }, runCount: 1 })

      expect(yield* valueOf(object, { _tag: "TriggerSchedule", key: "report/daily" })).toEqual({ changed: 1 })
      yield* TestClock.adjust(10)
      expect(runs).toEqual(["daily:manual"])
      expect(yield* valueOf(object, { _tag: "PauseSchedule", key: "report/daily" })).toEqual({ changed: 1 })
      expect(yield* valueOf(object, { _tag: "PauseSchedule", key: "report/daily" })).toEqual({ changed: 0 })
      expect(yield* valueOf(object, { _tag: "ResumeSchedule", key: "report/weekly" })).toEqual({ changed: 1 })
      expect(yield* rows(object, "SELECT key, paused FROM durability_schedules ORDER BY key")).toEqual([
        { key: "report/daily", paused: 1 },
        { key: "report/weekly", paused: 0 },
        { key: "sweep/once", paused: 0 }
      ])

      for (const [key, text] of [["report/monthly", "No schedule \"report/monthly\" in this object"], ["daily", "a schedule is named \"<schedule>/<key>\" (schedules: report, sweep)"], ["mail/daily", "No schedule \"mail/daily\""]] as const) {
        const failure = yield* failureOf(object, { _tag: "TriggerSchedule", key })
        expect(failure._tag).toBe("NotFound")
        expect(failure.message).toContain(text)
      }
      expect(yield* valueOf(object, { _tag: "PurgeBefore", capability: "schedules", before: 1 })).toEqual({ changed: 3 })
      expect(yield* rows(object, "SELECT key FROM durability_schedules")).toEqual([])
    }))
})

describe("inspector: the scheduler summary", () => {
  it.scoped("the physical alarm, the early timer, permits, and the keys running while their handlers are held open", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 2, alarmMinDelayMs: 1_000 } })
      const gate = yield* Effect.makeLatch(false)
      const ops = yield* object.run(Operations.make({
        slow: Operations.operation({ handler: (_: Operations.DurableCall<null>) => gate.await })
      }))
      const alarms = yield* object.run(NamedAlarms.make({ wake: NamedAlarms.alarm({ handler: () => Effect.void }) }))
      yield* object.run(alarms.schedule("wake", 50_000))
      const idle = (yield* valueOf(object, { _tag: "Overview" })).scheduler
      expect(idle).toEqual({
        objectId: null,
        physicalAlarm: 50_000,
        earlyTimer: null,
        permits: { capacity: 2, available: 2, waiting: 0 },
        runningCount: 0,
        running: [],
        capabilities: ["operations", "alarms"],
        now: 0
      })

      // Three calls, two permits: two run (held open), one waits for a permit.
      for (const id of ["x", "y", "z"]) yield* object.run(ops.register("slow", { id, payload: null }))
      yield* TestClock.adjust(1)
      // And one due inside the min-delay window: the early timer takes it.
      yield* object.run(ops.register("slow", { id: "soon", payload: null, delayMs: 500 }))
      const busy = (yield* valueOf(object, { _tag: "Overview" })).scheduler
      expect(busy).toMatchObject({ permits: { capacity: 2, available: 0, waiting: 1 }, runningCount: 2, earlyTimer: 501, now: 1 })
      expect(busy.running).toEqual([{ capability: "operations", key: "x" }, { capability: "operations", key: "y" }])

      yield* gate.open
      yield* TestClock.adjust(1_000)
      const done = (yield* valueOf(object, { _tag: "Overview" })).scheduler
      expect(done).toMatchObject({ runningCount: 0, running: [], permits: { available: 2, waiting: 0 }, physicalAlarm: 50_000 })
      expect(done.physicalAlarm).toBe(object.storage.alarmAt)
    }))
})
