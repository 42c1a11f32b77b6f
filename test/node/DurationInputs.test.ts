/**
 * The Effect face's time options take a `Duration` or anything `Duration.decode` takes ("5 seconds",
 * `Duration.minutes(1)`; a number is milliseconds): execution options (`attemptTimeoutMs`,
 * `retries.delay`), the scheduler's settings, a queue's `leaseMs` and retention `ageMs`, a schedule's
 * `graceMs`. A bad one is refused naming its field; the promise face's scheduler settings stay
 * milliseconds only.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Layer, TestClock } from "effect"
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
