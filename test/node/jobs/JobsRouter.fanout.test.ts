/**
 * The router's calls to every shard, `event` and `bulk`: counted calls per shard over fakes (every shard
 * tried even when one fails, bad input refused before any call, cursors refused when made for another
 * run or shard count), and over real in-memory objects answering through `Jobs.serve` (an event cancels
 * on every shard, a bulk run over several calls changes every matching job once).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Runtime, TestClock } from "effect"
import type * as Bulk from "../../../src/jobs/bulk.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as JobsRouter from "../../../src/jobs/JobsRouter.js"
import { Router as PromiseRouter } from "../../../src/facade/jobsRouter.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { jobRow } from "./support.js"

interface Sent {
  readonly shard: number
  readonly op: string
  readonly key?: string
  readonly options?: Bulk.BulkOptions
}

/** Shards answering `event` with `canceled[shard]` and `bulk` from a script; a shard in `failing` rejects. */
const fakeShards = (canceled: ReadonlyArray<number>, failing: ReadonlySet<number> = new Set()) => {
  const calls: Array<Sent> = []
  const namespace = {
    idFromName: (name: string) => Number(name.split(":")[1]),
    get: (shard: number) => ({
      jobsCall: (call: Sent & { readonly v: number }) => {
        calls.push({ ...call, shard })
        if (failing.has(shard)) return Promise.reject(new Error(`shard ${shard} is down`))
        if (call.op === "event") return Promise.resolve(canceled[shard])
        return Promise.reject(new Error(`unexpected ${call.op}`))
      }
    })
  }
  return { namespace, calls }
}

describe("JobsRouter.event", () => {
  it.effect("asks every shard once and answers the total canceled", () =>
    Effect.gen(function*() {
      const fake = fakeShards([2, 0, 5, 1])
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 4 })
      expect(yield* router.event("order-7")).toBe(8)
      expect(fake.calls.map((call) => [call.shard, call.op, call.key]).sort()).toEqual([
        [0, "event", "order-7"],
        [1, "event", "order-7"],
        [2, "event", "order-7"],
        [3, "event", "order-7"]
      ])
    }))

  it.effect("a failing shard fails the call with a ShardCallError naming it, after every shard was tried", () =>
    Effect.gen(function*() {
      const fake = fakeShards([1, 1, 1, 1, 1], new Set([1, 3]))
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 5 })
      const error = yield* Effect.flip(router.event("order-7"))
      expect(error).toBeInstanceOf(JobsRouter.ShardCallError)
      expect(error).toMatchObject({ shard: 1 })
      expect((error as JobsRouter.ShardCallError).message).toContain("shard 1 (jobs:1)")
      expect(((error as JobsRouter.ShardCallError).cause as Error).message).toBe("shard 1 is down")
      expect(fake.calls.map((call) => call.shard).sort()).toEqual([0, 1, 2, 3, 4])
    }))

  it.effect("a bad key is refused before any call", () =>
    Effect.gen(function*() {
      const fake = fakeShards([0, 0])
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 2 })
      expect(yield* Effect.flip(router.event(""))).toMatchObject({ _tag: "InvalidInputError", field: "key" })
      expect(yield* Effect.flip(router.event(7 as never))).toMatchObject({ _tag: "InvalidInputError", field: "key" })
      expect(fake.calls).toEqual([])
    }))
})

/** Shards each holding `held[shard]` jobs, canceling up to `limit` a call from an index cursor. */
const bulkShards = (held: ReadonlyArray<number>, failing: Set<number> = new Set()) => {
  const calls: Array<Sent> = []
  const changed = held.map(() => 0)
  const namespace = {
    idFromName: (name: string) => Number(name.split(":")[1]),
    get: (shard: number) => ({
      jobsCall: (call: Sent & { readonly v: number }) => {
        calls.push({ ...call, shard })
        if (failing.has(shard)) return Promise.reject(new Error(`shard ${shard} is down`))
        const from = call.options?.cursor === undefined ? 0 : (JSON.parse(call.options.cursor) as [string, number, number])[2]
        const to = Math.min(held[shard]!, from + call.options!.limit!)
        changed[shard] = to
        const done = to === held[shard]
        return Promise.resolve({ matched: to - from, affected: to - from, examined: to - from, done, ...(done ? {} : { cursor: JSON.stringify(["j", 0, to, 1_234_567_890, 2_345_678_901]) }) })
      }
    })
  }
  return { namespace, calls, changed }
}

describe("JobsRouter.bulk", () => {
  it.effect("each call asks each unfinished shard for up to limit; the cursor carries each shard's own until all are done", () =>
    Effect.gen(function*() {
      const fake = bulkShards([5, 0, 2, 9])
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 4 })
      const filter = { queue: "email" }
      const first = yield* router.bulk("cancel", filter, { limit: 3, reason: "cleanup" })
      expect(first).toMatchObject({ matched: 8, affected: 8, examined: 8, done: false })
      expect(fake.calls.map((call) => [call.shard, call.options]).sort()).toEqual([
        [0, { limit: 3, reason: "cleanup" }],
        [1, { limit: 3, reason: "cleanup" }],
        [2, { limit: 3, reason: "cleanup" }],
        [3, { limit: 3, reason: "cleanup" }]
      ])
      fake.calls.length = 0
      const second = yield* router.bulk("cancel", filter, { limit: 3, reason: "cleanup", cursor: first.cursor! })
      // Shards 1 and 2 were done: only 0 and 3 are asked, each from its own cursor.
      expect(second).toMatchObject({ matched: 5, affected: 5, done: false })
      const at = (to: number) => JSON.stringify(["j", 0, to, 1_234_567_890, 2_345_678_901])
      expect(fake.calls.map((call) => [call.shard, call.options?.cursor]).sort()).toEqual([[0, at(3)], [3, at(3)]])
      fake.calls.length = 0
      const third = yield* router.bulk("cancel", filter, { limit: 3, reason: "cleanup", cursor: second.cursor! })
      expect(third).toEqual({ matched: 3, affected: 3, examined: 3, done: true })
      expect(fake.calls.map((call) => [call.shard, call.options?.cursor])).toEqual([[3, at(6)]])
      expect(fake.changed).toEqual([5, 0, 2, 9])
    }))

  it.effect("a cursor over the most shards, each with a shard cursor's length, goes round", () =>
    Effect.gen(function*() {
      const SHARDS = JobsRouter.MAX_SHARDS
      const fake = bulkShards(Array.from({ length: SHARDS }, () => 2))
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: SHARDS })
      const first = yield* router.bulk("promote", { allQueues: true }, { limit: 1 })
      expect(first).toMatchObject({ affected: SHARDS, done: false })
      expect(yield* router.bulk("promote", { allQueues: true }, { limit: 1, cursor: first.cursor! })).toEqual({
        matched: SHARDS,
        affected: SHARDS,
        examined: SHARDS,
        done: true
      })
      expect(fake.calls).toHaveLength(2 * SHARDS)
    }))

  it.effect("a failing shard fails the call naming it after every shard was tried; the error's cursor goes on without repeating a chunk", () =>
    Effect.gen(function*() {
      const failing = new Set([2])
      const fake = bulkShards([4, 4, 4], failing)
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 3 })
      const first = yield* Effect.flip(router.bulk("remove", { allQueues: true }, { limit: 3 }))
      expect(first).toMatchObject({ _tag: "ShardCallError", shard: 2 })
      expect(fake.calls.map((call) => call.shard).sort()).toEqual([0, 1, 2])
      expect(fake.changed).toEqual([3, 3, 0])
      // The error's cursor goes on: shards 0 and 1 past their chunk, shard 2's chunk asked again.
      failing.clear()
      fake.calls.length = 0
      const second = yield* router.bulk("remove", { allQueues: true }, { limit: 3, cursor: (first as JobsRouter.ShardCallError).cursor! })
      expect(fake.calls.map((call) => [call.shard, call.options?.cursor === undefined ? 0 : JSON.parse(call.options.cursor)[2]]).sort()).toEqual([
        [0, 3],
        [1, 3],
        [2, 0]
      ])
      expect(second).toMatchObject({ matched: 5, affected: 5, done: false })
      expect(yield* router.bulk("remove", { allQueues: true }, { limit: 3, cursor: second.cursor! })).toEqual({ matched: 1, affected: 1, examined: 1, done: true })
      expect(fake.changed).toEqual([4, 4, 4])
    }))

  it.effect("bad input and foreign cursors are refused naming the field, before any call", () =>
    Effect.gen(function*() {
      const fake = bulkShards([3, 3])
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 2 })
      const refused = (action: unknown, filter: unknown, options?: unknown) =>
        Effect.flip(router.bulk(action as Bulk.BulkAction, filter as Bulk.JobFilter<number>, options as Bulk.BulkOptions))
      expect(yield* refused("nuke", { queue: "email" })).toMatchObject({ _tag: "InvalidInputError", field: "action" })
      expect(yield* refused("cancel", null)).toMatchObject({ field: "filter" })
      expect(yield* refused("cancel", {})).toMatchObject({ field: "filter.queue" })
      expect(yield* refused("cancel", { queue: "" })).toMatchObject({ field: "filter.queue" })
      expect(yield* refused("cancel", { queue: "email", state: ["waiting"] })).toMatchObject({ field: "filter.state" })
      expect(yield* refused("cancel", { queue: "email", states: ["completed"] })).toMatchObject({ field: "filter.states", kind: "range" })
      expect(yield* refused("cancel", { queue: "email" }, { limit: 0 })).toMatchObject({ field: "options.limit", kind: "range" })
      expect(yield* refused("cancel", { queue: "email" }, { cursor: "nope!" })).toMatchObject({ field: "options.cursor" })
      expect(fake.calls).toEqual([])
      // A cursor of another run (another filter), or of another shard count, is refused too.
      const started = yield* router.bulk("cancel", { queue: "email" }, { limit: 1 })
      fake.calls.length = 0
      expect(yield* refused("cancel", { queue: "other" }, { cursor: started.cursor })).toMatchObject({ field: "options.cursor", kind: "type" })
      expect(yield* refused("retry", { queue: "email" }, { cursor: started.cursor })).toMatchObject({ field: "options.cursor" })
      const wider = yield* JobsRouter.make({ namespace: fake.namespace, shards: 3 })
      expect(yield* Effect.flip(wider.bulk("cancel", { queue: "email" }, { cursor: started.cursor! }))).toMatchObject({
        field: "options.cursor",
        kind: "range"
      })
      expect(fake.calls).toEqual([])
    }))
})

describe("over real objects answering through Jobs.serve", () => {
  it.scoped("an event cancels on every shard once; a bulk cancel over several calls changes every matching job once", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_000)
      const runtime = yield* Effect.runtime<never>()
      const SHARDS = 3
      const objects = yield* Effect.forEach(Array.from({ length: SHARDS }), () =>
        Effect.gen(function*() {
          const object = yield* TestDurability.make({ scheduler: { alarmMinDelayMs: 1_000 } })
          const jobs = yield* object.run(Jobs.make({ email: Jobs.externalQueue<unknown, unknown>({ leaseMs: 3_000 }) }))
          return { object, jobs }
        }))
      const calls: Array<number> = []
      const namespace = {
        idFromName: (name: string) => Number(name.split(":")[1]),
        get: (shard: number) => ({
          jobsCall: (call: unknown) => {
            calls.push(shard)
            const { jobs, object } = objects[shard]!
            // Rejects with the object's own error, as an RPC call does.
            return Runtime.runPromise(runtime)(Effect.either(object.run(Jobs.serve(jobs, call)))).then((answer) =>
              Either.isLeft(answer) ? Promise.reject(answer.left) : answer.right
            )
          }
        })
      }
      const router = yield* JobsRouter.make({ namespace, shards: SHARDS })
      const email = router.queue("email")
      for (let i = 0; i < 30; i++) {
        yield* email.add({ id: `job-${i}`, payload: i, ...(i % 3 === 0 ? { cancelOn: "order-1" } : {}) })
      }
      const byShard = (ids: ReadonlyArray<string>) => new Set(ids.map((id) => router.shardOf(id)))
      const marked = Array.from({ length: 10 }, (_, i) => `job-${i * 3}`)
      expect(byShard(marked).size).toBe(SHARDS)

      calls.length = 0
      expect(yield* router.event("order-1")).toBe(10)
      expect(calls.sort()).toEqual([0, 1, 2])
      for (const id of marked) expect(yield* email.get(id)).toMatchObject({ state: "canceled" })
      // Sent again (a retry), it cancels nothing twice.
      expect(yield* router.event("order-1")).toBe(0)

      const affected: Array<number> = []
      const perCall: Array<number> = []
      let cursor: string | undefined
      do {
        calls.length = 0
        const chunk = yield* router.bulk("cancel", { queue: "email" }, { limit: 3, reason: "sweep", ...(cursor === undefined ? {} : { cursor }) })
        perCall.push(calls.length)
        affected.push(chunk.affected)
        expect(chunk.done).toBe(chunk.cursor === undefined)
        cursor = chunk.cursor
      } while (cursor !== undefined)
      // Twenty jobs left, up to three per shard per call: several calls, each at most one per shard.
      expect(affected.reduce((total, count) => total + count, 0)).toBe(20)
      expect(affected.length).toBeGreaterThan(2)
      for (const count of perCall) expect(count).toBeLessThanOrEqual(SHARDS)
      const page = yield* email.list({ limit: 100 })
      expect(page.items).toHaveLength(30)
      expect(page.items.every((info) => info.state === "canceled")).toBe(true)
      // A queue a shard does not have: the shard refuses it naming the field, nothing written.
      const unknown = yield* Effect.flip(router.bulk("remove", { queue: "sms" }))
      expect(unknown._tag).toBe("ShardCallError")
      const refusal = (unknown as JobsRouter.ShardCallError).cause as { readonly _tag: string; readonly field: string }
      expect([refusal._tag, refusal.field]).toEqual(["InvalidInputError", "filter.queue"])
      expect(yield* email.list({ limit: 100 })).toEqual(page)
      // Each job canceled once, on its own shard, by the event or by the sweep.
      for (let i = 0; i < 30; i++) {
        const id = `job-${i}`
        const row = yield* jobRow(objects[router.shardOf(id)]!.object, "email", id)
        expect(row).toMatchObject({ status: "canceled", cancel_reason: i % 3 === 0 ? "event \"order-1\"" : "sweep" })
      }
    }))
})

describe("the promise router's event and bulk", () => {
  it("reject a bad input with a TypeError or RangeError before any call, a failed shard with its own error", async () => {
    const fake = bulkShards([2, 2], new Set([1]))
    const router = new PromiseRouter({ namespace: fake.namespace, shards: 2 })
    await expect(router.event("")).rejects.toThrow(TypeError)
    await expect(router.bulk("cancel", { queue: "email" }, { limit: 501 })).rejects.toThrow(RangeError)
    await expect(router.bulk("cancel", { queue: "email", allQueues: true })).rejects.toThrow("give filter.queue")
    expect(fake.calls).toEqual([])
    await expect(router.bulk("cancel", { queue: "email" })).rejects.toThrow("shard 1 is down")
    expect(fake.calls.map((call) => call.shard).sort()).toEqual([0, 1])
  })
})

/** Shards whose calls stay in flight until the test lets them answer (`counts` of an empty queue). */
const heldShards = () => {
  const waiting: Array<() => void> = []
  let inFlight = 0
  let most = 0
  const namespace = {
    idFromName: (name: string) => Number(name.split(":")[1]),
    get: (_shard: number) => ({
      jobsCall: () =>
        new Promise((resolve) => {
          most = Math.max(most, ++inFlight)
          waiting.push(() => {
            inFlight--
            resolve({ counts: { waiting: 1, delayed: 0, active: 0, "waiting-children": 0, completed: 0, failed: 0, canceled: 0 }, paused: false })
          })
        })
    })
  }
  return { namespace, waiting, most: () => most }
}

describe("JobsRouter's fan-outs", () => {
  it.effect("a call that reaches every shard has at most FAN_OUT calls in flight (counts over 70 shards)", () =>
    Effect.gen(function*() {
      const held = heldShards()
      const router = yield* JobsRouter.make({ namespace: held.namespace, shards: 70 })
      const fiber = yield* Effect.fork(router.queue("mail").counts)
      let answered = 0
      while (answered < 70) {
        // Let the router start what it may, then answer what is in flight.
        while (held.waiting.length === 0) yield* Effect.yieldNow()
        for (let turn = 0; turn < 50; turn++) yield* Effect.yieldNow()
        const batch = held.waiting.splice(0)
        expect(batch.length).toBeLessThanOrEqual(JobsRouter.FAN_OUT)
        answered += batch.length
        for (const answer of batch) answer()
      }
      const counts = yield* fiber.await.pipe(Effect.flatten)
      expect(counts.waiting).toBe(70)
      expect(held.most()).toBe(JobsRouter.FAN_OUT)
    }))
})
