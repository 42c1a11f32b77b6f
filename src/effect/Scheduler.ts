/**
 * `Scheduler` as `durability/effect` shows it: the engine's service, the layers a user builds it
 * with, and the types of `attach` (a table of your own). The engine's own constructors (`make`,
 * `layer` over services a user never provides, the facade's `layerDurableObjectResolved`) stay
 * internal, so changing them is no breaking change.
 * @packageDocumentation
 */
export {
  Admission,
  LeaseExpiry,
  layerDurableObject,
  layerWith,
  Scheduler,
  type Services,
  transaction,
  UPKEEP_DELAY
} from "../engine/Scheduler.js"
export type {
  Admissions,
  AlarmInvocationInfo,
  AlarmRetryInfo,
  AttemptLimits,
  AttemptPolicy,
  Completion,
  Dispatch,
  DurabilityContext,
  DurableTable,
  EngineSummary,
  Execution,
  Holds,
  Leases,
  LeaseState,
  PendingRecord,
  SchedulerConfig,
  SchedulerOptions,
  SettledWork,
  Settlement,
  Slot,
  TableHandle,
  Timer,
  TimerHandle,
  Timers
} from "../engine/Scheduler.js"
