/**
 * The object's side of the jobs protocol: one decoded call (`JobsProtocol.decodeCall`) executed against
 * the object's queues, answered as the protocol says. A lease call answers a stale token with
 * `{ status: "stale" }` (and, from version 2, a job canceled under it with `{ status: "canceled" }`)
 * instead of failing, so the consumer reads it as an answer, not as an object it could not reach.
 * @internal
 */
import * as Effect from "effect/Effect"
import { InvalidInputError, type StaleLeaseError, type StorageError } from "../shared/Errors.js"
import type * as Bulk from "./bulk.js"
import * as Protocol from "./JobsProtocol.js"
import * as QueueCalls from "./queue.js"
import type * as Types from "./types.js"

/** What of a `Jobs` service the calls reach: its queues by name, `flow`, `event` and `bulk`. */
export interface Served {
  readonly flow: (root: Types.FlowNode) => Effect.Effect<Types.FlowResult, InvalidInputError | StorageError>
  readonly event: (key: string) => Effect.Effect<number, InvalidInputError | StorageError>
  readonly bulk: (
    action: Bulk.BulkAction,
    filter: Bulk.JobFilter,
    options?: Bulk.BulkOptions
  ) => Effect.Effect<Bulk.BulkResult, InvalidInputError | StorageError>
}

// The queue names of each `Jobs` service (what a call may name), registered by `Jobs.make`.
const servedQueues = new WeakMap<object, ReadonlySet<string>>()

/** Registers a `Jobs` service and its queue names, so `serveCall` can decode calls for it. */
export const register = (jobs: Served, queues: ReadonlySet<string>): void => void servedQueues.set(jobs, queues)

/**
 * Decodes `call` (as it arrived over RPC) and executes it: `InvalidInputError` naming the field when it
 * does not decode (nothing executed), else the call's own answer or failure.
 */
export const serveCall = (jobs: Served, call: unknown): Effect.Effect<unknown, InvalidInputError | StorageError> =>
  Effect.suspend(() => {
    const queues = servedQueues.get(jobs)
    if (queues === undefined) {
      return Effect.fail(new InvalidInputError({ field: "jobs", kind: "type", message: "Jobs.serve needs the service Jobs.make returned" }))
    }
    let decoded: Protocol.Versioned<Protocol.Call>
    try {
      decoded = Protocol.decodeCall(call, queues)
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      const field = /^([\w.[\]]+) must/.exec(message)?.[1] ?? (message.startsWith("Unknown queue") ? "queue" : "call")
      return Effect.fail(new InvalidInputError({ field, kind: error instanceof RangeError ? "range" : "type", message }))
    }
    return serve(jobs, decoded)
  })

const isStale = (error: unknown): error is StaleLeaseError =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "StaleLeaseError"

/** A lease call's answer: a stale token (or a canceled job, to a caller that knows the answer) is an answer. */
const lease = (
  queue: QueueCalls.Queue<unknown, unknown>,
  call: Protocol.Versioned<Protocol.LeaseCall>
): Effect.Effect<Protocol.LeaseAnswer, InvalidInputError | StorageError> => {
  const { id, token } = call
  const answer: Effect.Effect<Protocol.LeaseAnswer, InvalidInputError | StaleLeaseError | StorageError> = call.op === "start"
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
export const serve = (jobs: Served, call: Protocol.Versioned<Protocol.Call>): Effect.Effect<unknown, InvalidInputError | StorageError> => {
  if (call.op === "flow") return jobs.flow(call.root as unknown as Types.FlowNode)
  if (call.op === "event") return jobs.event(call.key)
  // The action, filter and options are checked by `bulk` itself, which names the field it refuses.
  if (call.op === "bulk") return jobs.bulk(call.action as Bulk.BulkAction, call.filter as Bulk.JobFilter, call.options as Bulk.BulkOptions | undefined)
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
