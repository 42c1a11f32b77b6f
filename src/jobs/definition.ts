/**
 * A queue's definition: its handler, payload and result codecs, and options.
 * @internal
 */
import type * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import type * as Codec from "../shared/codec.js"
import type * as Policy from "../engine/policy.js"
import type * as Options from "./options.js"
import type { JobContext } from "./types.js"

/** The current job of a handler, for `Jobs.progress` and `Jobs.log`. */
export interface CurrentJobService {
  readonly job: JobContext<unknown>
}

export type CurrentJobTag<I> = Context.Tag<I, CurrentJobService>

export interface QueueDefinition<P, R, E, Req>
  extends Policy.ExecutionOptions, Omit<Options.QueueOptions, "groupRateLimit" | "concurrency">
{
  /** Runs one attempt of a job; its success is the job's result, a failure is retried under the policy. */
  readonly handler: (job: JobContext<P>) => Effect.Effect<R, E, Req>
  /** How payloads are encoded for storage and decoded for the handler. */
  readonly payload: Codec.Codec<P>
  /** How results are encoded for storage and decoded for readers. */
  readonly result: Codec.Codec<R>
  /** A token bucket per group of the payload (e.g. per tenant). */
  readonly groupRateLimit?: Options.GroupRateLimit<P> | undefined
  /** Jobs running at once: in all, or per key of the payload. */
  readonly concurrency?: number | Options.KeyedConcurrency<P> | undefined
  /** A batched queue's handler (`Jobs.batchQueue`), called instead of `handler`. */
  readonly batchHandler?: BatchHandler<P, R, E, Req> | undefined
}

/**
 * A batched queue's handler: called with up to `batch.size` jobs (each with its own attempt, signal,
 * progress and log), it returns one `Exit` per job, in the same order: each job is settled by its own
 * (a success completes it, a failure is retried under the policy). A failure of the whole call fails
 * every job of the batch.
 */
export type BatchHandler<P, R, E, Req> = (
  jobs: ReadonlyArray<JobContext<P>>
) => Effect.Effect<ReadonlyArray<Exit.Exit<R, E>>, E, Req>

export interface AnyQueueDefinition extends Policy.ExecutionOptions, Omit<Options.QueueOptions, "groupRateLimit"> {
  /** The handler, taking any job. */
  readonly handler: (job: JobContext<never>) => Effect.Effect<unknown, unknown, unknown>
  /** The payload's codec. */
  readonly payload: Codec.AnyCodec
  /** The result's codec. */
  readonly result: Codec.AnyCodec
  /** A token bucket per group of the payload. */
  readonly groupRateLimit?: Options.GroupRateLimit<never> | undefined
  /** A batched queue's handler, taking any jobs. */
  readonly batchHandler?: BatchHandler<never, unknown, unknown, unknown> | undefined
}
