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
  readonly id: string
  readonly queue: string
  readonly payload: P
  /** 1-based; already durably counted when the handler runs. */
  readonly attempt: number
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

export interface ChildValue {
  readonly queue: string
  readonly state: JobState
  readonly result?: unknown
  readonly error?: SerializedError
}

/**
 * `Time`: how a call's lengths of time are given, a Duration or milliseconds on the Effect face
 * (`"10 minutes"`, `Duration.seconds(30)`, `30_000`), milliseconds (`<…, number>`) on the promise face.
 */
export interface DedupOptions<Time = CallDuration> {
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
  readonly payload: P
  /** Run this long from now; or give `runAt`. */
  readonly delayMs?: Time | undefined
  readonly runAt?: number | Date | undefined
  /** Higher first (default 0); first added first within a priority. */
  readonly priority?: number | undefined
  readonly dedup?: DedupOptions<Time> | undefined
}

export interface AddResult {
  readonly id: string
  /** The job's state after the call; `removed` when a throttled duplicate's first job is gone already. */
  readonly state: JobState | "removed"
  /** Nothing was added: the id existed, or the dedup key was taken (`replace` may have updated that job). */
  readonly deduplicated: boolean
}

export interface JobInfo<P = unknown, R = unknown> {
  readonly id: string
  readonly queue: string
  readonly state: JobState
  readonly payload: P
  readonly result?: R
  readonly error?: SerializedError
  readonly attempt: number
  readonly maxAttempts: number
  readonly priority: number
  /** The last `progress` value (0 before any). */
  readonly progress: unknown
  readonly createdAt: number
  /** When it is (or was) due: its run time, or its retry's. */
  readonly runAt: number
  readonly startedAt?: number
  readonly finishedAt?: number
  readonly parentId?: string
  readonly parentQueue?: string
  /** Its children (a flow's parent), in the order they were added, with their states now. */
  readonly children?: ReadonlyArray<{ readonly queue: string; readonly id: string; readonly state: JobState }>
}

export interface JobListOptions {
  readonly states?: ReadonlyArray<JobState> | undefined
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

export interface JobPage<P = unknown, R = unknown> {
  readonly items: ReadonlyArray<JobInfo<P, R>>
  /** Present when there may be more: pass it back to read the next page. */
  readonly cursor?: string
}

export interface JobLogLine {
  readonly seq: number
  readonly at: number
  readonly message: string
}

export interface JobLogs {
  readonly items: ReadonlyArray<JobLogLine>
  /** Lines kept for the job (the newest `keepLogs`). */
  readonly total: number
}

export interface DeadLetter<P = unknown> {
  readonly queue: string
  readonly id: string
  readonly payload: P
  readonly attempts: number
  readonly error: SerializedError
  readonly failedAt: number
}

export interface DeadLetterPage<P = unknown> {
  readonly items: ReadonlyArray<DeadLetter<P>>
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
  readonly queue: string
  readonly payload: unknown
  readonly id?: string | undefined
  readonly priority?: number | undefined
  readonly delayMs?: Time | undefined
  readonly runAt?: number | Date | undefined
  /** What a failure of this job does to its parent: `fail` it (default) or let it run anyway. */
  readonly onFailure?: "fail" | "ignore" | undefined
  readonly children?: ReadonlyArray<FlowNode<Time>> | undefined
}

export interface FlowResult {
  readonly queue: string
  readonly id: string
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

export type JobEventHook = (event: JobEvent) => void | PromiseLike<void>

export type { RateLimit }

/** A job event before its timestamp: what a change records, told once it committed. */
export type JobEventDraft = JobEvent extends infer E ? E extends unknown ? Omit<E, "timestamp" | "entityKind"> : never
  : never
