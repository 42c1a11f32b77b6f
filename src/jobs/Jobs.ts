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
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import * as Background from "../engine/Background.js"
import {
  DurableAttemptTimeoutError,
  DurableResultSerializationError,
  InvalidInputError,
  InvalidOptionError,
  JobCanceledError,
  JobStalledError,
  type MigrationError,
  type ParticipantConflictError,
  type StaleLeaseError,
  type StorageError
} from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as Codec from "../shared/codec.js"
import * as Add from "./add.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as JobsInspect from "./inspection.js"
import * as Core from "./core.js"
import type { AnyQueueDefinition, CurrentJobService, QueueDefinition } from "./definition.js"
import * as Manage from "./manage.js"
import * as Options from "./options.js"
import * as Read from "./read.js"
import * as Lease from "./lease.js"
import * as Transport from "./transport.js"
import * as JobsSchema from "./schema.js"
import type * as Types from "./types.js"
import * as Policy from "../engine/policy.js"
import * as Slot from "../engine/slot.js"
import * as StepMemo from "../steps/memo.js"
import * as Validate from "../shared/validate.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as Steps from "../steps/Steps.js"
import type { StorageService } from "../engine/StorageService.js"

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
export type { GroupRateLimit, QueueOptions, Retention } from "./options.js"
export type { AnyQueueDefinition, QueueDefinition } from "./definition.js"
export { DEFAULT_KEEP_LOGS, DEFAULT_MAX_PAYLOAD_BYTES, MAX_ENTRY_BYTES } from "./options.js"
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
  options: Policy.ExecutionOptions & Omit<Options.QueueOptions, "groupRateLimit"> & {
    readonly payload?: Schema.Schema<P, PI> | undefined
    readonly result?: Schema.Schema<R, RI> | undefined
    readonly groupRateLimit?: Options.GroupRateLimit<P> | undefined
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
 * Defines a queue processed by workers elsewhere (`processing: "external"`): no handler here; its due
 * jobs wait for `lease`, and the lease's holder settles them (`complete`/`fail`) with its token.
 */
export const externalQueue = <P = unknown, R = unknown, PI = P, RI = R>(
  options: Policy.ExecutionOptions & Omit<Options.QueueOptions, "groupRateLimit" | "processing"> & {
    readonly payload?: Schema.Schema<P, PI> | undefined
    readonly result?: Schema.Schema<R, RI> | undefined
    readonly groupRateLimit?: Options.GroupRateLimit<P> | undefined
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

export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends QueueDefinition<infer _P, infer _R, infer _E, infer Req> ? Req : never
}[keyof Defs]

/** One queue's calls. */
export interface Queue<P, R> {
  /** Adds a job (or finds it: same id, or a live dedup key). Resolves once it committed. */
  readonly add: (options: Types.AddOptions<P>) => Effect.Effect<Types.AddResult, InvalidInputError | StorageError>
  /** Adds jobs in one transaction: all or none. */
  readonly addBulk: (
    jobs: ReadonlyArray<Types.AddOptions<P>>
  ) => Effect.Effect<ReadonlyArray<Types.AddResult>, InvalidInputError | StorageError>
  readonly get: (id: string) => Effect.Effect<Types.JobInfo<P, R> | undefined, InvalidInputError | StorageError>
  readonly list: (options?: Types.JobListOptions) => Effect.Effect<Types.JobPage<P, R>, InvalidInputError | StorageError>
  readonly counts: Effect.Effect<Record<Types.JobState, number>, StorageError>
  readonly logs: (
    id: string,
    options?: { readonly limit?: number | undefined; readonly offset?: number | undefined }
  ) => Effect.Effect<Types.JobLogs, InvalidInputError | StorageError>
  readonly pause: Effect.Effect<void, StorageError>
  readonly resume: Effect.Effect<void, StorageError>
  readonly isPaused: Effect.Effect<boolean, StorageError>
  /** A delayed job (or one waiting for its retry) becomes due now. True when one was. */
  readonly promote: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** A failed or canceled job runs again with fresh attempts. True when one was. */
  readonly retry: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Deletes a job that is not active, with its descendants and logs. True when one was. */
  readonly remove: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Cancels an unfinished job (an active one: its signal is aborted, it is not retried). True when one was. */
  readonly cancel: (id: string, reason?: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly changePriority: (id: string, priority: number) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Deletes finished jobs; returns how many. */
  readonly clean: (options: Types.CleanOptions) => Effect.Effect<number, InvalidInputError | StorageError>
  /** Replaces the queue's rate limit durably (`null`: none). */
  readonly setRateLimit: (limit: Types.RateLimit | null) => Effect.Effect<void, InvalidInputError | StorageError>
  /** Waits until the job finished (or `timeoutMs` passed) and returns it as it is then. */
  readonly wait: (
    id: string,
    options?: { readonly timeoutMs?: number | undefined }
  ) => Effect.Effect<Types.JobInfo<P, R> | undefined, InvalidInputError | StorageError>
  /**
   * An external queue (`processing: "external"`): leases up to `limit` due jobs to a worker, by priority
   * then insertion order, within the queue's concurrency (leases out at once), rate limits and pause.
   * Each lease counts an attempt and carries a fencing `token`; an expired lease is reclaimed at its end.
   */
  readonly lease: (options?: Lease.LeaseOptions) => Effect.Effect<ReadonlyArray<Lease.Lease<P>>, InvalidInputError | StorageError>
  /** Extends the lease (default by the queue's `leaseMs`) and stores progress; `StaleLeaseError` when the token no longer holds the job. */
  readonly heartbeat: (
    id: string,
    token: number,
    options?: { readonly progress?: unknown; readonly extendMs?: number | undefined }
  ) => Effect.Effect<{ readonly leaseUntil: number }, InvalidInputError | StaleLeaseError | StorageError>
  /**
   * A Queues consumer's first call about an envelope: the leased job, when `token` still holds it, and the
   * token of this delivery (`start` takes the envelope's, so a duplicate message is stale).
   */
  readonly start: (id: string, token: number) => Effect.Effect<
    {
      readonly token: number
      readonly payload: P
      readonly attempt: number
      readonly leaseUntil: number
      readonly leaseMs: number
      readonly idempotencyKey: string
    },
    InvalidInputError | StaleLeaseError | StorageError
  >
  /** Appends a line to the leased job's log; `StaleLeaseError` when the token no longer holds the job. */
  readonly log: (id: string, token: number, message: string) => Effect.Effect<void, InvalidInputError | StaleLeaseError | StorageError>
  /** Completes the leased job with its result; `StaleLeaseError` (nothing written) when the token no longer holds it. */
  readonly complete: (id: string, token: number, result: R) => Effect.Effect<void, InvalidInputError | StaleLeaseError | StorageError>
  /**
   * Fails the leased attempt: retried under the queue's policy (leased again from its retry time), or
   * failed for good when its attempts are spent or `retryable` is false. `StaleLeaseError` as for `complete`.
   */
  readonly fail: (
    id: string,
    token: number,
    error: string | { readonly name?: string | undefined; readonly message: string },
    options?: { readonly retryable?: boolean | undefined }
  ) => Effect.Effect<void, InvalidInputError | StaleLeaseError | StorageError>
  readonly deadLetters: {
    readonly list: (
      options?: { readonly limit?: number | undefined; readonly cursor?: string | undefined }
    ) => Effect.Effect<Types.DeadLetterPage<P>, InvalidInputError | StorageError>
    /** Back to `waiting` with fresh attempts (all, oldest first, up to 1 000; or `ids`); returns how many. */
    readonly redrive: (options?: { readonly ids?: ReadonlyArray<string> | undefined }) => Effect.Effect<number, InvalidInputError | StorageError>
  }
}

export type JobsService<Defs extends Record<string, AnyQueueDefinition>> =
  & { readonly [K in keyof Defs]: Queue<PayloadOf<Defs[K]>, ResultOf<Defs[K]>> }
  & {
    /** Inserts a tree of jobs (across queues) in one transaction: a parent runs once its children finished. */
    readonly flow: (root: Types.FlowNode) => Effect.Effect<Types.FlowResult, InvalidInputError | StorageError>
    /** Deletes every job created before `before` (strict); returns how many. */
    readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
  }

export interface JobsOptions extends Policy.ExecutionOptions {
  readonly onLifecycleEvent?: Types.JobEventHook | undefined
}

export const CAPABILITY = "jobs"
export const TABLE = JobsSchema.JOBS
export const migrations = JobsSchema.migrations

export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

const DEFAULT_WAIT_MS = 30_000

/** The engine's events about jobs, told to the user's hook as job events. */
const engineEvents = (hook: Types.JobEventHook | undefined, canceling: Map<string, string>): Lifecycle.LifecycleHook | undefined =>
  hook === undefined ? undefined : (event) => {
    // Queue "" is the library's own retention upkeep, not a user's job.
    if (event.type === "purged" || event.entityKind !== "job" || event.queue === "") return
    const base = { entityKind: "job" as const, queue: String(event.queue), id: String(event.jobId), timestamp: event.timestamp }
    switch (event.type) {
      case "attempt_started":
        return hook({ ...base, type: "started", attempt: event.attempt })
      case "attempt_settled":
        if (event.outcome === "completed") {
          const reason = canceling.get(event.id)
          return hook(
            reason === undefined
              ? { ...base, type: "completed", attempt: event.attempt, durationMs: event.durationMs }
              : { ...base, type: "canceled", reason }
          )
        }
        if (event.outcome === "retry_scheduled") {
          return hook({ ...base, type: "retry_scheduled", attempt: event.attempt, error: event.error, nextAttemptAt: event.nextAttemptAt })
        }
        return event.error.name === "JobCanceledError"
          ? hook({ ...base, type: "canceled", reason: canceling.get(event.id) ?? event.error.message })
          : hook({ ...base, type: "failed", attempt: event.attempt, error: event.error })
      case "terminal":
        return hook({ ...base, type: "failed", attempt: event.attempt, error: event.error })
      default:
        return
    }
  }

const isTerminal = (error: unknown) =>
  error instanceof JobCanceledError || error instanceof DurableResultSerializationError || error instanceof JobStalledError ||
  StepMemo.isStepFailure(error)

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
    const queues = new Map<string, Core.QueueRuntime>()
    if (typeof definitions === "object" && definitions !== null) {
      const base = yield* Policy.resolve("", options, Policy.defaults)
      for (const [name, definition] of Object.entries(definitions)) {
        if (typeof definition !== "object" || definition === null) continue
        if (name.includes("/")) {
          return yield* new InvalidOptionError({ field: `queues.${name}`, kind: "type", message: `A queue name cannot contain "/": ${JSON.stringify(name)}` })
        }
        const resolved = yield* Options.resolve(`queues.${name}.`, definition)
        const policy = yield* Policy.resolve(`queues.${name}.`, definition, base)
        queues.set(name, {
          name,
          definition,
          options: resolved,
          maxAttempts: policy.maxAttempts,
          slot: resolved.concurrency === undefined ? undefined : Slot.make(resolved.concurrency),
          override: undefined,
          paused: false
        })
      }
    }
    const canceling = new Map<string, string>()
    const background = yield* Background.Background
    // Filled once the table is attached: the participant reads it only when jobs run.
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
    const core = { queues, hook, canceling, background, retained: new Map(), seq: { next: 1 }, objectId } as unknown as Core.Core
    const mutable = core as { -readonly [K in keyof Core.Core]: Core.Core[K] }
    const capability = yield* Capability.make<AnyQueueDefinition, string>({
      kind: CAPABILITY,
      owner: "DurabilityJobs",
      module: "Jobs",
      table: JobsSchema.JOBS,
      keyColumn: "key",
      nameColumn: "queue",
      entityKind: "job",
      definitionsField: "queues",
      migrations,
      definitions,
      options: { ...options, onLifecycleEvent: engineEvents(hook, canceling) },
      timeoutError: (name) => (timeoutMs) =>
        new DurableAttemptTimeoutError({ message: `A job of queue "${name}" timed out after ${timeoutMs}ms`, timeoutMs }),
      isTerminal: () => isTerminal,
      releaseKeysOnPurge: true,
      purgeReason: () => new JobCanceledError({ message: "The job was purged" }),
      participant: ({ storage }) => {
        mutable.storage = storage
        mutable.flow = { storage, queueOf: (name) => queues.get(name)?.options }
        return Core.participant(core, context as Context.Context<unknown>, CurrentJob)
      }
    })
    mutable.handle = capability.handle
    if (transported.length > 0) {
      const policy = yield* Policy.resolve("", {
        attemptTimeoutMs: 30_000,
        retries: { maxAttempts: 12, delay: (attempt) => Math.min(60_000, 1_000 * 2 ** (attempt - 1)) }
      }, Policy.defaults)
      yield* scheduler.attach(Transport.outbox(core, policy))
    }
    mutable.watchers = capability.watchers
    const [last] = yield* capability.storage.exec(`SELECT MAX(seq) AS seq FROM ${JobsSchema.JOBS}`)
    core.seq.next = Number(last?.seq ?? 0) + 1
    yield* Manage.loadOverrides(core)
    yield* Manage.cancelInterrupted(core)
    yield* Core.ensureRetention(core)
    yield* Core.resumeLeases(core)
    const calls = new Map([...queues].map(([name, queue]) => [name, queueService(core, queue)] as const))
    yield* InspectionRegistry.register(JobsInspect.source(core, calls, capability.purgeBefore))
    return service(core, calls, capability.purgeBefore) as unknown as JobsService<Defs>
  })

const idOf = (id: unknown) => Validate.key("id", id)

/** The calls of one queue. */
const queueService = (core: Core.Core, queue: Core.QueueRuntime): Queue<unknown, unknown> => {
  const withId = <A, E>(name: string, body: (id: string) => Effect.Effect<A, E>) => (id: string) =>
    Effect.flatMap(idOf(id), body).pipe(Effect.withSpan(`Jobs.${name}`))
  return {
    // Untraced: the hot path (a span costs more than the insert).
    add: (options) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const [result] = yield* Add.addAll(core, [yield* Add.prepare(queue, options, now, "", true)], now)
        return result!
      }),
    addBulk: (jobs) =>
      Effect.gen(function*() {
        if (!Array.isArray(jobs)) {
          return yield* new InvalidInputError({ field: "jobs", kind: "type", message: "jobs must be an array" })
        }
        const now = yield* Clock.currentTimeMillis
        const prepared: Array<Add.Prepared> = []
        for (const [index, job] of jobs.entries()) prepared.push(yield* Add.prepare(queue, job, now, `jobs[${index}].`, true))
        return prepared.length === 0 ? [] : yield* Add.addAll(core, prepared, now)
      }),
    get: withId("get", (id) => Read.get(core, queue, id)),
    list: (options) => Read.list(core, queue, options).pipe(Effect.withSpan("Jobs.list")),
    counts: Read.counts(core, queue),
    logs: (id, options) => Effect.flatMap(idOf(id), (checked) => Read.logs(core, queue, checked, options)),
    pause: Manage.setPaused(core, queue, true),
    resume: Manage.setPaused(core, queue, false),
    isPaused: Manage.isPaused(core, queue),
    promote: withId("promote", (id) => Manage.promote(core, queue, id)),
    retry: withId("retry", (id) => Manage.retry(core, queue, id)),
    remove: withId("remove", (id) => Manage.remove(core, queue, id)),
    cancel: (id, reason) =>
      Effect.gen(function*() {
        const checked = yield* idOf(id)
        if (reason !== undefined && typeof reason !== "string") {
          return yield* new InvalidInputError({ field: "reason", kind: "type", message: `reason must be a string, got ${Validate.shown(reason)}` })
        }
        return yield* Manage.cancel(core, queue, checked, (reason ?? "").slice(0, 1_000))
      }).pipe(Effect.withSpan("Jobs.cancel")),
    changePriority: (id, priority) =>
      Effect.gen(function*() {
        const checked = yield* idOf(id)
        return yield* Manage.changePriority(core, queue, checked, yield* Add.priorityOf("priority", priority))
      }),
    clean: (options) => Manage.clean(core, queue, options).pipe(Effect.withSpan("Jobs.clean")),
    setRateLimit: (limit) => Manage.setRateLimit(core, queue, limit),
    wait: (id, options = {}) =>
      Effect.gen(function*() {
        const checked = yield* idOf(id)
        if (typeof options !== "object" || options === null) {
          return yield* new InvalidInputError({ field: "options", kind: "type", message: "options must be an object" })
        }
        const timeoutMs = options.timeoutMs === undefined ? DEFAULT_WAIT_MS : yield* Validate.milliseconds("timeoutMs", options.timeoutMs)
        return yield* Read.wait(core, queue, checked, timeoutMs)
      }),
    lease: (options) => Lease.lease(core, queue, options),
    start: (id, token) => Effect.flatMap(idOf(id), (checked) => Lease.start(core, queue, checked, token)),
    heartbeat: (id, token, options) => Effect.flatMap(idOf(id), (checked) => Lease.heartbeat(core, queue, checked, token, options)),
    log: (id, token, message) => Effect.flatMap(idOf(id), (checked) => Lease.log(core, queue, checked, token, message)),
    complete: (id, token, result) => Effect.flatMap(idOf(id), (checked) => Lease.complete(core, queue, checked, token, result)),
    fail: (id, token, error, options) => Effect.flatMap(idOf(id), (checked) => Lease.fail(core, queue, checked, token, error, options)),
    deadLetters: {
      list: (options) => Read.deadLetters(core, queue, options),
      redrive: (options = {}) =>
        typeof options !== "object" || options === null
          ? Effect.fail(new InvalidInputError({ field: "options", kind: "type", message: "options must be an object" }))
          : Manage.redrive(core, queue, options.ids).pipe(Effect.withSpan("Jobs.redrive"))
    }
  }
}

const service = (
  core: Core.Core,
  calls: ReadonlyMap<string, Queue<unknown, unknown>>,
  purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
) => {
  const queues: Record<string, Queue<unknown, unknown>> = {}
  for (const [name, queue] of calls) queues[name] = queue
  const flow = (root: Types.FlowNode) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      return yield* Add.addFlow(core, yield* Add.prepareFlow(core, root, now), now)
    }).pipe(Effect.withSpan("Jobs.flow"))
  return { ...queues, flow, purgeBefore }
}

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

