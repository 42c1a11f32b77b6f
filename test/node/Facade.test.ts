/**
 * The promise classes (`Durability`, `DurabilityAlarms`, `DurabilityScheduler`)
 * over in-memory storage. The facade runs on its own runtime with the live
 * clock, so nothing here waits on time: every await is a promise that settles
 * as soon as the work it stands for is done.
 */
import { describe, expect, expectTypeOf, it, vi } from "vitest"
import {
  DuplicateDurableCallError,
  Durability,
  DurabilityAlarms,
  durabilityNamedAlarmMigrations,
  durabilityOperationMigrations,
  DurabilityScheduler,
  type DurableAlarmInfo,
  type DurableCall,
  type DurableNamedAlarm,
  type DurableOperationResult,
  type DurableRegistration,
  logLifecycle,
  NonRetryableError
} from "../../src/index.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import { memoryContext, thrownBy } from "./support/promise.js"

/** A promise the test settles by hand, to hold a handler open without waiting on time. */
const gate = () => {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

const tables = (memory: MemoryStorage.MemoryStorage) =>
  memory.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'durability_%' ORDER BY name")
    .toArray().map((row) => row.name)

const OPERATION_MIGRATIONS = [
  "durability_0001_create_calls",
  "durability_0002_pending_index",
  "durability_0004_calls_generation_and_created_at",
  "durability_0006_operations_steps"
]
/** The durable steps' memo table, shared by the capabilities: it goes only when every capability is reverted. */
const MEMO_TABLE = "durability_steps"
const ALARM_MIGRATIONS = [
  "durability_0003_create_alarms",
  "durability_0004_alarms_generation_and_created_at",
  "durability_0013_alarms_payload"
]

describe("Durability", () => {
  it("generates a method per handler; registration resolves; getResult, job().getResult() and job().wait() read it", async () => {
    const context = await memoryContext()
    const held = gate()
    const calls: Array<string> = []
    const durability = new Durability({
      context,
      handlers: {
        charge: async (call: DurableCall<{ readonly cents: number }>) => {
          calls.push(`${call.operation}:${call.id}#${call.attempt}`)
          await held.opened
          return { charged: call.payload.cents }
        }
      }
    })
    expect(typeof durability.charge).toBe("function")
    expect(typeof durability.charge.getResult).toBe("function")
    expect(typeof durability.charge.job).toBe("function")
    expect(Object.keys(durability)).toEqual(["charge"])

    await expect(durability.charge({ id: "inv-1", payload: { cents: 500 } })).resolves.toBeUndefined()
    const job = durability.charge.job("inv-1")
    // timeoutMs 0 returns the current state without waiting.
    expect(await job.wait({ timeoutMs: 0 })).toMatchObject({ status: "pending" })
    expect(await durability.charge.getResult("inv-1")).toMatchObject({ status: "pending" })
    expect(await durability.charge.getResult("missing")).toEqual({ status: "not_found" })
    expect(await durability.charge.job("missing").wait({ timeoutMs: 0 })).toEqual({ status: "not_found" })

    held.open()
    // Resolves as soon as the call settles (the limit is only an upper bound).
    expect(await job.wait({ timeoutMs: 60_000 })).toEqual({ status: "completed", result: { charged: 500 } })
    expect(await job.getResult()).toEqual({ status: "completed", result: { charged: 500 } })
    expect(await durability.charge.getResult("inv-1")).toEqual({ status: "completed", result: { charged: 500 } })
    expect(await job.wait({ timeoutMs: 0 })).toEqual({ status: "completed", result: { charged: 500 } })

    // Same id again: a no-op.
    await durability.charge({ id: "inv-1", payload: { cents: 999 } })
    expect(await job.wait({ timeoutMs: 0 })).toEqual({ status: "completed", result: { charged: 500 } })
    expect(calls).toEqual(["charge:inv-1#1"])
  })

  it("wait rejects a bad timeoutMs with RangeError, and a missing options object with TypeError", async () => {
    const context = await memoryContext()
    const durability = new Durability({ context, handlers: { ping: () => "pong" } })
    const job = durability.ping.job("p")
    for (const timeoutMs of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1]) {
      const error = await job.wait({ timeoutMs }).then(() => undefined, (e: unknown) => e)
      expect(error).toBeInstanceOf(RangeError)
      expect((error as Error).message).toBe(`timeoutMs must be a non-negative safe integer, got ${timeoutMs}`)
    }
    await expect(job.wait(null as unknown as { timeoutMs: number })).rejects.toThrow(TypeError)
  })

  it("rejects reserved handler names with Error and non-function handlers with TypeError", async () => {
    const context = await memoryContext()
    for (const name of ["constructor", "alarm", "purgeBefore"]) {
      const error = thrownBy(() => new Durability({ context, handlers: { [name]: () => 1 } }))
      expect(error.constructor).toBe(Error)
      expect(error.message).toBe(`"${name}" is reserved by Durability`)
    }
    const error = thrownBy(() => new Durability({ context, handlers: { charge: "later" as unknown as () => 1 } }))
    expect(error).toBeInstanceOf(TypeError)
    expect(error.message).toBe("handlers.charge must be a function")
    expect(context.memory.statements).toEqual([])
  })

  it("rejects bad options with RangeError/TypeError naming the field (methods.<op>. per method)", async () => {
    const context = await memoryContext()
    const handlers = { charge: () => 1 }
    const cases: Array<[Record<string, unknown>, ErrorConstructor, string]> = [
      [{ attemptTimeoutMs: 0 }, RangeError, "attemptTimeoutMs must be a positive integer, got 0"],
      [{ attemptTimeoutMs: 1.5 }, RangeError, "attemptTimeoutMs must be a positive integer, got 1.5"],
      [{ retries: 3 }, TypeError, "retries must be an object, got 3"],
      [{ retries: { maxAttempts: 0 } }, RangeError, "retries.maxAttempts must be a positive integer, got 0"],
      [{ retries: { delay: 100 } }, TypeError, "retries.delay must be a function, got 100"],
      [{ methods: { charge: { attemptTimeoutMs: -1 } } }, RangeError, "methods.charge.attemptTimeoutMs must be a positive integer, got -1"],
      [
        { methods: { charge: { retries: { maxAttempts: 2.5 } } } },
        RangeError,
        "methods.charge.retries.maxAttempts must be a positive integer, got 2.5"
      ],
      [{ methods: { charge: { retries: { delay: "soon" } } } }, TypeError, "methods.charge.retries.delay must be a function, got \"soon\""],
      [{ alarmConcurrency: 0 }, RangeError, "alarmConcurrency must be a positive integer, got 0"],
      [{ onAlarmRetry: 1 }, TypeError, "onAlarmRetry must be a function, got 1"]
    ]
    for (const [options, ErrorType, message] of cases) {
      const error = thrownBy(() => new Durability({ context, handlers, ...options }))
      expect(error).toBeInstanceOf(ErrorType)
      expect(error.message).toBe(message)
    }
    expect(context.memory.statements).toEqual([])
  })

  it("rejects an id reused by another operation with DuplicateDurableCallError (an Error by name)", async () => {
    const context = await memoryContext()
    const durability = new Durability({
      context,
      handlers: { charge: (call: DurableCall<number>) => call.payload, refund: (call: DurableCall<number>) => -call.payload }
    })
    await durability.charge({ id: "x", payload: 5 })
    const message = "Durable call \"x\" already belongs to operation \"charge\", not \"refund\""
    for (const attempt of [() => durability.refund({ id: "x", payload: 5 }), () => durability.refund.getResult("x")]) {
      const error = await attempt().then(() => undefined, (e: unknown) => e as Error)
      expect(error).toBeInstanceOf(Error)
      expect(error).toBeInstanceOf(DuplicateDurableCallError)
      expect(error?.name).toBe("DuplicateDurableCallError")
      expect(error?.message).toBe(message)
    }
    expect(await durability.charge.job("x").wait({ timeoutMs: 60_000 })).toEqual({ status: "completed", result: 5 })
  })

  it("rejects a non-JSON payload with TypeError before any write", async () => {
    const context = await memoryContext()
    const durability = new Durability({ context, handlers: { store: (call: DurableCall<unknown>) => call.id } })
    const before = context.memory.snapshot()
    const statements = context.memory.statements.length
    const circular: Record<string, unknown> = {}
    circular.self = circular
    const cases: Array<[unknown, string]> = [
      [{ n: 1n }, "payload.n is a BigInt"],
      [{ f: () => 1 }, "payload.f is a function"],
      [{ n: Number.NaN }, "payload.n is NaN"],
      [{ when: new Date(0) }, "payload.when is a Date"],
      [{ gone: undefined }, "payload.gone is undefined"],
      [[1, Symbol("s")], "payload[1] is a symbol"],
      [circular, "payload.self is a circular reference"]
    ]
    for (const [payload, reason] of cases) {
      const error = await durability.store({ id: "bad", payload }).then(() => undefined, (e: unknown) => e as Error)
      expect(error).toBeInstanceOf(TypeError)
      expect(error?.message).toBe(`payload must be JSON-serializable: ${reason}`)
    }
    expect(context.memory.snapshot()).toEqual(before)
    expect(context.memory.statements.length).toBe(statements)
    expect(await durability.store.getResult("bad")).toEqual({ status: "not_found" })
  })

  it("purgeBefore rejects a bad timestamp with RangeError", async () => {
    const context = await memoryContext()
    const durability = new Durability({ context, handlers: { ping: () => "pong" } })
    await expect(durability.purgeBefore(-1)).rejects.toThrow(RangeError)
    await expect(durability.purgeBefore(1.5)).rejects.toThrow("timestamp must be a non-negative safe integer")
    expect(await durability.purgeBefore(Date.now() + 1)).toBe(0)
  })

  it("migrate(ctx, null) reverts and migrate(ctx) re-applies, with the exact migration names", async () => {
    const context = await memoryContext()
    expect(durabilityOperationMigrations.map((m) => m.name)).toEqual(OPERATION_MIGRATIONS)
    // Synchronous, as the reference's: the tables exist on the very next line.
    const result = Durability.migrate(context)
    expect(result).not.toBeInstanceOf(Promise)
    expect(result).toEqual({ applied: OPERATION_MIGRATIONS, rolledBack: [] })
    Durability.migrate(context, null)
    expect(tables(context.memory)).toEqual([])
    expect(Durability.migrate(context)).toEqual({ applied: OPERATION_MIGRATIONS, rolledBack: [] })
    expect(Durability.migrate(context)).toEqual({ applied: [], rolledBack: [] })
    expect(tables(context.memory)).toEqual(["durability_calls", "durability_migrations", MEMO_TABLE])
    expect(Durability.migrate(context, "durability_0001_create_calls")).toEqual({
      applied: [],
      rolledBack: [
        "durability_0006_operations_steps",
        "durability_0004_calls_generation_and_created_at",
        "durability_0002_pending_index"
      ]
    })
    expect(Durability.migrate(context, null)).toEqual({
      applied: [],
      rolledBack: ["durability_0001_create_calls"]
    })
    expect(tables(context.memory)).toEqual([])
    expect(Durability.migrate(context)).toEqual({ applied: OPERATION_MIGRATIONS, rolledBack: [] })
    expect(Durability.migrate(context, null)).toEqual({
      applied: [],
      rolledBack: [...OPERATION_MIGRATIONS].reverse()
    })
    expect(tables(context.memory)).toEqual([])
    expect(Durability.migrate(context)).toEqual({ applied: OPERATION_MIGRATIONS, rolledBack: [] })
    const error = thrownBy(() => Durability.migrate(context, "durability_9999_unknown"))
    expect(error.name).toBe("MigrationError")
    expect(error.message).toBe('Unknown durability migration target "durability_9999_unknown"')
  })
})

describe("DurabilityAlarms", () => {
  it("generates a scheduling method per name; the handler runs with its info", async () => {
    const context = await memoryContext()
    let ran!: (info: DurableAlarmInfo) => void
    const fired = new Promise<DurableAlarmInfo>((resolve) => (ran = resolve))
    const alarms = new DurabilityAlarms({ context, handlers: { renew: (info: DurableAlarmInfo) => ran(info) } })
    expect(Object.keys(alarms)).toEqual(["renew"])
    const later = Date.now() + 3_600_000
    await expect(alarms.renew(later)).resolves.toBeUndefined()
    expect(context.memory.alarmAt).toBe(later)
    // A time in the past is due now: the early timer runs it.
    await alarms.renew(0)
    const info = await fired
    expect(info).toMatchObject({ name: "renew", scheduledTime: 0, attempt: 1, isRetry: false, retryCount: 0 })
    expect(info.idempotencyKey).toMatch(/^durability-alarm:v1:/)
    expect(info.platform).toBeUndefined()
  })

  it("rejects a bad scheduledTime with RangeError and writes nothing", async () => {
    const context = await memoryContext()
    const alarms = new DurabilityAlarms({ context, handlers: { renew: () => undefined } })
    await alarms.renew(Date.now() + 3_600_000)
    const before = context.memory.snapshot()
    for (const at of [Number.NaN, -1, 1.5, Number.MAX_SAFE_INTEGER + 1]) {
      const error = await alarms.renew(at).then(() => undefined, (e: unknown) => e as Error)
      expect(error).toBeInstanceOf(RangeError)
      expect(error?.message).toBe(`scheduledTime must be a non-negative safe integer or a Date, got ${at}`)
    }
    expect(context.memory.snapshot()).toEqual(before)
  })

  it("rejects reserved names with Error, non-function handlers with TypeError, bad options by field", async () => {
    const context = await memoryContext()
    for (const name of ["constructor", "alarm", "purgeBefore"]) {
      const error = thrownBy(() => new DurabilityAlarms({ context, handlers: { [name]: () => undefined } }))
      expect(error.constructor).toBe(Error)
      expect(error.message).toBe(`"${name}" is reserved by DurabilityAlarms`)
    }
    const notFunction = thrownBy(() => new DurabilityAlarms({ context, handlers: { renew: 5 as unknown as () => void } }))
    expect(notFunction).toBeInstanceOf(TypeError)
    expect(notFunction.message).toBe("handlers.renew must be a function")
    const handlers = { renew: () => undefined }
    const cases: Array<[Record<string, unknown>, ErrorConstructor, string]> = [
      [{ methods: { renew: { retryTimeouts: "yes" } } }, TypeError, "methods.renew.retryTimeouts must be a boolean, got \"yes\""],
      [{ methods: { renew: { attemptTimeoutMs: 0 } } }, RangeError, "methods.renew.attemptTimeoutMs must be a positive integer, got 0"],
      [{ retries: { maxAttempts: -1 } }, RangeError, "retries.maxAttempts must be a positive integer, got -1"]
    ]
    for (const [options, ErrorType, message] of cases) {
      const error = thrownBy(() => new DurabilityAlarms({ context, handlers, ...options }))
      expect(error).toBeInstanceOf(ErrorType)
      expect(error.message).toBe(message)
    }
    expect(context.memory.statements).toEqual([])
  })

  it("migrate(ctx, null) reverts and migrate(ctx) re-applies, independently of operations", async () => {
    const context = await memoryContext()
    expect(durabilityNamedAlarmMigrations.map((m) => m.name)).toEqual(ALARM_MIGRATIONS)
    expect(Durability.migrate(context)).toEqual({ applied: OPERATION_MIGRATIONS, rolledBack: [] })
    expect(DurabilityAlarms.migrate(context)).toEqual({ applied: ALARM_MIGRATIONS, rolledBack: [] })
    expect(DurabilityAlarms.migrate(context)).toEqual({ applied: [], rolledBack: [] })
    expect(tables(context.memory)).toEqual(["durability_alarms", "durability_calls", "durability_migrations", MEMO_TABLE])
    expect(DurabilityAlarms.migrate(context, null)).toEqual({
      applied: [],
      rolledBack: [...ALARM_MIGRATIONS].reverse()
    })
    expect(tables(context.memory)).toEqual(["durability_calls", "durability_migrations", MEMO_TABLE])
    expect(DurabilityAlarms.migrate(context)).toEqual({ applied: ALARM_MIGRATIONS, rolledBack: [] })
    expect(tables(context.memory)).toEqual(["durability_alarms", "durability_calls", "durability_migrations", MEMO_TABLE])
  })
})

describe("attachment to a shared DurabilityScheduler", () => {
  it("shares one scheduler: the alarm reconciles over both tables and one runtime runs both", async () => {
    const context = await memoryContext()
    const scheduler = new DurabilityScheduler({ context })
    const held = gate()
    const durability = new Durability({
      scheduler,
      handlers: {
        double: async (call: DurableCall<number>) => {
          await held.opened
          return call.payload * 2
        }
      }
    })
    let ran!: (info: DurableAlarmInfo) => void
    const fired = new Promise<DurableAlarmInfo>((resolve) => (ran = resolve))
    const alarms = new DurabilityAlarms({
      scheduler,
      handlers: { renew: (info: DurableAlarmInfo) => ran(info), expire: () => undefined }
    })

    const later = Date.now() + 3_600_000
    await alarms.expire(later)
    expect(context.memory.alarmAt).toBe(later)
    await durability.double({ id: "a", payload: 21 })
    // The pending call is due now: the alarm moves earlier (now + the minimum delay).
    expect(context.memory.alarmAt).toBeLessThan(later)
    held.open()
    expect(await durability.double.job("a").wait({ timeoutMs: 60_000 })).toEqual({ status: "completed", result: 42 })
    // Nothing of the operations is pending; the named alarm still is, and takes the alarm back when
    // the engine reconciles (once idle for a moment, or at once in an alarm pass).
    await scheduler.alarm()
    expect(context.memory.alarmAt).toBe(later)

    await alarms.renew(0)
    expect(await fired).toMatchObject({ name: "renew", attempt: 1 })
    await expect(scheduler.alarm()).resolves.toBeUndefined()
    await expect(durability.alarm()).resolves.toBeUndefined()
    await expect(alarms.alarm()).resolves.toBeUndefined()
    expect(context.memory.alarmAt).toBe(later)
  })

  it("helpers built from { context } on one object share its one scheduler: one permit pool bounds both", async () => {
    const context = await memoryContext()
    const held = gate()
    let started!: () => void
    const alarmStarted = new Promise<void>((resolve) => (started = resolve))
    const alarms = new DurabilityAlarms({
      context,
      alarmConcurrency: 1,
      handlers: {
        renew: async () => {
          started()
          await held.opened
        }
      }
    })
    const calls: Array<string> = []
    const durability = new Durability({
      context,
      alarmConcurrency: 1,
      handlers: { ping: (call: DurableCall<unknown>) => void calls.push(call.id) }
    })
    expect(new DurabilityScheduler({ context, alarmConcurrency: 1 })).toBe(new DurabilityScheduler({ context, alarmConcurrency: 1 }))

    await alarms.renew(0)
    await alarmStarted
    // The named alarm holds the object's only permit, so the registration cannot start at once.
    await durability.ping({ id: "p", payload: null })
    expect(await durability.ping.getResult("p")).toMatchObject({ status: "pending", attempt: 0 })
    expect(calls).toEqual([])
    // One engine: the pending call keeps the physical alarm armed however the named alarm ends.
    expect(context.memory.alarmAt).not.toBeNull()
    held.open()
    await durability.alarm()
    expect(await durability.ping.job("p").wait({ timeoutMs: 60_000 })).toEqual({ status: "completed", result: undefined })
    expect(calls).toEqual(["p"])
  })

  it("a second scheduler on one object with other options is refused, naming the option and { scheduler }", async () => {
    const context = await memoryContext()
    const scheduler = new DurabilityScheduler({ context, alarmMinDelayMs: 1_000 })
    expect(new DurabilityScheduler({ context, alarmMinDelayMs: 1_000 })).toBe(scheduler)
    const direct = thrownBy(() => new DurabilityScheduler({ context }))
    expect(direct.constructor).toBe(Error)
    expect(direct.message).toContain("alarmMinDelayMs 1000, not 15000")
    expect(direct.message).toContain("pass it to every helper as { scheduler }")
    const helper = thrownBy(() => new Durability({ context, alarmConcurrency: 3, handlers: { ping: () => "pong" } }))
    expect(helper.message).toContain("alarmConcurrency 10, not 3")
    const hook = thrownBy(() =>
      new DurabilityAlarms({ context, alarmMinDelayMs: 1_000, onAlarmRetry: () => undefined, handlers: { renew: () => undefined } })
    )
    expect(hook.message).toContain("onAlarmRetry undefined, not a different function")
    // Nothing was attached by the refused helpers: the object's scheduler still takes one of each kind.
    new Durability({ scheduler, handlers: { ping: () => "pong" } })
    new DurabilityAlarms({ context, alarmMinDelayMs: 1_000, handlers: { renew: () => undefined } })
    expect(context.memory.statements.some((statement) => statement.includes("durability_alarms"))).toBe(true)
  })

  it("rejects a scheduler object this library did not create", async () => {
    const handlers = { ping: () => "pong" }
    for (const scheduler of [{}, Object.create(DurabilityScheduler.prototype), { alarm: async () => undefined }]) {
      const forDurability = thrownBy(() => new Durability({ scheduler: scheduler as DurabilityScheduler, handlers }))
      expect(forDurability.constructor).toBe(Error)
      expect(forDurability.message).toBe("Unknown DurabilityScheduler instance")
      const forAlarms = thrownBy(() => new DurabilityAlarms({ scheduler: scheduler as DurabilityScheduler, handlers }))
      expect(forAlarms.message).toBe("Unknown DurabilityScheduler instance")
    }
  })

  it("rejects a second helper of one kind on the same scheduler", async () => {
    const context = await memoryContext()
    const scheduler = new DurabilityScheduler({ context })
    new Durability({ scheduler, handlers: { ping: () => "pong" } })
    new DurabilityAlarms({ scheduler, handlers: { renew: () => undefined } })
    const operations = thrownBy(() => new Durability({ scheduler, handlers: { other: () => 1 } }))
    expect(operations.constructor).toBe(Error)
    expect(operations.message).toContain("already attached")
    expect(operations.message).toBe(
      'A "operations" helper is already attached to this scheduler: an object takes one helper of each kind, ' +
        "so put all of its handlers in that one helper"
    )
    const named = thrownBy(() => new DurabilityAlarms({ scheduler, handlers: { other: () => undefined } }))
    expect(named.constructor).toBe(Error)
    expect(named.message).toContain('A "namedAlarms" helper is already attached to this scheduler')
  })
})

describe("types", () => {
  it("infers payload and result types from the handlers", async () => {
    const context = await memoryContext()
    const durability = new Durability({
      context,
      handlers: {
        charge: async (call: DurableCall<{ readonly cents: number }>) => ({ charged: call.payload.cents }),
        label: (call: DurableCall<string>) => call.payload.length > 3
      }
    })
    expectTypeOf(durability.charge).parameter(0).toEqualTypeOf<DurableRegistration<{ readonly cents: number }>>()
    expectTypeOf<DurableRegistration<{ readonly cents: number }>>().toEqualTypeOf<{
      readonly id: string
      readonly payload: { readonly cents: number }
      readonly runAt?: number | Date | undefined
      readonly delayMs?: number | undefined
    }>()
    expectTypeOf(durability.charge).returns.toEqualTypeOf<Promise<void>>()
    expectTypeOf(durability.charge.getResult).returns.resolves.toEqualTypeOf<
      DurableOperationResult<{ charged: number }>
    >()
    expectTypeOf(durability.charge.job("x").wait).returns.resolves.toEqualTypeOf<
      DurableOperationResult<{ charged: number }>
    >()
    expectTypeOf(durability.label.getResult).returns.resolves.toEqualTypeOf<DurableOperationResult<boolean>>()
    expectTypeOf(durability.purgeBefore).returns.toEqualTypeOf<Promise<number>>()

    const alarms = new DurabilityAlarms({ context, handlers: { renew: (_info: DurableAlarmInfo) => undefined } })
    expectTypeOf(alarms.renew).toEqualTypeOf<DurableNamedAlarm>()
    expectTypeOf(alarms.renew).parameter(0).toEqualTypeOf<number | Date>()

    const typeOnly = (): void => {
      // @ts-expect-error a payload of the wrong shape
      void durability.charge({ id: "x", payload: { cents: "5" } })
      // @ts-expect-error no such operation
      void durability.refund({ id: "x", payload: 1 })
      // @ts-expect-error no such named alarm
      void alarms.expire(1)
    }
    expect(typeof typeOnly).toBe("function")
  })

  it("types unannotated handlers from the map: DurableAlarmInfo for alarms, an unknown payload for operations", async () => {
    const alarms = new DurabilityAlarms({
      context: await memoryContext(),
      handlers: {
        renew: async (info) => {
          expectTypeOf(info).toEqualTypeOf<DurableAlarmInfo>()
          return info.attempt
        },
        destructured: ({ attempt, idempotencyKey, signal }) => {
          expectTypeOf(attempt).toEqualTypeOf<number>()
          expectTypeOf(idempotencyKey).toEqualTypeOf<string>()
          expectTypeOf(signal).toEqualTypeOf<AbortSignal>()
        },
        annotated: (info: DurableAlarmInfo<"annotated">) => info.name
      }
    })
    expectTypeOf(alarms.renew).toEqualTypeOf<DurableNamedAlarm>()
    expectTypeOf(alarms.annotated).toEqualTypeOf<DurableNamedAlarm>()

    const durability = new Durability({
      context: await memoryContext(),
      handlers: {
        send: async (call) => {
          expectTypeOf(call).toEqualTypeOf<DurableCall<unknown>>()
          return call.attempt
        },
        typed: (call: DurableCall<{ readonly to: string }>) => call.payload.to.length
      }
    })
    expectTypeOf(durability.send).parameter(0).toEqualTypeOf<DurableRegistration<unknown>>()
    expectTypeOf(durability.send.getResult).returns.resolves.toEqualTypeOf<DurableOperationResult<number>>()
    await durability.send({ id: "s", payload: { to: "someone" } })
    await durability.typed({ id: "t", payload: { to: "someone" } })
    expect(await durability.send.job("s").wait({ timeoutMs: 60_000 })).toEqual({ status: "completed", result: 1 })

    const typeOnly = (): void => {
      interface Receipt {
        readonly id: string
        readonly lines: ReadonlyArray<{ readonly cents: number }>
      }
      void new Durability({
        context: { storage: {} as never },
        handlers: {
          receipt: async (): Promise<Receipt> => ({ id: "r", lines: [] }),
          nothing: () => undefined,
          opaque: (): unknown => null,
          // @ts-expect-error a Date is not JSON: a compile error, not a failure after the side effect
          when: () => new Date(),
          // @ts-expect-error nor is a Map inside the result
          nested: async () => ({ totals: new Map<string, number>() }),
          // @ts-expect-error nor a BigInt
          big: () => ({ total: 10n })
        }
      })
      // @ts-expect-error an annotated handler keeps its payload type
      void durability.typed({ id: "x", payload: { to: 1 } })
      void new DurabilityAlarms({
        scheduler: new DurabilityScheduler({ context: { storage: {} as never } }),
        // @ts-expect-error DurableAlarmInfo has no such field
        handlers: { renew: (info) => info.missing }
      })
    }
    expect(typeof typeOnly).toBe("function")
  })
})

describe("managing work from the promise face", () => {
  it("registers to start later, lists and cancels operations", async () => {
    const context = await memoryContext()
    const calls: Array<string> = []
    const durability = new Durability({
      context,
      handlers: { send: (call: DurableCall<{ readonly to: string }>) => void calls.push(call.id) }
    })
    const inAnHour = new Date(Date.now() + 3_600_000)
    await durability.send({ id: "a-later", payload: { to: "a" }, runAt: inAnHour })
    await durability.send({ id: "b-delayed", payload: { to: "b" }, delayMs: 7_200_000 })
    expect(await durability.send.getResult("a-later")).toMatchObject({ status: "pending", attempt: 0, nextAttemptAt: inAnHour.getTime() })
    expect(calls).toEqual([])

    // Registration order (ids break ties within a millisecond).
    const page = await durability.send.list({ limit: 1 })
    expect(page.items.map((item) => item.id)).toEqual(["a-later"])
    expect((await durability.send.list({ cursor: page.cursor, status: "pending" })).items.map((item) => item.id))
      .toEqual(["b-delayed"])

    expect(await durability.send.cancel("a-later")).toBe(true)
    expect(await durability.send.cancel("a-later")).toBe(false)
    expect(await durability.send.job("a-later").wait({ timeoutMs: 0 })).toEqual({
      status: "failed",
      attempt: 0,
      error: { name: "DurableCanceledError", message: 'Durable operation "send" (id "a-later") was canceled' }
    })
    const bad = await durability.send({ id: "x", payload: { to: "c" }, runAt: 1, delayMs: 1 }).then(() => undefined, (e: Error) => e)
    expect(bad).toBeInstanceOf(TypeError)
    expect(bad?.message).toBe("runAt and delayMs cannot both be given")
    const badLimit = await durability.send.list({ limit: 0 }).then(() => undefined, (e: Error) => e)
    expect(badLimit).toBeInstanceOf(RangeError)
  })

  it("registers a batch with many(): one transaction, all or none, a bad call named by its index", async () => {
    const context = await memoryContext()
    const durability = new Durability({
      context,
      handlers: { send: (call: DurableCall<{ readonly to: string }>) => call.payload.to, other: () => undefined }
    })
    await durability.other({ id: "taken", payload: null, delayMs: 3_600_000 })
    const bad = await durability.send.many([{ id: "m-1", payload: { to: "a" } }, { id: "", payload: { to: "b" } }])
      .then(() => undefined, (e: Error) => e)
    expect(bad).toBeInstanceOf(TypeError)
    expect(bad?.message).toMatch(/^calls\[1\]\.id must be a non-empty string/)
    const duplicate = await durability.send.many([{ id: "m-1", payload: { to: "a" } }, { id: "taken", payload: { to: "b" } }])
      .then(() => undefined, (e: Error) => e)
    expect(duplicate?.name).toBe("DuplicateDurableCallError")
    expect(await durability.send.getResult("m-1")).toEqual({ status: "not_found" })

    await durability.send.many([{ id: "m-1", payload: { to: "a" } }, { id: "m-2", payload: { to: "b" } }])
    expect(await durability.send.job("m-1").wait({ timeoutMs: 5_000 })).toMatchObject({ status: "completed", result: "a" })
    expect(await durability.send.job("m-2").wait({ timeoutMs: 5_000 })).toMatchObject({ status: "completed", result: "b" })
  })

  it("reads, lists and cancels named alarms; a Date schedules; get, cancel and list are reserved names", async () => {
    const context = await memoryContext()
    const alarms = new DurabilityAlarms({ context, handlers: { renew: () => undefined, expire: () => undefined } })
    const at = new Date(Date.now() + 3_600_000)
    await alarms.renew(at)
    await alarms.expire(at.getTime() + 1_000)
    expect(await alarms.get("renew")).toMatchObject({ name: "renew", status: "pending", scheduledTime: at.getTime(), attempt: 0 })
    expect((await alarms.list()).items.map((state) => state.name)).toEqual(["renew", "expire"])
    expect(await alarms.cancel("renew")).toBe(true)
    expect(await alarms.get("renew")).toBeUndefined()
    expect(context.memory.alarmAt).toBe(at.getTime() + 1_000)
    expectTypeOf(alarms.get).parameter(0).toEqualTypeOf<"renew" | "expire">()
    for (const name of ["get", "cancel", "list"]) {
      const error = thrownBy(() => new DurabilityAlarms({ context, handlers: { [name]: () => undefined } }))
      expect(error.message).toBe(`"${name}" is reserved by DurabilityAlarms`)
    }
  })
})

describe("observability by default", () => {
  it("a call failing for good is logged once to console.error as an object; logLifecycle logs every event", async () => {
    const errors: Array<unknown> = []
    const lines: Array<unknown> = []
    const errorSpy = vi.spyOn(console, "error").mockImplementation((entry: unknown) => void errors.push(entry))
    const logSpy = vi.spyOn(console, "log").mockImplementation((entry: unknown) => void lines.push(entry))
    try {
      const context = await memoryContext()
      const durability = new Durability({
        context,
        onLifecycleEvent: logLifecycle,
        handlers: {
          charge: () => {
            throw new NonRetryableError("card declined")
          }
        }
      })
      await durability.charge({ id: "inv-1", payload: null })
      expect(await durability.charge.job("inv-1").wait({ timeoutMs: 60_000 })).toMatchObject({ status: "failed" })
      expect(errors).toEqual([
        expect.objectContaining({
          level: "ERROR",
          event: "durability.attempt.failed",
          operation: "charge",
          id: "inv-1",
          attempt: 1,
          error: { name: "NonRetryableError", message: "card declined" }
        })
      ])
      expect(lines.map((line) => (line as { type: string }).type)).toEqual([
        "registered",
        "attempt_started",
        "attempt_settled"
      ])
      expect(lines[0]).toMatchObject({ event: "durability.lifecycle", entityKind: "operation", id: "inv-1" })
    } finally {
      errorSpy.mockRestore()
      logSpy.mockRestore()
    }
  })
})

describe("the log option", () => {
  it("sends the library's diagnostics to a function of the application instead of the console", async () => {
    const context = await memoryContext()
    const entries: Array<Readonly<Record<string, unknown>>> = []
    const errorSpy = vi.spyOn(console, "error")
    try {
      const durability = new Durability({
        context,
        log: (entry) => void entries.push(entry),
        handlers: {
          charge: () => {
            throw new NonRetryableError("card declined")
          }
        }
      })
      await durability.charge({ id: "inv-1", payload: null })
      await durability.charge.job("inv-1").wait({ timeoutMs: 60_000 })
      expect(entries).toEqual([expect.objectContaining({ level: "ERROR", event: "durability.attempt.failed", id: "inv-1" })])
      expect(errorSpy).not.toHaveBeenCalled()
    } finally {
      errorSpy.mockRestore()
    }
    const other = await memoryContext()
    const bad = thrownBy(() => new DurabilityScheduler({ context: other, log: "console" as never }))
    expect(bad).toBeInstanceOf(TypeError)
    expect(bad.message).toBe('log must be a function, got "console"')
  })
})
