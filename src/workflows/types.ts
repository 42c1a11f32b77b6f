/**
 * The workflows' shapes: what a handler is called with (`event`, `step`), a step's options, and what a
 * caller reads of an instance.
 */
import type { WorkflowDuration } from "./limits.js"

export type { DurationUnit, WorkflowDuration } from "./limits.js"

/** What a workflow's handler is given about its instance. */
export interface WorkflowEvent<Params> {
  /** The instance's params, as created (`create({ params })`). */
  readonly payload: Readonly<Params>
  /** When the instance was created. */
  readonly timestamp: Date
  /** The instance's id. */
  readonly instanceId: string
}

/** How a `step.do` is retried and timed out (Cloudflare Workflows' shape and defaults). */
export interface WorkflowStepConfig {
  /** How failed attempts are retried (default: 5 retries, "10 seconds", exponential). */
  readonly retries?: {
    /** Retries after the first attempt (default 5): `limit + 1` attempts in all. 0: no retry. */
    readonly limit: number
    /** The delay before the first retry (default "10 seconds"). */
    readonly delay: WorkflowDuration
    /** How the delay grows with each retry (default "exponential": delay × 2^(retry − 1)). */
    readonly backoff?: "constant" | "linear" | "exponential" | undefined
  } | undefined
  /** How long one attempt may run (default "10 minutes"): its signal is aborted and the attempt fails. */
  readonly timeout?: WorkflowDuration | undefined
}

/** What a `step.do` callback is given. */
export interface WorkflowStepContext {
  /** Aborted when the attempt times out or the instance is terminated. */
  readonly signal: AbortSignal
  /** The attempt, 1-based. */
  readonly attempt: number
}

/** An event a `waitForEvent` received. */
export interface WorkflowReceivedEvent<Payload = unknown> {
  /** The event's type, as sent. */
  readonly type: string
  /** The event's payload, as sent (JSON). */
  readonly payload: Payload
  /** When it was sent. */
  readonly timestamp: Date
}

/** A child workflow to run: its workflow's name, and the child's id and params. */
export interface WorkflowChildOptions<Params = unknown> {
  /** The child's id (default: `<parent id>-<step name's position>`; the same on every replay). */
  readonly id?: string | undefined
  /** What the child's handler reads as `event.payload`. */
  readonly params?: Params | undefined
}

/** The steps a workflow's handler takes. Each is durable: a replay returns what the first run stored. */
export interface WorkflowStep {
  /**
   * Runs `callback` once for good: its result (JSON) is stored and returned on every replay. A failure is
   * retried under `config` (durably: the instance sleeps between attempts); `NonRetryableError` ends the
   * retries. After the last attempt the step rejects with its error.
   */
  do<T>(name: string, callback: (context: WorkflowStepContext) => T | PromiseLike<T>): Promise<Awaited<T>>
  /** `do` with its retries and timeout: `step.do("charge", { retries: { limit: 3, delay: "5 seconds" } }, fn)`. */
  do<T>(name: string, config: WorkflowStepConfig, callback: (context: WorkflowStepContext) => T | PromiseLike<T>): Promise<Awaited<T>>
  /** Sleeps for `duration` (milliseconds or "2 days"): the instance is suspended and woken by the object's alarm. */
  sleep(name: string, duration: WorkflowDuration): Promise<void>
  /** Sleeps until `time` (a `Date` or epoch milliseconds); a past time returns at once. */
  sleepUntil(name: string, time: Date | number): Promise<void>
  /**
   * Waits for an event of `type` sent to this instance (`sendEvent`), even one sent before the wait was
   * reached (the oldest unconsumed one). Rejects with `WorkflowTimeoutError` after `timeout` (default "24 hours").
   */
  waitForEvent<Payload = unknown>(
    name: string,
    options: { readonly type: string; readonly timeout?: WorkflowDuration | undefined }
  ): Promise<WorkflowReceivedEvent<Payload>>
  /**
   * Runs another workflow of this object as a child and waits for its output. Rejects with
   * `WorkflowChildError` when the child errors or is terminated.
   */
  child<Output = unknown, Params = unknown>(
    name: string,
    workflow: string,
    options?: WorkflowChildOptions<Params>
  ): Promise<Output>
}

/** An instance's status, as Cloudflare Workflows names them. */
export type WorkflowInstanceStatus = "queued" | "running" | "paused" | "waiting" | "complete" | "errored" | "terminated"

/** One step of an instance, as stored. */
export interface WorkflowStepInfo {
  /** Its position in call order, 1-based. */
  readonly position: number
  /** The name the handler gave it. */
  readonly name: string
  /** `do`, `sleep` (sleep and sleepUntil), `event` (waitForEvent) or `child`. */
  readonly kind: "do" | "sleep" | "event" | "child"
  /** Where it is: running, retrying (waiting for its next attempt), waiting, completed or failed. */
  readonly status: "running" | "retrying" | "waiting" | "completed" | "failed"
  /** Attempts taken (a `do` step). */
  readonly attempt: number
  /** Its stored result (a `do`'s value, an event received, a child's output). */
  readonly result?: unknown
  /** Its last error (a failed attempt, a timeout, a child's failure), if any. */
  readonly error: { readonly name: string; readonly message: string } | null
  /** When a sleep ends, a retry is due or a wait times out. */
  readonly wakeAt: number | null
  /** When it was first reached (epoch milliseconds). */
  readonly startedAt: number
  /** When it completed or failed for good. */
  readonly endedAt: number | null
}

/** What `status()` reads of an instance. */
export interface WorkflowInstanceInfo<Output = unknown> {
  /** The workflow's name. */
  readonly workflow: string
  /** The instance's id. */
  readonly id: string
  /** Where it is (Cloudflare Workflows' names). */
  readonly status: WorkflowInstanceStatus
  /** The handler's return value, once complete. */
  readonly output?: Output | undefined
  /** Why it errored or was terminated. */
  readonly error: { readonly name: string; readonly message: string } | null
  /** What it waits for while waiting: `event:<type>`, `child:<workflow>/<id>`. */
  readonly waitingFor: ReadonlyArray<string>
  /** When it wakes, while waiting with a time. */
  readonly wakeAt: number | null
  /** What it was created with. */
  readonly params: unknown
  /** The parent's `<workflow>/<id>`, for a child. */
  readonly parent: string | null
  /** When it was created (epoch milliseconds). */
  readonly createdAt: number
  /** When its row last changed. */
  readonly updatedAt: number
  /** When it completed, errored or was terminated. */
  readonly endedAt: number | null
  /** Its steps in call order (the first 1 000; `steps` reads any page). */
  readonly steps: ReadonlyArray<WorkflowStepInfo>
}

/** Which instances `list` returns: by status, a page at a time. */
export interface WorkflowListOptions {
  /** Only instances in this status (or these). */
  readonly status?: WorkflowInstanceStatus | ReadonlyArray<WorkflowInstanceStatus> | undefined
  /** At most 1 000; default 100. */
  readonly limit?: number | undefined
  /** The cursor of the previous page. */
  readonly cursor?: string | undefined
}

/** A page of instances, newest first. */
export interface WorkflowPage<Output = unknown> {
  /** The instances of this page. */
  readonly items: ReadonlyArray<Omit<WorkflowInstanceInfo<Output>, "steps">>
  /** Pass it back to `list` for the next page; absent on the last. */
  readonly cursor?: string | undefined
}
