/**
 * The inspector's API in workerd against a real object (`InspectedObject`: real SQLite, alarms, RPC),
 * through `DurabilityInspector.handler` as a Worker's fetch calls it: every endpoint, pages followed
 * through their cursors, each action's effect read back from the object itself, 400s that name the
 * field, 404s for unknown objects, queues and jobs, markup-like strings returned unchanged as JSON
 * text, the OpenAPI document listing every path, and objects reached through a jobs router.
 */
import { env } from "cloudflare:test"
import { DurabilityInspector } from "durability/inspector"
import { describe, expect, it } from "vitest"
import { DurabilityJobs } from "../../src/index.js"
import { XSS } from "./objects/InspectedObject.js"

const TOKEN = "api-test-token-0123456789"
const P = "/_durability"
const logged: Array<unknown> = []

const handlerFor = (...names: ReadonlyArray<string>) =>
  DurabilityInspector.handler({ objects: { namespace: env.INSPECTED_OBJECT, names }, token: TOKEN, log: (entry) => void logged.push(entry) })

const stubOf = (name: string) => env.INSPECTED_OBJECT.get(env.INSPECTED_OBJECT.idFromName(name))

interface Reply {
  readonly status: number
  readonly text: string
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tests read answers field by field
  readonly body: any
}

const call = async (handler: ReturnType<typeof handlerFor>, method: "GET" | "POST", path: string, body?: unknown): Promise<Reply> => {
  const response = await handler(new Request(`https://worker.test${P}${path}`, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, ...(method === "POST" ? { "Content-Type": "application/json" } : {}) },
    ...(method === "POST" ? { body: JSON.stringify(body ?? {}) } : {})
  }))
  if (response === undefined) throw new Error(`no answer for ${path}`)
  expect(response.headers.get("Content-Type")).toMatch(/^application\/json/)
  const text = await response.text()
  return { status: response.status, text, body: JSON.parse(text) }
}

/** A fresh object seeded with every capability; its handler and helpers. */
const seeded = async (name: string, counts = { ok: 3, fail: 2, later: 3 }) => {
  const stub = stubOf(name)
  await stub.seed(counts)
  const handler = handlerFor(name)
  const o = `/api/objects/${encodeURIComponent(name)}`
  return {
    stub,
    handler,
    get: (path: string) => call(handler, "GET", `${o}${path}`),
    post: (path: string, body?: unknown) => call(handler, "POST", `${o}${path}`, body)
  }
}

/** Every item of a listing, page by page; checks each page's size and that pages never repeat. */
const allPages = async (get: (path: string) => Promise<Reply>, path: string, limit: number) => {
  const items: Array<{ readonly id?: string; readonly seq?: number }> = []
  let cursor: string | undefined
  let pages = 0
  do {
    const separator = path.includes("?") ? "&" : "?"
    const reply = await get(`${path}${separator}limit=${limit}${cursor === undefined ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)
    expect(reply.status, reply.text).toBe(200)
    expect(reply.body.items.length).toBeLessThanOrEqual(limit)
    items.push(...reply.body.items)
    cursor = reply.body.cursor
    pages++
    expect(pages).toBeLessThan(50)
  } while (cursor !== undefined)
  return { items, pages }
}

describe("inspector API: reads", () => {
  it("lists the objects and answers an object's overview with every capability", async () => {
    const { handler, get } = await seeded("overview")
    expect((await call(handler, "GET", "/api/objects")).body).toEqual({ objects: [{ name: "overview" }] })
    const { status, body } = await get("")
    expect(status).toBe(200)
    expect([...body.scheduler.capabilities].sort()).toEqual(["alarms", "jobs", "operations", "schedules"])
    expect(body.scheduler.permits).toMatchObject({ capacity: expect.any(Number), available: expect.any(Number) })
    const work = body.jobs.queues.find((queue: { name: string }) => queue.name === "work")
    expect(work).toMatchObject({ name: "work", processing: "inline", paused: false, deadLetters: 2 })
    expect(work.counts).toMatchObject({ completed: 3, failed: 2 })
    const later = body.jobs.queues.find((queue: { name: string }) => queue.name === "later")
    expect(later.counts).toMatchObject({ delayed: 3 })
    expect(body.operations.counts).toMatchObject({ completed: 1, failed: 1 })
    expect(body.alarms).toEqual({ pending: 2, failed: 0 })
    expect(body.schedules).toEqual({ active: 2, paused: 0, ended: 0 })
  })

  it("pages through jobs with cursors, filtered by state, never skipping or repeating", async () => {
    const { get } = await seeded("pages", { ok: 5, fail: 2, later: 0 })
    const all = await allPages(get, "/queues/work/jobs", 2)
    expect(all.pages).toBe(4)
    expect(all.items.map((job) => job.id).sort()).toEqual(["fail-0", "fail-1", "ok-0", "ok-1", "ok-2", "ok-3", "ok-4"])
    const failed = await allPages(get, "/queues/work/jobs?state=failed", 1)
    expect(failed.items.map((job) => job.id).sort()).toEqual(["fail-0", "fail-1"])
    const completed = await get("/queues/work/jobs?state=completed&limit=100")
    expect(completed.body.items).toHaveLength(5)
    expect(completed.body.cursor).toBeUndefined()
  })

  it("answers a job's detail and logs, with stored markup returned unchanged as JSON text", async () => {
    const { get } = await seeded("detail")
    const { status, body, text } = await get("/queues/work/jobs/fail-0")
    expect(status).toBe(200)
    expect(body.job).toMatchObject({ id: "fail-0", queue: "work", state: "failed", attempt: 1, maxAttempts: 1 })
    expect(JSON.parse(body.job.payload.json)).toEqual({ n: 0, fail: true, note: XSS.attribute })
    expect(JSON.parse(body.job.progress.json)).toEqual({ done: 0, note: XSS.script })
    expect(body.job.error.message).toContain(`failed ${XSS.attribute}`)
    expect(body.logs.items.map((line: { message: string }) => line.message)).toEqual([`line ${XSS.attribute}`])
    // The strings travel as JSON string content: no HTML escaping was needed, and none was lost.
    expect(text).toContain(JSON.stringify(`line ${XSS.attribute}`).slice(1, -1))
    const logs = await get("/queues/work/jobs/fail-0/logs?limit=1")
    expect(logs.body.items).toEqual([{ seq: expect.any(Number), at: expect.any(Number), message: `line ${XSS.attribute}` }])
    const ok = await get("/queues/work/jobs/ok-1")
    expect(JSON.parse(ok.body.job.result.json)).toEqual({ doubled: 2 })
  })

  it("lists dead letters, operations, alarms and schedules, with stored markup unchanged", async () => {
    const { get } = await seeded("lists")
    const dead = await allPages(get, "/queues/work/dead-letters", 1)
    expect(dead.items.map((item) => item.id).sort()).toEqual(["fail-0", "fail-1"])
    const failedOps = await get("/operations?status=failed")
    expect(failedOps.body.items).toHaveLength(1)
    expect(failedOps.body.items[0]).toMatchObject({ id: "boom-1", operation: "boom", status: "failed" })
    expect(failedOps.body.items[0].error.message).toContain(`boom ${XSS.script}`)
    const sent = await get("/operations?status=completed")
    expect(JSON.parse(sent.body.items[0].payload.json)).toEqual({ to: XSS.attribute })
    const alarms = await get("/alarms")
    expect(alarms.body.items.map((item: { name: string }) => item.name).sort()).toEqual(["expire", "remind"])
    const schedules = await allPages(get, "/schedules", 1)
    expect(schedules.items).toHaveLength(2)
    const daily = (schedules.items as Array<{ key: string; payload: { json: string }; description: string }>).find((item) => item.key.endsWith("daily"))!
    expect(JSON.parse(daily.payload.json)).toEqual({ note: XSS.script })
  })
})

describe("inspector API: actions", () => {
  it("retries, removes, cancels, promotes and reprioritizes jobs", async () => {
    const { stub, post, get } = await seeded("jobs-actions")
    await stub.heal()
    expect((await post("/queues/work/jobs/fail-1/retry")).body).toEqual({ changed: 1 })
    expect(await stub.waitJob("fail-1")).toBe("completed")
    expect(JSON.parse((await get("/queues/work/jobs/fail-1")).body.job.result.json)).toEqual({ doubled: 2 })
    expect((await post("/queues/work/jobs/ok-0/retry")).body).toEqual({ changed: 0 })

    expect((await post("/queues/work/jobs/ok-0/remove")).body).toEqual({ changed: 1 })
    expect(await stub.jobState("work", "ok-0")).toBeUndefined()

    expect((await post("/queues/later/jobs/later-0/cancel", { reason: `no ${XSS.script}` })).body).toEqual({ changed: 1 })
    expect(await stub.jobState("later", "later-0")).toBe("canceled")
    expect((await get("/queues/later/jobs/later-0")).body.job.state).toBe("canceled")

    expect((await post("/queues/later/jobs/later-2/priority", { priority: 7 })).body).toEqual({ changed: 1 })
    expect((await get("/queues/later/jobs/later-2")).body.job.priority).toBe(7)

    expect((await post("/queues/later/jobs/later-1/promote")).body).toEqual({ changed: 1 })
    expect(["waiting", "active", "completed"]).toContain(await stub.jobState("later", "later-1"))
  })

  it("pauses and resumes a queue, and redrives dead letters", async () => {
    const { stub, post, get } = await seeded("queue-actions")
    expect((await post("/queues/later/pause")).body).toEqual({ changed: 1 })
    expect(await stub.isPaused("later")).toBe(true)
    expect((await get("")).body.jobs.queues.find((queue: { name: string }) => queue.name === "later").paused).toBe(true)
    expect((await post("/queues/later/resume")).body).toEqual({ changed: 1 })
    expect(await stub.isPaused("later")).toBe(false)

    await stub.heal()
    expect((await post("/queues/work/dead-letters/redrive", { ids: ["fail-0"] })).body).toEqual({ changed: 1 })
    expect(await stub.waitJob("fail-0")).toBe("completed")
    const left = await get("/queues/work/dead-letters")
    expect(left.body.items.map((item: { id: string }) => item.id)).toEqual(["fail-1"])
    expect((await post("/queues/work/dead-letters/redrive")).body).toEqual({ changed: 1 })
    expect(await stub.waitJob("fail-1")).toBe("completed")
    expect((await get("/queues/work/dead-letters")).body.items).toEqual([])
    expect((await get("/queues/work/jobs?state=completed")).body.items).toHaveLength(5)
  })

  it("triggers, pauses and resumes a schedule by its key (URL-encoded), and cancels an alarm and an operation", async () => {
    const { stub, post, get } = await seeded("other-actions")
    const { body } = await get("/schedules")
    const key: string = body.items.find((item: { key: string }) => item.key.endsWith("hourly")).key
    const path = `/schedules/${encodeURIComponent(key)}`
    expect((await post(`${path}/pause`)).body).toEqual({ changed: 1 })
    expect(await stub.scheduleStatus("hourly")).toBe("paused")
    expect((await post(`${path}/resume`)).body).toEqual({ changed: 1 })
    expect(await stub.scheduleStatus("hourly")).toBe("active")
    expect((await post(`${path}/trigger`)).status).toBe(200)

    expect((await post("/alarms/remind/cancel")).body).toEqual({ changed: 1 })
    expect(await stub.alarmNames()).toEqual(["expire"])
    expect((await post("/operations/send/sent-1/cancel")).body).toEqual({ changed: 0 })
  })

  it("runs bulk actions by filter, one chunk per request, following the cursor until done", async () => {
    const { stub, post, get } = await seeded("bulk-actions", { ok: 0, fail: 0, later: 5 })
    const chunks: Array<{ changed: number; done: boolean }> = []
    let cursor: string | undefined
    do {
      const reply = await post("/queues/later/bulk", { action: "cancel", idPrefix: "later-", reason: "bulk", limit: 2, ...(cursor === undefined ? {} : { cursor }) })
      expect(reply.status).toBe(200)
      chunks.push({ changed: reply.body.changed, done: reply.body.done })
      cursor = reply.body.cursor
    } while (cursor !== undefined)
    expect(chunks).toEqual([{ changed: 2, done: false }, { changed: 2, done: false }, { changed: 1, done: true }])
    for (let n = 0; n < 5; n++) expect(await stub.jobState("later", `later-${n}`)).toBe("canceled")
    // Every queue's jobs (no queue in the path): the canceled ones removed.
    expect((await post("/jobs/bulk", { action: "remove", states: ["canceled"] })).body).toEqual({ changed: 5, matched: 5, examined: 5, done: true })
    expect((await get("/queues/later/jobs")).body.items).toEqual([])
  })

  it("purges records created before a time", async () => {
    const { post, get } = await seeded("purge")
    const purged = await post("/purge", { capability: "jobs", before: Date.now() + 60_000 })
    expect(purged.status).toBe(200)
    expect(purged.body.changed).toBeGreaterThanOrEqual(8)
    expect((await get("/queues/work/jobs")).body.items).toEqual([])
  })
})

describe("inspector API: refusals", () => {
  it("answers 400 naming the field for a bad limit, state, status, cursor or body", async () => {
    const { get, post } = await seeded("bad-input", { ok: 1, fail: 0, later: 0 })
    const cases: ReadonlyArray<[Promise<Reply>, string]> = [
      [get("/queues/work/jobs?limit=0"), "limit: must be an integer from 1 to 100"],
      [get("/queues/work/jobs?limit=101"), "limit: must be an integer from 1 to 100"],
      [get("/queues/work/jobs?limit=abc"), "limit: must be an integer from 1 to 100"],
      [get("/queues/work/jobs?limit=1.5"), "limit: must be an integer from 1 to 100"],
      [get("/queues/work/jobs?state=bogus"), "state: must be one of waiting, delayed, active, waiting-children, completed, failed, canceled"],
      [get("/operations?status=done"), "status: must be one of pending, completed, failed"],
      [post("/queues/work/jobs/ok-0/priority", { priority: "high" }), "priority"],
      [post("/queues/work/jobs/ok-0/priority", {}), "priority"],
      [post("/queues/work/jobs/ok-0/retry", { force: true }), "force: is unexpected"],
      [post("/queues/work/jobs/ok-0/cancel", { reason: 5 }), "reason"],
      [post("/queues/work/jobs/ok-0/cancel", { reason: "x", extra: 1 }), "extra"],
      [post("/purge", { capability: "everything", before: 1 }), "capability"],
      [post("/purge", { capability: "jobs", before: -1 }), "before"],
      [post("/queues/work/dead-letters/redrive", { ids: "fail-0" }), "ids"],
      [post("/queues/work/jobs/ok-0/retry", [1, 2]), "must be a JSON object"],
      [post("/queues/work/bulk", { action: "erase" }), "action: must be one of cancel, remove, retry, promote, redrive"],
      [post("/queues/work/bulk", { action: "cancel", states: [] }), "states: must be a non-empty array"],
      [post("/queues/work/bulk", { action: "cancel", limit: 501 }), "limit: must be an integer from 1 to 500"],
      [post("/queues/work/bulk", { action: "cancel", state: "waiting" }), "state: is unexpected"],
      [post("/queues/work/bulk", { action: "retry", states: ["waiting"] }), "filter.states: retry applies to failed, canceled"],
      [post("/jobs/bulk", { action: "cancel", cursor: "x" }), "options.cursor"]
    ]
    for (const [reply, message] of cases) {
      const { status, body } = await reply
      expect(status, message).toBe(400)
      expect(body).toEqual({ _tag: "BadRequest", message: expect.stringContaining(message) })
      // One clear line per field, no schema dump.
      expect(body.message, message).not.toMatch(/Expected undefined|\n|└─/)
    }
  })

  it("answers 404 for an unknown object, queue or job", async () => {
    const { handler, get, post } = await seeded("missing", { ok: 1, fail: 0, later: 0 })
    expect(await call(handler, "GET", "/api/objects/nobody")).toMatchObject({ status: 404, body: { _tag: "NotFound" } })
    const queue = await get("/queues/sms/jobs")
    expect(queue).toMatchObject({ status: 404, body: { _tag: "NotFound", message: expect.stringContaining("sms") } })
    expect((await get("/queues/work/jobs/nope")).status).toBe(404)
    expect((await post("/queues/sms/pause")).status).toBe(404)
    expect((await post("/queues/sms/bulk", { action: "cancel" })).status).toBe(404)
    expect((await call(handler, "GET", "/api/objects/missing/nothing")).status).toBe(404)
  })
})

describe("inspector API: the OpenAPI document and routed objects", () => {
  it("serves an OpenAPI 3 document listing every path and both security schemes", async () => {
    const { status, body } = await call(handlerFor("doc"), "GET", "/api/openapi.json")
    expect(status).toBe(200)
    expect(body.openapi).toMatch(/^3\./)
    expect(body.servers).toEqual([{ url: P }])
    expect(Object.keys(body.components.securitySchemes).sort()).toEqual(["access", "bearer"])
    const paths = Object.entries(body.paths as Record<string, Record<string, unknown>>).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`))
    expect(paths.sort()).toEqual([
      "GET /api/objects",
      "GET /api/objects/{object}",
      "GET /api/objects/{object}/alarms",
      "GET /api/objects/{object}/fanout",
      "GET /api/objects/{object}/log",
      "GET /api/objects/{object}/operations",
      "GET /api/objects/{object}/queues/{queue}/dead-letters",
      "GET /api/objects/{object}/queues/{queue}/jobs",
      "GET /api/objects/{object}/queues/{queue}/jobs/{id}",
      "GET /api/objects/{object}/queues/{queue}/jobs/{id}/logs",
      "GET /api/objects/{object}/schedules",
      "GET /api/objects/{object}/workflows/{workflow}/instances",
      "GET /api/objects/{object}/workflows/{workflow}/instances/{id}",
      "GET /api/objects/{object}/workflows/{workflow}/instances/{id}/events",
      "GET /api/objects/{object}/workflows/{workflow}/instances/{id}/steps",
      "GET /api/openapi.json",
      "POST /api/objects/{object}/alarms/{name}/cancel",
      "POST /api/objects/{object}/jobs/bulk",
      "POST /api/objects/{object}/operations/{operation}/{id}/cancel",
      "POST /api/objects/{object}/purge",
      "POST /api/objects/{object}/queues/{queue}/bulk",
      "POST /api/objects/{object}/queues/{queue}/dead-letters/redrive",
      "POST /api/objects/{object}/queues/{queue}/jobs/{id}/cancel",
      "POST /api/objects/{object}/queues/{queue}/jobs/{id}/priority",
      "POST /api/objects/{object}/queues/{queue}/jobs/{id}/promote",
      "POST /api/objects/{object}/queues/{queue}/jobs/{id}/remove",
      "POST /api/objects/{object}/queues/{queue}/jobs/{id}/retry",
      "POST /api/objects/{object}/queues/{queue}/pause",
      "POST /api/objects/{object}/queues/{queue}/resume",
      "POST /api/objects/{object}/schedules/{key}/pause",
      "POST /api/objects/{object}/schedules/{key}/resume",
      "POST /api/objects/{object}/schedules/{key}/trigger",
      "POST /api/objects/{object}/workflows/{workflow}/instances/{id}/events",
      "POST /api/objects/{object}/workflows/{workflow}/instances/{id}/pause",
      "POST /api/objects/{object}/workflows/{workflow}/instances/{id}/restart",
      "POST /api/objects/{object}/workflows/{workflow}/instances/{id}/resume",
      "POST /api/objects/{object}/workflows/{workflow}/instances/{id}/terminate"
    ])
  })

  it("reaches a jobs router's shards by their names, and several sources under their labels", async () => {
    const router = DurabilityJobs.router({ namespace: env.INSPECTED_OBJECT, shards: 2, name: "shard" })
    await stubOf("shard:1").seed({ ok: 1, fail: 0, later: 0 })
    await stubOf("solo").seed({ ok: 2, fail: 0, later: 0 })
    const handler = DurabilityInspector.handler({ objects: { router }, token: TOKEN, log: () => undefined })
    expect((await call(handler, "GET", "/api/objects")).body).toEqual({ objects: [{ name: "shard:0" }, { name: "shard:1" }] })
    const jobs = await call(handler, "GET", `/api/objects/${encodeURIComponent("shard:1")}/queues/work/jobs`)
    expect(jobs.body.items.map((job: { id: string }) => job.id)).toEqual(["ok-0"])

    const both = DurabilityInspector.handler({
      objects: [{ router, label: "sharded" }, { namespace: env.INSPECTED_OBJECT, names: ["solo"] }],
      token: TOKEN,
      log: () => undefined
    })
    expect((await call(both, "GET", "/api/objects")).body).toEqual({
      objects: [{ name: "sharded:shard:0" }, { name: "sharded:shard:1" }, { name: "solo" }]
    })
    const routed = await call(both, "GET", `/api/objects/${encodeURIComponent("sharded:shard:1")}/queues/work/jobs`)
    expect(routed.body.items.map((job: { id: string }) => job.id)).toEqual(["ok-0"])
    const solo = await call(both, "GET", "/api/objects/solo/queues/work/jobs")
    expect(solo.body.items.map((job: { id: string }) => job.id).sort()).toEqual(["ok-0", "ok-1"])
    expect((await call(both, "GET", `/api/objects/${encodeURIComponent("shard:1")}`)).status).toBe(404)
    expect(logged).toEqual([])
  })
})
