/**
 * `DurabilityLog`: a retained, offset-addressed log for promise-style code (`Log` in
 * `durability/effect`, which it wraps).
 */
import * as Effect from "effect/Effect"
import * as Log from "../log/Log.js"
import type { DurabilityContext } from "../shared/platform.js"
import { fromPromise } from "../shared/plain.js"
import { attach, migrateWith, type MigrationResult, type SchedulerAttachment } from "./attachment.js"
import { LogAppendError } from "./errors.js"
import type { ObjectRuntime } from "./objectRuntime.js"
import { RoutingLoad, serviceOf } from "./RoutingLoad.js"
import type { EnqueueResult, LoadSnapshot } from "./RoutingLoad.js"

export type {
  LogAppendInput,
  LogBounds,
  LogLease,
  LogLeaseInfo,
  LogPage,
  LogReadOptions,
  LogRecord,
  LogSegment
} from "../log/Log.js"

/** The most a byte budget (`retention.maxBytes`) may be: 1 GiB. */
export const maxLogBytes: number = Log.maxLogBytes
/** The log's migrations (capability "log"). */
export const durabilityLogMigrations = Log.migrations
/** The leases' migrations (capability "logLeases"), applied when a log is made with `leases`. */
export const durabilityLogLeaseMigrations = Log.leaseMigrations

/** Where `trim` flushes expiring records, and where `read` fetches them back. */
export interface LogColdStorage<Body = unknown> {
  /**
   * Stores a segment; resolves to a non-empty locator. Writes are at least once (an eviction between
   * the write and the delete writes the records again): key it by `firstOffset` and refuse to overwrite.
   */
  write(segment: Log.LogSegment<Body>): Promise<string>
  /** The records stored at `locator`, or undefined when they are gone. */
  read(locator: string): Promise<Log.LogRecord<Body>[] | undefined>
}

/** What the object keeps; `trim` removes the rest (nothing without it). */
export interface LogRetentionOptions {
  /** Records appended longer ago than this many milliseconds expire. */
  maxAgeMs?: number | undefined
  /** At most this many records stay in the object. */
  maxRecords?: number | undefined
  /** At most this many bytes of payload stay in the object; at most `maxLogBytes`. */
  maxBytes?: number | undefined
}

/** Leases for several workers of one consumer. */
export interface LogLeasesOptions<Body = unknown> {
  /** Ranges one consumer may hold at once (default 1). */
  maxParallelism?: number | undefined
  /** How long a range is held before another worker can reclaim it, in milliseconds (default 30 000). */
  leaseMs?: number | undefined
  /** With `onPoison`: a range claimed more times than this is skipped and handed to `onPoison`. */
  maxAttempts?: number | undefined
  /** Told of a range skipped as poison, after the skip is stored; a failure is reported, never thrown. */
  onPoison?: ((lease: Log.LogLease<Body>) => void | Promise<void>) | undefined
}

/** `DurabilityLog`'s options. */
export interface DurabilityLogOptions<Body = unknown> {
  /** What the object keeps (default: everything). */
  retention?: LogRetentionOptions | undefined
  /** Where trimmed records go to stay readable (default: they are deleted). */
  cold?: LogColdStorage<Body> | undefined
  /** Leases for parallel consumers (default off). */
  leases?: LogLeasesOptions<Body> | undefined
  /** The load telemetry appends are counted in (default: a fresh one). */
  routing?: RoutingLoad | undefined
  /** Caps an append, a read page, a trim step and a lease (default 100). */
  maxBatchSize?: number | undefined
  /**
   * The reference's storage choice, typed as the reference's: only `"sqlite"` (the default, and the only backend
   * here) is accepted; `"kv"` throws a `TypeError`.
   */
  storageBackend?: "sqlite" | "kv" | undefined
}

/** What `new DurabilityLog(...)` takes: its options and where it attaches. */
export type DurabilityLogConfig<Body = unknown> = DurabilityLogOptions<Body> & SchedulerAttachment

const optional = <A>(value: A | undefined, f: (value: A) => unknown): unknown => value === undefined ? undefined : f(value)

/** The promise options as the Effect module's (callbacks as effects, milliseconds as they are). */
const toEffectOptions = <Body>(config: DurabilityLogConfig<Body>): Log.LogOptions<Body> => {
  const given = config as DurabilityLogOptions<Body>
  const retention = given.retention
  const cold = given.cold
  const leases = given.leases
  const options: Record<string, unknown> = {
    maxBatchSize: given.maxBatchSize,
    retention: retention === undefined || typeof retention !== "object" || retention === null ? retention : {
      maxAge: retention.maxAgeMs,
      maxRecords: retention.maxRecords,
      maxBytes: retention.maxBytes
    },
    cold: cold === undefined || typeof cold !== "object" || cold === null ? cold : {
      write: optional(cold.write, () => (segment: Log.LogSegment<Body>) => fromPromise(() => cold.write(segment))),
      read: optional(cold.read, () => (locator: string) => fromPromise(() => cold.read(locator)))
    },
    leases: leases === undefined || typeof leases !== "object" || leases === null ? leases : {
      maxParallelism: leases.maxParallelism,
      leaseDuration: leases.leaseMs,
      maxAttempts: leases.maxAttempts,
      onPoison: typeof leases.onPoison === "function"
        ? (lease: Log.LogLease<Body>) => fromPromise(() => leases.onPoison!(lease))
        : leases.onPoison
    },
    routing: given.routing === undefined ? undefined : serviceOf(given.routing)
  }
  return options as Log.LogOptions<Body>
}

/** The Effect API's failures as the promise face throws them: a cold storage's own error as it was thrown. */
const unwrap = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, unknown> =>
  Effect.catchIf(
    effect as Effect.Effect<A, unknown>,
    (error): error is Log.LogColdStorageError => error instanceof Log.LogColdStorageError,
    (error) => Effect.die(error.cause)
  )

/**
 * A retained, append-only log of records inside one Durable Object, addressed by offset. Records are
 * retained, not consumed on acknowledgement: consumers pull pages and own their cursors. `trim`
 * applies retention (flushing to `cold` storage first, when given); `read` fetches flushed records
 * back. Nothing runs on its own schedule: call `trim` from a named alarm.
 */
export class DurabilityLog<Body = unknown> {
  readonly #runtime: ObjectRuntime
  readonly #log: Log.LogService<Body>
  readonly #routing: RoutingLoad

  constructor(config: DurabilityLogConfig<Body>) {
    if (typeof config !== "object" || config === null) throw new TypeError("DurabilityLog needs a config object")
    const { runtime } = attach(config)
    this.#runtime = runtime
    this.#routing = (config as DurabilityLogOptions<Body>).routing ?? new RoutingLoad()
    const options = toEffectOptions({ ...config, routing: this.#routing })
    this.#log = runtime.runSync(Log.make<Body>(options))
  }

  #run<A, E>(effect: Effect.Effect<A, E>): Promise<A> {
    return this.#runtime.run(unwrap(effect))
  }

  /**
   * Appends one record or a batch atomically; resolves to the offsets in input order. A key the object
   * still holds gets its existing offset; duplicate keys in one batch share one. Definite input
   * problems resolve `success: false` with a `LogAppendError` (nothing written); a storage failure
   * rejects (the records may have been written).
   */
  append(records: Log.LogAppendInput<Body> | Log.LogAppendInput<Body>[]): Promise<EnqueueResult<number[], Error>> {
    return this.#run(Effect.map(this.#log.append(records), (result): EnqueueResult<number[], Error> =>
      result.success ? result : { success: false, error: new LogAppendError(result.error.message, { cause: result.error }), load: result.load }))
  }

  /** A page from `from` on (rehydrated from cold storage below the hot window); rejects with `LogTruncatedError` below what is retained. */
  read(options: Log.LogReadOptions): Promise<Log.LogPage<Body>> {
    return this.#run(this.#log.read(options))
  }

  /** The log's window: oldest readable, lowest in the object, next offset. */
  bounds(): Promise<Log.LogBounds> {
    return this.#run(this.#log.bounds)
  }

  /** The consumer's committed offset, undefined before its first commit. */
  cursor(consumer: string): Promise<number | undefined> {
    return this.#run(this.#log.cursor(consumer))
  }

  /** Moves the consumer's cursor forward to `offset` (a regression is ignored). */
  commit(consumer: string, offset: number): Promise<void> {
    return this.#run(this.#log.commit(consumer, offset))
  }

  /** Every committed cursor, by consumer name. */
  cursors(): Promise<Record<string, number>> {
    return this.#run(this.#log.cursors)
  }

  /** Applies retention; resolves to how many records left the object. A failed cold write rejects and keeps the records. */
  trim(): Promise<number> {
    return this.#run(this.#log.trim)
  }

  /** Drops the index entries of cold segments ending before `offset`; resolves to how many. */
  forgetColdBefore(offset: number): Promise<number> {
    return this.#run(this.#log.forgetColdBefore(offset))
  }

  /** A range of records for one worker of `consumer`, or undefined (see `Log.LogService.lease`). Needs `leases`. */
  lease(consumer: string, limit?: number): Promise<Log.LogLease<Body> | undefined> {
    return this.#run(this.#log.lease(consumer, limit))
  }

  /** Settles a held range (rejects with `LogLeaseError` when it is not held); the cursor moves over settled ranges. */
  ack(consumer: string, batchId: string): Promise<void> {
    return this.#run(this.#log.ack(consumer, batchId))
  }

  /** Gives a held range back, to be leased again at once under a new batch id. */
  nack(consumer: string, batchId: string): Promise<void> {
    return this.#run(this.#log.nack(consumer, batchId))
  }

  /** The consumer's stored lease ranges, for operators. */
  leases(consumer: string): Promise<ReadonlyArray<Log.LogLeaseInfo>> {
    return this.#run(this.#log.leases(consumer))
  }

  /** The object's load; `outbound.pendingDeliveries` is the furthest-behind consumer's backlog. */
  load(): Promise<LoadSnapshot> {
    return this.#run(this.#log.load)
  }

  /** Applies (default: latest) or reverts (`null`: all) the log's migrations (capability "log"). */
  static migrate(context: DurabilityContext, target?: string | null): MigrationResult {
    return migrateWith(context, Log.migrate, target)
  }
}
