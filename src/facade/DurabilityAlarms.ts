/**
 * `DurabilityAlarms`: named logical alarms for promise-style code. Every
 * handler name becomes a method: `alarms.<name>(scheduledTime)` schedules the
 * name, replacing its pending occurrence.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { LifecycleHook } from "../engine/Lifecycle.js"
import * as Attach from "../alarms/attach.js"
import * as NamedAlarms from "../alarms/NamedAlarms.js"
import type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
import type * as Scheduler from "../engine/Scheduler.js"
import { fromPromise, migrateWith, type MigrationResult, type SchedulerAttachment } from "./attachment.js"
import type { BivariantHandler } from "./Durability.js"
import { build, type DurabilityMethodOptions, Helper, type HelperSpec, pickExecution } from "./helper.js"

/**
 * What a named alarm's handler is called with: the name, its payload, its scheduled time, the attempt
 * and the abort signal.
 */
export type DurableAlarmInfo<Name extends string = string, P = unknown> = NamedAlarms.DurableAlarmInfo<Name, P>

/** A named alarm's handler; a throw fails the attempt, retried under the name's policy. */
export type DurableAlarmHandler<Name extends string = string> = (info: DurableAlarmInfo<Name>) => unknown

/** One named alarm's options: retries and timeouts, and whether a timed-out attempt is retried. */
export interface DurabilityAlarmMethodOptions extends DurabilityMethodOptions {
  /** Retry attempts that timed out (default false: their outcome is unknown, so they are terminal). */
  readonly retryTimeouts?: boolean | undefined
}

/** An unannotated handler's parameter is a `DurableAlarmInfo`; an annotated one keeps its own type. */
export type AlarmHandlerMap = Record<string, BivariantHandler<DurableAlarmInfo>>

/** `DurabilityAlarms`'s options: the handlers, per-name options, and the defaults they override. */
export interface DurabilityAlarmsOptions<H extends AlarmHandlerMap> extends DurabilityMethodOptions {
  /** The handlers, by alarm name: each name becomes a method of the instance that schedules it. */
  readonly handlers: H
  /** Options for one name (retries, timeouts, `retryTimeouts`), over the defaults given here. */
  readonly methods?: { readonly [K in keyof H]?: DurabilityAlarmMethodOptions } | undefined
  /** Told each lifecycle event of the alarms after it committed, e.g. for metrics. */
  readonly onLifecycleEvent?: LifecycleHook | undefined
}

/**
 * What `new DurabilityAlarms(...)` takes: its options and where it attaches (a scheduler, or the object's
 * context).
 */
export type DurabilityAlarmsConfig<H extends AlarmHandlerMap> = DurabilityAlarmsOptions<H> & SchedulerAttachment

/**
 * Schedules (or replaces) the name's occurrence at `scheduledTime` (epoch ms or a `Date`), with an
 * optional JSON `payload` its handler reads as `info.payload` (type it there: `DurableAlarmInfo<"name", P>`).
 */
export type DurableNamedAlarm<P = unknown> = (scheduledTime: number | Date, payload?: P) => Promise<void>

/** The payload type a handler declares (`(info: DurableAlarmInfo<"name", P>) => …`), else `unknown`. */
export type AlarmPayloadOf<H> = H extends (info: DurableAlarmInfo<string, infer P>) => unknown ? P : unknown

/** Which occurrences `list` returns, a page at a time (`{ status?, limit?, cursor? }`). */
export type DurableAlarmListOptions = NamedAlarms.AlarmListOptions

/** A page of occurrences, soonest first; `cursor` is set when more follow. */
export interface DurableAlarmPage<Name extends string = string> {
  /** The occurrences of this page. */
  readonly items: ReadonlyArray<DurableNamedAlarmState<Name>>
  /** Pass it back to `list` for the next page; absent on the last. */
  readonly cursor?: string | undefined
}

/** A name's stored occurrence: pending (waiting, running or retrying) or failed for good. */
export type DurableNamedAlarmState<Name extends string = string> = NamedAlarms.NamedAlarmState<Name>

/** The calls of a `DurabilityAlarms` besides its names' methods. */
export interface DurabilityAlarmsBase<Name extends string = string> {
  /** Delegate the object's `alarm(info)` here (or to the shared scheduler). */
  alarm(info?: AlarmInvocationInfo): Promise<void>
  /** Deletes every occurrence created before `before` (strict; epoch ms or a `Date`); returns how many. */
  purgeBefore(before: number | Date): Promise<number>
  /** The name's stored occurrence (pending or failed), or undefined. */
  get<K extends Name>(name: K): Promise<DurableNamedAlarmState<K> | undefined>
  /**
   * Deletes the name's occurrence; a running handler's signal is aborted with `DurableCanceledError`.
   * Resolves true when there was one.
   */
  cancel(name: Name): Promise<boolean>
  /**
   * The stored occurrences, soonest first, a page at a time (`{ items, cursor }`, as every capability's
   * `list`). Before issue 25 this resolved with a bare array.
   */
  list(options?: DurableAlarmListOptions): Promise<DurableAlarmPage<Name>>
}

/** A `DurabilityAlarms` instance: the base calls, and one `DurableNamedAlarm` method per handler name. */
export type DurabilityAlarmsInstance<H extends AlarmHandlerMap> =
  & DurabilityAlarmsBase<keyof H & string>
  & { readonly [K in keyof H]: DurableNamedAlarm<AlarmPayloadOf<H[K]>> }

/** The `DurabilityAlarms` class: `new DurabilityAlarms({ handlers })`, and its static helpers. */
export interface DurabilityAlarmsConstructor {
  new<H extends AlarmHandlerMap>(config: DurabilityAlarmsConfig<H>): DurabilityAlarmsInstance<H>
  /** Applies (default: latest) or reverts (`null`: all) the named alarms table's migrations. */
  migrate(context: DurabilityContext, target?: string | null): MigrationResult
}

type Service = NamedAlarms.NamedAlarmsBase<Record<string, NamedAlarms.AnyAlarmDefinition>>

const spec: HelperSpec<DurabilityAlarmMethodOptions, NamedAlarms.AnyAlarmDefinition, Service> = {
  owner: "DurabilityAlarms",
  define: (handler, method) => {
    const run = handler as (info: DurableAlarmInfo) => unknown
    return NamedAlarms.alarm({
      handler: (info) => fromPromise(() => run(info)),
      ...pickExecution(method),
      ...(method?.retryTimeouts === undefined ? {} : { retryTimeouts: method.retryTimeouts })
    })
  },
  make: (definitions, options) => Attach.attach(definitions, options) as Effect.Effect<Service, unknown, Scheduler.Services>
}

class DurabilityAlarmsImpl extends Helper<Service> {
  constructor(config: DurabilityAlarmsConfig<AlarmHandlerMap>) {
    const built = build(config, spec)
    super(built)
    for (const name of built.names) {
      const schedule: DurableNamedAlarm = (scheduledTime, payload) =>
        Helper.run(this, (service) => service.schedule(name, scheduledTime, payload))
      Helper.method(this, name, schedule)
    }
  }

  get(name: string): Promise<DurableNamedAlarmState | undefined> {
    return Helper.run(this, (service) => Effect.map(service.get(name), Option.getOrUndefined))
  }

  cancel(name: string): Promise<boolean> {
    return Helper.run(this, (service) => service.cancel(name))
  }

  list(options?: DurableAlarmListOptions): Promise<DurableAlarmPage> {
    return Helper.run(this, (service) => service.list(options))
  }

  static migrate(context: DurabilityContext, target?: string | null): MigrationResult {
    return migrateWith(context, NamedAlarms.migrate, target)
  }
}

/** Named logical alarms for promise-style code: many timers, by name, on the object's one physical alarm. */
export const DurabilityAlarms: DurabilityAlarmsConstructor = DurabilityAlarmsImpl as unknown as DurabilityAlarmsConstructor
