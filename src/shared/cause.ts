/**
 * The error a failed, died or interrupted effect stands for: its typed failure, else its defect,
 * else an interruption error. One function for the engine (what it records) and the facade (what it throws).
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Option from "effect/Option"

export const errorOf = (cause: Cause.Cause<unknown>, interrupted = "The execution was interrupted"): unknown =>
  Option.getOrElse(
    Option.orElse(Cause.failureOption(cause), () => Cause.dieOption(cause)),
    () => new Error(interrupted)
  )
