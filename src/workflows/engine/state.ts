/**
 * What the workflow engine keeps in memory, all of it rebuilt or given up on eviction: the registered
 * workflows (registered again when the runtime is built), the runs executing in this isolate (so
 * `interrupt` can reach them) and the waiters of executions' settles.
 * @internal
 */
import type * as Deferred from "effect/Deferred"
import type * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as Workflow from "@effect/workflow/Workflow"
import type * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import type { TableHandle } from "../../engine/DurableTable.js"
import type { StorageService } from "../../engine/StorageService.js"
import type * as Watchers from "../../engine/watchers.js"

/** A registered workflow: its definition and its body (services already provided). */
export interface Registered {
  readonly workflow: Workflow.Any
  readonly execute: (
    payload: object,
    executionId: string
  ) => Effect.Effect<unknown, unknown, WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine>
}

/** A run executing in this isolate. */
export interface Live {
  readonly instance: WorkflowEngine.WorkflowInstance["Type"]
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
}

/** The engine's parts, shared by its table (runs) and its calls. */
export interface State {
  readonly storage: StorageService
  readonly watchers: Watchers.Watchers
  readonly registered: Map<string, Registered>
  readonly live: Map<string, Live>
  /** Done when the engine's scope closes (an eviction): callers waiting for a run are interrupted, as the run is. */
  readonly closed: Deferred.Deferred<void>
  /** Set once the table is attached. */
  handle: TableHandle
  /** Set once the service is made: what runs are given as `WorkflowEngine`. */
  engine: WorkflowEngine.WorkflowEngine["Type"]
}

/** The key of a durable clock's timer: the execution and the clock's deferred. */
export const clockKey = (executionId: string, deferredName: string): string => JSON.stringify([executionId, deferredName])

/** The execution and deferred a clock's timer key names. */
export const clockOf = (key: string): { readonly executionId: string; readonly deferredName: string } => {
  const [executionId, deferredName] = JSON.parse(key) as [string, string]
  return { executionId, deferredName }
}
