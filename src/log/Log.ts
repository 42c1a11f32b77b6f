/**
 * A retained, append-only log of records inside one Durable Object, addressed by offset. Records are
 * kept, not consumed: each consumer pulls pages (`read`) and owns its cursor (`commit`), so several
 * consumers replay the same history independently. Retention (`trim`) removes the oldest records by
 * age, count or bytes, flushing them first to cold storage when one is given, from where `read`
 * fetches them back for a consumer that lags. Opt-in leases let several workers share one consumer
 * name: each gets a distinct range, and the cursor moves only over an unbroken run of settled ranges.
 *
 * The log schedules nothing by itself: retention runs when the application calls `trim`, e.g. from a
 * named alarm that re-arms itself. Time is read from Effect's `Clock`.
 *
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { Log } from "durability/effect"
 *
 * const program = Effect.gen(function*() {
 *   const log = yield* Log.make<{ readonly topic: string }>({ retention: { maxRecords: 10_000 } })
 *   yield* log.append([{ body: { topic: "a" } }])
 *   const page = yield* log.read({ from: (yield* log.cursor("search")) ?? 0 })
 *   // … handle page.records …
 *   yield* log.commit("search", page.nextOffset)
 * })
 * ```
 * @packageDocumentation
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Background from "../engine/Background.js"
import * as Migrations from "../engine/Migrations.js"
import { StorageService } from "../engine/StorageService.js"
import * as InspectionRegistry from "../inspection/InspectionRegistry.js"
import * as RoutingLoad from "../routing/RoutingLoad.js"
import { InvalidInputError, InvalidOptionError, type MigrationError, type StorageError } from "../shared/Errors.js"
import * as Json from "../shared/json.js"
import { shown } from "../shared/validate.js"
import * as LogInspection from "./inspection.js"
import * as Leases from "./leasesTable.js"
import * as Records from "./recordsTable.js"
import * as LogSchema from "./schema.js"

/** The most a byte budget (`retention.maxBytes`) may be: 1 GiB, well inside one object's storage. */
export const maxLogBytes = 1_073_741_824

/** The log's migrations (capability "log"), in order. */
export const migrations: ReadonlyArray<Migrations.Migration> = LogSchema.migrations
/** The leases' migrations (capability "logLeases"), applied only by a log made with `leases`. */
export const leaseMigrations: ReadonlyArray<Migrations.Migration> = LogSchema.leaseMigrations

// ---------------------------------------------------------------------------------------------------------------
// Types

/** One record to append: its body (JSON) and, to make a retried append idempotent, its key. */
export interface LogAppendInput<Body = unknown> {
  /** The record's body; stored as JSON. */
  body: Body
  /**
   * A non-empty key: appending a key the object still holds returns its existing offset instead of a
   * new one. Default: a fresh UUID.
   */
  deduplicationKey?: string | undefined
}

/** A record as read back. */
export interface LogRecord<Body = unknown> {
  /** Its place in the log: offsets are contiguous from 0, in append order. */
  offset: number
  /** Its deduplication key (a UUID when none was given). */
  deduplicationKey: string
  /** The record's body, as appended. */
  body: Body
  /** When it was appended (epoch milliseconds). */
  appendedAt: number
}

/** A page of records and where the next one starts. */
export interface LogPage<Body = unknown> {
  /** The page's records, in offset order. */
  records: LogRecord<Body>[]
  /** Where the next read continues: the last record's offset + 1 (or where this read started, when empty). */
  nextOffset: number
  /** How many offsets remain after this page. */
  lag: number
}

/** Where a read starts and how many records it returns at most. */
export interface LogReadOptions {
  /** The first offset to read (a non-negative integer). */
  from: number
  /** At most this many records (a positive integer; capped at `maxBatchSize`, its default). */
  limit?: number | undefined
}

/** A run of records flushed to cold storage by `trim`. */
export interface LogSegment<Body = unknown> {
  /** The segment's first offset. */
  firstOffset: number
  /** The segment's last offset (inclusive). */
  lastOffset: number
  /** Its records, in offset order. */
  records: LogRecord<Body>[]
}

/** The log's window: what can still be read, what the object itself holds, and the next offset. */
export interface LogBounds {
  /** The oldest readable offset, counting indexed cold segments. */
  oldestOffset: number
  /** The lowest offset the object still holds (`nextOffset` when it holds none). */
  hotOffset: number
  /** The offset the next new record gets. */
  nextOffset: number
}

/** A range of records leased to one worker of a consumer. */
export interface LogLease<Body = unknown> {
  /** Its holder's id: `ack` or `nack` it. A reclaim gives the range a new one, fencing the old holder. */
  batchId: string
  /** The consumer the range is leased for. */
  consumer: string
  /** The range's records, in offset order (fetched back from cold storage if they were flushed). */
  records: LogRecord<Body>[]
  /** The range's first offset. */
  firstOffset: number
  /** The range's last offset (inclusive). */
  lastOffset: number
  /** 1 for a fresh range, one more each time it is claimed again. */
  attempt: number
  /** When the lease lapses and the range can be reclaimed (epoch milliseconds). */
  expiresAt: number
}

/** A leased range as stored, for operators (`leases`). */
export interface LogLeaseInfo {
  /** Its current holder's id. */
  readonly batchId: string
  /** The consumer it is leased for. */
  readonly consumer: string
  /** The range's first offset. */
  readonly firstOffset: number
  /** The range's last offset (inclusive). */
  readonly lastOffset: number
  /** Held (`active`), nacked (`pending`), done (`acked`), or given up as poison (`skipped`). */
  readonly state: "active" | "pending" | "acked" | "skipped"
  /** How many times it was claimed (1 for a fresh range). */
  readonly attempt: number
  /** When the current holder's lease lapses (epoch milliseconds; 0 once nacked). */
  readonly expiresAt: number
  /** When the range was first leased (epoch milliseconds). */
  readonly createdAt: number
}

/** Where `trim` flushes records and where `read` fetches them back. */
export interface LogColdStorage<Body = unknown> {
  /**
   * Stores a segment and returns a non-empty locator for it. Writes are at least once (an eviction
   * after the write and before the delete writes the records again): key it by its first offset.
   */
  readonly write: (segment: LogSegment<Body>) => Effect.Effect<string, unknown>
  /** The records of the segment at `locator`, or undefined when it is gone. */
  readonly read: (locator: string) => Effect.Effect<LogRecord<Body>[] | undefined, unknown>
}

/** How much the object keeps: records older, beyond the count, or beyond the bytes are trimmed. */
export interface LogRetention {
  /** Records appended longer ago than this expire. */
  readonly maxAge?: Duration.DurationInput | undefined
  /** At most this many records stay in the object. */
  readonly maxRecords?: number | undefined
  /** At most this many bytes of payload (UTF-8) stay in the object; at most `maxLogBytes`. */
  readonly maxBytes?: number | undefined
}

/** Leases for parallel workers of one consumer. */
export interface LogLeaseOptions<Body = unknown> {
  /** Ranges one consumer may hold at once (default 1). */
  readonly maxParallelism?: number | undefined
  /** How long a range is held before it can be reclaimed (default 30 seconds). */
  readonly leaseDuration?: Duration.DurationInput | undefined
  /**
   * With `onPoison`: a range claimed more times than this is skipped and handed to `onPoison`.
   * Without it, the range keeps being redelivered (blocking beats dropping).
   */
  readonly maxAttempts?: number | undefined
  /** Told of a range skipped as poison, after the skip is durable. A failure is reported, never thrown. */
  readonly onPoison?: ((lease: LogLease<Body>) => Effect.Effect<void, unknown>) | undefined
}

/** `make`'s options. */
export interface LogOptions<Body = unknown> {
  /** What the object keeps (default: everything; `trim` removes nothing). */
  readonly retention?: LogRetention | undefined
  /** Where trimmed records go, to stay readable (default: they are deleted). */
  readonly cold?: LogColdStorage<Body> | undefined
  /** Leases for parallel consumers (default off; the lease calls fail without it). */
  readonly leases?: LogLeaseOptions<Body> | undefined
  /** Caps an append, a read page, a trim step and a lease (default 100). */
  readonly maxBatchSize?: number | undefined
  /** The load telemetry to count appends in (default: the context's `RoutingLoad`, else a fresh one). */
  readonly routing?: RoutingLoad.Service | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Errors

/** A definite input problem (an empty or oversized batch, an empty key, a bad offset): nothing was written. */
export class LogAppendError extends Schema.TaggedError<LogAppendError>("durability/LogAppendError")("LogAppendError", {
  /** The argument at fault, e.g. `records[2].deduplicationKey`. */
  field: Schema.String,
  message: Schema.String
}) {}

/** The offset asked for was trimmed (and is not in an indexed cold segment). */
export class LogTruncatedError extends Schema.TaggedError<LogTruncatedError>("durability/LogTruncatedError")(
  "LogTruncatedError",
  {
    requestedOffset: Schema.Number,
    oldestOffset: Schema.Number,
    message: Schema.String
  }
) {}

/** The lease's batch id is not held any more (settled, reclaimed by another worker, or unknown). */
export class LogLeaseError extends Schema.TaggedError<LogLeaseError>("durability/LogLeaseError")("LogLeaseError", {
  batchId: Schema.String,
  message: Schema.String
}) {}

/** The cold storage's `write` or `read` failed; `cause` is its error. Nothing was deleted. */
export class LogColdStorageError extends Schema.TaggedError<LogColdStorageError>("durability/LogColdStorageError")(
  "LogColdStorageError",
  {
    operation: Schema.Literal("write", "read"),
    cause: Schema.Defect,
    message: Schema.String
  }
) {}

const truncated = (requestedOffset: number, oldestOffset: number) =>
  new LogTruncatedError({
    requestedOffset,
    oldestOffset,
    message: `Log offset ${requestedOffset} was trimmed; the oldest retained offset is ${oldestOffset}`
  })

const notHeld = (batchId: string) => new LogLeaseError({ batchId, message: `Log lease "${batchId}" is not held` })

const noLeases = () => new InvalidInputError({ field: "leases", kind: "type", message: "Leases require the leases option" })

// ---------------------------------------------------------------------------------------------------------------
// The service

/** What `append` answers: the offsets in input order, or the definite rejection; with the object's load. */
export type AppendResult = RoutingLoad.EnqueueResult<number[], LogAppendError>

/** A retained log of `Body` records. */
export interface LogService<Body = unknown> {
  /**
   * Appends records atomically: new keys get contiguous offsets in first-appearance order, a key the
   * object still holds gets its existing offset, duplicates in one batch share one. Bad input (an
   * empty or oversized batch, an empty key, a body that is not JSON) is answered `success: false`
   * with nothing written; a storage failure fails the effect (the records may have been written).
   */
  readonly append: (records: LogAppendInput<Body> | ReadonlyArray<LogAppendInput<Body>>) => Effect.Effect<AppendResult, StorageError>
  /** A page from `from` on, fetched back from cold storage when it was flushed. */
  readonly read: (
    options: LogReadOptions
  ) => Effect.Effect<LogPage<Body>, LogAppendError | LogTruncatedError | LogColdStorageError | StorageError>
  /** The log's window. */
  readonly bounds: Effect.Effect<LogBounds, StorageError>
  /** The consumer's committed offset (the next it will read), undefined before its first commit. */
  readonly cursor: (consumer: string) => Effect.Effect<number | undefined, LogAppendError | StorageError>
  /** Moves the consumer's cursor to `offset`; a regression changes nothing. */
  readonly commit: (consumer: string, offset: number) => Effect.Effect<void, LogAppendError | StorageError>
  /** Every consumer's cursor, by name. */
  readonly cursors: Effect.Effect<Record<string, number>, StorageError>
  /**
   * Applies retention in bounded steps (flushing each expiring run to cold storage, indexed before
   * it is deleted); returns how many records left the object. Cursors are ignored: a consumer that
   * falls behind gets `LogTruncatedError`, never a silent skip.
   */
  readonly trim: Effect.Effect<number, LogColdStorageError | InvalidInputError | StorageError>
  /** Drops the index entries of cold segments ending before `offset` (mirror a storage lifecycle rule); returns how many. */
  readonly forgetColdBefore: (offset: number) => Effect.Effect<number, LogAppendError | StorageError>
  /**
   * A range for one worker of `consumer`: a nacked or expired range first (under a new batch id), else
   * a fresh one after everything leased; undefined when there is nothing to lease, the consumer holds
   * `maxParallelism` ranges, or a poison range was just skipped.
   */
  readonly lease: (
    consumer: string,
    limit?: number
  ) => Effect.Effect<LogLease<Body> | undefined, LogAppendError | LogTruncatedError | LogColdStorageError | InvalidInputError | StorageError>
  /** Settles a held range; the cursor moves over the unbroken run of settled ranges from it. */
  readonly ack: (consumer: string, batchId: string) => Effect.Effect<void, LogAppendError | LogLeaseError | InvalidInputError | StorageError>
  /** Gives a held range back, to be leased again at once. */
  readonly nack: (consumer: string, batchId: string) => Effect.Effect<void, LogAppendError | LogLeaseError | InvalidInputError | StorageError>
  /** The consumer's stored ranges, in offset order. */
  readonly leases: (consumer: string) => Effect.Effect<ReadonlyArray<LogLeaseInfo>, LogAppendError | InvalidInputError | StorageError>
  /** The object's load; `pendingDeliveries` is the furthest-behind consumer's distance to the next offset. */
  readonly load: Effect.Effect<RoutingLoad.LoadSnapshot, StorageError>
}

/** The object's log (for programs that use one log of unknown bodies). */
export class Log extends Context.Tag("durability/Log")<Log, LogService>() {}

// ---------------------------------------------------------------------------------------------------------------
// Options

interface Settings<Body> {
  readonly maxBatchSize: number
  readonly retention: { readonly maxAgeMs?: number; readonly maxRecords?: number; readonly maxBytes?: number } | undefined
  readonly cold: LogColdStorage<Body> | undefined
  readonly leases: {
    readonly maxParallelism: number
    readonly leaseMs: number
    readonly maxAttempts: number | undefined
    readonly onPoison: ((lease: LogLease<Body>) => Effect.Effect<void, unknown>) | undefined
  } | undefined
}

const isPositiveInteger = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value > 0

const optionError = (field: string, message: string, kind: "range" | "type" = "range") =>
  new InvalidOptionError({ field, kind, message })

const positive = (field: string, value: unknown): Effect.Effect<number | undefined, InvalidOptionError> =>
  value === undefined || isPositiveInteger(value)
    ? Effect.succeed(value)
    : Effect.fail(optionError(field, `${field} must be a positive integer, got ${shown(value)}`))

/** A time option: a positive number of milliseconds or a Duration of at least one millisecond. */
const positiveMillis = (field: string, value: unknown): Effect.Effect<number | undefined, InvalidOptionError> => {
  if (value === undefined) return Effect.succeed(undefined)
  if (typeof value === "number") return positive(field, value)
  const decoded = typeof value === "bigint" ? Option.none() : Duration.decodeUnknown(value)
  if (Option.isSome(decoded) && Duration.isFinite(decoded.value)) {
    const millis = Math.round(Duration.toMillis(decoded.value))
    if (isPositiveInteger(millis)) return Effect.succeed(millis)
  }
  return Effect.fail(optionError(field, `${field} must be a finite Duration of at least 1 millisecond or a positive integer of milliseconds, got ${shown(value)}`))
}

const object = (field: string, value: unknown): Effect.Effect<Record<string, unknown> | undefined, InvalidOptionError> =>
  value === undefined
    ? Effect.succeed(undefined)
    : typeof value === "object" && value !== null && !Array.isArray(value)
    ? Effect.succeed(value as Record<string, unknown>)
    : Effect.fail(optionError(field, `${field} must be an object`, "type"))

const settings = <Body>(options: LogOptions<Body> | undefined): Effect.Effect<Settings<Body>, InvalidOptionError> =>
  Effect.gen(function*() {
    const given = (yield* object("options", options)) ?? {}
    const maxBatchSize = (yield* positive("maxBatchSize", given.maxBatchSize)) ?? 100
    const retentionGiven = yield* object("retention", given.retention)
    let retention: Settings<Body>["retention"]
    if (retentionGiven !== undefined) {
      const maxAgeMs = yield* positiveMillis("retention.maxAge", retentionGiven.maxAge)
      const maxRecords = yield* positive("retention.maxRecords", retentionGiven.maxRecords)
      const maxBytes = yield* positive("retention.maxBytes", retentionGiven.maxBytes)
      if (maxBytes !== undefined && maxBytes > maxLogBytes) {
        return yield* optionError("retention.maxBytes", `retention.maxBytes must not exceed ${maxLogBytes} bytes`)
      }
      retention = {
        ...(maxAgeMs === undefined ? {} : { maxAgeMs }),
        ...(maxRecords === undefined ? {} : { maxRecords }),
        ...(maxBytes === undefined ? {} : { maxBytes })
      }
    }
    const coldGiven = yield* object("cold", given.cold)
    if (coldGiven !== undefined) {
      for (const name of ["write", "read"] as const) {
        if (typeof coldGiven[name] !== "function") return yield* optionError(`cold.${name}`, `cold.${name} must be a function`, "type")
      }
    }
    const leasesGiven = yield* object("leases", given.leases)
    let leases: Settings<Body>["leases"]
    if (leasesGiven !== undefined) {
      const maxParallelism = (yield* positive("leases.maxParallelism", leasesGiven.maxParallelism)) ?? 1
      const leaseMs = (yield* positiveMillis("leases.leaseDuration", leasesGiven.leaseDuration)) ?? 30_000
      const maxAttempts = yield* positive("leases.maxAttempts", leasesGiven.maxAttempts)
      const onPoison = leasesGiven.onPoison
      if (onPoison !== undefined && typeof onPoison !== "function") {
        return yield* optionError("leases.onPoison", "leases.onPoison must be a function", "type")
      }
      leases = { maxParallelism, leaseMs, maxAttempts, onPoison: onPoison as LogLeaseOptions<Body>["onPoison"] }
    }
    return { maxBatchSize, retention, cold: coldGiven as LogColdStorage<Body> | undefined, leases }
  })

// ---------------------------------------------------------------------------------------------------------------
// Input checks

const appendError = (field: string, message: string) => new LogAppendError({ field, message })

const nonNegativeOffset = (field: string, value: unknown): Effect.Effect<number, LogAppendError> =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0
    ? Effect.succeed(value)
    : Effect.fail(appendError(field, `${field} must be a non-negative integer, got ${shown(value)}`))

const consumerName = (value: unknown): Effect.Effect<string, LogAppendError> =>
  typeof value === "string" && value.length > 0
    ? Effect.succeed(value)
    : Effect.fail(appendError("consumer", `consumer must be a non-empty string, got ${shown(value)}`))

const batchIdOf = (value: unknown): Effect.Effect<string, LogAppendError> =>
  typeof value === "string" && value.length > 0
    ? Effect.succeed(value)
    : Effect.fail(appendError("batchId", `batchId must be a non-empty string, got ${shown(value)}`))

const utf8 = new TextEncoder()

interface Checked {
  readonly key: string | undefined
  readonly payload: string
  readonly bytes: number
}

/** The batch checked and encoded, or the first problem, naming its field. */
const checkBatch = (input: unknown, maxBatchSize: number): Array<Checked> | LogAppendError => {
  const list = Array.isArray(input) ? input as ReadonlyArray<unknown> : [input]
  const field = Array.isArray(input) ? (i: number) => `records[${i}]` : () => "record"
  if (list.length === 0) return appendError("records", "append needs at least one record")
  if (list.length > maxBatchSize) {
    return appendError("records", `append takes at most ${maxBatchSize} records (maxBatchSize), got ${list.length}`)
  }
  const out: Array<Checked> = []
  for (const [i, item] of list.entries()) {
    if (typeof item !== "object" || item === null || Array.isArray(item)) {
      return appendError(field(i), `${field(i)} must be an object with a body`)
    }
    const { body, deduplicationKey } = item as { readonly body?: unknown; readonly deduplicationKey?: unknown }
    if (deduplicationKey !== undefined && (typeof deduplicationKey !== "string" || deduplicationKey.length === 0)) {
      return appendError(`${field(i)}.deduplicationKey`, `${field(i)}.deduplicationKey must be a non-empty string, got ${shown(deduplicationKey)}`)
    }
    const json = Json.check(body)
    if (!json.ok) return appendError(`${field(i)}.body`, `${field(i)}.body must be JSON: ${json.reason.replace(/^value/, "body")}`)
    const payload = Json.encode(body)
    const oversized = Json.oversizedBytes(payload)
    if (oversized !== undefined) return appendError(`${field(i)}.body`, `${field(i)}.body ${Json.tooLarge(oversized)}`)
    out.push({ key: deduplicationKey as string | undefined, payload, bytes: utf8.encode(payload).byteLength })
  }
  return out
}

// ---------------------------------------------------------------------------------------------------------------
// make

const toRecord = <Body>(stored: Records.StoredRecord): LogRecord<Body> => ({
  offset: stored.offset,
  deduplicationKey: stored.key,
  body: Json.decode(stored.payload) as Body,
  appendedAt: stored.appendedAt
})

const boundsOf = (edges: Records.Edges): LogBounds => {
  const hotOffset = edges.lowestHot ?? edges.nextOffset
  return { oldestOffset: edges.lowestCold === undefined ? hotOffset : Math.min(edges.lowestCold, hotOffset), hotOffset, nextOffset: edges.nextOffset }
}

const coldError = (operation: "write" | "read", cause: unknown) =>
  new LogColdStorageError({
    operation,
    cause,
    message: `The log's cold storage failed to ${operation}: ${cause instanceof Error ? cause.message : shown(cause)}`
  })

/**
 * Applies the log's migrations (and the leases' when `leases` is given) and makes the log. Fails with
 * `InvalidOptionError` naming the option at fault before anything touches storage.
 */
export const make = <Body = unknown>(
  options?: LogOptions<Body>
): Effect.Effect<LogService<Body>, InvalidOptionError | MigrationError | StorageError, StorageService> =>
  Effect.gen(function*() {
    const config = yield* settings(options)
    const storage = yield* StorageService
    const routing = options?.routing ??
      Option.getOrUndefined(yield* Effect.serviceOption(RoutingLoad.RoutingLoad)) ??
      (yield* RoutingLoad.make)
    const background = Option.getOrUndefined(yield* Effect.serviceOption(Background.Background))
    if (!(yield* Migrations.isCurrent(LogSchema.CAPABILITY, LogSchema.migrations))) {
      yield* Migrations.migrate(LogSchema.CAPABILITY, LogSchema.migrations)
    }
    if (config.leases !== undefined && !(yield* Migrations.isCurrent(LogSchema.LEASES_CAPABILITY, LogSchema.leaseMigrations))) {
      yield* Migrations.migrate(LogSchema.LEASES_CAPABILITY, LogSchema.leaseMigrations)
    }
    yield* InspectionRegistry.register(LogInspection.source(storage, config.leases !== undefined))
    // One trim at a time in this isolate: two would flush the same records twice.
    const trimming = yield* Effect.makeSemaphore(1)
    const report = (event: string, details: Record<string, unknown>) =>
      background === undefined
        ? Effect.logError(event).pipe(Effect.annotateLogs({ event, ...details }))
        : background.report(event, details)

    const bounds = Effect.map(Records.edges(storage), boundsOf)

    const append = (input: LogAppendInput<Body> | ReadonlyArray<LogAppendInput<Body>>) =>
      routing.measure(
        "inbound",
        Effect.gen(function*() {
          const checked = checkBatch(input, config.maxBatchSize)
          if (checked instanceof LogAppendError) {
            return { success: false as const, error: checked, load: yield* load }
          }
          const now = yield* Clock.currentTimeMillis
          const { backlog, offsets } = yield* storage.transaction(Effect.gen(function*() {
            const given = [...new Set(checked.flatMap((record) => record.key === undefined ? [] : [record.key]))]
            const held = given.length === 0 ? new Map<string, number>() : yield* Records.offsetsOfKeys(storage, given)
            // The new records, in first-appearance order; a key repeated in the batch is one record.
            const fresh: Array<Checked & { readonly key: string }> = []
            const slotOf = new Map<string, number>()
            const slots = checked.map((record) => {
              if (record.key !== undefined && held.has(record.key)) return { held: held.get(record.key)! }
              const key = record.key ?? crypto.randomUUID()
              const known = slotOf.get(key)
              if (known !== undefined) return { fresh: known }
              slotOf.set(key, fresh.length)
              fresh.push({ ...record, key })
              return { fresh: fresh.length - 1 }
            })
            if (fresh.length === 0) return { offsets: slots.map((slot) => (slot as { held: number }).held), backlog: undefined }
            const { backlog, first } = yield* Records.reserve(storage, fresh.length, fresh.reduce((sum, record) => sum + record.bytes, 0))
            yield* Records.insert(
              storage,
              fresh.map((record, i) => ({ offset: first + i, key: record.key, payload: record.payload, bytes: record.bytes, appendedAt: now }))
            )
            return { offsets: slots.map((slot) => "held" in slot ? slot.held : first + slot.fresh), backlog }
          }))
          // The backlog came with the reservation; an append of keys already held reads it.
          const snapshot = backlog === undefined ? yield* load : yield* routing.snapshot(backlog)
          return { success: true as const, value: offsets, load: snapshot }
        })
      ).pipe(Effect.withSpan("Log.append"))

    /** The records of the cold segment holding `from`, from it on, or the truncation. */
    const rehydrate = (from: number, limit: number, hotOffset: number) =>
      Effect.gen(function*() {
        const segment = yield* Records.segmentHolding(storage, from)
        const lost = truncated(from, Math.max(from + 1, hotOffset))
        if (segment === undefined || config.cold === undefined) return yield* lost
        const records = yield* config.cold.read(segment.locator).pipe(Effect.mapError((cause) => coldError("read", cause)))
        if (records === undefined || !Array.isArray(records)) return yield* lost
        const byOffset = new Map<number, LogRecord<Body>>()
        for (const record of records) {
          if (typeof record === "object" && record !== null) byOffset.set(record.offset, record)
        }
        // The contiguous run from `from`: a record the store lost is a truncation when it is read, never a skip.
        const kept: Array<LogRecord<Body>> = []
        for (let at = from; at <= segment.lastOffset && at < hotOffset && kept.length < limit; at++) {
          const record = byOffset.get(at)
          if (record === undefined) break
          kept.push(record)
        }
        if (kept.length === 0) return yield* lost
        return kept
      })

    const readFrom = (from: number, limit: number) =>
      Effect.gen(function*() {
        const edges = yield* Records.edges(storage)
        const window = boundsOf(edges)
        if (from < window.oldestOffset) return yield* truncated(from, window.oldestOffset)
        const records = from < window.hotOffset
          ? yield* rehydrate(from, limit, window.hotOffset)
          : (yield* Records.page(storage, from, limit)).map((stored) => toRecord<Body>(stored))
        const last = records.at(-1)
        const nextOffset = last === undefined ? Math.max(from, window.nextOffset) : last.offset + 1
        return { records, nextOffset, lag: Math.max(0, window.nextOffset - nextOffset) }
      })

    const read = Effect.fn("Log.read")(function*(options: LogReadOptions) {
      if (typeof options !== "object" || options === null) return yield* appendError("options", "read needs { from, limit? }")
      const from = yield* nonNegativeOffset("from", options.from)
      const limit = options.limit === undefined
        ? config.maxBatchSize
        : isPositiveInteger(options.limit)
        ? Math.min(options.limit, config.maxBatchSize)
        : yield* appendError("limit", `limit must be a positive integer, got ${shown(options.limit)}`)
      return yield* readFrom(from, limit)
    })

    const cursor = (consumer: string) =>
      Effect.flatMap(consumerName(consumer), (name) => Records.cursor(storage, name)).pipe(Effect.withSpan("Log.cursor"))

    const commit = Effect.fn("Log.commit")(function*(consumer: string, offset: number) {
      const name = yield* consumerName(consumer)
      const at = yield* nonNegativeOffset("offset", offset)
      yield* Records.commit(storage, name, at, yield* Clock.currentTimeMillis)
    })

    const cursors = Effect.map(Records.cursors(storage), (rows) => {
      const out: Record<string, number> = {}
      for (const row of rows) out[row.consumer] = row.offset
      return out
    })

    const load = Effect.flatMap(Records.backlog(storage), routing.snapshot)

    /** One step of retention: the leading run of expiring records among the oldest page, flushed then deleted. */
    const trimStep = (retention: NonNullable<Settings<Body>["retention"]>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const edges = yield* Records.edges(storage)
        const oldest = yield* Records.page(storage, edges.lowestHot ?? edges.nextOffset, config.maxBatchSize)
        const hotCount = edges.lowestHot === undefined ? 0 : edges.nextOffset - edges.lowestHot
        const countExcess = retention.maxRecords === undefined ? 0 : hotCount - retention.maxRecords
        let bytesExcess = retention.maxBytes === undefined ? 0 : edges.totalBytes - retention.maxBytes
        const ageCutoff = retention.maxAgeMs === undefined ? undefined : now - retention.maxAgeMs
        let run = 0
        for (const [index, record] of oldest.entries()) {
          const expires = index < countExcess || bytesExcess > 0 || (ageCutoff !== undefined && record.appendedAt < ageCutoff)
          if (!expires) break
          bytesExcess -= record.bytes
          run += 1
        }
        if (run === 0) return { removed: 0, done: true }
        const expiring = oldest.slice(0, run)
        const firstOffset = expiring[0]!.offset
        const lastOffset = expiring[run - 1]!.offset
        const bytes = expiring.reduce((sum, record) => sum + record.bytes, 0)
        let locator: string | undefined
        if (config.cold !== undefined) {
          const segment: LogSegment<Body> = { firstOffset, lastOffset, records: expiring.map((stored) => toRecord<Body>(stored)) }
          const written = yield* config.cold.write(segment).pipe(Effect.mapError((cause) => coldError("write", cause)))
          if (typeof written !== "string" || written.length === 0) {
            return yield* new InvalidInputError({
              field: "cold.write",
              kind: "type",
              message: `cold.write must return a non-empty locator string, got ${shown(written)}`
            })
          }
          locator = written
        }
        const flushedAt = yield* Clock.currentTimeMillis
        // The index entry and the delete commit together: an offset leaves the object only once its segment is indexed.
        const removed = yield* storage.transaction(Effect.gen(function*() {
          if (locator !== undefined) yield* Records.indexSegment(storage, { firstOffset, lastOffset, locator, bytes, flushedAt })
          return yield* Records.removeRange(storage, firstOffset, lastOffset)
        }))
        return { removed, done: removed < run }
      })

    const trim = trimming.withPermits(1)(Effect.gen(function*() {
      const retention = config.retention
      if (retention === undefined) return 0
      let removed = 0
      for (;;) {
        const step = yield* trimStep(retention)
        removed += step.removed
        if (step.done) return removed
      }
    })).pipe(Effect.withSpan("Log.trim"))

    const forgetColdBefore = (offset: number) =>
      Effect.flatMap(nonNegativeOffset("offset", offset), (at) => Records.forgetSegmentsBefore(storage, at)).pipe(
        Effect.withSpan("Log.forgetColdBefore")
      )

    // ---- leases

    const leaseSettings = config.leases === undefined ? Effect.fail(noLeases()) : Effect.succeed(config.leases)

    /** The records of a leased range, from the object or fetched back from cold storage. */
    const recordsOf = (first: number, last: number) =>
      Effect.gen(function*() {
        const out: Array<LogRecord<Body>> = []
        let from = first
        while (from <= last) {
          const page = yield* readFrom(from, Math.min(config.maxBatchSize, last - from + 1))
          const inRange = page.records.filter((record) => record.offset <= last)
          if (inRange.length === 0) break
          out.push(...inRange)
          from = inRange.at(-1)!.offset + 1
        }
        return out
      })

    const leaseOf = (row: Leases.LeaseRow, records: Array<LogRecord<Body>>): LogLease<Body> => ({
      batchId: row.batchId,
      consumer: row.consumer,
      records,
      firstOffset: row.firstOffset,
      lastOffset: row.lastOffset,
      attempt: row.attempt,
      expiresAt: row.expiresAt
    })

    const lease = Effect.fn("Log.lease")(function*(consumer: string, limit?: number) {
      const leasing = yield* leaseSettings
      const name = yield* consumerName(consumer)
      const size = limit === undefined
        ? config.maxBatchSize
        : isPositiveInteger(limit)
        ? Math.min(limit, config.maxBatchSize)
        : yield* appendError("limit", `limit must be a positive integer, got ${shown(limit)}`)
      const now = yield* Clock.currentTimeMillis
      const expiresAt = now + leasing.leaseMs
      const poisonable = leasing.maxAttempts !== undefined && leasing.onPoison !== undefined
      // First, reclaim: a nacked range, or one whose holder's lease lapsed, under a fresh batch id.
      const reclaimed = yield* storage.transaction(Effect.gen(function*() {
        const row = yield* Leases.reclaimable(storage, name, now)
        if (row === undefined) return undefined
        const attempt = row.attempt + 1
        const poison = poisonable && attempt > leasing.maxAttempts!
        const next: Leases.LeaseRow = {
          ...row,
          batchId: crypto.randomUUID(),
          state: poison ? "skipped" : "active",
          attempt,
          expiresAt
        }
        const moved = yield* Leases.reassign(storage, { batchId: row.batchId, nextBatchId: next.batchId, state: next.state as "active" | "skipped", expiresAt })
        return moved ? next : undefined
      }))
      if (reclaimed !== undefined) {
        if (reclaimed.state === "skipped") {
          // The skip is durable already; the handler is told after, and its failure is reported, not thrown.
          const records = yield* recordsOf(reclaimed.firstOffset, reclaimed.lastOffset).pipe(Effect.orElseSucceed(() => []))
          yield* Effect.suspend(() => leasing.onPoison!(leaseOf(reclaimed, records))).pipe(
            Effect.catchAllCause((cause) =>
              report("durability.log.poison_handler.failed", {
                consumer: name,
                batchId: reclaimed.batchId,
                firstOffset: reclaimed.firstOffset,
                lastOffset: reclaimed.lastOffset,
                error: Background.serializeError(Cause.squash(cause))
              })
            )
          )
          return undefined
        }
        return leaseOf(reclaimed, yield* recordsOf(reclaimed.firstOffset, reclaimed.lastOffset))
      }
      // Otherwise a fresh range after everything this consumer leased or committed. The page may come from
      // cold storage (a wait, during which other calls run): the range is recorded only if the allocation is
      // still the one it started from.
      for (let tries = 0; tries < 5; tries++) {
        const start = yield* Effect.gen(function*() {
          if ((yield* Leases.heldCount(storage, name, now)) >= leasing.maxParallelism) return undefined
          const window = yield* bounds
          const allocated = yield* Leases.allocation(storage, name)
          const committed = yield* Records.cursor(storage, name)
          return { from: Math.max(window.oldestOffset, committed ?? 0, allocated ?? 0), allocated }
        })
        if (start === undefined) return undefined
        const page = yield* readFrom(start.from, size)
        if (page.records.length === 0) return undefined
        const row: Leases.LeaseRow = {
          batchId: crypto.randomUUID(),
          consumer: name,
          firstOffset: page.records[0]!.offset,
          lastOffset: page.records.at(-1)!.offset,
          state: "active",
          attempt: 1,
          expiresAt,
          createdAt: now
        }
        const opened = yield* storage.transaction(Effect.gen(function*() {
          if ((yield* Leases.allocation(storage, name)) !== start.allocated) return false
          if ((yield* Leases.heldCount(storage, name, now)) >= leasing.maxParallelism) return false
          yield* Leases.open(storage, row)
          return true
        }))
        if (opened) return leaseOf(row, page.records)
      }
      return undefined
    })

    const ack = Effect.fn("Log.ack")(function*(consumer: string, batchId: string) {
      yield* leaseSettings
      const name = yield* consumerName(consumer)
      const id = yield* batchIdOf(batchId)
      const now = yield* Clock.currentTimeMillis
      yield* storage.transaction(Effect.gen(function*() {
        if (!(yield* Leases.settle(storage, name, id, "acked"))) return yield* notHeld(id)
        // The cursor moves over the unbroken run of settled ranges from it, never past one in flight.
        const start = (yield* Records.cursor(storage, name)) ?? 0
        let at = start
        for (const row of yield* Leases.from(storage, name, start)) {
          if (row.firstOffset > at || (row.state !== "acked" && row.state !== "skipped")) break
          at = Math.max(at, row.lastOffset + 1)
        }
        if (at > start) yield* Records.commit(storage, name, at, now)
        // Settled ranges the cursor passed (this walk's, or a commit's made by hand) are done with.
        yield* Leases.dropPassed(storage, name, at)
      }))
    })

    const nack = Effect.fn("Log.nack")(function*(consumer: string, batchId: string) {
      yield* leaseSettings
      const name = yield* consumerName(consumer)
      const id = yield* batchIdOf(batchId)
      if (!(yield* Leases.settle(storage, name, id, "pending"))) return yield* notHeld(id)
    })

    const leases = (consumer: string) =>
      Effect.gen(function*() {
        yield* leaseSettings
        return yield* Leases.list(storage, yield* consumerName(consumer))
      })

    return {
      append,
      read,
      bounds,
      cursor,
      commit,
      cursors,
      trim,
      forgetColdBefore,
      lease,
      ack,
      nack,
      leases,
      load
    } satisfies LogService<Body>
  })

/** Provides the object's `Log` (bodies of unknown type) made with `options`. */
export const layer = (options?: LogOptions<unknown>): Layer.Layer<Log, InvalidOptionError | MigrationError | StorageError, StorageService> =>
  Layer.effect(Log, make(options))

/**
 * Applies (default: latest) or reverts (`null`: all) the log's own migrations (capability "log"); the
 * leases' are applied by `make` when a log with leases is made.
 */
export const migrate = (target?: string | null): Effect.Effect<Migrations.MigrationResult, MigrationError | StorageError, StorageService> =>
  Migrations.migrate(LogSchema.CAPABILITY, LogSchema.migrations, target)
