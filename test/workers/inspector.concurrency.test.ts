/**
 * The inspector as a Worker mounts it: one handler built once per isolate (the README's snippet, in
 * test/workers/worker.ts) answering many requests at once, each in its own request context
 * (`SELF.fetch`). The handler's Effect runtime is shared by all of them, so this checks that no
 * request's RPC or answer leaks into another's: each answer names its own object and holds its
 * own object's data, and actions interleaved with reads land on the object they name.
 */
import { env, SELF } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import { INSPECTOR_TOKEN } from "./worker.js"

const OBJECTS = ["concurrent-0", "concurrent-1", "concurrent-2", "concurrent-3"] as const
const stubOf = (name: string) => env.INSPECTED_OBJECT.get(env.INSPECTED_OBJECT.idFromName(name))

const request = (method: "GET" | "POST", path: string) =>
  SELF.fetch(`https://worker.test/_durability/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${INSPECTOR_TOKEN}`, ...(method === "POST" ? { "Content-Type": "application/json" } : {}) },
    ...(method === "POST" ? { body: "{}" } : {})
  })

describe("inspector mounted in a Worker", () => {
  it("answers 60 concurrent requests over 4 objects, each with its own object's data, actions included", async () => {
    // Each object holds a different number of completed jobs, so an answer shows which object it came from.
    for (const [index, name] of OBJECTS.entries()) await stubOf(name).seed({ ok: index + 1, fail: 1, later: 1 })

    const reads = Array.from({ length: 56 }, (_, n) => {
      const index = n % OBJECTS.length
      const object = OBJECTS[index]!
      const kind = n % 3
      const path = kind === 0
        ? `/objects/${object}`
        : kind === 1
        ? `/objects/${object}/queues/work/jobs?state=completed&limit=100`
        : `/objects/${object}/queues/work/jobs/ok-${index}`
      return request("GET", path).then(async (response) => ({ index, kind, status: response.status, body: await response.json<any>() }))
    })
    // Pausing `later` on objects 0 and 2 only (twice each: the second finds it paused), while the reads run.
    const paused = new Set(["concurrent-0", "concurrent-2"])
    const actions = [...paused, ...paused].map((object) =>
      request("POST", `/objects/${object}/queues/later/pause`).then(async (response) => ({ status: response.status, body: await response.json<any>() }))
    )

    const answers = await Promise.all(reads)
    const acted = await Promise.all(actions)
    expect(acted.map(({ status }) => status)).toEqual([200, 200, 200, 200])
    // Each object was paused once: one of its two requests changed it, the other found it paused.
    expect(acted.map(({ body }) => body.changed).sort()).toEqual([0, 0, 1, 1])
    for (const { index, kind, status, body } of answers) {
      expect(status).toBe(200)
      if (kind === 0) {
        const work = body.jobs.queues.find((queue: { name: string }) => queue.name === "work")
        expect(work.counts.completed).toBe(index + 1)
      } else if (kind === 1) {
        expect(body.items.map((item: { id: string }) => item.id)).toEqual(Array.from({ length: index + 1 }, (_, n) => `ok-${n}`))
      } else {
        expect(body.job).toMatchObject({ id: `ok-${index}`, state: "completed" })
      }
    }
    for (const name of OBJECTS) expect(await stubOf(name).isPaused("later")).toBe(paused.has(name))
  })
})
