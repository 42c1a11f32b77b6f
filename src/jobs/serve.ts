/**
 * The object's side of the jobs protocol: one decoded call (`JobsProtocol.decodeCall`) executed against
 * the object's queues, answered as the protocol says. A lease call answers a stale token with
 * `{ status: "stale" }` (and, from version 2, a job canceled under it with `{ status: "canceled" }`)
 * instead of failing, so the consumer reads it as an answer, not as an object it could not reach.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StaleLeaseError } from "../shared/Errors.js"
import * as Protocol from "./JobsProtocol.js"
import * as QueueCalls from "./queue.js"
import type * as Types from "./types.js"

/** What of a `Jobs` service the calls reach: its queues by name, and `flow`. */
export interface Served {
  readonly flow: (root: Types.FlowNode) => Effect.Effect<Types.FlowResult, unknown>
}

const isStale = (error: unknown): error is StaleLeaseError =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "StaleLeaseError"

/** A lease call's answer: a stale token (or a canceled job, to a caller that knows the answer) is an answer. */
const lease = (queue: QueueCalls.Queue<unknown, unknown>, call: Protocol.Versioned<Protocol.LeaseCall>) => {
  const { id, token } = call
  const answer: Effect.Effect<Protocol.LeaseAnswer, unknown> = call.op === "start"
    ? Effect.map(queue.start(id, token), (started) => ({ status: "started" as const, ...started }))
    : call.op === "heartbeat"
    ? Effect.map(
      queue.heartbeat(id, token, {
        ...(call.extendMs === undefined ? {} : { extendMs: call.extendMs }),
        ...(call.progress === undefined ? {} : { progress: call.progress })
      }),
      ({ leaseUntil }) => ({ status: "ok" as const, leaseUntil })
    )
    : call.op === "log"
    ? Effect.as(queue.log(id, token, call.message), { status: "ok" as const })
    : call.op === "complete"
    ? Effect.as(queue.complete(id, token, call.result), { status: "ok" as const })
    : Effect.as(
      queue.fail(id, token, call.error, { retryable: call.op === "undelivered" ? false : call.retryable }),
      { status: "ok" as const }
    )
  return Effect.catchIf(answer, isStale, (error): Effect.Effect<Protocol.LeaseAnswer> =>
    Effect.succeed(
      error.canceled !== undefined && call.v >= Protocol.CANCELED_SINCE
        ? { status: "canceled", message: error.message, reason: error.canceled.reason }
        : { status: "stale", message: error.message }
    ))
}

/** Executes one decoded call against the object's queues (`jobs`: a `Jobs` service). */
export const serve = (jobs: Served, call: Protocol.Versioned<Protocol.Call>): Effect.Effect<unknown, unknown> => {
  if (call.op === "flow") return jobs.flow(call.root as unknown as Types.FlowNode)
  const queue = (jobs as unknown as Readonly<Record<string, QueueCalls.Queue<unknown, unknown>>>)[call.queue]!
  switch (call.op) {
    case "add":
      return queue.add(call.job as unknown as Types.AddOptions<unknown>)
    case "addBulk":
      return queue.addBulk(call.jobs as ReadonlyArray<Types.AddOptions<unknown>>)
    case "get":
      return queue.get(call.id)
    case "page":
      return QueueCalls.shardPage(queue, call.page)
    case "counts":
      return Effect.map(Effect.all([queue.counts, queue.isPaused]), ([counts, paused]) => ({ counts, paused }))
    case "pause":
      return queue.pause
    case "resume":
      return queue.resume
    default:
      return lease(queue, call)
  }
}
