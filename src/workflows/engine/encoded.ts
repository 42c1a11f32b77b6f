/**
 * The engine's side of `@effect/workflow`'s `WorkflowEngine.Encoded`: each call is a statement (or a
 * transaction) on this object's storage, and what it makes runnable is started by the engine.
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import type { Row } from "../../engine/StorageService.js"
import { InvalidInputError } from "../../shared/Errors.js"
import * as Validate from "../../shared/validate.js"
import { asChildOf, runActivity } from "./activities.js"
import * as Codec from "./codec.js"
import * as Executions from "./executionsTable.js"
import * as Journal from "./journalTable.js"
import { preempt, wake } from "./participant.js"
import { clockKey, type State } from "./state.js"
import { WorkflowNotRegisteredError } from "./errors.js"

/** Storage failing under a call whose contract has no error channel is a defect, as it is for the engine's runs. */
const orDie = Effect.orDie

/** What a stored execution says now: its result, or undefined while it has a run to come. */
const resultOf = (workflow: Workflow.Any, row: Row | undefined): Effect.Effect<Workflow.Result<unknown, unknown> | undefined> => {
  if (row === undefined) return Effect.succeed(undefined)
  if (row.status === "failed") {
    // The engine spent the attempts of a run that failed outside the workflow: the execution died.
    return Effect.succeed(
      new Workflow.Complete({ exit: Exit.die(new Error(String(row.last_error ?? "The workflow execution failed"))) })
    )
  }
  const settled = row.status === "completed" || Number(row.suspended) === 1
  return settled && row.result !== null ? Effect.orDie(Codec.resultOf(workflow, String(row.result))) : Effect.succeed(undefined)
}

const needsRegistered = (state: State, workflow: Workflow.Any) =>
  Effect.suspend(() =>
    state.registered.has(workflow.name)
      ? Effect.void
      : Effect.die(new WorkflowNotRegisteredError({ workflow: workflow.name, message: `Workflow "${workflow.name}" is not registered` }))
  )

const checkedId = (executionId: string) =>
  Effect.suspend(() => {
    const problem = Validate.newKeyProblem("executionId", executionId)
    return problem === undefined ? Effect.void : Effect.die(new InvalidInputError({ field: "executionId", kind: "type", message: problem }))
  })

/**
 * Waits for the execution's run to end and returns what it says. A parent (a workflow waiting for its
 * child) does not hold its permit for a child that is not running here: it suspends, and the child's
 * end wakes it.
 */
const awaitResult = (state: State, workflow: Workflow.Any, id: string, parent: boolean) =>
  Effect.gen(function*() {
    while (true) {
      const signal = yield* state.watchers.signal(id, "")
      const row = yield* orDie(Executions.read(state.storage, id))
      const result = yield* resultOf(workflow, row)
      if (result !== undefined) return result
      if (row === undefined) return yield* Effect.die(new Error(`Workflow execution "${id}" is gone`))
      if (parent && !state.handle.executing(id)) return new Workflow.Suspended({})
      yield* Effect.raceFirst(Deferred.await(signal), Effect.zipRight(Deferred.await(state.closed), Effect.interrupt))
    }
  })

/** The `Encoded` engine over `state`. */
export const make = (state: State): WorkflowEngine.Encoded => {
  const { storage } = state
  const register: WorkflowEngine.Encoded["register"] = (workflow, execute) =>
    Effect.sync(() => {
      state.registered.set(workflow.name, { workflow, execute })
    })

  const execute = <const Discard extends boolean>(
    workflow: Workflow.Any,
    options: {
      readonly executionId: string
      readonly payload: object
      readonly discard: Discard
      readonly parent?: WorkflowEngine.WorkflowInstance["Type"] | undefined
    }
  ) =>
    Effect.gen(function*() {
      yield* needsRegistered(state, workflow)
      yield* checkedId(options.executionId)
      const payload = yield* Effect.catchAll(
        Codec.payloadText(workflow, options.payload),
        (cause) => Effect.die(new InvalidInputError({ field: "payload", kind: "type", message: `The payload of workflow "${workflow.name}" does not encode: ${cause.message}` }))
      )
      const now = yield* Clock.currentTimeMillis
      const execution = {
        id: options.executionId,
        generation: crypto.randomUUID(),
        workflow: workflow.name,
        payload,
        parent: options.parent?.executionId ?? null
      }
      yield* orDie(state.handle.writePending(
        Executions.insert(storage, execution, now),
        (inserted) => inserted.length > 0 ? { key: execution.id, at: now, start: true } : undefined,
        { oneStatementAt: now }
      ))
      if (options.discard) return undefined
      return yield* awaitResult(state, workflow, execution.id, options.parent !== undefined)
    }).pipe((effect) => asChildOf(options.parent, effect)) as Effect.Effect<Discard extends true ? void : Workflow.Result<unknown, unknown>>


  const poll: WorkflowEngine.Encoded["poll"] = (workflow, executionId) =>
    Effect.flatMap(orDie(Executions.read(storage, executionId)), (row) => resultOf(workflow, row))

  /** Makes the execution runnable (with `interrupt`, asking it to stop) and starts it when a permit is free. */
  const wakeUp = (executionId: string, interrupt: boolean) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      orDie(state.handle.writePending(
        interrupt ? wake(state, executionId, now, true) : Effect.map(Executions.resume(storage, executionId, now), (rows) =>
          rows.map((row) => ({ key: String(row.execution_id), at: Number(row.next_attempt_at), start: true }))),
        (pending) => pending
      )))

  const interrupt: WorkflowEngine.Encoded["interrupt"] = (_workflow, executionId) =>
    Effect.gen(function*() {
      yield* wakeUp(executionId, true)
      // A run here stops now: its end (an interruption of an interrupted instance) completes the execution.
      const live = state.live.get(executionId)
      if (live !== undefined) {
        live.instance.interrupted = true
        yield* Fiber.interruptFork(live.fiber)
      }
    })

  const resume: WorkflowEngine.Encoded["resume"] = (_workflow, executionId) => wakeUp(executionId, false)

  const activityExecute: WorkflowEngine.Encoded["activityExecute"] = (activity, attempt) =>
    Effect.gen(function*() {
      const instance = yield* WorkflowEngine.WorkflowInstance
      const id = instance.executionId
      const stored = yield* orDie(Journal.activity(storage, id, activity.name, attempt))
      if (stored !== undefined) return new Workflow.Complete({ exit: yield* Codec.exitOf(stored) })
      const result = yield* runActivity(activity, instance)
      if (result._tag === "Suspended") return result
      const now = yield* Clock.currentTimeMillis
      const kept = yield* orDie(Journal.recordActivity(storage, id, activity.name, attempt, yield* Codec.exitText(result.exit), now))
      return new Workflow.Complete({ exit: yield* Codec.exitOf(kept) })
    })

  const deferredResult: WorkflowEngine.Encoded["deferredResult"] = (deferred) =>
    Effect.gen(function*() {
      const instance = yield* WorkflowEngine.WorkflowInstance
      const stored = yield* orDie(Journal.deferred(storage, instance.executionId, deferred.name))
      return stored === undefined ? undefined : yield* Codec.exitOf(stored)
    })

  const deferredDone: WorkflowEngine.Encoded["deferredDone"] = (options) =>
    Effect.gen(function*() {
      yield* checkedId(options.executionId)
      // `DurableDeferred.into` (0.19.1) reports the interruption of its effect as the deferred's exit when a
      // run of the same execution is stopped (preempted, evicted): that is no result, the next run decides it.
      const from = yield* Effect.serviceOption(WorkflowEngine.WorkflowInstance)
      if (
        Option.isSome(from) && from.value.executionId === options.executionId &&
        Exit.isFailure(options.exit) && Cause.isInterruptedOnly(options.exit.cause)
      ) return
      const exit = yield* Codec.exitText(options.exit)
      const now = yield* Clock.currentTimeMillis
      const woken = yield* orDie(state.handle.writePending(
        Effect.flatMap(
          Journal.recordDeferred(storage, options.executionId, options.deferredName, exit, now),
          (stored) => stored ? wake(state, options.executionId, now) : Effect.succeed([])
        ),
        (pending) => pending
      ))
      if (woken.length > 0) yield* preempt(state, options.executionId)
    })

  const scheduleClock: WorkflowEngine.Encoded["scheduleClock"] = (_workflow, options) =>
    Effect.gen(function*() {
      const deferredName = options.clock.deferred.name
      // Every replay asks again: a clock that fired (its deferred done) or is set already is left alone.
      if ((yield* orDie(Journal.deferred(storage, options.executionId, deferredName))) !== undefined) return
      const now = yield* Clock.currentTimeMillis
      const key = clockKey(options.executionId, deferredName)
      const at = now + Duration.toMillis(options.clock.duration)
      yield* orDie(state.handle.write(
        Effect.flatMap(state.handle.timers.get(key), (timer) => timer === undefined ? state.handle.timers.set(key, at) : Effect.void)
      ))
    })

  // Each call is a span named as the service's method (the public edge: `makeUnsafe` passes them through).
  const traced = <F extends (...args: Array<any>) => Effect.Effect<any, any, any>>(name: string, f: F): F =>
    ((...args: Parameters<F>) => Effect.withSpan(f(...args), `WorkflowEngine.${name}`)) as F
  return {
    register: traced("register", register),
    execute: traced("execute", execute),
    poll: traced("poll", poll),
    interrupt: traced("interrupt", interrupt),
    resume: traced("resume", resume),
    activityExecute: traced("activityExecute", activityExecute),
    deferredResult: traced("deferredResult", deferredResult),
    deferredDone: traced("deferredDone", deferredDone),
    scheduleClock: traced("scheduleClock", scheduleClock)
  }
}
