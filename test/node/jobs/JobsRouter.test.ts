/**
 * The Effect router (`JobsRouter`) over fake shards that page like a real one: a listing costs one
 * call per unfinished shard per page whatever its `limit` (counted), walks every job once in
 * `createdAt` order, and bad input fails with `InvalidInputError` before any call.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as JobsRouter from "../../../src/jobs/JobsRouter.js"
import type * as Protocol from "../../../src/jobs/JobsProtocol.js"
import { shardOf } from "../../../src/jobs/router.js"

interface Stored {
  readonly id: string
  readonly createdAt: number
}

/** Shards holding jobs in insertion order; a page answers up to `limit` with the cursor after each (an index). */
const fakeShards = (shards: number) => {
  const held = Array.from({ length: shards }, () => [] as Array<Stored>)
  const calls: Array<{ readonly shard: number; readonly op: string; readonly limit?: number }> = []
  let clock = 0
  const namespace = {
    idFromName: (name: string) => Number(name.split(":")[1]),
    get: (shard: number) => ({
      jobsCall: (call: { readonly v: number; readonly op: string; readonly job?: { readonly id: string }; readonly page?: Protocol.PageCall }) => {
        calls.push({ shard, op: call.op, ...(call.page === undefined ? {} : { limit: call.page.limit }) })
        if (call.op === "add") {
          held[shard]!.push({ id: call.job!.id, createdAt: clock++ })
          return Promise.resolve({ id: call.job!.id, state: "waiting", deduplicated: false })
        }
        if (call.op === "page") {
          const from = call.page!.cursor === undefined ? 0 : Number(call.page!.cursor) + 1
          const slice = held[shard]!.slice(from, from + call.page!.limit)
          const more = from + slice.length < held[shard]!.length
          const items = slice.map((info, i) => (i === slice.length - 1 && !more ? { info } : { info, after: String(from + i) }))
          return Promise.resolve({ items, more })
        }
        return Promise.reject(new Error(`unexpected ${call.op}`))
      }
    })
  }
  return { namespace, calls, held }
}

describe("JobsRouter", () => {
  it.effect("a page costs one call per unfinished shard, whatever its limit; the pages walk every job once, oldest first", () =>
    Effect.gen(function*() {
      const fake = fakeShards(4)
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 4 })
      const queue = router.queue("email")
      for (let i = 0; i < 50; i++) yield* queue.add({ id: `job-${i}`, payload: i })
      // One call per add, to the shard of its id.
      expect(fake.calls.map((call) => call.shard)).toEqual(Array.from({ length: 50 }, (_, i) => shardOf(`job-${i}`, 4)))
      fake.calls.length = 0
      const seen: Array<string> = []
      const perPage: Array<number> = []
      let cursor: string | undefined
      do {
        const before = fake.calls.length
        const page = yield* queue.list({ limit: 20, ...(cursor === undefined ? {} : { cursor }) })
        perPage.push(fake.calls.length - before)
        seen.push(...page.items.map((info) => info.id))
        cursor = page.cursor
      } while (cursor !== undefined)
      expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => `job-${i}`))
      // Three pages of at most 20: at most one call per shard each (never one per item).
      expect(perPage.length).toBe(3)
      for (const count of perPage) expect(count).toBeLessThanOrEqual(4)
      expect(fake.calls.every((call) => call.op === "page" && call.limit === 20)).toBe(true)
    }))

  it.effect("bad input fails with InvalidInputError naming the field, before any call", () =>
    Effect.gen(function*() {
      const fake = fakeShards(2)
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 2 })
      const queue = router.queue("email")
      expect(yield* Effect.flip(queue.list({ limit: 0 }))).toMatchObject({ _tag: "InvalidInputError", field: "limit", kind: "range" })
      expect(yield* Effect.flip(queue.add(null as never))).toMatchObject({ _tag: "InvalidInputError", field: "options", kind: "type" })
      expect(yield* Effect.flip(queue.list({ cursor: "nope!" }))).toMatchObject({ _tag: "InvalidInputError", field: "cursor" })
      expect(yield* Effect.flip(router.queue("").add({ payload: 1 }))).toMatchObject({ _tag: "InvalidInputError", field: "queue" })
      expect(yield* Effect.flip(JobsRouter.make({ namespace: fake.namespace, shards: 0 }))).toMatchObject({ field: "shards", kind: "range" })
      expect(fake.calls).toEqual([])
      expect(router.objects.names).toEqual(["jobs:0", "jobs:1"])
    }))

  it.effect("a shard's failure is a ShardCallError carrying the shard's own error", () =>
    Effect.gen(function*() {
      const fake = fakeShards(2)
      const router = yield* JobsRouter.make({ namespace: fake.namespace, shards: 2 })
      const error = yield* Effect.flip(router.queue("email").counts)
      expect(error).toBeInstanceOf(JobsRouter.ShardCallError)
      expect((error.cause as Error).message).toBe("unexpected counts")
    }))
})
