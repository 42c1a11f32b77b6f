/**
 * Named alarms: many logical timers on the object's one physical alarm.
 *
 * Scheduling a name replaces its pending occurrence (new generation, attempt 0).
 * One handler per name runs at a time in an isolate: a replacement scheduled
 * while the old occurrence runs waits for it, then runs with its own
 * idempotency key. Success deletes only the occurrence that ran; a timeout is
 * terminal unless `retryTimeouts` (the outcome of a timed-out side effect is
 * unknown).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  DurableAlarmTimeoutError,
  DurableCanceledError,
  InvalidInputError,
  InvalidOptionError,
  type MigrationError,
  NonRetryableError,
  type ParticipantConflictError,
  type SerializedError,
  type StorageError
} from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as AlarmsInspect from "./inspection.js"
import * as MigrationSql from "../engine/migrationSql.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"
import * as Policy from "../engine/policy.js"
import * as Validate from "../shared/validate.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import * as Migrations from "../engine/Migrations.js"
import * as StepMemo from "../steps/memo.js"
import * as Scheduler from "../engine/Scheduler.js"
import { type Row, StorageService } from "../engine/StorageService.js"

/** What a named-alarm handler is called with. */
export interface DurableAlarmInfo<Name extends string = string> {
  readonly name: Name
  /** The time the occurrence was scheduled for. */
  readonly scheduledTime: number
  /** 1-based; already durably counted. */
  readonly attempt: number
  readonly isRetry: boolean
  readonly retryCount: number
  /** `durability-alarm:v1:<generation>`: stable across retries of one occurrence, new for a replacement. */
  readonly idempotencyKey: string
  readonly signal: AbortSignal
  /** The platform's alarm info when a physical alarm started this attempt. */
  readonly platform: AlarmInvocationInfo | undefined
}

export interface AlarmDefinition<E, Req> extends Policy.ExecutionOptions {
  readonly handler: (info: DurableAlarmInfo) => Effect.Effect<unknown, E, Req>
  /** Retry an attempt that timed out (default false: a timeout is terminal). */
  readonly retryTimeouts?: boolean | undefined
}

export interface AnyAlarmDefinition extends Policy.ExecutionOptions {
  readonly handler: (info: DurableAlarmInfo) => Effect.Effect<unknown, unknown, unknown>
  readonly retryTimeouts?: boolean | undefined
}

export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends AlarmDefinition<infer _E, infer Req> ? Req : never
}[keyof Defs]

export const alarm = <E = never, Req = never>(
  options: Policy.ExecutionOptions & {
    readonly handler: (info: DurableAlarmInfo) => Effect.Effect<unknown, E, Req>
    readonly retryTimeouts?: boolean | undefined
  }
): AlarmDefinition<E, Req> => options

export interface NamedAlarmsOptions extends Policy.ExecutionOptions {
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/** A name's stored occurrence: pending (waiting, running or retrying) or failed for good. */
export interface NamedAlarmState<Name extends string = string> {
  readonly name: Name
  readonly status: "pending" | "failed"
  /** The time it was scheduled for. */
  readonly scheduledTime: number
  /** When its next attempt is due (its scheduled time, or a retry's time). */
  readonly nextAttemptAt: number
  /** Attempts claimed so far. */
  readonly attempt: number
  readonly lastError: SerializedError | null
  /** The `idempotencyKey` its handler gets (stable across this occurrence's retries). */
  readonly idempotencyKey: string
  readonly createdAt: number
}

export interface NamedAlarms<Defs extends Record<string, AnyAlarmDefinition>> {
  /** Schedules the name at `scheduledTime` (epoch ms or a `Date`), replacing its pending occurrence. */
  readonly schedule: (
    name: keyof Defs & string,
    scheduledTime: number | Date
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
  /** Every stored occurrence, soonest first. */
  readonly list: Effect.Effect<ReadonlyArray<NamedAlarmState>, StorageError>
  /** Deletes every occurrence created before `before` (strict; epoch ms or a `Date`); returns how many. */
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
}

export const TABLE = "durability_alarms"

const COLUMNS = "name, status, scheduled_at, next_attempt_at, attempt, last_error, last_error_name"

/** `durability_alarms` as created by 0003, with the columns a later migration adds. */
const createAlarms = (generation = "", created = "") =>
  `CREATE TABLE durability_alarms (
    name TEXT PRIMARY KEY,${generation}
    status TEXT NOT NULL CHECK (status IN ('pending', 'failed')),
    scheduled_at INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    last_error_name TEXT${created}
  )`

const PENDING_INDEX = "CREATE INDEX durability_alarms_pending_idx ON durability_alarms (status, next_attempt_at)"

export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0003_create_alarms",
    up: `${createAlarms()};
      ${PENDING_INDEX}`,
    down: "DROP TABLE IF EXISTS durability_alarms",
    presentWhen: MigrationSql.tableExists("durability_alarms")
  },
  {
    name: "durability_0004_alarms_generation_and_created_at",
    presentWhen: MigrationSql.columnExists("durability_alarms", "generation_id"),
    ...MigrationSql.addGenerationAndCreatedAt({
      table: "durability_alarms",
      keyColumn: "name",
      columns: COLUMNS,
      createBefore: createAlarms(),
      createAfter: createAlarms(
        "\n    generation_id TEXT NOT NULL DEFAULT 'legacy',",
        `,\n    created_at INTEGER NOT NULL DEFAULT (${MigrationSql.NOW_MS})`
      ),
      pendingIndex: PENDING_INDEX
    })
  }
]

export const CAPABILITY = "namedAlarms"

export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

export const IDEMPOTENCY_PREFIX = "durability-alarm:v1:"

const isAlarmTimeout = (error: unknown) => error instanceof DurableAlarmTimeoutError

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
    const definitionOfName = (name: string) => Capability.ownDefinition(definitions, name)
    const { definitionOf, handle, purgeBefore, storage, watchers } = yield* Capability.make<AnyAlarmDefinition, unknown>({
      kind: CAPABILITY,
      owner: "DurabilityAlarms",
      module: "NamedAlarms",
      table: TABLE,
      keyColumn: "name",
      nameColumn: "name",
      entityKind: "named_alarm",
      migrations,
      definitions,
      options,
      timeoutError: (name) => (timeoutMs) =>
        new DurableAlarmTimeoutError({ message: `Durable alarm "${name}" timed out after ${timeoutMs}ms`, timeoutMs }),
      // A timeout's outcome is unknown, so it is final unless the alarm opted into retrying it.
      isTerminal: (name) => definitionOfName(name)?.retryTimeouts === true ? undefined : isAlarmTimeout,
      check: (definitions) => {
        for (const [name, definition] of Object.entries(definitions)) {
          if (definition.retryTimeouts !== undefined && typeof definition.retryTimeouts !== "boolean") {
            return new InvalidOptionError({
              field: `methods.${name}.retryTimeouts`,
              kind: "type",
              message: `methods.${name}.retryTimeouts must be a boolean, got ${Validate.shown(definition.retryTimeouts)}`
            })
          }
        }
        return undefined
      },
      // One handler per name at a time: a new occurrence waits for a purged one that ignores its abort.
      releaseKeysOnPurge: false,
      purgeReason: () => new Error("Durable alarm was purged"),
      participant: ({ definitionOf, storage }) => ({
        run: (execution) =>
          Effect.suspend(() => {
            const name = execution.key
            const definition = definitionOf(name)
            if (definition === undefined) {
              return Effect.fail(new NonRetryableError({ message: `No named alarm handler registered for "${name}"` }))
            }
            const info: DurableAlarmInfo = {
              name,
              scheduledTime: Number(execution.row.scheduled_at),
              attempt: execution.attempt,
              isRetry: execution.attempt > 1,
              retryCount: execution.attempt - 1,
              idempotencyKey: `${IDEMPOTENCY_PREFIX}${execution.generation}`,
              signal: execution.signal,
              platform: execution.platform
            }
            return Capability.provideCaptured(
              definition.handler(info) as Effect.Effect<unknown, unknown, RequirementsOf<Defs>>,
              context
            )
          }),
        // Success deletes only the occurrence that ran, never its replacement.
        complete: (execution) =>
          Effect.map(
            storage.exec(
              `DELETE FROM durability_alarms
               WHERE name = ? AND generation_id = ? AND status = 'pending' AND attempt = ? RETURNING name`,
              [execution.key, execution.generation, execution.attempt]
            ),
            (rows) => rows.length > 0
          ),
        completesInOneStatement: true,
        describe: (row) => `named alarm "${String(row.name)}"`,
        entity: (row) => ({
          entityKind: "named_alarm",
          alarm: String(row.name),
          id: String(row.name),
          generation: String(row.generation_id)
        })
      })
    })

    const checkName = (name: unknown) =>
      typeof name === "string" && definitionOf(name) !== undefined
        ? Effect.succeed(name)
        : Effect.fail(
          new InvalidInputError({ field: "name", kind: "type", message: `Unknown named alarm ${Validate.shown(name)}` })
        )

    const stateOf = (row: Row): NamedAlarmState => ({
      name: String(row.name),
      status: row.status === "failed" ? "failed" : "pending",
      scheduledTime: Number(row.scheduled_at),
      nextAttemptAt: Number(row.next_attempt_at),
      attempt: Number(row.attempt),
      lastError: row.last_error === null
        ? null
        : { name: row.last_error_name === null ? "Error" : String(row.last_error_name), message: String(row.last_error) },
      idempotencyKey: `${IDEMPOTENCY_PREFIX}${String(row.generation_id)}`,
      createdAt: Number(row.created_at)
    })

    const get = Effect.fn("NamedAlarms.get")(function*(name: string) {
      yield* checkName(name)
      const [row] = yield* storage.exec("SELECT * FROM durability_alarms WHERE name = ?", [name])
      return Option.map(Option.fromNullable(row), stateOf)
    })

    const list = Effect.map(
      storage.exec("SELECT * FROM durability_alarms ORDER BY next_attempt_at, name"),
      (rows) => rows.map(stateOf)
    )

    const cancel = Effect.fn("NamedAlarms.cancel")(function*(name: string) {
      yield* checkName(name)
      const [row] = yield* handle.write(
        storage.exec("DELETE FROM durability_alarms WHERE name = ? RETURNING status, attempt, generation_id", [name])
      )
      if (row === undefined) return false
      const error = new DurableCanceledError({ message: `Durable alarm "${name}" was canceled` })
      yield* handle.abort((key) => key === name, error)
      if (row.status !== "pending") {
        // No event settles it (its waiters learn from the event otherwise).
        watchers.notify(name)
        return true
      }
      yield* handle.emit((timestamp) => ({
        type: "terminal",
        entityKind: "named_alarm",
        alarm: name,
        id: name,
        generation: String(row.generation_id),
        timestamp,
        attempt: Number(row.attempt),
        reason: "canceled",
        error: { name: error._tag, message: error.message }
      }))
      return true
    })

    // Untraced: this is the hot path, and a span (with its captured call site) costs more than the write (bench B1).
    const schedule = Effect.fnUntraced(function*(name: string, scheduledTime: number | Date) {
      yield* checkName(name)
      const at = yield* Validate.timestamp("scheduledTime", scheduledTime)
      const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      const generation = crypto.randomUUID()
      yield* handle.writePending(storage.exec(
        `INSERT INTO durability_alarms
           (name, generation_id, status, scheduled_at, next_attempt_at, attempt, last_error, last_error_name, created_at)
         VALUES (?, ?, 'pending', ?, ?, 0, NULL, NULL, ?)
         ON CONFLICT (name) DO UPDATE SET generation_id = excluded.generation_id, status = 'pending',
           scheduled_at = excluded.scheduled_at, next_attempt_at = excluded.next_attempt_at, attempt = 0,
           last_error = NULL, last_error_name = NULL, created_at = excluded.created_at`,
        [name, generation, at, at, now]
      ), () => ({ key: name, at }))
      yield* handle.emit((timestamp) => ({
        type: "scheduled",
        entityKind: "named_alarm",
        alarm: name,
        id: name,
        generation,
        timestamp,
        attempt: 0,
        scheduledTime: at
      }))
    })

    yield* InspectionRegistry.register(AlarmsInspect.source(storage, { cancel, purgeBefore }))
    return { schedule, get, cancel, list, purgeBefore } as unknown as NamedAlarms<Defs>
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
