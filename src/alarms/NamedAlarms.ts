/**
 * Named alarms: many logical timers on the object's one physical alarm.
 *
 * Scheduling a name replaces its pending occurrence (new generation, attempt 0).
 * One handler per name runs at a time in an isolate: a replacement scheduled
 * while the old occurrence runs waits for it, then runs with its own
 * idempotency key. Success deletes only the occurrence that ran; a timeout is
 * terminal unless `retryTimeouts` (the outcome of a timed-out side effect is
 * unknown).
 * @packageDocumentation
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type {
  InvalidInputError,
  InvalidOptionError,
  MigrationError,
  ParticipantConflictError,
  StorageError
} from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as AlarmsInspect from "./inspection.js"
import type * as Policy from "../engine/policy.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import * as StepMemo from "../steps/memo.js"
import type * as Scheduler from "../engine/Scheduler.js"
import type { StorageService } from "../engine/StorageService.js"
import * as Calls from "./calls.js"
import * as Participant from "./participant.js"
import { CAPABILITY, migrations } from "./schema.js"
import type {
  AlarmDefinition,
  AlarmListOptions,
  AlarmPage,
  AnyAlarmDefinition,
  DurableAlarmInfo,
  NamedAlarmState,
  RequirementsOf
} from "./types.js"

export type {
  AlarmDefinition,
  AlarmListOptions,
  AlarmPage,
  AnyAlarmDefinition,
  DurableAlarmInfo,
  NamedAlarmState,
  RequirementsOf
} from "./types.js"
export { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from "./calls.js"
export { CAPABILITY, IDEMPOTENCY_PREFIX, migrations, TABLE } from "./schema.js"

/**
 * Defines one named alarm for `make`: its handler, retries and timeouts (typed, so the definitions map
 * infers).
 */
export const alarm = <E = never, Req = never>(
  options: Policy.ExecutionOptions & {
    readonly handler: (info: DurableAlarmInfo) => Effect.Effect<unknown, E, Req>
    readonly retryTimeouts?: boolean | undefined
  }
): AlarmDefinition<E, Req> => options

/** `make`'s options: the defaults of every name's retries and timeouts, and a lifecycle hook. */
export interface NamedAlarmsOptions extends Policy.ExecutionOptions {
  /** Told each lifecycle event of the alarms after it committed, e.g. for metrics. */
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/** The named alarms service `make` returns: schedule, read, cancel and purge names' occurrences. */
export interface NamedAlarms<Defs extends Record<string, AnyAlarmDefinition>> {
  /**
   * Schedules the name at `scheduledTime` (epoch ms or a `Date`), replacing its pending occurrence;
   * `payload` (JSON) reaches its handler as `info.payload`.
   */
  readonly schedule: (
    name: keyof Defs & string,
    scheduledTime: number | Date,
    payload?: unknown
  ) => Effect.Effect<void, InvalidInputError | StorageError>
  /** The name's stored occurrence, if any. */
  readonly get: <K extends keyof Defs & string>(
    name: K
  ) => Effect.Effect<Option.Option<NamedAlarmState<K>>, InvalidInputError | StorageError>
  /**
   * Deletes the name's occurrence (pending or failed); a running handler's signal is aborted with
   * `DurableCanceledError` (the name stays locked until that handler ends). True when there was one.
   */
  readonly cancel: (name: keyof Defs & string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** The stored occurrences, soonest first, a page at a time (`{ status?, limit?, cursor? }`). */
  readonly list: (options?: AlarmListOptions) => Effect.Effect<AlarmPage, InvalidInputError | StorageError>
  /** Deletes every occurrence created before `before` (strict; epoch ms or a `Date`); returns how many. */
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
}

/**
 * Applies (default: latest) or reverts (`null`: all) the named alarms table's migrations, through the
 * `StorageService`.
 */
export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

/**
 * Attaches named alarms to the object's scheduler (running the table's migrations first) and returns their
 * service.
 */
export const make = <const Defs extends Record<string, AnyAlarmDefinition>>(
  definitions: Defs,
  options: NamedAlarmsOptions = {}
): Effect.Effect<
  NamedAlarms<Defs>,
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

/** A service tag for an application's named alarms, when you want them in a layer. */
export const tag = <Defs extends Record<string, AnyAlarmDefinition>>(key: string) =>
  Context.GenericTag<NamedAlarms<Defs>>(key)

/** The capability as a layer over the engine (provide the handlers' requirements to it). */
export const layer = <const Defs extends Record<string, AnyAlarmDefinition>>(
  service: Context.Tag<NamedAlarms<Defs>, NamedAlarms<Defs>>,
  definitions: Defs,
  options: NamedAlarmsOptions = {}
): Layer.Layer<
  NamedAlarms<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> => Layer.effect(service, make(definitions, options))
