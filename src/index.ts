/**
 * `durability`: durable background work for Cloudflare Durable Objects, as
 * promise-style classes. The Effect API lives in `durability/effect`.
 * @module durability
 */
export { DurabilityScheduler } from "./facade/DurabilityScheduler.js"
export { answerInspection } from "./facade/answerInspection.js"
export type { AnswerInspectionOptions } from "./facade/answerInspection.js"
export type { RedactionTarget as DurabilityRedactionTarget } from "./inspector/InspectorService.js"
export type {
  Answer as DurabilityInspectAnswer,
  Failure as DurabilityInspectFailure,
  RequestEncoded as DurabilityInspectRequest
} from "./inspection/protocol.js"
export type {
  AlarmInvocationInfo,
  AlarmRetryInfo,
  DurabilityContext,
  DurabilityRuntime,
  DurabilitySchedulerConfig,
  DurabilitySchedulerOptions,
  DurabilityServices
} from "./facade/DurabilityScheduler.js"
export { Durability, DurabilityOperations } from "./facade/Durability.js"
export type {
  DurabilityBase,
  DurabilityConfig,
  DurabilityConstructor,
  DurabilityInstance,
  DurabilityMethodOptions,
  DurabilityOptions,
  DurabilityRetryOptions,
  DurableCall,
  DurableHandler,
  DurableJobHandle,
  DurableJobWaitOptions,
  DurableOperation,
  DurableListOptions,
  DurableOperationEntry,
  DurableOperationPage,
  DurableOperationResult,
  DurableRegistration,
  DurableRegistrationResult,
  HandlerMap
} from "./facade/Durability.js"
export type { DurableStep, DurableStepOptions } from "./facade/helper.js"
export { DurabilityAlarms } from "./facade/DurabilityAlarms.js"
export type {
  AlarmHandlerMap,
  AlarmPayloadOf,
  DurabilityAlarmMethodOptions,
  DurabilityAlarmsBase,
  DurabilityAlarmsConfig,
  DurabilityAlarmsConstructor,
  DurabilityAlarmsInstance,
  DurabilityAlarmsOptions,
  DurableAlarmHandler,
  DurableAlarmInfo,
  DurableAlarmListOptions,
  DurableAlarmPage,
  DurableNamedAlarm,
  DurableNamedAlarmState
} from "./facade/DurabilityAlarms.js"
export { DurabilityJobs } from "./facade/DurabilityJobs.js"
export type {
  DurabilityJobsBase,
  DurabilityJobsConfig,
  DurabilityJobsConstructor,
  DurabilityJobsInstance,
  DurabilityJobsOptions,
  DurabilityQueueOptions,
  DurableBatchHandler,
  DurableBatchJob,
  DurableBatchOutcome,
  DurableJob,
  DurableJobAddOptions,
  DurableJobCleanOptions,
  DurableJobFilter,
  DurableJobDedupOptions,
  DurableJobFlowNode,
  DurableJobHandler,
  DurableJobLeaseOptions,
  DurableJobRef,
  DurableJobsAnyQueues,
  DurableJobsRouteKeyInput,
  DurableJobsRouter,
  DurableJobsRouterOptions,
  DurableJobsShardNamespace,
  DurableQueue,
  DurableRoutedCounts,
  DurableRoutedQueue,
  QueueMap
} from "./facade/DurabilityJobs.js"
// The Queues consumer side of job queues with `processing: { queue }` (to become DurabilityJobs.consumer / .deadLetterConsumer).
export { jobsConsumer, jobsDeadLetterConsumer } from "./facade/jobsConsumer.js"
export type {
  DurableJobEnvelope,
  DurableJobsConsumerOptions,
  DurableJobsDeadLetterConsumerOptions,
  DurableJobsNamespace,
  DurableQueueBatch,
  DurableQueuedJob,
  DurableQueuedJobHandler,
  DurableQueueHandler,
  DurableQueueMessage
} from "./facade/jobsConsumer.js"
export type {
  AddResult as DurableJobAddResult,
  BulkAction as DurableJobBulkAction,
  BulkOptions as DurableJobBulkOptions,
  BulkResult as DurableJobBulkResult,
  ChildValue as DurableJobChildValue,
  DeadLetter as DurableJobDeadLetter,
  DeadLetterPage as DurableJobDeadLetterPage,
  FlowResult as DurableJobFlowResult,
  JobEvent as DurableJobEvent,
  JobInfo as DurableJobInfo,
  JobLease as DurableJobLease,
  JobListOptions as DurableJobListOptions,
  JobLogs as DurableJobLogs,
  JobPage as DurableJobPage,
  JobState as DurableJobState,
  RateLimit as DurableJobRateLimit
} from "./jobs/Jobs.js"
export { DurabilitySchedules } from "./facade/DurabilitySchedules.js"
export type {
  DurabilitySchedulesBase,
  DurabilitySchedulesConfig,
  DurabilitySchedulesConstructor,
  DurabilitySchedulesInstance,
  DurabilitySchedulesOptions,
  DurableSchedule,
  DurableScheduleInfo,
  DurableScheduleOptions,
  DurableSchedulePage,
  DurableScheduleRun,
  DurableScheduleTiming,
  DurableScheduleUpsertResult,
  EnqueueTarget,
  ScheduleHandlerMap
} from "./facade/DurabilitySchedules.js"
export { DurabilityWorkflows } from "./facade/DurabilityWorkflows.js"
export type {
  DurabilityWorkflowOptions,
  DurabilityWorkflowsBase,
  DurabilityWorkflowsConfig,
  DurabilityWorkflowsConstructor,
  DurabilityWorkflowsInstance,
  DurabilityWorkflowsOptions,
  WorkflowClass,
  WorkflowHandler,
  WorkflowInstance,
  WorkflowMap,
  WorkflowOutputOf,
  WorkflowParamsOf
} from "./facade/DurabilityWorkflows.js"
export { createWorkflow } from "./facade/createWorkflow.js"
export type {
  DurableWorkflow,
  DurableWorkflowEvent,
  DurableWorkflowHandler,
  DurableWorkflowResolvedStepConfig,
  DurableWorkflowStep,
  DurableWorkflowStepConfig,
  DurableWorkflowStepContext,
  WorkflowStatus
} from "./facade/createWorkflow.js"
export type {
  DurationUnit,
  WorkflowChildOptions,
  WorkflowDuration,
  WorkflowEvent,
  WorkflowInstanceInfo,
  WorkflowInstanceStatus,
  WorkflowListOptions,
  WorkflowPage,
  WorkflowReceivedEvent,
  WorkflowStep,
  WorkflowStepConfig,
  WorkflowStepContext,
  WorkflowStepInfo
} from "./workflows/types.js"
export type { MigrationResult as DurabilityMigrationResult, SchedulerAttachment } from "./facade/attachment.js"
export {
  DuplicateDurableCallError,
  DurableAlarmTimeoutError,
  DurableAttemptsExhaustedError,
  DurableAttemptTimeoutError,
  DurableCanceledError,
  DurableResultSerializationError,
  DurableRetryPolicyError,
  ChildJobFailedError,
  JobCanceledError,
  DurableStepError,
  JobStalledError,
  NonRetryableError,
  reviveError,
  StaleLeaseError,
  WorkflowChildError,
  WorkflowFinishedError,
  WorkflowNotFoundError,
  WorkflowReplayError,
  WorkflowTerminatedError,
  WorkflowTimeoutError
} from "./facade/errors.js"
export { migrations as durabilityOperationMigrations } from "./operations/Operations.js"
export { migrations as durabilityNamedAlarmMigrations } from "./alarms/NamedAlarms.js"
export { migrations as durabilityJobMigrations } from "./jobs/Jobs.js"
export { migrations as durabilityScheduleMigrations } from "./schedules/Schedules.js"
export { migrations as durabilityWorkflowMigrations } from "./workflows/schema.js"
export {
  DurabilityFanout,
  durabilityFanoutMigrations,
  FanoutEnqueueError,
  FanoutSettlementError,
  FanoutTimeoutError
} from "./facade/DurabilityFanout.js"
export type {
  DurabilityFanoutConfig,
  DurabilityFanoutMessage,
  FanoutConsumerTarget,
  FanoutEnqueueOptions,
  FanoutInput,
  FanoutStorageTarget,
  FanoutTarget
} from "./facade/DurabilityFanout.js"
export type { LifecycleEvent as DurabilityLifecycleEvent, LifecycleHook } from "./engine/Lifecycle.js"
export { logLifecycle } from "./engine/Logging.js"
export type { SerializedError } from "./shared/Errors.js"
// The load telemetry and the stored-message envelope fanout and the log answer with (shared with routing).
export { RoutingLoad } from "./facade/RoutingLoad.js"
export type { Direction, EnqueueResult, LoadSnapshot, ProcessingLoad } from "./routing/RoutingLoad.js"
export type { FailureReason, MessageWrite, StoredMessage } from "./shared/StoredMessage.js"
export { DurabilityLog, durabilityLogLeaseMigrations, durabilityLogMigrations, maxLogBytes } from "./facade/DurabilityLog.js"
export type {
  DurabilityLogConfig,
  DurabilityLogOptions,
  LogAppendInput,
  LogBounds,
  LogColdStorage,
  LogLease,
  LogLeaseInfo,
  LogLeasesOptions,
  LogPage,
  LogReadOptions,
  LogRecord,
  LogRetentionOptions,
  LogSegment
} from "./facade/DurabilityLog.js"
export { LogAppendError, LogLeaseError, LogTruncatedError } from "./facade/errors.js"
