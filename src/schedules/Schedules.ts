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
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import {
  DurableAttemptTimeoutError,
  InvalidInputError,
  InvalidOptionError,
  type MigrationError,
  NonRetryableError,
  type ParticipantConflictError,
  type StorageError
} from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as Codec from "../shared/codec.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as SchedulesInspect from "./inspection.js"
import * as Json from "../shared/json.js"
import * as ListQuery from "../engine/listQuery.js"
import type * as Policy from "../engine/policy.js"
import * as Options from "./options.js"
import * as Plan from "./plan.js"
import * as Rows from "./rows.js"
import * as Runs from "./runs.js"
import * as ScheduleSchema from "./schema.js"
import * as Timing from "./timing.js"
import * as Slot from "../engine/slot.js"
import * as StepMemo from "../steps/memo.js"
import * as Validate from "../shared/validate.js"
import type * as Jobs from "../jobs/Jobs.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as Steps from "../steps/Steps.js"
import type { Row, StorageService } from "../engine/StorageService.js"

export type { CatchUp, Overlap } from "./plan.js"
export { DEFAULT_GRACE_MS, MAX_CATCH_UP_RUNS } from "./plan.js"
export type { UpsertOptions } from "./options.js"
export type { ScheduleInfo } from "./rows.js"
export type { TimingSpec } from "./timing.js"

/** When a schedule runs: a cron expression (5 fields, or 6 with seconds) in a time zone (default UTC), or a fixed interval. */
export type TimingInput =
  | { readonly cron: string; readonly timezone?: string | undefined }
  | { readonly everyMs: number }

/** What a schedule's handler is called with for one attempt of one run. */
export interface ScheduleRun<P = unknown> {
  /** The handler's name. */
  readonly schedule: string
  readonly key: string
  readonly payload: P
  /** The slot this run is for; a manual run (`trigger`): when it was requested. */
  readonly scheduledTime: number
  readonly manual: boolean
  /** 1-based, per schedule, counting manual runs. */
  readonly runNumber: number
  /** 1-based attempt of this run; already durably counted. */
  readonly attempt: number
  /** Aborted on timeout, removal or shutdown. Cooperative. */
  readonly signal: AbortSignal
  /** Stable for this run's slot across retries and evictions: pass it to the provider you call. */
  readonly idempotencyKey: string
}

export interface ScheduleDefinition<P, E, Req> extends Policy.ExecutionOptions {
  readonly handler: (run: ScheduleRun<P>) => Effect.Effect<unknown, E, Req>
  readonly payload: Codec.Codec<P>
}

export interface AnyScheduleDefinition extends Policy.ExecutionOptions {
  readonly handler: (run: ScheduleRun<never>) => Effect.Effect<unknown, unknown, unknown>
  readonly payload: Codec.AnyCodec
}

export type PayloadOf<D> = D extends ScheduleDefinition<infer P, infer _E, infer _Req> ? P : never
export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends ScheduleDefinition<infer _P, infer _E, infer Req> ? Req : never
}[keyof Defs]

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

export interface UpsertResult {
  /** The schedule did not exist. */
  readonly created: boolean
  /** Something was written: false when the same spec, payload and options were given again. */
  readonly changed: boolean
  readonly nextRunAt: number | null
}

export interface SchedulePage<P> {
  readonly items: ReadonlyArray<Rows.ScheduleInfo<P>>
  readonly cursor?: string | undefined
}

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

export type SchedulesService<Defs extends Record<string, AnyScheduleDefinition>> =
  & { readonly [K in keyof Defs]: ScheduleHandle<PayloadOf<Defs[K]>> }
  & {
    /** Deletes every schedule created before `before` (strict; epoch ms or a `Date`); returns how many. */
    readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
  }

export interface SchedulesOptions extends Policy.ExecutionOptions {
  /** At most this many runs of these schedules at once, inside the object's permits (default 1). */
  readonly concurrency?: number | undefined
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

export const TABLE = ScheduleSchema.TABLE
export const CAPABILITY = "schedules"
export const migrations = ScheduleSchema.migrations

/** A durable step of the current run: its first successful result is stored for that run's retries (see `Steps.step`). */
export const step = Steps.step

/** Applies (or reverts to `target`) the schedules table's migrations. */
export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

export const DEFAULT_LIST_LIMIT = 100
export const MAX_LIST_LIMIT = 1_000

const invalidInput = (field: string, message: string) => new InvalidInputError({ field, kind: "type", message })

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
    const slot = Slot.make(givenConcurrency ?? 1)
    const timingOf = Rows.timings()
    const parts = (storage: StorageService): Runs.Parts => ({ storage, timingOf, newGeneration: () => crypto.randomUUID() })
    const { definitionOf, handle, purgeBefore, storage } = yield* Capability.make<AnyScheduleDefinition, void>({
      kind: CAPABILITY,
      owner: "DurabilitySchedules",
      module: "Schedules",
      table: TABLE,
      keyColumn: "key",
      nameColumn: "schedule",
      entityKind: "schedule",
      migrations,
      definitions,
      options: execution,
      timeoutError: (name) => (timeoutMs) =>
        new DurableAttemptTimeoutError({ message: `A run of schedule "${name}" timed out after ${timeoutMs}ms`, timeoutMs }),
      // A step that cannot be stored would fail (or re-run its side effect) on every retry.
      isTerminal: () => StepMemo.isStepFailure,
      check: (definitions) => {
        const slashed = Object.keys(definitions).find((name) => name.includes("/"))
        return slashed === undefined ? undefined : new InvalidOptionError({
          field: `methods.${slashed}`,
          kind: "type",
          message: `A schedule name cannot contain "/": ${JSON.stringify(slashed)}`
        })
      },
      // One run per schedule at a time: a re-created schedule waits for a removed one's run to end.
      releaseKeysOnPurge: false,
      purgeReason: () => new Error("The schedule was purged"),
      participant: ({ definitionOf, storage }) => ({
        run: (execution) =>
          Effect.gen(function*() {
            const { row } = execution
            const name = String(row.schedule)
            const definition = definitionOf(name)
            if (definition === undefined) {
              return yield* new NonRetryableError({ message: `No schedule handler registered for "${name}"` })
            }
            const payload = yield* Effect.mapError(
              definition.payload.decode(Rows.storedPayload(row)),
              (cause) => new NonRetryableError({ message: `The stored payload of schedule "${name}" does not decode`, cause })
            )
            const slotAt = Number(row.run_slot)
            const manual = Number(row.run_manual) === 1
            const key = String(row.schedule_key)
            const run: ScheduleRun<unknown> = {
              schedule: name,
              key,
              payload,
              scheduledTime: slotAt,
              manual,
              runNumber: Number(row.run_number),
              attempt: execution.attempt,
              signal: execution.signal,
              idempotencyKey: Rows.idempotencyKey(name, key, slotAt, manual)
            }
            // The run's steps are memos of this generation: the next run gets a new one (and none of them).
            const steps = StepMemo.runner(storage, {
              capability: CAPABILITY,
              table: TABLE,
              keyColumn: "key",
              key: execution.key,
              generation: execution.generation
            })
            yield* Capability.provideCaptured(
              Effect.provideService(
                definition.handler(run as never) as Effect.Effect<unknown, unknown, RequirementsOf<Defs> | Steps.CurrentCall>,
                Steps.CurrentCall,
                steps
              ),
              context
            )
          }),
        // The run's end is written by `settled` (the schedule moves on); this only fences it.
        complete: (execution) =>
          Effect.map(
            storage.exec(
              `SELECT 1 AS matched FROM ${TABLE} WHERE key = ? AND generation_id = ? AND status = 'pending' AND attempt = ?`,
              [execution.key, execution.generation, execution.attempt]
            ),
            (rows) => rows.length > 0
          ),
        settled: (row, settlement) => Runs.advance(parts(storage), row, settlement),
        dispatch: {
          pendingWhere: ScheduleSchema.CLAIMABLE,
          startedColumn: "started_at",
          slotOf: () => slot,
          // A run in progress (a retry) is claimed as is; otherwise the plan picks the run first.
          admit: (row) => row.run_slot === null ? Runs.gate(parts(storage), row) : undefined
        },
        describe: (row) => `schedule "${String(row.schedule)}" (key "${String(row.schedule_key)}")`,
        entity: (row) => ({
          entityKind: "schedule",
          schedule: String(row.schedule),
          key: String(row.schedule_key),
          id: String(row.key),
          generation: String(row.generation_id)
        })
      })
    })

    const rowKey = (name: string, key: string) => `${name}/${key}`

    const checked = (name: string, key: unknown) =>
      Effect.gen(function*() {
        const definition = definitionOf(name)
        if (definition === undefined) return yield* invalidInput("schedule", `Unknown schedule ${Validate.shown(name)}`)
        const valid = yield* Validate.key("key", key)
        return { definition, key: valid, id: rowKey(name, valid) }
      })

    const readRow = (id: string) =>
      Effect.map(storage.exec(`SELECT * FROM ${TABLE} WHERE key = ?`, [id]), ([row]) => row)

    const infoOf = (definition: AnyScheduleDefinition, row: Row) =>
      Effect.map(
        Effect.orElseSucceed(definition.payload.decode(Rows.storedPayload(row)), () => Rows.storedPayload(row)),
        (payload) => Rows.infoOf(row, payload)
      )

    const encodePayload = (definition: AnyScheduleDefinition, payload: unknown) =>
      Effect.gen(function*() {
        const encoded = yield* Effect.mapError(
          definition.payload.encode(payload as never),
          (error) => invalidInput("options.payload", Codec.describeParseError("options.payload", error))
        )
        const json = Json.check(encoded)
        if (!json.ok) return yield* invalidInput("options.payload", `options.payload must be JSON: ${json.reason.replace(/^value/, "payload")}`)
        const text = Json.encode(encoded)
        const bytes = Json.oversizedBytes(text)
        if (bytes !== undefined) {
          return yield* new InvalidInputError({
            field: "options.payload",
            kind: "range",
            message: `options.payload is ${bytes} bytes as JSON; a stored row is limited to ${Json.MAX_ROW_BYTES} bytes`
          })
        }
        return text
      })

    const upsert = (name: string) => (key: string, timingInput: TimingInput, given?: Options.UpsertOptions<unknown>) =>
      Effect.gen(function*() {
        const target = yield* checked(name, key)
        const spec = yield* Either.match(Timing.parse("timing", timingInput), { onLeft: Effect.fail, onRight: Effect.succeed })
        const resolved = yield* Options.resolve(given)
        const payload = yield* encodePayload(target.definition, given?.payload ?? null)
        const now = yield* Clock.currentTimeMillis
        const timingText = JSON.stringify(spec)
        const existing = yield* readRow(target.id)
        const sameTiming = existing !== undefined && existing.timing === timingText &&
          existing.start_at === resolved.startAt && existing.end_at === resolved.endAt
        const sameRest = existing !== undefined && existing.payload === payload &&
          (existing.run_limit === null ? null : Number(existing.run_limit)) === resolved.limit &&
          existing.catch_up === resolved.catchUp && existing.overlap === resolved.overlap &&
          Number(existing.grace_ms) === resolved.graceMs
        if (existing !== undefined && sameTiming && sameRest) {
          const info = Rows.infoOf(existing, null)
          return { created: false, changed: false, nextRunAt: info.nextRunAt } satisfies UpsertResult
        }
        const anchor = sameTiming
          ? Number(existing.anchor_at)
          : resolved.startAt ?? ("everyMs" in spec ? now + spec.everyMs : now)
        const scheduledRuns = existing === undefined ? 0 : Number(existing.scheduled_runs)
        const bounds = { ...(resolved.startAt === null ? {} : { startAt: resolved.startAt }), ...(resolved.endAt === null ? {} : { endAt: resolved.endAt }) }
        const timing = timingOf(timingText, anchor)
        // A re-timed schedule never runs again a slot it ran (or runs) already: e.g. one re-timed in the
        // very millisecond of a slot that just ran, whose new timing has that slot too.
        const ranUpTo = existing === undefined || existing.started_slot === null ? -1 : Number(existing.started_slot)
        const fresh = Plan.firstFrom({ timing, bounds, limit: resolved.limit, scheduledRuns }, Math.max(now, ranUpTo + 1))
        // An unchanged timing keeps its cursor (no reset of the next run), unless a new limit ends or revives it.
        const cursor = !sameTiming
          ? fresh
          : resolved.limit !== null && scheduledRuns >= resolved.limit
          ? null
          : existing.slot_at === null
          ? fresh
          : Number(existing.slot_at)
        const manualAt = existing === undefined || existing.manual_at === null ? null : Number(existing.manual_at)
        const running = existing !== undefined && existing.run_slot !== null
        const due = Plan.dueAt({ cursor, manualAt })
        const status = running || due !== null ? "pending" : "ended"
        const nextAttemptAt = running ? Number(existing.next_attempt_at) : due ?? now
        const paused = existing !== undefined && Number(existing.paused) === 1
        const write = storage.exec(
          `INSERT INTO ${TABLE} (key, schedule, schedule_key, generation_id, status, attempt, next_attempt_at, timing,
             anchor_at, start_at, end_at, run_limit, catch_up, overlap, grace_ms, payload, slot_at, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (key) DO UPDATE SET status = excluded.status, next_attempt_at = excluded.next_attempt_at,
             timing = excluded.timing, anchor_at = excluded.anchor_at, start_at = excluded.start_at,
             end_at = excluded.end_at, run_limit = excluded.run_limit, catch_up = excluded.catch_up,
             overlap = excluded.overlap, grace_ms = excluded.grace_ms, payload = excluded.payload,
             slot_at = excluded.slot_at, waited_at = CASE WHEN ? = 1 THEN waited_at ELSE NULL END,
             updated_at = excluded.updated_at`,
          [
            target.id,
            name,
            target.key,
            crypto.randomUUID(),
            status,
            nextAttemptAt,
            timingText,
            anchor,
            resolved.startAt,
            resolved.endAt,
            resolved.limit,
            resolved.catchUp,
            resolved.overlap,
            resolved.graceMs,
            payload,
            cursor,
            now,
            now,
            sameTiming ? 1 : 0
          ]
        )
        const startable = status === "pending" && !running && (!paused || manualAt !== null)
        yield* handle.writePending(
          write,
          () => startable ? { key: target.id, at: nextAttemptAt, start: nextAttemptAt <= now } : undefined,
          { reconcile: existing !== undefined }
        )
        return { created: existing === undefined, changed: true, nextRunAt: due } satisfies UpsertResult
      }).pipe(Effect.withSpan("Schedules.upsert"))

    const remove = (name: string) => (key: string) =>
      Effect.gen(function*() {
        const target = yield* checked(name, key)
        const deleted = yield* handle.write(storage.exec(`DELETE FROM ${TABLE} WHERE key = ? RETURNING key`, [target.id]))
        if (deleted.length === 0) return false
        yield* handle.abort((id) => id === target.id, new Error(`The schedule "${name}" (key "${target.key}") was removed`))
        return true
      }).pipe(Effect.withSpan("Schedules.remove"))

    const get = (name: string) => (key: string) =>
      Effect.gen(function*() {
        const target = yield* checked(name, key)
        const row = yield* readRow(target.id)
        return row === undefined ? undefined : yield* infoOf(target.definition, row)
      }).pipe(Effect.withSpan("Schedules.get"))

    const list = (name: string) => (given: { readonly limit?: number | undefined; readonly cursor?: string | undefined } = {}) =>
      Effect.gen(function*() {
        const definition = definitionOf(name)!
        const query = yield* ListQuery.parse(given, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, [])
        const rows = yield* storage.exec(
          query.after === undefined
            ? `SELECT * FROM ${TABLE} WHERE schedule = ? ORDER BY created_at, key LIMIT ?`
            : `SELECT * FROM ${TABLE} WHERE schedule = ? AND (created_at > ? OR (created_at = ? AND key > ?))
               ORDER BY created_at, key LIMIT ?`,
          query.after === undefined
            ? [name, query.limit + 1]
            : [name, query.after.at, query.after.at, query.after.key, query.limit + 1]
        )
        const page = rows.slice(0, query.limit)
        const items = yield* Effect.forEach(page, (row) => infoOf(definition, row))
        const last = page[page.length - 1]
        return rows.length > query.limit && last !== undefined
          ? { items, cursor: ListQuery.cursor(Number(last.created_at), String(last.key)) }
          : { items }
      }).pipe(Effect.withSpan("Schedules.list"))

    const pause = (name: string) => (key: string) =>
      Effect.gen(function*() {
        const target = yield* checked(name, key)
        const updated = yield* handle.write(
          storage.exec(`UPDATE ${TABLE} SET paused = 1 WHERE key = ? AND paused = 0 RETURNING key`, [target.id])
        )
        return updated.length > 0
      }).pipe(Effect.withSpan("Schedules.pause"))

    const resume = (name: string) => (key: string) =>
      Effect.gen(function*() {
        const target = yield* checked(name, key)
        const now = yield* Clock.currentTimeMillis
        const updated = yield* handle.writePending(
          storage.exec(
            `UPDATE ${TABLE} SET paused = 0 WHERE key = ? AND paused = 1 RETURNING status, next_attempt_at, run_slot`,
            [target.id]
          ),
          ([row]) => {
            if (row === undefined || row.status !== "pending" || row.run_slot !== null) return undefined
            const at = Number(row.next_attempt_at)
            return { key: target.id, at, start: at <= now }
          }
        )
        return updated.length > 0
      }).pipe(Effect.withSpan("Schedules.resume"))

    const trigger = (name: string) => (key: string) =>
      Effect.gen(function*() {
        const target = yield* checked(name, key)
        const now = yield* Clock.currentTimeMillis
        // A request made while a manual run is active asks for another; one not started yet is the same run.
        const updated = yield* handle.writePending(
          storage.exec(
            `UPDATE ${TABLE} SET
               manual_at = CASE WHEN manual_at IS NULL OR (run_manual = 1 AND manual_at = run_slot) THEN ? ELSE manual_at END,
               next_attempt_at = CASE WHEN run_slot IS NOT NULL THEN next_attempt_at
                 WHEN status = 'ended' THEN ? ELSE MIN(next_attempt_at, ?) END,
               status = 'pending'
             WHERE key = ? RETURNING run_slot`,
            [now, now, now, target.id]
          ),
          ([row]) => row === undefined || row.run_slot !== null ? undefined : { key: target.id, at: now, start: true }
        )
        return updated.length > 0
      }).pipe(Effect.withSpan("Schedules.trigger"))

    const service: Record<string, unknown> = { purgeBefore }
    const handles = new Map<string, ScheduleHandle<unknown>>()
    for (const name of Object.keys(definitions)) {
      const handleOf: ScheduleHandle<unknown> = {
        upsert: upsert(name),
        remove: remove(name),
        get: get(name),
        list: list(name),
        pause: pause(name),
        resume: resume(name),
        trigger: trigger(name)
      }
      service[name] = handleOf
      handles.set(name, handleOf)
    }
    yield* InspectionRegistry.register(SchedulesInspect.source(storage, handles, purgeBefore))
    return service as unknown as SchedulesService<Defs>
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
