/**
 * The promise facade over in-memory storage (its own runtime and live clock;
 * nothing here waits on time).
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { DurabilityScheduler } from "../../src/index.js"
import { internals } from "../../src/facade/DurabilityScheduler.js"
import type { DurabilityContext } from "../../src/shared/platform.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"

const memoryContext = async (): Promise<DurabilityContext & { readonly memory: MemoryStorage.MemoryStorage }> => {
  const memory = await Effect.runPromise(MemoryStorage.make)
  return { storage: memory, memory }
}

describe("DurabilityScheduler options", () => {
  it("rejects bad options with RangeError/TypeError and the documented messages", async () => {
    const context = await memoryContext()
    const cases: Array<[Record<string, unknown>, ErrorConstructor, string]> = [
      [{ alarmConcurrency: 0 }, RangeError, "alarmConcurrency must be a positive integer"],
      [{ alarmConcurrency: 2.5 }, RangeError, "alarmConcurrency must be a positive integer"],
      [{ alarmMinDelayMs: 500 }, RangeError, "alarmMinDelayMs must be between 1000 and 15000"],
      [{ alarmMinDelayMs: 20_000 }, RangeError, "alarmMinDelayMs must be between 1000 and 15000"],
      [{ alarmHandoffMs: 0 }, RangeError, "alarmHandoffMs must be a positive integer"],
      [{ alarmHandoffMs: Number.POSITIVE_INFINITY }, RangeError, "alarmHandoffMs must be a positive integer"],
      [{ onAlarmRetry: "later" }, TypeError, "onAlarmRetry must be a function"],
      [{ liveTimers: 1 }, TypeError, "liveTimers must be a boolean"],
      [{ storageBackend: "kv" }, TypeError, 'storageBackend must be "sqlite"']
    ]
    for (const [options, ErrorType, message] of cases) {
      const build = () => new DurabilityScheduler({ context, ...options })
      expect(build).toThrow(ErrorType)
      expect(build).toThrow(message)
    }
    expect(() => new DurabilityScheduler({ context: {} as DurabilityContext })).toThrow(TypeError)
    expect(context.memory.statements).toEqual([])
  })

  it("accepts the defaults and the documented bounds", async () => {
    for (
      const options of [{}, { alarmMinDelayMs: 1_000 }, { alarmMinDelayMs: 15_000, liveTimers: true }, {
        storageBackend: "sqlite" as const
      }]
    ) {
      const context = await memoryContext()
      expect(new DurabilityScheduler({ context, ...options })).toBeInstanceOf(DurabilityScheduler)
    }
  })

  it("rejects a scheduler this library did not create", () => {
    const lookAlike = Object.create(DurabilityScheduler.prototype) as DurabilityScheduler
    expect(() => internals(lookAlike)).toThrow("Unknown DurabilityScheduler instance")
    expect(() => internals({ alarm: async () => undefined })).toThrow("Unknown DurabilityScheduler instance")
  })
})

describe("DurabilityScheduler runtime", () => {
  it("warms up inside blockConcurrencyWhile and runs an alarm pass", async () => {
    const context = await memoryContext()
    const blocked: Array<Promise<unknown>> = []
    const scheduler = new DurabilityScheduler({
      context: {
        ...context,
        blockConcurrencyWhile: <T>(callback: () => Promise<T>) => {
          const promise = callback()
          blocked.push(promise)
          return promise
        }
      }
    })
    expect(blocked).toHaveLength(1)
    await Promise.all(blocked)
    await expect(scheduler.alarm({ isRetry: false, retryCount: 0 })).resolves.toBeUndefined()
    expect(context.memory.alarmAt).toBeNull()
  })

  it("a failed warm-up does not wedge the object: the next call retries it", async () => {
    const context = await memoryContext()
    let failures = 1
    const flaky: DurabilityContext = {
      storage: {
        sql: context.memory.sql,
        transactionSync: (closure) => context.memory.transactionSync(closure),
        getAlarm: () => failures-- > 0 ? Promise.reject(new Error("storage unavailable")) : context.memory.getAlarm(),
        setAlarm: (at) => context.memory.setAlarm(at),
        deleteAlarm: () => context.memory.deleteAlarm()
      }
    }
    const scheduler = new DurabilityScheduler({ context: flaky })
    const first = await scheduler.alarm().then(() => undefined, (error: unknown) => error)
    expect(first).toBeInstanceOf(Error)
    expect(first).toMatchObject({ name: "StorageError", message: expect.stringContaining("storage unavailable") })
    await expect(scheduler.alarm()).resolves.toBeUndefined()
  })
})
