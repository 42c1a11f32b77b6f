/**
 * `createWorkflow(ctx, handler)`: the reference library's one-workflow-per-object API, as a thin adapter
 * over `DurabilityWorkflows`. The object holds one instance (a fixed id under a reserved workflow name);
 * `start` creates it (the first payload wins), `status` reads it in the reference's five states, and its
 * step API takes the reference's config (`retries.limit` counts every attempt, times are milliseconds).
 */
import type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
import { objectIdOf } from "../shared/platform.js"
import type { WorkflowEvent, WorkflowStep } from "../workflows/types.js"
import { DurabilityWorkflows } from "./DurabilityWorkflows.js"
import { WorkflowNotFoundError } from "./errors.js"

/** The reserved workflow name the object's one instance runs under (in the workflows' instances table). */
const WORKFLOW = "createWorkflow"
/** The object's one instance. */
const INSTANCE = "instance"

const DEFAULT_LIMIT = 5
const DEFAULT_DELAY_MS = 10_000
const DEFAULT_TIMEOUT_MS = 10 * 60_000
const MAX_LIMIT = 10_000

/** How a `step.do` is retried and timed out, as the reference takes it: every time in milliseconds. */
export interface DurableWorkflowStepConfig {
  /** How failed attempts are retried (default: 5 attempts, 10 000 ms, exponential). */
  readonly retries?: {
    /** Attempts in all, the first included: an integer from 1 to 10 000 (default 5). */
    readonly limit: number
    /** Milliseconds before the first retry (default 10 000). */
    readonly delay: number
    /**
     * How the delay grows after failed attempt n: `constant` (delay), `linear` (delay × n) or
     * `exponential` (delay × 2^(n − 1), the default).
     */
    readonly backoff?: "constant" | "linear" | "exponential" | undefined
  } | undefined
  /** Milliseconds one attempt may run (default 10 minutes): its signal is aborted and the attempt fails. */
  readonly timeout?: number | undefined
}

/** A step's config with every default filled in, as its callback is given it. */
export interface DurableWorkflowResolvedStepConfig {
  /** How failed attempts are retried. */
  readonly retries: {
    /** Attempts in all. */
    readonly limit: number
    /** Milliseconds before the first retry. */
    readonly delay: number
    /** How the delay grows. */
    readonly backoff: "constant" | "linear" | "exponential"
  }
  /** Milliseconds one attempt may run. */
  readonly timeout: number
}

/** What a `step.do` callback is given. */
export interface DurableWorkflowStepContext {
  /** The attempt, 1-based. */
  readonly attempt: number
  /** The step's config, defaults filled in. */
  readonly config: DurableWorkflowResolvedStepConfig
  /** Aborted when the attempt times out. */
  readonly signal: AbortSignal
  /** The step: its name, and `count`, 1 + the earlier `do` steps of this name in this run. */
  readonly step: { readonly count: number; readonly name: string }
}

/** The steps a `createWorkflow` handler takes; each is durable, its position its call order. */
export interface DurableWorkflowStep {
  /**
   * Runs `callback` until it succeeds once: its result (JSON) is stored and returned on every replay. A failed
   * attempt is retried under `config` (the instance sleeps durably between attempts); after the last attempt,
   * or a `NonRetryableError`, the step rejects with its error. A bad config rejects with a `RangeError`.
   */
  do<T>(name: string, callback: (context: DurableWorkflowStepContext) => T | PromiseLike<T>): Promise<Awaited<T>>
  /** `step.do` with a config: how its attempts are retried and timed out. */
  do<T>(
    name: string,
    config: DurableWorkflowStepConfig,
    callback: (context: DurableWorkflowStepContext) => T | PromiseLike<T>
  ): Promise<Awaited<T>>
  /** Sleeps `durationMs` (a non-negative integer, at most 365 days): the instance suspends and the alarm wakes it. */
  sleep(name: string, durationMs: number): Promise<void>
}

/** What a `createWorkflow` handler is given about its instance. */
export interface DurableWorkflowEvent<Payload> {
  /** The object's id (`ctx.id.toString()`). */
  readonly instanceId: string
  /** What `start` was given first. */
  readonly payload: Readonly<Payload>
  /** When the instance was started. */
  readonly timestamp: Date
}

/** A `createWorkflow` handler: replayed from the start on every run, so code between steps must be deterministic. */
export type DurableWorkflowHandler<Payload, Result> = (
  event: DurableWorkflowEvent<Payload>,
  step: DurableWorkflowStep
) => Result | Promise<Result>

/** The object's instance, as `status()` reads it. */
export type WorkflowStatus<Result> =
  | { readonly status: "not_started" }
  | { readonly status: "running" }
  /** Suspended until `wakeAt` (epoch milliseconds): a sleep, or a step's retry delay. */
  | { readonly status: "sleeping"; readonly wakeAt: number }
  | { readonly status: "errored"; readonly error: { readonly name: string; readonly message: string } }
  | { readonly status: "complete"; readonly result: Result }

/** What `createWorkflow` returns: the object's one workflow instance. */
export interface DurableWorkflow<Payload, Result> {
  /** Starts the instance with `payload`; once started, a later call changes nothing (the first payload wins). */
  start(payload: Payload): Promise<void>
  /** Where the instance is: `not_started`, `running`, `sleeping` (with `wakeAt`), `errored` or `complete`. */
  status(): Promise<WorkflowStatus<Result>>
  /** Delegate the object's `alarm(info)` here. */
  alarm(info?: AlarmInvocationInfo): Promise<void>
}

const safeNonNegative = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0

/** The reference's checks and defaults; each failure a `RangeError`. */
const resolveConfig = (name: string, config: DurableWorkflowStepConfig | undefined): DurableWorkflowResolvedStepConfig => {
  if (config !== undefined && (typeof config !== "object" || config === null)) {
    throw new RangeError(`step.do "${name}": config must be an object`)
  }
  const limit = config?.retries?.limit ?? DEFAULT_LIMIT
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw new RangeError(`step.do "${name}": retries.limit must be an integer from 1 to ${MAX_LIMIT}, got ${String(limit)}`)
  }
  const backoff = config?.retries?.backoff ?? "exponential"
  if (backoff !== "constant" && backoff !== "linear" && backoff !== "exponential") {
    throw new RangeError(`step.do "${name}": retries.backoff must be "constant", "linear" or "exponential", got ${String(backoff)}`)
  }
  const delay = config?.retries?.delay ?? DEFAULT_DELAY_MS
  if (!safeNonNegative(delay)) {
    throw new RangeError(`step.do "${name}": retries.delay must be a non-negative safe integer (milliseconds), got ${String(delay)}`)
  }
  const timeout = config?.timeout ?? DEFAULT_TIMEOUT_MS
  if (!safeNonNegative(timeout) || timeout === 0) {
    throw new RangeError(`step.do "${name}": timeout must be a positive safe integer (milliseconds), got ${String(timeout)}`)
  }
  return { retries: { limit, delay, backoff }, timeout }
}

/** The reference's step API over one run's `WorkflowStep`; `count` is per run (a run replays from the start). */
const adaptStep = (step: WorkflowStep): DurableWorkflowStep => {
  const counts = new Map<string, number>()
  const doStep = (name: string, configOrCallback: unknown, maybeCallback?: unknown): Promise<unknown> => {
    const callback = (typeof configOrCallback === "function" ? configOrCallback : maybeCallback) as
      | ((context: DurableWorkflowStepContext) => unknown)
      | undefined
    let config: DurableWorkflowResolvedStepConfig
    try {
      config = resolveConfig(name, typeof configOrCallback === "function" ? undefined : configOrCallback as DurableWorkflowStepConfig)
    } catch (error) {
      return Promise.reject(error)
    }
    if (typeof callback !== "function") return Promise.reject(new TypeError(`step.do "${name}" needs a callback`))
    const count = (counts.get(name) ?? 0) + 1
    counts.set(name, count)
    // The capability counts retries after the first attempt (Cloudflare's); the reference counts attempts.
    const retries = { limit: config.retries.limit - 1, delay: config.retries.delay, backoff: config.retries.backoff }
    return step.do(name, { retries, timeout: config.timeout }, ({ attempt, signal }) =>
      callback({ attempt, config, signal, step: { count, name } }))
  }
  return {
    do: doStep as DurableWorkflowStep["do"],
    sleep: (name, durationMs) =>
      safeNonNegative(durationMs)
        ? step.sleep(name, durationMs)
        : Promise.reject(new RangeError(`step.sleep "${name}": the duration must be a non-negative safe integer (milliseconds), got ${String(durationMs)}`))
  }
}

/**
 * The object's one durable workflow, in the reference library's shape: `start(payload)`, `status()`, and
 * `alarm(info)` to forward the object's alarm to. It runs on the object's scheduler as a `DurabilityWorkflows`
 * with one workflow, so an object with `createWorkflow` cannot also have a `DurabilityWorkflows` of its own.
 */
export const createWorkflow = <Payload = unknown, Result = unknown>(
  context: DurabilityContext,
  handler: DurableWorkflowHandler<Payload, Result>
): DurableWorkflow<Payload, Result> => {
  if (typeof handler !== "function") throw new TypeError("createWorkflow needs a handler function")
  const instanceId = objectIdOf(context) ?? INSTANCE
  const run = (event: WorkflowEvent<Payload>, step: WorkflowStep) =>
    handler({ instanceId, payload: event.payload, timestamp: event.timestamp }, adaptStep(step))
  const workflows = new DurabilityWorkflows({ context, workflows: { [WORKFLOW]: run } })
  const workflow = workflows[WORKFLOW]!
  return {
    start: async (payload) => {
      await workflow.create({ id: INSTANCE, params: payload })
    },
    status: async () => {
      let info
      try {
        info = await (await workflow.get(INSTANCE)).status()
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return { status: "not_started" }
        throw error
      }
      switch (info.status) {
        case "complete":
          return { status: "complete", result: info.output as Result }
        case "errored":
        case "terminated":
          return { status: "errored", error: info.error ?? { name: "Error", message: "" } }
        case "waiting":
          return info.wakeAt === null ? { status: "running" } : { status: "sleeping", wakeAt: info.wakeAt }
        default:
          return { status: "running" }
      }
    },
    alarm: (info) => workflows.alarm(info)
  }
}
