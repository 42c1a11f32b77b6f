/**
 * The Effect face, `Log`, on a simulated object with a TestClock: time read from `Clock` (age
 * retention, lease expiry), typed errors naming the field with storage unchanged, a storage failure
 * between a cold write and its delete (nothing lost: the records stay hot and the next trim flushes
 * them again), an eviction between the two (the same), the poison handler's failure reported, the
 * load from the context's `RoutingLoad`, and the statements an append and a read cost.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, TestClock } from "effect"
import * as Log from "../../../src/log/Log.js"
import * as RoutingLoad from "../../../src/routing/RoutingLoad.js"
import * as FaultyStorage from "../../../src/testing/FaultyStorage.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"

type Body = { readonly n: number }

/** A cold store as a map, its calls counted; `dieAfterWrite` makes the next write store then end the fiber (an eviction). */
const coldStore = () => {
  const segments = new Map<string, Array<Log.LogRecord<Body>>>()
  const writes: Array<readonly [number, number]> = []
  let dieAfterWrite = false
  const cold: Log.LogColdStorage<Body> = {
    write: (segment) =>
      Effect.suspend(() => {
        const locator = `seg-${segment.firstOffset}-${segment.lastOffset}`
        segments.set(locator, segment.records)
        writes.push([segment.firstOffset, segment.lastOffset])
        if (dieAfterWrite) {
          dieAfterWrite = false
          return Effect.interrupt
        }
        return Effect.succeed(locator)
      }),
    read: (locator) => Effect.sync(() => segments.get(locator))
  }
  return { cold, segments, writes, evictAfterNextWrite: () => void (dieAfterWrite = true) }
}

const bodies = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ body: { n: from + i } }))

/** Reads every offset from `from` to the end, page by page (through cold segments too). */
const readAll = (log: Log.LogService<Body>, from: number) =>
  Effect.gen(function*() {
    const seen: Array<number> = []
    let at = from
    for (;;) {
      const page = yield* log.read({ from: at })
      if (page.records.length === 0) return seen
      seen.push(...page.records.map((record) => record.body.n))
      at = page.nextOffset
    }
  })

describe("Log (Effect face)", () => {
  it.scoped("expires by age on the Clock, a Duration option", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const log = yield* object.run(Log.make<Body>({ retention: { maxAge: Duration.minutes(1) } }))
      yield* object.run(log.append(bodies(0, 2)))
      yield* TestClock.adjust(Duration.seconds(59))
      expect(yield* object.run(log.trim)).toBe(0)
      yield* object.run(log.append(bodies(2, 1)))
      yield* TestClock.adjust(Duration.seconds(2))
      expect(yield* object.run(log.trim)).toBe(2)
      expect(yield* object.run(log.bounds)).toEqual({ oldestOffset: 2, hotOffset: 2, nextOffset: 3 })
    }))

  it.scoped("fails with typed errors naming the field; storage unchanged", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const log = yield* object.run(Log.make<Body>({ leases: {} }))
      yield* object.run(log.append(bodies(0, 2)))
      const before = object.storage.snapshot()
      const rejected = yield* object.run(log.append([{ body: { n: 1 }, deduplicationKey: "" }]))
      expect(rejected.success ? undefined : rejected.error).toMatchObject({ _tag: "LogAppendError", field: "records[0].deduplicationKey" })
      const failures = [
        yield* Effect.flip(object.run(log.read({ from: -1 }))),
        yield* Effect.flip(object.run(log.read({ from: 0, limit: 1.5 }))),
        yield* Effect.flip(object.run(log.commit("", 1))),
        yield* Effect.flip(object.run(log.lease("search", 0))),
        yield* Effect.flip(object.run(log.ack("search", "")))
      ]
      expect(failures.map((error) => [error._tag, "field" in error ? error.field : undefined])).toEqual([
        ["LogAppendError", "from"],
        ["LogAppendError", "limit"],
        ["LogAppendError", "consumer"],
        ["LogAppendError", "limit"],
        ["LogAppendError", "batchId"]
      ])
      expect(yield* Effect.flip(object.run(log.ack("search", "nobody")))).toMatchObject({ _tag: "LogLeaseError", batchId: "nobody" })
      expect(object.storage.snapshot()).toEqual(before)
      const bad = yield* Effect.flip(object.run(Log.make({ retention: { maxAge: "soon" as never } })))
      expect(bad).toMatchObject({ _tag: "InvalidOptionError", field: "retention.maxAge" })
    }))

  it.scoped("a storage failure between the cold write and the delete loses nothing: the records stay hot, the next trim flushes them", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryStorage.make
      const faulty = FaultyStorage.make(memory)
      const object = yield* TestDurability.make({ storage: faulty })
      const store = coldStore()
      const log = yield* object.run(Log.make<Body>({ retention: { maxRecords: 2 }, cold: store.cold }))
      yield* object.run(log.append(bodies(0, 5)))
      // The trim's statements: its window, its page, then (after the write) the index entry: fail that one.
      faulty.failCall("sql", faulty.calls("sql") + 3)
      const exit = yield* Effect.exit(object.run(log.trim))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(store.writes).toEqual([[0, 2]])
      expect(yield* object.run(log.bounds)).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 5 })
      expect(memory.sql.exec("SELECT COUNT(*) AS n FROM durability_log_segments").toArray()[0]?.n).toBe(0)
      expect(yield* object.run(log.trim)).toBe(3)
      expect(store.writes).toEqual([[0, 2], [0, 2]])
      expect(yield* object.run(readAll(log, 0))).toEqual([0, 1, 2, 3, 4])
    }))

  it.scoped("an eviction after the cold write and before the delete loses nothing; the next instance flushes again", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const store = coldStore()
      const options: Log.LogOptions<Body> = { retention: { maxRecords: 1 }, cold: store.cold }
      const log = yield* first.run(Log.make<Body>(options))
      yield* first.run(log.append(bodies(0, 4)))
      store.evictAfterNextWrite()
      const exit = yield* Effect.exit(first.run(log.trim))
      expect(Exit.isInterrupted(exit)).toBe(true)
      const second = yield* first.restart
      const again = yield* second.run(Log.make<Body>(options))
      expect(yield* second.run(again.bounds)).toEqual({ oldestOffset: 0, hotOffset: 0, nextOffset: 4 })
      expect(yield* second.run(again.trim)).toBe(3)
      expect(yield* second.run(again.bounds)).toEqual({ oldestOffset: 0, hotOffset: 3, nextOffset: 4 })
      expect(yield* second.run(readAll(again, 0))).toEqual([0, 1, 2, 3])
    }))

  it.scoped("a record cold storage lost inside a segment is a truncation when read, never a silent skip", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const store = coldStore()
      const log = yield* object.run(Log.make<Body>({ retention: { maxRecords: 1 }, cold: store.cold }))
      yield* object.run(log.append(bodies(0, 4)))
      expect(yield* object.run(log.trim)).toBe(3)
      const [locator, records] = [...store.segments][0]!
      store.segments.set(locator, records.filter((record) => record.offset !== 1))
      const page = yield* object.run(log.read({ from: 0 }))
      expect(page.records.map((record) => record.offset)).toEqual([0])
      expect(page.nextOffset).toBe(1)
      expect(yield* Effect.flip(object.run(log.read({ from: page.nextOffset })))).toMatchObject({
        _tag: "LogTruncatedError",
        requestedOffset: 1,
        oldestOffset: 3
      })
      expect((yield* object.run(log.read({ from: 2 }))).records.map((record) => record.offset)).toEqual([2])
    }))

  it.scoped("leases expire on the Clock; a reclaim's fresh batch id fences the old holder", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const log = yield* object.run(Log.make<Body>({ leases: { leaseDuration: Duration.seconds(5), maxParallelism: 2 } }))
      yield* object.run(log.append(bodies(0, 3)))
      const held = (yield* object.run(log.lease("w", 2)))!
      expect(held).toMatchObject({ firstOffset: 0, lastOffset: 1, attempt: 1, expiresAt: 5_000 })
      yield* TestClock.adjust(Duration.seconds(5))
      const stolen = (yield* object.run(log.lease("w", 2)))!
      expect(stolen).toMatchObject({ firstOffset: 0, lastOffset: 1, attempt: 2, expiresAt: 10_000 })
      expect(yield* Effect.flip(object.run(log.nack("w", held.batchId)))).toMatchObject({ _tag: "LogLeaseError" })
      const next = (yield* object.run(log.lease("w", 2)))!
      expect(next.firstOffset).toBe(2)
      yield* object.run(log.ack("w", next.batchId))
      expect(yield* object.run(log.cursor("w"))).toBeUndefined()
      yield* object.run(log.ack("w", stolen.batchId))
      expect(yield* object.run(log.cursor("w"))).toBe(3)
      expect(yield* object.run(log.leases("w"))).toEqual([])
    }))

  it.scoped("two workers of one consumer never get the same offsets, even while one waits on cold storage", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const store = coldStore()
      const gate = yield* Deferred.make<void>()
      let coldReads = 0
      const cold: Log.LogColdStorage<Body> = {
        write: store.cold.write,
        // The first read waits until the test opens the gate: the other worker leases meanwhile.
        read: (locator) => Effect.zipRight(coldReads++ === 0 ? Deferred.await(gate) : Effect.void, store.cold.read(locator))
      }
      const log = yield* object.run(Log.make<Body>({ retention: { maxRecords: 2 }, cold, leases: { maxParallelism: 3 } }))
      yield* object.run(log.append(bodies(0, 6)))
      expect(yield* object.run(log.trim)).toBe(4)
      const first = yield* Effect.fork(object.run(log.lease("w", 2)))
      yield* TestClock.adjust(0)
      const second = yield* object.run(log.lease("w", 2))
      yield* Deferred.succeed(gate, undefined)
      const late = yield* Fiber.join(first)
      const third = yield* object.run(log.lease("w", 2))
      const ranges = [second, late, third].map((lease) => lease === undefined ? undefined : [lease.firstOffset, lease.lastOffset])
      expect(ranges).toEqual([[0, 1], [2, 3], [4, 5]])
      expect([second, late, third].flatMap((lease) => lease!.records.map((record) => record.body.n))).toEqual([0, 1, 2, 3, 4, 5])
      expect(coldReads).toBe(3)
    }))

  it.scoped("a failing poison handler is reported as durability.log.poison_handler.failed; the skip stands", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const log = yield* object.run(Log.make<Body>({
        leases: { maxAttempts: 1, onPoison: () => Effect.fail(new Error("dead letter store down")) }
      }))
      yield* object.run(log.append(bodies(0, 2)))
      const first = (yield* object.run(log.lease("w", 1)))!
      yield* object.run(log.nack("w", first.batchId))
      expect(yield* object.run(log.lease("w", 1))).toBeUndefined()
      const reports = yield* object.background.reports
      expect(reports).toMatchObject([{
        event: "durability.log.poison_handler.failed",
        details: { consumer: "w", firstOffset: 0, lastOffset: 0, error: { message: "dead letter store down" } }
      }])
      expect((yield* object.run(log.leases("w"))).map((lease) => lease.state)).toEqual(["skipped"])
      const next = (yield* object.run(log.lease("w", 1)))!
      expect(next.firstOffset).toBe(1)
    }))

  it.scoped("Log.layer provides the object's log under the Log tag", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const program = Effect.gen(function*() {
        const log = yield* Log.Log
        yield* log.append({ body: "hello" })
        return (yield* log.read({ from: 0 })).records.map((record) => record.body)
      })
      expect(yield* object.run(Effect.provide(program, Log.layer({ maxBatchSize: 10 })))).toEqual(["hello"])
    }))

  it.scoped("counts appends in the context's RoutingLoad", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const load = yield* RoutingLoad.make
      const log = yield* object.run(Effect.provideService(Log.make<Body>(), RoutingLoad.RoutingLoad, load))
      yield* object.run(log.append(bodies(0, 1)))
      expect((yield* load.snapshot(0)).inbound.completed).toBe(1)
    }))

  it.scoped("statements: an append without keys costs 2 (its load included), with keys 3; a hot read 2", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const log = yield* object.run(Log.make<Body>())
      yield* object.run(log.append(bodies(0, 1)))
      const counted = <A, E>(effect: Effect.Effect<A, E>) =>
        Effect.gen(function*() {
          const before = object.storage.statements.length
          yield* object.run(effect)
          return object.storage.statements.slice(before)
        })
      expect((yield* counted(log.append(bodies(1, 1)))).length).toBe(2)
      expect((yield* counted(log.append(bodies(2, 10)))).length).toBe(2)
      expect((yield* counted(log.append([{ body: { n: 3 }, deduplicationKey: "k" }]))).length).toBe(3)
      // A key already held: its lookup, then the load.
      expect((yield* counted(log.append([{ body: { n: 3 }, deduplicationKey: "k" }]))).length).toBe(2)
      expect((yield* counted(log.read({ from: 0 }))).length).toBe(2)
    }))
})
