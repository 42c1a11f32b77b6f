/**
 * Synchronous SQL over a Durable Object's SQLite storage, atomic synchronous
 * transactions, and the object's one physical alarm.
 *
 * Every statement runs synchronously (`ctx.storage.sql.exec`), so a transaction
 * body is an Effect that must complete without suspending: it is run with
 * `Runtime.runSyncExit` inside `ctx.storage.transactionSync`, and any failure
 * (including an attempt to go async) rolls back every write of the body,
 * alarm writes included.
 *
 * The platform's `getAlarm()` is asynchronous and cannot be awaited inside a
 * synchronous transaction, so the service keeps the alarm value it last read or
 * wrote (`alarm`). Only the engine writes the alarm, so that value stays exact;
 * `readAlarm` refreshes it from the platform (at warm-up and after an alarm
 * fired). Building the service does no I/O, so a layer over it builds
 * synchronously inside a Durable Object's constructor.
 * @packageDocumentation
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import { StorageError } from "../shared/Errors.js"
import type { DurableObjectStorageLike, SqlValue } from "../shared/platform.js"

export type { SqlValue } from "../shared/platform.js"

/** One result row: column name to value. */
export type Row = Readonly<Record<string, SqlValue>>

/**
 * The object's SQLite storage and its alarm as an Effect service: statements, transactions, and the physical
 * alarm the engine owns.
 */
export interface StorageService {
  /** Runs one statement (or a script without bindings) and returns the rows of the last statement. */
  readonly exec: (query: string, bindings?: ReadonlyArray<SqlValue>) => Effect.Effect<ReadonlyArray<Row>, StorageError>
  /** Like `exec`, decoding every row with `schema`. A row that does not decode is a `StorageError`. */
  readonly query: <A, I>(
    schema: Schema.Schema<A, I, never>,
    query: string,
    bindings?: ReadonlyArray<SqlValue>
  ) => Effect.Effect<ReadonlyArray<A>, StorageError>
  /**
   * Runs `body` atomically. The body must be synchronous; if it fails, dies or
   * suspends, every write it made (SQL and alarm) is rolled back and its failure returned.
   */
  readonly transaction: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StorageError, R>
  /**
   * The physical alarm as last read or written, usable inside a transaction;
   * `undefined` until `readAlarm` or a write made it known.
   */
  readonly alarm: Effect.Effect<number | null | undefined>
  /** Sets the physical alarm. Inside a transaction it commits or rolls back with the body. */
  readonly setAlarm: (at: number) => Effect.Effect<void, StorageError>
  /** Deletes the physical alarm. Inside a transaction it commits or rolls back with the body. */
  readonly deleteAlarm: Effect.Effect<void, StorageError>
  /** Reads the physical alarm from the platform and remembers it. Not usable inside a transaction. */
  readonly readAlarm: Effect.Effect<number | null, StorageError>
  /**
   * Records that the platform consumed the alarm (it is cleared while `alarm()`
   * runs), without I/O. If the alarm was in fact still set, the next
   * reconciliation sets it again, which is harmless.
   */
  readonly alarmFired: Effect.Effect<void>
  /**
   * Runs `body` as one transaction whose in-memory follow-ups wait for its commit: inside it,
   * `afterCommit` collects instead of running, and the collected effects run (in order) once the
   * transaction committed; a rollback drops them with the writes. Nested calls join the outer one.
   * The body must be synchronous, as for `transaction`. `after` is given the follow-ups (all of
   * them, as one effect) once committed; by default they run at once, in this fiber.
   */
  readonly atomically: <A, E, R>(
    body: Effect.Effect<A, E, R>,
    after?: (followUps: Effect.Effect<void>) => Effect.Effect<void>
  ) => Effect.Effect<A, E | StorageError, R>
  /**
   * `effect` itself, or, while an `atomically` body runs, an effect that keeps it for after that
   * commit. Decided when called, so call it where the follow-up is due (inside the running effect).
   */
  readonly afterCommit: (effect: Effect.Effect<void>) => Effect.Effect<void>
}

/** The `StorageService` service's tag: provide it with `layer` over the object's `ctx.storage`. */
export const StorageService: Context.Tag<StorageService, StorageService> = Context.GenericTag<StorageService>(
  "durability/StorageService"
)

const TRANSACTION_SQL = /^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b/i

const describe = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const storageError = (operation: string, cause: unknown) =>
  new StorageError({ operation, message: `${operation} failed: ${describe(cause)}`, cause })

class Rollback {}

/**
 * `runSyncExit` gives up on a body that suspends, but its fiber stays alive and
 * would resume later, writing outside the rolled-back transaction: interrupt it.
 */
const interruptIfSuspended = (exit: Exit.Exit<unknown, unknown>): void => {
  if (Exit.isSuccess(exit)) return
  const defect = Cause.dieOption(exit.cause)
  if (Option.isSome(defect) && Runtime.isAsyncFiberException(defect.value)) {
    defect.value.fiber.unsafeInterruptAsFork(FiberId.none)
  }
}

/**
 * Builds the service over any object shaped like `ctx.storage`: the real one in
 * workerd, or the sql.js-backed fake from `durability/testing`.
 */
export const make = (storage: DurableObjectStorageLike): Effect.Effect<StorageService> =>
  Effect.sync(() => {
    let knownAlarm: number | null | undefined = undefined
    let depth = 0
    // The follow-ups of the `atomically` body running now; undefined outside one.
    let deferred: Array<Effect.Effect<void>> | undefined

    // A plain try, not `Effect.try({ try, catch })`: no closures made per statement (the hottest call).
    const exec: StorageService["exec"] = (query, bindings = []) =>
      Effect.suspend(() => {
        try {
          if (TRANSACTION_SQL.test(query)) {
            throw new Error("use transaction() instead of BEGIN/SAVEPOINT statements")
          }
          return Effect.succeed(storage.sql.exec(query, ...bindings).toArray() as ReadonlyArray<Row>)
        } catch (cause) {
          return Effect.fail(storageError("sql", cause))
        }
      })

    const query: StorageService["query"] = (schema, text, bindings) => {
      const decode = Schema.decodeUnknown(Schema.Array(schema))
      return Effect.flatMap(exec(text, bindings), (rows) =>
        Effect.mapError(decode(rows), (cause) => storageError("decode", cause)))
    }

    const transaction = <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<A, E | StorageError, R> =>
      Effect.flatMap(Effect.runtime<R>(), (runtime) =>
        Effect.suspend((): Effect.Effect<A, E | StorageError> => {
          const alarmBefore = knownAlarm
          let exit: Exit.Exit<A, E> | undefined
          depth++
          try {
            storage.transactionSync(() => {
              exit = Runtime.runSyncExit(runtime)(body)
              interruptIfSuspended(exit)
              if (Exit.isFailure(exit)) throw new Rollback()
            })
          } catch (cause) {
            knownAlarm = alarmBefore
            if (!(cause instanceof Rollback)) return Effect.fail(storageError("transaction", cause))
          } finally {
            depth--
          }
          return exit!
        }))

    const writeAlarm = (operation: string, next: number | null, write: () => Promise<void>) =>
      Effect.suspend(() => {
        const previous = knownAlarm
        let pending: Promise<void>
        try {
          pending = write()
        } catch (cause) {
          return Effect.fail(storageError(operation, cause))
        }
        knownAlarm = next
        if (depth > 0) {
          // The transaction commits or rolls the alarm back with the SQL writes. A write the
          // platform rejects is only reported later, after the commit: the alarm is then not what
          // we think. Write it again now (later writes still come after this one); if that fails
          // too, forget it, so the next reconciliation writes it instead of keeping a phantom.
          pending.catch(() => {
            if (knownAlarm !== next) return
            knownAlarm = undefined
            try {
              write().then(() => (knownAlarm ??= next), () => undefined)
            } catch {
              // Forgotten: the next reconciliation sets it.
            }
          })
          return Effect.void
        }
        return Effect.tryPromise({
          try: () => pending,
          catch: (cause) => {
            knownAlarm = previous
            return storageError(operation, cause)
          }
        })
      })

    const atomically = <A, E, R>(
      body: Effect.Effect<A, E, R>,
      after: (followUps: Effect.Effect<void>) => Effect.Effect<void> = (followUps) => followUps
    ): Effect.Effect<A, E | StorageError, R> =>
      Effect.suspend(() => {
        if (deferred !== undefined) return transaction(body)
        const collected: Array<Effect.Effect<void>> = []
        return Effect.flatMap(
          Effect.ensuring(
            transaction(Effect.suspend(() => {
              deferred = collected
              return body
            })),
            Effect.sync(() => (deferred = undefined))
          ),
          // Committed: only now may memory act on the writes (start, abort, tell).
          (value) => Effect.as(after(Effect.forEach(collected, (effect) => effect, { discard: true })), value)
        )
      })

    const afterCommit = (effect: Effect.Effect<void>): Effect.Effect<void> =>
      deferred === undefined ? effect : Effect.sync(() => void deferred?.push(effect))

    return StorageService.of({
      exec,
      atomically,
      afterCommit,
      query,
      transaction,
      alarm: Effect.sync(() => knownAlarm),
      setAlarm: (at) => writeAlarm("setAlarm", at, () => storage.setAlarm(at)),
      deleteAlarm: writeAlarm("deleteAlarm", null, () => storage.deleteAlarm()),
      readAlarm: Effect.tryPromise({
        try: () => storage.getAlarm(),
        catch: (cause) => storageError("getAlarm", cause)
      }).pipe(Effect.tap((at) => Effect.sync(() => (knownAlarm = at)))),
      alarmFired: Effect.sync(() => {
        knownAlarm = null
      })
    })
  })

/**
 * The service over any SQLite-backed storage: an object's `ctx.storage`, or the in-memory one of
 * `durability/testing` (keep that object to simulate eviction: a new layer over it sees every
 * committed row and the alarm).
 */
export const layer = (storage: DurableObjectStorageLike): Layer.Layer<StorageService> =>
  Layer.effect(StorageService, make(storage))

/** The service over a Durable Object's own storage (`ctx.storage`, SQLite-backed classes only). */
export const layerDurableObject = (ctx: { readonly storage: DurableObjectStorageLike }): Layer.Layer<StorageService> =>
  layer(ctx.storage)
