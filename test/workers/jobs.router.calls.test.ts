/**
 * The router's calls to every shard in workerd, over real `ShardedJobsObject`s (real SQLite, real
 * alarms, real RPC): `router.event(key)` cancels the matching jobs on every shard (and again, nothing),
 * and a bulk cancel over the shards completes over several calls, each job canceled once, each call
 * at most one per shard. Jobs are delayed far ahead, so nothing runs before it is canceled; every test
 * ends with every shard idle (its alarm deleted).
 */
import { env, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import { DurabilityJobs } from "../../src/index.js"
import type { ShardedJobsObject } from "./objects/ShardedJobsObject.js"
import { waitFor } from "./support/jobs.js"

const SHARDS = 3
const LATER = 3_600_000

const stubOf = (name: string, shard: number) => env.SHARDED_JOBS_OBJECT.get(env.SHARDED_JOBS_OBJECT.idFromName(`${name}:${shard}`))

const routerOf = (name: string) => DurabilityJobs.router<ShardedJobsObject["jobs"]>({ namespace: env.SHARDED_JOBS_OBJECT, shards: SHARDS, name })

const rowsOf = (name: string) => Promise.all(Array.from({ length: SHARDS }, (_, shard) => stubOf(name, shard).rows()))

/** How many calls of `op` each shard answered so far. */
const answered = (name: string, op: string) =>
  Promise.all(Array.from({ length: SHARDS }, async (_, shard) => (await stubOf(name, shard).protocolCalls()).filter((call) => call === op).length))

/** No shard ran a handler, and each deleted its alarm. */
const expectIdle = async (name: string, shards = SHARDS) => {
  for (let shard = 0; shard < shards; shard++) {
    const stub = stubOf(name, shard)
    expect(await stub.calls()).toEqual([])
    expect(await waitFor(() => stub.alarmAt(), (at) => at === null)).toBeNull()
  }
}

describe("jobs router: event and bulk on every shard", () => {
  it("an event cancels the jobs naming it on every shard, once; the others stay", async () => {
    const router = routerOf("event")
    const task = router.queue("task")
    const ids = Array.from({ length: 12 }, (_, i) => `e-${i}`)
    const marked = ids.filter((_, i) => i % 2 === 0)
    await task.addBulk(ids.map((id, i) => ({ id, payload: { tag: id }, delayMs: LATER, cancelOn: i % 2 === 0 ? "order-9" : "order-10" })))
    expect(new Set(marked.map((id) => router.shardOf(id))).size).toBe(SHARDS)

    expect(await router.event("order-9")).toBe(marked.length)
    expect(await answered("event", "event")).toEqual([1, 1, 1])
    const rows = (await rowsOf("event")).flat()
    for (const id of ids) {
      expect(rows.filter((row) => row.id === id).map((row) => row.status)).toEqual([marked.includes(id) ? "canceled" : "pending"])
    }
    // A retry of the same event is safe: nothing is canceled twice.
    expect(await router.event("order-9")).toBe(0)
    expect(await router.event("order-10")).toBe(ids.length - marked.length)
    expect((await rowsOf("event")).flat().every((row) => row.status === "canceled")).toBe(true)
    await expect(router.event("")).rejects.toThrow(TypeError)
    expect(await answered("event", "event")).toEqual([3, 3, 3])
    await expectIdle("event")
  })

  it("a bulk cancel over the shards completes over several calls, each job canceled once, at most one call per shard each", async () => {
    const router = routerOf("bulk")
    const task = router.queue("task")
    const ids = Array.from({ length: 20 }, (_, i) => `b-${String(i).padStart(2, "0")}`)
    await task.addBulk(ids.map((id) => ({ id, payload: { tag: id }, delayMs: LATER })))
    // Another queue's jobs are outside the filter.
    await router.queue("report").add({ id: "r-0", payload: {}, delayMs: LATER })

    const affected: Array<number> = []
    const perCall: Array<number> = []
    let cursor: string | undefined
    for (let call = 0; call < 50; call++) {
      const before = (await answered("bulk", "bulk")).reduce((total, count) => total + count, 0)
      const chunk = await router.bulk("cancel", { queue: "task" }, { limit: 2, reason: "sweep", ...(cursor === undefined ? {} : { cursor }) })
      perCall.push((await answered("bulk", "bulk")).reduce((total, count) => total + count, 0) - before)
      affected.push(chunk.affected)
      expect(chunk.done).toBe(chunk.cursor === undefined)
      if (chunk.cursor === undefined) break
      cursor = chunk.cursor
    }
    expect(affected.reduce((total, count) => total + count, 0)).toBe(ids.length)
    expect(affected.length).toBeGreaterThan(2)
    for (const [index, count] of perCall.entries()) {
      expect(count).toBeLessThanOrEqual(SHARDS)
      expect(affected[index]!).toBeLessThanOrEqual(SHARDS * 2)
    }
    const rows = (await rowsOf("bulk")).flat()
    for (const id of ids) expect(rows.filter((row) => row.id === id).map((row) => row.status)).toEqual(["canceled"])
    expect(rows.filter((row) => row.queue === "report").map((row) => row.status)).toEqual(["pending"])

    // Bad input is refused before any call.
    const calls = await answered("bulk", "bulk")
    await expect(router.bulk("cancel", { queue: "task" }, { limit: 0 })).rejects.toThrow(RangeError)
    await expect(router.bulk("cancel", { queue: "task" }, { cursor: "nope" })).rejects.toThrow("options.cursor")
    expect(await answered("bulk", "bulk")).toEqual(calls)

    expect(await router.bulk("cancel", { allQueues: true })).toMatchObject({ affected: 1, done: true })
    await expectIdle("bulk")
  })

  it("the shard refuses a bad event or bulk call naming the field, nothing written", async () => {
    // In the object (a rejection over RPC would outlive the test's storage frame).
    const stub = stubOf("refuse", 0)
    await stub.jobsCall({ v: 2, op: "add", queue: "task", job: { id: "x", payload: {}, delayMs: LATER, cancelOn: "k" } })
    const before = await stub.rows()
    await runInDurableObject(stub, async (instance: ShardedJobsObject) => {
      await expect(DurabilityJobs.serve(instance.jobs, { v: 2, op: "bulk", action: "cancel", filter: { queue: "sms" } })).rejects.toThrow(
        new TypeError(`filter.queue must name a queue of this object (task, report), got "sms"`)
      )
      await expect(DurabilityJobs.serve(instance.jobs, { v: 2, op: "bulk", action: "nuke", filter: { queue: "task" } })).rejects.toThrow(
        "action must be one of"
      )
      await expect(DurabilityJobs.serve(instance.jobs, { v: 2, op: "event", key: "" })).rejects.toThrow(TypeError)
      await expect(DurabilityJobs.serve(instance.jobs, { v: 2, op: "event" })).rejects.toThrow("key must be a string")
    })
    expect(await stub.rows()).toEqual(before)
    expect(await stub.jobsCall({ v: 2, op: "event", key: "k" })).toBe(1)
    await expectIdle("refuse", 1)
  })
})
