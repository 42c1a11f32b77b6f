/**
 * How an inspection fails. The tags are the wire `Failure` tags, so the answer is the error itself:
 * `NotFound` (no such capability, queue, job, schedule…), `BadRequest` (the request or a value in it
 * was refused; the message names the field), `Unavailable` (storage failed; the message keeps the
 * object's internals out).
 * @internal
 */
import * as Schema from "effect/Schema"

/** No such capability, queue, job, schedule or record. */
export class NotFound extends Schema.TaggedError<NotFound>("durability/Inspector/NotFound")("NotFound", {
  message: Schema.String
}) {}

/** The request or a value in it was refused; the message names the field. */
export class BadRequest extends Schema.TaggedError<BadRequest>("durability/Inspector/BadRequest")("BadRequest", {
  message: Schema.String
}) {}

/** The object's storage failed; the message keeps its internals out. */
export class Unavailable extends Schema.TaggedError<Unavailable>("durability/Inspector/Unavailable")("Unavailable", {
  message: Schema.String
}) {}

/** Every way an inspection fails, each a wire `Failure` tag. */
export type InspectorError = NotFound | BadRequest | Unavailable
