/**
 * `durability/inspector`: see and steer an object's background work over HTTP. `DurabilityInspector.handler`
 * serves the web page and the admin API in a Worker's `fetch`; `InspectorApi` is the API's `@effect/platform`
 * `HttpApi` definition (and its OpenAPI document); the protocol types are what an object's
 * `inspect(request)` receives and answers.
 * @module durability/inspector
 */
export { DurabilityInspector } from "./facade/DurabilityInspector.js"
export type {
  DurabilityInspectorAccess,
  DurabilityInspectorHandler,
  DurabilityInspectorNamespace,
  DurabilityInspectorObjects,
  DurabilityInspectorOptions,
  DurabilityInspectorResolver,
  DurabilityInspectorSource
} from "./facade/DurabilityInspector.js"
export * as InspectorApi from "./inspector/InspectorApi.js"
export type {
  ActionResult,
  AlarmItem,
  Answer,
  AnswerOf,
  Capability,
  DeadLetterItem,
  ErrorView,
  Failure as InspectorFailure,
  JobDetail,
  JobItem,
  JobState,
  JsonText,
  Overview,
  OperationItem,
  OperationStatus,
  QueueRates,
  QueueSummary,
  Request as InspectorRequest,
  RequestEncoded as InspectorRequestEncoded,
  ScheduleItem,
  SchedulerSummary
} from "./inspection/protocol.js"
