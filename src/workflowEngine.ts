/**
 * `durability/workflow-engine`: `@effect/workflow`'s `WorkflowEngine` on a Durable Object. Executions,
 * activities and durable deferreds live in the object's SQLite storage, runs are the engine's records with
 * attempts, and `DurableClock.sleep` is a durable timer on the object's one alarm. The only entry that
 * needs `@effect/workflow` (an optional peer dependency): a worker that never imports it never needs it.
 * @module durability/workflow-engine
 */
/**
 * The module itself (`layerEngine`, `make`, options and errors), named apart from `@effect/workflow`'s own
 * `WorkflowEngine` so both can be imported side by side.
 */
export * as DurableWorkflowEngine from "./workflows/WorkflowEngine.js"
export { layerEngine, make } from "./workflows/WorkflowEngine.js"
export type { MakeError, WorkflowEngineOptions } from "./workflows/WorkflowEngine.js"
export { WorkflowNotRegisteredError } from "./workflows/engine/errors.js"
