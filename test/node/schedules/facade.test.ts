/**
 * The promise face, `DurabilitySchedules`, over in-memory storage on the live clock (nothing here
 * waits on a slot: runs are triggered): construction errors naming the field, upsert/get/list,
 * trigger, pause/resume/remove, bad input as TypeError/RangeError, `enqueue` into a queue, migrate.
 */
import { describe, expect, it } from "vitest"
import {
  DurabilityJobs,
  DurabilityScheduler,
  DurabilitySchedules,
  durabilityScheduleMigrations,
  type DurableJob,
  type DurableScheduleRun
} from "../../../src/index.js"
import { memoryContext, thrownBy } from "../support/promise.js"

const quiet = () => undefined

/** Resolves with the next run the handler sees. */
const runs = () => {
  const seen: Array<DurableScheduleRun<unknown>> = []
  const waiters: Array<() => void> = []
  return {
    seen,
    handler: async (run: DurableScheduleRun<unknown>) => {
      seen.push(run)
      waiters.splice(0).forEach((wake) => wake())
    },
    next: (count: number) =>
      new Promise<void>((resolve) => {
        const check = () => (seen.length >= count ? resolve() : waiters.push(check))
        check()
      })
  }
}

describe("DurabilitySchedules construction", () => {
  it("refuses bad configs with TypeError / RangeError naming the field, before any table is made", async () => {
    const context = await memoryContext()
    const handler = async () => undefined
    const cases: ReadonlyArray<readonly [() => unknown, new(...args: Array<never>) => Error, string]> = [
      [() => new DurabilitySchedules({ context, handlers: { digest: handler }, concurrency: 0 }), RangeError, "concurrency must be a positive integer"],
      [() => new DurabilitySchedules({ context, handlers: { digest: "no" as never } }), TypeError, "handlers.digest must be a function"],
      [() => new DurabilitySchedules({ context, handlers: { "a/b": handler } }), TypeError, `A schedule name cannot contain "/"`],
      [() => new DurabilitySchedules({ context, handlers: { purgeBefore: handler } }), Error, `"purgeBefore" is reserved by DurabilitySchedules`],
      [() => new DurabilitySchedules({ context, handlers: { digest: handler }, methods: { digest: { retries: { maxAttempts: 0 } } } }), RangeError, "methods.digest.retries.maxAttempts"],
      [() => new DurabilitySchedules(null as never), TypeError, "config"],
      [() => DurabilitySchedules.enqueue({} as never), TypeError, "needs a queue of DurabilityJobs"]
    ]
    for (const [build, ErrorClass, text] of cases) {
      const error = thrownBy(build)
      expect(error, text).toBeInstanceOf(ErrorClass)
      expect(error.message, text).toContain(text)
    }
    expect(context.memory.sql.exec("SELECT name FROM sqlite_master WHERE name = 'durability_schedules'").toArray()).toEqual([])
  })
})

describe("DurabilitySchedules", () => {
  it("upsert, get, list, trigger, pause, resume and remove", async () => {
    const context = await memoryContext()
    const digest = runs()
    const schedules = new DurabilitySchedules({ context, log: quiet, handlers: { digest: digest.handler } })
    expect(Object.keys(schedules)).toEqual(["digest"])
    const created = await schedules.digest.upsert("u1", { cron: "0 9 * * *", timezone: "Europe/Lisbon" }, { payload: { userId: "u1" } })
    expect(created).toMatchObject({ created: true, changed: true })
    expect(await schedules.digest.upsert("u1", { cron: "0 9 * * *", timezone: "Europe/Lisbon" }, { payload: { userId: "u1" } }))
      .toEqual({ ...created, created: false, changed: false })
    expect(await schedules.digest.get("u1")).toMatchObject({
      key: "u1",
      status: "active",
      description: `cron "0 9 * * *" in Europe/Lisbon`,
      payload: { userId: "u1" },
      nextRunAt: created.nextRunAt,
      runCount: 0
    })
    expect(await schedules.digest.trigger("u1")).toBe(true)
    await digest.next(1)
    expect(digest.seen[0]).toMatchObject({ schedule: "digest", key: "u1", manual: true, runNumber: 1, attempt: 1, payload: { userId: "u1" } })
    await schedules.digest.upsert("u2", { everyMs: 3_600_000 })
    const page = await schedules.digest.list({ limit: 1 })
    expect(page.items.map((item) => item.key)).toEqual(["u1"])
    expect((await schedules.digest.list({ cursor: page.cursor })).items.map((item) => item.key)).toEqual(["u2"])
    expect(await schedules.digest.pause("u2")).toBe(true)
    expect((await schedules.digest.get("u2"))?.status).toBe("paused")
    expect(await schedules.digest.resume("u2")).toBe(true)
    expect(await schedules.digest.remove("u2")).toBe(true)
    expect(await schedules.digest.get("u2")).toBeUndefined()
    expect(await schedules.digest.remove("u2")).toBe(false)
    await expect(schedules.digest.upsert("u3", { cron: "not a cron" })).rejects.toThrow(TypeError)
    await expect(schedules.digest.upsert("u3", { everyMs: 5 })).rejects.toThrow(RangeError)
    await expect(schedules.digest.upsert("u3", { everyMs: 5_000 }, { limit: -1 })).rejects.toThrow(/options\.limit/)
  })

  it("enqueue: each run adds one job to a DurabilityJobs queue, keyed by the slot's idempotency key", async () => {
    const context = await memoryContext()
    const scheduler = new DurabilityScheduler({ context, log: quiet })
    const mailed: Array<unknown> = []
    let delivered!: () => void
    const done = new Promise<void>((resolve) => (delivered = resolve))
    const jobs = new DurabilityJobs({
      scheduler,
      queues: {
        email: {
          handler: async (job: DurableJob<{ readonly to: string }>) => {
            mailed.push([job.id, job.payload])
            delivered()
          }
        }
      }
    })
    const schedules = new DurabilitySchedules({ scheduler, handlers: { nightly: DurabilitySchedules.enqueue(jobs.email) } })
    await schedules.nightly.upsert("n", { everyMs: 3_600_000 }, { payload: { to: "a@example.com" } })
    await schedules.nightly.trigger("n")
    await done
    expect(mailed).toEqual([[expect.stringMatching(/^durability-schedule:v1:nightly\/n@manual:/), { to: "a@example.com" }]])
  })

  it("migrate applies and reverts the schedules table", async () => {
    const context = await memoryContext()
    expect(DurabilitySchedules.migrate(context)).toEqual({ applied: durabilityScheduleMigrations.map((m) => m.name), rolledBack: [] })
    expect(DurabilitySchedules.migrate(context, null)).toEqual({ applied: [], rolledBack: durabilityScheduleMigrations.map((m) => m.name).reverse() })
  })
})
