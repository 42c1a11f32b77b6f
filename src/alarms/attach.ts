/**
 * Attaching named alarms: the table migrated, the definitions checked, the calls by name.
 * `NamedAlarms.make` adds one property per name on top; the promise face (`DurabilityAlarms`), whose
 * names become its own methods, uses this alone.
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Capability from "../engine/capability.js"
import type * as Scheduler from "../engine/Scheduler.js"
import type { StorageService } from "../engine/StorageService.js"
import type { InvalidOptionError, MigrationError, ParticipantConflictError, StorageError } from "../shared/Errors.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as Calls from "./calls.js"
import * as AlarmsInspect from "./inspection.js"
import * as Participant from "./participant.js"
import type { AnyAlarmDefinition, NamedAlarmsBase, NamedAlarmsOptions, RequirementsOf } from "./types.js"

export const attach = <const Defs extends Record<string, AnyAlarmDefinition>>(
  definitions: Defs,
  options: NamedAlarmsOptions
): Effect.Effect<
  NamedAlarmsBase<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<RequirementsOf<Defs>>()
    const parts = yield* Capability.make(Participant.spec(definitions, options, context))
    const { purgeBefore, storage } = parts
    const cancel = (name: string) => Calls.cancel(parts, name)
    yield* InspectionRegistry.register(AlarmsInspect.source(storage, { cancel, purgeBefore }))
    return {
      schedule: (name, scheduledTime, payload) => Calls.schedule(parts, name, scheduledTime, payload),
      get: (name) => Calls.get(parts, name),
      cancel,
      list: (listOptions) => Calls.list(parts, listOptions),
      purgeBefore
    }
  })
