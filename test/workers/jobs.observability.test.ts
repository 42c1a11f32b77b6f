/**
 * The job queues' observability in workerd (real SQLite storage, real alarms), through `JobsObject`
 * (the promise face): `JobsMetrics` counted in the object's isolate as its jobs complete, retry, fail
 * and are dead-lettered, and the inspector overview's rates, read from storage, the same after a
 * forced reset of the object. Spans, on the Effect face as docs/observability.md builds it: a runtime
 * of the object's own with the tracer provided under the scheduler's layer, so even an attempt the
 * engine's own timer starts is traced.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { Context, Effect, Layer, ManagedRuntime, Metric, Option, Tracer } from "effect"
import { describe, expect, it } from "vitest"
import { answerInspection } from "../../src/facade/answerInspection.js"
import * as Jobs from "../../src/jobs/Jobs.js"
import * as JobsMetrics from "../../src/jobs/JobsMetrics.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import type { JobsObject, QueueName } from "./objects/JobsObject.js"
import { expectIdle, finishedRow, freshJobs, type Jobs as JobsStub, reset, waitFor } from "./support/jobs.js"

const COUNTERS = ["added", "started", "completed", "retried", "failed", "deadLettered"] as const
type Counts = Record<(typeof COUNTERS)[number], number>

/** The queue's counters, read where its jobs run (Effect's metric registry is per isolate). */
const countsOf = (jobs: JobsStub, queue: QueueName): Promise<Counts> =>
  runInDurableObject(jobs.stub, () =>
    Effect.runSync(Effect.map(
      Effect.forEach(COUNTERS, (name) =>
        Effect.map(Metric.value(Metric.tagged(JobsMetrics[name], JobsMetrics.QUEUE_TAG, queue)), (state) => [name, state.count] as const)),
      (entries) => Object.fromEntries(entries) as Counts
    )))

const minus = (after: Counts, before: Counts): Counts =>
  Object.fromEntries(COUNTERS.map((name) => [name, after[name] - before[name]])) as Counts

const ratesOf = async (jobs: JobsStub) => {
  const answer = await runInDurableObject(jobs.stub, (instance: JobsObject) => answerInspection(instance.scheduler, { _tag: "Overview" }))
  if (!answer.ok) throw new Error(`overview failed: ${JSON.stringify(answer.failure)}`)
  const { jobs: overview } = answer.value as { readonly jobs: { readonly queues: ReadonlyArray<{ readonly name: string; readonly rates: unknown }> } }
  return Object.fromEntries(overview.queues.map((queue) => [queue.name, queue.rates]))
}

describe("jobs observability in workerd", () => {
  it("metrics count each job's life after its commits: completed, retried then completed, failed for good and dead-lettered", async () => {
    const jobs = freshJobs()
    const plainBefore = await countsOf(jobs, "plain")
    const flakyBefore = await countsOf(jobs, "flaky")
    await jobs.stub.add("plain", { id: "p", payload: { tag: "p" } })
    await jobs.stub.add("flaky", { id: "again", payload: { failTimes: 1 } })
    await jobs.stub.add("flaky", { id: "fatal", payload: { fatal: true } })
    await finishedRow(jobs, "p")
    await finishedRow(jobs, "again", "flaky")
    await finishedRow(jobs, "fatal", "flaky")

    // Counted once each end committed (the settle's event): waited for, not slept on.
    const plain = await waitFor(async () => minus(await countsOf(jobs, "plain"), plainBefore), (delta) => delta.completed === 1)
    expect(plain).toEqual({ added: 1, started: 1, completed: 1, retried: 0, failed: 0, deadLettered: 0 })
    const flaky = await waitFor(async () => minus(await countsOf(jobs, "flaky"), flakyBefore), (delta) => delta.completed + delta.failed === 2)
    expect(flaky).toEqual({ added: 2, started: 3, completed: 1, retried: 1, failed: 1, deadLettered: 1 })
    await expectIdle(jobs)
  })

  it("the overview's rates come from the rows: the same after a forced reset of the object", async () => {
    const jobs = freshJobs()
    await jobs.stub.add("plain", { id: "a", payload: {} })
    await jobs.stub.add("plain", { id: "b", payload: {} })
    await jobs.stub.add("flaky", { id: "f", payload: { fatal: true } })
    await finishedRow(jobs, "a")
    await finishedRow(jobs, "b")
    await finishedRow(jobs, "f", "flaky")
    const before = await ratesOf(jobs)
    expect(before).toMatchObject({
      plain: { windowMs: 300_000, completed: 2, failed: 0 },
      flaky: { windowMs: 300_000, completed: 0, failed: 1 },
      ordered: { completed: 0, failed: 0 }
    })
    await reset(jobs)
    expect(await ratesOf(jobs)).toEqual(before)
    await expectIdle(jobs)
  })

  it("spans with the tracer under the scheduler's layer: an eager attempt and one the engine's timer starts, each with its children", async () => {
    const bare = env.STORAGE_OBJECT.get(env.STORAGE_OBJECT.newUniqueId())
    await runInDurableObject(bare, async (_instance, state) => {
      const spans: Array<{ readonly name: string; readonly spanId: string; readonly parent: string | undefined; readonly attributes: Map<string, unknown> }> = []
      const tracer = Tracer.make({
        span: (name, parent, _context, links, startTime, kind) => {
          const attributes = new Map<string, unknown>()
          const spanId = `s${spans.length + 1}`
          spans.push({ name, spanId, parent: Option.isSome(parent) ? parent.value.spanId : undefined, attributes })
          let status: Tracer.SpanStatus = { _tag: "Started", startTime }
          return {
            _tag: "Span", name, spanId, traceId: "t", parent, context: Context.empty(), attributes, links, sampled: true, kind,
            get status() {
              return status
            },
            end: (endTime, exit) => void (status = { _tag: "Ended", startTime, endTime, exit }),
            attribute: (key, value) => void attributes.set(key, value),
            event: () => undefined,
            addLinks: () => undefined
          }
        },
        context: (f) => f()
      })
      const runtime = ManagedRuntime.make(
        Scheduler.layerDurableObject(state, { liveTimers: true }).pipe(Layer.provide(Layer.setTracer(tracer)))
      )
      try {
        const jobs = await runtime.runPromise(Effect.gen(function*() {
          yield* (yield* Scheduler.Scheduler).warm
          return yield* Jobs.make({
            traced: Jobs.queue({ handler: (job: Jobs.JobContext<number>) => Effect.succeed(job.payload).pipe(Effect.withSpan("handler")) })
          })
        }))
        await runtime.runPromise(jobs.traced.add({ id: "now", payload: 1 }))
        await runtime.runPromise(jobs.traced.add({ id: "later", payload: 2, delayMs: 300 }))
        expect(await runtime.runPromise(jobs.traced.wait("later", { timeoutMs: 10_000 }))).toMatchObject({ state: "completed" })
        const settled = (id: string) =>
          spans.some((span) => span.name === "Jobs.settle" && span.attributes.get("job.id") === id)
        await waitFor(async () => spans.length, () => settled("now") && settled("later"))
        for (const id of ["now", "later"]) {
          const run = spans.find((span) => span.name === "Jobs.run" && span.attributes.get("job.id") === id)
          expect(run?.parent).toBeUndefined()
          expect(spans.filter((span) => span.parent === run?.spanId).map((span) => span.name)).toEqual(["Jobs.claim", "handler", "Jobs.settle"])
        }
        expect(spans.filter((span) => span.name === "Jobs.add").map((span) => span.attributes.get("job.id"))).toEqual(["now", "later"])
      } finally {
        await runtime.dispose()
      }
    })
  })
})
