/**
 * `DurabilityScheduler.transaction(fn)`, the promise face of `Scheduler.transaction`, on the test kit's
 * object and clock: the caller's rows and the helpers' calls made in `fn` commit together, or none does
 * when `fn` throws or a call fails; starts and events come after the commit; a restart right after the
 * commit still runs the job once; `jobs.event(key)` and `cancelOn` in and out of the transaction.
 */
import { describe, expect, it } from "vitest"
import {
  Durability,
  DurabilityAlarms,
  DurabilityJobs,
  DurabilityScheduler,
  type DurabilityContext,
  type DurableJob,
  type DurableJobEvent
} from "durability"
import { TestObjectState } from "durability/testing"

const build = (context: DurabilityContext, log: Array<string>, alarmConcurrency?: number) => {
  // The library's diagnostics (a canceled job ending) are expected here: kept off the test output.
  const scheduler = new DurabilityScheduler({ context, log: () => undefined, ...(alarmConcurrency === undefined ? {} : { alarmConcurrency }) })
  const events: Array<DurableJobEvent> = []
  const jobs = new DurabilityJobs({
    scheduler,
    onLifecycleEvent: (event) => void events.push(event),
    queues: {
      welcome: {
        handler: (job: DurableJob<string>) => void log.push(`welcome ${job.id}#${job.attempt}`)
      },
      held: {
        // Ends when its signal is aborted.
        handler: (job: DurableJob<string>) =>
          new Promise<void>((_, reject) => {
            log.push(`held ${job.id}#${job.attempt}`)
            job.signal.addEventListener("abort", () => reject(job.signal.reason))
          })
      }
    }
  })
  const billing = new Durability({ scheduler, handlers: { charge: () => void log.push("charge") } })
  const alarms = new DurabilityAlarms({ scheduler, handlers: { renew: () => void log.push("renew") } })
  context.storage.sql.exec("CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY)")
  return { scheduler, jobs, billing, alarms, events }
}

type State = TestObjectState.TestObjectState

const users = (state: State) => state.storage.sql.exec("SELECT id FROM users ORDER BY id").toArray().map((row) => row.id)
const jobRows = (state: State) =>
  state.storage.sql.exec("SELECT id, status, cancel_reason FROM durability_jobs ORDER BY seq").toArray()

describe("DurabilityScheduler.transaction", () => {
  it("fn throws after the add: neither the user's row nor the job nor the alarm; nothing runs", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    const { events, jobs, scheduler } = build(state.context, log)
    const failure = new Error("signup refused")
    expect(() =>
      scheduler.transaction(() => {
        state.context.storage.sql.exec("INSERT INTO users (id) VALUES ('ada')")
        void jobs.welcome.add({ id: "ada", payload: "ada" })
        throw failure
      })
    ).toThrow(failure)
    expect(users(state)).toEqual([])
    expect(jobRows(state)).toEqual([])
    expect(state.storage.alarmAt).toBeNull()
    await state.advance("1 minute")
    expect(log).toEqual([])
    expect(events).toEqual([])
  })

  it("a call that fails inside rolls everything back, and transaction throws its error", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    const { billing, jobs, scheduler } = build(state.context, log)
    let bad: Promise<unknown> | undefined
    let error: unknown
    try {
      scheduler.transaction(() => {
        state.context.storage.sql.exec("INSERT INTO users (id) VALUES ('ada')")
        void billing.charge({ id: "c1", payload: null })
        bad = jobs.welcome.add({ id: "ada", payload: "ada", cancelOn: "" })
      })
    } catch (thrown) {
      error = thrown
    }
    // The promise face's InvalidInputError of kind "type".
    expect(error).toBeInstanceOf(TypeError)
    expect((error as Error).message).toContain("cancelOn")
    await expect(bad).rejects.toBe(error)
    expect(users(state)).toEqual([])
    expect(state.storage.sql.exec("SELECT COUNT(*) AS n FROM durability_calls").toArray()).toEqual([{ n: 0 }])
    expect(jobRows(state)).toEqual([])
    await state.advance("1 minute")
    expect(log).toEqual([])
  })

  it("an async function is refused and writes nothing", async () => {
    const state = await TestObjectState.make()
    const { jobs, scheduler } = build(state.context, [])
    expect(() =>
      scheduler.transaction(async () => {
        state.context.storage.sql.exec("INSERT INTO users (id) VALUES ('ada')")
        await jobs.welcome.add({ id: "ada", payload: "ada" })
      })
    ).toThrow("must be synchronous")
    expect(users(state)).toEqual([])
    expect(jobRows(state)).toEqual([])
  })

  it("a call that would wait (job(id).wait) fails the transaction: nothing written, and nothing waits on", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    const { jobs, scheduler } = build(state.context, log)
    await jobs.welcome.add({ id: "earlier", payload: "earlier", delayMs: 60_000 })
    expect(() =>
      scheduler.transaction(() => {
        state.context.storage.sql.exec("INSERT INTO users (id) VALUES ('ada')")
        void jobs.welcome.add({ id: "ada", payload: "ada" })
        void jobs.welcome.job("earlier").wait({ timeoutMs: 120_000 })
      })
    ).toThrow("had to wait")
    expect(users(state)).toEqual([])
    expect(jobRows(state).map((row) => row.id)).toEqual(["earlier"])
    await state.advance("2 minutes")
    expect(log).toEqual(["welcome earlier#1"])
  })

  it("a commit: both stay, the calls' promises are settled, the alarm was armed in it, the job runs once", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    const { alarms, events, jobs, scheduler } = build(state.context, log)
    const { added, value } = scheduler.transaction(() => {
      state.context.storage.sql.exec("INSERT INTO users (id) VALUES ('ada')")
      const added = jobs.welcome.add({ id: "ada", payload: "ada" })
      void alarms.renew(state.now() + 60_000)
      return { added, value: 7 }
    })
    expect(value).toBe(7)
    expect(await added).toEqual({ id: "ada", state: "waiting", deduplicated: false })
    expect(users(state)).toEqual(["ada"])
    expect(state.storage.alarmAt).toBe(15_000)
    await state.advance(0)
    expect(log).toEqual(["welcome ada#1"])
    expect(events.filter((event) => event.type === "added").map((event) => event.id)).toEqual(["ada"])
    await state.advance("2 minutes")
    expect(log).toEqual(["welcome ada#1", "renew"])
  })

  it("a reset right after the commit, before any start: the new instance runs the job once, from the alarm", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    // The one permit is busy, so only the committed alarm can start the job: the eager start cannot.
    const { jobs, scheduler } = build(state.context, log, 1)
    await jobs.held.add({ id: "blocker", payload: "" })
    await state.advance(0)
    scheduler.transaction(() => {
      state.context.storage.sql.exec("INSERT INTO users (id) VALUES ('ada')")
      void jobs.welcome.add({ id: "ada", payload: "ada" })
    })
    const next = await state.restart()
    const after = build(next.context, log, 1)
    // The blocker's run died with the old instance; it goes away, so the permit is free.
    expect(await after.jobs.held.cancel("blocker")).toBe(true)
    await next.advance(0)
    expect(log).toEqual(["held blocker#1"])
    expect(next.storage.alarmAt).toBe(15_000)
    await next.advance("15 seconds")
    expect(log).toEqual(["held blocker#1", "welcome ada#1"])
    await next.advance("1 minute")
    expect(log).toEqual(["held blocker#1", "welcome ada#1"])
    expect(users(next)).toEqual(["ada"])
  })

  it("jobs.event cancels the jobs naming it, in and out of a transaction; a bad key is refused", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    const { jobs, scheduler } = build(state.context, log)
    state.context.storage.sql.exec("INSERT INTO users (id) VALUES ('42')")
    await jobs.held.add({ id: "running", payload: "", cancelOn: "user.deleted:42" })
    await jobs.welcome.add({ id: "later", payload: "", delayMs: 60_000, cancelOn: "user.deleted:42" })
    await jobs.welcome.add({ id: "other", payload: "", delayMs: 60_000, cancelOn: "user.deleted:43" })
    await state.advance(0)
    expect(log).toEqual(["held running#1"])
    await expect(jobs.event("")).rejects.toThrow(TypeError)
    await expect(jobs.event("")).rejects.toThrow("key must be a non-empty string")
    expect(() =>
      scheduler.transaction(() => {
        state.context.storage.sql.exec("DELETE FROM users WHERE id = '42'")
        void jobs.event("user.deleted:42")
        throw new Error("changed my mind")
      })
    ).toThrow("changed my mind")
    expect(users(state)).toEqual(["42"])
    expect(jobRows(state).map((row) => row.status)).toEqual(["pending", "pending", "pending"])
    const canceled = scheduler.transaction(() => {
      state.context.storage.sql.exec("DELETE FROM users WHERE id = '42'")
      return jobs.event("user.deleted:42")
    })
    expect(await canceled).toBe(2)
    await state.advance(0)
    expect(users(state)).toEqual([])
    expect(jobRows(state)).toEqual([
      { id: "running", status: "canceled", cancel_reason: `event "user.deleted:42"` },
      { id: "later", status: "canceled", cancel_reason: `event "user.deleted:42"` },
      { id: "other", status: "pending", cancel_reason: null }
    ])
    expect(await jobs.event("user.deleted:43")).toBe(1)
    await state.advance("2 minutes")
    expect(log).toEqual(["held running#1"])
  })
})
