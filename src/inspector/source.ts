/**
 * What a capability gives the inspector when it is made: its part of the overview, and the answers
 * to the requests about it (reads and actions). The engine keeps them (`Scheduler.inspection`), one
 * per capability, in attach order.
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { InvalidInputError, StorageError } from "../shared/Errors.js"
import type { InspectorError } from "./errors.js"
import type { Capability, Overview, Request, SchedulerSummary } from "./protocol.js"

/** A capability's part of the overview. */
export type OverviewPart = Omit<Overview, "scheduler">

/** What answering can fail with before the inspector maps it (a capability's own errors included). */
export type SourceError = InspectorError | InvalidInputError | StorageError

export interface Source {
  readonly capability: Capability
  readonly overview: Effect.Effect<OverviewPart, StorageError>
  /** Answers a request about this capability (the inspector routes by tag; `PurgeBefore` included). */
  readonly answer: (request: Request) => Effect.Effect<unknown, SourceError>
}

/** The engine's side of the inspector. */
export interface Inspection {
  /** Called once by each capability when it is made (a later source of the same capability replaces it). */
  readonly register: (source: Source) => Effect.Effect<void>
  /** The registered sources, in the order they were made. */
  readonly sources: Effect.Effect<ReadonlyArray<Source>>
  /** The engine as this instance sees it now: no I/O. */
  readonly summary: Effect.Effect<SchedulerSummary>
}
