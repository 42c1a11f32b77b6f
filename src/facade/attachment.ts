/**
 * How a promise-style helper finds its engine: a shared `DurabilityScheduler`
 * (`{ scheduler }`), or a private one built from `{ context, …schedulerOptions }`.
 * @internal
 */
import * as Effect from "effect/Effect"
import { handlerMapProblem } from "../engine/capability.js"
import type { ObjectRuntime } from "./objectRuntime.js"
import type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
import * as StorageService from "../engine/StorageService.js"
import type * as Migrations from "../engine/Migrations.js"
import {
  checkContext,
  checkStorageBackend,
  DurabilityScheduler,
  type DurabilitySchedulerOptions,
  internals,
  SCHEDULER_OPTIONS
} from "./DurabilityScheduler.js"
import { fromCause, toError } from "./errors.js"

/**
 * Where a capability attaches: a shared `scheduler`, or the object's `context` (it then builds the object's
 * scheduler, with these options).
 */
export type SchedulerAttachment =
  | { readonly scheduler: DurabilityScheduler; readonly context?: undefined }
  | ({ readonly context: DurabilityContext; readonly scheduler?: undefined } & DurabilitySchedulerOptions)

export interface Attached {
  readonly scheduler: DurabilityScheduler
  readonly runtime: ObjectRuntime
}

export const attach = (config: SchedulerAttachment): Attached => {
  if (typeof config !== "object" || config === null) throw new TypeError("a config object is required")
  checkStorageBackend((config as { readonly storageBackend?: unknown }).storageBackend)
  if (config.scheduler !== undefined) {
    const found = internals(config.scheduler)
    // They belong to the shared scheduler; here they would be silently ignored.
    for (const key of SCHEDULER_OPTIONS) {
      if ((config as Record<string, unknown>)[key] !== undefined) {
        throw new TypeError(`${key} cannot be given with a shared scheduler: set it on the DurabilityScheduler`)
      }
    }
    return { scheduler: config.scheduler, runtime: found.runtime }
  }
  const options: Record<string, unknown> = {}
  for (const key of SCHEDULER_OPTIONS) {
    if (config[key] !== undefined) options[key] = config[key]
  }
  const scheduler = new DurabilityScheduler({ context: config.context, ...options })
  return { scheduler, runtime: internals(scheduler).runtime }
}

/** What a `migrate` call did. */
export interface MigrationResult {
  /** Migrations applied, in list order. */
  readonly applied: ReadonlyArray<string>
  /** Migrations reverted, newest first. */
  readonly rolledBack: ReadonlyArray<string>
}

/** A capability's `migrate(ctx, target)` without building a scheduler; synchronous, as DO SQLite is. */
export const migrateWith = (
  context: DurabilityContext,
  migrate: (target?: string | null) => Effect.Effect<Migrations.MigrationResult, unknown, StorageService.StorageService>,
  target?: string | null
): MigrationResult => {
  checkContext(context)
  const exit = Effect.runSyncExit(Effect.provide(migrate(target), StorageService.layerDurableObject(context)))
  if (exit._tag === "Failure") throw fromCause(exit.cause)
  return exit.value
}

/**
 * A facade's handler map, checked: an object of functions under names that do not shadow its
 * members. Symbol keys are refused rather than skipped (such a handler could never be called).
 */
export const checkHandlers = (handlers: unknown, owner: string): Record<string, unknown> => {
  const problem = handlerMapProblem(owner, handlers, (entry) => entry)
  if (problem === undefined) return handlers as Record<string, unknown>
  // A reserved name has always been a plain Error here; the rest are TypeErrors.
  throw problem.reserved ? new Error(problem.error.message) : toError(problem.error)
}

export { fromPromise } from "../shared/plain.js"
export type { AlarmInvocationInfo }
