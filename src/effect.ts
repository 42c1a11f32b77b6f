/**
 * `durability/effect`: the capabilities, the engine's layers and the services a user provides or
 * reads, as Effect modules. A deliberate surface (its declarations are in `api/`, compared by
 * `npm test`): the capability modules whole; the engine modules that mix public and engine-only
 * members through `src/effect/` (`Scheduler`, `SchedulerConfig`, `Background`, `RetryPolicy`,
 * `Lifecycle`), which name the public ones. The engine's own services (`AlarmService`,
 * `PermitSemaphore`) and `DurableTable` (its user-facing types are `Scheduler`'s) are not here:
 * nothing outside the library needs them, so they may change without a breaking release.
 * @module durability/effect
 */
export * as Background from "./effect/Background.js"
export * as Errors from "./shared/Errors.js"
export * as Fanout from "./fanout/Fanout.js"
export * as InspectionRegistry from "./inspection/InspectionRegistry.js"
export * as Inspector from "./inspector/InspectorService.js"
export * as Jobs from "./jobs/Jobs.js"
export * as JobsConsumer from "./jobs/JobsConsumer.js"
export * as JobsMetrics from "./jobs/JobsMetrics.js"
export * as JobsProtocol from "./jobs/JobsProtocol.js"
export * as JobsRouter from "./jobs/JobsRouter.js"
export * as Lifecycle from "./effect/Lifecycle.js"
export * as Log from "./log/Log.js"
export * as Logging from "./engine/Logging.js"
export * as Migrations from "./engine/Migrations.js"
export * as NamedAlarms from "./alarms/NamedAlarms.js"
export * as Operations from "./operations/Operations.js"
export * as RetryPolicy from "./effect/RetryPolicy.js"
export * as RoutingClient from "./routing/RoutingClient.js"
export * as RoutingLoad from "./routing/RoutingLoad.js"
export * as Scheduler from "./effect/Scheduler.js"
export * as Schedules from "./schedules/Schedules.js"
export * as SchedulerConfig from "./effect/SchedulerConfig.js"
export * as StorageService from "./engine/StorageService.js"
export * as Steps from "./steps/Steps.js"
