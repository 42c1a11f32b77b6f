/**
 * The workflow engine's errors.
 * @internal
 */
import * as Schema from "effect/Schema"

/** A workflow was executed (or its deferred done) on an engine it was never registered with. */
export class WorkflowNotRegisteredError extends /* @__PURE__ */ Schema.TaggedError<WorkflowNotRegisteredError>(
  "durability/WorkflowNotRegisteredError"
)("WorkflowNotRegisteredError", {
  /** The workflow's name. */
  workflow: Schema.String,
  /** What went wrong, for logs. */
  message: Schema.String
}) {}
