/**
 * Sharded job queues in workerd: `DurabilityJobs.router` over real `ShardedJobsObject`s (real
 * SQLite, real alarms, real RPC). Adds land where the hash says (read back from each shard's
 * rows), dedup holds per key, addBulk is one call per shard, reads fan in (pages over 3 shards
 * never skip or repeat), pause/resume reach every shard, a flow stays on its root's shard, and a
 * bad call is refused by name. Every test ends with every shard idle.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import { DurabilityJobs, type DurableJobInfo } from "../../src/index.js"
import { fnv1a32 } from "../../src/jobs/router.js"
import type { ShardedJobsObject, ShardTask } from "./objects/ShardedJobsObject.js"
import { waitFor } from "./support/jobs.js"

const SHARDS = 3

const stubOf = (name: string, shard: number) => env.SHARDED_JOBS_OBJECT.get(env.SHARDED_JOBS_OBJECT.idFromName(`${name}:${shard}`))

const routerOf = (name: string, key?: (job: { readonly id: string; readonly payload: unknown }) => string) =>
  DurabilityJobs.router<ShardedJobsObject["jobs"]>({
    namespace: env.SHARDED_JOBS_OBJECT,
    shards: SHARDS,
    name,
    ...(key === undefined ? {} : { key })
  })

/** Every shard's stored rows, by shard. */
const rowsOf = (name: string) => Promise.all(Array.from({ length: SHARDS }, (_, shard) => stubOf(name, shard).rows()))

/** Every shard finished its jobs, ran no handler still, and deleted its alarm. */
const expectIdle = async (name: string) => {
  for (let shard = 0; shard < SHARDS; shard++) {
    const stub = stubOf(name, shard)
    await waitFor(() => stub.rows(), (rows) => rows.every((row) => row.status !== "pending" && row.status !== "waiting_children"))
    const current = await stub.whoami()
    expect((await stub.calls()).filter((call) => call.instance === current && call.ended === 0)).toEqual([])
    expect(await waitFor(() => stub.alarmAt(), (at) => at === null)).toBeNull()
  }
}

describe("jobs router: routing", () => {
  it("an id always lands on its hash's shard; the same id again is deduplicated there", async () => {
    const router = routerOf("route")
    const task = router.queue("task")
    const ids = Array.from({ length: 12 }, (_, i) => `job-${i}`)
    for (const id of ids) expect(await task.add({ id, payload: { tag: id } })).toEqual({ id, state: "waiting", deduplicated: false })
    const again = await task.add({ id: "job-3", payload: { tag: "second" } })
    expect(again).toMatchObject({ id: "job-3", deduplicated: true })

    const generated = await task.add({ payload: { tag: "no id" } })
    expect(generated.id).toMatch(/^[0-9a-f-]{36}$/)

    const rows = await rowsOf("route")
    for (const id of [...ids, generated.id]) {
      const shard = fnv1a32(id) % SHARDS
      expect(router.shardOf(id)).toBe(shard)
      expect(rows[shard]!.filter((row) => row.id === id)).toHaveLength(1)
      expect(rows.flat().filter((row) => row.id === id)).toHaveLength(1)
    }
    // The 13 jobs spread over more than one shard.
    expect(rows.filter((list) => list.length > 0).length).toBeGreaterThan(1)

    const info = await waitFor(() => task.get("job-3"), (job) => job?.state === "completed")
    expect(info).toMatchObject({ id: "job-3", queue: "task", payload: { tag: "job-3" }, result: { tag: "job-3" } })
    expect(await task.get("missing")).toBeUndefined()
    await expectIdle("route")
  })

  it("a custom key routes by it: dedup keys hold across ids, and get fans out or takes the key", async () => {
    const router = routerOf("keyed", (job) => (job.payload as ShardTask).tenant ?? job.id)
    const task = router.queue("task")
    await router.queue("task").pause()
    const first = await task.add({ id: "a1", payload: { tenant: "acme", tag: "a1" }, dedup: { key: "acme-welcome" } })
    const second = await task.add({ id: "a2", payload: { tenant: "acme", tag: "a2" }, dedup: { key: "acme-welcome" } })
    expect(first).toEqual({ id: "a1", state: "waiting", deduplicated: false })
    expect(second).toEqual({ id: "a1", state: "waiting", deduplicated: true })
    const shard = router.shardOf("acme")
    expect((await stubOf("keyed", shard).rows()).map((row) => row.id)).toEqual(["a1"])

    expect(await task.get("a1")).toMatchObject({ id: "a1", state: "waiting" })
    expect(await task.get("a1", { key: "acme" })).toMatchObject({ id: "a1" })
    expect(await task.get("a2")).toBeUndefined()
    await task.resume()
    await expectIdle("keyed")
  })

  it("addBulk: one call per shard, every job on its shard, results in the caller's order", async () => {
    const router = routerOf("bulk")
    const jobs = Array.from({ length: 30 }, (_, i) => ({ id: `bulk-${i}`, payload: { tag: String(i) } }))
    const results = await router.queue("task").addBulk(jobs)
    expect(results.map((result) => result.id)).toEqual(jobs.map((job) => job.id))
    expect(results.every((result) => !result.deduplicated)).toBe(true)
    const rows = await rowsOf("bulk")
    for (const [shard, list] of rows.entries()) {
      const expected = jobs.filter((job) => router.shardOf(job.id) === shard).map((job) => job.id)
      // In the caller's order within the shard: its part was one addBulk.
      expect(list.map((row) => row.id)).toEqual(expected)
    }
    expect(await router.queue("task").addBulk([])).toEqual([])
    await expectIdle("bulk")
  })
})

describe("jobs router: fan-in", () => {
  it("pause on every shard, counts summed, list pages over 3 shards never skip or repeat, resume runs them all", async () => {
    const router = routerOf("fanin")
    const task = router.queue("task")
    await task.pause()
    expect((await task.counts()).paused).toBe(true)
    const ids = Array.from({ length: 23 }, (_, i) => `f-${String(i).padStart(2, "0")}`)
    await task.addBulk(ids.map((id) => ({ id, payload: { tag: id } })))
    const rows = await rowsOf("fanin")
    expect(rows.every((list) => list.length > 0)).toBe(true)

    expect(await task.counts()).toEqual({
      waiting: 23,
      delayed: 0,
      active: 0,
      "waiting-children": 0,
      completed: 0,
      failed: 0,
      canceled: 0,
      paused: true
    })

    for (const limit of [1, 4, 10, 100]) {
      const seen: Array<DurableJobInfo> = []
      let cursor: string | undefined
      for (let page = 0; page < 100; page++) {
        const result = await task.list({ limit, states: ["waiting"], ...(cursor === undefined ? {} : { cursor }) })
        expect(result.items.length).toBeLessThanOrEqual(limit)
        seen.push(...result.items)
        if (result.cursor === undefined) break
        cursor = result.cursor
      }
      expect(seen.map((item) => item.id).sort()).toEqual(ids)
      // Merged by creation time (then shard): never going back in time.
      for (let i = 1; i < seen.length; i++) expect(seen[i]!.createdAt).toBeGreaterThanOrEqual(seen[i - 1]!.createdAt)
    }
    expect((await task.list({ states: ["completed"] })).items).toEqual([])
    const calls = await Promise.all(Array.from({ length: SHARDS }, (_, shard) => stubOf("fanin", shard).calls()))
    expect(calls.flat()).toEqual([])

    await task.resume()
    expect((await task.counts()).paused).toBe(false)
    const done = await waitFor(() => task.counts(), (counts) => counts.completed === 23)
    expect(done).toMatchObject({ waiting: 0, completed: 23, paused: false })
    const after = await task.list({ limit: 1000 })
    expect(after.cursor).toBeUndefined()
    expect(after.items.map((item) => item.state)).toEqual(ids.map(() => "completed"))
    await expectIdle("fanin")
  })

  it("a flow goes whole to its root's shard and runs there", async () => {
    const router = routerOf("flow")
    const result = await router.flow({
      queue: "report",
      id: "newsletter-1",
      payload: { tag: "root" },
      children: [
        { queue: "task", payload: { tag: "c1" } },
        { queue: "task", payload: { tag: "c2" } },
        { queue: "task", payload: { tag: "c3" } }
      ]
    })
    expect(result.id).toBe("newsletter-1")
    expect(result.children).toHaveLength(3)
    const shard = router.shardOf("newsletter-1")
    const rows = await rowsOf("flow")
    expect(rows[shard]!.map((row) => row.id).sort()).toEqual(["newsletter-1", ...result.children.map((child) => child.id)].sort())
    expect(rows.flat()).toHaveLength(4)

    const report = router.queue("report")
    const info = await waitFor(() => report.get("newsletter-1"), (job) => job?.state === "completed")
    expect(info?.result).toEqual({ completed: 3 })
    // A child is reached with its root's key.
    expect(await router.queue("task").get(result.children[0]!.id, { key: "newsletter-1" })).toMatchObject({ state: "completed" })
    await expectIdle("flow")
  })
})

describe("jobs router: bad input", () => {
  it("the router refuses bad options and input before any call, naming the field", async () => {
    expect(() => DurabilityJobs.router({ namespace: env.SHARDED_JOBS_OBJECT, shards: 0 })).toThrow(RangeError)
    expect(() => DurabilityJobs.router({ namespace: {} as never, shards: 2 })).toThrow(TypeError)
    const router = routerOf("bad")
    await expect(router.queue("task").add({ id: "", payload: {} })).rejects.toThrow(TypeError)
    await expect(router.queue("task").list({ limit: 5_000 })).rejects.toThrow(RangeError)
    await expect(router.queue("task").list({ cursor: "x" })).rejects.toThrow("cursor must be a cursor returned by this router's list")
    expect((await rowsOf("bad")).flat()).toEqual([])
  })

  it("a page costs one call per shard not read to its end, whatever its limit", async () => {
    const router = routerOf("paged")
    const task = router.queue("task")
    await task.pause()
    const ids = Array.from({ length: 40 }, (_, i) => `p-${String(i).padStart(2, "0")}`)
    await task.addBulk(ids.map((id) => ({ id, payload: { tag: id } })))
    const pageCalls = async () =>
      (await Promise.all(Array.from({ length: SHARDS }, (_, shard) => stubOf("paged", shard).protocolCalls()))).flat().filter((op) => op === "page").length
    const seen: Array<string> = []
    const perPage: Array<number> = []
    let cursor: string | undefined
    for (let page = 0; page < 100; page++) {
      const before = await pageCalls()
      const result = await task.list({ limit: 15, ...(cursor === undefined ? {} : { cursor }) })
      perPage.push((await pageCalls()) - before)
      seen.push(...result.items.map((item) => item.id))
      if (result.cursor === undefined) break
      cursor = result.cursor
    }
    expect(seen.sort()).toEqual(ids)
    // 40 jobs by 15: 3 pages (4 when a shard's last item ends a page exactly), never more than one call per shard each.
    expect(perPage.length).toBeLessThanOrEqual(4)
    for (const count of perPage) expect(count).toBeLessThanOrEqual(SHARDS)
    await task.resume()
    await waitFor(() => task.counts(), (counts) => counts.completed === 40)
    await expectIdle("paged")
  })

  it("the shard refuses an unknown queue and a malformed call, naming them", async () => {
    const stub = stubOf("refuse", 0)
    await runInDurableObject(stub, async (instance: ShardedJobsObject) => {
      await expect(DurabilityJobs.serve(instance.jobs, { v: 1, op: "add", queue: "sms", job: { payload: 1 } })).rejects.toThrow(
        new TypeError(`Unknown queue "sms": this object's queues are "task", "report"`)
      )
      await expect(DurabilityJobs.serve(instance.jobs, { op: "counts", queue: "task" })).rejects.toThrow(TypeError)
      await expect(DurabilityJobs.serve({} as never, { v: 1, op: "counts", queue: "task" })).rejects.toThrow(
        "DurabilityJobs.serve needs a DurabilityJobs instance"
      )
      await expect(DurabilityJobs.serve(instance.jobs, { v: 1, op: "add", queue: "task", job: { payload: 1, priority: "high" } })).rejects.toThrow(
        new RangeError(`priority must be a safe integer, got "high"`)
      )
      expect(await DurabilityJobs.serve(instance.jobs, { v: 1, op: "counts", queue: "task" })).toMatchObject({ paused: false })
    })
    expect(await stub.rows()).toEqual([])
  })
})
