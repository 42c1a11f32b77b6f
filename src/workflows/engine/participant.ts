/**
 * The executions' part in the engine: a run of a workflow is an attempt of its execution's record. It
 * runs the registered body from the start (the journal replays what is done), and ends either complete
 * (the result stored for good) or suspended (the record held, no permit, no fiber) until a wake-up makes
 * it runnable again: a deferred done, a clock's timer (a durable timer of this table), a child's end, a
 * `resume` or an `interrupt`.
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import type { DurableTable, Execution, PendingRecord } from "../../engine/DurableTable.js"
import type * as Lifecycle from "../../engine/Lifecycle.js"
import { NonRetryableError } from "../../shared/Errors.js"
import * as Codec from "./codec.js"
import * as Executions from "./executionsTable.js"
import * as Journal from "./journalTable.js"
import * as Schema from "./schema.js"
import { clockOf, type State } from "./state.js"

/** What a run ends with: its result as stored text, and whether it completed the execution. */
export interface Outcome {
  readonly result: string
  readonly complete: boolean
}

/** The entity kind of lifecycle events about executions. */
export const ENTITY_KIND = "effect_workflow"

/** Resolves the waiters of an execution whenever one of its runs settled for good or failed. */
const observe = (state: State, hook: Lifecycle.LifecycleHook | undefined): Lifecycle.LifecycleHook => (event) => {
  if ((event.type === "terminal" || event.type === "attempt_settled") && "id" in event) state.watchers.notify(event.id)
  return hook?.(event)
}

/** The body of one run, under a fresh `WorkflowInstance`. */
const run = (state: State) => (execution: Execution): Effect.Effect<Outcome, unknown> =>
  Effect.suspend(() => {
    const { row } = execution
    const name = String(row.workflow)
    const registered = state.registered.get(name)
    // Registration happens as the runtime is built: a run found before it is retried, not failed.
    if (registered === undefined) return Effect.fail(new Error(`Workflow "${name}" is not registered with this engine`))
    const { workflow } = registered
    const id = execution.key
    const instance = WorkflowEngine.WorkflowInstance.initial(workflow, id)
    // An interruption asked for before this run is deposited: the body replays as it did (to where it
    // suspended), then its end becomes the interruption, so its finalizers see it and its body does not.
    const stopAsked = Number(row.interrupted) === 1
    // Decoded outside the workflow: a payload that no longer decodes is no result of the workflow's own.
    const payload = Effect.mapError(
      Codec.payloadOf(workflow, String(row.payload)),
      (cause) => new NonRetryableError({ message: `The stored payload of workflow "${name}" does not decode`, cause })
    )
    const body = (decoded: object) =>
      Effect.withFiberRuntime<unknown, unknown, WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine>((fiber) => {
        state.live.set(id, { instance, fiber })
        return registered.execute(decoded, id).pipe(
          // Asked to stop: a body that ended otherwise than by success (its suspension included) ends the
          // execution as interrupted (`intoResult` completes an interrupted, unsuspended instance).
          Effect.onExit((exit) =>
            Effect.sync(() => {
              if (!(stopAsked || instance.interrupted) || Exit.isSuccess(exit)) return
              instance.interrupted = true
              instance.suspended = false
            })
          )
        )
      })
    return Effect.flatMap(payload, (decoded) => body(decoded).pipe(
      Workflow.intoResult,
      Effect.provideService(WorkflowEngine.WorkflowInstance, instance),
      Effect.provideService(WorkflowEngine.WorkflowEngine, state.engine),
      Effect.flatMap((result) =>
        Effect.map(Effect.orDie(Codec.resultText(workflow, result)), (text): Outcome => ({ result: text, complete: result._tag === "Complete" }))
      ),
      Effect.ensuring(Effect.sync(() => {
        if (state.live.get(id)?.instance === instance) state.live.delete(id)
      }))
    ))
  })

/** A run's end: the result stored; a suspension holds the execution under a new generation. */
const complete = (state: State) => (execution: Execution, outcome: Outcome, at: number): Effect.Effect<boolean, unknown> =>
  Effect.map(
    outcome.complete
      ? Executions.complete(state.storage, execution, outcome.result, at)
      : Executions.suspend(state.storage, execution, Number(execution.row.wakes), crypto.randomUUID(), outcome.result, at),
    (rows) => rows.length > 0
  )

/** Wakes the execution `id` in the transaction; the record to start when it needs one. */
export const wake = (state: State, id: string, now: number, interrupt = false) =>
  Effect.map(Executions.wake(state.storage, id, now, interrupt), (rows): ReadonlyArray<PendingRecord> =>
    rows.map((row) => ({ key: String(row.execution_id), at: Number(row.next_attempt_at), start: true })))

/**
 * After a run's end, in its settle transaction: an execution woken during the run runs again, and one
 * that ended wakes its parent (which waits, suspended, for its child's result).
 */
const settled = (state: State) => (claimed: { readonly execution_id?: unknown }, at: number) =>
  Effect.gen(function*() {
    const row = yield* Executions.read(state.storage, String(claimed.execution_id))
    if (row === undefined) return { pending: [] }
    if (row.status === "pending") {
      return { pending: Number(row.suspended) === 0 ? [{ key: String(row.execution_id), at: Number(row.next_attempt_at), start: true }] : [] }
    }
    return { pending: row.parent === null ? [] : yield* wake(state, String(row.parent), at) }
  })

/**
 * A run of `id` executing here is stopped as a suspension (its in-flight work is abandoned, as an
 * eviction would): it ends suspended, and the wake-up that asked for this makes it run again at once,
 * reading what woke it. A workflow racing a deferred against other work sees the deferred now, not when
 * the other work ends.
 */
export const preempt = (state: State, id: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const live = state.live.get(id)
    if (live === undefined) return Effect.void
    live.instance.suspended = true
    return Fiber.interruptFork(live.fiber)
  })

/** A clock's timer came due: its deferred is done (unless it was already) and its execution woken. */
const fireClock = (state: State, key: string, now: number) =>
  Effect.gen(function*() {
    const { deferredName, executionId } = clockOf(key)
    const stored = yield* Journal.recordDeferred(state.storage, executionId, deferredName, yield* Codec.exitText(Exit.void), now)
    return stored ? { pending: yield* wake(state, executionId, now), after: preempt(state, executionId) } : { pending: [] }
  })

/** The executions' table as the engine runs it. */
export const table = (
  state: State,
  policy: DurableTable["policy"],
  hook: Lifecycle.LifecycleHook | undefined
): DurableTable<Outcome> => ({
  kind: Schema.CAPABILITY,
  table: Schema.EXECUTIONS,
  keyColumn: "execution_id",
  policy,
  run: run(state),
  complete: complete(state),
  completesInOneStatement: true,
  settled: (row, settlement) => settled(state)(row, settlement.at),
  timers: { fire: (timer, now) => fireClock(state, timer.key, now) },
  holds: { where: Executions.RUNNABLE },
  describe: (row) => `workflow "${String(row.workflow)}" (execution "${String(row.execution_id)}")`,
  entity: (row) => ({
    entityKind: ENTITY_KIND,
    workflow: String(row.workflow),
    id: String(row.execution_id),
    generation: String(row.generation_id)
  }),
  onEvent: observe(state, hook)
})
