/**
 * The promise face, `DurabilityLog`, on a simulated object (its clock a TestClock): the reference's
 * log guarantees, one test each — offsets, lag, replay, cursors, dedup, definite rejections,
 * retention by age, count and bytes, cold flush and rehydration, truncation, leases (fencing,
 * parallel ranges committed in order, nack, expiry, poison), load, and `migrate`.
 */
import { describe, expect, it } from "vitest"
import {
  DurabilityAlarms,
  DurabilityLog,
  DurabilityScheduler,
  type DurabilityLogConfig,
  durabilityLogLeaseMigrations,
  durabilityLogMigrations,
  type LogColdStorage,
  LogLeaseError,
  type LogRecord,
  LogTruncatedError,
  maxLogBytes
} from "../../../src/index.js"
import * as TestObjectState from "../../../src/testing/TestObjectState.js"

const START = 1_800_000_000_000

type Options = Partial<Pick<DurabilityLogConfig<string>, "retention" | "cold" | "maxBatchSize" | "leases" | "storageBackend">>

const fixture = async (options: Options = {}) => {
  const state = await TestObjectState.make({ startTime: START })
  const log = new DurabilityLog<string>({ context: state.context, storageBackend: "sqlite", ...options })
  return { log, state }
}

const offsetsOf = async (log: DurabilityLog<string>, bodies: Array<string>): Promise<Array<number>> => {
  const result = await log.append(bodies.map((body) => ({ body })))
  if (!result.success) throw new Error(`append rejected: ${result.error.message}`)
  return result.value
}

/** A cold store that keeps what was flushed and hands it back, as an R2 bucket would. */
const coldStore = (): LogColdStorage<string> & { readonly segments: Map<string, Array<LogRecord<string>>> } => {
  const segments = new Map<string, Array<LogRecord<string>>>()
  return {
    segments,
    write: async ({ firstOffset, records }) => {
      const locator = `segment-${firstOffset}`
      segments.set(locator, records)
      return locator
    },
    read: async (locator) => segments.get(locator)
  }
}

describe("DurabilityLog: append, read, cursors", () => {
  it("assigns contiguous offsets and reads them back in order", async () => {
    const { log } = await fixture()
    expect(await offsetsOf(log, ["a", "b"])).toEqual([0, 1])
    expect(await offsetsOf(log, ["c"])).toEqual([2])
    const page = await log.read({ from: 0 })
    expect(page.records.map((record) => [record.offset, record.body, record.appendedAt])).toEqual([[0, "a", START], [1, "b", START], [2, "c", START]])
    expect(page).toMatchObject({ nextOffset: 3, lag: 0 })
    expect(await log.bounds()).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 3 })
  })

  it("appends a single record given without an array", async () => {
    const { log } = await fixture()
    expect(await log.append({ body: "solo" })).toMatchObject({ success: true, value: [0] })
  })

  it("reports lag and resumes from the returned offset", async () => {
    const { log } = await fixture()
    await offsetsOf(log, ["a", "b", "c", "d"])
    const first = await log.read({ from: 0, limit: 2 })
    expect(first.records.map((record) => record.body)).toEqual(["a", "b"])
    expect(first).toMatchObject({ nextOffset: 2, lag: 2 })
    const second = await log.read({ from: first.nextOffset, limit: 2 })
    expect(second.records.map((record) => record.body)).toEqual(["c", "d"])
    expect(second).toMatchObject({ nextOffset: 4, lag: 0 })
    expect(await log.read({ from: second.nextOffset })).toMatchObject({ records: [], nextOffset: 4, lag: 0 })
  })

  it("retains records so independent consumers replay the same history", async () => {
    const { log } = await fixture()
    await offsetsOf(log, ["a", "b"])
    expect(await log.cursor("search")).toBeUndefined()
    await log.commit("search", 2)
    await log.commit("billing", 1)
    expect(await log.cursors()).toEqual({ billing: 1, search: 2 })
    expect((await log.read({ from: 0 })).records).toHaveLength(2)
  })

  it("ignores cursor regressions so a late commit cannot rewind", async () => {
    const { log } = await fixture()
    await offsetsOf(log, ["a", "b", "c"])
    await log.commit("search", 3)
    await log.commit("search", 1)
    expect(await log.cursor("search")).toBe(3)
  })

  it("reuses the offset of an already appended key", async () => {
    const { log } = await fixture()
    const first = await log.append([{ deduplicationKey: "one", body: "a" }, { deduplicationKey: "two", body: "b" }])
    const repeat = await log.append([{ deduplicationKey: "two", body: "b" }, { deduplicationKey: "three", body: "c" }])
    expect(first).toMatchObject({ success: true, value: [0, 1] })
    expect(repeat).toMatchObject({ success: true, value: [1, 2] })
    expect((await log.read({ from: 0 })).records.map((record) => record.deduplicationKey)).toEqual(["one", "two", "three"])
  })

  it("shares one offset between duplicate keys in a single batch", async () => {
    const { log } = await fixture()
    expect(await log.append([{ deduplicationKey: "same", body: "a" }, { deduplicationKey: "same", body: "a" }]))
      .toMatchObject({ success: true, value: [0, 0] })
    expect((await log.read({ from: 0 })).records).toHaveLength(1)
    expect(await log.bounds()).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 1 })
  })

  it("answers definite input errors with success: false, naming the field, and writes nothing", async () => {
    const { log, state } = await fixture({ maxBatchSize: 2 })
    const before = state.storage.snapshot()
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [[], "at least one record"],
      [[{ body: "a" }, { body: "b" }, { body: "c" }], "at most 2 records"],
      [[{ body: "a", deduplicationKey: "" }], "records[0].deduplicationKey"],
      [[{ body: "a" }, { body: () => 1 }], "records[1].body must be JSON"],
      [[5], "records[0] must be an object"]
    ]
    for (const [input, text] of cases) {
      const result = await log.append(input as never)
      expect(result, text).toMatchObject({ success: false, error: { name: "LogAppendError" } })
      expect(result.success ? "" : result.error.message, text).toContain(text)
      expect(result.load.observedAt).toBe(START)
    }
    expect(state.storage.snapshot()).toEqual(before)
    expect(await log.bounds()).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 0 })
  })

  it("throws LogAppendError for a bad offset, limit or consumer", async () => {
    const { log } = await fixture()
    for (const call of [
      () => log.read({ from: -1 }),
      () => log.read({ from: 1.5 }),
      () => log.read({ from: 0, limit: 0 }),
      () => log.commit("search", -3),
      () => log.commit("", 1),
      () => log.forgetColdBefore(Number.NaN)
    ]) {
      await expect(call()).rejects.toMatchObject({ name: "LogAppendError" })
    }
    expect(await log.cursors()).toEqual({})
  })
})

describe("DurabilityLog: retention and cold storage", () => {
  it("trims by age and reports the surviving window", async () => {
    const { log, state } = await fixture({ retention: { maxAgeMs: 60_000 } })
    await offsetsOf(log, ["a", "b"])
    await state.advance(90_000)
    await offsetsOf(log, ["c"])
    expect(await log.trim()).toBe(2)
    expect(await log.bounds()).toEqual({ oldestOffset: 2, hotOffset: 2, nextOffset: 3 })
    expect((await log.read({ from: 2 })).records.map((record) => record.body)).toEqual(["c"])
  })

  it("trims by record count, oldest first", async () => {
    const { log } = await fixture({ retention: { maxRecords: 2 } })
    await offsetsOf(log, ["a", "b", "c", "d"])
    expect(await log.trim()).toBe(2)
    expect((await log.read({ from: 2 })).records.map((record) => record.body)).toEqual(["c", "d"])
  })

  it("tells a consumer that fell behind retention that it lost records", async () => {
    const { log } = await fixture({ retention: { maxRecords: 1 } })
    await offsetsOf(log, ["a", "b"])
    await log.trim()
    const error = await log.read({ from: 0 }).then(() => undefined, (e: unknown) => e)
    expect(error).toBeInstanceOf(LogTruncatedError)
    expect(error).toMatchObject({ requestedOffset: 0, oldestOffset: 1, message: "Log offset 0 was trimmed; the oldest retained offset is 1" })
    expect((await log.read({ from: 1 })).records).toHaveLength(1)
  })

  it("flushes expiring records before deleting them", async () => {
    const archived: Array<LogRecord<string>> = []
    const { log } = await fixture({
      retention: { maxRecords: 1 },
      cold: {
        write: async ({ firstOffset, records }) => {
          archived.push(...records)
          return `segment-${firstOffset}`
        },
        read: async () => undefined
      }
    })
    await offsetsOf(log, ["a", "b", "c"])
    expect(await log.trim()).toBe(2)
    expect(archived.map((record) => [record.offset, record.body])).toEqual([[0, "a"], [1, "b"]])
  })

  it("retains records when the cold write fails, rejecting with its error", async () => {
    const { log } = await fixture({
      retention: { maxRecords: 1 },
      cold: {
        write: async () => {
          throw new Error("cold storage unavailable")
        },
        read: async () => undefined
      }
    })
    await offsetsOf(log, ["a", "b"])
    await expect(log.trim()).rejects.toThrow("cold storage unavailable")
    expect(await log.bounds()).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 2 })
  })

  it("refuses a cold write that answers no locator, keeping the records", async () => {
    const { log } = await fixture({ retention: { maxRecords: 1 }, cold: { write: async () => "", read: async () => undefined } })
    await offsetsOf(log, ["a", "b"])
    await expect(log.trim()).rejects.toThrow(TypeError)
    expect(await log.bounds()).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 2 })
  })

  it("archives each expiring record exactly once past a delete batch", async () => {
    const archived: Array<number> = []
    const { log } = await fixture({
      retention: { maxRecords: 1 },
      cold: {
        write: async ({ firstOffset, records }) => {
          archived.push(...records.map((record) => record.offset))
          return `segment-${firstOffset}`
        },
        read: async () => undefined
      }
    })
    for (let batch = 0; batch < 6; batch += 1) await offsetsOf(log, ["a", "b", "c", "d", "e"])
    expect(await log.trim()).toBe(29)
    expect(archived).toHaveLength(29)
    expect(new Set(archived).size).toBe(29)
    expect(await log.bounds()).toEqual({ oldestOffset: 0, hotOffset: 29, nextOffset: 30 })
  })

  it("keeps everything without retention configured", async () => {
    const { log } = await fixture()
    await offsetsOf(log, ["a", "b"])
    expect(await log.trim()).toBe(0)
    expect((await log.read({ from: 0 })).records).toHaveLength(2)
  })

  it("flushes by byte budget (UTF-8 bytes of the stored payload) and keeps flushed offsets readable", async () => {
    const cold = coldStore()
    const { log } = await fixture({ retention: { maxBytes: 12 }, cold })
    await offsetsOf(log, ["aaa", "bbb", "ccc", "ddd"])
    expect(await log.trim()).toBeGreaterThan(0)
    const bounds = await log.bounds()
    expect(bounds.oldestOffset).toBe(0)
    expect(bounds.hotOffset).toBeGreaterThan(0)
    expect(cold.segments.size).toBeGreaterThan(0)
    expect((await log.read({ from: 0 })).records[0]).toMatchObject({ offset: 0, body: "aaa" })
  })

  it("counts bytes as UTF-8: a multi-byte body uses more of the budget than its length", async () => {
    const { log, state } = await fixture({ retention: { maxBytes: 60 } })
    // Each stored payload is {"kind":"value","value":"…"}: 27 bytes around the body.
    await offsetsOf(log, ["€€€€", "a"])
    const total = state.storage.sql.exec("SELECT total_bytes FROM durability_log_seq").toArray()[0]?.total_bytes
    expect(total).toBe(27 + 12 + 27 + 1)
    expect(await log.trim()).toBe(1)
    expect(await log.bounds()).toEqual({ oldestOffset: 1, hotOffset: 1, nextOffset: 2 })
  })

  it("rehydrates a flushed page and resumes into hot records", async () => {
    const cold = coldStore()
    const { log } = await fixture({ retention: { maxRecords: 1 }, cold })
    await offsetsOf(log, ["a", "b", "c"])
    expect(await log.trim()).toBe(2)
    const flushed = await log.read({ from: 0, limit: 2 })
    expect(flushed.records.map((record) => record.body)).toEqual(["a", "b"])
    expect(flushed.nextOffset).toBe(2)
    const hot = await log.read({ from: flushed.nextOffset })
    expect(hot.records.map((record) => record.body)).toEqual(["c"])
    expect(hot.lag).toBe(0)
  })

  it("truncates once flushed segments are forgotten", async () => {
    const cold = coldStore()
    const { log } = await fixture({ retention: { maxRecords: 1 }, cold })
    await offsetsOf(log, ["a", "b"])
    await log.trim()
    expect((await log.read({ from: 0 })).records).toHaveLength(1)
    expect(await log.forgetColdBefore(1)).toBe(1)
    await expect(log.read({ from: 0 })).rejects.toThrow(LogTruncatedError)
  })

  it("truncates when cold storage lost a segment it indexed", async () => {
    const cold = coldStore()
    const { log } = await fixture({ retention: { maxRecords: 1 }, cold })
    await offsetsOf(log, ["a", "b"])
    await log.trim()
    cold.segments.clear()
    await expect(log.read({ from: 0 })).rejects.toThrow(LogTruncatedError)
  })

  it("deletes rather than flushes without cold storage", async () => {
    const { log } = await fixture({ retention: { maxBytes: 8 } })
    await offsetsOf(log, ["aaaa", "bbbb", "cccc"])
    expect(await log.trim()).toBeGreaterThan(0)
    const bounds = await log.bounds()
    expect(bounds.oldestOffset).toBe(bounds.hotOffset)
    await expect(log.read({ from: 0 })).rejects.toThrow(LogTruncatedError)
  })

  it("rejects bad retention and lease options naming the field, before any table is made", async () => {
    const state = await TestObjectState.make({ startTime: START })
    const cases: ReadonlyArray<readonly [Options, new(...args: Array<never>) => Error, string]> = [
      [{ retention: { maxBytes: maxLogBytes + 1 } }, RangeError, `retention.maxBytes must not exceed ${maxLogBytes} bytes`],
      [{ retention: { maxRecords: 0 } }, RangeError, "retention.maxRecords"],
      [{ retention: { maxAgeMs: -5 } }, RangeError, "retention.maxAge"],
      [{ maxBatchSize: 1.5 }, RangeError, "maxBatchSize"],
      [{ leases: { maxParallelism: 0 } }, RangeError, "leases.maxParallelism"],
      [{ leases: { onPoison: 3 as never } }, TypeError, "leases.onPoison"],
      [{ cold: { write: async () => "x" } as never }, TypeError, "cold.read"],
      [{ storageBackend: "kv" }, TypeError, "storageBackend must be \"sqlite\""]
    ]
    for (const [options, ErrorClass, text] of cases) {
      let thrown: unknown
      try {
        new DurabilityLog<string>({ context: state.context, ...options })
      } catch (error) {
        thrown = error
      }
      expect(thrown, text).toBeInstanceOf(ErrorClass)
      expect((thrown as Error).message, text).toContain(text)
    }
    expect(state.storage.sql.exec("SELECT name FROM sqlite_master WHERE name LIKE 'durability_log%'").toArray()).toEqual([])
  })

  it("handles more flushed segments than one storage batch", async () => {
    const cold = coldStore()
    const { log } = await fixture({ maxBatchSize: 1, retention: { maxRecords: 1 }, cold })
    for (let index = 0; index < 150; index += 1) {
      await offsetsOf(log, [`v${index}`])
      await log.trim()
    }
    expect(cold.segments.size).toBe(149)
    expect((await log.read({ from: 0 })).records[0]).toMatchObject({ offset: 0, body: "v0" })
    expect((await log.read({ from: 140 })).records[0]).toMatchObject({ offset: 140, body: "v140" })
    expect(await log.forgetColdBefore(149)).toBe(149)
    await expect(log.read({ from: 0 })).rejects.toThrow(LogTruncatedError)
  })

  it("trims in batches larger than one page", async () => {
    const { log } = await fixture({ maxBatchSize: 2, retention: { maxRecords: 1 } })
    await offsetsOf(log, ["a", "b"])
    await offsetsOf(log, ["c", "d"])
    await offsetsOf(log, ["e"])
    expect(await log.trim()).toBe(4)
    expect(await log.bounds()).toEqual({ oldestOffset: 4, hotOffset: 4, nextOffset: 5 })
  })

  it("dedups only records still held in the object: a trimmed key makes a new record", async () => {
    const { log } = await fixture({ retention: { maxRecords: 1 } })
    await log.append([{ deduplicationKey: "k", body: "a" }, { body: "b" }])
    await log.trim()
    expect(await log.append({ deduplicationKey: "k", body: "a" })).toMatchObject({ success: true, value: [2] })
  })
})

describe("DurabilityLog: leases", () => {
  it("never hands the same offsets to two concurrent consumers", async () => {
    const { log } = await fixture({ leases: {} })
    await offsetsOf(log, ["a", "b", "c", "d"])
    const first = await log.lease("search", 2)
    expect(await log.lease("search", 2)).toBeUndefined()
    expect(first?.records.map((record) => record.body)).toEqual(["a", "b"])
    await log.ack("search", first!.batchId)
    const second = await log.lease("search", 2)
    expect(second?.records.map((record) => record.body)).toEqual(["c", "d"])
    expect(second?.batchId).not.toBe(first?.batchId)
  })

  it("hands different ranges to parallel workers and commits in order", async () => {
    const { log } = await fixture({ leases: { maxParallelism: 2 } })
    await offsetsOf(log, ["a", "b", "c"])
    const first = await log.lease("search", 1)
    const second = await log.lease("search", 1)
    expect(first?.firstOffset).toBe(0)
    expect(second?.firstOffset).toBe(1)
    expect(await log.lease("search", 1)).toBeUndefined()
    await log.ack("search", second!.batchId)
    expect(await log.cursor("search")).toBeUndefined()
    await log.ack("search", first!.batchId)
    expect(await log.cursor("search")).toBe(2)
    expect(await log.leases("search")).toEqual([])
  })

  it("redelivers a nacked range under a fresh batch id", async () => {
    const { log } = await fixture({ leases: {} })
    await offsetsOf(log, ["a", "b"])
    const first = await log.lease("search", 1)
    await log.nack("search", first!.batchId)
    const retry = await log.lease("search", 1)
    expect(retry).toMatchObject({ firstOffset: 0, attempt: 2 })
    expect(retry?.batchId).not.toBe(first?.batchId)
    expect(retry?.records.map((record) => record.body)).toEqual(["a"])
  })

  it("reclaims a range whose lease expired, fencing the old holder", async () => {
    const { log, state } = await fixture({ leases: { leaseMs: 1_000 } })
    await offsetsOf(log, ["a"])
    const held = await log.lease("search", 1)
    expect(held?.expiresAt).toBe(START + 1_000)
    expect(await log.lease("search", 1)).toBeUndefined()
    await state.advance(1_001)
    const stolen = await log.lease("search", 1)
    expect(stolen).toMatchObject({ firstOffset: 0, attempt: 2 })
    const error = await log.ack("search", held!.batchId).then(() => undefined, (e: unknown) => e)
    expect(error).toBeInstanceOf(LogLeaseError)
    expect((error as Error).message).toBe(`Log lease "${held!.batchId}" is not held`)
    await log.ack("search", stolen!.batchId)
    expect(await log.cursor("search")).toBe(1)
  })

  it("drops settled ranges a hand commit already passed", async () => {
    const { log } = await fixture({ leases: { maxParallelism: 2 } })
    await offsetsOf(log, ["a", "b", "c"])
    const first = await log.lease("search", 1)
    const second = await log.lease("search", 1)
    await log.ack("search", second!.batchId)
    await log.commit("search", 3)
    await log.ack("search", first!.batchId)
    expect(await log.cursor("search")).toBe(3)
    expect(await log.leases("search")).toEqual([])
  })

  it("rejects double settlement of one batch", async () => {
    const { log } = await fixture({ leases: {} })
    await offsetsOf(log, ["a"])
    const lease = await log.lease("search")
    await log.ack("search", lease!.batchId)
    await expect(log.ack("search", lease!.batchId)).rejects.toThrow(LogLeaseError)
    await expect(log.nack("search", lease!.batchId)).rejects.toThrow(LogLeaseError)
  })

  it("keeps consumers independent", async () => {
    const { log } = await fixture({ leases: {} })
    await offsetsOf(log, ["a", "b"])
    const search = await log.lease("search", 1)
    const billing = await log.lease("billing", 1)
    expect(search?.firstOffset).toBe(0)
    expect(billing?.firstOffset).toBe(0)
    await log.ack("search", search!.batchId)
    expect(await log.cursors()).toEqual({ search: 1 })
  })

  it("blocks on a poison range without somewhere to send it", async () => {
    const { log } = await fixture({ leases: { maxAttempts: 1 } })
    await offsetsOf(log, ["a", "b"])
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const lease = await log.lease("search", 1)
      expect(lease?.firstOffset).toBe(0)
      await log.nack("search", lease!.batchId)
    }
    expect(await log.cursor("search")).toBeUndefined()
  })

  it("skips a poison range once it has somewhere to go, durably before telling onPoison", async () => {
    const poisoned: Array<readonly [number, string, ReadonlyArray<string>]> = []
    let log!: DurabilityLog<string>
    ;({ log } = await fixture({
      leases: {
        maxAttempts: 2,
        onPoison: async (lease) => {
          const [stored] = await log.leases("search")
          poisoned.push([lease.firstOffset, stored!.state, lease.records.map((record) => record.body)])
        }
      }
    }))
    await offsetsOf(log, ["a", "b"])
    const first = await log.lease("search", 1)
    await log.nack("search", first!.batchId)
    const second = await log.lease("search", 1)
    await log.nack("search", second!.batchId)
    expect(await log.lease("search", 1)).toBeUndefined()
    expect(poisoned).toEqual([[0, "skipped", ["a"]]])
    const next = await log.lease("search", 1)
    expect(next?.firstOffset).toBe(1)
    await log.ack("search", next!.batchId)
    expect(await log.cursor("search")).toBe(2)
  })

  it("rehydrates a leased range that retention already flushed", async () => {
    const cold = coldStore()
    const { log } = await fixture({ retention: { maxRecords: 1 }, cold, leases: {} })
    await offsetsOf(log, ["a", "b"])
    const lease = await log.lease("search", 1)
    await log.nack("search", lease!.batchId)
    await log.trim()
    const retry = await log.lease("search", 1)
    expect(retry?.records.map((record) => record.body)).toEqual(["a"])
  })

  it("refuses lease calls when leases are not enabled, and makes no lease table", async () => {
    const { log, state } = await fixture()
    await expect(log.lease("search")).rejects.toThrow(TypeError)
    await expect(log.lease("search")).rejects.toThrow(/leases option/)
    await expect(log.ack("search", "x")).rejects.toThrow(/leases option/)
    await expect(log.nack("search", "x")).rejects.toThrow(/leases option/)
    expect(state.storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 'durability_log_leases'").toArray()).toEqual([])
  })
})

describe("DurabilityLog: retention from a named alarm", () => {
  it("a shared scheduler's named alarm trims every minute; the log itself schedules nothing", async () => {
    const state = await TestObjectState.make({ startTime: START })
    const scheduler = new DurabilityScheduler({ context: state.context })
    const log = new DurabilityLog<string>({ scheduler, retention: { maxAgeMs: 60_000 } })
    await offsetsOf(log, ["a", "b"])
    expect(state.storage.alarmAt).toBeNull()
    const trimmed: Array<number> = []
    const alarms = new DurabilityAlarms({
      scheduler,
      handlers: {
        trim: async () => {
          trimmed.push(await log.trim())
          await alarms.trim(state.now() + 60_000)
        }
      }
    })
    await alarms.trim(START + 60_000)
    await state.advance(60_000)
    expect(trimmed).toEqual([0])
    await offsetsOf(log, ["c"])
    await state.advance(60_000)
    expect(trimmed).toEqual([0, 2])
    expect(await log.bounds()).toEqual({ oldestOffset: 2, hotOffset: 2, nextOffset: 3 })
  })
})

describe("DurabilityLog: load and migrations", () => {
  it("reports backlog from the furthest-behind consumer", async () => {
    const { log } = await fixture()
    await offsetsOf(log, ["a", "b", "c"])
    expect((await log.load()).outbound.pendingDeliveries).toBe(0)
    await log.commit("search", 3)
    await log.commit("billing", 1)
    expect((await log.load()).outbound.pendingDeliveries).toBe(2)
    await log.commit("billing", 3)
    expect((await log.load()).outbound.pendingDeliveries).toBe(0)
  })

  it("counts appends as inbound calls in the load it answers, with the backlog after the append", async () => {
    const { log } = await fixture()
    await offsetsOf(log, ["a"])
    await log.commit("search", 1)
    const result = await log.append([{ body: "b" }, { body: "c" }])
    expect(result.load.inbound.completed).toBe(1)
    expect(result.load.outbound.pendingDeliveries).toBe(2)
    expect((await log.load()).inbound.completed).toBe(2)
  })

  it("migrate applies and reverts the log's tables; leases come with a log that has them", async () => {
    const state = await TestObjectState.make({ startTime: START })
    expect(durabilityLogMigrations.map((migration) => migration.name)).toEqual(["durability_0024_log"])
    expect(durabilityLogLeaseMigrations.map((migration) => migration.name)).toEqual(["durability_0025_log_leases"])
    expect(DurabilityLog.migrate(state.context)).toEqual({ applied: ["durability_0024_log"], rolledBack: [] })
    new DurabilityLog({ context: state.context, leases: {} })
    const tables = () =>
      state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'durability_log%' ORDER BY name")
        .toArray().map((row) => row.name)
    expect(tables()).toEqual([
      "durability_log_allocations",
      "durability_log_cursors",
      "durability_log_leases",
      "durability_log_records",
      "durability_log_segments",
      "durability_log_seq"
    ])
    expect(DurabilityLog.migrate(state.context, null)).toEqual({ applied: [], rolledBack: ["durability_0024_log"] })
    expect(tables()).toEqual(["durability_log_allocations", "durability_log_leases"])
  })
})
