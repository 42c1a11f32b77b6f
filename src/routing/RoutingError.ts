/**
 * The routing client's error (`RoutingClient.RoutingError`), apart so the pure rules can make it.
 * @internal
 */
import * as Schema from "effect/Schema"

/** A sharding function answered no shard: not a non-empty string, nor `{ shard, locationHint? }` with one. */
export class RoutingError extends /* @__PURE__ */ Schema.TaggedError<RoutingError>("durability/RoutingError")("RoutingError", {
  message: Schema.String
}) {}

