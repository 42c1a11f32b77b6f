/**
 * Attaching the operations capability: its table migrated, its definitions checked, its calls by
 * name. `Operations.make` adds one property per operation on top; the promise face (`Durability`),
 * whose operations become its own methods, uses this alone, so its handlers may take any name.
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Capability from "../engine/capability.js"
import type * as Scheduler from "../engine/Scheduler.js"
import type { StorageService } from "../engine/StorageService.js"
import type { InvalidOptionError, MigrationError, ParticipantConflictError, StorageError } from "../shared/Errors.js"
import type { CallDuration } from "../shared/duration.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as OperationsInspect from "./inspection.js"
import * as Manage from "./manage.js"
import * as Participant from "./participant.js"
import * as Read from "./read.js"
import * as Register from "./register.js"
import type {
  AnyOperationDefinition,
  ListOptions,
  OperationsBase,
  OperationsOptions,
  RequirementsOf,
  ResultOf,
  WaitOptions
} from "./types.js"

export const attach = <const Defs extends Record<string, AnyOperationDefinition>>(
  definitions: Defs,
  options: OperationsOptions
): Effect.Effect<
  OperationsBase<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<RequirementsOf<Defs>>()
    const parts = yield* Capability.make(Participant.spec(definitions, options, context))
    const { purgeBefore, storage } = parts
    const cancel = (operation: string, id: string) => Manage.cancel(parts, operation, id)
    yield* InspectionRegistry.register(OperationsInspect.source(storage, { cancel, purgeBefore }))
    return {
      register: (operation, call) => Register.register(parts, operation, call),
      registerMany: (operation, calls) => Register.registerMany(parts, operation, calls),
      getResult: <K extends keyof Defs & string>(operation: K, id: string) =>
        Read.getResult<ResultOf<Defs[K]>>(parts, operation, id),
      wait: <K extends keyof Defs & string>(operation: K, id: string, waitFor: WaitOptions | CallDuration) =>
        Read.wait<ResultOf<Defs[K]>>(parts, operation, id, waitFor),
      purgeBefore,
      cancel,
      retry: (operation, id) => Manage.retry(parts, operation, id),
      list: <K extends keyof Defs & string>(operation: K, options?: ListOptions) =>
        Read.list<ResultOf<Defs[K]>>(parts, operation, options)
    }
  })
