/**
 * Effect `Metric`s of the job queues: what users graph (jobs added, started, completed, failed,
 * retried, canceled, dead-lettered, refused by a rate limit, their wait and run times), each tagged
 * with its queue (`queue`).
 *
 * They live in Effect's global metric registry, so they are per isolate: in memory, summed over the
 * objects this isolate runs, and reset when the isolate is evicted. Read one with `Metric.value`
 * (tagged with its queue), or export them all by providing `@effect/opentelemetry`'s metrics layer to
 * the object's runtime; the library forces no exporter. Every value counts what committed: a write
 * rolled back counts nothing. For rates that survive an eviction, the inspector's overview counts the
 * finished jobs in storage.
 *
 * ```ts
 * import * as Metric from "effect/Metric"
 * import { JobsMetrics } from "durability/effect"
 *
 * const completed = Metric.value(Metric.tagged(JobsMetrics.completed, JobsMetrics.QUEUE_TAG, "emails"))
 * // Effect<MetricState.Counter<number>>: its `count`
 * ```
 * See docs/observability.md.
 * @packageDocumentation
 */
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"

/** The tag naming a job's queue on every metric of this module. */
export const QUEUE_TAG = "queue"

/**
 * The boundaries of the time histograms, in milliseconds: powers of two from 1 ms to about 37 hours
 * (28 buckets), so both a handler's milliseconds and a backlog's hours are told apart.
 */
export const timeBoundaries: MetricBoundaries.MetricBoundaries = MetricBoundaries.exponential({ start: 1, factor: 2, count: 28 })

/** Jobs added (a deduplicated add adds nothing; a flow adds each of its jobs). */
export const added: Metric.Metric.Counter<number> = Metric.counter("durability_jobs_added", {
  description: "Jobs added to a queue",
  incremental: true
})

/** Attempts started: run by this object's handler, or leased to an external worker or a Cloudflare Queue's consumer. */
export const started: Metric.Metric.Counter<number> = Metric.counter("durability_jobs_started", {
  description: "Job attempts started (run here or leased)",
  incremental: true
})

/** Jobs completed. */
export const completed: Metric.Metric.Counter<number> = Metric.counter("durability_jobs_completed", {
  description: "Jobs completed",
  incremental: true
})

/** Jobs failed for good: their last attempt failed, their attempts ran out, or a child's failure failed them. */
export const failed: Metric.Metric.Counter<number> = Metric.counter("durability_jobs_failed", {
  description: "Jobs failed for good",
  incremental: true
})

/** Failed attempts given another attempt by their queue's retry policy. */
export const retried: Metric.Metric.Counter<number> = Metric.counter("durability_jobs_retried", {
  description: "Failed job attempts scheduled to retry",
  incremental: true
})

/** Jobs canceled (by `cancel`, or with a failed or canceled parent). */
export const canceled: Metric.Metric.Counter<number> = Metric.counter("durability_jobs_canceled", {
  description: "Jobs canceled",
  incremental: true
})

/** Jobs failed for good and kept as dead letters (queues with `deadLetter: true`). */
export const deadLettered: Metric.Metric.Counter<number> = Metric.counter("durability_jobs_dead_lettered", {
  description: "Failed jobs kept as dead letters",
  incremental: true
})

/**
 * Starts refused by a rate limit (the queue's or the job's group's): each time a due job found an empty
 * token bucket and was moved to its next token (a worker's `lease` that gets fewer jobs for a rate limit
 * moves none, and counts none).
 */
export const rateLimited: Metric.Metric.Counter<number> = Metric.counter("durability_jobs_rate_limited", {
  description: "Job starts refused by a rate limit",
  incremental: true
})

/**
 * How long an attempt waited to start, in milliseconds: from the time it became due (its delay's or
 * retry's end, or the next token a rate limit moved it to) to its claim, run here or leased to a worker.
 */
export const waitTime: Metric.Metric.Histogram<number> = Metric.histogram(
  "durability_jobs_wait_time_ms",
  timeBoundaries,
  "Milliseconds from a job attempt's due time to its start"
)

/**
 * How long an attempt took, in milliseconds, whatever its outcome (completed, retried or failed): run here,
 * from its start to its handler's end; leased to a worker, from the lease's claim to the worker's outcome.
 */
export const runTime: Metric.Metric.Histogram<number> = Metric.histogram(
  "durability_jobs_run_time_ms",
  timeBoundaries,
  "Milliseconds a job attempt ran"
)
