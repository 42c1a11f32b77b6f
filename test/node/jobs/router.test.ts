/**
 * The router's pure parts: the routing hash against fixed vectors (a deploy must never move a key),
 * its spread, the fan-in merge and its composite cursor over fake shards (pages never skip or
 * repeat, even while jobs are added), the wire call's checks, and the router over fake stubs.
 */
import { describe, expect, it } from "@effect/vitest"
import { type AddOptions, JOB_STATES } from "../../../src/jobs/types.js"
import * as Router from "../../../src/jobs/router.js"
// The promise face's router, over the Effect `JobsRouter`.
import { Router as PromiseRouter } from "../../../src/facade/jobsRouter.js"

describe("router: the routing hash", () => {
  it("FNV-1a 32-bit of the UTF-8 bytes, as fixed vectors", () => {
    // Computed independently (Python over str.encode("utf-8")); the first three are the published FNV vectors.
    const vectors: ReadonlyArray<readonly [string, number, number, number]> = [
      ["", 0x811c9dc5, 5, 1],
      ["a", 0xe40c292c, 12, 1],
      ["foobar", 0xbf9cf968, 8, 1],
      ["welcome:ann@example.com", 0x870e9403, 3, 0],
      ["é", 0x1e9de8c1, 1, 0],
      ["日本", 0x9f26ee51, 1, 0],
      ["🙂", 0x57a37a4b, 11, 0],
      ["job-42", 0xd5178945, 5, 1]
    ]
    for (const [key, hash, of16, of3] of vectors) {
      expect(Router.fnv1a32(key)).toBe(hash)
      expect(Router.shardOf(key, 16)).toBe(of16)
      expect(Router.shardOf(key, 3)).toBe(of3)
      expect(Router.shardOf(key, 1)).toBe(0)
    }
  })

  it("spreads sequential ids evenly over 16 shards", () => {
    const counts = new Array(16).fill(0) as Array<number>
    for (let i = 0; i < 16_000; i++) counts[Router.shardOf(`job-${i}`, 16)]! += 1
    for (const count of counts) {
      expect(count).toBeGreaterThan(1_000 * 0.85)
      expect(count).toBeLessThan(1_000 * 1.15)
    }
  })

  it("partition groups indexes by shard in the caller's order", () => {
    expect([...Router.partition([2, 0, 2, 1, 0])]).toEqual([[2, [0, 2]], [0, [1, 4]], [1, [3]]])
  })
})

interface Item {
  readonly id: string
  readonly createdAt: number
}

/** A fake shard: its items in add order; its cursor after item i is `String(i + 1)`, like a seq. */
const pageOf = (items: ReadonlyArray<Item>, cursor: string | undefined, limit: number): Router.ShardPage<Item> => {
  const start = cursor === undefined ? 0 : Number(cursor)
  const page = items.slice(start, start + limit).map((info, offset) => {
    const after = start + offset + 1
    return after < items.length ? { info, after: String(after) } : { info }
  })
  const last = page[page.length - 1]
  return { items: page, more: page.length === limit && last?.after !== undefined }
}

/** Reads a whole listing over fake shards, `limit` at a time, calling `between` after each page. */
const readAll = (shards: Array<Array<Item>>, limit: number, between: (page: number) => void = () => {}) => {
  const seen: Array<string> = []
  let cursor: string | undefined
  for (let page = 0; page < 10_000; page++) {
    const positions = cursor === undefined ? shards.map(() => "") : Router.decodeCursor(cursor, shards.length)
    const pages = positions.map((position, shard) =>
      position === null ? undefined : pageOf(shards[shard]!, position === "" ? undefined : position, limit)
    )
    const merged = Router.merge(positions, pages, limit)
    expect(merged.items.length).toBeLessThanOrEqual(limit)
    seen.push(...merged.items.map((item) => item.id))
    between(page)
    if (merged.positions.every((position) => position === null)) return seen
    cursor = Router.encodeCursor(merged.positions)
  }
  throw new Error("the listing did not end")
}

const shardsOf = (sizes: ReadonlyArray<number>): Array<Array<Item>> =>
  sizes.map((size, shard) => Array.from({ length: size }, (_, i) => ({ id: `s${shard}-${i}`, createdAt: 1_000 + i * (shard + 1) })))

describe("router: the fan-in merge and its cursor", () => {
  it("every page size reads every item once, by createdAt then shard, each shard in its own order", () => {
    const shards = shardsOf([7, 0, 13, 4])
    const expected = shards
      .flatMap((items, shard) => items.map((item, index) => ({ ...item, shard, index })))
      .sort((a, b) => a.createdAt - b.createdAt || a.shard - b.shard || a.index - b.index)
      .map((item) => item.id)
    for (const limit of [1, 2, 3, 5, 24, 100]) expect(readAll(shards, limit)).toEqual(expected)
  })

  it("no skip and no repeat while jobs are added between pages", () => {
    const shards = shardsOf([10, 10, 10])
    const before = new Set(shards.flat().map((item) => item.id))
    const seen = readAll(shards, 4, (page) => {
      // Newer jobs land on every shard after their older ones, as a shard's seq would put them.
      for (const [shard, items] of shards.entries()) items.push({ id: `late-${page}-${shard}`, createdAt: 5_000 + page })
    })
    expect(new Set(seen).size).toBe(seen.length)
    for (const id of before) expect(seen).toContain(id)
  })

  it("an empty listing is one page without a cursor", () => {
    const merged = Router.merge(["", ""], [pageOf([], undefined, 10), pageOf([], undefined, 10)], 10)
    expect(merged).toEqual({ items: [], positions: [null, null] })
  })

  it("the cursor is opaque, checked, and bound to the shard count", () => {
    const cursor = Router.encodeCursor(["12", null, ""])
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(Router.decodeCursor(cursor, 3)).toEqual(["12", null, ""])
    expect(() => Router.decodeCursor(cursor, 4)).toThrow(RangeError)
    expect(() => Router.decodeCursor(cursor, 4)).toThrow("cursor was made for 3 shards; this router has 4")
    for (const bad of ["", "12", "not a cursor!", 5, Router.encodeCursor(["12"]).slice(2)]) {
      expect(() => Router.decodeCursor(bad, 1)).toThrow(TypeError)
    }
    expect(() => Router.decodeCursor(btoa(JSON.stringify({ v: 2, p: [null] })).replace(/=+$/, ""), 1)).toThrow(TypeError)
  })
})

describe("router: a shard call's checks", () => {
  const queues = new Set(["email", "report"])

  it("accepts the router's calls", () => {
    const calls: ReadonlyArray<Router.ShardCall> = [
      { v: 1, op: "add", queue: "email", job: { payload: 1 } },
      { v: 1, op: "addBulk", queue: "email", jobs: [] },
      { v: 1, op: "get", queue: "email", id: "x" },
      { v: 1, op: "page", queue: "report", page: { limit: 5, cursor: "3", states: ["waiting"] } },
      { v: 1, op: "counts", queue: "email" },
      { v: 1, op: "pause", queue: "email" },
      { v: 1, op: "resume", queue: "email" },
      { v: 1, op: "flow", root: { queue: "report", payload: null } },
      // Calls about the whole object name no queue; bulk's own fields are checked by the object's bulk.
      { v: 2, op: "event", key: "order-1" },
      { v: 2, op: "bulk", action: "cancel", filter: { allQueues: true } },
      { v: 2, op: "bulk", action: "cancel", filter: { queue: "email" }, options: { limit: 5, cursor: "x" } }
    ]
    for (const call of calls) expect(Router.parseCall(call, queues)).toEqual(call)
    // Every version of the protocol an object answers.
    for (const v of [1, 2]) expect(Router.parseCall({ v, op: "heartbeat", queue: "email", id: "x", token: 3 }, queues)).toEqual({ v, op: "heartbeat", queue: "email", id: "x", token: 3 })
  })

  it("names what is wrong", () => {
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [null, "A jobs call must be an object, got null"],
      [{ op: "add" }, "must have v: 1 or 2 (this object's protocol versions), got undefined"],
      [{ v: 3, op: "add" }, "must have v: 1 or 2 (this object's protocol versions), got 3"],
      [{ v: 1, op: "drop", queue: "email" }, "op must be one of flow, event, bulk, add, addBulk, get, page, counts, pause, resume, start, heartbeat, log, complete, fail, undelivered, got \"drop\""],
      [{ v: 1, op: "add", queue: "sms", job: {} }, "Unknown queue \"sms\": this object's queues are \"email\", \"report\""],
      [{ v: 1, op: "add", queue: "email" }, "job must be an object"],
      [{ v: 1, op: "addBulk", queue: "email", jobs: {} }, "jobs must be an array"],
      [{ v: 1, op: "get", queue: "email", id: 3 }, "id must be a string, got 3"],
      [{ v: 1, op: "page", queue: "email", page: { limit: 0 } }, "page.limit must be an integer from 1 to 1000, got 0"],
      [{ v: 1, op: "flow", root: "x" }, "root must be an object"],
      [{ v: 2, op: "heartbeat", queue: "email", id: "x", token: 0 }, "token must be the positive integer of the lease, got 0"],
      [{ v: 2, op: "fail", queue: "email", id: "x", token: 1, error: {} }, "error.message must be a string, got undefined"],
      [{ v: 2, op: "page", queue: "email", page: { limit: 5, states: [] } }, "page.states must be a non-empty array"],
      [{ v: 2, op: "event" }, "key must be a string, got undefined"],
      [{ v: 2, op: "bulk", action: "cancel", filter: [] }, "filter must be an object"],
      [{ v: 2, op: "bulk", action: "cancel", filter: {}, options: 3 }, "options must be an object, got 3"]
    ]
    for (const [call, message] of cases) expect(() => Router.parseCall(call, queues)).toThrow(message)
  })
})

/** Fake stubs: each shard records its calls and answers adds like a shard would. */
const fakeNamespace = () => {
  const calls: Array<{ readonly name: string; readonly call: Router.ShardCall }> = []
  const namespace = {
    idFromName: (name: string) => ({ name }),
    get: (id: { readonly name: string }) => ({
      jobsCall: (call: Router.ShardCall) => {
        calls.push({ name: id.name, call })
        if (call.op === "add") return Promise.resolve({ id: call.job.id, state: "waiting", deduplicated: false })
        if (call.op === "addBulk") {
          const bad = call.jobs.findIndex((job) => (job.payload as { readonly bad?: boolean } | null)?.bad === true)
          if (bad >= 0) return Promise.reject(new RangeError(`jobs[${bad}].payload is too big`))
          return Promise.resolve(call.jobs.map((job) => ({ id: job.id, state: "waiting", deduplicated: false })))
        }
        if (call.op === "counts") {
          const counts = Object.fromEntries(JOB_STATES.map((state) => [state, 1]))
          return Promise.resolve({ counts, paused: id.name !== "jobs:2" })
        }
        return Promise.resolve(undefined)
      }
    })
  }
  return { namespace, calls }
}

describe("router: over fake shards", () => {
  it("routes by id, generates missing ids first, and keeps the caller's order in addBulk", async () => {
    const { calls, namespace } = fakeNamespace()
    const router = new PromiseRouter({ namespace, shards: 3 })
    const queue = router.queue("email")
    expect(await queue.add({ id: "job-42", payload: 1 })).toEqual({ id: "job-42", state: "waiting", deduplicated: false })
    expect(calls[0]!.name).toBe(`jobs:${Router.shardOf("job-42", 3)}`)
    const generated = await queue.add({ payload: 2 })
    expect(calls[1]!.name).toBe(`jobs:${Router.shardOf(generated.id, 3)}`)

    calls.length = 0
    const jobs: Array<AddOptions<unknown, number>> = Array.from({ length: 12 }, (_, i) => ({ id: `b-${i}`, payload: i }))
    const results = await queue.addBulk(jobs)
    expect(results.map((result) => result.id)).toEqual(jobs.map((job) => job.id))
    expect(calls.length).toBeLessThanOrEqual(3)
    for (const { call, name } of calls) {
      if (call.op !== "addBulk") throw new Error("expected addBulk")
      for (const job of call.jobs) expect(name).toBe(`jobs:${Router.shardOf(job.id!, 3)}`)
    }
  })

  it("a shard's error about jobs[k] names the caller's index", async () => {
    const { namespace } = fakeNamespace()
    const router = new PromiseRouter({ namespace, shards: 3 })
    const jobs = Array.from({ length: 9 }, (_, i) => ({ id: `b-${i}`, payload: { bad: i === 7 } }))
    await expect(router.queue("email").addBulk(jobs)).rejects.toThrow(new RangeError("jobs[7].payload is too big"))
  })

  it("a custom key routes by it; counts sum and pause only when all are", async () => {
    const { calls, namespace } = fakeNamespace()
    const router = new PromiseRouter({ namespace, shards: 3, key: (job) => (job.payload as { tenant: string }).tenant, name: "mail" })
    await router.queue("email").add({ id: "x", payload: { tenant: "acme" } })
    expect(calls[0]!.name).toBe(`mail:${Router.shardOf("acme", 3)}`)
    const counts = await new PromiseRouter({ namespace, shards: 3 }).queue("email").counts()
    expect(counts).toEqual({ ...Object.fromEntries(JOB_STATES.map((state) => [state, 3])), paused: false })
    expect((await new PromiseRouter({ namespace, shards: 2 }).queue("email").counts()).paused).toBe(true)
  })

  it("bad options and input throw before any call, naming the field", async () => {
    const { calls, namespace } = fakeNamespace()
    expect(() => new PromiseRouter({ namespace: {} as never, shards: 2 })).toThrow(new TypeError("namespace must be a Durable Object namespace (with idFromName and get)"))
    expect(() => new PromiseRouter({ namespace, shards: 0 })).toThrow(new RangeError("shards must be an integer from 1 to 10000, got 0"))
    expect(() => new PromiseRouter({ namespace, shards: 1.5 })).toThrow(RangeError)
    expect(() => new PromiseRouter({ namespace, shards: 2, key: "id" as never })).toThrow("key must be a function")
    expect(() => new PromiseRouter({ namespace, shards: 2, name: "" })).toThrow("name must be a non-empty string")
    const router = new PromiseRouter({ namespace, shards: 2, key: () => 5 as never })
    const queue = router.queue("email")
    await expect(queue.add({ id: "x", payload: 1 })).rejects.toThrow(new TypeError("key(job) must return a string, got 5"))
    await expect(queue.add(null as never)).rejects.toThrow(new TypeError("options must be an object"))
    await expect(queue.add({ id: "", payload: 1 })).rejects.toThrow(TypeError)
    await expect(queue.addBulk({} as never)).rejects.toThrow("jobs must be an array")
    await expect(queue.addBulk([{ payload: 1 }, { id: 3 as never, payload: 1 }])).rejects.toThrow("jobs[1].id must be a non-empty string")
    await expect(queue.get("x", { key: 1 as never })).rejects.toThrow("options.key must be a string")
    await expect(queue.list({ limit: 0 })).rejects.toThrow(new RangeError("limit must be an integer from 1 to 1000, got 0"))
    await expect(queue.list({ states: ["done" as never] })).rejects.toThrow("states must be a non-empty array of")
    await expect(queue.list({ cursor: "nope!" })).rejects.toThrow(TypeError)
    await expect(router.flow({ queue: 1 as never, payload: null })).rejects.toThrow("queue must be a string")
    expect(() => router.queue("")).toThrow("queue must be a non-empty string")
    expect(calls).toEqual([])
  })
})

