/**
 * Limits with clear errors: every rejected call fails with a typed error naming the field and
 * leaves storage exactly as it was (a full dump of every job table compared before and after);
 * bad queue options fail the construction, before any table is made.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, TestClock } from "effect"
import type { InvalidInputError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { dump, rows, type TestObject } from "./support.js"

/** A payload whose JSON is exactly `bytes` bytes long. */
const payloadOf = (bytes: number) => ({ s: "x".repeat(bytes - 8) })

const expectRejected = <A>(
  object: TestObject,
  call: Effect.Effect<A, unknown>,
  expected: Partial<Record<keyof InvalidInputError, unknown>>
) =>
  Effect.gen(function*() {
    // Earlier work settles first: only the rejected call could change anything after this.
    yield* TestClock.adjust(0)
    const before = yield* dump(object)
    const error = yield* Effect.flip(call)
    expect(error, JSON.stringify(expected)).toMatchObject({ _tag: "InvalidInputError", ...expected })
    yield* TestClock.adjust(0)
    expect(yield* dump(object), JSON.stringify(expected)).toEqual(before)
  })

const setup = (object: TestObject) =>
  object.run(Jobs.make({
    email: Jobs.queue({ handler: () => Effect.void }),
    small: Jobs.queue({ maxPayloadBytes: 100, handler: () => Effect.void }),
    typed: Jobs.queue({
      payload: Schema.Struct({ to: Schema.String, count: Schema.NumberFromString }),
      handler: (job) => Effect.succeed(job.payload.count + 1)
    })
  }))

describe("limits of calls", () => {
  it.scoped("a payload over maxPayloadBytes (default 131 072) is refused, measured as its JSON", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* setup(object)
      expect(JSON.stringify(payloadOf(131_072)).length).toBe(131_072)
      yield* expectRejected(object, object.run(jobs.email.add({ id: "big", payload: payloadOf(131_073) })), {
        field: "payload",
        kind: "range",
        message: `payload is 131073 bytes as JSON; queue "email" takes at most 131072 (maxPayloadBytes)`
      })
      expect(yield* object.run(jobs.email.add({ id: "max", payload: payloadOf(131_072) }))).toMatchObject({ deduplicated: false })
      yield* expectRejected(object, object.run(jobs.small.add({ payload: payloadOf(101) })), { field: "payload", kind: "range" })
      // Multi-byte characters count as UTF-8 bytes.
      yield* expectRejected(object, object.run(jobs.small.add({ payload: "\u20ac".repeat(33) })), { field: "payload" })
      expect(yield* object.run(jobs.small.add({ payload: payloadOf(100) }))).toMatchObject({ deduplicated: false })
      yield* expectRejected(object, object.run(jobs.email.addBulk([{ payload: 1 }, { payload: 2 }, { payload: payloadOf(131_073) }])), {
        field: "jobs[2].payload"
      })
      yield* expectRejected(object, object.run(jobs.email.add({ payload: { f: () => 1 } })), { field: "payload", kind: "type" })
    }))

  it.scoped("bad ids, unknown queues and bad add options are refused, naming the field", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* setup(object)
      yield* object.run(jobs.email.add({ id: "existing", payload: 1, delayMs: 60_000 }))
      // No cap on a delay but the largest safe time: from 1 ms on, MAX_SAFE_INTEGER ms is past it.
      yield* TestClock.adjust(1)
      const add = (options: unknown) => object.run(jobs.email.add(options as Jobs.AddOptions<unknown>))
      const cases: ReadonlyArray<readonly [unknown, Partial<Record<keyof InvalidInputError, unknown>>]> = [
        [{ id: "", payload: 1 }, { field: "id" }],
        [{ id: 7, payload: 1 }, { field: "id" }],
        [{ id: "x".repeat(513), payload: 1 }, { field: "id" }],
        [{ id: "\ud800", payload: 1 }, { field: "id" }],
        [{ payload: 1, delayMs: 10, runAt: 20 }, { field: "delayMs", message: "delayMs and runAt cannot both be given" }],
        [{ payload: 1, delayMs: -1 }, { field: "delayMs", kind: "range" }],
        [{ payload: 1, delayMs: 1.5 }, { field: "delayMs" }],
        [{ payload: 1, delayMs: Number.MAX_SAFE_INTEGER }, { field: "delayMs" }],
        [{ payload: 1, runAt: new Date(Number.NaN) }, { field: "runAt" }],
        [{ payload: 1, priority: 1.5 }, { field: "priority", kind: "range" }],
        [{ payload: 1, priority: "high" }, { field: "priority" }],
        [{ payload: 1, dedup: "k" }, { field: "dedup" }],
        [{ payload: 1, dedup: { key: "" } }, { field: "dedup.key" }],
        [{ payload: 1, dedup: { key: "k", ttlMs: -5 } }, { field: "dedup.ttlMs" }],
        [{ payload: 1, dedup: { key: "k", mode: "merge" } }, { field: "dedup.mode" }],
        [null, { field: "options" }],
        [{ payload: 1n }, { field: "payload" }]
      ]
      for (const [options, expected] of cases) yield* expectRejected(object, add(options), expected)
      yield* expectRejected(object, object.run(jobs.email.addBulk([{ payload: 1 }, { payload: 2, priority: 0.5 }])), { field: "jobs[1].priority" })
      yield* expectRejected(object, object.run(jobs.email.addBulk("no" as unknown as [])), { field: "jobs" })
      yield* expectRejected(object, object.run(jobs.flow({ queue: "nope", payload: 1 })), { field: "queue", message: `Unknown queue "nope"` })
      yield* expectRejected(object, object.run(jobs.flow({ queue: "email", payload: 1, children: [{ queue: 3 as unknown as string, payload: 1 }] })), {
        field: "children[0].queue"
      })
      for (const call of [jobs.email.get(""), jobs.email.cancel(""), jobs.email.promote(""), jobs.email.retry(""), jobs.email.logs("")]) {
        yield* expectRejected(object, object.run(call as Effect.Effect<unknown, unknown>), { field: "id" })
      }
      yield* expectRejected(object, object.run(jobs.email.wait("existing", { timeoutMs: -1 })), { field: "timeoutMs" })
      yield* expectRejected(object, object.run(jobs.purgeBefore(-1)), { field: "timestamp" })
    }))

  it.scoped("a payload schema: a payload that does not match it is refused at add; the handler gets it decoded", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* setup(object)
      yield* expectRejected(object, object.run(jobs.typed.add({ payload: { to: "a", count: "x" as unknown as number } })), {
        field: "payload",
        kind: "type"
      })
      yield* expectRejected(object, object.run(jobs.typed.add({ payload: { to: 1 } as unknown as { to: string; count: number } })), { field: "payload" })
      yield* object.run(jobs.typed.add({ id: "ok", payload: { to: "a", count: 41 } }))
      // Stored in its encoded form; decoded for the handler and for get.
      expect((yield* rows(object, "SELECT payload FROM durability_jobs WHERE id = 'ok'"))[0]?.payload)
        .toBe(JSON.stringify({ kind: "value", value: { to: "a", count: "41" } }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs.typed.get("ok"))).toMatchObject({ state: "completed", payload: { to: "a", count: 41 }, result: 42 })
    }))
})

describe("limits of queue options", () => {
  const tables = (object: TestObject) => rows(object, "SELECT name FROM sqlite_master WHERE name LIKE 'durability_job%' ORDER BY name")

  it.scoped("a bad queue option fails the construction with InvalidOptionError naming the field; no table is made", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const handler = () => Effect.void
      const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
        [{ rateLimit: { capacity: 0, refillPerSecond: 1 } }, "queues.email.rateLimit.capacity"],
        [{ rateLimit: { capacity: 1.5, refillPerSecond: 1 } }, "queues.email.rateLimit.capacity"],
        [{ rateLimit: { capacity: 1, refillPerSecond: 0 } }, "queues.email.rateLimit.refillPerSecond"],
        [{ rateLimit: 5 }, "queues.email.rateLimit"],
        [{ groupRateLimit: { capacity: 1, refillPerSecond: 1 } }, "queues.email.groupRateLimit.key"],
        [{ groupRateLimit: { key: () => "k", capacity: -1, refillPerSecond: 1 } }, "queues.email.groupRateLimit.capacity"],
        [{ maxPayloadBytes: 2 * 1024 * 1024 + 1 }, "queues.email.maxPayloadBytes"],
        [{ maxPayloadBytes: 0 }, "queues.email.maxPayloadBytes"],
        [{ concurrency: 0 }, "queues.email.concurrency"],
        [{ keepLogs: -1 }, "queues.email.keepLogs"],
        [{ removeOnComplete: { count: -1 } }, "queues.email.removeOnComplete.count"],
        [{ removeOnFail: { ageMs: 1.5 } }, "queues.email.removeOnFail.ageMs"],
        [{ removeOnFail: 3 }, "queues.email.removeOnFail"],
        [{ deadLetter: "yes" }, "queues.email.deadLetter"],
        [{ retries: { maxAttempts: 0 } }, "queues.email.retries.maxAttempts"],
        [{ attemptTimeoutMs: -1 }, "queues.email.attemptTimeoutMs"]
      ]
      for (const [options, field] of cases) {
        const error = yield* Effect.flip(object.run(Jobs.make({ email: Jobs.queue({ handler, ...options }) })))
        expect(error, field).toMatchObject({ _tag: "InvalidOptionError", field })
        expect(error.message, field).toContain(field)
      }
      const slash = yield* Effect.flip(object.run(Jobs.make({ "a/b": Jobs.queue({ handler }) })))
      expect(slash).toMatchObject({ _tag: "InvalidOptionError", field: "queues.a/b" })
      const reserved = yield* Effect.flip(object.run(Jobs.make({ flow: Jobs.queue({ handler }) })))
      expect(reserved).toMatchObject({ _tag: "InvalidOptionError", field: "queues.flow" })
      const hook = yield* Effect.flip(object.run(Jobs.make({ email: Jobs.queue({ handler }) }, { onLifecycleEvent: 1 as unknown as Jobs.JobEventHook })))
      expect(hook).toMatchObject({ _tag: "InvalidOptionError", field: "onLifecycleEvent" })
      expect(yield* tables(object)).toEqual([])
      // The largest allowed payload limit is fine.
      yield* object.run(Jobs.make({ email: Jobs.queue({ handler, maxPayloadBytes: 2 * 1024 * 1024 }) }))
      expect((yield* tables(object)).length).toBeGreaterThan(0)
    }))
})
