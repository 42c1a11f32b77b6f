/**
 * `durability/effect`: the services, layers, engine and capabilities as Effect modules.
 */
export * as AlarmService from "./AlarmService.js"
export * as Background from "./Background.js"
export * as DurableTable from "./DurableTable.js"
export * as Errors from "./Errors.js"
export * as Jobs from "./Jobs.js"
export * as Lifecycle from "./Lifecycle.js"
export * as Logging from "./Logging.js"
export * as Migrations from "./Migrations.js"
export * as NamedAlarms from "./NamedAlarms.js"
export * as Operations from "./Operations.js"
export * as PermitSemaphore from "./PermitSemaphore.js"
export * as RetryPolicy from "./RetryPolicy.js"
export * as Scheduler from "./Scheduler.js"
export * as SchedulerConfig from "./SchedulerConfig.js"
export * as StorageService from "./StorageService.js"
