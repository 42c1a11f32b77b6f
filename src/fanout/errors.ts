/**
 * Fanout's failures on the Effect face; the promise face maps each to an `Error` subclass of the same
 * name (`FanoutEnqueueError`, `FanoutSettlementError`, `FanoutTimeoutError`).
 * @packageDocumentation
 */
import * as Schema from "effect/Schema"

/**
 * A definite rejection of an enqueue: nothing of the batch was stored. The promise face returns it in
 * `{ success: false }`, never throws it.
 */
export class FanoutEnqueueError extends /* @__PURE__ */ Schema.TaggedError<FanoutEnqueueError>("durability/FanoutEnqueueError")(
  "FanoutEnqueueError",
  { message: Schema.String }
) {}

/** A second or late settlement of a delivery, or the settlement of a delivery whose claim is gone. */
export class FanoutSettlementError extends /* @__PURE__ */ Schema.TaggedError<FanoutSettlementError>("durability/FanoutSettlementError")(
  "FanoutSettlementError",
  { message: Schema.String }
) {}

/** A target's batch did not end (with the settlements it started) within its `attemptTimeoutMs`. */
export class FanoutTimeoutError extends /* @__PURE__ */ Schema.TaggedError<FanoutTimeoutError>("durability/FanoutTimeoutError")(
  "FanoutTimeoutError",
  { message: Schema.String, timeoutMs: Schema.Number }
) {}
