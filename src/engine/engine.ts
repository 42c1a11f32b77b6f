/**
 * The services one engine runs with, as one value the attempt lifecycle, passes and handles share.
 * @internal
 */
import type * as Scope from "effect/Scope"
import type * as AlarmService from "./AlarmService.js"
import type * as Background from "./Background.js"
import type * as PermitSemaphore from "./PermitSemaphore.js"
import type { SchedulerConfig } from "./SchedulerConfig.js"
import type { StorageService } from "./StorageService.js"
import type * as Deadlines from "./deadlines.js"
import type { Participant } from "./participant.js"
import type { Upkeep } from "./upkeep.js"

export interface Engine {
  readonly config: SchedulerConfig
  readonly storage: StorageService
  readonly alarms: AlarmService.AlarmService
  readonly permits: PermitSemaphore.PermitSemaphore
  readonly background: Background.Background
  /** Where executions, passes and timers run: closed on eviction. */
  readonly scope: Scope.Scope
  readonly deadlines: Deadlines.Deadlines
  readonly upkeep: Upkeep
  /** The attached tables, in attach order: passes and upkeep read them all. */
  readonly participants: Array<Participant>
}

/** One table's work on one engine: what every step of an execution needs. */
export interface Run<A = any> {
  readonly engine: Engine
  readonly participant: Participant<A>
}
