/**
 * A database written by the library before the engine's durable timers (commit 8d09dac, dumped by
 * `test/fixtures/main-8d09dac.generate.ts`): the jobs and schedules take it over in place. Retention
 * by age was a record of the jobs table ("/retention"), a lease's end the leased job's own
 * `next_attempt_at`, an envelope waiting to be sent a record of the outbox table, a schedule waiting for
 * its next slot a pending record; each is now a timer, and nothing is lost.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { readFileSync } from "node:fs"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as Schedules from "../../../src/schedules/Schedules.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { jobRow, rows } from "./support.js"

const FIXTURE = readFileSync(new URL("../../fixtures/main-8d09dac.sql", import.meta.url), "utf8")
/** The physical alarm the library had set (the first line of the dump says so). */
const ALARM = 61_000

/** Lets fibers waiting on the fake producer's (already settled) promises go on. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 5; i++) {
    yield* Effect.promise(() => Promise.resolve())
    yield* TestClock.adjust(0)
  }
})

const timers = (object: TestDurability.TestObject) => rows(object, "SELECT owner, key, at FROM durability_timers ORDER BY owner, key")

describe("a database written before the engine's timers", () => {
  it.scoped("retention, leases and the outbox become timers; each fires at its stored time", () =>
    Effect.gen(function*() {
      expect(FIXTURE.split("\n")[0]).toContain(`the alarm: ${ALARM}`)
      const storage = yield* MemoryStorage.make
      storage.sql.exec(FIXTURE)
      yield* Effect.promise(() => storage.setAlarm(ALARM))
      yield* TestClock.setTime(60_000)
      const sent: Array<unknown> = []
      const producer = {
        sendBatch: (messages: Iterable<{ readonly body: unknown }>) => {
          for (const message of messages) sent.push(message.body)
          return Promise.resolve()
        }
      }
      const object = yield* TestDurability.make({ storage, scheduler: { objectId: "object-1", alarmMinDelayMs: 1_000 } })
      const jobs = yield* object.run(Jobs.make({
        kept: Jobs.queue({ handler: () => Effect.succeed("done"), removeOnComplete: { ageMs: 100_000 } }),
        worked: Jobs.externalQueue({ leaseMs: 20_000 }),
        pushed: Jobs.externalQueue({ leaseMs: 30_000, processing: { queue: producer } })
      }))
      const ran: Array<number> = []
      yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: (run) => Effect.sync(() => void ran.push(run.scheduledTime)) }) }))

      // Migrated: the retention record is gone; every waiting thing has its timer at its stored time.
      expect(yield* rows(object, "SELECT key FROM durability_jobs WHERE key = '/retention'")).toEqual([])
      expect(yield* timers(object)).toEqual([
        { owner: "jobs", key: "outbox/pushed", at: 61_000 },
        { owner: "jobs", key: "retention", at: 100_001 },
        { owner: "jobs.lease", key: "pushed/p", at: 90_000 },
        { owner: "jobs.lease", key: "worked/w", at: 80_000 },
        { owner: "schedules", key: "tick/every", at: 90_000 }
      ])
      expect(storage.alarmAt).toBe(ALARM)

      // The envelope whose send failed is sent at its retry time, and leaves the outbox.
      yield* TestClock.setTime(61_000)
      yield* settle
      expect(sent).toEqual([{ v: 1, object: "object-1", queue: "pushed", jobId: "p", token: 1 }])
      expect(yield* rows(object, "SELECT key FROM durability_job_outbox")).toEqual([])

      // The worker's lease ends unrenewed: the job waits for a lease again, its stall counted.
      yield* TestClock.setTime(80_000)
      yield* settle
      expect(yield* jobRow(object, "worked", "w")).toMatchObject({ status: "pending", leased_until: null, stalled: 1, attempt: 1 })
      expect((yield* object.run(jobs.worked.lease())).map((lease) => [lease.id, lease.attempt])).toEqual([["w", 2]])

      // The pushed job nobody started: reclaimed at its lease's end and sent again with a new token. The
      // schedule runs its slot, and waits for the next one on its timer.
      yield* TestClock.setTime(90_000)
      yield* settle
      expect(ran).toEqual([90_000])
      expect((yield* timers(object)).filter((timer) => timer.owner === "schedules")).toEqual([
        { owner: "schedules", key: "tick/every", at: 135_000 }
      ])
      expect(sent).toHaveLength(2)
      expect(sent[1]).toMatchObject({ jobId: "p", token: 2 })

      // The completed job passes its age: retention removes it with no other activity.
      expect(yield* jobRow(object, "kept", "k")).toMatchObject({ status: "completed" })
      yield* TestClock.setTime(100_001)
      yield* settle
      expect(yield* jobRow(object, "kept", "k")).toBeUndefined()
      expect((yield* timers(object)).map((timer) => `${String(timer.owner)}/${String(timer.key)}`)).not.toContain("jobs/retention")
    }))
})
