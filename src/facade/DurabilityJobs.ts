/**
 * `DurabilityJobs`: job queues for promise-style code. Every queue becomes a property:
 * `jobs.email.add({ payload })`, `jobs.email.get(id)`, `jobs.email.pause()`…; `jobs.flow(tree)`
 * adds a parent and its children (across queues) in one transaction.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"
import * as Jobs from "../jobs/Jobs.js"
import * as Steps from "../steps/Steps.js"
import type { AnyQueueDefinition } from "../jobs/definition.js"
import * as Router from "./jobsRouter.js"
import * as Protocol from "../jobs/JobsProtocol.js"
import { serve } from "../jobs/serve.js"
import type { Batch, GroupRateLimit, KeyedConcurrency, Retention, Transport } from "../jobs/options.js"
import type { Lease as JobLease, LeaseOptions as JobLeaseOptions } from "../jobs/lease.js"
import type * as Types from "../jobs/types.js"
import type * as Bulk from "../jobs/bulk.js"
import type * as JobsCore from "../jobs/core.js"
import * as Plain from "../shared/plain.js"
import type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
import type * as Scheduler from "../engine/Scheduler.js"
import { attach, fromPromise, migrateWith, type MigrationResult, type SchedulerAttachment } from "./attachment.js"
import type { BivariantHandler } from "./Durability.js"
import { fromCause } from "./errors.js"
import { jobsConsumer, jobsDeadLetterConsumer } from "./jobsConsumer.js"
import { type DurabilityMethodOptions, type DurableStep, Helper, lazyStep, pickExecution } from "./helper.js"

/** What a job's handler is called with. */
export interface DurableJob<P = unknown>
  extends Pick<Types.JobContext<P>, "id" | "queue" | "payload" | "attempt" | "maxAttempts" | "signal" | "idempotencyKey">
{
  /** Stores the job's progress (a number or JSON, at most 64 KiB). */
  progress(value: unknown): Promise<void>
  /** Appends a line to the job's log (at most 64 KiB). */
  log(message: string): Promise<void>
  /** The values and failures of the job's children, by child id. */
  childrenValues(): Promise<Readonly<Record<string, Types.ChildValue>>>
  /**
   * A durable step of this job: `await job.step("render", () => render(...))` runs the function once
   * and stores its result (JSON, or `{ result: schema }`'s encoded form); every later attempt of the
   * job gets the stored result back. Names are unique within one attempt.
   */
  readonly step: DurableStep
}

/**
 * A queue's handler: called with the job, its return value (JSON) becomes the job's result, a throw fails the
 * attempt.
 */
export type DurableJobHandler<P = unknown> = (job: DurableJob<P>) => unknown

/** A job of a batch (`batchHandler`): a `DurableJob` without durable steps (a batch's call is not one job's). */
export type DurableBatchJob<P = unknown> = Omit<DurableJob<P>, "step">

/** What a batch handler answers for one job: its result, or its failure (retried under the queue's policy). */
export type DurableBatchOutcome<R = unknown> =
  | { readonly ok: true; readonly value: R }
  | { readonly ok: false; readonly error: unknown }

/**
 * A batched queue's handler: called with up to `batch.size` jobs, it returns (or resolves to) one
 * `DurableBatchOutcome` per job, in the same order; each job is settled on its own. A throw fails every job
 * of the batch.
 */
export type DurableBatchHandler<P = unknown, R = unknown> = (
  jobs: ReadonlyArray<DurableBatchJob<P>>
) => ReadonlyArray<DurableBatchOutcome<R>> | PromiseLike<ReadonlyArray<DurableBatchOutcome<R>>>

// The calls' times are milliseconds here (the Effect face's `Jobs.Queue` takes Durations too).
/** `add`'s options, with times in milliseconds. */
export type DurableJobAddOptions<P = unknown> = Types.AddOptions<P, number>
/** Dedup options (throttle or debounce), with times in milliseconds. */
export type DurableJobDedupOptions = Types.DedupOptions<number>
/** `clean`'s options, with times in milliseconds. */
export type DurableJobCleanOptions = Types.CleanOptions<number>
/** One job of a flow (`flow`), with times in milliseconds. */
export type DurableJobFlowNode = Types.FlowNode<number>
/** Which jobs `bulk` acts on, with times in milliseconds. */
export type DurableJobFilter = Bulk.JobFilter<number>
/** `lease`'s options for an external queue, with times in milliseconds. */
export type DurableJobLeaseOptions = JobLeaseOptions<number>

/**
 * One queue's options: its handler (or external processing), retries and timeouts, and its own limits,
 * retention and logs.
 */
export interface DurabilityQueueOptions<P = unknown> extends DurabilityMethodOptions {
  /** Runs each job here; omitted for a queue with `processing: "external"` (its workers lease the jobs). */
  readonly handler?: BivariantHandler<DurableJob<P>> | undefined
  /**
   * A batched queue's handler, instead of `handler` (with `batch`): it takes up to `batch.size` jobs at once
   * and answers one outcome per job.
   */
  readonly batchHandler?: BivariantHandler<ReadonlyArray<DurableBatchJob<P>>> | undefined
  /**
   * With `batchHandler`: the most jobs one call takes (`size`, at most 100), and how long (ms, default 0)
   * fewer due jobs wait, durably, for more.
   */
  readonly batch?: Batch<number> | undefined
  /**
   * `"external"`: due jobs wait for `lease` by workers elsewhere, who settle them with the lease's token.
   * `{ queue: env.EMAIL_QUEUE }`: the object leases each due job itself and sends its envelope to that
   * Cloudflare Queue, whose consumer (`jobsConsumer`) runs it.
   */
  readonly processing?: "inline" | "external" | Transport | undefined
  /** An external queue's default lease (ms; default 30 000). */
  readonly leaseMs?: number | undefined
  /** An external queue's expired leases a job survives before it fails (`JobStalledError`; default 1). */
  readonly maxStalled?: number | undefined
  /**
   * Jobs of this queue running at once, inside the scheduler's shared permits; or a limit per key of the
   * payload (`{ key, limit, total? }`, e.g. one running job per customer). Default: no own limit.
   */
  readonly concurrency?: number | KeyedConcurrency<P> | undefined
  /** A token bucket for the whole queue: a job starts only with a token, so bursts are bounded. */
  readonly rateLimit?: Types.RateLimit | undefined
  /**
   * A token bucket per group (e.g. per tenant, from the payload), so one group cannot use up the queue's
   * rate.
   */
  readonly groupRateLimit?: GroupRateLimit<P> | undefined
  /** How many completed jobs to keep (the newest `count`, none older than `ageMs`). Default: all. */
  readonly removeOnComplete?: Retention<number> | undefined
  /** How many failed jobs to keep, as for `removeOnComplete`. */
  readonly removeOnFail?: Retention<number> | undefined
  /** List jobs that fail for good under `deadLetters`, to read and redrive them (default false). */
  readonly deadLetter?: boolean | undefined
  /** Log lines kept per job, the newest (default 100). */
  readonly keepLogs?: number | undefined
  /**
   * The largest payload as stored JSON, in bytes (default 131 072, a Cloudflare Queues message; at most 2
   * MB).
   */
  readonly maxPayloadBytes?: number | undefined
}

/** The queues of a `DurabilityJobs`, by name: each name becomes a property of the instance. */
export type QueueMap = Record<string, DurabilityQueueOptions<never>>

type PayloadOf<Q> = Q extends { readonly handler: (job: DurableJob<infer P>) => unknown } ? P
  : Q extends { readonly batchHandler: (jobs: ReadonlyArray<DurableBatchJob<infer P>>) => unknown } ? P
  : unknown
type ResultOf<Q> = Q extends { readonly handler: (job: never) => infer R } ? Awaited<R>
  : Q extends { readonly batchHandler: (jobs: never) => infer O } ? Awaited<O> extends ReadonlyArray<infer E> ? ResultOfOutcome<E> : unknown
  : unknown
type ResultOfOutcome<E> = E extends { readonly ok: true; readonly value: infer R } ? R : never

/** `DurabilityJobs`'s options: the queues, and the defaults their options override. */
export interface DurabilityJobsOptions<Q extends QueueMap> extends DurabilityMethodOptions {
  /** The queues, by name. */
  readonly queues: Q
  /**
   * Told each job event (added, started, completed, retried, failed, …) after it committed, e.g. for metrics.
   */
  readonly onLifecycleEvent?: Types.JobEventHook | undefined
}

/**
 * What `new DurabilityJobs(...)` takes: its options and where it attaches (a scheduler, or the object's
 * context).
 */
export type DurabilityJobsConfig<Q extends QueueMap> = DurabilityJobsOptions<Q> & SchedulerAttachment

/** One job, by id, for the calls that follow it. */
export interface DurableJobRef<P, R> {
  /** Waits until the job finished (or `timeoutMs`, default 30 000, passed) and returns it as it is then. */
  wait(options?: { readonly timeoutMs?: number | undefined }): Promise<Types.JobInfo<P, R> | undefined>
}

/** One queue's calls (see `Jobs.Queue` for each one's contract). */
export interface DurableQueue<P, R> {
  /** Adds a job (or finds it: same id, or a live dedup key). Resolves once it committed. */
  add(options: DurableJobAddOptions<P>): Promise<Types.AddResult>
  /** Adds jobs in one transaction: all or none. */
  addBulk(jobs: ReadonlyArray<DurableJobAddOptions<P>>): Promise<ReadonlyArray<Types.AddResult>>
  /** Reads one job; undefined when there is none with this id. */
  get(id: string): Promise<Types.JobInfo<P, R> | undefined>
  /**
   * Waits until the job finished (or `timeoutMs`, default 30 000, passed) and returns it as it is then:
   * `job(id).wait(options)`, in the shape every capability's `wait` has.
   */
  wait(id: string, options?: { readonly timeoutMs?: number | undefined }): Promise<Types.JobInfo<P, R> | undefined>
  /** Reads a page of the queue's jobs, optionally of some states only. */
  list(options?: Types.JobListOptions): Promise<Types.JobPage<P, R>>
  /** The queue's jobs counted by state. */
  counts(): Promise<Record<Types.JobState, number>>
  /** Reads a page of a job's kept log lines (`offset`: lines to skip). */
  logs(id: string, options?: { readonly limit?: number | undefined; readonly offset?: number | undefined }): Promise<Types.JobLogs>
  /** Pauses the queue durably: none of its jobs starts until `resume`. */
  pause(): Promise<void>
  /** Resumes a paused queue. */
  resume(): Promise<void>
  /** Whether the queue is paused. */
  isPaused(): Promise<boolean>
  /** A delayed job (or one waiting for its retry) becomes due now. True when one was. */
  promote(id: string): Promise<boolean>
  /** A failed or canceled job runs again with fresh attempts. True when one was. */
  retry(id: string): Promise<boolean>
  /** Deletes a job that is not active, with its descendants and logs. True when one was. */
  remove(id: string): Promise<boolean>
  /**
   * Cancels an unfinished job (an active one: its signal is aborted, it is not retried). True when one was.
   */
  cancel(id: string, reason?: string): Promise<boolean>
  /** Changes the start order of a job not started yet (higher first). True when one was. */
  changePriority(id: string, priority: number): Promise<boolean>
  /** Deletes finished jobs; resolves to how many. */
  clean(options: DurableJobCleanOptions): Promise<number>
  /** Replaces the queue's rate limit durably (`null`: none). */
  setRateLimit(limit: Types.RateLimit | null): Promise<void>
  /** One job by id, to wait for it. */
  job(id: string): DurableJobRef<P, R>
  /** External queues: leases due jobs to a worker (see `Jobs.Queue.lease`). */
  lease(options?: DurableJobLeaseOptions): Promise<ReadonlyArray<JobLease<P>>>
  /** Extends a lease and stores progress; rejects with `StaleLeaseError` when the token no longer holds the job. */
  heartbeat(id: string, token: number, options?: { readonly progress?: unknown; readonly extendMs?: number | undefined }): Promise<{ readonly leaseUntil: number }>
  /** Appends a line to a leased job's log (`StaleLeaseError` as for `heartbeat`). */
  log(id: string, token: number, message: string): Promise<void>
  /** Completes a leased job; `StaleLeaseError` (nothing written) when the token no longer holds it. */
  complete(id: string, token: number, result: R): Promise<void>
  /** Fails a leased attempt: retried under the queue's policy, or for good (`retryable: false`, attempts spent). */
  fail(
    id: string,
    token: number,
    error: string | { readonly name?: string | undefined; readonly message: string },
    options?: { readonly retryable?: boolean | undefined }
  ): Promise<void>
  /** The queue's dead letters (`deadLetter: true`): jobs that failed for good, to read and redrive. */
  readonly deadLetters: {
    /** Reads a page of dead letters. */
    list(options?: { readonly limit?: number | undefined; readonly cursor?: string | undefined }): Promise<Types.DeadLetterPage<P>>
    /**
     * Back to `waiting` with fresh attempts (all, oldest first, up to 1 000; or `ids`); resolves to how many.
     */
    redrive(options?: { readonly ids?: ReadonlyArray<string> | undefined }): Promise<number>
  }
}

/** The calls of a `DurabilityJobs` besides its queues. */
export interface DurabilityJobsBase {
  /** Delegate the object's `alarm(info)` here (or to the shared scheduler). */
  alarm(info?: AlarmInvocationInfo): Promise<void>
  /** Deletes every job created before `before` (strict; epoch ms or a `Date`); returns how many. */
  purgeBefore(before: number | Date): Promise<number>
  /** Adds a parent and its children (across queues, any depth) in one transaction. */
  flow(root: DurableJobFlowNode): Promise<Types.FlowResult>
  /**
   * An event arrived: every unfinished job added with `cancelOn: key` is canceled, as by `cancel` (an
   * active one has its signal aborted), in one transaction; resolves to how many. Inside
   * `scheduler.transaction(fn)` it commits (or rolls back) with your own writes.
   */
  event(key: string): Promise<number>
  /**
   * Cancels, removes, retries, promotes or redrives the jobs (dead letters) matching `filter`, one bounded
   * chunk per call in one transaction; call again with the answer's `cursor` until `done` (see
   * docs/job-queues.md, "Bulk operations"). Each job changes as the call on its id changes it.
   */
  bulk(action: Bulk.BulkAction, filter: DurableJobFilter, options?: Bulk.BulkOptions): Promise<Bulk.BulkResult>
}

/**
 * A `DurabilityJobs` instance: the base calls, and one `DurableQueue` per queue name, typed by its handler.
 */
export type DurabilityJobsInstance<Q extends QueueMap> =
  & DurabilityJobsBase
  & { readonly [K in keyof Q]: DurableQueue<PayloadOf<Q[K]>, ResultOf<Q[K]>> }

export type { RouteKeyInput as DurableJobsRouteKeyInput, RoutedCounts as DurableRoutedCounts, ShardNamespace as DurableJobsShardNamespace } from "../jobs/JobsRouter.js"

/** `DurabilityJobs.router`'s options (see docs/workers-and-queues.md, "Sharding job queues"). */
export type DurableJobsRouterOptions = Router.RouterOptions

/** One queue of a sharded set of objects, as the router reaches it. */
export type DurableRoutedQueue<P = unknown, R = unknown> = Router.RoutedQueue<P, R>

/** Any object's queues, when the router is not given the shard class's `jobs` type. */
export interface DurableJobsAnyQueues {
  readonly [queue: string]: DurableQueue<unknown, unknown>
}

type RoutedQueueOf<Q> = Q extends DurableQueue<infer P, infer R> ? Router.RoutedQueue<P, R> : Router.RoutedQueue<unknown, unknown>

/** The queues of `N` objects of one class, routed by key (`J`: the type of the class's `DurabilityJobs`). */
export interface DurableJobsRouter<J = DurableJobsAnyQueues> {
  /** How many objects the queues are spread over. */
  readonly shards: number
  /**
   * The shards' namespace and object names (shard 0 first): what `DurabilityInspector.handler({ objects:
   * { router } })` reads to reach every shard.
   */
  readonly objects: Router.RouterObjects
  /** The shard (0-based) a routing key goes to: FNV-1a 32-bit of its UTF-8 bytes, mod `shards`. */
  shardOf(key: string): number
  /** One queue across the shards: adds go to the shard of their key, reads fan in. */
  queue<K extends Exclude<keyof J, keyof DurabilityJobsBase> & string>(name: K): RoutedQueueOf<J[K]>
  /** The whole tree goes to the shard of the root's key (a root without `id` gets one here first). */
  flow(root: DurableJobFlowNode): Promise<Types.FlowResult>
  /**
   * An event arrived: every shard cancels its unfinished jobs added with `cancelOn: key`; the total
   * canceled. Every shard is tried; a failed one rejects the call with its own error. Sending it again
   * is safe: a job canceled once is not matched again.
   */
  event(key: string): Promise<number>
  /**
   * One chunk of a bulk run on every shard not done yet: up to `options.limit` jobs (default 100) on each
   * shard, so `affected` may reach shards × limit; pass `cursor` back with the same action and filter
   * until `done`. After a rejection, calling again with the same cursor is safe.
   */
  bulk(action: Bulk.BulkAction, filter: DurableJobFilter, options?: Bulk.BulkOptions): Promise<Bulk.BulkResult>
}

/** The `DurabilityJobs` class: `new DurabilityJobs({ queues })`, and its static helpers. */
export interface DurabilityJobsConstructor {
  new<Q extends QueueMap>(config: DurabilityJobsConfig<Q>): DurabilityJobsInstance<Q>
  /** Applies (default: latest) or reverts (`null`: all) the job tables' migrations. */
  migrate(context: DurabilityContext, target?: string | null): MigrationResult
  /**
   * Routes a queue's jobs over `shards` objects of your class (shard `i`: `namespace.idFromName(`${name}:${i}`)`)
   * and fans reads in. Runs in any Worker code; the class must extend `DurableObject` and hand calls to `serve`.
   */
  router<J = DurableJobsAnyQueues>(options: DurableJobsRouterOptions): DurableJobsRouter<J>
  /**
   * Executes one call of a router against this object's queues: add the method the router calls
   * (default `jobsCall`) to your class, `jobsCall(call: unknown) { return DurabilityJobs.serve(this.jobs, call) }`.
   */
  serve(jobs: DurabilityJobsBase, call: unknown): Promise<unknown>
  /**
   * A Cloudflare Queues consumer of an external queue's envelopes (`processing: { queue }`):
   * `export default { queue: DurabilityJobs.consumer({ namespace: (env) => env.MAILER, handlers: { email } }) }`.
   */
  consumer: typeof jobsConsumer
  /** The consumer of that queue's dead-letter queue: the jobs Queues gave up on are failed (`QueueDeliveryError`). */
  deadLetterConsumer: typeof jobsDeadLetterConsumer
}

type Service = Jobs.JobsService<Record<string, AnyQueueDefinition>>

/** The handler's job with promises, run on the object's runtime. */
const promiseJob = (job: Types.JobContext<unknown>, steps: () => Steps.StepRunner, runtime: Runtime.Runtime<never>): DurableJob<unknown> => {
  const run = <A>(effect: Effect.Effect<A, unknown>) =>
    Runtime.runPromiseExit(runtime)(effect).then((exit) => {
      if (Exit.isFailure(exit)) throw fromCause(exit.cause)
      return exit.value
    })
  return {
    id: job.id,
    queue: job.queue,
    payload: job.payload,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    signal: job.signal,
    idempotencyKey: job.idempotencyKey,
    progress: (value) => run(job.progress(value)),
    log: (message) => run(job.log(message)),
    childrenValues: () => run(job.childrenValues),
    step: lazyStep(steps, runtime)
  }
}

const QUEUE_OPTIONS = new Set([
  "handler",
  "batchHandler",
  "batch",
  "concurrency",
  "rateLimit",
  "groupRateLimit",
  "removeOnComplete",
  "removeOnFail",
  "deadLetter",
  "keepLogs",
  "maxPayloadBytes",
  "retries",
  "attemptTimeoutMs",
  "processing",
  "leaseMs",
  "maxStalled"
])

/** A queue's promise options as the Effect API's definition (which checks every value and names the field). */
const define = (name: string, options: DurabilityQueueOptions<unknown>): AnyQueueDefinition => {
  if (typeof options !== "object" || options === null) throw new TypeError(`queues.${name} must be an object`)
  for (const key of Object.keys(options)) {
    // A typo would silently drop its option.
    if (!QUEUE_OPTIONS.has(key)) throw new TypeError(`queues.${name}.${key} is not a queue option`)
  }
  if (options.processing === "external" || (typeof options.processing === "object" && options.processing !== null)) {
    if (options.handler !== undefined) throw new TypeError(`queues.${name}.handler is not used by an external queue: its workers lease the jobs`)
    const { attemptTimeoutMs: _timeout, handler: _none, processing, retries: _retries, ...external } = options
    return Jobs.externalQueue({
      ...external,
      ...pickExecution(options),
      ...(processing === "external" ? {} : { processing })
    }) as unknown as AnyQueueDefinition
  }
  if (options.batchHandler !== undefined || options.batch !== undefined) return defineBatched(name, options)
  const handler = options.handler as (job: DurableJob<unknown>) => unknown
  if (typeof handler !== "function") throw new TypeError(`queues.${name}.handler must be a function`)
  const { attemptTimeoutMs: _timeout, handler: _handler, retries: _retries, ...rest } = options
  const plain: JobsCore.PlainJobHandler = (job, steps, runtime) => handler(promiseJob(job, steps, runtime))
  return Plain.withPlain(
    Jobs.queue({
      ...rest,
      ...pickExecution(options),
      handler: (job: Types.JobContext<unknown>) =>
        Effect.flatMap(Effect.runtime<Steps.CurrentCall>(), (runtime) =>
          fromPromise(() => plain(job, () => Context.get(runtime.context, Steps.CurrentCall), runtime)))
    }) as unknown as AnyQueueDefinition,
    plain
  )
}

/** A batched queue's promise options as `Jobs.batchQueue`'s definition (which checks `batch`). */
const defineBatched = (name: string, options: DurabilityQueueOptions<unknown>): AnyQueueDefinition => {
  if (options.handler !== undefined) throw new TypeError(`queues.${name}.handler is not used by a batched queue: give batchHandler`)
  const handler = options.batchHandler as ((jobs: ReadonlyArray<DurableBatchJob<unknown>>) => unknown) | undefined
  if (typeof handler !== "function") throw new TypeError(`queues.${name}.batchHandler must be a function`)
  const { attemptTimeoutMs: _timeout, batchHandler: _handler, batch, handler: _none, retries: _retries, ...rest } = options
  return Jobs.batchQueue({
    ...rest,
    ...pickExecution(options),
    batch: batch as Batch,
    handler: (jobs: ReadonlyArray<Types.JobContext<unknown>>) =>
      Effect.flatMap(Effect.runtime<never>(), (runtime) =>
        Effect.map(
          fromPromise(() => handler(jobs.map((job) => promiseBatchJob(job, runtime)))),
          // Each outcome as an Exit; an answer of another shape is refused by the capability's check (by job).
          (outcomes) => (Array.isArray(outcomes) ? outcomes.map(exitOf) : outcomes) as ReadonlyArray<Exit.Exit<unknown, unknown>>
        ))
  }) as unknown as AnyQueueDefinition
}

/** A batch handler's outcome for one job as an `Exit` (a value that is neither shape is not an `Exit`: refused). */
const exitOf = (outcome: unknown): unknown => {
  if (typeof outcome !== "object" || outcome === null) return outcome
  const { ok } = outcome as { readonly ok?: unknown }
  if (ok === true && "value" in outcome) return Exit.succeed((outcome as { readonly value: unknown }).value)
  if (ok === false && "error" in outcome) return Exit.fail((outcome as { readonly error: unknown }).error)
  return outcome
}

/** A job of a batch with promises, run on the object's runtime. */
const promiseBatchJob = (job: Types.JobContext<unknown>, runtime: Runtime.Runtime<never>): DurableBatchJob<unknown> => {
  const { step: _step, ...rest } = promiseJob(job, () => {
    throw new Error("a job of a batch has no durable steps")
  }, runtime)
  return rest
}

const asQueue = (helper: DurabilityJobsImpl, name: string): DurableQueue<unknown, unknown> => {
  const call = <A, E>(body: (queue: Jobs.Queue<unknown, unknown>) => Effect.Effect<A, E>) =>
    DurabilityJobsImpl.runOn(helper, (service) => body((service as unknown as Record<string, Jobs.Queue<unknown, unknown>>)[name]!))
  return {
    add: (options) => call((queue) => queue.add(options)),
    addBulk: (jobs) => call((queue) => queue.addBulk(jobs)),
    get: (id) => call((queue) => queue.get(id)),
    list: (options) => call((queue) => queue.list(options)),
    counts: () => call((queue) => queue.counts),
    logs: (id, options) => call((queue) => queue.logs(id, options)),
    pause: () => call((queue) => queue.pause),
    resume: () => call((queue) => queue.resume),
    isPaused: () => call((queue) => queue.isPaused),
    promote: (id) => call((queue) => queue.promote(id)),
    retry: (id) => call((queue) => queue.retry(id)),
    remove: (id) => call((queue) => queue.remove(id)),
    cancel: (id, reason) => call((queue) => queue.cancel(id, reason)),
    changePriority: (id, priority) => call((queue) => queue.changePriority(id, priority)),
    clean: (options) => call((queue) => queue.clean(options)),
    setRateLimit: (limit) => call((queue) => queue.setRateLimit(limit)),
    wait: (id, options) => call((queue) => queue.wait(id, options)),
    job: (id) => ({ wait: (options) => call((queue) => queue.wait(id, options)) }),
    lease: (options) => call((queue) => queue.lease(options)),
    heartbeat: (id, token, options) => call((queue) => queue.heartbeat(id, token, options)),
    log: (id, token, message) => call((queue) => queue.log(id, token, message)),
    complete: (id, token, result) => call((queue) => queue.complete(id, token, result)),
    fail: (id, token, error, options) => call((queue) => queue.fail(id, token, error, options)),
    deadLetters: {
      list: (options) => call((queue) => queue.deadLetters.list(options)),
      redrive: (options) => call((queue) => queue.deadLetters.redrive(options))
    }
  }
}

class DurabilityJobsImpl extends Helper<Service> {
  readonly #queues: ReadonlySet<string>

  constructor(config: DurabilityJobsConfig<QueueMap>) {
    if (typeof config !== "object" || config === null) throw new TypeError("DurabilityJobs needs a config object")
    const queues = config.queues as unknown
    if (typeof queues !== "object" || queues === null || Array.isArray(queues)) throw new TypeError("queues must be an object")
    const { runtime, scheduler } = attach(config)
    const definitions: Record<string, AnyQueueDefinition> = {}
    for (const [name, options] of Object.entries(queues as Record<string, DurabilityQueueOptions<unknown>>)) {
      definitions[name] = define(name, options)
    }
    const service = runtime.runSync(
      Jobs.make(definitions, {
        ...pickExecution(config),
        ...(config.onLifecycleEvent === undefined ? {} : { onLifecycleEvent: config.onLifecycleEvent })
      }) as Effect.Effect<Service, unknown, Scheduler.Services>
    )
    super({ scheduler, runtime, service, names: Object.keys(definitions) })
    this.#queues = new Set(Object.keys(definitions))
    for (const name of Object.keys(definitions)) Helper.method(this, name, asQueue(this, name))
  }

  /** Runs a call of the queues on the object's runtime (for the queue objects). */
  static runOn<A, E>(helper: DurabilityJobsImpl, body: (service: Service) => Effect.Effect<A, E>): Promise<A> {
    return Helper.run(helper, body)
  }

  flow(root: DurableJobFlowNode): Promise<Types.FlowResult> {
    return Helper.run(this, (service) => service.flow(root))
  }

  event(key: string): Promise<number> {
    return Helper.run(this, (service) => service.event(key))
  }

  bulk(action: Bulk.BulkAction, filter: DurableJobFilter, options?: Bulk.BulkOptions): Promise<Bulk.BulkResult> {
    return Helper.run(this, (service) => service.bulk(action, filter, options))
  }

  static migrate(context: DurabilityContext, target?: string | null): MigrationResult {
    return migrateWith(context, Jobs.migrate, target)
  }

  static readonly consumer = jobsConsumer
  static readonly deadLetterConsumer = jobsDeadLetterConsumer

  static router(options: Router.RouterOptions): DurableJobsRouter {
    const router = new Router.Router(options)
    const routed: DurableJobsRouter = {
      shards: router.shards,
      objects: router.objects,
      shardOf: (key) => router.shardOf(key),
      queue: (name) => router.queue(name),
      flow: (root) => router.flow(root),
      event: (key) => router.event(key),
      bulk: (action, filter, options) => router.bulk(action, filter, options)
    }
    return routed
  }

  static serve(jobs: DurabilityJobsBase, call: unknown): Promise<unknown> {
    try {
      if (!(jobs instanceof DurabilityJobsImpl)) throw new TypeError("DurabilityJobs.serve needs a DurabilityJobs instance")
      const parsed = Protocol.decodeCall(call, jobs.#queues)
      return DurabilityJobsImpl.runOn(jobs, (service) => serve(service, parsed))
    } catch (error) {
      return Promise.reject(error)
    }
  }
}

/**
 * Durable job queues for promise-style code, in a Durable Object: `new DurabilityJobs({ queues: { email: {
 * handler } } })`.
 */
export const DurabilityJobs: DurabilityJobsConstructor = DurabilityJobsImpl as unknown as DurabilityJobsConstructor
