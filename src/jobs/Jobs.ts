/**
 * Job queues in a Durable Object: states, priorities, dedup, token-bucket rate limits, flows,
 * retention, dead letters, progress and logs, on the object's scheduler and its one alarm.
 *
 * Every job's state lives in the object's SQLite, so one synchronous transaction covers the job
 * row, its dedup key, its queue's rate-limit buckets, its parent's counter and the alarm. A job is
 * a record of the engine (`DurableTable`): claimed durably before its handler runs, retried by its
 * queue's `Schedule`, settled conditionally. Queues add a start order (priority, then first added),
 * a pause flag every path honours, their own concurrency inside the shared permits, and token
 * buckets checked in the claim's transaction (an empty bucket moves its jobs to its next token, so
 * the wake-up goes there: no polling).
 *
 * Handlers are Effects; their requirements are taken from the context `make` runs in, as for
 * operations. In a handler, `Jobs.progress(n)` and `Jobs.log(message)` reach the current job, and
 * `Jobs.step(name, effect)` is a durable step of it (see `Steps`).
 * @packageDocumentation
 */
import * as Clock from "effect/Clock"
import type * as Exit from "effect/Exit"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import * as Background from "../engine/Background.js"
import {
  type InvalidInputError,
  InvalidOptionError,
  type MigrationError,
  type ParticipantConflictError,
  type StorageError
} from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as Codec from "../shared/codec.js"
import * as Late from "../shared/late.js"
import * as Add from "./add.js"
import * as CancelOn from "./cancelOn.js"
import * as Bulk from "./bulk.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as JobsInspect from "./inspection.js"
import * as JobsTable from "./jobsTable.js"
import * as Keyed from "./keyed.js"
import * as Core from "./core.js"
import type { AnyQueueDefinition, CurrentJobService, QueueDefinition } from "./definition.js"
import * as Manage from "./manage.js"
import type * as Options from "./options.js"
import * as QueueCalls from "./queue.js"
import * as Serve from "./serve.js"
import type { Queue } from "./queue.js"
import * as Setup from "./setup.js"
import { CAPABILITY } from "./setup.js"
import type * as Tracing from "./tracing.js"
import * as Transport from "./transport.js"
import * as JobsSchema from "./schema.js"
import type * as Types from "./types.js"
import * as Policy from "../engine/policy.js"
import * as StepMemo from "../steps/memo.js"
import * as Validate from "../shared/validate.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as Steps from "../steps/Steps.js"
import { StorageService } from "../engine/StorageService.js"

export type {
  AddOptions,
  AddResult,
  ChildValue,
  CleanOptions,
  DeadLetter,
  DeadLetterPage,
  DedupOptions,
  FlowNode,
  FlowResult,
  JobContext,
  JobEvent,
  JobEventHook,
  JobInfo,
  JobListOptions,
  JobLogLine,
  JobLogs,
  JobPage,
  JobState,
  RateLimit
} from "./types.js"
export { JOB_STATES } from "./types.js"
export type { BulkAction, BulkOptions, BulkResult, JobFilter } from "./bulk.js"
export { BULK_ACTIONS, DEFAULT_BULK_LIMIT, MAX_BULK_LIMIT, MAX_EXAMINED as MAX_BULK_EXAMINED } from "./bulk.js"
export type { Batch, GroupRateLimit, KeyedConcurrency, QueueOptions, Retention } from "./options.js"
export type { AnyQueueDefinition, BatchHandler, QueueDefinition } from "./definition.js"
export { DEFAULT_KEEP_LOGS, DEFAULT_MAX_PAYLOAD_BYTES, MAX_BATCH_SIZE, MAX_BATCH_WAIT_MS, MAX_ENTRY_BYTES } from "./options.js"
export { JobBatchOutcomesError } from "./batch.js"
export { MAX_FLOW_JOBS } from "./add.js"
export { IDEMPOTENCY_PREFIX } from "./core.js"

/** The job a handler runs for: `Jobs.progress` and `Jobs.log` read it. */
export class CurrentJob extends Context.Tag("durability/Jobs/CurrentJob")<CurrentJob, CurrentJobService>() {}

/** Stores the current job's progress (a number or JSON) and tells a `progress` event. */
export const progress = (value: unknown): Effect.Effect<void, InvalidInputError | StorageError, CurrentJob> =>
  Effect.flatMap(CurrentJob, ({ job }) => job.progress(value))

/** Appends a line to the current job's log. */
export const log = (message: string): Effect.Effect<void, InvalidInputError | StorageError, CurrentJob> =>
  Effect.flatMap(CurrentJob, ({ job }) => job.log(message))

/** A durable step of the current job: its first successful result is stored and replayed (see `Steps.step`). */
export const step = Steps.step

/** Defines a queue: its handler, optional payload/result schemas (checked at `add`, decoded when run) and options. */
export const queue = <P, R, E = never, Req = never, PI = P, RI = R>(
  options: Policy.ExecutionOptions & Omit<Options.QueueOptions, "groupRateLimit" | "concurrency"> & {
    readonly payload?: Schema.Schema<P, PI> | undefined
    readonly result?: Schema.Schema<R, RI> | undefined
    readonly groupRateLimit?: Options.GroupRateLimit<P> | undefined
    readonly concurrency?: number | Options.KeyedConcurrency<NoInfer<P>> | undefined
    readonly handler: (job: Types.JobContext<P>) => Effect.Effect<R, E, Req>
  }
  // NoInfer: inferred from the options only. Inline in `make({ … })`, the contextual type (any queue,
  // `JobContext<never>`) would otherwise make an unannotated handler's payload `never`, and `add` uncallable.
  // Every attempt gets its `CurrentJob` and its steps' `CurrentCall`: neither is a requirement of the handler.
): QueueDefinition<NoInfer<P>, R, E, Exclude<Req, CurrentJob | Steps.CurrentCall>> => {
  const { payload, result, ...rest } = options
  return {
    ...rest,
    handler: options.handler as (job: Types.JobContext<P>) => Effect.Effect<R, E, Exclude<Req, CurrentJob | Steps.CurrentCall>>,
    payload: Codec.fromSchema(payload),
    result: Codec.fromSchema(result)
  }
}

/**
 * Defines a batched queue: its handler takes up to `batch.size` due jobs at once and returns one `Exit` per
 * job, in order (`Exit.succeed(result)`, `Exit.fail(error)`); each job is settled on its own, with its own
 * retries, cancel and events. A failure of the whole call fails every job of the batch (each retried under
 * the policy). `batch.waitMs`: when fewer than `size` jobs are due, they wait (durably) up to this long for more.
 */
export const batchQueue = <P, R, E = never, Req = never, PI = P, RI = R>(
  options: Policy.ExecutionOptions & Omit<Options.QueueOptions, "groupRateLimit" | "processing" | "batch"> & {
    /** The batches' size and wait. */
    readonly batch: Options.Batch
    readonly payload?: Schema.Schema<P, PI> | undefined
    readonly result?: Schema.Schema<R, RI> | undefined
    readonly groupRateLimit?: Options.GroupRateLimit<P> | undefined
    readonly handler: (jobs: ReadonlyArray<Types.JobContext<P>>) => Effect.Effect<ReadonlyArray<Exit.Exit<R, E>>, E, Req>
  }
): QueueDefinition<NoInfer<P>, R, E, Req> => {
  const { handler, payload, result, ...rest } = options
  return {
    ...rest,
    // Never called: the capability calls `batchHandler` with the jobs started together.
    handler: (() => Effect.die(new Error("a batched queue's jobs run in batches"))) as (job: Types.JobContext<P>) => Effect.Effect<R>,
    batchHandler: handler,
    payload: Codec.fromSchema(payload),
    result: Codec.fromSchema(result)
  }
}

/**
 * Defines a queue processed by workers elsewhere (`processing: "external"`): no handler here; its due
 * jobs wait for `lease`, and the lease's holder settles them (`complete`/`fail`) with its token.
 */
export const externalQueue = <P = unknown, R = unknown, PI = P, RI = R>(
  options: Policy.ExecutionOptions & Omit<Options.QueueOptions, "groupRateLimit" | "processing" | "concurrency"> & {
    readonly payload?: Schema.Schema<P, PI> | undefined
    readonly result?: Schema.Schema<R, RI> | undefined
    readonly groupRateLimit?: Options.GroupRateLimit<P> | undefined
    readonly concurrency?: number | Options.KeyedConcurrency<NoInfer<P>> | undefined
    /** Deliver the leased jobs through a Cloudflare Queue (`{ queue: env.EMAIL_QUEUE }`) instead of waiting for `lease`. */
    readonly processing?: Options.Transport | undefined
  }
): QueueDefinition<NoInfer<P>, NoInfer<R>, never, never> => {
  const { payload, processing, result, ...rest } = options
  return {
    ...rest,
    processing: processing ?? "external",
    // Never called: the engine claims an external queue's job only to end a lease that stalled too often.
    handler: (() => Effect.die(new Error("an external queue's jobs are not run here"))) as (job: Types.JobContext<P>) => Effect.Effect<R>,
    payload: Codec.fromSchema(payload),
    result: Codec.fromSchema(result)
  }
}

export type { Lease as JobLease, LeaseOptions as JobLeaseOptions } from "./lease.js"

type PayloadOf<D> = D extends QueueDefinition<infer P, infer _R, infer _E, infer _Req> ? P : never
type ResultOf<D> = D extends QueueDefinition<infer _P, infer R, infer _E, infer _Req> ? R : never

/** The services the handlers of a set of queue definitions need, which `make` takes from its context. */
export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends QueueDefinition<infer _P, infer _R, infer _E, infer Req> ? Req : never
}[keyof Defs]
export type { Queue } from "./queue.js"
export { CAPABILITY } from "./setup.js"

/** The job queues service `make` returns: one `Queue` per definition's name, and the calls across queues. */
export type JobsService<Defs extends Record<string, AnyQueueDefinition>> =
  & { readonly [K in keyof Defs]: Queue<PayloadOf<Defs[K]>, ResultOf<Defs[K]>> }
  & {
    /** Inserts a tree of jobs (across queues) in one transaction: a parent runs once its children finished. */
    readonly flow: (root: Types.FlowNode) => Effect.Effect<Types.FlowResult, InvalidInputError | StorageError>
    /** Deletes every job created before `before` (strict); returns how many. */
    readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
    /**
     * An event arrived: every unfinished job whose `cancelOn` is `key` is canceled as by `cancel` (an
     * executing one has its signal aborted), in one transaction; returns how many. Inside
     * `Scheduler.transaction` it commits with the caller's own writes.
     */
    readonly event: (key: string) => Effect.Effect<number, InvalidInputError | StorageError>
    /**
     * Cancels, removes, retries, promotes or redrives the jobs (dead letters) matching `filter`, one bounded
     * chunk per call in one transaction; pass the answer's `cursor` back until `done` (see docs/job-queues.md,
     * "Bulk operations"). Each job changes as the call on its id changes it.
     */
    readonly bulk: (
      action: Bulk.BulkAction,
      filter: Bulk.JobFilter,
      options?: Bulk.BulkOptions
    ) => Effect.Effect<Bulk.BulkResult, InvalidInputError | StorageError>
  }

export interface JobsOptions extends Policy.ExecutionOptions {
  /**
   * Told each job event (added, started, completed, retried, failed, …) after it committed, e.g. for metrics.
   */
  readonly onLifecycleEvent?: Types.JobEventHook | undefined
}

/** The jobs' SQL table. */
export const TABLE = JobsSchema.JOBS
/** The job tables' migrations, in order: what `migrate` applies. */
export const migrations = JobsSchema.migrations

/**
 * Applies (default: latest) or reverts (`null`: all) the job tables' migrations, through the
 * `StorageService`.
 */
export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

/**
 * Attaches job queues to the object's scheduler (running the tables' migrations first) and returns their
 * service.
 */
export const make = <const Defs extends Record<string, AnyQueueDefinition>>(
  definitions: Defs,
  options: JobsOptions = {}
): Effect.Effect<
  JobsService<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | Background.Background | RequirementsOf<Defs>
> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<RequirementsOf<Defs>>()
    const hook = options.onLifecycleEvent
    if (hook !== undefined && typeof hook !== "function") {
      return yield* new InvalidOptionError({
        field: "onLifecycleEvent",
        kind: "type",
        message: `onLifecycleEvent must be a function, got ${Validate.shown(hook)}`
      })
    }
    const queues = yield* Setup.queuesOf(definitions, options)
    const scheduler = yield* Scheduler.Scheduler
    const objectId = scheduler.config.objectId
    const transported = [...queues.values()].filter((queue) => queue.options.external?.transport !== undefined)
    if (transported.length > 0 && objectId === undefined) {
      return yield* new InvalidOptionError({
        field: `queues.${transported[0]!.name}.processing`,
        kind: "type",
        message: `queues.${transported[0]!.name}.processing sends jobs to a Cloudflare Queue, whose consumer needs this object's id: ` +
          "give the scheduler's objectId (the promise face takes it from the object's context)"
      })
    }
    const storage = yield* StorageService
    const canceling = new Map<string, string>()
    const spans: Tracing.Spans = new Map()
    const attached = Late.make<Setup.Attached>("The jobs' table handle")
    const core = Setup.makeCore({
      storage,
      background: yield* Background.Background,
      queues,
      hook,
      canceling,
      spans,
      retained: new Map(),
      flow: { storage, queueOf: (name) => queues.get(name)?.options },
      objectId,
      ...([...queues.values()].some((queue) => queue.options.keyed !== undefined) ? { rounds: Keyed.makeRounds() } : {})
    }, attached)
    const capability = yield* Capability.make(
      Setup.spec(
        definitions,
        { ...options, onLifecycleEvent: Setup.engineEvents(hook, canceling, spans) },
        core,
        context as Context.Context<unknown>,
        CurrentJob
      )
    )
    const last = yield* JobsTable.lastSeq(storage)
    attached.set({ handle: capability.handle, watchers: capability.watchers, seq: { next: last + 1 } })
    yield* Manage.loadOverrides(core)
    yield* Manage.cancelInterrupted(core)
    yield* Core.ensureRetention(core)
    yield* Core.resumeLeases(core)
    yield* Transport.resumeOutbox(core, transported.map((queue) => queue.name))
    const calls = new Map([...queues].map(([name, queue]) => [name, QueueCalls.calls(core, queue)] as const))
    const bulk = Effect.fn("Jobs.bulk")(function*(action: Bulk.BulkAction, filter: Bulk.JobFilter, options?: Bulk.BulkOptions) {
      return yield* Bulk.bulk(core, action, filter, options)
    })
    yield* InspectionRegistry.register(JobsInspect.source(core, calls, capability.purgeBefore, bulk))
    // One queue's calls per definition, built over its name at run time: TS cannot relate a record
    // built key by key to the mapped type (each queue's payload and result types are its definition's).
    const service = {
      ...Object.fromEntries(calls),
      flow: flow(core),
      purgeBefore: capability.purgeBefore,
      event: (key: string) => CancelOn.event(core, key).pipe(Effect.withSpan("Jobs.event")),
      bulk
    } as JobsService<Defs>
    Serve.register(service, new Set(calls.keys()))
    return service
  })

/**
 * Answers one call of the jobs protocol (`JobsProtocol`) against the queues of `jobs` (what `make`
 * returned): the Effect face's `DurabilityJobs.serve`, for the method a `JobsRouter` or `JobsConsumer`
 * calls over RPC. A call that does not decode fails with `InvalidInputError` naming the field, nothing
 * executed; a lease call's stale (or, from version 2, canceled) token is an answer, not a failure.
 */
export const serve = <Defs extends Record<string, AnyQueueDefinition>>(
  jobs: JobsService<Defs>,
  call: unknown
): Effect.Effect<unknown, InvalidInputError | StorageError> => Serve.serveCall(jobs, call).pipe(Effect.withSpan("Jobs.serve"))

/** Inserts a tree of jobs (across queues) in one transaction. */
const flow = (core: Core.Core) => (root: Types.FlowNode) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    return yield* Add.addFlow(core, yield* Add.prepareFlow(core, root, now), now)
  }).pipe(Effect.withSpan("Jobs.flow"))

/** A service tag for an application's job queues, when you want them in a layer. */
export const tag = <Defs extends Record<string, AnyQueueDefinition>>(key: string) => Context.GenericTag<JobsService<Defs>>(key)

/** The job queues as a layer over the engine (provide the handlers' requirements to it). */
export const layer = <const Defs extends Record<string, AnyQueueDefinition>>(
  service: Context.Tag<JobsService<Defs>, JobsService<Defs>>,
  definitions: Defs,
  options: JobsOptions = {}
): Layer.Layer<
  JobsService<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | Background.Background | RequirementsOf<Defs>
> => Layer.effect(service, make(definitions, options))

