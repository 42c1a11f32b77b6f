/**
 * The job queues' public shapes, shared by the Effect module (`Jobs`) and the promise face
 * (`DurabilityJobs`), which re-export them.
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { CallDuration } from "../shared/duration.js"
import type { InvalidInputError, SerializedError, StorageError } from "../shared/Errors.js"
import type { RateLimit } from "./options.js"

/** `active` is a job executing in this object now: after an eviction, nothing is active. */
export type JobState = "waiting" | "delayed" | "active" | "waiting-children" | "completed" | "failed" | "canceled"

/** Every job state, in a job's order of life: to iterate counts or build a filter. */
export const JOB_STATES: ReadonlyArray<JobState> = [
  "waiting",
  "delayed",
  "active",
  "waiting-children",
  "completed",
  "failed",
  "canceled"
]

/** What a job's handler is called with (the Effect face; `DurableJob` in `durability` has promises). */
export interface JobContext<P = unknown> {
  /** The job's id, given at `add` or generated. */
  readonly id: string
  /** The queue the job belongs to. */
  readonly queue: string
  /** The job's payload, as added (decoded by the queue's payload schema, if it has one). */
  readonly payload: P
  /** 1-based; already durably counted when the handler runs. */
  readonly attempt: number
  /** The attempts the queue's retry policy allows in all; `attempt === maxAttempts` is the last. */
  readonly maxAttempts: number
  /** Aborted on timeout, cancel, purge or shutdown. */
  readonly signal: AbortSignal
  /** `durability-job:v1:<generation>`: stable for the job across retries and evictions (new after `retry`/`redrive`). */
  readonly idempotencyKey: string
  /** Stores the job's progress (a number or any JSON, at most 64 KiB) and tells a `progress` event. */
  readonly progress: (value: unknown) => Effect.Effect<void, InvalidInputError | StorageError>
  /** Appends a line to the job's log (at most 64 KiB; the newest `keepLogs` are kept). */
  readonly log: (message: string) => Effect.Effect<void, InvalidInputError | StorageError>
  /** The values and failures of the job's children, by child id. */
  readonly childrenValues: Effect.Effect<Readonly<Record<string, ChildValue>>, StorageError>
}

/** What a parent job reads of one child: its state and, once it finished, its result or error. */
export interface ChildValue {
  /** The child's queue. */
  readonly queue: string
  /** The child's state when read. */
  readonly state: JobState
  /** The child's result, once it completed. */
  readonly result?: unknown
  /** The child's error, once it failed. */
  readonly error?: SerializedError
}

/**
 * `Time`: how a call's lengths of time are given, a Duration or milliseconds on the Effect face
 * (`"10 minutes"`, `Duration.seconds(30)`, `30_000`), milliseconds (`<…, number>`) on the promise face.
 */
export interface DedupOptions<Time = CallDuration> {
  /** The dedup key: a second job with the same key, while the first holds it, is a duplicate. */
  readonly key: string
  /** Throttle: duplicates are dropped for this long after the first was added, whatever its state. */
  readonly ttlMs?: Time | undefined
  /** `drop` (default) keeps the first job; `replace` (debounce) replaces the payload and run time of a job not started yet. */
  readonly mode?: "drop" | "replace" | undefined
}

/** `Time`: as for `DedupOptions`. */
export interface AddOptions<P = unknown, Time = CallDuration> {
  /** Default: a generated id. The same id again returns the existing job (nothing added) until it is removed. */
  readonly id?: string | undefined
  /** The job's payload: JSON, stored with the job. */
  readonly payload: P
  /** Run this long from now; or give `runAt`. */
  readonly delayMs?: Time | undefined
  /** Run at this time (epoch milliseconds or a Date); or give `delayMs`. */
  readonly runAt?: number | Date | undefined
  /** Higher first (default 0); first added first within a priority. */
  readonly priority?: number | undefined
  /** Treat jobs with the same key as duplicates (throttle or debounce). */
  readonly dedup?: DedupOptions<Time> | undefined
  /**
   * An event key (e.g. `"user.deleted:42"`) whose arrival cancels the job: `jobs.event(key)` cancels every
   * unfinished job naming it, as `cancel` does, in the event's transaction.
   */
  readonly cancelOn?: string | undefined
}

/** What `add` answers: the job's id and what became of it. */
export interface AddResult {
  /** The job's id (the existing job's, when deduplicated). */
  readonly id: string
  /** The job's state after the call; `removed` when a throttled duplicate's first job is gone already. */
  readonly state: JobState | "removed"
  /** Nothing was added: the id existed, or the dedup key was taken (`replace` may have updated that job). */
  readonly deduplicated: boolean
}

/** A job as read back: its state, payload, attempts, timing, result or error, and its place in a flow. */
export interface JobInfo<P = unknown, R = unknown> {
  /** The job's id. */
  readonly id: string
  /** The queue the job belongs to. */
  readonly queue: string
  /** The job's state when read. */
  readonly state: JobState
  /** The job's payload. */
  readonly payload: P
  /** The handler's result, once the job completed. */
  readonly result?: R
  /** The last failure, once the job failed (or of its last attempt, while it retries). */
  readonly error?: SerializedError
  /** Attempts started so far (1-based; 0 before the first). */
  readonly attempt: number
  /** The attempts the queue's retry policy allows in all. */
  readonly maxAttempts: number
  /** Its start order among waiting jobs: higher first. */
  readonly priority: number
  /** The last `progress` value (0 before any). */
  readonly progress: unknown
  /** When it was added (epoch milliseconds). */
  readonly createdAt: number
  /** When it is (or was) due: its run time, or its retry's. */
  readonly runAt: number
  /** When its current or last attempt started (epoch milliseconds). */
  readonly startedAt?: number
  /** When it finished: completed, failed or canceled (epoch milliseconds). */
  readonly finishedAt?: number
  /** The parent's id, for a child in a flow. */
  readonly parentId?: string
  /** The parent's queue, for a child in a flow. */
  readonly parentQueue?: string
  /** The event key whose arrival cancels the job (`cancelOn`), when it has one. */
  readonly cancelOn?: string
  /** Its children (a flow's parent), in the order they were added, with their states now. */
  readonly children?: ReadonlyArray<{ readonly queue: string; readonly id: string; readonly state: JobState }>
}

/** Which jobs a `list` reads, and the page. */
export interface JobListOptions {
  /** Only jobs in these states (default: all). */
  readonly states?: ReadonlyArray<JobState> | undefined
  /** Jobs per page. */
  readonly limit?: number | undefined
  /** The `cursor` of the previous page, to read the next one. */
  readonly cursor?: string | undefined
}

/** A page of jobs. */
export interface JobPage<P = unknown, R = unknown> {
  /** The jobs of this page. */
  readonly items: ReadonlyArray<JobInfo<P, R>>
  /** Present when there may be more: pass it back to read the next page. */
  readonly cursor?: string
}

/** One line a job's handler logged. */
export interface JobLogLine {
  /** The line's number among the job's lines, in the order written. */
  readonly seq: number
  /** When it was written (epoch milliseconds). */
  readonly at: number
  /** The line. */
  readonly message: string
}

/** A job's kept log lines. */
export interface JobLogs {
  /** The lines of this page. */
  readonly items: ReadonlyArray<JobLogLine>
  /** Lines kept for the job (the newest `keepLogs`). */
  readonly total: number
}

/** A job that failed for good, moved out of its queue and kept so it can be read and redriven. */
export interface DeadLetter<P = unknown> {
  /** The queue it came from. */
  readonly queue: string
  /** The job's id. */
  readonly id: string
  /** The job's payload, to redrive it as it was. */
  readonly payload: P
  /** The attempts it made. */
  readonly attempts: number
  /** Its last failure. */
  readonly error: SerializedError
  /** When it was moved here (epoch milliseconds). */
  readonly failedAt: number
}

/** A page of dead letters. */
export interface DeadLetterPage<P = unknown> {
  /** The dead letters of this page. */
  readonly items: ReadonlyArray<DeadLetter<P>>
  /** Present when there may be more: pass it back to read the next page. */
  readonly cursor?: string
}

/** `Time`: as for `DedupOptions`. */
export interface CleanOptions<Time = CallDuration> {
  /** Finished states only. */
  readonly states: ReadonlyArray<"completed" | "failed" | "canceled">
  /** Jobs finished at least this long ago. */
  readonly olderThanMs: Time
  /** At most this many (default 1 000, at most 10 000). */
  readonly limit?: number | undefined
}

/** `Time`: as for `DedupOptions`. */
export interface FlowNode<Time = CallDuration> {
  /** The queue the job is added to. */
  readonly queue: string
  /** The job's payload (JSON). */
  readonly payload: unknown
  /** Default: a generated id. */
  readonly id?: string | undefined
  /** Higher first (default 0). */
  readonly priority?: number | undefined
  /** Run this long from now; or give `runAt`. */
  readonly delayMs?: Time | undefined
  /** Run at this time (epoch milliseconds or a Date). */
  readonly runAt?: number | Date | undefined
  /** What a failure of this job does to its parent: `fail` it (default) or let it run anyway. */
  readonly onFailure?: "fail" | "ignore" | undefined
  /** Jobs that run before this one: it waits (state `waiting-children`) until they finish. */
  readonly children?: ReadonlyArray<FlowNode<Time>> | undefined
  /** An event key whose arrival cancels this job (and so, as `cancel` does, its children not started). */
  readonly cancelOn?: string | undefined
}

/** The ids `addFlow` gave a tree of jobs, in the tree's shape. */
export interface FlowResult {
  /** The job's queue. */
  readonly queue: string
  /** The job's id. */
  readonly id: string
  /** The ids of its children, in the same shape. */
  readonly children: ReadonlyArray<FlowResult>
}

/** Lifecycle events of jobs, told after the change committed (best effort, like every lifecycle event). */
export type JobEvent =
  & { readonly entityKind: "job"; readonly queue: string; readonly id: string; readonly timestamp: number }
  & (
    | { readonly type: "added"; readonly state: JobState; readonly parentId?: string }
    | { readonly type: "deduplicated"; readonly existingId: string; readonly replaced: boolean; readonly dedupKey?: string }
    | { readonly type: "started"; readonly attempt: number }
    | { readonly type: "progress"; readonly progress: unknown }
    | { readonly type: "completed"; readonly attempt: number; readonly durationMs: number }
    | {
      readonly type: "retry_scheduled"
      readonly attempt: number
      readonly error: SerializedError
      readonly nextAttemptAt: number
    }
    | { readonly type: "failed"; readonly attempt?: number; readonly error: SerializedError }
    | { readonly type: "canceled"; readonly reason?: string }
    | { readonly type: "dead_lettered"; readonly error: SerializedError }
    | { readonly type: "removed"; readonly reason: string }
  )

/** A function told each job event (the queues' `onLifecycleEvent`), e.g. to forward them to metrics. */
export type JobEventHook = (event: JobEvent) => void | PromiseLike<void>

export type { RateLimit }

/** A job event before its timestamp: what a change records, told once it committed. */
export type JobEventDraft = JobEvent extends infer E ? E extends unknown ? Omit<E, "timestamp" | "entityKind"> : never
  : never
