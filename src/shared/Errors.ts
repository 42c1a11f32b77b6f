/**
 * Every typed failure of the Effect API. The promise facade turns each into an
 * `Error` subclass whose `name` equals the tag (Workers RPC keeps only name and message).
 * @packageDocumentation
 */
import * as Schema from "effect/Schema"
/** A SQL statement, transaction or alarm call of the Durable Object's storage failed. */
export class StorageError extends /* @__PURE__ */ Schema.TaggedError<StorageError>("durability/StorageError")("StorageError", {
  operation: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** An option given to a constructor or layer is out of range or of the wrong type. */
export class InvalidOptionError extends /* @__PURE__ */ Schema.TaggedError<InvalidOptionError>("durability/InvalidOptionError")(
  "InvalidOptionError",
  {
    field: Schema.String,
    /** `range` maps to `RangeError` in the facade, `type` to `TypeError`. */
    kind: Schema.Literal("range", "type"),
    message: Schema.String
  }
) {}

/** A second participant of one kind tried to attach to a scheduler. */
export class ParticipantConflictError
  extends /* @__PURE__ */ Schema.TaggedError<ParticipantConflictError>("durability/ParticipantConflictError")(
    "ParticipantConflictError",
    { kind: Schema.String, message: Schema.String }
  )
{}

/** Thrown (or failed with) by a handler to make its failure terminal, whatever the retry policy. */
export class NonRetryableError extends /* @__PURE__ */ Schema.TaggedError<NonRetryableError>("durability/NonRetryableError")(
  "NonRetryableError",
  { message: Schema.String, cause: Schema.optional(Schema.Defect) }
) {}

/** The retry policy threw or produced a delay that is not a non-negative safe integer. */
export class DurableRetryPolicyError extends /* @__PURE__ */ Schema.TaggedError<DurableRetryPolicyError>(
  "durability/DurableRetryPolicyError"
)("DurableRetryPolicyError", { message: Schema.String, cause: Schema.optional(Schema.Defect) }) {}

/** A stored record was due but had already used every attempt its policy allows. */
export class DurableAttemptsExhaustedError extends /* @__PURE__ */ Schema.TaggedError<DurableAttemptsExhaustedError>(
  "durability/DurableAttemptsExhaustedError"
)("DurableAttemptsExhaustedError", { message: Schema.String, attempts: Schema.Number }) {}

/** A handler did not settle within its attempt timeout; its signal was aborted with this error. */
export class DurableAttemptTimeoutError extends /* @__PURE__ */ Schema.TaggedError<DurableAttemptTimeoutError>(
  "durability/DurableAttemptTimeoutError"
)("DurableAttemptTimeoutError", { message: Schema.String, timeoutMs: Schema.Number }) {}

/** Applying or reverting a capability's migrations failed; the batch was rolled back. */
export class MigrationError extends /* @__PURE__ */ Schema.TaggedError<MigrationError>("durability/MigrationError")(
  "MigrationError",
  { message: Schema.String, cause: Schema.optional(Schema.Defect) }
) {}

/** The compact, storable shape of any failure. */
export interface SerializedError {
  /** The error's name (or its tag), e.g. `DurableAttemptTimeoutError`. */
  readonly name: string
  /** The error's message. */
  readonly message: string
}

/** An argument of a call (id, name, payload, time, timeout) is invalid; nothing was written. */
export class InvalidInputError extends /* @__PURE__ */ Schema.TaggedError<InvalidInputError>("durability/InvalidInputError")(
  "InvalidInputError",
  {
    field: Schema.String,
    /** `range` maps to `RangeError` in the facade, `type` to `TypeError`. */
    kind: Schema.Literal("range", "type"),
    message: Schema.String
  }
) {}

/** The id is already used by another operation (at registration, or when reading a result). */
export class DuplicateDurableCallError extends /* @__PURE__ */ Schema.TaggedError<DuplicateDurableCallError>(
  "durability/DuplicateDurableCallError"
)("DuplicateDurableCallError", {
  id: Schema.String,
  existing: Schema.String,
  requested: Schema.String,
  message: Schema.String
}) {}

/** A handler succeeded with a value that cannot be stored as JSON; the side effect is not re-run. */
export class DurableResultSerializationError extends /* @__PURE__ */ Schema.TaggedError<DurableResultSerializationError>(
  "durability/DurableResultSerializationError"
)("DurableResultSerializationError", { message: Schema.String, cause: Schema.optional(Schema.Defect) }) {}

/** A named alarm's handler did not settle within its attempt timeout. */
export class DurableAlarmTimeoutError extends /* @__PURE__ */ Schema.TaggedError<DurableAlarmTimeoutError>(
  "durability/DurableAlarmTimeoutError"
)("DurableAlarmTimeoutError", { message: Schema.String, timeoutMs: Schema.Number }) {}

/** The record was canceled (`cancel`); a running handler's signal is aborted with this error and it is not retried. */
export class DurableCanceledError extends /* @__PURE__ */ Schema.TaggedError<DurableCanceledError>("durability/DurableCanceledError")(
  "DurableCanceledError",
  { message: Schema.String }
) {}

/** A job was canceled (`cancel`): a running handler's signal is aborted with this error and the job is not retried. */
export class JobCanceledError extends /* @__PURE__ */ Schema.TaggedError<JobCanceledError>("durability/JobCanceledError")(
  "JobCanceledError",
  { message: Schema.String }
) {}

/**
 * A call with a lease's token (`heartbeat`, `log`, `complete`, `fail`) that no longer holds the job: its
 * lease expired or was reclaimed, the job was leased again, settled, canceled or removed. Nothing was written.
 * `canceled` is set (on `heartbeat` and `log`) when the job was canceled while this token held it, so a
 * worker can tell "stop, the job is canceled" from "stop, another holder has it".
 */
export class StaleLeaseError extends /* @__PURE__ */ Schema.TaggedError<StaleLeaseError>("durability/StaleLeaseError")(
  "StaleLeaseError",
  {
    message: Schema.String,
    queue: Schema.String,
    id: Schema.String,
    token: Schema.Number,
    canceled: Schema.optional(Schema.Struct({ reason: Schema.String }))
  }
) {}

/** A leased job whose leases expired more than its queue's `maxStalled` times: it fails for good. */
export class JobStalledError extends /* @__PURE__ */ Schema.TaggedError<JobStalledError>("durability/JobStalledError")(
  "JobStalledError",
  { message: Schema.String }
) {}

/** A parent job failed because one of its children failed for good (`onFailure: "fail"`, the default). */
export class ChildJobFailedError extends /* @__PURE__ */ Schema.TaggedError<ChildJobFailedError>("durability/ChildJobFailedError")(
  "ChildJobFailedError",
  { message: Schema.String, queue: Schema.String, id: Schema.String }
) {}

/**
 * A durable step (`Steps.step`, `call.step`) could not be used: its name (or an option) is invalid
 * (`invalid`) or repeats a step of the same attempt (`duplicate`), its result cannot be stored
 * (`unstorable`: not JSON, too large, refused by its schema) or its stored result no longer decodes
 * (`undecodable`). Terminal when it ends a handler: retrying would hit it again, or run the step's
 * side effect again.
 */
export class DurableStepError extends /* @__PURE__ */ Schema.TaggedError<DurableStepError>("durability/DurableStepError")(
  "DurableStepError",
  {
    step: Schema.String,
    reason: Schema.Literal("invalid", "duplicate", "unstorable", "undecodable"),
    message: Schema.String,
    cause: Schema.optional(Schema.Defect)
  }
) {}

/**
 * A workflow's handler, replayed, asked for a different step than the one stored at the same position
 * (another name or kind): the code changed under a running instance. The instance fails with it.
 */
export class WorkflowReplayError extends /* @__PURE__ */ Schema.TaggedError<WorkflowReplayError>("durability/WorkflowReplayError")(
  "WorkflowReplayError",
  { message: Schema.String, position: Schema.Number, stored: Schema.String, asked: Schema.String }
) {}

/** A workflow's `waitForEvent` reached its timeout with no matching event; catchable in the handler. */
export class WorkflowTimeoutError extends /* @__PURE__ */ Schema.TaggedError<WorkflowTimeoutError>("durability/WorkflowTimeoutError")(
  "WorkflowTimeoutError",
  { message: Schema.String, step: Schema.String, type: Schema.String }
) {}

/** No workflow instance has this id (under this workflow's name). */
export class WorkflowNotFoundError extends /* @__PURE__ */ Schema.TaggedError<WorkflowNotFoundError>("durability/WorkflowNotFoundError")(
  "WorkflowNotFoundError",
  { message: Schema.String, workflow: Schema.String, id: Schema.String }
) {}

/**
 * The call needs a live instance (an event, a pause, a terminate) but this one has ended: complete,
 * errored or terminated. Nothing was written.
 */
export class WorkflowFinishedError extends /* @__PURE__ */ Schema.TaggedError<WorkflowFinishedError>("durability/WorkflowFinishedError")(
  "WorkflowFinishedError",
  { message: Schema.String, workflow: Schema.String, id: Schema.String, status: Schema.String }
) {}

/** A child workflow run by `step.child` ended without output (errored or terminated); thrown in its parent. */
export class WorkflowChildError extends /* @__PURE__ */ Schema.TaggedError<WorkflowChildError>("durability/WorkflowChildError")(
  "WorkflowChildError",
  {
    message: Schema.String,
    workflow: Schema.String,
    id: Schema.String,
    status: Schema.String,
    cause: Schema.optional(Schema.Struct({ name: Schema.String, message: Schema.String }))
  }
) {}

/** The instance was terminated (`terminate()`): its running step's signal is aborted with this error. */
export class WorkflowTerminatedError extends /* @__PURE__ */ Schema.TaggedError<WorkflowTerminatedError>(
  "durability/WorkflowTerminatedError"
)("WorkflowTerminatedError", { message: Schema.String }) {}
