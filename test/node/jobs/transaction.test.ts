/**
 * Adding jobs inside the caller's own transaction (`Scheduler.transaction`): the caller's rows and the
 * job commit together or not at all, the alarm with them; what acts in memory (the eager start, the
 * events) waits for the commit; a restart right after the commit still runs the job once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as Scheduler from "../../../src/engine/Scheduler.js"
import { StorageService } from "../../../src/engine/StorageService.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { count, dump, gates, jobRow, recorder, type TestObject } from "./support.js"

const USERS = "CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, name TEXT NOT NULL)"

const setup = (object: TestObject, calls: Array<string>, held = gates()) =>
  Effect.gen(function*() {
    const events = recorder()
    const jobs = yield* object.run(Jobs.make({
      welcome: Jobs.queue({
        handler: (job: Jobs.JobContext<string>) => Effect.sync(() => void calls.push(`${job.id}#${job.attempt}`))
      }),
      // Runs until the test opens its gate.
      busy: Jobs.queue({
        handler: (job: Jobs.JobContext<string>) =>
          Effect.zipRight(Effect.sync(() => void calls.push(`${job.id}#${job.attempt}`)), held.wait(`${job.id}#${job.attempt}`))
      })
    }, { onLifecycleEvent: events.hook }))
    object.storage.sql.exec(USERS)
    return { jobs, events }
  })

/** The caller's row and a welcome job for it, in one transaction; `then` runs last inside it. */
const signUp = <E>(jobs: Effect.Effect.Success<ReturnType<typeof setup>>["jobs"], id: string, then: Effect.Effect<void, E> = Effect.void) =>
  Scheduler.transaction(Effect.gen(function*() {
    const storage = yield* StorageService
    yield* storage.exec("INSERT INTO users (id, name) VALUES (?, ?)", [id, `user ${id}`])
    const added = yield* jobs.welcome.add({ id, payload: id })
    yield* then
    return added
  }))

describe("Scheduler.transaction with jobs", () => {
  it.scoped("a failure after the add leaves neither the caller's row nor the job, nor an alarm, nor an event", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const { events, jobs } = yield* setup(object, calls)
      const before = yield* dump(object)
      const exit = yield* Effect.exit(object.run(signUp(jobs, "ada", Effect.fail("card declined" as const))))
      expect(exit).toEqual(Exit.fail("card declined"))
      expect(yield* count(object, "SELECT COUNT(*) FROM users")).toBe(0)
      expect(yield* dump(object)).toEqual(before)
      expect(object.storage.alarmAt).toBeNull()
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual([])
      expect(events.events).toEqual([])
      // The engine still knows the alarm is unset: the next add arms it.
      yield* object.run(jobs.welcome.add({ id: "later", payload: "later", delayMs: 120_000 }))
      expect(object.storage.alarmAt).toBe(60_000 + 120_000)
    }))

  it.scoped("a thrown defect rolls back too", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const { jobs } = yield* setup(object, calls)
      const exit = yield* Effect.exit(object.run(signUp(jobs, "ada", Effect.die(new Error("bug")))))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(yield* count(object, "SELECT COUNT(*) FROM users")).toBe(0)
      expect(yield* jobRow(object, "welcome", "ada")).toBeUndefined()
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual([])
    }))

  it.scoped("a body that would wait fails and writes nothing", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const { jobs } = yield* setup(object, calls)
      const exit = yield* Effect.exit(object.run(signUp(jobs, "ada", Effect.sleep(10))))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(yield* count(object, "SELECT COUNT(*) FROM users")).toBe(0)
      expect(yield* jobRow(object, "welcome", "ada")).toBeUndefined()
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual([])
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("a commit keeps both, arms the alarm in it, tells `added` after it and runs the job once", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const { events, jobs } = yield* setup(object, calls)
      const added = yield* object.run(signUp(jobs, "ada"))
      expect(added).toEqual({ id: "ada", state: "waiting", deduplicated: false })
      expect(yield* count(object, "SELECT COUNT(*) FROM users")).toBe(1)
      expect(yield* jobRow(object, "welcome", "ada")).toMatchObject({ status: "pending" })
      expect(object.storage.alarmAt).toBe(15_000)
      expect(events.of("added").map((event) => event.id)).toEqual(["ada"])
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["ada#1"])
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual(["ada#1"])
      expect(yield* jobRow(object, "welcome", "ada")).toMatchObject({ status: "completed", attempt: 1 })
    }))

  it.scoped("a restart right after the commit, before any start: the alarm wakes the new instance, the job runs once", () =>
    Effect.gen(function*() {
      // The one permit is busy, so the commit's eager start cannot take the job: only the durable alarm can.
      const first = yield* TestDurability.make({ scheduler: { alarmConcurrency: 1 } })
      const calls: Array<string> = []
      const held = gates()
      const before = yield* setup(first, calls, held)
      yield* first.run(before.jobs.busy.add({ id: "blocker", payload: "" }))
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["blocker#1"])
      yield* first.run(signUp(before.jobs, "ada"))
      expect(yield* jobRow(first, "welcome", "ada")).toMatchObject({ status: "pending", attempt: 0 })
      const second = yield* first.restart
      yield* setup(second, calls, held)
      yield* held.open("blocker#2")
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["blocker#1"])
      expect(second.storage.alarmAt).toBe(15_000)
      yield* TestClock.adjust(15_000)
      expect([...calls].sort()).toEqual(["ada#1", "blocker#1", "blocker#2"])
      yield* TestClock.adjust(60_000)
      expect(calls.filter((call) => call.startsWith("ada"))).toEqual(["ada#1"])
      expect(yield* jobRow(second, "welcome", "ada")).toMatchObject({ status: "completed", attempt: 1 })
      expect(yield* count(second, "SELECT COUNT(*) FROM users")).toBe(1)
    }))

  it.scoped("several adds and a flow in one transaction: all or none", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const { jobs } = yield* setup(object, calls)
      const body = (fail: boolean) =>
        Scheduler.transaction(Effect.gen(function*() {
          yield* jobs.welcome.addBulk([{ id: "a", payload: "a" }, { id: "b", payload: "b", delayMs: 1_000 }])
          yield* jobs.flow({ queue: "welcome", id: "parent", payload: "p", children: [{ queue: "welcome", id: "child", payload: "c" }] })
          if (fail) return yield* Effect.fail("no")
        }))
      yield* Effect.exit(object.run(body(true)))
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs")).toBe(0)
      yield* object.run(body(false))
      yield* TestClock.adjust(2_000)
      expect([...calls].sort()).toEqual(["a#1", "b#1", "child#1", "parent#1"])
    }))

  it.scoped("a nested transaction joins the outer one", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const { jobs } = yield* setup(object, calls)
      const exit = yield* Effect.exit(object.run(Scheduler.transaction(Effect.gen(function*() {
        yield* Scheduler.transaction(jobs.welcome.add({ id: "inner", payload: "x" }))
        return yield* Effect.fail("outer fails")
      }))))
      expect(exit).toEqual(Exit.fail("outer fails"))
      expect(yield* jobRow(object, "welcome", "inner")).toBeUndefined()
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual([])
    }))
})
