/**
 * How the job queues are made, in dependency order: the queues' runtimes from their definitions,
 * the core, and the capability's spec over it.
 *
 * The core is complete when it is built, before the table is attached: its participant needs it,
 * and attaching the participant is what gives the table's handle. So what only attaching gives (the
 * handle, the settle watchers, and the insertion order read from the migrated table) is `Attached`,
 * read through a `Late` cell that `Jobs.make` sets right after; the participant reads it only when
 * jobs run, and the calls only once `make` returned.
 * @internal
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { TableHandle } from "../engine/DurableTable.js"
import {
  DurableAttemptTimeoutError,
  DurableResultSerializationError,
  InvalidOptionError,
  JobCanceledError,
  JobStalledError
} from "../shared/Errors.js"
import type * as Capability from "../engine/capability.js"
import type * as Late from "../shared/late.js"
import * as Lifecycle from "../engine/Lifecycle.js"
import * as Policy from "../engine/policy.js"
import * as Slot from "../engine/slot.js"
import * as StepMemo from "../steps/memo.js"
import type * as Watchers from "../engine/watchers.js"
import * as Core from "./core.js"
import type { AnyQueueDefinition, CurrentJobTag } from "./definition.js"
import * as Keyed from "./keyed.js"
import * as Options from "./options.js"
import * as Metrics from "./metrics.js"
import * as Tracing from "./tracing.js"
import * as JobsSchema from "./schema.js"
import type * as Types from "./types.js"

/** The capability's name on the scheduler (and in its migrations' history). */
export const CAPABILITY = "jobs"

/** Each queue's settings and policy, checked (a definition that is not an object is left to the capability's check). */
export const queuesOf = (definitions: unknown, options: Policy.ExecutionOptions) =>
  Effect.gen(function*() {
    const queues = new Map<string, Core.QueueRuntime>()
    if (typeof definitions !== "object" || definitions === null) return queues
    const base = yield* Policy.resolve("", options, Policy.defaults)
    for (const [name, definition] of Object.entries(definitions as Readonly<Record<string, AnyQueueDefinition>>)) {
      if (typeof definition !== "object" || definition === null) continue
      if (name.includes("/")) {
        return yield* new InvalidOptionError({ field: `queues.${name}`, kind: "type", message: `A queue name cannot contain "/": ${JSON.stringify(name)}` })
      }
      const resolved = yield* Options.resolve(`queues.${name}.`, definition)
      // The option and the handler's shape go together: a batch of jobs for a handler of one would be a silent misuse.
      if ((resolved.batch === undefined) !== (definition.batchHandler === undefined)) {
        return yield* new InvalidOptionError({
          field: `queues.${name}.batch`,
          kind: "type",
          message: resolved.batch === undefined
            ? `queues.${name}.batch is required by a batch handler: give { size, waitMs? }`
            : `queues.${name}.batch needs a handler of batches (Jobs.batchQueue, or batchHandler on the promise face)`
        })
      }
      const policy = yield* Policy.resolve(`queues.${name}.`, definition, base)
      queues.set(name, {
        name,
        definition,
        options: resolved,
        maxAttempts: policy.maxAttempts,
        slot: resolved.concurrency === undefined ? undefined : Slot.make(resolved.concurrency),
        ...(resolved.keyed === undefined || resolved.external !== undefined ? {} : { keys: Keyed.makeState(policy.attemptTimeoutMs) }),
        override: undefined,
        paused: false
      })
    }
    return queues
  })

/** What of the core only attaching the table gives (see the module). */
export interface Attached {
  readonly handle: TableHandle
  readonly watchers: Watchers.Watchers
  readonly seq: { next: number }
}

/** The core, complete: what attaching gives is read from `attached` (set once the table is attached). */
export const makeCore = (known: Omit<Core.Core, keyof Attached>, attached: Late.Late<Attached>): Core.Core => ({
  ...known,
  get handle() {
    return attached.get().handle
  },
  get watchers() {
    return attached.get().watchers
  },
  get seq() {
    return attached.get().seq
  }
})

/**
 * The engine's events about jobs: counted in the queues' metrics (every settle is told, after its commit),
 * then told to the user's hook as job events. With no hook of the user's, only settles are heard (an
 * attempt's start is counted where it runs: see `Core.participant`), so no other event is built for it.
 */
export const engineEvents = (
  hook: Types.JobEventHook | undefined,
  canceling: Map<string, string>,
  spans: Tracing.Spans
): Lifecycle.LifecycleHook => {
  const settled = (queue: string, key: string, outcome: "completed" | "retried" | "failed" | "canceled", durationMs: number | undefined) => {
    Metrics.settled(queue, outcome, durationMs)
    if (spans.size > 0) Tracing.settled(spans, key, outcome)
  }
  const heard: Lifecycle.LifecycleHook = (event) => {
    // Queue "" is the library's own retention upkeep, not a user's job.
    if (event.type === "purged" || event.entityKind !== "job" || event.queue === "") return
    const queue = String(event.queue)
    const base = { entityKind: "job" as const, queue, id: String(event.jobId), timestamp: event.timestamp }
    switch (event.type) {
      case "attempt_started":
        return hook?.({ ...base, type: "started", attempt: event.attempt })
      case "attempt_settled":
        if (event.outcome === "completed") {
          const reason = canceling.get(event.id)
          settled(queue, event.id, reason === undefined ? "completed" : "canceled", event.durationMs)
          return hook?.(
            reason === undefined
              ? { ...base, type: "completed", attempt: event.attempt, durationMs: event.durationMs }
              : { ...base, type: "canceled", reason }
          )
        }
        if (event.outcome === "retry_scheduled") {
          settled(queue, event.id, "retried", event.durationMs)
          return hook?.({ ...base, type: "retry_scheduled", attempt: event.attempt, error: event.error, nextAttemptAt: event.nextAttemptAt })
        }
        if (event.error.name === "JobCanceledError") {
          settled(queue, event.id, "canceled", event.durationMs)
          return hook?.({ ...base, type: "canceled", reason: canceling.get(event.id) ?? event.error.message })
        }
        settled(queue, event.id, "failed", event.durationMs)
        return hook?.({ ...base, type: "failed", attempt: event.attempt, error: event.error })
      case "terminal":
        // Exhausted: no attempt ran (a canceled job's end is told by its own settle or the cancel).
        if (event.reason === "attempts_exhausted") settled(queue, event.id, "failed", undefined)
        return hook?.({ ...base, type: "failed", attempt: event.attempt, error: event.error })
      default:
        return
    }
  }
  return hook === undefined ? Lifecycle.settlesOnly(heard) : heard
}

const isTerminal = (error: unknown) =>
  error instanceof JobCanceledError || error instanceof DurableResultSerializationError || error instanceof JobStalledError ||
  StepMemo.isStepFailure(error)

/** How the capability skeleton makes the jobs' table: the core's participant, its handlers run in `context`. */
export const spec = <I>(
  definitions: Readonly<Record<string, AnyQueueDefinition>>,
  options: Capability.CapabilityOptions,
  core: Core.Core,
  context: Context.Context<unknown>,
  currentJob: CurrentJobTag<I>
): Capability.Spec<AnyQueueDefinition, string> => ({
  kind: CAPABILITY,
  owner: "DurabilityJobs",
  module: "Jobs",
  table: JobsSchema.JOBS,
  keyColumn: "key",
  nameColumn: "queue",
  entityKind: "job",
  definitionsField: "queues",
  migrations: JobsSchema.migrations,
  definitions,
  options,
  timeoutError: (name) => (timeoutMs) =>
    new DurableAttemptTimeoutError({ message: `A job of queue "${name}" timed out after ${timeoutMs}ms`, timeoutMs }),
  isTerminal: () => isTerminal,
  releaseKeysOnPurge: true,
  purgeReason: () => new JobCanceledError({ message: "The job was purged" }),
  participant: () => Keyed.givingKeysBack(core, Core.participant(core, context, currentJob))
})
