/**
 * `Scheduler.transaction` across capabilities: an operation's registration, a named alarm, a schedule's
 * upsert and a job, with the caller's own row, commit together or not at all; the physical alarm is
 * reconciled inside the same transaction (a rollback leaves the one before, and the engine knows it).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, TestClock } from "effect"
import * as Jobs from "../../src/jobs/Jobs.js"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Operations from "../../src/operations/Operations.js"
import * as Schedules from "../../src/schedules/Schedules.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import { StorageService } from "../../src/engine/StorageService.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

const setup = Effect.gen(function*() {
  const object = yield* TestDurability.make()
  const ran: Array<string> = []
  const ops = yield* object.run(Operations.make({
    charge: Operations.operation({ handler: (call) => Effect.sync(() => void ran.push(`charge ${call.id}`)) })
  }))
  const alarms = yield* object.run(NamedAlarms.make({
    renew: NamedAlarms.alarm({ handler: () => Effect.sync(() => void ran.push("renew")) })
  }))
  const schedules = yield* object.run(Schedules.make({
    digest: Schedules.schedule({ handler: (run) => Effect.sync(() => void ran.push(`digest ${run.key}`)) })
  }))
  const jobs = yield* object.run(Jobs.make({
    email: Jobs.queue({ handler: (job: Jobs.JobContext<string>) => Effect.sync(() => void ran.push(`email ${job.id}`)) })
  }))
  object.storage.sql.exec("CREATE TABLE orders (id TEXT PRIMARY KEY)")
  const order = (id: string, fail: boolean) =>
    Scheduler.transaction(Effect.gen(function*() {
      const storage = yield* StorageService
      yield* storage.exec("INSERT INTO orders (id) VALUES (?)", [id])
      yield* ops.register("charge", { id, payload: null })
      yield* alarms.schedule("renew", (yield* Effect.clockWith((clock) => clock.currentTimeMillis)) + 30_000)
      yield* schedules.digest.upsert(id, { everyMs: 60_000 })
      yield* jobs.email.add({ id, payload: id, delayMs: 5_000 })
      if (fail) return yield* Effect.fail("payment refused" as const)
    }))
  const counts = () =>
    Object.fromEntries(["orders", "durability_calls", "durability_alarms", "durability_schedules", "durability_jobs"].map((table) =>
      [table, Number(object.storage.sql.exec(`SELECT COUNT(*) AS n FROM ${table}`).toArray()[0]?.n)]
    ))
  return { object, ran, order, counts, ops }
})

describe("Scheduler.transaction across capabilities", () => {
  it.scoped("a rollback leaves no row of any of them and the alarm as it was; a commit runs each once", () =>
    Effect.gen(function*() {
      const { counts, object, order, ran } = yield* setup
      const none = { orders: 0, durability_calls: 0, durability_alarms: 0, durability_schedules: 0, durability_jobs: 0 }
      expect(counts()).toEqual(none)
      expect(yield* Effect.exit(object.run(order("o1", true)))).toEqual(Exit.fail("payment refused"))
      expect(counts()).toEqual(none)
      expect(object.storage.alarmAt).toBeNull()
      yield* TestClock.adjust(120_000)
      expect(ran).toEqual([])

      yield* object.run(order("o2", false))
      expect(counts()).toEqual({ orders: 1, durability_calls: 1, durability_alarms: 1, durability_schedules: 1, durability_jobs: 1 })
      // The registration was due now: the alarm was set inside the commit at now + the minimum delay.
      expect(object.storage.alarmAt).toBe(120_000 + 15_000)
      yield* TestClock.adjust(0)
      expect(ran).toEqual(["charge o2"])
      yield* TestClock.adjust(60_000)
      expect([...ran].sort()).toEqual(["charge o2", "digest o2", "email o2", "renew"])
    }))

  it.scoped("a rollback after an earlier alarm was set keeps that alarm, and the engine knows it", () =>
    Effect.gen(function*() {
      const { object, ops, order, ran } = yield* setup
      yield* object.run(order("o1", false))
      yield* TestClock.adjust(40_000)
      expect([...ran].sort()).toEqual(["charge o1", "email o1", "renew"])
      // Only the schedule's next slot is pending.
      expect(object.storage.alarmAt).toBe(60_000)
      yield* Effect.exit(object.run(order("o2", true)))
      // Not moved to now + 15 s by the rolled-back registration.
      expect(object.storage.alarmAt).toBe(60_000)
      // Had the engine kept the rolled-back alarm in mind, it would now see 55 000 as set and write nothing.
      yield* object.run(ops.register("charge", { id: "o3", payload: null }))
      expect(object.storage.alarmAt).toBe(55_000)
      yield* TestClock.adjust(120_000)
      expect(ran.filter((entry) => entry.includes("o2"))).toEqual([])
    }))
})
