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
import type * as Schema from "effect/Schema"
import * as Codec from "../shared/codec.js"
import {
  type InvalidInputError,
  InvalidOptionError,
  type MigrationError,
  type ParticipantConflictError,
  type StorageError
} from "../shared/Errors.js"
import type * as Policy from "../engine/policy.js"
import * as StepMemo from "../steps/memo.js"
import * as Attach from "./attach.js"
import type * as Scheduler from "../engine/Scheduler.js"
import type { StorageService } from "../engine/StorageService.js"
import { CAPABILITY, migrations } from "./schema.js"
import type {
  AlarmDefinition,
  AnyAlarmDefinition,
  DurableAlarmInfo,
  NamedAlarmsBase,
  NamedAlarmsOptions,
  NamedAlarmState,
  RequirementsOf
} from "./types.js"

export type {
  AlarmDefinition,
  AlarmListOptions,
  AlarmPage,
  AnyAlarmDefinition,
  DurableAlarmInfo,
  NamedAlarmsBase,
  NamedAlarmsOptions,
  NamedAlarmState,
  RequirementsOf
} from "./types.js"
export { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from "./calls.js"
export { CAPABILITY, IDEMPOTENCY_PREFIX, migrations, TABLE } from "./schema.js"

/**
 * Defines one named alarm for `make`: its handler, retries and timeouts (typed, so the definitions map
 * infers).
 */
export const alarm = <E = never, Req = never, P = unknown, PI = P>(
  options: Policy.ExecutionOptions & {
    readonly handler: (info: DurableAlarmInfo<string, P>) => Effect.Effect<unknown, E, Req>
    readonly retryTimeouts?: boolean | undefined
    /**
     * The payload's schema: a payload given to `schedule` is checked and encoded by it (a bad one is an
     * `InvalidInputError`, nothing written) and decoded for the handler's `info.payload`.
     */
    readonly payload?: Schema.Schema<P, PI> | undefined
  }
): AlarmDefinition<E, Req> => ({
  ...options,
  handler: options.handler as (info: DurableAlarmInfo) => Effect.Effect<unknown, E, Req>,
  payload: options.payload === undefined ? undefined : Codec.fromSchema(options.payload)
})

/** One name's calls: `alarms.cleanup.schedule(time)` is `alarms.schedule("cleanup", time)`. */
export interface AlarmHandle<Name extends string> {
  /** Schedules this name at `scheduledTime`, replacing its pending occurrence; `payload` reaches `info.payload`. */
  readonly schedule: (scheduledTime: number | Date, payload?: unknown) => Effect.Effect<void, InvalidInputError | StorageError>
  /** This name's stored occurrence, if any. */
  readonly get: Effect.Effect<Option.Option<NamedAlarmState<Name>>, InvalidInputError | StorageError>
  /** Deletes this name's occurrence (see `NamedAlarmsBase.cancel`); true when there was one. */
  readonly cancel: Effect.Effect<boolean, InvalidInputError | StorageError>
}

/** The named alarms service `make` returns: by name (`NamedAlarmsBase`) and as one property per name. */
export type NamedAlarms<Defs extends Record<string, AnyAlarmDefinition>> =
  & NamedAlarmsBase<Defs>
  & { readonly [K in keyof Defs & string]: AlarmHandle<K> }

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
    // Definitions that are not an object are the attachment's to refuse; the other members' names it refuses itself.
    const names = typeof definitions === "object" && definitions !== null ? Object.keys(definitions) : []
    if (names.includes("schedule")) {
      return yield* new InvalidOptionError({
        field: "handlers.schedule",
        kind: "type",
        message: `"schedule" is reserved by NamedAlarms (a member of the service): name the alarm otherwise`
      })
    }
    const base = yield* Attach.attach(definitions, options)
    const handles: Record<string, AlarmHandle<string>> = {}
    for (const name of names) {
      handles[name] = {
        schedule: (scheduledTime, payload) => base.schedule(name, scheduledTime, payload),
        get: base.get(name),
        cancel: base.cancel(name)
      }
    }
    // Typed per name by `NamedAlarms<Defs>`; built from the names at run time.
    return { ...handles, ...base } as unknown as NamedAlarms<Defs>
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
