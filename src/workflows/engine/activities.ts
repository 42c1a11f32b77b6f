/**
 * Activities as the durable engine runs them: each attempt under an instance of its own, and a child
 * execution begun inside an activity decided with the activity, so a suspension suspends the whole
 * activity (once its fan-out had its turn) instead of being retried in place by 0.19.1's `Activity`.
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import type * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"

/**
 * A turn of the event loop: a promise the activity's own work waits for (WebCrypto hashing the id of a
 * child it executes) settles meanwhile. Not a time decision (nothing reads it as time), so not the Clock's.
 */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 0)))

/** The turns in a row with nothing begun that end a suspended activity. */
const QUIET_TURNS = 3

/** A running activity attempt, as its suspension is decided. */
interface ActivityRun {
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
  /** Child executions it is executing and whose outcome is not known yet. */
  deciding: number
  /** Child executions it began since its stop was asked for. */
  began: number
  stopping: boolean
}

/** The runs of the activities executing here, by the instance they run under. */
const activityRuns = new WeakMap<WorkflowEngine.WorkflowInstance["Type"], ActivityRun>()

/**
 * Stops a suspended activity once what it launched in the same step has had its turn: the children of a
 * fan-out each get their execution started (so the parent's next run finds them all) before it ends.
 */
const stopSoon = (run: ActivityRun) => {
  if (run.stopping) return
  run.stopping = true
  Effect.runFork(Effect.gen(function*() {
    // Quiet for a few turns in a row: nothing begun, nothing undecided (one turn is not always enough for
    // WebCrypto under load).
    for (let quiet = 0; quiet < QUIET_TURNS;) {
      run.began = 0
      yield* nextTurn
      quiet = run.deciding === 0 && run.began === 0 ? quiet + 1 : 0
    }
    run.fiber.unsafeInterruptAsFork(FiberId.none)
  }))
}

/**
 * A child execution begun by `parent`'s code; when `parent` is an activity's instance, its outcome is
 * decided with the activity's: a child that suspends suspends the whole activity (at once, not retried
 * in place), and waits for it to stop instead of failing its siblings.
 */
export const asChildOf = <A>(
  parent: WorkflowEngine.WorkflowInstance["Type"] | undefined,
  awaited: Effect.Effect<Workflow.Result<unknown, unknown> | A>
): Effect.Effect<Workflow.Result<unknown, unknown> | A> => {
  const run = parent === undefined ? undefined : activityRuns.get(parent)
  if (run === undefined) return awaited
  return Effect.suspend(() => {
    run.deciding++
    run.began++
    return Effect.flatMap(Effect.ensuring(awaited, Effect.sync(() => run.deciding--)), (result) => {
      if (!Workflow.isResult(result) || result._tag !== "Suspended") return Effect.succeed(result)
      parent!.suspended = true
      return Effect.never
    })
  })
}

/**
 * One attempt of an activity, under an instance of its own. An activity that suspends (it waits for a
 * child or a deferred) is stopped from here: `@effect/workflow` would otherwise retry its interruption
 * in place, keeping the run (and its permit) alive instead of suspending the execution.
 */
export const runActivity = (activity: Activity.Any, parent: WorkflowEngine.WorkflowInstance["Type"]) =>
  Effect.suspend(() => {
    const instance = WorkflowEngine.WorkflowInstance.initial(parent.workflow, parent.executionId)
    instance.interrupted = parent.interrupted
    let suspended = false
    Object.defineProperty(instance, "suspended", {
      get: () => suspended,
      set: (value: boolean) => {
        suspended = value
        const run = activityRuns.get(instance)
        if (value && run !== undefined) stopSoon(run)
      }
    })
    const body = Effect.withFiberRuntime<unknown, unknown, WorkflowEngine.WorkflowInstance>((fiber) => {
      activityRuns.set(instance, { fiber, deciding: 0, began: 0, stopping: false })
      return activity.executeEncoded as Effect.Effect<unknown, unknown, WorkflowEngine.WorkflowInstance>
    })
    return body.pipe(Workflow.intoResult, Effect.provideService(WorkflowEngine.WorkflowInstance, instance))
  })
