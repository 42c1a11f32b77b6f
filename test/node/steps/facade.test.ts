/**
 * Durable steps on the promise face: `call.step(name, fn, { result? })` in `Durability` handlers and
 * `job.step(...)` in `DurabilityJobs` handlers, on `TestObjectState` (the object's clock moved by the
 * test). The stored result comes back on the retry and after an eviction without calling `fn`;
 * step errors are `DurableStepError`s, a rejection of `fn` is the step's rejection.
 */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import {
  Durability,
  DurabilityJobs,
  type DurableCall,
  type DurableJob,
  DurableStepError,
  NonRetryableError
} from "../../../src/index.js"
import * as TestObjectState from "../../../src/testing/TestObjectState.js"

const memoRows = (state: TestObjectState.TestObjectState) =>
  state.storage.sql.exec("SELECT capability, record_key, name, value FROM durability_steps ORDER BY record_key, name").toArray()

const quiet = () => undefined

describe("call.step (Durability)", () => {
  it("stores the first result and returns it on the retry without calling fn; the memos go with the completion", async () => {
    const state = await TestObjectState.make()
    const calls: Array<string> = []
    const durability = new Durability({
      context: state.context,
      log: quiet,
      retries: { maxAttempts: 3, delay: () => 1_000 },
      handlers: {
        pay: async (call: DurableCall<{ readonly cents: number }>) => {
          const charge = await call.step("charge", async () => {
            calls.push(`charge#${call.attempt}`)
            return { chargeId: `ch-${call.attempt}`, cents: call.payload.cents }
          })
          if (call.attempt === 1) throw new Error("receipt mailer down")
          const mailed = await call.step("mail", () => (calls.push(`mail#${call.attempt}`), true))
          return { charge, mailed }
        }
      }
    })
    await durability.pay({ id: "inv-1", payload: { cents: 500 } })
    await state.advance(0)
    expect(calls).toEqual(["charge#1"])
    expect(memoRows(state)).toEqual([
      { capability: "operations", record_key: "inv-1", name: "charge", value: JSON.stringify({ kind: "value", value: { chargeId: "ch-1", cents: 500 } }) }
    ])
    await state.advance("1 second")
    expect(calls).toEqual(["charge#1", "mail#2"])
    expect(await durability.pay.getResult("inv-1")).toEqual({
      status: "completed",
      result: { charge: { chargeId: "ch-1", cents: 500 }, mailed: true }
    })
    expect(memoRows(state)).toEqual([])
  })

  it("after an eviction mid-handler, the next instance's attempt gets the stored result", async () => {
    const first = await TestObjectState.make()
    const calls: Array<string> = []
    const build = (state: TestObjectState.TestObjectState, hang: boolean) =>
      new Durability({
        context: state.context,
        log: quiet,
        handlers: {
          ship: async (call: DurableCall<null>) => {
            const label = await call.step("label", () => (calls.push(`label#${call.attempt}`), `label-${call.attempt}`))
            if (hang) await new Promise<never>(() => undefined)
            return label
          }
        }
      })
    await build(first, true).ship({ id: "order-1", payload: null })
    await first.advance(0)
    const second = await first.restart()
    const durability = build(second, false)
    await second.advance("15 seconds")
    expect(calls).toEqual(["label#1"])
    expect(await durability.ship.getResult("order-1")).toEqual({ status: "completed", result: "label-1" })
  })

  it("a result schema round-trips a Date; fn's rejection is the step's and is not stored", async () => {
    const state = await TestObjectState.make()
    const seen: Array<unknown> = []
    let failures = 1
    const durability = new Durability({
      context: state.context,
      log: quiet,
      retries: { maxAttempts: 3, delay: () => 1_000 },
      handlers: {
        stamp: async (call: DurableCall<null>) => {
          const at = await call.step("at", async () => new Date(86_400_000 + call.attempt), { result: Schema.Date })
          seen.push(at)
          const flaky = await call.step("flaky", async () => {
            if (failures-- > 0) throw new TypeError("not yet")
            return "ok"
          }).catch((error: unknown) => {
            seen.push(error)
            throw error
          })
          return `${at.toISOString()} ${flaky}`
        }
      }
    })
    await durability.stamp({ id: "s", payload: null })
    await state.advance(0)
    expect(seen[1]).toBeInstanceOf(TypeError)
    expect(memoRows(state).map((row) => row.name)).toEqual(["at"])
    await state.advance("1 second")
    expect(seen[2]).toBeInstanceOf(Date)
    expect(seen[2]).toEqual(new Date(86_400_001))
    expect(await durability.stamp.getResult("s")).toEqual({ status: "completed", result: "1970-01-02T00:00:00.001Z ok" })
  })

  it("a name used twice in one attempt rejects with DurableStepError; let through, it fails the call for good", async () => {
    const state = await TestObjectState.make()
    const errors: Array<unknown> = []
    const durability = new Durability({
      context: state.context,
      log: quiet,
      retries: { maxAttempts: 3, delay: () => 1_000 },
      handlers: {
        twice: async (call: DurableCall<null>) => {
          await call.step("fetch", () => 1)
          return call.step("fetch", () => 2).catch((error: unknown) => {
            errors.push(error)
            throw error
          })
        }
      }
    })
    await durability.twice({ id: "t", payload: null })
    await state.advance("10 seconds")
    expect(errors).toHaveLength(1)
    expect(errors[0]).toBeInstanceOf(DurableStepError)
    expect(errors[0]).toMatchObject({ name: "DurableStepError", message: expect.stringContaining("Step \"fetch\" is used twice") })
    expect(await durability.twice.getResult("t")).toMatchObject({ status: "failed", attempt: 1, error: { name: "DurableStepError" } })
  })

  it("a result that is not JSON (from untyped code) rejects with DurableStepError naming the step", async () => {
    const state = await TestObjectState.make()
    const errors: Array<unknown> = []
    const durability = new Durability({
      context: state.context,
      log: quiet,
      handlers: {
        bad: async (call: DurableCall<null>) => {
          const untyped = call.step as unknown as (name: string, fn: () => unknown) => Promise<unknown>
          await untyped("big-int", () => 10n).catch((error: unknown) => errors.push(error))
          // A non-JSON value with a schema that encodes it is fine.
          return call.step("count", async () => 10n, { result: Schema.BigInt }).then(String)
        }
      }
    })
    await durability.bad({ id: "b", payload: null })
    await state.advance(0)
    expect(errors).toMatchObject([{ name: "DurableStepError", message: "The result of step \"big-int\" is not JSON-serializable: result is a BigInt (give the step a result schema that encodes it to JSON)" }])
    expect(await durability.bad.getResult("b")).toEqual({ status: "completed", result: "10" })
  })
})

describe("job.step (DurabilityJobs)", () => {
  it("stores the first result and returns it on the retry without calling fn; the memos go with the job's end", async () => {
    const state = await TestObjectState.make()
    const calls: Array<string> = []
    const jobs = new DurabilityJobs({
      context: state.context,
      log: quiet,
      queues: {
        render: {
          retries: { maxAttempts: 3, delay: () => 1_000 },
          handler: async (job: DurableJob<string>) => {
            const file = await job.step("render", async () => (calls.push(`render#${job.attempt}`), `${job.payload}.pdf`))
            if (job.attempt === 1) throw new Error("upload failed")
            if (job.attempt === 2) throw new NonRetryableError("the bucket is gone")
            return file
          }
        }
      }
    })
    await jobs.render.add({ id: "r", payload: "invoice" })
    await state.advance(0)
    expect(memoRows(state)).toMatchObject([{ capability: "jobs", record_key: "render/r", name: "render" }])
    await state.advance("1 second")
    expect(calls).toEqual(["render#1"])
    expect(await jobs.render.get("r")).toMatchObject({ state: "failed", attempt: 2, error: { name: "NonRetryableError" } })
    expect(memoRows(state)).toEqual([])
  })

  it("a job's step errors are DurableStepErrors", async () => {
    const state = await TestObjectState.make()
    const errors: Array<unknown> = []
    const jobs = new DurabilityJobs({
      context: state.context,
      log: quiet,
      queues: {
        work: {
          handler: async (job: DurableJob<null>) => {
            await job.step("", () => 1).catch((error: unknown) => errors.push(error))
            return job.step("ok", () => "fine")
          }
        }
      }
    })
    await jobs.work.add({ id: "w", payload: null })
    await state.advance(0)
    expect(errors).toMatchObject([{ name: "DurableStepError", message: "A step name must be a non-empty string of at most 512 characters, got \"\"" }])
    expect(errors[0]).toBeInstanceOf(DurableStepError)
    expect(await jobs.work.get("w")).toMatchObject({ state: "completed", result: "fine" })
  })
})
