/**
 * Durable workflows: many instances per object, each a handler replayed over its stored steps, that
 * sleep, wait for events and run children while holding nothing but their rows. This is the capability
 * the promise face (`DurabilityWorkflows`) runs on; calls are by workflow name and instance id.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Capability from "../engine/capability.js"
import * as ListQuery from "../engine/listQuery.js"
import type * as Scheduler from "../engine/Scheduler.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as Watchers from "../engine/watchers.js"
import {
  InvalidInputError,
  type InvalidOptionError,
  type MigrationError,
  type ParticipantConflictError,
  type StorageError,
  WorkflowFinishedError,
  WorkflowNotFoundError,
  WorkflowTerminatedError
} from "../shared/Errors.js"
import * as Json from "../shared/json.js"
import * as Late from "../shared/late.js"
import * as Time from "../shared/duration.js"
import { shown } from "../shared/validate.js"
import * as StepMemo from "../steps/memo.js"
import type { TableHandle } from "../engine/DurableTable.js"
import * as EventsTable from "./eventsTable.js"
import * as InstancesTable from "./instancesTable.js"
import * as Limits from "./limits.js"
import * as Participant from "./participant.js"
import { CAPABILITY, migrations } from "./schema.js"
import * as StepsTable from "./stepsTable.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as WorkflowsInspect from "./inspection.js"
import type {
  WorkflowInstanceInfo,
  WorkflowInstanceStatus,
  WorkflowListOptions,
  WorkflowPage,
  WorkflowStepInfo
} from "./types.js"

export type { WorkflowDefinition } from "./participant.js"
export type * from "./types.js"

/** Options of the workflows: the runs' retries and timeouts, and a lifecycle hook. */
export interface WorkflowsOptions extends Capability.CapabilityOptions {
  /** The error a handler sees for one of the library's (a step's timeout, a child's failure); default: as it is. */
  readonly presentError?: ((error: unknown) => unknown) | undefined
}

/** What `create` takes. */
export interface CreateOptions {
  /** The instance's id (default: a random UUID). */
  readonly id?: string | undefined
  /** What the handler reads as `event.payload` (JSON, at most 1 MiB). */
  readonly params?: unknown
}

type Failure = InvalidInputError | StorageError
type Live = Failure | WorkflowNotFoundError | WorkflowFinishedError

/** The workflows service: every call by workflow name and instance id. */
export interface Workflows {
  /** Creates an instance (or returns the one with this id, unchanged); it starts at once while a permit is free. */
  readonly create: (workflow: string, options?: CreateOptions) => Effect.Effect<{ readonly id: string; readonly created: boolean }, Failure>
  /** Creates up to 100 instances in one transaction. */
  readonly createBatch: (
    workflow: string,
    instances: ReadonlyArray<CreateOptions>
  ) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly created: boolean }>, Failure>
  readonly status: (workflow: string, id: string) => Effect.Effect<WorkflowInstanceInfo, Failure | WorkflowNotFoundError>
  /** Fails with `WorkflowNotFoundError` unless the instance exists (one read of its row). */
  readonly exists: (workflow: string, id: string) => Effect.Effect<void, Failure | WorkflowNotFoundError>
  /** Lets a running step finish and starts nothing new; a waiting instance stays asleep until resumed. */
  readonly pause: (workflow: string, id: string) => Effect.Effect<void, Live>
  readonly resume: (workflow: string, id: string) => Effect.Effect<void, Live>
  /** Ends the instance: its running step's signal is aborted with `WorkflowTerminatedError`. */
  readonly terminate: (workflow: string, id: string) => Effect.Effect<void, Live>
  /** Starts the instance over from its first step (its steps and events are deleted). */
  readonly restart: (workflow: string, id: string) => Effect.Effect<void, Failure | WorkflowNotFoundError>
  /** Sends an event: kept until the first `waitForEvent` of its type consumes it, and wakes one waiting. */
  readonly sendEvent: (
    workflow: string,
    id: string,
    event: { readonly type: string; readonly payload?: unknown }
  ) => Effect.Effect<void, Live>
  readonly list: (workflow: string, options?: WorkflowListOptions) => Effect.Effect<WorkflowPage, Failure>
  /** A page of the instance's steps from `from` (a position, default 1). */
  readonly steps: (
    workflow: string,
    id: string,
    options?: { readonly from?: number | undefined; readonly limit?: number | undefined }
  ) => Effect.Effect<ReadonlyArray<WorkflowStepInfo>, Failure | WorkflowNotFoundError>
  /** Waits up to `timeoutMs` for the instance to end; returns its status then. */
  readonly wait: (
    workflow: string,
    id: string,
    options: { readonly timeoutMs: Time.CallDuration }
  ) => Effect.Effect<WorkflowInstanceInfo, Failure | WorkflowNotFoundError>
  /** Deletes every instance created before `before` (with its steps and events); returns how many. */
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, Failure>
}

/** Applies (default: latest) or reverts (`null`: all) the workflows' migrations, through the `StorageService`. */
export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

const STATUSES: ReadonlyArray<WorkflowInstanceStatus> = ["queued", "running", "paused", "waiting", "complete", "errored", "terminated"]

/** An instance's public status from its row. */
export const statusOf = InstancesTable.statusOf

export const stepInfo = (step: StepsTable.Step): WorkflowStepInfo => ({
  position: step.seq,
  name: step.name,
  kind: step.kind,
  status: step.status,
  attempt: step.attempt,
  ...(step.result === null ? {} : { result: Json.decode(step.result) }),
  error: step.errorName === null ? null : { name: step.errorName, message: step.errorMessage ?? "" },
  wakeAt: step.wakeAt,
  startedAt: step.startedAt,
  endedAt: step.endedAt
})

export const infoOf = (row: Row, steps: ReadonlyArray<StepsTable.Step>): WorkflowInstanceInfo => {
  const status = statusOf(row)
  return {
    workflow: String(row.workflow),
    id: String(row.instance_id),
    status,
    ...(row.status === "complete" && row.output !== null ? { output: Json.decode(String(row.output)) } : {}),
    error: row.status === "failed" || row.status === "terminated"
      ? { name: String(row.last_error_name ?? "Error"), message: String(row.last_error ?? "") }
      : null,
    waitingFor: Participant.waitingOf(row),
    wakeAt: row.wake_at === null ? null : Number(row.wake_at),
    params: Json.decode(String(row.params)),
    parent: row.parent === null ? null : String(row.parent),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    endedAt: row.ended_at === null ? null : Number(row.ended_at),
    steps: steps.map(stepInfo)
  }
}

/** Attaches the workflows to the object's scheduler (migrating their tables first) and returns their service. */
export const make = (
  definitions: Readonly<Record<string, Participant.WorkflowDefinition>>,
  options: WorkflowsOptions = {}
): Effect.Effect<
  Workflows,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService
> =>
  Effect.gen(function*() {
    const handle = Late.make<TableHandle>("The workflows' table handle")
    const pausing = new Set<string>()
    const newGeneration = () => crypto.randomUUID()
    const insertInstance = (storage: StorageService, workflow: string, id: string, params: string, parent: string | null, at: number) => {
      const key = InstancesTable.keyOf(workflow, id)
      return Effect.map(
        InstancesTable.insert(storage, { key, workflow, id, generation: newGeneration(), params, parent, at }),
        (created) => {
          // A pause asked during an instance's last step outlives it here (nothing resumes an ended instance): a new
          // instance under its key (purged, then created again) must not inherit it, or it suspends waiting for nothing.
          if (created) pausing.delete(key)
          return { key, created }
        }
      )
    }
    const checkWorkflow = (workflow: unknown) =>
      typeof workflow === "string" && Capability.ownDefinition(definitions, workflow) !== undefined
        ? Effect.succeed(workflow)
        : Effect.fail(
          new InvalidInputError({
            field: "workflow",
            kind: "type",
            message: `No workflow registered as ${shown(workflow)}; registered: ${Object.keys(definitions).join(", ")}`
          })
        )
    const { presentError, ...capabilityOptions } = options
    const capability = yield* Capability.make(Participant.spec(definitions, capabilityOptions, (storage) => ({
      storage,
      handle: handle.get,
      pausing: (key) => pausing.has(key),
      present: presentError ?? ((error) => error),
      createChild: (workflow, id, params, parent, now) =>
        Effect.gen(function*() {
          yield* checkWorkflow(workflow)
          yield* Limits.id("options.id", id)
          const stored = yield* Limits.payload("options.params", params)
          const made = yield* insertInstance(storage, workflow, id, stored, parent, now)
          return { key: made.key, pending: made.created ? [{ key: made.key, at: now, start: true }] : [] }
        })
    })))
    handle.set(capability.handle)
    const { storage, watchers } = capability

    const readLive = (workflow: string, id: string) =>
      Effect.gen(function*() {
        yield* checkWorkflow(workflow)
        yield* Limits.id("id", id)
        const row = yield* InstancesTable.read(storage, InstancesTable.keyOf(workflow, id))
        if (row === undefined) {
          return yield* new WorkflowNotFoundError({ message: `No instance "${id}" of workflow "${workflow}"`, workflow, id })
        }
        return row
      })
    /** The instance's status with its first 1 000 steps. */
    const withSteps = (row: Row) => Effect.map(StepsTable.page(storage, String(row.key), 1, 1000), (steps) => infoOf(row, steps))
    const alive = (row: Row) =>
      Participant.isEnded(row.status)
        ? Effect.fail(
          new WorkflowFinishedError({
            message: `Instance "${String(row.instance_id)}" of workflow "${String(row.workflow)}" has ended (${statusOf(row)})`,
            workflow: String(row.workflow),
            id: String(row.instance_id),
            status: statusOf(row)
          })
        )
        : Effect.void

    const checkedCreate = (options: CreateOptions | undefined) =>
      Effect.gen(function*() {
        if (options !== undefined && (typeof options !== "object" || options === null)) {
          return yield* new InvalidInputError({ field: "options", kind: "type", message: `options must be an object, got ${shown(options)}` })
        }
        const id = options?.id === undefined ? crypto.randomUUID() : yield* Limits.id("id", options.id)
        const params = yield* Limits.payload("params", options?.params)
        return { id, params }
      })

    const createMany = (workflow: string, list: ReadonlyArray<CreateOptions | undefined>) =>
      Effect.gen(function*() {
        yield* checkWorkflow(workflow)
        const checked = yield* Effect.forEach(list, checkedCreate)
        const at = yield* Clock.currentTimeMillis
        return yield* capability.handle.writePending(
          Effect.forEach(checked, ({ id, params }) => Effect.map(insertInstance(storage, workflow, id, params, null, at), (made) => ({ id, ...made }))),
          (made) => made.filter((one) => one.created).map((one) => ({ key: one.key, at, start: true }))
        ).pipe(Effect.map((made) => made.map(({ created, id }) => ({ id, created }))))
      })

    const service: Workflows = {
      create: (workflow, options) =>
        Effect.map(createMany(workflow, [options]), ([made]) => made!).pipe(Effect.withSpan("Workflows.create")),
      createBatch: (workflow, instances) =>
        Effect.gen(function*() {
          if (!Array.isArray(instances) || instances.length === 0 || instances.length > Limits.MAX_BATCH) {
            return yield* new InvalidInputError({
              field: "instances",
              kind: "range",
              message: `createBatch takes an array of 1 to ${Limits.MAX_BATCH} instances, got ${shown(instances)}`
            })
          }
          const ids = instances.map((options) => (options as CreateOptions | undefined)?.id).filter((id) => id !== undefined)
          if (new Set(ids).size !== ids.length) {
            return yield* new InvalidInputError({ field: "instances", kind: "type", message: "createBatch was given one id twice" })
          }
          return yield* createMany(workflow, instances)
        }).pipe(Effect.withSpan("Workflows.createBatch")),
      status: (workflow, id) => Effect.flatMap(readLive(workflow, id), withSteps).pipe(Effect.withSpan("Workflows.status")),
      exists: (workflow, id) => Effect.asVoid(readLive(workflow, id)).pipe(Effect.withSpan("Workflows.exists")),
      pause: (workflow, id) =>
        Effect.gen(function*() {
          const row = yield* readLive(workflow, id)
          yield* alive(row)
          const at = yield* Clock.currentTimeMillis
          const key = String(row.key)
          // Flagged before the write commits: a run must never find the row paused while it may still begin a step
          // (the write can yield before it returns). resume, terminate, restart and a new instance clear the flag.
          const known = pausing.has(key)
          pausing.add(key)
          yield* capability.handle.write(
            Effect.zipRight(InstancesTable.setPaused(storage, key, true, at), capability.handle.timers.cancel(key))
          ).pipe(Effect.tapError(() => Effect.sync(() => known || pausing.delete(key))))
        }).pipe(Effect.withSpan("Workflows.pause")),
      resume: (workflow, id) =>
        Effect.gen(function*() {
          const row = yield* readLive(workflow, id)
          yield* alive(row)
          const at = yield* Clock.currentTimeMillis
          const key = String(row.key)
          pausing.delete(key)
          yield* capability.handle.writePending(
            Effect.gen(function*() {
              const [resumed] = yield* InstancesTable.setPaused(storage, key, false, at)
              if (resumed === undefined) return false
              // A suspended instance looks again at what it waits for: its time may have come while paused.
              if (resumed.status === "suspended") return yield* InstancesTable.wake(storage, key, at)
              return true
            }),
            (runnable) => runnable ? { key, at, start: true } : undefined,
            { reconcile: true }
          )
        }).pipe(Effect.withSpan("Workflows.resume")),
      terminate: (workflow, id) =>
        Effect.gen(function*() {
          const row = yield* readLive(workflow, id)
          if (row.status === "terminated") return
          yield* alive(row)
          const at = yield* Clock.currentTimeMillis
          const key = String(row.key)
          pausing.delete(key)
          const terminated = yield* capability.handle.writePending(
            Effect.gen(function*() {
              const [ended] = yield* InstancesTable.terminate(storage, key, newGeneration(), at)
              if (ended === undefined) return { ended: false, pending: [] }
              yield* capability.handle.timers.cancel(key)
              return { ended: true, pending: yield* Participant.wakeParent(storage, capability.handle.timers, ended, at) }
            }),
            (done) => done.pending,
            { reconcile: true }
          )
          if (!terminated.ended) {
            const again = yield* InstancesTable.read(storage, key)
            if (again !== undefined && again.status !== "terminated") yield* alive(again)
            return
          }
          yield* capability.handle.abort(
            (executing) => executing === key,
            new WorkflowTerminatedError({ message: `Instance "${id}" of workflow "${workflow}" was terminated` }),
            { release: true }
          )
          watchers.notify(key)
        }).pipe(Effect.withSpan("Workflows.terminate")),
      restart: (workflow, id) =>
        Effect.gen(function*() {
          const row = yield* readLive(workflow, id)
          const at = yield* Clock.currentTimeMillis
          const key = String(row.key)
          pausing.delete(key)
          yield* capability.handle.writePending(
            Effect.gen(function*() {
              yield* StepsTable.deleteAll(storage, key)
              yield* EventsTable.deleteAll(storage, key)
              yield* capability.handle.timers.cancel(key)
              yield* InstancesTable.restart(storage, key, newGeneration(), at)
            }),
            () => ({ key, at, start: true }),
            { reconcile: true }
          )
          yield* capability.handle.abort((executing) => executing === key, new Error("The workflow instance was restarted"), { release: true })
          yield* capability.handle.tryStart(key)
        }).pipe(Effect.withSpan("Workflows.restart")),
      sendEvent: (workflow, id, event) =>
        Effect.gen(function*() {
          if (typeof event !== "object" || event === null) {
            return yield* new InvalidInputError({ field: "event", kind: "type", message: `event must be { type, payload? }, got ${shown(event)}` })
          }
          const type = yield* Limits.eventType("type", event.type)
          const payload = yield* Limits.payload("payload", event.payload)
          yield* checkWorkflow(workflow)
          yield* Limits.id("id", id)
          const key = InstancesTable.keyOf(workflow, id)
          const at = yield* Clock.currentTimeMillis
          // The event and the waiter's wake-up commit together: no event between a wait's check and its sleep is missed.
          yield* capability.handle.writePending(
            Effect.gen(function*() {
              const row = yield* InstancesTable.read(storage, key)
              if (row === undefined) {
                return yield* new WorkflowNotFoundError({ message: `No instance "${id}" of workflow "${workflow}"`, workflow, id })
              }
              yield* alive(row)
              yield* EventsTable.insert(storage, key, type, payload, at)
              if (row.status !== "suspended" || !Participant.waitingOf(row).includes(`event:${type}`)) return false
              return yield* Participant.afterSuspend(storage, capability.handle.timers, row, at).pipe(Effect.map((made) => made.length > 0))
            }),
            (woken) => woken ? { key, at, start: true } : undefined
          )
        }).pipe(Effect.withSpan("Workflows.sendEvent")),
      list: (workflow, listOptions = {}) =>
        Effect.gen(function*() {
          yield* checkWorkflow(workflow)
          const query = yield* ListQuery.parse(listOptions, 100, 1000, STATUSES)
          const rows = yield* InstancesTable.page(storage, workflow, query.statuses, query.after, query.limit + 1)
          return ListQuery.page(
            rows,
            query.limit,
            (row) => {
              const { steps: _steps, ...info } = infoOf(row, [])
              return info
            },
            (last) => ListQuery.cursor(Number(last.created_at), String(last.key))
          )
        }).pipe(Effect.withSpan("Workflows.list")),
      steps: (workflow, id, stepOptions = {}) =>
        Effect.gen(function*() {
          const row = yield* readLive(workflow, id)
          const from = stepOptions.from ?? 1
          if (!Number.isSafeInteger(from) || from < 1) {
            return yield* new InvalidInputError({ field: "from", kind: "range", message: `from must be a position from 1, got ${shown(from)}` })
          }
          const take = yield* ListQuery.limit(stepOptions.limit, 1000, 1000)
          return (yield* StepsTable.page(storage, String(row.key), from, take)).map(stepInfo)
        }).pipe(Effect.withSpan("Workflows.steps")),
      wait: (workflow, id, waitOptions) =>
        Effect.gen(function*() {
          const limit = yield* Time.milliseconds("timeoutMs", (waitOptions as { timeoutMs?: unknown } | undefined)?.timeoutMs)
          const deadline = (yield* Clock.currentTimeMillis) + limit
          for (;;) {
            const row = yield* readLive(workflow, id)
            const now = yield* Clock.currentTimeMillis
            if (Participant.isEnded(row.status) || now >= deadline) {
              return yield* withSteps(row)
            }
            const pending = Effect.map(InstancesTable.read(storage, String(row.key)), (again) => again !== undefined && !Participant.isEnded(again.status))
            yield* Watchers.awaitSettle(watchers, String(row.key), String(row.generation_id), pending, deadline - now)
          }
        }).pipe(Effect.withSpan("Workflows.wait")),
      purgeBefore: capability.purgeBefore
    }
    // Actions through the service's own calls: the inspector changes nothing a caller could not.
    yield* InspectionRegistry.register(WorkflowsInspect.source(storage, Object.keys(definitions), service))
    return service
  })
