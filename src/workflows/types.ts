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
  /** Its type, as sent. */
  readonly type: string
  /** Its payload, as sent (JSON). */
  readonly payload: Payload
  /** When it was sent. */
  readonly timestamp: Date
}

/** A child workflow to run: its workflow's name, and the child's id and params. */
export interface WorkflowChildOptions<Params = unknown> {
  /** The child's id (default: `<parent id>-<step name's position>`; the same on every replay). */
  readonly id?: string | undefined
  /** What the child's handler reads as `event.payload` (JSON). */
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
  /** `step.do` with a config: how its attempts are retried and timed out. */
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
  /** Its name, as the handler gave it. */
  readonly name: string
  /** Which step it is: `do`, `sleep` (or `sleepUntil`), `event` (`waitForEvent`) or `child`. */
  readonly kind: "do" | "sleep" | "event" | "child"
  /** `running`, `retrying` (a `do` waiting for its next attempt), `waiting`, `completed` or `failed`. */
  readonly status: "running" | "retrying" | "waiting" | "completed" | "failed"
  /** Attempts taken (a `do` step). */
  readonly attempt: number
  /** Its stored result (a `do`'s value, an event received, a child's output). */
  readonly result?: unknown
  /** Its last failure (a `do`'s attempt, a wait's timeout, a child's end), if any. */
  readonly error: { readonly name: string; readonly message: string } | null
  /** When a sleep ends, a retry is due or a wait times out. */
  readonly wakeAt: number | null
  /** When it was first reached (epoch milliseconds). */
  readonly startedAt: number
  /** When it completed or failed for good (epoch milliseconds). */
  readonly endedAt: number | null
}

/** What `status()` reads of an instance. */
export interface WorkflowInstanceInfo<Output = unknown> {
  /** Its workflow's name. */
  readonly workflow: string
  /** Its id. */
  readonly id: string
  /** Where it is: `queued`, `running`, `paused`, `waiting`, `complete`, `errored` or `terminated`. */
  readonly status: WorkflowInstanceStatus
  /** The handler's return value, once complete. */
  readonly output?: Output | undefined
  /** Why it errored or was terminated. */
  readonly error: { readonly name: string; readonly message: string } | null
  /** What it waits for while waiting: `event:<type>`, `child:<workflow>/<id>`. */
  readonly waitingFor: ReadonlyArray<string>
  /** When it wakes, while waiting with a time. */
  readonly wakeAt: number | null
  /** Its params, as created. */
  readonly params: unknown
  /** The parent's `<workflow>/<id>`, for a child. */
  readonly parent: string | null
  /** When it was created (epoch milliseconds). */
  readonly createdAt: number
  /** When its row last changed (epoch milliseconds). */
  readonly updatedAt: number
  /** When it completed, errored or was terminated (epoch milliseconds). */
  readonly endedAt: number | null
  /** Its steps in call order (the first 1 000; `steps` reads any page). */
  readonly steps: ReadonlyArray<WorkflowStepInfo>
}

/** Which instances `list` returns: by status, a page at a time. */
export interface WorkflowListOptions {
  /** Only instances in this status, or in one of these (default: all). */
  readonly status?: WorkflowInstanceStatus | ReadonlyArray<WorkflowInstanceStatus> | undefined
  /** At most 1 000; default 100. */
  readonly limit?: number | undefined
  /** The previous page's `cursor`, for the next page. */
  readonly cursor?: string | undefined
}

/** A page of instances, newest first. */
export interface WorkflowPage<Output = unknown> {
  /** The page's instances, without their steps. */
  readonly items: ReadonlyArray<Omit<WorkflowInstanceInfo<Output>, "steps">>
  /** Present when there is a next page: pass it as `cursor`. */
  readonly cursor?: string | undefined
}
