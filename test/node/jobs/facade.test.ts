/**
 * The promise face, `DurabilityJobs`, over in-memory storage on the live clock (nothing here waits
 * on time: every await settles once the work it stands for is done): construction errors that name
 * the field, add/get/wait, flows, progress and logs, cancel, errors as `Error` subclasses with
 * stable names, and `DurabilityJobs.migrate`.
 */
import { describe, expect, expectTypeOf, it } from "vitest"
import {
  ChildJobFailedError,
  DurabilityJobs,
  durabilityJobMigrations,
  type DurableBatchJob,
  type DurableBatchOutcome,
  type DurableJob,
  type DurableJobBulkResult,
  type DurableJobInfo,
  JobCanceledError,
  NonRetryableError
} from "../../../src/index.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import { memoryContext, thrownBy } from "../support/promise.js"

/** A promise the test settles by hand, to hold a handler open without waiting on time. */
const gate = () => {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

/** The library's diagnostics (a job failing for good) are expected here: kept off the test output. */
const quiet = () => undefined

const jobTables = (memory: MemoryStorage.MemoryStorage) =>
  memory.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'durability_job%' ORDER BY name")
    .toArray().map((row) => row.name)

describe("DurabilityJobs construction", () => {
  it("refuses bad configs with TypeError / RangeError naming the field, before any table is made", async () => {
    const context = await memoryContext()
    const handler = () => 1
    const cases: ReadonlyArray<readonly [() => unknown, new(...args: Array<never>) => Error, string]> = [
      [() => new DurabilityJobs({ context, queues: { email: { handler, rateLimit: { capacity: 0, refillPerSecond: 1 } } } }), RangeError, "queues.email.rateLimit.capacity"],
      [() => new DurabilityJobs({ context, queues: { email: { handler, maxPayloadBytes: 3_000_000 } } }), RangeError, "queues.email.maxPayloadBytes"],
      [() => new DurabilityJobs({ context, queues: { email: { handler, concurency: 2 } as never } }), TypeError, "queues.email.concurency is not a queue option"],
      [() => new DurabilityJobs({ context, queues: { email: { handler: "no" } as never } }), TypeError, "queues.email.handler must be a function"],
      [() => new DurabilityJobs({ context, queues: { email: 5 as never } }), TypeError, "queues.email must be an object"],
      [() => new DurabilityJobs({ context, queues: [] as never }), TypeError, "queues must be an object"],
      [() => new DurabilityJobs({ context, queues: { flow: { handler } } }), TypeError, `"flow" is reserved by DurabilityJobs`],
      [() => new DurabilityJobs({ context, queues: { email: { handler, retries: { maxAttempts: 0 } } } }), RangeError, "queues.email.retries.maxAttempts"],
      [() => new DurabilityJobs({ context, queues: { email: { handler } }, onLifecycleEvent: 3 as never }), TypeError, "onLifecycleEvent"],
      [() => new DurabilityJobs(null as never), TypeError, "config"]
    ]
    for (const [build, ErrorClass, text] of cases) {
      const error = thrownBy(build)
      expect(error, text).toBeInstanceOf(ErrorClass)
      expect(error.message, text).toContain(text)
    }
    expect(jobTables(context.memory)).toEqual([])
  })
})

describe("DurabilityJobs", () => {
  it("add, get and job(id).wait; progress and logs from the handler; list and counts", async () => {
    const context = await memoryContext()
    const seen: Array<{ readonly id: string; readonly attempt: number; readonly key: string }> = []
    const jobs = new DurabilityJobs({
      context,
      log: quiet,
      queues: {
        email: {
          handler: async (job: DurableJob<{ readonly to: string }>) => {
            seen.push({ id: job.id, attempt: job.attempt, key: job.idempotencyKey })
            await job.progress(40)
            await job.log("rendered")
            await job.progress({ sent: true })
            return { messageId: `m-${job.payload.to}` }
          },
          keepLogs: 10
        }
      }
    })
    expect(Object.keys(jobs)).toEqual(["email"])
    const added = await jobs.email.add({ id: "a", payload: { to: "x" } })
    expect(added).toEqual({ id: "a", state: "waiting", deduplicated: false })
    const done = await jobs.email.job("a").wait({ timeoutMs: 5_000 })
    expect(done).toMatchObject({ id: "a", queue: "email", state: "completed", result: { messageId: "m-x" }, progress: { sent: true }, attempt: 1 })
    expectTypeOf(done).toEqualTypeOf<DurableJobInfo<{ readonly to: string }, { messageId: string }> | undefined>()
    expect(seen).toEqual([{ id: "a", attempt: 1, key: expect.stringMatching(/^durability-job:v1:/) }])
    expect(await jobs.email.logs("a")).toMatchObject({ items: [{ seq: 1, message: "rendered" }], total: 1 })
    expect(await jobs.email.add({ id: "a", payload: { to: "y" } })).toEqual({ id: "a", state: "completed", deduplicated: true })
    expect((await jobs.email.list({ states: ["completed"] })).items.map((item) => item.id)).toEqual(["a"])
    expect(await jobs.email.counts()).toMatchObject({ completed: 1, waiting: 0 })
    expect(await jobs.email.get("missing")).toBeUndefined()
    // wait(id, { timeoutMs }), as every capability's: the same as job(id).wait.
    expect(await jobs.email.wait("a", { timeoutMs: 0 })).toEqual(done)
    expect(await jobs.email.wait("missing", { timeoutMs: 0 })).toBeUndefined()
    const generated = await jobs.email.add({ payload: { to: "z" } })
    expect(generated.id).toMatch(/^[0-9a-f-]{36}$/)
    expect((await jobs.email.job(generated.id).wait())?.state).toBe("completed")
  })

  it("errors are Error subclasses with stable names; job errors keep theirs (ChildJobFailedError, JobCanceledError)", async () => {
    const context = await memoryContext()
    const held = gate()
    const holding = gate()
    let reason: unknown
    const jobs = new DurabilityJobs({
      context,
      log: quiet,
      queues: {
        report: { handler: async () => "report" },
        email: {
          retries: { maxAttempts: 3, delay: () => 1 },
          handler: async (job: DurableJob<{ readonly fail?: boolean; readonly hold?: boolean }>) => {
            if (job.payload.fail === true) throw new NonRetryableError("mailbox gone")
            if (job.payload.hold === true) {
              holding.open()
              await held.opened
              reason = job.signal.reason
              // Ignores the abort and returns a value anyway.
              return "finished anyway"
            }
            await job.progress("x".repeat(70_000)).catch((error: unknown) => {
              reason = error
            })
            return "sent"
          }
        }
      }
    })
    await expect(jobs.email.add({ payload: {}, priority: 0.5 })).rejects.toThrow(RangeError)
    await expect(jobs.email.add({ payload: {}, priority: 0.5 })).rejects.toThrow("priority must be a safe integer")
    await expect(jobs.email.add({ id: "", payload: {} })).rejects.toThrow(TypeError)
    await expect(jobs.flow({ queue: "nope", payload: {} })).rejects.toThrow(`Unknown queue "nope"`)

    await jobs.email.add({ id: "big", payload: {} })
    await jobs.email.job("big").wait({ timeoutMs: 5_000 })
    expect(reason).toBeInstanceOf(RangeError)
    expect((reason as Error).message).toContain("progress is 70027 bytes")

    const flow = await jobs.flow({ queue: "report", id: "r", payload: {}, children: [{ queue: "email", id: "c", payload: { fail: true } }] })
    expect(flow).toEqual({ queue: "report", id: "r", children: [{ queue: "email", id: "c", children: [] }] })
    const parent = await jobs.report.job("r").wait({ timeoutMs: 5_000 })
    expect(parent).toMatchObject({ state: "failed", error: { name: "ChildJobFailedError" } })
    expect(parent?.error?.name).toBe(new ChildJobFailedError("x").name)
    expect((await jobs.email.get("c"))?.error).toEqual({ name: "NonRetryableError", message: "mailbox gone" })

    await jobs.email.add({ id: "held", payload: { hold: true } })
    // Running (active) when canceled: the handler said so.
    await holding.opened
    expect(await jobs.email.cancel("held", "not needed")).toBe(true)
    held.open()
    const canceled = await jobs.email.job("held").wait({ timeoutMs: 5_000 })
    expect(canceled).toMatchObject({ state: "canceled", attempt: 1 })
    expect((reason as Error).name).toBe(new JobCanceledError("x").name)
    expect((reason as Error).message).toBe(`Job "held" of queue "email" was canceled: not needed`)
  })

  it("flows across queues: the parent runs with its children's values", async () => {
    const context = await memoryContext()
    const jobs = new DurabilityJobs({
      context,
      log: quiet,
      queues: {
        email: { handler: async (job: DurableJob<string>) => `sent ${job.payload}` },
        report: { handler: async (job: DurableJob<null>) => await job.childrenValues() }
      }
    })
    await jobs.flow({ queue: "report", id: "r", payload: null, children: [{ queue: "email", id: "a", payload: "a" }, { queue: "email", id: "b", payload: "b" }] })
    const parent = await jobs.report.job("r").wait({ timeoutMs: 5_000 })
    expect(parent?.result).toEqual({
      a: { queue: "email", state: "completed", result: "sent a" },
      b: { queue: "email", state: "completed", result: "sent b" }
    })
  })

  it("pause, resume and dead letters through promises", async () => {
    const context = await memoryContext()
    let broken = true
    const jobs = new DurabilityJobs({
      context,
      log: quiet,
      queues: {
        email: {
          deadLetter: true,
          retries: { maxAttempts: 1 },
          handler: async () => {
            if (broken) throw new Error("bounced")
            return "ok"
          }
        }
      }
    })
    await jobs.email.pause()
    expect(await jobs.email.isPaused()).toBe(true)
    await jobs.email.add({ id: "a", payload: null })
    expect((await jobs.email.get("a"))?.state).toBe("waiting")
    await jobs.email.resume()
    expect((await jobs.email.job("a").wait({ timeoutMs: 5_000 }))?.state).toBe("failed")
    expect((await jobs.email.deadLetters.list()).items).toMatchObject([{ id: "a", attempts: 1, error: { name: "Error", message: "bounced" } }])
    broken = false
    expect(await jobs.email.deadLetters.redrive()).toBe(1)
    expect((await jobs.email.job("a").wait({ timeoutMs: 5_000 }))?.state).toBe("completed")
  })

  it("bulk by filter through promises: chunks with a cursor until done; a bad filter rejects naming the field", async () => {
    const context = await memoryContext()
    const jobs = new DurabilityJobs({ context, log: quiet, queues: { email: { handler: async () => "ok" } } })
    await jobs.email.pause()
    await jobs.email.addBulk(Array.from({ length: 5 }, (_, n) => ({ id: `old-${n}`, payload: n })))
    const chunks: Array<DurableJobBulkResult> = []
    let cursor: string | undefined
    do {
      const chunk = await jobs.bulk("cancel", { queue: "email", idPrefix: "old-", olderThanMs: 0 }, cursor === undefined ? { limit: 2 } : { limit: 2, cursor })
      chunks.push(chunk)
      cursor = chunk.cursor
    } while (cursor !== undefined)
    expect(chunks.map((chunk) => chunk.affected)).toEqual([2, 2, 1])
    expect((await jobs.email.counts()).canceled).toBe(5)
    await expect(jobs.bulk("cancel", { queue: "email", olderThanMs: -1 })).rejects.toThrow(RangeError)
    await expect(jobs.bulk("cancel", { queue: "nope" })).rejects.toThrow("filter.queue must name a queue of this object (email)")
    await expect(jobs.bulk("erase" as never, { queue: "email" })).rejects.toThrow(TypeError)
    const fresh = await memoryContext()
    expect(thrownBy(() => new DurabilityJobs({ context: fresh, queues: { bulk: { handler: () => 1 } } })).message).toBe(`"bulk" is reserved by DurabilityJobs`)
  })

  it("DurabilityJobs.migrate applies and reverts the jobs tables synchronously", async () => {
    const context = await memoryContext()
    const names = durabilityJobMigrations.map((migration) => migration.name)
    expect(names).toEqual([
      "durability_0005_create_jobs",
      "durability_0006_jobs_steps",
      "durability_0009_jobs_leases",
      "durability_0010_jobs_outbox",
      "durability_0011_jobs_queue_order",
      "durability_0012_jobs_retention_timer",
      "durability_0014_jobs_state_counts",
      "durability_0019_jobs_concurrency_keys",
      "durability_0020_jobs_cancel_on",
      "durability_0022_jobs_batches"
    ])
    const result = DurabilityJobs.migrate(context)
    expect(result).toEqual({ applied: names, rolledBack: [] })
    expect(jobTables(context.memory)).toEqual([
      "durability_job_buckets",
      "durability_job_dead_letters",
      "durability_job_dedup",
      "durability_job_logs",
      "durability_job_outbox",
      "durability_job_queues",
      "durability_jobs"
    ])
    expect(DurabilityJobs.migrate(context)).toEqual({ applied: [], rolledBack: [] })
    expect(DurabilityJobs.migrate(context, null)).toEqual({ applied: [], rolledBack: [...names].reverse() })
    expect(jobTables(context.memory)).toEqual([])
    expect(thrownBy(() => DurabilityJobs.migrate(context, "durability_9999_unknown")).name).toBe("MigrationError")
  })
})

describe("DurabilityJobs batched queues", () => {
  it("batchHandler takes the jobs added together and answers per job; the payload and result types follow it", async () => {
    const context = await memoryContext()
    const calls: Array<ReadonlyArray<string>> = []
    const jobs = new DurabilityJobs({
      context,
      onLifecycleEvent: quiet,
      queues: {
        resize: {
          batch: { size: 10 },
          retries: { maxAttempts: 1 },
          batchHandler: async (batch: ReadonlyArray<DurableBatchJob<{ readonly width: number }>>) => {
            calls.push(batch.map((job) => job.id))
            await batch[0]!.progress(50)
            return batch.map((job): DurableBatchOutcome<number> =>
              job.payload.width > 0 ? { ok: true, value: job.payload.width * 2 } : { ok: false, error: new RangeError(`${job.id}: no width`) })
          }
        }
      }
    })
    expectTypeOf(jobs.resize.add).parameter(0).toHaveProperty("payload").toEqualTypeOf<{ readonly width: number }>()
    await jobs.resize.addBulk([{ id: "a", payload: { width: 2 } }, { id: "b", payload: { width: 0 } }, { id: "c", payload: { width: 5 } }])
    const a = await jobs.resize.job("a").wait({ timeoutMs: 5_000 })
    const b = await jobs.resize.job("b").wait({ timeoutMs: 5_000 })
    const c = await jobs.resize.job("c").wait({ timeoutMs: 5_000 })
    expectTypeOf(a!.result).toEqualTypeOf<number | undefined>()
    expect(calls).toEqual([["a", "b", "c"]])
    expect([a?.state, a?.result, a?.progress]).toEqual(["completed", 4, 50])
    expect([b?.state, b?.error?.name, b?.error?.message]).toEqual(["failed", "RangeError", "b: no width"])
    expect([c?.state, c?.result]).toEqual(["completed", 10])
  })

  it("refuses a batch without batchHandler, a batchHandler with handler, and a bad size, naming the field", async () => {
    const context = await memoryContext()
    const batchHandler = () => []
    const cases: ReadonlyArray<readonly [() => unknown, new(...args: Array<never>) => Error, string]> = [
      [() => new DurabilityJobs({ context, queues: { q: { batch: { size: 2 } } } }), TypeError, "queues.q.batchHandler must be a function"],
      [() => new DurabilityJobs({ context, queues: { q: { batchHandler } } }), TypeError, "queues.q.batch is required"],
      [() => new DurabilityJobs({ context, queues: { q: { batchHandler, handler: () => 1, batch: { size: 2 } } } }), TypeError, "queues.q.handler"],
      [() => new DurabilityJobs({ context, queues: { q: { batchHandler, batch: { size: 0 } } } }), RangeError, "queues.q.batch.size"],
      [() => new DurabilityJobs({ context, queues: { q: { batchHandler, batch: { size: 2, waitMs: -5 } } } }), RangeError, "queues.q.batch.waitMs"]
    ]
    for (const [build, ErrorClass, text] of cases) {
      const error = thrownBy(build)
      expect(error, text).toBeInstanceOf(ErrorClass)
      expect(error.message, text).toContain(text)
    }
    expect(jobTables(context.memory)).toEqual([])
  })
})
