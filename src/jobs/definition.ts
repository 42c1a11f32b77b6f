/**
 * A queue's definition: its handler, payload and result codecs, and options.
 * @internal
 */
import type * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Codec from "../shared/codec.js"
import type * as Policy from "../engine/policy.js"
import type * as Options from "./options.js"
import type { JobContext } from "./types.js"

/** The current job of a handler, for `Jobs.progress` and `Jobs.log`. */
export interface CurrentJobService {
  readonly job: JobContext<unknown>
}

export type CurrentJobTag<I> = Context.Tag<I, CurrentJobService>

export interface QueueDefinition<P, R, E, Req> extends Policy.ExecutionOptions, Omit<Options.QueueOptions, "groupRateLimit"> {
  readonly handler: (job: JobContext<P>) => Effect.Effect<R, E, Req>
  readonly payload: Codec.Codec<P>
  readonly result: Codec.Codec<R>
  readonly groupRateLimit?: Options.GroupRateLimit<P> | undefined
}

export interface AnyQueueDefinition extends Policy.ExecutionOptions, Omit<Options.QueueOptions, "groupRateLimit"> {
  readonly handler: (job: JobContext<never>) => Effect.Effect<unknown, unknown, unknown>
  readonly payload: Codec.AnyCodec
  readonly result: Codec.AnyCodec
  readonly groupRateLimit?: Options.GroupRateLimit<never> | undefined
}
