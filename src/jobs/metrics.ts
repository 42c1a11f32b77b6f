/**
 * Updates the queues' metrics (`JobsMetrics`) synchronously, from code that already runs after a
 * commit (the events told, the handler's start, a deferral that committed): no Effect step of its
 * own, so the hot path pays a map lookup and a hook update per count.
 * @internal
 */
import type * as Metric from "effect/Metric"
import * as MetricLabel from "effect/MetricLabel"
import * as JobsMetrics from "./JobsMetrics.js"

/**
 * Each queue's tags as one array kept for good: a metric caches its tagged hook by the identity of
 * the tags array, so the same array finds it without hashing the key again.
 */
const tagsByQueue = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()

const tagsOf = (queue: string): ReadonlyArray<MetricLabel.MetricLabel> => {
  let tags = tagsByQueue.get(queue)
  if (tags === undefined) {
    tags = [MetricLabel.make(JobsMetrics.QUEUE_TAG, queue)]
    tagsByQueue.set(queue, tags)
  }
  return tags
}

const bump = (metric: Metric.Metric.Counter<number>, queue: string): void => metric.unsafeUpdate(1, tagsOf(queue))

/** Counts an event a change told once it committed (adds, leases, a flow's failures, dead letters, cancels). */
export const told = (event: { readonly type: string; readonly queue: string }): void => {
  switch (event.type) {
    case "added":
      return bump(JobsMetrics.added, event.queue)
    case "started":
      return bump(JobsMetrics.started, event.queue)
    case "failed":
      return bump(JobsMetrics.failed, event.queue)
    case "canceled":
      return bump(JobsMetrics.canceled, event.queue)
    case "dead_lettered":
      return bump(JobsMetrics.deadLettered, event.queue)
    default:
      return
  }
}

/** An attempt started here (its claim committed): counted, with how long it waited since it was due. */
export const started = (queue: string, waitedMs: number | undefined): void => {
  const tags = tagsOf(queue)
  JobsMetrics.started.unsafeUpdate(1, tags)
  if (waitedMs !== undefined) JobsMetrics.waitTime.unsafeUpdate(Math.max(0, waitedMs), tags)
}

/** An attempt leased to a worker (its lease committed): how long it waited since it was due. */
export const waited = (queue: string, waitedMs: number): void =>
  JobsMetrics.waitTime.unsafeUpdate(Math.max(0, waitedMs), tagsOf(queue))

/** An attempt settled (its settle committed): how long it ran, and its outcome's count. */
export const settled = (
  queue: string,
  outcome: "completed" | "retried" | "failed" | "canceled",
  durationMs: number | undefined
): void => {
  const tags = tagsOf(queue)
  if (durationMs !== undefined) JobsMetrics.runTime.unsafeUpdate(Math.max(0, durationMs), tags)
  const metric = outcome === "completed"
    ? JobsMetrics.completed
    : outcome === "retried"
    ? JobsMetrics.retried
    : outcome === "failed"
    ? JobsMetrics.failed
    : JobsMetrics.canceled
  metric.unsafeUpdate(1, tags)
}

/** A start refused by a rate limit (its deferral committed). */
export const rateLimited = (queue: string): void => bump(JobsMetrics.rateLimited, queue)
