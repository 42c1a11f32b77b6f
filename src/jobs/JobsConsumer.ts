/**
 * The Cloudflare Queues consumer of external job queues (`processing: { queue }`) as an Effect
 * program: the same consumer as `DurabilityJobs.consumer` (start with the envelope's token, automatic
 * heartbeats, complete or fail, ack always, retry only for an unreachable object), whose handlers
 * are Effects run with the services of the program that consumes the batch.
 *
 * ```ts
 * const consume = JobsConsumer.make({ namespace: (env: Env) => env.MAILER, handlers: { email: (job) => send(job.payload) } })
 * export default { queue: (batch, env) => runtime.runPromise(consume(batch, env)) }
 * ```
 * @packageDocumentation
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"
import {
  type DurableJobsConsumerOptions,
  type DurableQueueBatch,
  type DurableQueuedJob,
  jobsConsumer,
  jobsDeadLetterConsumer
} from "./consumer.js"

export type { DurableJobEnvelope as Envelope, DurableQueuedJob as QueuedJob } from "./consumer.js"

/** `make`'s options: the owning objects' namespace, and one Effect handler per queue. */
export interface Options<Env, R> extends Omit<DurableJobsConsumerOptions<Env>, "handlers"> {
  /** One handler per queue name of the envelopes: its success completes the job, its failure fails the attempt. */
  readonly handlers: Readonly<Record<string, (job: DurableQueuedJob<never>, env: Env) => Effect.Effect<unknown, unknown, R>>>
}

/** The consumer: consumes one batch with the services `R` of the program it runs in. Never fails. */
export const make = <Env, R = never>(options: Options<Env, R>) => (batch: DurableQueueBatch, env: Env): Effect.Effect<void, never, R> =>
  Effect.flatMap(Effect.runtime<R>(), (runtime) => {
    const run = Runtime.runPromiseExit(runtime)
    const handlers = Object.fromEntries(
      Object.entries(options.handlers).map(([name, handler]) => [
        name,
        (job: DurableQueuedJob<never>, handlerEnv: Env) =>
          run(handler(job, handlerEnv)).then((exit) => {
            // The handler's own error (not a FiberFailure wrapping it), so its name reaches the object.
            if (Exit.isFailure(exit)) throw Cause.squash(exit.cause)
            return exit.value
          })
      ])
    )
    const consumer = jobsConsumer<Env>({ ...options, handlers })
    return Effect.promise(() => consumer(batch, env))
  })

/** The consumer of the dead-letter queue: the jobs Queues gave up on are failed (`QueueDeliveryError`). */
export const deadLetters = <Env>(options: Omit<DurableJobsConsumerOptions<Env>, "handlers">) =>
(batch: DurableQueueBatch, env: Env): Effect.Effect<void> => {
  const consumer = jobsDeadLetterConsumer<Env>(options)
  return Effect.promise(() => consumer(batch, env))
}
