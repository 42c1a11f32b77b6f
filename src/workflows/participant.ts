/**
 * The workflows' part in the engine: an instance is a record while it has work (queued or running);
 * a suspended one is a durable timer at its earliest wake-up (or nothing at all while it waits for an
 * event or a child alone). A run's end is stored by `complete`; what follows it (its timer, an event or
 * a child that arrived meanwhile, a parent to wake) is its settled work, in the same transaction.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { PendingRecord, TimerHandle } from "../engine/DurableTable.js"
import * as Capability from "../engine/capability.js"
import type * as Policy from "../engine/policy.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import * as TimerSupport from "../engine/timerSupport.js"
import { DurableAttemptTimeoutError, InvalidOptionError, NonRetryableError, type StorageError, WorkflowReplayError } from "../shared/Errors.js"
import * as EventsTable from "./eventsTable.js"
import * as InstancesTable from "./instancesTable.js"
import * as Run from "./run.js"
import { CAPABILITY, migrations, TABLE } from "./schema.js"

/** One workflow: its handler, and how its runs are retried and timed out (a run replays; steps have their own). */
export interface WorkflowDefinition extends Policy.ExecutionOptions {
  readonly handler: Run.Handler
}

/** What each instance waits for, as stored (`event:<type>`, `child:<key>`). */
export const waitingOf = (row: Row): ReadonlyArray<string> => row.waiting === null ? [] : JSON.parse(String(row.waiting)) as Array<string>

const ENDED = new Set(["complete", "failed", "terminated"])
export const isEnded = (status: unknown): boolean => ENDED.has(String(status))

/**
 * In a transaction: whether a suspended instance must run again now (an event it waits for is there, a
 * child it waits for ended, its time came), else its timer at its wake-up. Returns the record made pending.
 */
export const afterSuspend = (storage: StorageService, timers: TimerHandle, row: Row, now: number): Effect.Effect<ReadonlyArray<PendingRecord>, StorageError> =>
  Effect.gen(function*() {
    const key = String(row.key)
    if (Number(row.paused) === 1) {
      yield* timers.cancel(key)
      return []
    }
    const waiting = waitingOf(row)
    const types = waiting.filter((what) => what.startsWith("event:")).map((what) => what.slice(6))
    let ready = row.wake_at !== null && Number(row.wake_at) <= now
    if (!ready) ready = yield* EventsTable.anyUnconsumed(storage, key, types)
    for (const what of waiting) {
      if (ready || !what.startsWith("child:")) continue
      const child = yield* InstancesTable.read(storage, what.slice(6))
      ready = child === undefined || isEnded(child.status)
    }
    if (ready && (yield* InstancesTable.wake(storage, key, now))) {
      yield* timers.cancel(key)
      return [{ key, at: now, start: true }]
    }
    if (row.wake_at === null) yield* timers.cancel(key)
    else yield* timers.set(key, Number(row.wake_at))
    return []
  })

/** In a transaction, once `child` ended: its parent runs again if it waits for it. */
export const wakeParent = (storage: StorageService, timers: TimerHandle, child: Row, now: number): Effect.Effect<ReadonlyArray<PendingRecord>, StorageError> =>
  Effect.gen(function*() {
    if (child.parent === null) return []
    const parent = yield* InstancesTable.read(storage, String(child.parent))
    if (parent === undefined || parent.status !== "suspended" || !waitingOf(parent).includes(`child:${String(child.key)}`)) return []
    if (!(yield* InstancesTable.wake(storage, String(parent.key), now))) return []
    yield* timers.cancel(String(parent.key))
    return [{ key: String(parent.key), at: now, start: true }]
  })

export const spec = (
  definitions: Readonly<Record<string, WorkflowDefinition>>,
  options: Capability.CapabilityOptions,
  parts: (storage: StorageService) => Run.RunParts
): Capability.Spec<WorkflowDefinition, InstancesTable.RunEnd> => ({
  kind: CAPABILITY,
  owner: "DurabilityWorkflows",
  module: "Workflows",
  table: TABLE,
  keyColumn: "key",
  nameColumn: "workflow",
  entityKind: "workflow",
  definitionsField: "workflows",
  migrations,
  definitions,
  // A run replays to where it stopped; 15 minutes is what one alarm invocation may take.
  options: { attemptTimeoutMs: 15 * 60_000, ...options },
  timeoutError: (name) => (timeoutMs) =>
    new DurableAttemptTimeoutError({ message: `A run of workflow "${name}" timed out after ${timeoutMs}ms`, timeoutMs }),
  // The handler's own failure ends the instance (its steps had their retries); only a run cut short is run again.
  isTerminal: () => (error) => error instanceof Run.HandlerFailure || error instanceof WorkflowReplayError,
  check: (definitions) => {
    const slashed = Object.keys(definitions).find((name) => name.includes("/"))
    return slashed === undefined ? undefined : new InvalidOptionError({
      field: `workflows.${slashed}`,
      kind: "type",
      message: `A workflow name cannot contain "/": ${JSON.stringify(slashed)}`
    })
  },
  releaseKeysOnPurge: true,
  purgeReason: () => new Error("The workflow instance was purged"),
  participant: ({ definitionOf, storage }) =>
    TimerSupport.withTimers({
      run: (execution) =>
        Effect.suspend(() => {
          const name = String(execution.row.workflow)
          const definition = definitionOf(name)
          if (definition === undefined) {
            return Effect.fail(new NonRetryableError({ message: `No workflow registered as "${name}"` }))
          }
          return Run.run(parts(storage), definition.handler, execution)
        }),
      complete: (execution, value, settledAt) => InstancesTable.end(storage, execution, value, settledAt),
      settled: (row, settlement, timers) =>
        Effect.gen(function*() {
          const current = yield* InstancesTable.read(storage, String(row.key))
          if (current === undefined) return { pending: [] }
          if (current.status === "suspended") return { pending: yield* afterSuspend(storage, timers, current, settlement.at) }
          if (isEnded(current.status)) return { pending: yield* wakeParent(storage, timers, current, settlement.at) }
          return { pending: [] }
        }),
      timers: {
        fire: (timer, now, timers) =>
          Effect.gen(function*() {
            const row = yield* InstancesTable.read(storage, timer.key)
            if (row === undefined || row.status !== "suspended") return { pending: [] }
            return { pending: yield* afterSuspend(storage, timers, row, now) }
          })
      },
      // A paused instance is not claimed until it is resumed.
      holds: { where: "paused = 0" },
      describe: (row) => `workflow "${String(row.workflow)}" (instance "${String(row.instance_id)}")`,
      entity: (row) => ({
        entityKind: "workflow",
        workflow: String(row.workflow),
        instance: String(row.instance_id),
        id: String(row.key),
        generation: String(row.generation_id)
      })
    })
})
