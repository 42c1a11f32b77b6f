/**
 * The promise face of the jobs router (`DurabilityJobs.router`): the Effect router of `JobsRouter`,
 * each call run as a promise that rejects as the promise face does: a `TypeError` or `RangeError` for
 * bad input (before any call), the shard's own error when a shard's call fails.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Cause from "effect/Cause"
import type * as Bulk from "../jobs/bulk.js"
import * as JobsRouter from "../jobs/JobsRouter.js"
import type { AddResult, FlowResult, JobInfo, JobPage, JobState } from "../jobs/types.js"
import type * as Types from "../jobs/types.js"

export type { RouteKeyInput, RoutedCounts, RouterObjects, RouterOptions, ShardNamespace } from "../jobs/JobsRouter.js"

/** One queue across the shards. */
export interface RoutedQueue<P, R> {
  /** Routes to the shard of `key(job)`; a job without `id` gets one here first, so its route is known. */
  add(options: Types.AddOptions<P, number>): Promise<AddResult>
  /** One call per shard (each shard's jobs all or none; shards are not one transaction); results in your order. */
  addBulk(jobs: ReadonlyArray<Types.AddOptions<P, number>>): Promise<ReadonlyArray<AddResult>>
  /**
   * From the shard of `options.key` when given, else of the id (default routing); with a custom `key`
   * and no `options.key`, every shard is asked (the lowest shard holding it answers).
   */
  get(id: string, options?: { readonly key?: string | undefined }): Promise<JobInfo<P, R> | undefined>
  /** All shards' jobs merged by `createdAt` (then shard), with a composite cursor: one call per unfinished shard per page. */
  list(options?: { readonly states?: ReadonlyArray<JobState> | undefined; readonly limit?: number | undefined; readonly cursor?: string | undefined }): Promise<JobPage<P, R>>
  /** The queue's counts summed over the shards. */
  counts(): Promise<JobsRouter.RoutedCounts>
  /** Pauses the queue on every shard. */
  pause(): Promise<void>
  /** Resumes the queue on every shard. */
  resume(): Promise<void>
}

/** The failure as the promise face throws it. */
const thrown = (error: unknown): unknown => {
  if (error instanceof JobsRouter.ShardCallError) return error.cause
  if (typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "InvalidInputError") {
    const { kind, message } = error as unknown as { readonly kind: string; readonly message: string }
    return kind === "range" ? new RangeError(message) : new TypeError(message)
  }
  return error
}

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) => {
    if (Exit.isSuccess(exit)) return exit.value
    throw thrown(Cause.squash(exit.cause))
  })

/** The router of the promise face: a `TypeError`/`RangeError` for bad options, at once. */
export class Router {
  /** How many objects the queues are spread over. */
  readonly shards: number
  /** The shards' objects, for the inspector. */
  readonly objects: JobsRouter.RouterObjects
  readonly #router: JobsRouter.Router

  constructor(options: JobsRouter.RouterOptions) {
    const made = Effect.runSyncExit(JobsRouter.make(options))
    if (Exit.isFailure(made)) throw thrown(Cause.squash(made.cause))
    this.#router = made.value
    this.shards = made.value.shards
    this.objects = made.value.objects
  }

  /** The shard of a routing key. */
  shardOf(key: string): number {
    if (typeof key !== "string") throw new TypeError(`key must be a string, got ${String(key)}`)
    return this.#router.shardOf(key)
  }

  /** The object's name of shard `index`. */
  nameOf(index: number): string {
    return this.objects.names[index]!
  }

  /** The whole tree goes to the shard of the root's key. */
  flow(root: Types.FlowNode<number>): Promise<FlowResult> {
    return run(this.#router.flow(root))
  }

  /** Every shard cancels its jobs whose `cancelOn` is `key`; the total canceled (a retry is safe). */
  event(key: string): Promise<number> {
    return run(this.#router.event(key))
  }

  /** One chunk of a bulk run on every shard not done yet (up to `limit` each); pass `cursor` back until `done`. */
  bulk(action: Bulk.BulkAction, filter: Bulk.JobFilter<number>, options?: Bulk.BulkOptions): Promise<Bulk.BulkResult> {
    return run(this.#router.bulk(action, filter, options))
  }

  /** One queue across the shards. */
  queue(name: string): RoutedQueue<unknown, unknown> {
    if (typeof name !== "string" || name.length === 0) {
      throw new TypeError(`queue must be a non-empty string, got ${typeof name === "string" ? JSON.stringify(name) : String(name)}`)
    }
    const queue = this.#router.queue(name)
    return {
      add: (options) => run(queue.add(options)),
      addBulk: (jobs) => run(queue.addBulk(jobs)),
      get: (id, options) => run(queue.get(id, options)),
      list: (options) => run(queue.list(options)),
      counts: () => run(queue.counts),
      pause: () => run(queue.pause),
      resume: () => run(queue.resume)
    }
  }
}
