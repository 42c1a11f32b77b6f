/**
 * The Effect face's time options take a `Duration` or anything `Duration.decode` takes ("5 seconds",
 * `Duration.minutes(1)`; a number is milliseconds): execution options (`attemptTimeoutMs`,
 * `retries.delay`), the scheduler's settings, a queue's `leaseMs` and retention `ageMs`, a schedule's
 * `graceMs`; and the calls' own times: a job's `delayMs`, `dedup.ttlMs`, `wait`'s `timeoutMs`,
 * `clean`'s `olderThanMs`, `lease`'s `leaseMs` and `heartbeat`'s `extendMs`, an operation call's
 * `delayMs` and `wait`'s `timeoutMs`, a schedule's interval `everyMs`. A bad one is refused naming its field (a call's: before any
 * storage access); the promise face's scheduler settings stay milliseconds only.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, TestClock } from "effect"
import * as RetryPolicy from "../../src/engine/RetryPolicy.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import * as SchedulerConfig from "../../src/engine/SchedulerConfig.js"
import * as Jobs from "../../src/jobs/Jobs.js"
import * as QueueOptions from "../../src/jobs/options.js"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Operations from "../../src/operations/Operations.js"
import * as Schedules from "../../src/schedules/Schedules.js"
import * as ScheduleOptions from "../../src/schedules/options.js"
import * as TestDurability from "../../src/testing/TestDurability.js"
import { dump, rows } from "./jobs/support.js"

const handler = () => Effect.void

describe("Duration inputs on the Effect face", () => {
  it.scoped("attemptTimeoutMs and retries.delay as Durations run exactly as their milliseconds do", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ranAt: Record<string, Array<number>> = { inherits: [], own: [] }
      const record = (name: string) => Effect.map(Clock.currentTimeMillis, (now) => ranAt[name]?.push(now))
      const ops = yield* object.run(Operations.make({
        inherits: Operations.operation({
          handler: () => Effect.zipRight(record("inherits"), Effect.sleep("30 seconds"))
        }),
        own: Operations.operation({
          attemptTimeoutMs: "1 second",
          retries: { maxAttempts: 2, delay: () => Duration.millis(100) },
          handler: () => Effect.zipRight(record("own"), Effect.sleep("30 seconds"))
        })
      }, { attemptTimeoutMs: Duration.seconds(10), retries: { maxAttempts: 3, delay: (attempt) => `${attempt} seconds` } }))
      yield* object.run(ops.register("inherits", { id: "i", payload: null }))
      yield* object.run(ops.register("own", { id: "o", payload: null }))
      yield* TestClock.adjust(60_000)
      expect(ranAt).toEqual({ inherits: [0, 11_000, 23_000], own: [0, 1_100] })
      expect(yield* object.run(ops.getResult("own", "o"))).toMatchObject({
        status: "failed",
        error: { name: "DurableAttemptTimeoutError", message: "Durable operation \"own\" timed out after 1000ms" }
      })
    }))

  it.scoped("the scheduler's settings as Durations (Scheduler.layer*, TestDurability)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({
        scheduler: { alarmMinDelayMs: "5 seconds", alarmHandoffMs: Duration.minutes(10) }
      })
      const { config } = yield* object.run(Scheduler.Scheduler)
      expect([config.alarmMinDelayMs, config.alarmHandoffMs]).toEqual([5_000, 600_000])
      // A Duration is rounded to whole milliseconds.
      expect(yield* SchedulerConfig.resolve({ alarmMinDelayMs: Duration.micros(1_000_400n) })).toMatchObject({
        alarmMinDelayMs: 1_000
      })
    }))

  it.effect("bad scheduler Durations: InvalidOptionError naming the field, with what it must be", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [SchedulerConfig.SchedulerOptions, string, string]> = [
        [{ alarmMinDelayMs: "soon" as never }, "alarmMinDelayMs", "alarmMinDelayMs must be a Duration or a number of milliseconds, got \"soon\""],
        [{ alarmMinDelayMs: "500 millis" }, "alarmMinDelayMs", "alarmMinDelayMs must be between 1 second and 15 seconds, got \"500 millis\""],
        [{ alarmMinDelayMs: Duration.seconds(20) }, "alarmMinDelayMs", "alarmMinDelayMs must be between 1 second and 15 seconds, got Duration(20s)"],
        [{ alarmMinDelayMs: "-5 seconds" }, "alarmMinDelayMs", "alarmMinDelayMs must be a finite Duration of at least 1 millisecond, got \"-5 seconds\""],
        [{ alarmHandoffMs: Duration.infinity }, "alarmHandoffMs", "alarmHandoffMs must be a finite Duration of at least 1 millisecond, got Duration(Infinity)"],
        [{ alarmHandoffMs: Duration.zero }, "alarmHandoffMs", "alarmHandoffMs must be a finite Duration of at least 1 millisecond, got Duration(0)"],
        [{ alarmHandoffMs: { seconds: 5 } as never }, "alarmHandoffMs", "alarmHandoffMs must be a Duration or a number of milliseconds, got an object"]
      ]
      for (const [options, field, message] of cases) {
        const error = yield* Effect.flip(SchedulerConfig.resolve(options))
        expect(error, message).toMatchObject({ _tag: "InvalidOptionError", field, kind: "range", message })
        const layered = yield* Effect.flip(Effect.scoped(Layer.build(SchedulerConfig.layer(options))))
        expect(layered, message).toMatchObject({ _tag: "InvalidOptionError", field, message })
      }
    }))

  it.effect("the promise face's scheduler settings stay milliseconds: a Duration string is refused as before", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(SchedulerConfig.resolve({ alarmMinDelayMs: "5 seconds" }, "milliseconds"))
      expect(error).toMatchObject({
        field: "alarmMinDelayMs",
        kind: "range",
        message: "alarmMinDelayMs must be a positive integer, got \"5 seconds\""
      })
    }))

  it.scoped("bad attemptTimeoutMs Durations: InvalidOptionError naming the field (capability and method)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const cases = [
        [{ attemptTimeoutMs: "soon" }, {}, "attemptTimeoutMs", "attemptTimeoutMs must be a Duration or a number of milliseconds, got \"soon\""],
        [{ attemptTimeoutMs: Duration.zero }, {}, "attemptTimeoutMs", "attemptTimeoutMs must be a finite Duration of at least 1 millisecond, got Duration(0)"],
        [{}, { attemptTimeoutMs: Duration.infinity }, "methods.charge.attemptTimeoutMs", "methods.charge.attemptTimeoutMs must be a finite Duration of at least 1 millisecond, got Duration(Infinity)"],
        [{}, { attemptTimeoutMs: "0.2 millis" }, "methods.charge.attemptTimeoutMs", "methods.charge.attemptTimeoutMs must be a finite Duration of at least 1 millisecond, got \"0.2 millis\""]
      ] as const
      for (const [options, own, field, message] of cases) {
        const makes: ReadonlyArray<() => Effect.Effect<unknown, unknown, Scheduler.Services>> = [
          () => Operations.make({ charge: Operations.operation({ handler, ...own } as never) }, options as never),
          () => NamedAlarms.make({ charge: NamedAlarms.alarm<never, never>({ handler, ...own } as never) }, options as never)
        ]
        for (const make of makes) {
          const fresh = yield* TestDurability.make({ storage: object.storage })
          const error = yield* Effect.flip(fresh.run(make()))
          expect(error, message).toMatchObject({ _tag: "InvalidOptionError", field, kind: "range", message })
        }
      }
    }))

  it.effect("retries.delay giving a negative or infinite Duration fails for good with DurableRetryPolicyError", () =>
    Effect.gen(function*() {
      for (
        const [delay, message] of [
          ["-1 second", "Retry delay for attempt 1 must be a finite non-negative Duration or number of milliseconds, got \"-1 second\""],
          [Duration.infinity, "Retry delay for attempt 1 must be a finite non-negative Duration or number of milliseconds, got Duration(Infinity)"]
        ] as const
      ) {
        const policy = { maxAttempts: 3, schedule: RetryPolicy.fromDelay(() => delay) }
        const decision = yield* RetryPolicy.decide(policy, 1, new Error("boom"))
        expect(decision).toMatchObject({ _tag: "Fail", error: { _tag: "DurableRetryPolicyError", message } })
      }
      const ok = yield* RetryPolicy.decide({ maxAttempts: 3, schedule: RetryPolicy.fromDelay(() => "2 seconds") }, 1, new Error("boom"))
      expect(ok).toEqual({ _tag: "Retry", at: 2_000 })
    }))

  it.scoped("a queue's leaseMs and retention ageMs as Durations; bad ones name the field", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_000)
      const object = yield* TestDurability.make({ scheduler: { alarmMinDelayMs: "1 second" } })
      const jobs = yield* object.run(Jobs.make({
        email: Jobs.externalQueue<{ readonly to: string }, unknown>({ leaseMs: "1 minute", removeOnComplete: { ageMs: Duration.hours(1) } })
      }))
      yield* object.run(jobs.email.add({ id: "j", payload: { to: "a" } }))
      const [leased] = yield* object.run(jobs.email.lease())
      expect(leased?.leaseUntil).toBe(61_000)

      const resolved = yield* QueueOptions.resolve("queues.email.", {
        processing: "external",
        leaseMs: "90 seconds",
        removeOnComplete: { count: 5, ageMs: "2 hours" },
        removeOnFail: { ageMs: 1_000 }
      })
      expect(resolved.external?.leaseMs).toBe(90_000)
      expect([resolved.removeOnComplete, resolved.removeOnFail]).toEqual([{ count: 5, ageMs: 7_200_000 }, { ageMs: 1_000 }])
      const cases = [
        [{ processing: "external", leaseMs: "10 millis" }, "queues.email.leaseMs", "queues.email.leaseMs must be a Duration from 1 second to 1 day, got \"10 millis\""],
        [{ processing: "external", leaseMs: Duration.days(2) }, "queues.email.leaseMs", "queues.email.leaseMs must be a Duration from 1 second to 1 day, got Duration(2d)"],
        [{ removeOnFail: { ageMs: "forever" } }, "queues.email.removeOnFail.ageMs", "queues.email.removeOnFail.ageMs must be a Duration or a number of milliseconds, got \"forever\""],
        [{ removeOnComplete: { ageMs: Duration.infinity } }, "queues.email.removeOnComplete.ageMs", "queues.email.removeOnComplete.ageMs must be a finite Duration, got Duration(Infinity)"]
      ] as const
      for (const [options, field, message] of cases) {
        const error = yield* Effect.flip(QueueOptions.resolve("queues.email.", options as never))
        expect(error, message).toMatchObject({ _tag: "InvalidOptionError", field, kind: "range", message })
      }
    }))

  it.scoped("a schedule's graceMs as a Duration; a bad one is an InvalidInputError naming options.graceMs", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler }) }))
      yield* object.run(schedules.tick.upsert("k", { everyMs: 60_000 }, { graceMs: "5 minutes" }))
      expect(yield* object.run(schedules.tick.get("k"))).toMatchObject({ graceMs: 300_000 })
      for (
        const [graceMs, message] of [
          ["-1 minute", "options.graceMs must be a finite Duration, got \"-1 minute\""],
          ["later", "options.graceMs must be a Duration or a number of milliseconds, got \"later\""]
        ] as const
      ) {
        const error = yield* Effect.flip(ScheduleOptions.resolve({ graceMs }))
        expect(error, message).toMatchObject({ _tag: "InvalidInputError", field: "options.graceMs", kind: "range", message })
      }
      // Milliseconds keep their check and message.
      expect(yield* Effect.flip(ScheduleOptions.resolve({ graceMs: -1 }))).toMatchObject({
        message: "options.graceMs must be a non-negative safe integer, got -1"
      })
    }))
})

describe("per-call times on the Effect face", () => {
  const jobsOf = (object: TestDurability.TestObject, ran: Array<string>) =>
    object.run(Jobs.make({
      work: Jobs.queue({
        handler: (job: Jobs.JobContext<string>) => Effect.map(Clock.currentTimeMillis, (now) => void ran.push(`${job.id}@${now}`))
      }),
      ext: Jobs.externalQueue<string, unknown>({ leaseMs: 10_000 })
    }))

  it.scoped("a job's delayMs (add, addBulk, a flow's nodes) and dedup.ttlMs as Durations: the times their milliseconds give", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_000)
      const object = yield* TestDurability.make()
      const ran: Array<string> = []
      const jobs = yield* jobsOf(object, ran)
      yield* object.run(jobs.work.add({ id: "duration", payload: "x", delayMs: "5 seconds" }))
      yield* object.run(jobs.work.add({ id: "number", payload: "x", delayMs: 5_000 }))
      yield* object.run(jobs.work.addBulk([{ id: "bulk", payload: "x", delayMs: Duration.seconds(7) }]))
      yield* object.run(jobs.flow({
        queue: "work",
        id: "parent",
        payload: "x",
        children: [{ queue: "work", id: "child", payload: "x", delayMs: Duration.millis(2_500) }]
      }))
      const runAt = (id: string) => Effect.map(object.run(jobs.work.get(id)), (info) => info?.runAt)
      expect([yield* runAt("duration"), yield* runAt("number"), yield* runAt("bulk"), yield* runAt("child")])
        .toEqual([6_000, 6_000, 8_000, 3_500])
      // Throttled for a minute: its key's expiry is the one `ttlMs: 60_000` stores.
      yield* object.run(jobs.work.add({ id: "t1", payload: "x", dedup: { key: "k", ttlMs: "1 minute" } }))
      yield* object.run(jobs.work.add({ id: "t2", payload: "x", dedup: { key: "n", ttlMs: 60_000 } }))
      expect(yield* rows(object, "SELECT dedup_key, expires_at FROM durability_job_dedup ORDER BY dedup_key")).toEqual([
        { dedup_key: "k", expires_at: 61_000 },
        { dedup_key: "n", expires_at: 61_000 }
      ])
      yield* TestClock.adjust(10_000)
      expect(ran).toEqual(["t1@1000", "t2@1000", "child@3500", "parent@3500", "duration@6000", "number@6000", "bulk@8000"])
      yield* TestClock.adjust(60_000)
      expect(yield* object.run(jobs.work.add({ id: "t3", payload: "x", dedup: { key: "k", ttlMs: "1 minute" } })))
        .toMatchObject({ id: "t3", deduplicated: false })
    }))

  it.scoped("a job's wait timeoutMs, clean's olderThanMs, lease's leaseMs and heartbeat's extendMs as Durations", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_000)
      const object = yield* TestDurability.make()
      const ran: Array<string> = []
      const jobs = yield* jobsOf(object, ran)
      yield* object.run(jobs.work.add({ id: "later", payload: "x", delayMs: "1 hour" }))
      const waiting = yield* Effect.fork(object.run(jobs.work.wait("later", { timeoutMs: "2 seconds" })))
      yield* TestClock.adjust(1_999)
      expect(waiting.unsafePoll()).toBeNull()
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(waiting)).toMatchObject({ id: "later", state: "delayed" })

      // Now 3 000: "a" finishes at 3 000, "b" at 4 000; at 5 000, 1.5 seconds ago is 3 500.
      yield* object.run(jobs.work.add({ id: "a", payload: "x" }))
      yield* TestClock.adjust(1_000)
      yield* object.run(jobs.work.add({ id: "b", payload: "x" }))
      yield* TestClock.adjust(1_000)
      expect(yield* object.run(jobs.work.clean({ states: ["completed"], olderThanMs: Duration.millis(1_500) }))).toBe(1)
      expect(yield* object.run(jobs.work.get("a"))).toBeUndefined()
      expect(yield* object.run(jobs.work.get("b"))).toMatchObject({ state: "completed" })

      yield* object.run(jobs.ext.add({ id: "e", payload: "x" }))
      const [leased] = yield* object.run(jobs.ext.lease({ leaseMs: "45 seconds" }))
      expect(leased?.leaseUntil).toBe(50_000)
      yield* TestClock.adjust(1_000)
      expect(yield* object.run(jobs.ext.heartbeat("e", leased!.token, { extendMs: Duration.minutes(2) }))).toEqual({ leaseUntil: 126_000 })
      expect(yield* object.run(jobs.ext.heartbeat("e", leased!.token, { extendMs: 120_000 }))).toEqual({ leaseUntil: 126_000 })
    }))

  it.scoped("bad call times of a queue: InvalidInputError naming the field, storage unchanged", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* jobsOf(object, [])
      yield* object.run(jobs.ext.add({ id: "e", payload: "x" }))
      const [leased] = yield* object.run(jobs.ext.lease())
      const before = yield* dump(object)
      const cases: ReadonlyArray<readonly [Effect.Effect<unknown, unknown, never>, string, string]> = [
        [jobs.work.add({ payload: "x", delayMs: "soon" as never }), "delayMs", "delayMs must be a Duration or a number of milliseconds, got \"soon\""],
        [jobs.work.add({ payload: "x", delayMs: Duration.infinity }), "delayMs", "delayMs must be a finite Duration, got Duration(Infinity)"],
        [jobs.work.add({ payload: "x", delayMs: "-5 seconds" as never }), "delayMs", "delayMs must be a finite Duration, got \"-5 seconds\""],
        [jobs.work.add({ payload: "x", dedup: { key: "k", ttlMs: { minutes: 1 } as never } }), "dedup.ttlMs", "dedup.ttlMs must be a Duration or a number of milliseconds, got an object"],
        [jobs.work.addBulk([{ payload: "x" }, { payload: "x", delayMs: "later" as never }]), "jobs[1].delayMs", "jobs[1].delayMs must be a Duration or a number of milliseconds, got \"later\""],
        [
          jobs.flow({ queue: "work", payload: "x", children: [{ queue: "work", payload: "x", delayMs: Duration.infinity }] }),
          "children[0].delayMs",
          "children[0].delayMs must be a finite Duration, got Duration(Infinity)"
        ],
        [jobs.work.wait("e", { timeoutMs: "forever" as never }), "timeoutMs", "timeoutMs must be a Duration or a number of milliseconds, got \"forever\""],
        [jobs.work.clean({ states: ["completed"], olderThanMs: Duration.infinity }), "olderThanMs", "olderThanMs must be a finite Duration, got Duration(Infinity)"],
        [jobs.ext.lease({ leaseMs: "10 millis" }), "leaseMs", "leaseMs must be a Duration from 1 second to 1 day, got \"10 millis\""],
        [jobs.ext.heartbeat("e", leased!.token, { extendMs: Duration.days(2) }), "extendMs", "extendMs must be a Duration from 1 second to 1 day, got Duration(2d)"],
        // A bigint would be nanoseconds to a Duration: in an `…Ms` field it is refused, as it always was.
        [jobs.work.add({ payload: "x", delayMs: 5n as never }), "delayMs", "delayMs must be a Duration or a number of milliseconds, got 5n"],
        // Milliseconds keep their check and message.
        [jobs.work.add({ payload: "x", delayMs: 1.5 }), "delayMs", "delayMs must be a non-negative safe integer, got 1.5"],
        [jobs.ext.lease({ leaseMs: 10 }), "leaseMs", "leaseMs must be an integer from 1000 to 86400000, got 10"]
      ]
      for (const [call, field, message] of cases) {
        const error = yield* Effect.flip(object.run(call))
        expect(error, message).toMatchObject({ _tag: "InvalidInputError", field, kind: "range", message })
      }
      expect(yield* dump(object)).toEqual(before)
    }))

  it.scoped("an operation call's delayMs (register, registerMany) and wait's timeoutMs as Durations; bad ones refused", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ranAt: Array<string> = []
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          handler: (call: Operations.DurableCall<unknown>) => Effect.map(Clock.currentTimeMillis, (now) => void ranAt.push(`${call.id}@${now}`))
        })
      }))
      yield* object.run(ops.register("charge", { id: "duration", payload: null, delayMs: "3 seconds" }))
      yield* object.run(ops.register("charge", { id: "number", payload: null, delayMs: 3_000 }))
      yield* object.run(ops.registerMany("charge", [{ id: "many", payload: null, delayMs: Duration.seconds(4) }]))
      const waiting = yield* Effect.fork(object.run(ops.wait("charge", "many", "1 second")))
      yield* TestClock.adjust(999)
      expect(waiting.unsafePoll()).toBeNull()
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(waiting)).toMatchObject({ status: "pending", nextAttemptAt: 4_000 })
      yield* TestClock.adjust(5_000)
      expect(ranAt).toEqual(["duration@3000", "number@3000", "many@4000"])

      const before = object.storage.snapshot()
      const cases: ReadonlyArray<readonly [Effect.Effect<unknown, unknown, never>, string, string]> = [
        [ops.register("charge", { id: "x", payload: null, delayMs: "soon" as never }), "delayMs", "delayMs must be a Duration or a number of milliseconds, got \"soon\""],
        [ops.register("charge", { id: "x", payload: null, delayMs: Duration.infinity }), "delayMs", "delayMs must be a finite Duration, got Duration(Infinity)"],
        [ops.registerMany("charge", [{ id: "y", payload: null, delayMs: "-1 second" as never }]), "calls[0].delayMs", "calls[0].delayMs must be a finite Duration, got \"-1 second\""],
        [ops.wait("charge", "many", "never" as never), "timeoutMs", "timeoutMs must be a Duration or a number of milliseconds, got \"never\""],
        [ops.wait("charge", "many", Duration.infinity), "timeoutMs", "timeoutMs must be a finite Duration, got Duration(Infinity)"]
      ]
      for (const [call, field, message] of cases) {
        const error = yield* Effect.flip(object.run(call))
        expect(error, message).toMatchObject({ _tag: "InvalidInputError", field, kind: "range", message })
      }
      expect(object.storage.snapshot()).toEqual(before)
    }))

  it.scoped("a schedule's everyMs as a Duration: stored and run as its milliseconds; a bad one is refused naming timing.everyMs", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ranAt: Array<string> = []
      const schedules = yield* object.run(Schedules.make({
        tick: Schedules.schedule({
          handler: (run: Schedules.ScheduleRun<unknown>) => Effect.map(Clock.currentTimeMillis, (now) => void ranAt.push(`${run.key}@${now}`))
        })
      }))
      yield* object.run(schedules.tick.upsert("duration", { everyMs: "1 minute" }))
      yield* object.run(schedules.tick.upsert("number", { everyMs: 60_000 }))
      expect(yield* object.run(schedules.tick.get("duration"))).toMatchObject({ timing: { everyMs: 60_000 }, nextRunAt: 60_000 })
      // The same timing as stored: upserting it again in milliseconds changes nothing.
      expect(yield* object.run(schedules.tick.upsert("duration", { everyMs: 60_000 }))).toMatchObject({ created: false, changed: false })
      yield* TestClock.adjust(120_000)
      expect(ranAt).toEqual(["duration@60000", "number@60000", "duration@120000", "number@120000"])

      const before = object.storage.snapshot()
      const NUMBER = "an integer number of milliseconds from 1000 to 31622400000 (366 days)"
      for (
        const [everyMs, message] of [
          ["10 millis", "timing.everyMs must be a Duration from 1 second to 366 days, got \"10 millis\""],
          [Duration.days(400), "timing.everyMs must be a Duration from 1 second to 366 days, got Duration(400d)"],
          [Duration.infinity, "timing.everyMs must be a Duration from 1 second to 366 days, got Duration(Infinity)"],
          // Not a time at all: the message it has always had.
          ["often", `timing.everyMs must be ${NUMBER}, got "often"`],
          [60_000n, `timing.everyMs must be ${NUMBER}, got 60000n`],
          [999, `timing.everyMs must be ${NUMBER}, got 999`]
        ] as const
      ) {
        const error = yield* Effect.flip(object.run(schedules.tick.upsert("bad", { everyMs: everyMs as Duration.DurationInput as never })))
        expect(error, message).toMatchObject({ _tag: "InvalidInputError", field: "timing.everyMs", kind: "range", message })
      }
      expect(object.storage.snapshot()).toEqual(before)
    }))
})
