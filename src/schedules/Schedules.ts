/**
 * Recurring schedules: cron expressions in an IANA time zone, or fixed intervals, each run a durable
 * attempt with retries on the object's one alarm.
 *
 * A schedule is one record. Its cursor (the next unrun slot) is computed from the previous slot,
 * never from "now", so it does not drift; a wall-clock slot that does not exist (daylight saving
 * starts) is skipped and one that occurs twice runs once. `upsert` with an unchanged spec changes
 * nothing, so calling it on every cold start is safe. Slots missed while the object was evicted or
 * the schedule paused follow `catchUp`; slots that come due while a run is active follow `overlap`.
 * A run that fails for good does not stop the schedule. Runs share the object's permits but take at
 * most `concurrency` of them (default 1), so long recurring runs never starve other work.
 * @packageDocumentation
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import {
  type InvalidInputError,
  InvalidOptionError,
  type MigrationError,
  type ParticipantConflictError,
  type StorageError
} from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as Codec from "../shared/codec.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as SchedulesInspect from "./inspection.js"
import type * as Policy from "../engine/policy.js"
import type * as Options from "./options.js"
import * as Manage from "./manage.js"
import * as Participant from "./participant.js"
import { CAPABILITY } from "./participant.js"
import * as Read from "./read.js"
import * as Rows from "./rows.js"
import * as Slots from "./slots.js"
import * as ScheduleSchema from "./schema.js"
import * as Upsert from "./upsert.js"
import * as Slot from "../engine/slot.js"
import * as StepMemo from "../steps/memo.js"
import * as Validate from "../shared/validate.js"
import type * as Jobs from "../jobs/Jobs.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import type * as Scheduler from "../engine/Scheduler.js"
import * as Steps from "../steps/Steps.js"
import type { StorageService } from "../engine/StorageService.js"
import type {
  AnyScheduleDefinition,
  PayloadOf,
  RequirementsOf,
  ScheduleDefinition,
  SchedulePage,
  ScheduleRun,
  TimingInput,
  UpsertResult
} from "./types.js"

export type { CatchUp, Overlap } from "./plan.js"
export { DEFAULT_GRACE_MS, MAX_CATCH_UP_RUNS } from "./plan.js"
export type { UpsertOptions } from "./options.js"
export type { ScheduleInfo } from "./rows.js"
export type { TimingSpec } from "./timing.js"
export type {
  AnyScheduleDefinition,
  PayloadOf,
  RequirementsOf,
  ScheduleDefinition,
  SchedulePage,
  ScheduleRun,
  TimingInput,
  UpsertResult
} from "./types.js"
export { CAPABILITY } from "./participant.js"
export { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from "./read.js"

/** Declares a schedule handler; with `payload`, a schedule's payload is validated at `upsert` and decoded for each run. */
export const schedule = <P = unknown, E = never, Req = never, PI = P>(
  options: Policy.ExecutionOptions & {
    readonly handler: (run: ScheduleRun<P>) => Effect.Effect<unknown, E, Req>
    readonly payload?: Schema.Schema<P, PI> | undefined
  }
  // Every attempt gets its steps' `CurrentCall`: it is not a requirement of the handler.
): ScheduleDefinition<NoInfer<P>, NoInfer<E>, Exclude<NoInfer<Req>, Steps.CurrentCall>> => ({
  ...(options.attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs: options.attemptTimeoutMs }),
  ...(options.retries === undefined ? {} : { retries: options.retries }),
  handler: options.handler as (run: ScheduleRun<P>) => Effect.Effect<unknown, E, Exclude<Req, Steps.CurrentCall>>,
  payload: Codec.fromSchema(options.payload)
})

/** How long a slot's job id stays taken after its job is gone (a retried run cannot add it twice meanwhile). */
const ENQUEUE_DEDUP_MS = 7 * 24 * 60 * 60 * 1000

/**
 * A schedule that targets a job queue instead of a handler: each run adds one job to `queue` with the
 * schedule's payload, its id and dedup key being the slot's idempotency key, so a retried or
 * repeated run of one slot adds it once.
 */
export const enqueue = <P, R>(
  queue: Jobs.Queue<P, R>,
  options: Policy.ExecutionOptions = {}
): ScheduleDefinition<P, InvalidInputError | StorageError, never> => ({
  ...options,
  handler: (run) =>
    queue.add({
      id: run.idempotencyKey,
      payload: run.payload,
      dedup: { key: run.idempotencyKey, ttlMs: ENQUEUE_DEDUP_MS }
    }),
  payload: Codec.identity<P>()
})

/** One handler's schedules, by key. */
export interface ScheduleHandle<P> {
  /**
   * Creates the schedule or updates it. The same timing, payload and options again change nothing
   * (safe on every cold start); a changed timing (or `startAt`/`endAt`) recomputes the next run from now.
   */
  readonly upsert: (
    key: string,
    timing: TimingInput,
    options?: Options.UpsertOptions<P>
  ) => Effect.Effect<UpsertResult, InvalidInputError | StorageError>
  /** Deletes the schedule; a running run's signal is aborted. True when it existed. */
  readonly remove: (key: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Reads one schedule; undefined when there is none with this key. */
  readonly get: (key: string) => Effect.Effect<Rows.ScheduleInfo<P> | undefined, InvalidInputError | StorageError>
  /** This handler's schedules, oldest first, a page at a time. */
  readonly list: (
    options?: { readonly limit?: number | undefined; readonly cursor?: string | undefined }
  ) => Effect.Effect<SchedulePage<P>, InvalidInputError | StorageError>
  /** No new slot starts (a run in progress finishes). True when it was active. */
  readonly pause: (key: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /** Slots missed while paused follow `catchUp`. True when it was paused. */
  readonly resume: (key: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  /**
   * One run now (after the run in progress, if any), even when paused or ended; the slots go on as
   * before. Requests made before it started are one run. True when the schedule exists.
   */
  readonly trigger: (key: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
}

/** The schedules service `make` returns: one `ScheduleHandle` per definition's name, and `purgeBefore`. */
export type SchedulesService<Defs extends Record<string, AnyScheduleDefinition>> =
  & { readonly [K in keyof Defs]: ScheduleHandle<PayloadOf<Defs[K]>> }
  & {
    /** Deletes every schedule created before `before` (strict; epoch ms or a `Date`); returns how many. */
    readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
  }

export interface SchedulesOptions extends Policy.ExecutionOptions {
  /** At most this many runs of these schedules at once, inside the object's permits (default 1). */
  readonly concurrency?: number | undefined
  /** Told each lifecycle event of the runs after it committed, e.g. for metrics. */
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/** The schedules' SQL table. */
export const TABLE = ScheduleSchema.TABLE
/** The schedules table's migrations, in order: what `migrate` applies. */
export const migrations = ScheduleSchema.migrations

/** A durable step of the current run: its first successful result is stored for that run's retries (see `Steps.step`). */
export const step = Steps.step

/** Applies (or reverts to `target`) the schedules table's migrations. */
export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

/**
 * Attaches schedules to the object's scheduler (running the table's migrations first) and returns their
 * service.
 */
export const make = <const Defs extends Record<string, AnyScheduleDefinition>>(
  definitions: Defs,
  options: SchedulesOptions = {}
): Effect.Effect<
  SchedulesService<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<RequirementsOf<Defs>>()
    const { concurrency: givenConcurrency, ...execution } = options
    if (givenConcurrency !== undefined && !(Number.isSafeInteger(givenConcurrency) && givenConcurrency >= 1)) {
      return yield* new InvalidOptionError({
        field: "concurrency",
        kind: "range",
        message: `concurrency must be a positive integer, got ${Validate.shown(givenConcurrency)}`
      })
    }
    const timingOf = Rows.timings()
    const capability = yield* Capability.make(
      Participant.spec(definitions, execution, context, Slot.make(givenConcurrency ?? 1), timingOf)
    )
    const parts: Read.Parts = {
      ...capability,
      timingOf,
      runs: { storage: capability.storage, timingOf, newGeneration: () => crypto.randomUUID() }
    }
    const { purgeBefore, storage } = capability
    // Schedules stored while they waited as records get their slot timers.
    yield* capability.handle.writePending(Slots.resync(storage, capability.handle.timers), () => undefined)
    const handles = new Map(Object.keys(definitions).map((name) => [name, handleOf(parts, name)] as const))
    yield* InspectionRegistry.register(SchedulesInspect.source(storage, handles, purgeBefore))
    // One handle per definition, built over its name at run time: TS cannot relate a record built
    // key by key to the mapped type (each handle's payload type is its definition's).
    return { purgeBefore, ...Object.fromEntries(handles) } as SchedulesService<Defs>
  })

/** Handler `name`'s calls. `P`: its payload type. */
const handleOf = <P>(parts: Read.Parts, name: string): ScheduleHandle<P> => ({
  upsert: (key, timing, options) => Upsert.upsert(parts, name, key, timing, options),
  remove: (key) => Manage.remove(parts, name, key),
  get: (key) => Read.get<P>(parts, name, key),
  list: (options) => Read.list<P>(parts, name, options),
  pause: (key) => Manage.pause(parts, name, key),
  resume: (key) => Manage.resume(parts, name, key),
  trigger: (key) => Manage.trigger(parts, name, key)
})

/** A service tag for an application's schedules, when you want them in a layer. */
export const tag = <Defs extends Record<string, AnyScheduleDefinition>>(key: string) =>
  Context.GenericTag<SchedulesService<Defs>>(key)

/** The capability as a layer over the engine (provide the handlers' requirements to it). */
export const layer = <const Defs extends Record<string, AnyScheduleDefinition>>(
  service: Context.Tag<SchedulesService<Defs>, SchedulesService<Defs>>,
  definitions: Defs,
  options: SchedulesOptions = {}
): Layer.Layer<
  SchedulesService<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> => Layer.effect(service, make(definitions, options))
