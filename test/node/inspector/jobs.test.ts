/**
 * The inspector over job queues: the overview's queue summaries, pages of jobs (walked by cursor,
 * filtered by state), one job with its logs, progress and children, logs and dead letters by page,
 * user data as stored JSON cut to its bound; and the actions, which go through the queues' own calls
 * (asserted on the rows and events they leave). Refused requests are typed failures that change nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Inspector from "../../../src/inspector/InspectorService.js"
import { COUNT_CAP, DETAIL_JSON_CHARS, LIST_JSON_CHARS, MAX_PAGE, MESSAGE_CHARS, RATE_WINDOW_MS } from "../../../src/inspection/protocol.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as FaultyStorage from "../../../src/testing/FaultyStorage.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { dump, gates, jobRow, recorder, rows, type TestObject } from "../jobs/support.js"
import { ask, failureOf, valueOf, walk } from "./support.js"

type Mail = { readonly to: string; readonly body?: string }

const setup = (object: TestObject) =>
  Effect.gen(function*() {
    const held = gates()
    const broken = new Set<string>()
    const events = recorder()
    const handler = (job: Jobs.JobContext<Mail>) =>
      Effect.gen(function*() {
        yield* job.log(`sending to ${job.payload.to}`)
        yield* job.progress({ step: 1 })
        if (job.payload.to === "hold") yield* held.wait(job.id)
        if (broken.has(job.id)) return yield* Effect.fail(new Error(`${job.payload.to} bounced`))
        return `sent to ${job.payload.to}`
      })
    const jobs = yield* object.run(Jobs.make({
      email: Jobs.queue({ deadLetter: true, retries: { maxAttempts: 1 }, keepLogs: 20, handler }),
      sms: Jobs.queue({ retries: { maxAttempts: 1 }, handler })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, held, broken, events }
  })

describe("inspector: reading jobs", () => {
  it.scoped("the overview's counts stop at COUNT_CAP (the queue's own counts stay exact), so its cost is bounded", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.email.pause)
      const bulk = Array.from({ length: 1_000 }, (_, n) => ({ payload: { to: `r${n}` } }))
      for (let round = 0; round < COUNT_CAP / 1_000; round++) yield* object.run(jobs.email.addBulk(bulk))
      yield* object.run(jobs.email.addBulk(bulk.slice(0, 5)))
      yield* object.run(jobs.sms.add({ id: "one", payload: { to: "x" }, delayMs: 60_000 }))

      const overview = yield* valueOf(object, { _tag: "Overview" })
      const [email, sms] = overview.jobs.queues
      expect(email.counts).toEqual({ waiting: COUNT_CAP, delayed: 0, active: 0, "waiting-children": 0, completed: 0, failed: 0, canceled: 0 })
      expect(email.paused).toBe(true)
      expect(sms.counts.delayed).toBe(1)
      expect((yield* object.run(jobs.email.counts)).waiting).toBe(COUNT_CAP + 5)
    }), 60_000)

  it.scoped("a page of a state rare among its status's jobs reads at most 1 000 rows: a short page and a cursor to read on", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.email.pause)
      const bulk = Array.from({ length: 600 }, (_, n) => ({ payload: { to: `r${n}` } }))
      yield* object.run(jobs.email.addBulk(bulk))
      yield* object.run(jobs.email.addBulk(bulk))
      // The one delayed job comes after 1 200 waiting ones.
      yield* object.run(jobs.email.add({ id: "later", payload: { to: "later" }, delayMs: 60_000 }))
      const first = yield* valueOf(object, { _tag: "Jobs", queue: "email", state: "delayed" })
      expect(first.items).toEqual([])
      expect(first.cursor).toBeDefined()
      const second = yield* valueOf(object, { _tag: "Jobs", queue: "email", state: "delayed", cursor: first.cursor })
      expect(second.items.map((item: { id: string }) => item.id)).toEqual(["later"])
      expect(second.cursor).toBeUndefined()
      // A dense state fills its page at once; the cursor follows its last item.
      const waiting = yield* valueOf(object, { _tag: "Jobs", queue: "email", state: "waiting", limit: 3 })
      expect(waiting.items).toHaveLength(3)
      expect(waiting.cursor).toBe(String(waiting.items.length === 3 ? (yield* jobRow(object, "email", waiting.items[2].id))!.seq : ""))
    }))

  it.scoped("the overview summarises each queue; a job shows its payload, result, progress, logs, parent and children", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs } = yield* setup(object)
      broken.add("c2")
      yield* object.run(jobs.flow({
        queue: "email",
        id: "parent",
        payload: { to: "p" },
        children: [
          { queue: "email", id: "c1", payload: { to: "c1" } },
          { queue: "sms", id: "c2", payload: { to: "c2" }, onFailure: "ignore" }
        ]
      }))
      yield* object.run(jobs.email.add({ id: "later", payload: { to: "l" }, delayMs: 60_000 }))
      yield* TestClock.adjust(10)

      const overview = yield* valueOf(object, { _tag: "Overview" })
      expect(overview.scheduler.capabilities).toEqual(["jobs"])
      expect(overview.jobs.queues).toEqual([
        {
          name: "email",
          processing: "inline",
          paused: false,
          counts: { waiting: 0, delayed: 1, active: 0, "waiting-children": 0, completed: 2, failed: 0, canceled: 0 },
          deadLetters: 0,
          rates: { windowMs: RATE_WINDOW_MS, completed: 2, failed: 0 }
        },
        {
          name: "sms",
          processing: "inline",
          paused: false,
          counts: { waiting: 0, delayed: 0, active: 0, "waiting-children": 0, completed: 0, failed: 1, canceled: 0 },
          deadLetters: 0,
          rates: { windowMs: RATE_WINDOW_MS, completed: 0, failed: 1 }
        }
      ])
      expect(overview).not.toHaveProperty("operations")

      const parent = yield* valueOf(object, { _tag: "Job", queue: "email", id: "parent" })
      expect(parent).toEqual({
        job: expect.objectContaining({
          id: "parent",
          queue: "email",
          state: "completed",
          attempt: 1,
          maxAttempts: 1,
          priority: 0,
          payload: { json: "{\"to\":\"p\"}", truncated: false },
          result: { json: "\"sent to p\"", truncated: false },
          progress: { json: "{\"step\":1}", truncated: false }
        }),
        logs: { items: [{ seq: 1, at: expect.any(Number), message: "sending to p" }], total: 1 },
        children: {
          items: [{ queue: "email", id: "c1", state: "completed" }, { queue: "sms", id: "c2", state: "failed" }],
          total: 2
        }
      })
      const child = yield* valueOf(object, { _tag: "Job", queue: "sms", id: "c2" })
      expect(child.job).toMatchObject({ state: "failed", error: { name: "Error", message: "c2 bounced" }, parent: { queue: "email", id: "parent" } })
      expect(child.job).not.toHaveProperty("result")

      const page = yield* valueOf(object, { _tag: "Jobs", queue: "email" })
      expect(page.items.map((item: any) => `${item.id}:${item.state}`)).toEqual(["parent:completed", "c1:completed", "later:delayed"])
      expect(page).not.toHaveProperty("cursor")
      expect((yield* valueOf(object, { _tag: "Jobs", queue: "email", state: "delayed" })).items.map((item: any) => item.id)).toEqual(["later"])
    }))

  it.scoped("each queue shows its processing: inline, external (leased by workers) or queue (sent to Cloudflare Queues)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { objectId: "object-1" } })
      const sent: Array<unknown> = []
      const producer = { sendBatch: (messages: Iterable<unknown>) => Promise.resolve(void sent.push(...messages)) }
      const jobs = yield* object.run(Jobs.make({
        local: Jobs.queue({ handler: () => Effect.void }),
        workers: Jobs.externalQueue({}),
        relayed: Jobs.externalQueue({ processing: { queue: producer } })
      }))
      yield* object.run(jobs.workers.add({ id: "w", payload: null }))
      yield* object.run(jobs.workers.lease({ limit: 1 }))
      const overview = yield* valueOf(object, { _tag: "Overview" })
      expect(overview.scheduler.objectId).toBe("object-1")
      expect(overview.jobs.queues.map((queue: any) => `${queue.name}:${queue.processing}`)).toEqual(["local:inline", "workers:external", "relayed:queue"])
      expect(overview.jobs.queues[1].counts.active).toBe(1)
      expect((yield* valueOf(object, { _tag: "Jobs", queue: "workers", state: "active" })).items.map((item: any) => item.id)).toEqual(["w"])
    }))

  it.scoped("pages of jobs walk every job once, in the order added, by cursor and by state", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.email.pause)
      const ids = Array.from({ length: 23 }, (_, i) => `j${String(i).padStart(2, "0")}`)
      for (const [i, id] of ids.entries()) {
        yield* object.run(jobs.email.add({ id, payload: { to: id }, ...(i % 3 === 0 ? { delayMs: 60_000 } : {}) }))
      }
      const all = yield* walk(object, { _tag: "Jobs", queue: "email", limit: 5 })
      expect(all.items.map((item) => item.id)).toEqual(ids)
      expect(all.pages).toBe(5)
      const delayed = yield* walk(object, { _tag: "Jobs", queue: "email", state: "delayed", limit: 2 })
      expect(delayed.items.map((item) => item.id)).toEqual(ids.filter((_, i) => i % 3 === 0))
      const waiting = yield* walk(object, { _tag: "Jobs", queue: "email", state: "waiting", limit: 4 })
      expect(waiting.items.map((item) => item.id)).toEqual(ids.filter((_, i) => i % 3 !== 0))

      // A job added between two pages comes once, at the end.
      const first = yield* valueOf(object, { _tag: "Jobs", queue: "email", limit: 20 })
      yield* object.run(jobs.email.add({ id: "new", payload: { to: "new" } }))
      const rest = yield* walk(object, { _tag: "Jobs", queue: "email", limit: 2, cursor: first.cursor })
      expect([...first.items, ...rest.items].map((item: any) => item.id)).toEqual([...ids, "new"])
    }))

  it.scoped("log lines page by cursor", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        logged: Jobs.queue({
          keepLogs: 50,
          handler: (job: Jobs.JobContext<null>) => Effect.forEach([1, 2, 3, 4, 5, 6, 7], (n) => job.log(`line ${n}`), { discard: true })
        })
      }))
      yield* object.run(jobs.logged.add({ id: "a", payload: null }))
      yield* TestClock.adjust(1)
      const logs = yield* walk(object, { _tag: "JobLogs", queue: "logged", id: "a", limit: 3 })
      expect(logs.pages).toBe(3)
      expect(logs.items.map((line) => `${line.seq}:${line.message}`)).toEqual([1, 2, 3, 4, 5, 6, 7].map((n) => `${n}:line ${n}`))
      const detail = yield* valueOf(object, { _tag: "Job", queue: "logged", id: "a" })
      expect(detail.logs.total).toBe(7)
      expect(detail.job.progress).toEqual({ json: "0", truncated: false })
    }))

  it.scoped("payloads are stored JSON cut to LIST_JSON_CHARS in lists and whole in the detail up to DETAIL_JSON_CHARS; messages are cut too", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs } = yield* setup(object)
      yield* object.run(jobs.email.pause)
      const body = "x".repeat(10_000)
      const huge = "y".repeat(70_000)
      yield* object.run(jobs.email.add({ id: "big", payload: { to: "a", body } }))
      yield* object.run(jobs.email.add({ id: "huge", payload: { to: "b", body: huge } }))
      const whole = JSON.stringify({ to: "a", body })
      const page = yield* valueOf(object, { _tag: "Jobs", queue: "email" })
      expect(page.items[0].payload).toEqual({ json: whole.slice(0, LIST_JSON_CHARS), truncated: true })
      expect(page.items[0].payload.json).toHaveLength(LIST_JSON_CHARS)
      const detail = yield* valueOf(object, { _tag: "Job", queue: "email", id: "big" })
      expect(detail.job.payload).toEqual({ json: whole, truncated: false })
      const cut = yield* valueOf(object, { _tag: "Job", queue: "email", id: "huge" })
      expect(cut.job.payload.truncated).toBe(true)
      expect(cut.job.payload.json).toBe(JSON.stringify({ to: "b", body: huge }).slice(0, DETAIL_JSON_CHARS))

      // A long error message and a dead letter's payload.
      broken.add("long")
      yield* object.run(jobs.email.resume)
      yield* object.run(jobs.email.add({ id: "long", payload: { to: "z".repeat(5_000), body } }))
      yield* TestClock.adjust(10)
      const failed = yield* valueOf(object, { _tag: "Job", queue: "email", id: "long" })
      expect(failed.job.error.message).toHaveLength(MESSAGE_CHARS)
      expect(failed.logs.items[0].message).toHaveLength(MESSAGE_CHARS)
      const letters = yield* valueOf(object, { _tag: "DeadLetters", queue: "email" })
      expect(letters.items).toEqual([{
        id: "long",
        queue: "email",
        payload: { json: JSON.stringify({ to: "z".repeat(5_000), body }).slice(0, LIST_JSON_CHARS), truncated: true },
        attempts: 1,
        error: { name: "Error", message: `${"z".repeat(5_000)} bounced`.slice(0, MESSAGE_CHARS) },
        failedAt: expect.any(Number)
      }])
    }))

  it.scoped("dead letters page by cursor, oldest failure first", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs } = yield* setup(object)
      const ids = ["d", "b", "f", "a", "e", "c", "g"]
      for (const id of ids) {
        broken.add(id)
        yield* object.run(jobs.email.add({ id, payload: { to: id } }))
        yield* TestClock.adjust(1)
      }
      const letters = yield* walk(object, { _tag: "DeadLetters", queue: "email", limit: 3 })
      expect(letters.pages).toBe(3)
      expect(letters.items.map((item) => item.id)).toEqual(ids)
      const overview = yield* valueOf(object, { _tag: "Overview" })
      expect(overview.jobs.queues[0]).toMatchObject({ name: "email", deadLetters: 7, counts: { failed: 7 } })
    }))
})

describe("inspector: the overview's rates", () => {
  it.scoped("jobs finished over the last five minutes, counted from storage: kept across a restart, gone once older", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const { broken, jobs } = yield* setup(first)
      broken.add("bad")
      for (const id of ["a", "b", "c"]) yield* first.run(jobs.email.add({ id, payload: { to: id } }))
      yield* TestClock.adjust(60_000)
      yield* first.run(jobs.email.add({ id: "bad", payload: { to: "bad" } }))
      yield* first.run(jobs.sms.add({ id: "s", payload: { to: "s" } }))
      yield* TestClock.adjust(1)
      const ratesOf = (overview: { readonly jobs: { readonly queues: ReadonlyArray<{ readonly name: string; readonly rates: unknown }> } }) =>
        Object.fromEntries(overview.jobs.queues.map((queue) => [queue.name, queue.rates]))
      expect(ratesOf(yield* valueOf(first, { _tag: "Overview" }))).toEqual({
        email: { windowMs: RATE_WINDOW_MS, completed: 3, failed: 1 },
        sms: { windowMs: RATE_WINDOW_MS, completed: 1, failed: 0 }
      })

      // Durable: a new instance (metrics in memory would start again) reads the same rates from the rows.
      const second = yield* first.restart
      yield* setup(second)
      expect(ratesOf(yield* valueOf(second, { _tag: "Overview" }))).toEqual({
        email: { windowMs: RATE_WINDOW_MS, completed: 3, failed: 1 },
        sms: { windowMs: RATE_WINDOW_MS, completed: 1, failed: 0 }
      })
      // The first three finished at 0: past the window at 5 minutes and 1 ms; the others at 60 000.
      yield* TestClock.adjust(RATE_WINDOW_MS - 60_000)
      expect(ratesOf(yield* valueOf(second, { _tag: "Overview" }))).toEqual({
        email: { windowMs: RATE_WINDOW_MS, completed: 0, failed: 1 },
        sms: { windowMs: RATE_WINDOW_MS, completed: 1, failed: 0 }
      })
      yield* TestClock.adjust(60_000)
      expect(ratesOf(yield* valueOf(second, { _tag: "Overview" }))).toEqual({
        email: { windowMs: RATE_WINDOW_MS, completed: 0, failed: 0 },
        sms: { windowMs: RATE_WINDOW_MS, completed: 0, failed: 0 }
      })
    }))

  it.scoped("each rate is a range of the (queue, status, finished_at) index, capped at COUNT_CAP whatever the queue holds", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      const plan = yield* rows(
        object,
        "EXPLAIN QUERY PLAN SELECT COUNT(*) AS n FROM (SELECT 1 FROM durability_jobs INDEXED BY durability_jobs_queue_idx " +
          "WHERE queue = 'email' AND status = 'completed' AND finished_at >= 0 LIMIT 10000)"
      )
      expect(plan.map((row) => String(row.detail)).join(" ")).toMatch(/COVERING INDEX durability_jobs_queue_idx \(queue=\? AND status=\? AND finished_at>\?\)/)
      // COUNT_CAP + 5 completed jobs, copies of one added job (each column as the queue wrote it, but its identity).
      yield* object.run(jobs.email.add({ id: "template", payload: { to: "t" }, delayMs: 60_000 }))
      const columns = (yield* rows(object, "SELECT name FROM pragma_table_info('durability_jobs')")).map((row) => String(row.name))
      const copied: Record<string, string> = {
        key: "'email/r' || i",
        id: "'r' || i",
        seq: "1000000 + i",
        status: "'completed'",
        finished_at: "0",
        generation_id: "'g' || i"
      }
      yield* rows(
        object,
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${COUNT_CAP + 5})
         INSERT INTO durability_jobs (${columns.join(", ")})
         SELECT ${columns.map((column) => copied[column] ?? column).join(", ")} FROM n, durability_jobs WHERE key = 'email/template'`
      )
      const statements = object.storage.statements.length
      const overview = yield* valueOf(object, { _tag: "Overview" })
      expect(overview.jobs.queues[0]).toMatchObject({ name: "email", rates: { completed: COUNT_CAP, failed: 0 } })
      // Two capped statements per queue (two queues) for the rates: their cost does not grow with the queue.
      const issued = object.storage.statements.slice(statements)
      expect(issued.filter((sql) => sql.includes("finished_at >= ?") && sql.includes("LIMIT 10000"))).toHaveLength(4)
    }))
})

describe("inspector: acting on jobs", () => {
  it.scoped("retry, remove, promote, change priority and cancel go through the queue: rows and events follow", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, events, held, jobs } = yield* setup(object)
      broken.add("bad")
      yield* object.run(jobs.email.add({ id: "bad", payload: { to: "bad" } }))
      yield* object.run(jobs.email.add({ id: "done", payload: { to: "done" } }))
      yield* object.run(jobs.email.add({ id: "later", payload: { to: "later" }, delayMs: 60_000 }))
      yield* object.run(jobs.email.add({ id: "other", payload: { to: "other" }, delayMs: 60_000 }))
      yield* object.run(jobs.email.add({ id: "open", payload: { to: "hold" } }))
      yield* TestClock.adjust(10)
      expect((yield* jobRow(object, "email", "bad"))?.status).toBe("failed")

      // Retry: the failed job runs again with fresh attempts (and now succeeds); a retry of a completed job changes nothing.
      broken.delete("bad")
      expect(yield* valueOf(object, { _tag: "RetryJob", queue: "email", id: "bad" })).toEqual({ changed: 1 })
      yield* TestClock.adjust(10)
      expect(yield* jobRow(object, "email", "bad")).toMatchObject({ status: "completed", attempt: 1 })
      expect(yield* valueOf(object, { _tag: "RetryJob", queue: "email", id: "done" })).toEqual({ changed: 0 })

      // Promote: the delayed job is due now and runs.
      expect(yield* valueOf(object, { _tag: "PromoteJob", queue: "email", id: "later" })).toEqual({ changed: 1 })
      yield* TestClock.adjust(10)
      expect((yield* jobRow(object, "email", "later"))?.status).toBe("completed")

      // Priority of a job that has not started.
      expect(yield* valueOf(object, { _tag: "ChangePriority", queue: "email", id: "other", priority: 7 })).toEqual({ changed: 1 })
      expect((yield* jobRow(object, "email", "other"))?.priority).toBe(7)

      // Cancel: a delayed job at once; the active one through its signal, canceled when its handler ends.
      expect(yield* valueOf(object, { _tag: "CancelJob", queue: "email", id: "other", reason: "not needed" })).toEqual({ changed: 1 })
      expect(yield* jobRow(object, "email", "other")).toMatchObject({ status: "canceled", cancel_reason: "not needed" })
      expect(yield* valueOf(object, { _tag: "RemoveJob", queue: "email", id: "open" })).toEqual({ changed: 0 })
      expect(yield* valueOf(object, { _tag: "CancelJob", queue: "email", id: "open" })).toEqual({ changed: 1 })
      yield* held.open("open")
      yield* TestClock.adjust(10)
      expect((yield* jobRow(object, "email", "open"))?.status).toBe("canceled")
      expect(events.of("canceled").map((event) => event.id).sort()).toEqual(["open", "other"])

      // Remove: the finished job is gone with its logs.
      expect(yield* valueOf(object, { _tag: "RemoveJob", queue: "email", id: "done" })).toEqual({ changed: 1 })
      expect(yield* jobRow(object, "email", "done")).toBeUndefined()
      expect(yield* rows(object, "SELECT * FROM durability_job_logs WHERE key = 'email/done'")).toEqual([])
      expect(yield* failureOf(object, { _tag: "Job", queue: "email", id: "done" })).toEqual({
        _tag: "NotFound",
        message: "No job \"done\" in queue \"email\""
      })
    }))

  it.scoped("pause and resume the queue; redrive dead letters (some or all); purge", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs } = yield* setup(object)
      expect(yield* valueOf(object, { _tag: "PauseQueue", queue: "email" })).toEqual({ changed: 1 })
      expect(yield* valueOf(object, { _tag: "PauseQueue", queue: "email" })).toEqual({ changed: 0 })
      expect(yield* rows(object, "SELECT queue, paused FROM durability_job_queues")).toEqual([{ queue: "email", paused: 1 }])
      for (const id of ["a", "b", "c"]) {
        broken.add(id)
        yield* object.run(jobs.email.add({ id, payload: { to: id } }))
      }
      yield* TestClock.adjust(10)
      expect((yield* valueOf(object, { _tag: "Overview" })).jobs.queues[0]).toMatchObject({ paused: true, counts: { waiting: 3 } })
      expect(yield* valueOf(object, { _tag: "ResumeQueue", queue: "email" })).toEqual({ changed: 1 })
      yield* TestClock.adjust(10)
      expect(yield* rows(object, "SELECT id FROM durability_job_dead_letters ORDER BY id")).toEqual([{ id: "a" }, { id: "b" }, { id: "c" }])

      broken.clear()
      expect(yield* valueOf(object, { _tag: "RedriveDeadLetters", queue: "email", ids: ["b"] })).toEqual({ changed: 1 })
      yield* TestClock.adjust(10)
      expect((yield* jobRow(object, "email", "b"))?.status).toBe("completed")
      expect(yield* valueOf(object, { _tag: "RedriveDeadLetters", queue: "email" })).toEqual({ changed: 2 })
      yield* TestClock.adjust(10)
      expect(yield* rows(object, "SELECT id, status FROM durability_jobs ORDER BY id")).toEqual([
        { id: "a", status: "completed" },
        { id: "b", status: "completed" },
        { id: "c", status: "completed" }
      ])
      expect(yield* rows(object, "SELECT * FROM durability_job_dead_letters")).toEqual([])

      yield* TestClock.adjust(1_000)
      yield* object.run(jobs.sms.add({ id: "new", payload: { to: "new" }, delayMs: 60_000 }))
      const now = yield* TestClock.currentTimeMillis
      expect(yield* valueOf(object, { _tag: "PurgeBefore", capability: "jobs", before: now })).toEqual({ changed: 3 })
      expect(yield* rows(object, "SELECT id FROM durability_jobs")).toEqual([{ id: "new" }])
    }))
})

describe("inspector: bulk actions", () => {
  it.scoped("BulkJobs runs one chunk of Jobs.bulk per request: a queue's jobs by filter, or every queue's, walked by cursor", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, events, jobs } = yield* setup(object)
      yield* object.run(jobs.email.pause)
      yield* object.run(jobs.email.addBulk(Array.from({ length: 7 }, (_, n) => ({ id: `promo-${n}`, payload: { to: `p${n}` } }))))
      yield* object.run(jobs.email.add({ id: "receipt", payload: { to: "r" } }))
      yield* object.run(jobs.sms.add({ id: "promo-sms", payload: { to: "s" }, delayMs: 60_000 }))

      const chunks: Array<Inspector.BulkResult> = []
      let cursor: string | undefined
      do {
        const chunk = yield* valueOf(object, {
          _tag: "BulkJobs",
          action: "cancel",
          queue: "email",
          idPrefix: "promo-",
          reason: "campaign stopped",
          limit: 3,
          ...(cursor === undefined ? {} : { cursor })
        })
        chunks.push(chunk)
        cursor = chunk.cursor
      } while (cursor !== undefined)
      expect(chunks.map((chunk) => [chunk.changed, chunk.done])).toEqual([[3, false], [3, false], [1, true]])
      expect(yield* rows(object, "SELECT id, status, cancel_reason FROM durability_jobs WHERE status = 'canceled' ORDER BY seq")).toEqual(
        Array.from({ length: 7 }, (_, n) => ({ id: `promo-${n}`, status: "canceled", cancel_reason: "campaign stopped" }))
      )
      expect((yield* jobRow(object, "email", "receipt"))?.status).toBe("pending")
      expect(events.of("canceled")).toHaveLength(7)

      // No queue: every queue's jobs (here the delayed sms one, promoted; the pending receipt was read too).
      expect(yield* valueOf(object, { _tag: "BulkJobs", action: "promote", idPrefix: "promo-" })).toEqual({ changed: 1, matched: 1, examined: 2, done: true })
      yield* TestClock.adjust(10)
      expect((yield* jobRow(object, "sms", "promo-sms"))?.status).toBe("completed")

      // Retry then redrive by filter, as the queue's own calls do.
      broken.add("receipt")
      yield* object.run(jobs.email.resume)
      yield* TestClock.adjust(10)
      expect((yield* jobRow(object, "email", "receipt"))?.status).toBe("failed")
      broken.clear()
      expect(yield* valueOf(object, { _tag: "BulkJobs", action: "redrive", queue: "email" })).toMatchObject({ changed: 1, done: true })
      yield* TestClock.adjust(10)
      expect((yield* jobRow(object, "email", "receipt"))?.status).toBe("completed")
      expect(yield* valueOf(object, { _tag: "BulkJobs", action: "remove", queue: "email", states: ["canceled"] })).toMatchObject({ changed: 7, done: true })
      expect(yield* rows(object, "SELECT id FROM durability_jobs ORDER BY seq")).toEqual([{ id: "receipt" }, { id: "promo-sms" }])
    }))
})

describe("inspector: refused requests", () => {
  it.scoped("a bad request, an unknown queue or job, a capability not attached: a typed failure, storage unchanged", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { broken, jobs } = yield* setup(object)
      broken.add("a")
      yield* object.run(jobs.email.add({ id: "a", payload: { to: "a" } }))
      yield* object.run(jobs.email.add({ id: "w", payload: { to: "w" }, delayMs: 60_000 }))
      yield* TestClock.adjust(10)
      const before = yield* dump(object)
      const cases: ReadonlyArray<readonly [unknown, string, string]> = [
        [{ _tag: "Nope" }, "BadRequest", "Unknown request _tag \"Nope\""],
        [null, "BadRequest", "Unknown request _tag missing"],
        [{ _tag: "Jobs" }, "BadRequest", "request.queue"],
        [{ _tag: "Jobs", queue: "email", limit: MAX_PAGE + 1 }, "BadRequest", "request.limit"],
        [{ _tag: "Jobs", queue: "email", limit: 0 }, "BadRequest", "request.limit"],
        [{ _tag: "Jobs", queue: "email", state: "lost" }, "BadRequest", "request.state"],
        [{ _tag: "Jobs", queue: "email", cursor: "abc" }, "BadRequest", "cursor"],
        [{ _tag: "DeadLetters", queue: "email", cursor: "abc" }, "BadRequest", "cursor"],
        [{ _tag: "RetryJob", queue: "email", id: "a", extra: 1 }, "BadRequest", "request.extra"],
        [{ _tag: "ChangePriority", queue: "email", id: "w", priority: 1.5 }, "BadRequest", "request.priority"],
        [{ _tag: "ChangePriority", queue: "email", id: "w", priority: 2 ** 60 }, "BadRequest", "request.priority"],
        // Refused by the queue itself (its InvalidInputError): the message names the field.
        [{ _tag: "RedriveDeadLetters", queue: "email", ids: ["ok", "\ud800"] }, "BadRequest", "ids[1] must be well-formed Unicode"],
        [{ _tag: "RedriveDeadLetters", queue: "email", ids: Array.from({ length: 1_001 }, (_, i) => `x${i}`) }, "BadRequest", "request.ids"],
        [{ _tag: "PurgeBefore", capability: "jobs", before: -1 }, "BadRequest", "request.before"],
        [{ _tag: "BulkJobs", action: "delete", queue: "email" }, "BadRequest", "request.action"],
        [{ _tag: "BulkJobs", action: "cancel", queue: "email", states: [] }, "BadRequest", "request.states"],
        [{ _tag: "BulkJobs", action: "cancel", queue: "email", limit: 501 }, "BadRequest", "request.limit"],
        [{ _tag: "BulkJobs", action: "cancel", queue: "email", olderThanMs: -1 }, "BadRequest", "request.olderThanMs"],
        // Refused by Jobs.bulk itself (its InvalidInputError): the message names the field.
        [{ _tag: "BulkJobs", action: "retry", queue: "email", states: ["waiting"] }, "BadRequest", "filter.states: retry applies to failed, canceled"],
        [{ _tag: "BulkJobs", action: "cancel", queue: "email", cursor: "abc" }, "BadRequest", "options.cursor"],
        [{ _tag: "BulkJobs", action: "cancel", queue: "push" }, "NotFound", "No queue \"push\""],
        [{ _tag: "Jobs", queue: "push" }, "NotFound", "No queue \"push\" in this object (queues: email, sms)"],
        [{ _tag: "PauseQueue", queue: "push" }, "NotFound", "No queue \"push\""],
        [{ _tag: "RetryJob", queue: "email", id: "zz" }, "NotFound", "No job \"zz\" in queue \"email\""],
        [{ _tag: "RemoveJob", queue: "sms", id: "a" }, "NotFound", "No job \"a\" in queue \"sms\""],
        [{ _tag: "JobLogs", queue: "email", id: "zz" }, "NotFound", "No job \"zz\""],
        [{ _tag: "Operations" }, "NotFound", "This object has no operations (attached: jobs)"],
        [{ _tag: "CancelAlarm", name: "x" }, "NotFound", "This object has no alarms"],
        [{ _tag: "TriggerSchedule", key: "a/b" }, "NotFound", "This object has no schedules"],
        [{ _tag: "PurgeBefore", capability: "operations", before: 10 }, "NotFound", "This object has no operations"]
      ]
      for (const [request, tag, text] of cases) {
        const failure = yield* failureOf(object, request)
        expect(failure._tag, JSON.stringify(request).slice(0, 80)).toBe(tag)
        expect(failure.message, JSON.stringify(request).slice(0, 80)).toContain(text)
      }
      expect(yield* dump(object)).toEqual(before)
    }))

  it.scoped("inspect is typed by tag and fails with the tagged errors", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      yield* setup(object)
      const inspector = yield* object.run(Inspector.make)
      const page = yield* inspector.inspect(new Inspector.JobsQuery({ queue: "email" }))
      expect(page.items).toEqual([])
      const missing = yield* Effect.flip(inspector.inspect(new Inspector.JobQuery({ queue: "email", id: "x" })))
      expect(missing).toBeInstanceOf(Inspector.NotFound)
      expect(yield* Effect.flip(Inspector.decode({ _tag: "Jobs", queue: "" }))).toBeInstanceOf(Inspector.BadRequest)
    }))

  it.scoped("a storage failure is Unavailable, without the storage's own message", () =>
    Effect.gen(function*() {
      const storage = FaultyStorage.make(yield* MemoryStorage.make)
      const object = yield* TestDurability.make({ storage })
      yield* setup(object)
      storage.failNext("sql")
      const answer = yield* ask(object, { _tag: "Jobs", queue: "email" })
      expect(answer).toEqual({ ok: false, failure: { _tag: "Unavailable", message: "The object's storage failed; try again" } })
      expect(yield* valueOf(object, { _tag: "Jobs", queue: "email" })).toEqual({ items: [] })
    }))
})
