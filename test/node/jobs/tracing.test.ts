/**
 * The jobs' spans, captured by a hand-made tracer (`Tracer.make`) as a user's exporter would get them:
 * `Jobs.add` under the caller's span; per attempt a root `Jobs.run` (claim to handler end) with its
 * children `Jobs.claim`, the handler's own spans and `Jobs.settle` (handler end to commit, with the
 * outcome); their times from TestClock. With tracing off, no job span is made.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Option, TestClock, Tracer } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as Plain from "../../../src/shared/plain.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { type DurabilityContext, DurabilityJobs, DurabilityScheduler, type DurableJob } from "durability"
import { TestObjectState } from "durability/testing"

interface Recorded {
  readonly name: string
  readonly spanId: string
  readonly parent: string | undefined
  readonly attributes: ReadonlyMap<string, unknown>
  readonly startMs: number
  endMs: number | undefined
  exit: Exit.Exit<unknown, unknown> | undefined
}

/** A tracer that keeps every span it makes. */
const recordingTracer = () => {
  const spans: Array<Recorded> = []
  let ids = 0
  const tracer = Tracer.make({
    span: (name, parent, _context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      const recorded: Recorded = {
        name,
        spanId: `s${++ids}`,
        parent: Option.isSome(parent) ? parent.value.spanId : undefined,
        attributes,
        startMs: Number(startTime / 1_000_000n),
        endMs: undefined,
        exit: undefined
      }
      spans.push(recorded)
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: recorded.spanId,
        traceId: "t",
        parent,
        context: Context.empty(),
        get status(): Tracer.SpanStatus {
          return recorded.endMs === undefined
            ? { _tag: "Started", startTime }
            : { _tag: "Ended", startTime, endTime: BigInt(recorded.endMs) * 1_000_000n, exit: recorded.exit! }
        },
        attributes,
        links,
        sampled: true,
        kind,
        end: (endTime, exit) => {
          recorded.endMs = Number(endTime / 1_000_000n)
          recorded.exit = exit
        },
        attribute: (key, value) => void attributes.set(key, value),
        event: () => undefined,
        addLinks: () => undefined
      }
      return span
    },
    context: (f) => f()
  })
  const named = (name: string) => spans.filter((span) => span.name === name)
  const byId = (id: string | undefined) => spans.find((span) => span.spanId === id)
  return { tracer, spans, named, byId }
}

const attrs = (span: Recorded | undefined) => Object.fromEntries(span?.attributes ?? [])

describe("jobs spans", () => {
  it.scoped("an add under the caller's span; an attempt's Jobs.run with Jobs.claim, the handler's spans and Jobs.settle", () => {
    const traced = recordingTracer()
    return Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        "traced-a": Jobs.queue({
          handler: (job: Jobs.JobContext<string>) =>
            Effect.sleep(100).pipe(Effect.as(job.payload), Effect.withSpan("send", { attributes: { to: job.payload } }))
        })
      }))
      yield* TestClock.adjust(50)
      yield* object.run(jobs["traced-a"].add({ id: "a", payload: "x@y" }).pipe(Effect.withSpan("request")))
      yield* TestClock.adjust(100)

      const [add] = traced.named("Jobs.add")
      expect(traced.byId(add?.parent)?.name).toBe("request")
      expect(attrs(add)).toEqual({ "job.queue": "traced-a", "job.id": "a" })

      const [run] = traced.named("Jobs.run")
      expect(run?.parent).toBeUndefined()
      expect(attrs(run)).toEqual({ "job.queue": "traced-a", "job.id": "a", "job.attempt": 1 })
      expect({ start: run?.startMs, end: run?.endMs, ok: run?.exit !== undefined && Exit.isSuccess(run.exit) }).toEqual({
        start: 50,
        end: 150,
        ok: true
      })
      const children = traced.spans.filter((span) => span.parent === run?.spanId)
      expect(children.map((span) => span.name)).toEqual(["Jobs.claim", "send", "Jobs.settle"])
      const [claim, send, settle] = children
      expect(attrs(claim)).toEqual({ "job.queue": "traced-a", "job.id": "a", "job.attempt": 1 })
      expect([claim?.startMs, claim?.endMs]).toEqual([50, 50])
      expect(attrs(send)).toEqual({ to: "x@y" })
      expect([send?.startMs, send?.endMs]).toEqual([50, 150])
      expect(attrs(settle)).toEqual({ "job.queue": "traced-a", "job.id": "a", "job.attempt": 1, "job.outcome": "completed" })
      expect([settle?.startMs, settle?.endMs]).toEqual([150, 150])
    }).pipe(Effect.withTracer(traced.tracer))
  })

  it.scoped("a retried attempt: its Jobs.run ends with the failure and its Jobs.settle says retried; the next attempt is a span of its own", () => {
    const traced = recordingTracer()
    return Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        "traced-b": Jobs.queue({
          retries: { maxAttempts: 2, delay: () => 1_000 },
          handler: (job: Jobs.JobContext<number>) => job.attempt === 1 ? Effect.fail(new Error("first")) : Effect.succeed(job.payload)
        })
      }))
      yield* object.run(jobs["traced-b"].addBulk([{ id: "b", payload: 1 }]))
      yield* TestClock.adjust(1_000)
      expect(traced.named("Jobs.addBulk").map(attrs)).toEqual([{ "job.queue": "traced-b", "job.count": 1 }])
      const runs = traced.named("Jobs.run")
      expect(runs.map((run) => [attrs(run)["job.attempt"], run.startMs, run.exit !== undefined && Exit.isSuccess(run.exit)])).toEqual([
        [1, 0, false],
        [2, 1_000, true]
      ])
      const settles = traced.named("Jobs.settle")
      expect(settles.map((settle) => [traced.byId(settle.parent)?.spanId, attrs(settle)["job.outcome"]])).toEqual([
        [runs[0]!.spanId, "retried"],
        [runs[1]!.spanId, "completed"]
      ])
    }).pipe(Effect.withTracer(traced.tracer))
  })

  it.scoped("the promise face's plain handler: a Jobs.run and its Jobs.settle, with no fiber of its own", () => {
    const traced = recordingTracer()
    return Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        "traced-plain": Plain.withPlain(Jobs.queue({ handler: () => Effect.succeed(0) }), () => 7)
      }))
      yield* object.run(jobs["traced-plain"].add({ id: "p", payload: null }))
      yield* TestClock.adjust(0)
      const [run] = traced.named("Jobs.run")
      expect(attrs(run)).toEqual({ "job.queue": "traced-plain", "job.id": "p", "job.attempt": 1 })
      expect(run?.exit !== undefined && Exit.isSuccess(run.exit)).toBe(true)
      expect(traced.spans.filter((span) => span.parent === run?.spanId).map((span) => span.name)).toEqual(["Jobs.claim", "Jobs.settle"])
    }).pipe(Effect.withTracer(traced.tracer))
  })

  it.scoped("tracing off (Effect.withTracerEnabled(false)): no job span", () => {
    const traced = recordingTracer()
    return Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({ "traced-off": Jobs.queue({ handler: () => Effect.void }) }))
      yield* object.run(jobs["traced-off"].add({ id: "o", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs["traced-off"].get("o"))).toMatchObject({ state: "completed" })
      expect(traced.spans.filter((span) => span.name.startsWith("Jobs."))).toEqual([])
    }).pipe(Effect.withTracerEnabled(false), Effect.withTracer(traced.tracer))
  })
})

describe("jobs spans on the promise face", () => {
  it("DurabilityScheduler's tracer: an add's Jobs.add, and the attempt the alarm starts after an eviction makes its Jobs.run", async () => {
    const traced = recordingTracer()
    const state = await TestObjectState.make()
    const build = (context: DurabilityContext) => {
      const scheduler = new DurabilityScheduler({ context, tracer: traced.tracer })
      return new DurabilityJobs({ scheduler, queues: { mail: { handler: (job: DurableJob<string>) => job.payload.length } } })
    }
    const jobs = build(state.context)
    await jobs.mail.add({ id: "later", payload: "x@y", delayMs: 1_000 })
    expect(attrs(traced.named("Jobs.add")[0])).toEqual({ "job.queue": "mail", "job.id": "later" })
    // The delayed job is run by the new instance's alarm: its runtime carries the tracer too.
    const next = await state.restart()
    const again = build(next.context)
    // Its alarm (whenever the old instance set it) comes within the minute.
    await next.advance("1 minute")
    expect(await again.mail.get("later")).toMatchObject({ state: "completed", result: 3 })
    const [run] = traced.named("Jobs.run")
    expect(attrs(run)).toEqual({ "job.queue": "mail", "job.id": "later", "job.attempt": 1 })
    expect(traced.spans.filter((span) => span.parent === run?.spanId).map((span) => span.name)).toEqual(["Jobs.claim", "Jobs.settle"])
  })

  it("a tracer that is not one is refused; a second scheduler over the object with another tracer throws", async () => {
    const state = await TestObjectState.make()
    expect(() => new DurabilityScheduler({ context: state.context, tracer: {} as Tracer.Tracer })).toThrow(TypeError)
    const first = recordingTracer().tracer
    const scheduler = new DurabilityScheduler({ context: state.context, tracer: first })
    expect(new DurabilityScheduler({ context: state.context, tracer: first })).toBe(scheduler)
    expect(() => new DurabilityScheduler({ context: state.context, tracer: recordingTracer().tracer })).toThrow(/another tracer/)
  })
})
