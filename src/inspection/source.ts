/**
 * What a capability gives the inspector when it is made: its part of the overview, and the answers
 * to the requests about it (reads and actions). The capability registers it in the object's
 * `InspectionRegistry`, one per capability, in the order they were made.
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { InvalidInputError, StorageError } from "../shared/Errors.js"
import type { InspectorError } from "./errors.js"
import type { Capability, Overview, Request } from "./protocol.js"

/** A capability's part of the overview. */
export type OverviewPart = Omit<Overview, "scheduler">

/** What answering can fail with before the inspector maps it (a capability's own errors included). */
export type SourceError = InspectorError | InvalidInputError | StorageError

/** What a capability gives the inspector: its part of the overview and the answers to requests about it. */
export interface Source {
  /** Which capability it is. */
  readonly capability: Capability
  /** Its part of the overview (counts), bounded whatever the object holds. */
  readonly overview: Effect.Effect<OverviewPart, StorageError>
  /** Answers a request about this capability (the inspector routes by tag; `PurgeBefore` included). */
  readonly answer: (request: Request) => Effect.Effect<unknown, SourceError>
}
