/**
 * `@effect/workflow`'s `WorkflowEngine` on this object: executions, the activity journal and durable
 * deferreds in the object's SQLite storage, runs as the engine's records with attempts, and
 * `DurableClock.sleep` as a durable timer on the object's one alarm.
 *
 * A run of an execution is an attempt: it takes a permit, replays the workflow's body from the start
 * (activities and deferreds read from the journal) and ends complete (its result stored) or suspended.
 * A suspended execution holds no permit, no fiber and no memory beyond its rows: a deferred done (from
 * inside the object or from outside, by token), a clock's timer, a child's end, `resume` or `interrupt`
 * makes it runnable again, in this isolate or after an eviction, through the engine.
 *
 * Import it from `durability/workflow-engine`, the only entry that needs `@effect/workflow`.
 *
 * ```ts
 * const Greet = Workflow.make({ name: "Greet", payload: { name: Schema.String }, success: Schema.String, idempotencyKey: ({ name }) => name })
 * const runtime = ManagedRuntime.make(Greet.toLayer(({ name }) =>
 *   Effect.zipRight(DurableClock.sleep({ name: "wait", duration: "1 day" }), Effect.succeed(`hello ${name}`))
 * ).pipe(Layer.provideMerge(DurableWorkflowEngine.layerEngine()), Layer.provideMerge(Scheduler.layerDurableObject(ctx))))
 * // in the object: constructor warms the scheduler; alarm() runs `Scheduler.alarm`; a method starts it:
 * await runtime.runPromise(Greet.execute({ name: "ada" }, { discard: true }))
 * ```
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as WorkflowEngineService from "@effect/workflow/WorkflowEngine"
import type * as Lifecycle from "../engine/Lifecycle.js"
import * as Migrations from "../engine/Migrations.js"
import * as Policy from "../engine/policy.js"
import * as Scheduler from "../engine/Scheduler.js"
import { StorageService } from "../engine/StorageService.js"
import * as Watchers from "../engine/watchers.js"
import * as Validate from "../shared/validate.js"
import * as Executions from "./engine/executionsTable.js"
import * as Journal from "./engine/journalTable.js"
import {
  type InvalidInputError,
  InvalidOptionError,
  type MigrationError,
  type ParticipantConflictError,
  type StorageError,
  DurableAttemptTimeoutError
} from "../shared/Errors.js"
import * as Encoded from "./engine/encoded.js"
import * as Participant from "./engine/participant.js"
import * as Schema from "./engine/schema.js"
import type { State } from "./engine/state.js"

export { WorkflowNotRegisteredError } from "./engine/errors.js"

/** The entity kind of the lifecycle events about executions: `"effect_workflow"`. */
export const ENTITY_KIND = Participant.ENTITY_KIND

/**
 * The engine's options. A run's failures outside the workflow (storage, a run cut off by its timeout, a
 * payload that no longer decodes) are retried by `retries`; the workflow's own failures are its result.
 */
export interface WorkflowEngineOptions extends Policy.ExecutionOptions {
  /** Told the lifecycle events of executions' runs (`entityKind: "effect_workflow"`). */
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/** What building the engine can fail with: bad options, or the storage and migrations under it. */
export type MakeError = InvalidOptionError | ParticipantConflictError | MigrationError | StorageError

/**
 * Makes the `WorkflowEngine` service over this object's engine and storage: applies the tables'
 * migration when it is not current, attaches the executions to the scheduler (one engine per object).
 * Callers awaiting a run are interrupted when the scope closes (the object's runtime ends).
 */
export const make: (
  options?: WorkflowEngineOptions
) => Effect.Effect<
  WorkflowEngineService.WorkflowEngine["Type"],
  MakeError,
  Scheduler.Scheduler | StorageService | Scope.Scope
> = Effect
  .fn("WorkflowEngine.make")(function*(options: WorkflowEngineOptions = {}) {
    if (typeof options !== "object" || options === null) {
      return yield* new InvalidOptionError({ field: "options", kind: "type", message: "options must be an object" })
    }
    const hook = options.onLifecycleEvent
    if (hook !== undefined && typeof hook !== "function") {
      return yield* new InvalidOptionError({ field: "onLifecycleEvent", kind: "type", message: "onLifecycleEvent must be a function" })
    }
    const resolved = yield* Policy.resolve("", options, Policy.defaults)
    const storage = yield* StorageService
    if (!(yield* Migrations.isCurrent(Schema.CAPABILITY, Schema.migrations))) {
      yield* Migrations.migrate(Schema.CAPABILITY, Schema.migrations)
    }
    const closed = yield* Deferred.make<void>()
    yield* Effect.addFinalizer(() => Deferred.succeed(closed, undefined))
    const state = {
      storage,
      closed,
      watchers: Watchers.make(),
      registered: new Map(),
      live: new Map()
    } as unknown as State
    const policy = {
      maxAttempts: resolved.maxAttempts,
      schedule: resolved.schedule,
      attemptTimeoutMs: resolved.attemptTimeoutMs,
      timeoutError: (timeoutMs: number) =>
        new DurableAttemptTimeoutError({ message: `A workflow run timed out after ${timeoutMs}ms`, timeoutMs })
    }
    state.handle = yield* (yield* Scheduler.Scheduler).attach(Participant.table(state, () => policy, hook))
    state.engine = WorkflowEngineService.makeUnsafe(Encoded.make(state))
    return state.engine
  })

/**
 * Retention: deletes the executions that ended (completed, failed or interrupted) before `before` (epoch ms or a
 * `Date`), with their journal (activities' and deferreds' exits), in one transaction; returns how many. A child
 * whose parent still runs is kept. A later `execute` with a purged execution's id runs it anew.
 */
export const purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError, StorageService> = Effect
  .fn("WorkflowEngine.purgeBefore")(function*(before: number | Date) {
    const cutoff = yield* Validate.timestamp("before", before)
    const storage = yield* StorageService
    return yield* storage.transaction(Effect.gen(function*() {
      const ids = yield* Executions.purgeEnded(storage, cutoff)
      yield* Journal.purge(storage, ids)
      return ids.length
    }))
  })

/**
 * The `WorkflowEngine` service of `@effect/workflow` on this object: provide it under your workflows'
 * layers (`Workflow.toLayer`), over the engine (`Scheduler.layerDurableObject(ctx)` or a test scheduler).
 */
export const layerEngine = (
  options?: WorkflowEngineOptions
): Layer.Layer<WorkflowEngineService.WorkflowEngine, MakeError, Scheduler.Scheduler | StorageService> =>
  Layer.scoped(WorkflowEngineService.WorkflowEngine, make(options))
