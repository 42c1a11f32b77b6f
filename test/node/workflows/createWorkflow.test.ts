/**
 * `createWorkflow(ctx, handler)`, the reference's one-instance-per-object API over DurabilityWorkflows, under
 * the test kit's clock: the reference's ReportWorkflow example unchanged (parallel steps, a 2 s sleep, a final
 * step), the status state machine, `start` deduplicated, the step config's RangeErrors, and retries on the
 * reference's backoff formula with `limit` counting every attempt.
 */
import { describe, expect, it } from "vitest"
import { type AlarmInvocationInfo, createWorkflow, type DurableWorkflowStepContext, NonRetryableError } from "durability"
import { TestObjectState } from "durability/testing"

type Context = TestObjectState.TestObjectState["context"]

const stepRows = (state: TestObjectState.TestObjectState) =>
  state.storage.sql.exec("SELECT seq, name, kind, status, attempt FROM durability_workflow_steps ORDER BY seq").toArray()

// The reference's example object, as a user writes it (a DurableObject's ctx is the test kit's context here).
class ReportWorkflow {
  readonly fetched: Array<string> = []
  readonly workflow

  constructor(readonly ctx: Context) {
    this.workflow = createWorkflow(ctx, async (event: { payload: { reportId: string } }, step) => {
      const [orders, refunds] = await Promise.all([
        step.do("load orders", async () => {
          this.fetched.push("orders")
          return 42
        }),
        step.do("load refunds", async () => {
          this.fetched.push("refunds")
          return 2
        })
      ])
      await step.sleep("cool down", 2_000)
      return step.do("publish report", async () => {
        this.fetched.push("publish")
        return { reportId: event.payload.reportId, net: orders - refunds }
      })
    })
  }

  start(reportId: string) {
    return this.workflow.start({ reportId })
  }

  status() {
    return this.workflow.status()
  }

  alarm(info?: AlarmInvocationInfo) {
    return this.workflow.alarm(info)
  }
}

describe("createWorkflow", () => {
  it("runs the reference's ReportWorkflow: parallel steps in call order, a 2 s sleep on the alarm, a final step", async () => {
    const state = await TestObjectState.make({ startTime: 10_000 })
    const report = new ReportWorkflow(state.context)
    expect(await report.status()).toEqual({ status: "not_started" })
    await report.start("r-1")
    expect((await report.status()).status).toMatch(/^(running|sleeping)$/)
    await state.advance(0)
    expect(report.fetched).toEqual(["orders", "refunds"])
    expect(await report.status()).toEqual({ status: "sleeping", wakeAt: 12_000 })
    expect(stepRows(state)).toEqual([
      { seq: 1, name: "load orders", kind: "do", status: "completed", attempt: 1 },
      { seq: 2, name: "load refunds", kind: "do", status: "completed", attempt: 1 },
      { seq: 3, name: "cool down", kind: "sleep", status: "waiting", attempt: 0 }
    ])
    // The physical alarm is never earlier than the scheduler's min delay (15 s); an early timer wakes it at 12 s.
    expect(state.storage.alarmAt).toBe(10_000 + 15_000)

    await state.advance(1_999)
    expect((await report.status()).status).toBe("sleeping")
    await state.advance(1)
    expect(await report.status()).toEqual({ status: "complete", result: { reportId: "r-1", net: 40 } })
    expect(report.fetched).toEqual(["orders", "refunds", "publish"])
  })

  it("finishes after an eviction from storage alone, woken by the physical alarm, without running a step twice", async () => {
    const state = await TestObjectState.make({ startTime: 10_000 })
    const report = new ReportWorkflow(state.context)
    await report.start("r-2")
    await state.advance(0)
    expect(await report.status()).toEqual({ status: "sleeping", wakeAt: 12_000 })
    const next = await state.restart()
    const again = new ReportWorkflow(next.context)
    // Nothing runs the evicted object's early timer: the platform's alarm (at most 15 s after the commit) does.
    expect(await next.fireAlarm()).toBe(true)
    expect(next.now()).toBe(25_000)
    expect(await again.status()).toEqual({ status: "complete", result: { reportId: "r-2", net: 40 } })
    expect([...report.fetched, ...again.fetched]).toEqual(["orders", "refunds", "publish"])
  })

  it("deduplicates start: the first payload wins and the handler's event carries it", async () => {
    const state = await TestObjectState.make({ startTime: 5_000 })
    const seen: Array<unknown> = []
    const workflow = createWorkflow(state.context, async (event: { payload: { n: number }; timestamp: Date; instanceId: string }, step) => {
      seen.push({ payload: event.payload, at: event.timestamp.getTime(), id: typeof event.instanceId })
      return step.do("double", () => event.payload.n * 2)
    })
    await workflow.start({ n: 1 })
    await workflow.start({ n: 2 })
    await state.advance(0)
    await workflow.start({ n: 3 })
    await state.advance(0)
    expect(await workflow.status()).toEqual({ status: "complete", result: 2 })
    expect(seen).toEqual([{ payload: { n: 1 }, at: 5_000, id: "string" }])
    expect(state.storage.sql.exec("SELECT count(*) AS n FROM durability_workflows").toArray()).toEqual([{ n: 1 }])
  })

  it("reports errored with the step's error once its attempts are used up, or at once on NonRetryableError", async () => {
    const state = await TestObjectState.make()
    const workflow = createWorkflow(state.context, async (_event, step) => {
      await step.do("fatal", () => {
        throw new NonRetryableError("card declined")
      })
    })
    await workflow.start(undefined)
    await state.advance(0)
    expect(await workflow.status()).toEqual({ status: "errored", error: { name: "NonRetryableError", message: "card declined" } })
  })

  it("rejects a bad step config or sleep with a RangeError, before any attempt", async () => {
    const state = await TestObjectState.make()
    const errors: Array<string> = []
    let ran = 0
    const configs: Array<unknown> = [
      { retries: { limit: 0, delay: 0 } },
      { retries: { limit: 10_001, delay: 0 } },
      { retries: { limit: 1.5, delay: 0 } },
      { retries: { limit: 2, delay: -1 } },
      { retries: { limit: 2, delay: 0.5 } },
      { retries: { limit: 2, delay: 0, backoff: "random" } },
      { timeout: 0 },
      { timeout: Number.MAX_SAFE_INTEGER + 2 }
    ]
    const workflow = createWorkflow(state.context, async (_event, step) => {
      for (const [i, config] of configs.entries()) {
        await step.do(`bad ${i}`, config as never, () => ran++).catch((error: Error) => errors.push(error.name))
      }
      await step.sleep("negative", -1).catch((error: Error) => errors.push(error.name))
      await step.sleep("fraction", 1.5).catch((error: Error) => errors.push(error.name))
      // The edges are accepted: 1 and 10 000 attempts, no delay.
      await step.do("one attempt", { retries: { limit: 1, delay: 0 } }, () => ran++)
      await step.do("most attempts", { retries: { limit: 10_000, delay: 0, backoff: "constant" } }, () => ran++)
      return "done"
    })
    await workflow.start({})
    await state.advance(0)
    expect(errors).toEqual(Array(configs.length + 2).fill("RangeError"))
    expect(ran).toBe(2)
    expect(await workflow.status()).toEqual({ status: "complete", result: "done" })
  })

  it("retries on the reference's formula: limit counts every attempt, delay × 1 | n | 2^(n−1)", async () => {
    const state = await TestObjectState.make()
    const times: Record<string, Array<number>> = { constant: [], linear: [], exponential: [] }
    const contexts: Array<DurableWorkflowStepContext> = []
    const workflow = createWorkflow(state.context, async (_event, step) => {
      const results: Array<string> = []
      for (const backoff of ["constant", "linear", "exponential"] as const) {
        const outcome = await step.do(backoff, { retries: { limit: 4, delay: 1_000, backoff } }, (context) => {
          times[backoff]!.push(state.now())
          if (backoff === "exponential") contexts.push(context)
          throw new Error(`${backoff} down (attempt ${context.attempt})`)
        }).catch((error: Error) => error.message)
        results.push(outcome)
      }
      return results
    })
    await workflow.start(null)
    await state.advance(0)
    // While a retry waits, the instance is sleeping until it.
    expect(await workflow.status()).toEqual({ status: "sleeping", wakeAt: 1_000 })
    await state.advance("1 minute")
    expect(times.constant).toEqual([0, 1_000, 2_000, 3_000])
    const linear0 = times.linear![0]!
    expect(times.linear!.map((t) => t - linear0)).toEqual([0, 1_000, 3_000, 6_000])
    const exponential0 = times.exponential![0]!
    expect(times.exponential!.map((t) => t - exponential0)).toEqual([0, 1_000, 3_000, 7_000])
    expect(await workflow.status()).toEqual({
      status: "complete",
      result: ["constant down (attempt 4)", "linear down (attempt 4)", "exponential down (attempt 4)"]
    })
    expect(contexts.map(({ attempt, config, signal, step }) => ({ attempt, config, aborted: signal.aborted, step }))).toEqual(
      [1, 2, 3, 4].map((attempt) => ({
        attempt,
        config: { retries: { limit: 4, delay: 1_000, backoff: "exponential" }, timeout: 600_000 },
        aborted: false,
        step: { count: 1, name: "exponential" }
      }))
    )
  })

  it("counts do steps of one name, applies the defaults, and aborts a timed-out attempt", async () => {
    const state = await TestObjectState.make()
    const seen: Array<{ count: number; attempt: number; limit: number; delay: number; timeout: number }> = []
    const aborted: Array<string> = []
    const workflow = createWorkflow(state.context, async (_event, step) => {
      for (let i = 0; i < 2; i++) {
        await step.do("poll", ({ attempt, config, step: info }) => {
          seen.push({ count: info.count, attempt, limit: config.retries.limit, delay: config.retries.delay, timeout: config.timeout })
        })
      }
      return step.do("slow", { retries: { limit: 2, delay: 0 }, timeout: 500 }, ({ attempt, signal }) =>
        new Promise<string>((resolve) => {
          if (attempt === 2) resolve("second attempt")
          signal.addEventListener("abort", () => aborted.push((signal.reason as Error).name))
        }))
    })
    await workflow.start(1)
    await state.advance(500)
    expect(seen).toEqual([
      { count: 1, attempt: 1, limit: 5, delay: 10_000, timeout: 600_000 },
      { count: 2, attempt: 1, limit: 5, delay: 10_000, timeout: 600_000 }
    ])
    expect(aborted).toEqual(["WorkflowStepTimeoutError"])
    expect(await workflow.status()).toEqual({ status: "complete", result: "second attempt" })
  })
})
