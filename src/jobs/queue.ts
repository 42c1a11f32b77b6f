/**
 * One queue's calls: their contract (`Queue`, re-exported by `Jobs`) and how each is made from the
 * shared state and the queue's runtime (adding, reading, managing, and leasing to external workers).
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Time from "../shared/duration.js"
import { InvalidInputError, type StaleLeaseError, type StorageError } from "../shared/Errors.js"
import * as Validate from "../shared/validate.js"
import * as Add from "./add.js"
import type * as Core from "./core.js"
import * as Lease from "./lease.js"
import * as Manage from "./manage.js"
import * as Read from "./read.js"
import * as Tracing from "./tracing.js"
import type * as Types from "./types.js"

const DEFAULT_WAIT_MS = 30_000

/** One queue's calls. Their lengths of time (`delayMs`, `timeoutMs`, …) take a Duration or milliseconds. */
export interface Queue<P, R> {
  /** Adds a job (or finds it: same id, or a live dedup key). Resolves once it committed. */
  readonly add: (options: Types.AddOptions<P>) => Effect.Effect<Types.AddResult, InvalidInputError | StorageError>
  /** Adds jobs in one transaction: all or none. */
  readonly addBulk: (
    jobs: ReadonlyArray<Types.AddOptions<P>>
  ) => Effect.Effect<ReadonlyArray<Types.AddResult>, InvalidInputError | StorageError>
  /** Reads one job; undefined when there is none with this id. */
  readonly get: (id: string) => Effect.Effect<Types.JobInfo<P, R> | undefined, InvalidInputError | StorageError>
  /** Reads a page of the queue's jobs, in the order they were added, optionally of some states only. */
  readonly list: (options?: Types.JobListOptions) => Effect.Effect<Types.JobPage<P, R>, InvalidInputError | StorageError>
  /** The queue's jobs counted by state. */
  readonly counts: Effect.Effect<Record<Types.JobState, number>, StorageError>
  /** Reads a page of a job's kept log lines (`offset`: lines to skip). */
  readonly logs: (
    id: string,
    options?: { readonly limit?: number | undefined; readonly offset?: number | undefined }
  ) => Effect.Effect<Types.JobLogs, InvalidInputError | StorageError>
  /** Pauses the queue durably: none of its jobs starts until `resume` (running ones finish). */
  readonly pause: Effect.Effect<void, StorageError>
  /** Resumes a paused queue. */
  readonly resume: Effect.Effect<void, StorageError>
  /** Whether the queue is paused. */
  readonly isPaused: Effect.Effect<boolean, StorageError>
  /** A delayed job (or one waiting for its retry) becomes due now. True when one was. */
  readonly promote: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** A failed or canceled job runs again with fresh attempts. True when one was. */
  readonly retry: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Deletes a job that is not active, with its descendants and logs. True when one was. */
  readonly remove: (id: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Cancels an unfinished job (an active one: its signal is aborted, it is not retried). True when one was. */
  readonly cancel: (id: string, reason?: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Changes the start order of a job not started yet (higher first). True when one was. */
  readonly changePriority: (id: string, priority: number) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Deletes finished jobs; returns how many. */
  readonly clean: (options: Types.CleanOptions) => Effect.Effect<number, InvalidInputError | StorageError>
  /** Replaces the queue's rate limit durably (`null`: none). */
  readonly setRateLimit: (limit: Types.RateLimit | null) => Effect.Effect<void, InvalidInputError | StorageError>
  /** Waits until the job finished (or `timeoutMs`, default 30 seconds, passed) and returns it as it is then. */
  readonly wait: (
    id: string,
    options?: { readonly timeoutMs?: Time.CallDuration | undefined }
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
    options?: { readonly progress?: unknown; readonly extendMs?: Time.CallDuration | undefined }
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
  /** The queue's dead letters (`deadLetter: true`): jobs that failed for good, to read and redrive. */
  readonly deadLetters: {
    /** Reads a page of dead letters. */
    readonly list: (
      options?: { readonly limit?: number | undefined; readonly cursor?: string | undefined }
    ) => Effect.Effect<Types.DeadLetterPage<P>, InvalidInputError | StorageError>
    /** Back to `waiting` with fresh attempts (all, oldest first, up to 1 000; or `ids`); returns how many. */
    readonly redrive: (options?: { readonly ids?: ReadonlyArray<string> | undefined }) => Effect.Effect<number, InvalidInputError | StorageError>
  }
}

const idOf = (id: unknown) => Validate.key("id", id)

type ShardPageOf = (options: Types.JobListOptions) => ReturnType<typeof Read.shardPage>

// A queue's shard page is for the router's protocol only (`serve`), not a call of the public `Queue`.
const shardPages = new WeakMap<Queue<unknown, unknown>, ShardPageOf>()

/** A page of `queue` for a router: its jobs with the list cursor after each (one read; see `Read.shardPage`). */
export const shardPage = (queue: Queue<unknown, unknown>, options: Types.JobListOptions): ReturnType<typeof Read.shardPage> => {
  const page = shardPages.get(queue)
  return page === undefined
    ? Effect.fail(new InvalidInputError({ field: "queue", kind: "type", message: "Not a queue made by Jobs.make" }))
    : page(options)
}

/** The calls of one queue. */
export const calls = (core: Core.Core, queue: Core.QueueRuntime): Queue<unknown, unknown> => {
  const withId = <A, E>(name: string, body: (id: string) => Effect.Effect<A, E>) => (id: string) =>
    Effect.flatMap(idOf(id), body).pipe(Effect.withSpan(`Jobs.${name}`))
  const made: Queue<unknown, unknown> = {
    // Traced only with a tracer of the user's: on the hot path, a span would cost more than the insert.
    add: (options) =>
      Tracing.traced(
        "Jobs.add",
        typeof options?.id === "string" ? { "job.queue": queue.name, "job.id": options.id } : { "job.queue": queue.name },
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const [result] = yield* Add.addAll(core, [yield* Add.prepare(queue, options, now, "", true)], now)
          return result!
        })
      ),
    addBulk: (jobs) =>
      Tracing.traced("Jobs.addBulk", { "job.queue": queue.name, "job.count": Array.isArray(jobs) ? jobs.length : 0 }, Effect.gen(function*() {
        if (!Array.isArray(jobs)) {
          return yield* new InvalidInputError({ field: "jobs", kind: "type", message: "jobs must be an array" })
        }
        const now = yield* Clock.currentTimeMillis
        const prepared: Array<Add.Prepared> = []
        for (const [index, job] of jobs.entries()) prepared.push(yield* Add.prepare(queue, job, now, `jobs[${index}].`, true))
        return prepared.length === 0 ? [] : yield* Add.addAll(core, prepared, now)
      })),
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
        const timeoutMs = options.timeoutMs === undefined ? DEFAULT_WAIT_MS : yield* Time.milliseconds("timeoutMs", options.timeoutMs)
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
  shardPages.set(made, (options) => Read.shardPage(core, queue, options))
  return made
}
