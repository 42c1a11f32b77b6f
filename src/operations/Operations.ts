/**
 * Durable operations: register a side effect by id, run it effectively once
 * with retries, look up its result.
 *
 * Registration is insert-if-absent by id in one transaction with the alarm
 * reconciliation; the handler never runs before that commits. Each attempt is
 * claimed durably before the handler runs, so an eviction mid-attempt still
 * counts it. Completed and failed records are kept (deduplicating their ids)
 * until purged.
 *
 * Handlers are Effects. Their requirements `R` are taken from the context
 * `make` runs in: provide them once per Durable Object, in the layer of the
 * object's runtime, and every attempt runs with them. In a handler,
 * `Operations.step(name, effect)` is a durable step of the call (see `Steps`).
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  DuplicateDurableCallError,
  DurableAttemptTimeoutError,
  DurableCanceledError,
  DurableResultSerializationError,
  InvalidInputError,
  InvalidOptionError,
  type MigrationError,
  NonRetryableError,
  type ParticipantConflictError,
  type SerializedError,
  type StorageError
} from "../shared/Errors.js"
import type { PendingRecord } from "../engine/DurableTable.js"
import * as Capability from "../engine/capability.js"
import * as Codec from "../shared/codec.js"
import * as Json from "../shared/json.js"
import type { IsJson } from "../shared/jsonType.js"
import * as OperationsInspect from "../inspector/operations.js"
import * as ListQuery from "../engine/listQuery.js"
import * as Watchers from "../engine/watchers.js"
import * as MigrationSql from "../engine/migrationSql.js"
import * as Policy from "../engine/policy.js"
import * as StepMemo from "../steps/memo.js"
import * as Validate from "../shared/validate.js"
import type * as Lifecycle from "../engine/Lifecycle.js"
import * as Migrations from "../engine/Migrations.js"
import * as Scheduler from "../engine/Scheduler.js"
import * as Steps from "../steps/Steps.js"
import { type Row, StorageService } from "../engine/StorageService.js"
import type * as Schema from "effect/Schema"
export type { ExecutionOptions, RetriesOptions } from "../engine/policy.js"

/** What a handler is called with for one attempt. */
export interface DurableCall<P> {
  readonly id: string
  readonly operation: string
  readonly payload: P
  /** 1-based; already durably counted. */
  readonly attempt: number
  /** Aborted on timeout or purge. Cooperative: stop when you see it. */
  readonly signal: AbortSignal
}

export interface OperationDefinition<P, R, E, Req> extends Policy.ExecutionOptions {
  readonly handler: (call: DurableCall<P>) => Effect.Effect<R, E, Req>
  readonly payload: Codec.Codec<P>
  readonly result: Codec.Codec<R>
}

/** The shape every `OperationDefinition` is assignable to. */
export interface AnyOperationDefinition extends Policy.ExecutionOptions {
  readonly handler: (call: never) => Effect.Effect<unknown, unknown, unknown>
  readonly payload: Codec.AnyCodec
  readonly result: Codec.AnyCodec
}

export type PayloadOf<D> = D extends OperationDefinition<infer P, infer _R, infer _E, infer _Req> ? P : never
export type ResultOf<D> = D extends OperationDefinition<infer _P, infer R, infer _E, infer _Req> ? R : never
export type RequirementsOf<Defs> = {
  readonly [K in keyof Defs]: Defs[K] extends OperationDefinition<infer _P, infer _R, infer _E, infer Req> ? Req
    : never
}[keyof Defs]

/** A durable step of the current call: its first successful result is stored and replayed (see `Steps.step`). */
export const step = Steps.step

/**
 * Declares an operation. `payload`/`result` schemas are optional: with one, the
 * payload is validated and encoded at registration and decoded at execution.
 */
export const operation = <P, R, E = never, Req = never, PI = P, RI = R>(
  options:
    & Policy.ExecutionOptions
    & {
      readonly handler: (call: DurableCall<P>) => Effect.Effect<R, E, Req>
      readonly payload?: Schema.Schema<P, PI> | undefined
      readonly result?: Schema.Schema<R, RI> | undefined
    }
    // The stored form (the result, or its schema's encoded form) must be JSON: a compile error, not
    // a terminal failure after the side effect ran.
    & (IsJson<NoInfer<RI>> extends true ? unknown
      : { readonly result: "the handler's result (or its result schema's encoded form) must be JSON" })
  // Every attempt gets its steps' `CurrentCall`: it is not a requirement of the handler.
): OperationDefinition<NoInfer<P>, NoInfer<R>, NoInfer<E>, Exclude<NoInfer<Req>, Steps.CurrentCall>> => ({
  ...(options.attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs: options.attemptTimeoutMs }),
  ...(options.retries === undefined ? {} : { retries: options.retries }),
  handler: options.handler as (call: DurableCall<P>) => Effect.Effect<R, E, Exclude<Req, Steps.CurrentCall>>,
  payload: Codec.fromSchema(options.payload),
  result: Codec.fromSchema(options.result)
})

export type OperationResult<R> =
  | { readonly status: "not_found" }
  | {
    readonly status: "pending"
    readonly attempt: number
    readonly nextAttemptAt: number
    readonly lastError: string | null
  }
  | { readonly status: "failed"; readonly attempt: number; readonly error: SerializedError }
  | { readonly status: "completed"; readonly result: R }

/** A call to register: its id, its payload, and optionally when to run it (default: now). */
export interface RegisterCall<P> {
  readonly id: string
  readonly payload: P
  /** Run no earlier than this time (epoch milliseconds or a `Date`). Not with `delayMs`. */
  readonly runAt?: number | Date | undefined
  /** Run no earlier than this many milliseconds from now. Not with `runAt`. */
  readonly delayMs?: number | undefined
}

export type OperationStatus = "pending" | "completed" | "failed"

/** One stored call, as `list` returns it: its id, when it was registered, and its state. */
export type OperationEntry<R> = Exclude<OperationResult<R>, { readonly status: "not_found" }> & {
  readonly id: string
  readonly createdAt: number
}

export interface ListOptions {
  /** Only calls in this state (or these states). Default: all. */
  readonly status?: OperationStatus | ReadonlyArray<OperationStatus> | undefined
  /** At most this many (1–1000). Default 100. */
  readonly limit?: number | undefined
  /** The `cursor` of the previous page. */
  readonly cursor?: string | undefined
}

/** A page of calls in registration order; `cursor` is set when more follow. */
export interface OperationPage<R> {
  readonly items: ReadonlyArray<OperationEntry<R>>
  readonly cursor?: string | undefined
}

export const DEFAULT_LIST_LIMIT = 100
export const MAX_LIST_LIMIT = 1_000

export interface OperationsOptions extends Policy.ExecutionOptions {
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

export interface Operations<Defs extends Record<string, AnyOperationDefinition>> {
  /**
   * Resolves once the registration committed; never waits for the handler. Same id + same operation
   * is a no-op. With `runAt`/`delayMs` the call runs no earlier than that; otherwise at once when a
   * permit is free.
   */
  readonly register: <K extends keyof Defs & string>(
    operation: K,
    call: RegisterCall<PayloadOf<Defs[K]>>
  ) => Effect.Effect<void, InvalidInputError | DuplicateDurableCallError | StorageError>
  /**
   * Registers many calls of one operation in one transaction: every call is checked first (a bad one
   * fails the batch with `InvalidInputError` naming `calls[i]` and writes nothing), then all are
   * written or, on a `DuplicateDurableCallError` or `StorageError`, none. Each call then behaves as
   * if registered alone (an id already registered for this operation is a no-op).
   */
  readonly registerMany: <K extends keyof Defs & string>(
    operation: K,
    calls: Iterable<RegisterCall<PayloadOf<Defs[K]>>>
  ) => Effect.Effect<void, InvalidInputError | DuplicateDurableCallError | StorageError>
  /**
   * Cancels a pending call: it fails with `DurableCanceledError` and is never retried; a running
   * handler's signal is aborted with that error (its late settle changes nothing). True when a pending
   * call was canceled; false when it had already settled or does not exist.
   */
  readonly cancel: <K extends keyof Defs & string>(
    operation: K,
    id: string
  ) => Effect.Effect<boolean, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** The operation's calls in registration order, a page at a time. */
  readonly list: <K extends keyof Defs & string>(
    operation: K,
    options?: ListOptions
  ) => Effect.Effect<OperationPage<ResultOf<Defs[K]>>, InvalidInputError | StorageError>
  readonly getResult: <K extends keyof Defs & string>(
    operation: K,
    id: string
  ) => Effect.Effect<OperationResult<ResultOf<Defs[K]>>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** Waits up to `timeoutMs` for the record to settle, then returns its latest state. */
  readonly wait: <K extends keyof Defs & string>(
    operation: K,
    id: string,
    timeoutMs: number
  ) => Effect.Effect<OperationResult<ResultOf<Defs[K]>>, InvalidInputError | DuplicateDurableCallError | StorageError>
  /** Deletes every record created before `before` (strict; epoch ms or a `Date`); returns how many. */
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
}

export const TABLE = "durability_calls"

const STATUSES: ReadonlyArray<OperationStatus> = ["pending", "completed", "failed"]

const COLUMNS =
  "id, operation, payload, status, result, attempt, next_attempt_at, last_error, last_error_name, completed_at"

/** `durability_calls` as created by 0001, plus the columns a later migration adds. */
const createCalls = (added = "") =>
  `CREATE TABLE durability_calls (
    id TEXT PRIMARY KEY,
    operation TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    result TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    last_error_name TEXT,
    completed_at INTEGER${added}
  )`

const PENDING_INDEX = "CREATE INDEX durability_calls_pending_idx ON durability_calls (status, next_attempt_at)"

export const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "durability_0001_create_calls",
    up: createCalls(),
    down: "DROP TABLE IF EXISTS durability_calls",
    presentWhen: MigrationSql.tableExists("durability_calls")
  },
  {
    name: "durability_0002_pending_index",
    up: PENDING_INDEX,
    down: "DROP INDEX IF EXISTS durability_calls_pending_idx",
    presentWhen: MigrationSql.indexExists("durability_calls_pending_idx")
  },
  {
    name: "durability_0004_calls_generation_and_created_at",
    presentWhen: MigrationSql.columnExists("durability_calls", "generation_id"),
    ...MigrationSql.addGenerationAndCreatedAt({
      table: "durability_calls",
      keyColumn: "id",
      columns: COLUMNS,
      createBefore: createCalls(),
      createAfter: createCalls(`,
    generation_id TEXT NOT NULL DEFAULT 'legacy',
    created_at INTEGER NOT NULL DEFAULT (${MigrationSql.NOW_MS})`),
      pendingIndex: PENDING_INDEX
    })
  },
  {
    name: "durability_0006_operations_steps",
    // The shared memo table and the triggers deleting a call's memos with its end, purge or replacement.
    ...StepMemo.memoSchema({ capability: "operations", table: "durability_calls", keyColumn: "id", terminal: ["completed", "failed"] })
  }
]

export const CAPABILITY = "operations"

/** Applies (or reverts to `target`) the operations table's migrations. */
export const migrate = (target?: string | null) => Migrations.migrate(CAPABILITY, migrations, target)

const timeoutError = (operation: string) => (timeoutMs: number) =>
  new DurableAttemptTimeoutError({
    message: `Durable operation "${operation}" timed out after ${timeoutMs}ms`,
    timeoutMs
  })

const isSerializationFailure = (error: unknown): error is DurableResultSerializationError =>
  error instanceof DurableResultSerializationError

/** The error of a result that cannot be stored: terminal, so the side effect is not run again. */
const unstorable = (operation: string, detail: string, cause?: unknown) =>
  new DurableResultSerializationError({
    message: `The result of operation "${operation}" ${detail}`,
    ...(cause === undefined ? {} : { cause })
  })

/**
 * Attaches the operations capability to the scheduler: migrates its table,
 * checks the definitions, and returns the typed API.
 */
export const make = <const Defs extends Record<string, AnyOperationDefinition>>(
  definitions: Defs,
  options: OperationsOptions = {}
): Effect.Effect<
  Operations<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<RequirementsOf<Defs>>()
    const { definitionOf, handle, purgeBefore, storage, watchers } = yield* Capability.make<AnyOperationDefinition, string>({
      kind: CAPABILITY,
      owner: "Durability",
      module: "Operations",
      table: TABLE,
      keyColumn: "id",
      nameColumn: "operation",
      entityKind: "operation",
      migrations,
      definitions,
      options,
      timeoutError,
      // A result that cannot be stored must not re-run its side effect; nor must a step's.
      isTerminal: () => (error) => isSerializationFailure(error) || StepMemo.isStepFailure(error),
      releaseKeysOnPurge: true,
      purgeReason: () => new Error("Durable operation was purged"),
      participant: ({ definitionOf, storage }) => ({
        // Succeeds with the result's stored JSON: encoded once, and its size checked before `complete`.
        run: (execution) =>
          Effect.gen(function*() {
            const operation = String(execution.row.operation)
            const definition = definitionOf(operation)
            if (definition === undefined) {
              return yield* new NonRetryableError({ message: `No handler registered for operation "${operation}"` })
            }
            // The payload was valid when registered; if it no longer decodes, retrying cannot help.
            const payload = yield* Effect.mapError(
              definition.payload.decode(Json.decode(String(execution.row.payload))),
              (cause) =>
                new NonRetryableError({ message: `The stored payload of operation "${operation}" does not decode`, cause })
            )
            const call: DurableCall<unknown> = {
              id: execution.key,
              operation,
              payload,
              attempt: execution.attempt,
              signal: execution.signal
            }
            const steps = StepMemo.runner(storage, {
              capability: CAPABILITY,
              table: TABLE,
              keyColumn: "id",
              key: execution.key,
              generation: execution.generation
            })
            const result = yield* Capability.provideCaptured(
              Effect.provideService(
                definition.handler(call as never) as Effect.Effect<unknown, unknown, RequirementsOf<Defs> | Steps.CurrentCall>,
                Steps.CurrentCall,
                steps
              ),
              context
            )
            const encoded = yield* Effect.mapError(
              definition.result.encode(result as never),
              (cause) => unstorable(operation, "does not match its schema", cause)
            )
            const checked = Json.check(encoded)
            if (!checked.ok) {
              return yield* unstorable(operation, `is not JSON-serializable: ${checked.reason.replace(/^value/, "result")}`)
            }
            // Over the row limit the completing write would fail, and the attempt (with its side effect)
            // would run again; `complete` also maps the storage's own refusal of payload + result.
            const text = Json.encode(encoded)
            const bytes = Json.oversizedBytes(text)
            if (bytes !== undefined) {
              return yield* unstorable(operation, `is ${bytes} bytes as JSON; a stored row is limited to ${Json.MAX_ROW_BYTES} bytes`)
            }
            return text
          }),
        complete: (execution, text, settledAt) =>
          storage.exec(
            `UPDATE durability_calls SET status = 'completed', result = ?, completed_at = ?,
               last_error = NULL, last_error_name = NULL
             WHERE id = ? AND generation_id = ? AND status = 'pending' AND attempt = ? RETURNING id`,
            [text, settledAt, execution.key, execution.generation, execution.attempt]
          ).pipe(
            Effect.map((updated) => updated.length > 0),
            // Payload and result together over the row limit: retrying cannot help (terminal, not re-run).
            Effect.catchIf((error) => error.message.includes("SQLITE_TOOBIG"), (error) =>
              Effect.fail(
                unstorable(String(execution.row.operation), `does not fit in a stored row with its payload: ${error.message}`, error)
              ))
          ),
        entity: (row) => ({
          entityKind: "operation",
          operation: String(row.operation),
          id: String(row.id),
          generation: String(row.generation_id)
        }),
        completesInOneStatement: true,
        describe: (row) => `operation "${String(row.operation)}" (id "${String(row.id)}")`
      })
    })

    const checkOperation = (operation: string) =>
      definitionOf(operation) === undefined
        ? Effect.fail(
          new InvalidInputError({ field: "operation", kind: "type", message: `Unknown operation "${operation}"` })
        )
        : Effect.void

    const readRow = (operation: string, id: string) =>
      Effect.gen(function*() {
        const [row] = yield* storage.exec("SELECT * FROM durability_calls WHERE id = ?", [id])
        if (row !== undefined && row.operation !== operation) {
          return yield* duplicate(id, String(row.operation), operation)
        }
        return Option.fromNullable(row)
      })

    const toResult = (operation: string, row: Option.Option<Row>) =>
      Option.isNone(row) ? Effect.succeed({ status: "not_found" } as const) : stateOf(operation, row.value)

    const stateOf = (operation: string, stored: Row) =>
      Effect.gen(function*() {
        switch (stored.status) {
          case "pending":
            return {
              status: "pending",
              attempt: Number(stored.attempt),
              nextAttemptAt: Number(stored.next_attempt_at),
              lastError: stored.last_error === null ? null : String(stored.last_error)
            } as const
          case "failed":
            return {
              status: "failed",
              attempt: Number(stored.attempt),
              error: {
                name: stored.last_error_name === null ? "Error" : String(stored.last_error_name),
                message: stored.last_error === null ? "Durable operation failed" : String(stored.last_error)
              }
            } as const
          default: {
            const definition = definitionOf(operation)!
            const result = yield* Effect.orDie(definition.result.decode(Json.decode(String(stored.result))))
            return { status: "completed", result } as const
          }
        }
      })

    const getResult = (operation: string, id: string) =>
      Effect.gen(function*() {
        yield* checkOperation(operation)
        yield* Validate.key("id", id)
        return yield* toResult(operation, yield* readRow(operation, id))
      })

    // When a registered call is due: now, `runAt`, or now + `delayMs`.
    const dueTime = (call: RegisterCall<unknown>, now: number, fieldOf: (name: string) => string) =>
      Effect.gen(function*() {
        if (call.runAt !== undefined && call.delayMs !== undefined) {
          return yield* new InvalidInputError({
            field: fieldOf("runAt"),
            kind: "type",
            message: "runAt and delayMs cannot both be given"
          })
        }
        if (call.runAt !== undefined) return yield* Validate.timestamp(fieldOf("runAt"), call.runAt)
        if (call.delayMs === undefined) return now
        const delay = yield* Validate.milliseconds(fieldOf("delayMs"), call.delayMs)
        if (!Number.isSafeInteger(now + delay)) {
          return yield* new InvalidInputError({
            field: fieldOf("delayMs"),
            kind: "range",
            message: `delayMs ${delay} from now is not a safe integer timestamp`
          })
        }
        return now + delay
      })

    // Untraced: this is the hot path, and a span (with its captured call site) costs more than the write (bench B1).
    /**
     * A call checked and encoded, before any storage access (a bad one leaves storage unchanged).
     * `path` places it in a batch (`calls[3]`): its fields are then named `calls[3].id`, ….
     */
    const prepare = Effect.fnUntraced(function*(operation: string, call: RegisterCall<unknown>, now: number, path?: string) {
      const fieldOf = (name: string) => path === undefined ? name : `${path}.${name}`
      const field = path ?? "call"
      if (typeof call !== "object" || call === null) {
        return yield* new InvalidInputError({
          field,
          kind: "type",
          message: `${field} must be { id, payload }, got ${Validate.shown(call)}`
        })
      }
      const id = yield* Validate.key(fieldOf("id"), call.id)
      const payloadField = fieldOf("payload")
      const encoded = yield* Effect.mapError(
        definitionOf(operation)!.payload.encode(call.payload as never),
        (error) =>
          new InvalidInputError({ field: payloadField, kind: "type", message: Codec.describeParseError(payloadField, error) })
      )
      const payload = yield* Validate.json(payloadField, encoded)
      const at = yield* dueTime(call, now, fieldOf)
      return { id, payload, at, generation: crypto.randomUUID() }
    })
    type Prepared = Effect.Effect.Success<ReturnType<typeof prepare>>

    const insert = (operation: string, call: Prepared, now: number) =>
      Effect.gen(function*() {
        const rows = yield* storage.exec(
          `INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, generation_id, created_at)
           VALUES (?, ?, ?, 'pending', 0, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id`,
          [call.id, operation, call.payload, call.at, call.generation, now]
        )
        if (rows.length > 0) return true
        const [winner] = yield* storage.exec("SELECT operation FROM durability_calls WHERE id = ?", [call.id])
        if (winner !== undefined && winner.operation !== operation) {
          return yield* duplicate(call.id, String(winner.operation), operation)
        }
        return false
      })

    /** Writes the calls in one transaction (all or none), then starts what a free permit can take. */
    const write = (operation: string, calls: ReadonlyArray<Prepared>, now: number) =>
      Effect.gen(function*() {
        const inserted = yield* handle.writePending(
          Effect.forEach(calls, (call) => Effect.map(insert(operation, call, now), (fresh) => fresh ? call : undefined)),
          (written) => {
            const records: Array<PendingRecord> = []
            for (const call of written) if (call !== undefined) records.push({ key: call.id, at: call.at, start: call.at <= now })
            return records
          },
          { oneStatementAt: calls.length === 1 ? calls[0]!.at : undefined }
        )
        for (const call of inserted) {
          if (call === undefined) continue
          yield* handle.emit((timestamp) => ({
            type: "registered",
            entityKind: "operation",
            operation,
            id: call.id,
            generation: call.generation,
            timestamp,
            attempt: 0
          }), now)
        }
      })

    const register = Effect.fnUntraced(function*(operation: string, call: RegisterCall<unknown>) {
      yield* checkOperation(operation)
      const now = yield* Clock.currentTimeMillis
      yield* write(operation, [yield* prepare(operation, call, now)], now)
    })

    const registerMany = Effect.fn("Operations.registerMany")(function*(
      operation: string,
      calls: Iterable<RegisterCall<unknown>>
    ) {
      yield* checkOperation(operation)
      if (typeof calls !== "object" || calls === null || typeof (calls as Iterable<unknown>)[Symbol.iterator] !== "function") {
        return yield* new InvalidInputError({
          field: "calls",
          kind: "type",
          message: `calls must be an array (or iterable) of { id, payload }, got ${Validate.shown(calls)}`
        })
      }
      const now = yield* Clock.currentTimeMillis
      const prepared: Array<Prepared> = []
      let index = 0
      for (const call of calls) prepared.push(yield* prepare(operation, call, now, `calls[${index++}]`))
      if (prepared.length > 0) yield* write(operation, prepared, now)
    })

    const wait = (operation: string, id: string, timeoutMs: number) =>
      Effect.gen(function*() {
        yield* checkOperation(operation)
        yield* Validate.key("id", id)
        const limit = yield* Validate.milliseconds("timeoutMs", timeoutMs)
        const row = yield* readRow(operation, id)
        if (Option.isNone(row) || row.value.status !== "pending" || limit === 0) return yield* toResult(operation, row)
        const pending = Effect.map(readRow(operation, id), (again) => Option.isSome(again) && again.value.status === "pending")
        yield* Watchers.awaitSettle(watchers, id, String(row.value.generation_id), pending, limit)
        return yield* toResult(operation, yield* readRow(operation, id))
      })

    const cancel = Effect.fn("Operations.cancel")(function*(operation: string, id: string) {
      yield* checkOperation(operation)
      yield* Validate.key("id", id)
      const row = yield* readRow(operation, id)
      if (Option.isNone(row) || row.value.status !== "pending") return false
      const generation = String(row.value.generation_id)
      const error = new DurableCanceledError({ message: `Durable operation "${operation}" (id "${id}") was canceled` })
      const now = yield* Clock.currentTimeMillis
      const [canceled] = yield* handle.write(storage.exec(
        `UPDATE durability_calls SET status = 'failed', last_error = ?, last_error_name = ?, completed_at = ?
         WHERE id = ? AND generation_id = ? AND status = 'pending' RETURNING attempt`,
        [error.message, error._tag, now, id, generation]
      ))
      if (canceled === undefined) return false
      // The handler may still run; its settle no longer matches a pending row.
      yield* handle.abort((key) => key === id, error)
      yield* handle.emit((timestamp) => ({
        type: "terminal",
        entityKind: "operation",
        operation,
        id,
        generation,
        timestamp,
        attempt: Number(canceled.attempt),
        reason: "canceled",
        error: { name: error._tag, message: error.message }
      }))
      return true
    })

    const list = Effect.fn("Operations.list")(function*(operation: string, options: ListOptions = {}) {
      yield* checkOperation(operation)
      const query = yield* ListQuery.parse(options, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, STATUSES)
      const statusFilter = query.statuses === undefined
        ? ""
        : ` AND status IN (${query.statuses.map(() => "?").join(", ")})`
      const after = query.after === undefined ? "" : " AND (created_at > ? OR (created_at = ? AND id > ?))"
      const rows = yield* storage.exec(
        `SELECT * FROM durability_calls WHERE operation = ?${statusFilter}${after}
         ORDER BY created_at, id LIMIT ?`,
        [
          operation,
          ...(query.statuses ?? []),
          ...(query.after === undefined ? [] : [query.after.at, query.after.at, query.after.key]),
          query.limit + 1
        ]
      )
      const page = rows.slice(0, query.limit)
      const items = yield* Effect.forEach(page, (row) =>
        Effect.map(stateOf(operation, row), (state) => ({
          ...state,
          id: String(row.id),
          createdAt: Number(row.created_at)
        })))
      const last = page[page.length - 1]
      return rows.length > query.limit && last !== undefined
        ? { items, cursor: ListQuery.cursor(Number(last.created_at), String(last.id)) }
        : { items }
    })

    yield* (yield* Scheduler.Scheduler).inspection.register(OperationsInspect.source(storage, { cancel, purgeBefore }))
    return { register, registerMany, getResult, wait, purgeBefore, cancel, list } as unknown as Operations<Defs>
  })

const duplicate = (id: string, existing: string, requested: string) =>
  new DuplicateDurableCallError({
    id,
    existing,
    requested,
    message: `Durable call "${id}" already belongs to operation "${existing}", not "${requested}"`
  })

/** A service tag for an application's operations, when you want them in a layer. */
export const tag = <Defs extends Record<string, AnyOperationDefinition>>(key: string) =>
  Context.GenericTag<Operations<Defs>>(key)

/** The capability as a layer over the engine (provide the handlers' requirements to it). */
export const layer = <const Defs extends Record<string, AnyOperationDefinition>>(
  service: Context.Tag<Operations<Defs>, Operations<Defs>>,
  definitions: Defs,
  options: OperationsOptions = {}
): Layer.Layer<
  Operations<Defs>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService | RequirementsOf<Defs>
> => Layer.effect(service, make(definitions, options))
