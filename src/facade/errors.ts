/**
 * The promise API's errors: plain `Error` subclasses whose `name` is stable and
 * equal to the Effect API's tag, because Workers RPC carries only `name` and
 * `message` across the wire.
 */
import type * as Cause from "effect/Cause"
import * as Runtime from "effect/Runtime"
import { errorOf } from "../shared/cause.js"
// The Queues consumer's (jobs/JobsConsumer.ts), which aborts and rejects with them on either face.
import { JobCanceledError, StaleLeaseError } from "../jobs/leaseErrors.js"

const named = <N extends string>(name: N) =>
  class extends Error {
    override readonly name: N = name
    constructor(message: string, options?: { readonly cause?: unknown }) {
      super(message, options)
    }
  }

/** Throw it from a handler to make the failure terminal, whatever the retry policy. */
export class NonRetryableError extends named("NonRetryableError") {}
/** The retry policy threw or produced a delay that is not a non-negative safe integer. */
export class DurableRetryPolicyError extends named("DurableRetryPolicyError") {}
/** A stored record was due but had already used every attempt its policy allows. */
export class DurableAttemptsExhaustedError extends named("DurableAttemptsExhaustedError") {}
/** A handler did not settle within its attempt timeout; its signal was aborted with this error. */
export class DurableAttemptTimeoutError extends named("DurableAttemptTimeoutError") {}
/**
 * A SQL statement, transaction or alarm call of the Durable Object's storage failed (name `StorageError`).
 */
export class DurabilityStorageError extends named("StorageError") {}
/**
 * Applying or reverting a capability's migrations failed; the batch was rolled back (name `MigrationError`).
 */
export class DurabilityMigrationError extends named("MigrationError") {}
/** The id is already used by another operation (at registration, or when reading a result). */
export class DuplicateDurableCallError extends named("DuplicateDurableCallError") {}
/** A handler succeeded with a value that cannot be stored as JSON; the side effect is not re-run. */
export class DurableResultSerializationError extends named("DurableResultSerializationError") {}
/** A named alarm's handler did not settle within its attempt timeout. */
export class DurableAlarmTimeoutError extends named("DurableAlarmTimeoutError") {}
/**
 * The record was canceled (`cancel`); a running handler's signal is aborted with this error and it is not
 * retried.
 */
export class DurableCanceledError extends named("DurableCanceledError") {}
export { JobCanceledError }
/** A parent job failed because one of its children failed for good (`onFailure: "fail"`, the default). */
export class ChildJobFailedError extends named("ChildJobFailedError") {}
/** A lease's token no longer holds its job (expired, reclaimed, leased again, settled); nothing was written. */
export { StaleLeaseError }
/** A leased job whose leases expired more than its queue's `maxStalled` times: it fails for good. */
export class JobStalledError extends named("JobStalledError") {}
/** A durable step's name is invalid or repeated in one attempt, or its result cannot be stored; terminal. */
export class DurableStepError extends named("DurableStepError") {}

/** A workflow's handler asked, on replay, for another step than the one stored at the same position. */
export class WorkflowReplayError extends named("WorkflowReplayError") {}
/** A workflow's `waitForEvent` reached its timeout with no matching event (catchable in the handler). */
export class WorkflowTimeoutError extends named("WorkflowTimeoutError") {}
/** No workflow instance has this id. */
export class WorkflowNotFoundError extends named("WorkflowNotFoundError") {}
/** The call needs a live workflow instance, and this one has ended; nothing was written. */
export class WorkflowFinishedError extends named("WorkflowFinishedError") {}
/** A child workflow (`step.child`) errored or was terminated; thrown in its parent. */
export class WorkflowChildError extends named("WorkflowChildError") {}
/** The workflow instance was terminated: its running step's signal is aborted with this error. */
export class WorkflowTerminatedError extends named("WorkflowTerminatedError") {}

/** A log call's input is definitely wrong (`DurabilityLog`); `append` answers it as `success: false`. */
export class LogAppendError extends named("LogAppendError") {}
/** A log call asked for an offset that retention trimmed; `oldestOffset` is the oldest still readable. */
export class LogTruncatedError extends named("LogTruncatedError") {
  /** The offset asked for. */
  readonly requestedOffset: number
  /** The oldest offset still readable. */
  readonly oldestOffset: number
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super(message, options)
    const cause = options?.cause as { readonly requestedOffset?: unknown; readonly oldestOffset?: unknown } | undefined
    // From the Effect API's error, or (revived after RPC) from the message.
    const spelled = /^Log offset (\d+) was trimmed; the oldest retained offset is (\d+)$/.exec(message)
    this.requestedOffset = typeof cause?.requestedOffset === "number" ? cause.requestedOffset : Number(spelled?.[1] ?? NaN)
    this.oldestOffset = typeof cause?.oldestOffset === "number" ? cause.oldestOffset : Number(spelled?.[2] ?? NaN)
  }
}
/** A log lease's batch id is not held any more (settled, or reclaimed by another worker after it expired). */
export class LogLeaseError extends named("LogLeaseError") {}
/** A definite rejection of a fanout enqueue, returned in `{ success: false }` (nothing was stored). */
export class FanoutEnqueueError extends named("FanoutEnqueueError") {}
/** A fanout delivery was settled twice, late (after its batch ended), or after its claim was gone. */
export class FanoutSettlementError extends named("FanoutSettlementError") {}
/** A fanout target's batch did not end within its `attemptTimeoutMs`. */
export class FanoutTimeoutError extends named("FanoutTimeoutError") {}

const byTag: Record<string, new(message: string, options?: { readonly cause?: unknown }) => Error> = {
  NonRetryableError,
  DurableRetryPolicyError,
  DurableAttemptsExhaustedError,
  DurableAttemptTimeoutError,
  StorageError: DurabilityStorageError,
  MigrationError: DurabilityMigrationError,
  DuplicateDurableCallError,
  DurableResultSerializationError,
  DurableAlarmTimeoutError,
  DurableCanceledError,
  JobCanceledError,
  ChildJobFailedError,
  DurableStepError,
  StaleLeaseError,
  JobStalledError,
  WorkflowReplayError,
  WorkflowTimeoutError,
  WorkflowNotFoundError,
  WorkflowFinishedError,
  WorkflowChildError,
  WorkflowTerminatedError,
  LogAppendError,
  LogTruncatedError,
  LogLeaseError,
  FanoutEnqueueError,
  FanoutSettlementError,
  FanoutTimeoutError
}

const classOf = (name: unknown) => typeof name === "string" && Object.hasOwn(byTag, name) ? byTag[name] : undefined

/** Turns any failure of the Effect API into what a promise caller expects. */
export const toError = (error: unknown): Error => {
  if (typeof error === "object" && error !== null && "_tag" in error) {
    const tagged = error as { readonly _tag: unknown; readonly message?: unknown; readonly kind?: unknown }
    const message = typeof tagged.message === "string" ? tagged.message : String(tagged._tag)
    if (tagged._tag === "InvalidOptionError" || tagged._tag === "InvalidInputError") {
      return tagged.kind === "type" ? new TypeError(message) : new RangeError(message)
    }
    const ErrorClass = classOf(tagged._tag)
    // Errors of attachment (a second helper of one kind) read as plain errors, as they always have.
    if (tagged._tag === "ParticipantConflictError") return new Error(message)
    if (ErrorClass !== undefined) return new ErrorClass(message, { cause: error })
  }
  if (error instanceof Error) return error
  return new Error(String(error))
}

/** The error a failed Effect stands for: its typed failure, else its defect. */
export const fromCause = (cause: Cause.Cause<unknown>): Error => toError(errorOf(cause, "The operation was interrupted"))

/** The tags of the Effect API's failures that have no class of their own on the promise face. */
const EFFECT_ONLY = new Set(["InvalidInputError", "InvalidOptionError", "ParticipantConflictError"])

// "<name>: <message>", as Workers RPC and Effect's FiberFailure spell an error they cannot carry whole.
const SPELLED = /^(?:\(FiberFailure\) )?([A-Za-z]+): ([\s\S]*)$/

/**
 * This library's error as a caller received it, restored. Workers RPC keeps the name of the standard
 * errors only (`TypeError`, `RangeError`, …): any other arrives as a plain `Error` whose message starts
 * with its name (`"DurableCanceledError: Durable operation … was canceled"`), and an Effect run by a
 * `ManagedRuntime`'s `runPromise` rejects with a `FiberFailure`. Given either, this returns an instance of
 * the library's class (`DuplicateDurableCallError`, …) with the original message, so `name` and
 * `instanceof` work where the call was made; an Effect API tag without a promise-face class
 * (`InvalidInputError`) comes back as an `Error` of that name. Anything else is returned as it is.
 */
export function reviveError(error: Error): Error
export function reviveError(error: unknown): unknown
export function reviveError(error: unknown): unknown {
  if (Runtime.isFiberFailure(error)) return reviveError(fromCause(error[Runtime.FiberFailureCauseId]))
  if (!(error instanceof Error) || error.name !== "Error") return error
  const spelled = SPELLED.exec(error.message)
  if (spelled === null) return error
  const [, name, message] = spelled as unknown as readonly [string, string, string]
  const ErrorClass = classOf(name)
  if (ErrorClass !== undefined) return new ErrorClass(message, { cause: error })
  if (!EFFECT_ONLY.has(name)) return error
  const revived = new Error(message, { cause: error })
  revived.name = name
  return revived
}
