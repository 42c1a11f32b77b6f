/**
 * `DurabilitySchedules`: recurring schedules for promise-style code. Every handler becomes a
 * property: `schedules.digest.upsert(key, { cron: "0 9 * * 1-5", timezone: "Europe/Lisbon" })`,
 * `.get(key)`, `.trigger(key)`…
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { LifecycleHook } from "../engine/Lifecycle.js"
import type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
import type * as Scheduler from "../engine/Scheduler.js"
import * as Schedules from "../schedules/Schedules.js"
import * as Steps from "../steps/Steps.js"
import type * as Types from "../jobs/types.js"
import { fromPromise, migrateWith, type MigrationResult, type SchedulerAttachment } from "./attachment.js"
import type { BivariantHandler } from "./Durability.js"
import {
  build,
  type DurabilityMethodOptions,
  type DurableStep,
  Helper,
  type HelperSpec,
  pickExecution,
  promiseStep
} from "./helper.js"

/** What a schedule's handler is called with for one attempt of one run. */
export interface DurableScheduleRun<P = unknown> extends Schedules.ScheduleRun<P> {
  /**
   * A durable step of this run: `await run.step("build", () => build(...))` runs the function once and
   * stores its result; the run's later attempts (after a failure or an eviction) get it back.
   */
  readonly step: DurableStep
}
/** A schedule as read back: its timing, state, payload and its current or last run. */
export type DurableScheduleInfo<P = unknown> = Schedules.ScheduleInfo<P>
/** Its `everyMs` in milliseconds (the Effect face's `upsert` takes a Duration too). */
export type DurableScheduleTiming = Schedules.TimingInput<number>
/** `upsert`'s options (payload, start and end, run limit, catch-up, overlap, grace), in milliseconds. */
export type DurableScheduleOptions<P = unknown> = Schedules.UpsertOptions<P, number>
/** What `upsert` answers: whether the schedule was created or changed, and its next run. */
export type DurableScheduleUpsertResult = Schedules.UpsertResult
/** A page of one handler's schedules. */
export type DurableSchedulePage<P = unknown> = Schedules.SchedulePage<P>

/** An unannotated handler's run is a `DurableScheduleRun<unknown>`; annotate it to type the payload. */
export type ScheduleHandlerMap = Record<string, BivariantHandler<DurableScheduleRun<unknown>>>

type PayloadOf<H> = H extends (run: DurableScheduleRun<infer P>) => unknown ? P : unknown

/** `DurabilitySchedules`'s options: the handlers, per-handler options, and the defaults they override. */
export interface DurabilitySchedulesOptions<H extends ScheduleHandlerMap> extends DurabilityMethodOptions {
  /** The handlers, by name: each name becomes a property of the instance, whose schedules run it. */
  readonly handlers: H
  /** Options for one handler (retries, timeouts), over the defaults given here. */
  readonly methods?: { readonly [K in keyof H]?: DurabilityMethodOptions } | undefined
  /** At most this many runs of these schedules at once, inside the object's permits (default 1). */
  readonly concurrency?: number | undefined
  /** Told each lifecycle event of the schedules' runs after it committed, e.g. for metrics. */
  readonly onLifecycleEvent?: LifecycleHook | undefined
}

/**
 * What `new DurabilitySchedules(...)` takes: its options and where it attaches (a scheduler, or the object's
 * context).
 */
export type DurabilitySchedulesConfig<H extends ScheduleHandlerMap> = DurabilitySchedulesOptions<H> & SchedulerAttachment

/** One handler's schedules, by key (see `Schedules.ScheduleHandle` for each call's contract). */
export interface DurableSchedule<P> {
  /**
   * Creates the schedule or updates it; the same timing, payload and options again change nothing (safe on
   * every cold start).
   */
  upsert(key: string, timing: DurableScheduleTiming, options?: DurableScheduleOptions<P>): Promise<DurableScheduleUpsertResult>
  /** Deletes the schedule; a running run's signal is aborted. True when it existed. */
  remove(key: string): Promise<boolean>
  /** Reads one schedule; undefined when there is none with this key. */
  get(key: string): Promise<DurableScheduleInfo<P> | undefined>
  /** This handler's schedules, oldest first, a page at a time. */
  list(options?: { readonly limit?: number | undefined; readonly cursor?: string | undefined }): Promise<DurableSchedulePage<P>>
  /** No new slot starts (a run in progress finishes). True when it was active. */
  pause(key: string): Promise<boolean>
  /** Slots missed while paused follow `catchUp`. True when it was paused. */
  resume(key: string): Promise<boolean>
  /**
   * One run now (after the run in progress, if any), even when paused or ended. True when the schedule
   * exists.
   */
  trigger(key: string): Promise<boolean>
}

/** The calls of a `DurabilitySchedules` besides its handlers' schedules. */
export interface DurabilitySchedulesBase {
  /** Delegate the object's `alarm(info)` here (or to the shared scheduler). */
  alarm(info?: AlarmInvocationInfo): Promise<void>
  /** Deletes every schedule created before `before` (strict; epoch ms or a `Date`); returns how many. */
  purgeBefore(before: number | Date): Promise<number>
}

/**
 * A `DurabilitySchedules` instance: the base calls, and one `DurableSchedule` per handler name, typed by its
 * handler.
 */
export type DurabilitySchedulesInstance<H extends ScheduleHandlerMap> =
  & DurabilitySchedulesBase
  & { readonly [K in keyof H]: DurableSchedule<PayloadOf<H[K]>> }

/** The part of a `DurabilityJobs` queue a schedule needs to enqueue into it. */
export interface EnqueueTarget<P> {
  /** Adds a job (as `DurableQueue.add`). */
  add(options: Types.AddOptions<P, number>): Promise<Types.AddResult>
}

/** The `DurabilitySchedules` class: `new DurabilitySchedules({ handlers })`, and its static helpers. */
export interface DurabilitySchedulesConstructor {
  new<H extends ScheduleHandlerMap>(config: DurabilitySchedulesConfig<H>): DurabilitySchedulesInstance<H>
  /**
   * A handler that adds one job per run to a `DurabilityJobs` queue (`jobs.email`), with the
   * schedule's payload; the job's id and dedup key are the slot's idempotency key, so a retried run
   * adds it once.
   */
  enqueue<P>(queue: EnqueueTarget<P>): (run: DurableScheduleRun<P>) => Promise<Types.AddResult>
  /** Applies (default: latest) or reverts (`null`: all) the schedules table's migrations. */
  migrate(context: DurabilityContext, target?: string | null): MigrationResult
}

type Service = Schedules.SchedulesService<Record<string, Schedules.AnyScheduleDefinition>>

const specWith = (concurrency: number | undefined): HelperSpec<DurabilityMethodOptions, Schedules.AnyScheduleDefinition, Service> => ({
  owner: "DurabilitySchedules",
  define: (handler, method) => {
    const run = handler as (run: DurableScheduleRun<unknown>) => unknown
    return Schedules.schedule({
      handler: (info: Schedules.ScheduleRun<unknown>) =>
        Effect.flatMap(Effect.runtime<Steps.CurrentCall>(), (runtime) =>
          fromPromise(() => run({ ...info, step: promiseStep(Context.get(runtime.context, Steps.CurrentCall), runtime) }))),
      ...pickExecution(method)
    }) as Schedules.AnyScheduleDefinition
  },
  make: (definitions, options) =>
    Schedules.make(definitions, { ...options, ...(concurrency === undefined ? {} : { concurrency }) }) as Effect.Effect<
      Service,
      unknown,
      Scheduler.Services
    >
})

const asSchedule = (helper: DurabilitySchedulesImpl, name: string): DurableSchedule<unknown> => {
  const call = <A, E>(body: (handle: Schedules.ScheduleHandle<unknown>) => Effect.Effect<A, E>) =>
    DurabilitySchedulesImpl.runOn(helper, (service) => body((service as unknown as Record<string, Schedules.ScheduleHandle<unknown>>)[name]!))
  return {
    upsert: (key, timing, options) => call((handle) => handle.upsert(key, timing, options)),
    remove: (key) => call((handle) => handle.remove(key)),
    get: (key) => call((handle) => handle.get(key)),
    list: (options) => call((handle) => handle.list(options)),
    pause: (key) => call((handle) => handle.pause(key)),
    resume: (key) => call((handle) => handle.resume(key)),
    trigger: (key) => call((handle) => handle.trigger(key))
  }
}

const ENQUEUE_DEDUP_MS = 7 * 24 * 60 * 60 * 1000

class DurabilitySchedulesImpl extends Helper<Service> {
  constructor(config: DurabilitySchedulesConfig<ScheduleHandlerMap>) {
    if (typeof config !== "object" || config === null) throw new TypeError("DurabilitySchedules needs a config object")
    const built = build(config, specWith(config.concurrency))
    super(built)
    for (const name of built.names) Helper.method(this, name, asSchedule(this, name))
  }

  /** Runs a call of the schedules on the object's runtime (for the per-handler objects). */
  static runOn<A, E>(helper: DurabilitySchedulesImpl, body: (service: Service) => Effect.Effect<A, E>): Promise<A> {
    return Helper.run(helper, body)
  }

  static enqueue<P>(queue: EnqueueTarget<P>): (run: DurableScheduleRun<P>) => Promise<Types.AddResult> {
    if (typeof queue !== "object" || queue === null || typeof queue.add !== "function") {
      throw new TypeError("DurabilitySchedules.enqueue needs a queue of DurabilityJobs (e.g. jobs.email)")
    }
    return (run) =>
      queue.add({ id: run.idempotencyKey, payload: run.payload, dedup: { key: run.idempotencyKey, ttlMs: ENQUEUE_DEDUP_MS } })
  }

  static migrate(context: DurabilityContext, target?: string | null): MigrationResult {
    return migrateWith(context, Schedules.migrate, target)
  }
}

/**
 * Recurring schedules (cron or every interval) for promise-style code, in a Durable Object: each run is
 * durable and retried.
 */
export const DurabilitySchedules: DurabilitySchedulesConstructor =
  DurabilitySchedulesImpl as unknown as DurabilitySchedulesConstructor
