/**
 * The jobs' spans, made only when the object's runtime has a tracer of the user's (e.g. the one
 * `@effect/opentelemetry` provides): with Effect's own tracer in place (nothing exported), no span is
 * made and an attempt pays one fiber-ref lookup.
 *
 * An attempt run here is a root span `Jobs.run` (from its claim to its handler's end; the handler's
 * own spans are its children), with a child `Jobs.claim` (from the claim's clock reading to the
 * handler's start) and a child `Jobs.settle` (from the handler's end to the settle's commit, told by
 * the engine's event). Adds are `Jobs.add` and `Jobs.addBulk` spans, children of the caller's span.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as Option from "effect/Option"
import type * as Runtime from "effect/Runtime"
import * as Tracer from "effect/Tracer"

/** Effect's own tracer: in place, spans would go nowhere, so none are made. */
const NATIVE: Tracer.Tracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/** A tracer of the user's, with the clock its spans' times are read from. */
export interface Tracing {
  readonly tracer: Tracer.Tracer
  readonly clock: Clock.Clock
}

/** The tracer of `runtime` when it is one of the user's (and tracing is on), else `undefined`. */
export const of = (runtime: Runtime.Runtime<never>): Tracing | undefined => {
  const services = FiberRefs.getOrDefault(runtime.fiberRefs, DefaultServices.currentServices)
  const tracer = Context.get(services, Tracer.Tracer)
  if (tracer === NATIVE || !FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentTracerEnabled)) return undefined
  return { tracer, clock: Context.get(services, Clock.Clock) }
}

const nanos = (ms: number): bigint => BigInt(Math.round(ms)) * 1_000_000n

/** The attributes every job span has: which job, which attempt. */
const describe = (span: Tracer.Span, queue: string, id: string, attempt: number): void => {
  span.attribute("job.queue", queue)
  span.attribute("job.id", id)
  span.attribute("job.attempt", attempt)
}

/** One attempt's open span, until its settle is told. */
export interface Attempt {
  readonly tracing: Tracing
  readonly span: Tracer.Span
  readonly queue: string
  readonly id: string
  readonly attempt: number
  /** When the handler ended (nanoseconds), once it did. */
  endedAt: bigint | undefined
}

/** The attempts of this object with an open span, by key (one attempt per key runs at a time). */
export type Spans = Map<string, Attempt>

/**
 * Attempts kept waiting for their settle's event: one whose settle never matched (a stale attempt, an
 * eviction's leftovers) tells none, so the oldest go past this bound (their `Jobs.run` was exported anyway).
 */
const MAX_OPEN = 1_000

/**
 * Opens the attempt's `Jobs.run` span (and its `Jobs.claim`) as the handler starts; returns it, to end
 * with `ended`.
 */
export const started = (
  spans: Spans,
  tracing: Tracing,
  job: { readonly key: string; readonly queue: string; readonly id: string; readonly attempt: number; readonly claimedAt: number | undefined }
): Attempt => {
  const { clock, tracer } = tracing
  const now = clock.unsafeCurrentTimeNanos()
  const claimedAt = job.claimedAt === undefined ? now : nanos(job.claimedAt)
  const span = tracer.span("Jobs.run", Option.none(), Context.empty(), [], claimedAt, "consumer")
  describe(span, job.queue, job.id, job.attempt)
  const claim = tracer.span("Jobs.claim", Option.some(span), Context.empty(), [], claimedAt, "internal")
  describe(claim, job.queue, job.id, job.attempt)
  claim.end(now, Exit.void)
  const attempt: Attempt = { tracing, span, queue: job.queue, id: job.id, attempt: job.attempt, endedAt: undefined }
  spans.delete(job.key)
  if (spans.size >= MAX_OPEN) spans.delete(spans.keys().next().value!)
  spans.set(job.key, attempt)
  return attempt
}

/** The handler ended with `exit`: `Jobs.run` ends. */
export const ended = (attempt: Attempt, exit: Exit.Exit<unknown, unknown>): void => {
  const at = attempt.tracing.clock.unsafeCurrentTimeNanos()
  attempt.endedAt = at
  attempt.span.end(at, exit)
}

/** Runs the handler's effect under the attempt's span, ending the span with its exit. */
export const around = <A, E>(attempt: Attempt, body: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.onExit(Effect.withParentSpan(body, attempt.span), (exit) => Effect.sync(() => ended(attempt, exit)))

/** The attempt's settle under `key` committed with `outcome`: its `Jobs.settle` span, from the handler's end to now. */
export const settled = (spans: Spans, key: string, outcome: string): void => {
  const attempt = spans.get(key)
  if (attempt === undefined) return
  spans.delete(key)
  const { clock, tracer } = attempt.tracing
  const now = clock.unsafeCurrentTimeNanos()
  const span = tracer.span("Jobs.settle", Option.some(attempt.span), Context.empty(), [], attempt.endedAt ?? now, "internal")
  describe(span, attempt.queue, attempt.id, attempt.attempt)
  span.attribute("job.outcome", outcome)
  span.end(now, Exit.void)
}

/** `body` in a span named `name` with `attributes` when the fiber's tracer is the user's; as it is otherwise. */
export const traced = <A, E, R>(name: string, attributes: Record<string, unknown>, body: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) => tracer === NATIVE ? body : Effect.withSpan(body, name, { attributes }))
