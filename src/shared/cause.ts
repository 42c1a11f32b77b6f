/**
 * The error a failed, died or interrupted effect stands for: `Cause.squash` (its typed failure, else
 * its defect), except that a cause with nothing but interruptions gives a plain `Error` with
 * `interrupted` as its message instead of squash's `InterruptedException` ("Interrupted by fibers:
 * #12"): the engine records that error's name and message on the row, and the facade throws it, so
 * they must not depend on fiber ids. One function for the engine (what it records) and the facade
 * (what it throws).
 * @internal
 */
import * as Cause from "effect/Cause"

export const errorOf = (cause: Cause.Cause<unknown>, interrupted = "The execution was interrupted"): unknown =>
  Cause.isInterruptedOnly(cause) ? new Error(interrupted) : Cause.squash(cause)
