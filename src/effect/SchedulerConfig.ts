/**
 * `SchedulerConfig` as `durability/effect` shows it: the settings, their service and the layer that
 * checks them (`Scheduler.layerWith` takes either). The facade's resolving steps stay internal.
 * @packageDocumentation
 */
export { type AlarmRetryInfo, defaults, layer, SchedulerConfig, type SchedulerOptions } from "../engine/SchedulerConfig.js"
