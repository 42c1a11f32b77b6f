/**
 * A queue's options beyond retries and timeouts, checked once at construction with messages that
 * name the field (`queues.email.rateLimit.capacity`).
 * @internal
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Time from "../shared/duration.js"
import { InvalidOptionError } from "../shared/Errors.js"
import * as Json from "../shared/json.js"
import { isPositiveInteger, shown } from "../shared/validate.js"

/** A token bucket: `capacity` tokens at most, refilled continuously at `refillPerSecond`. */
export interface RateLimit {
  /** Tokens the bucket holds at most: the largest burst of starts. */
  readonly capacity: number
  /** Tokens added per second: the sustained rate of starts. */
  readonly refillPerSecond: number
}

export interface GroupRateLimit<P = unknown> extends RateLimit {
  /** The group a job's payload belongs to (e.g. its tenant): one bucket per group. */
  readonly key: (payload: P) => string
}

/**
 * A queue's concurrency per key (e.g. per customer): at most `limit` of its jobs with one key run at
 * once, `total` of the queue's jobs in all. `key` is computed from the payload when the job is added
 * and stored with it, so the limit holds across evictions and for external workers' leases.
 */
export interface KeyedConcurrency<P = unknown> {
  /**
   * The key a job's payload belongs to (e.g. its tenant); called once, at `add`. (A method: a queue's options
   * typed for any payload still fit a queue of one.)
   */
  key(payload: P): string
  /** Jobs with one key running (or leased) at once: 1 makes each key a singleton. */
  readonly limit: number
  /** Jobs of the queue running at once whatever their keys, as a plain `concurrency`. Default: no own limit. */
  readonly total?: number | undefined
}

/**
 * How many finished jobs a queue keeps: the newest `count`, none older than `ageMs`. `Time`: a
 * Duration or milliseconds on the Effect face, milliseconds (`Retention<number>`) on the promise face.
 */
export interface Retention<Time = Duration.DurationInput> {
  /** Keep at most this many (the newest). */
  readonly count?: number | undefined
  /** Keep none older than this (a Duration or milliseconds on the Effect face). */
  readonly ageMs?: Time | undefined
}

/** A queue's own options: its concurrency, rate limits, retention, logs and how its jobs are processed. */
export interface QueueOptions {
  /**
   * Jobs of this queue running at once, inside the scheduler's shared permits; or a limit per key of the
   * payload (`{ key, limit, total? }`). Default: no own limit.
   */
  readonly concurrency?: number | KeyedConcurrency<never> | undefined
  /** A token bucket for the whole queue: a job starts only with a token, so bursts are bounded. */
  readonly rateLimit?: RateLimit | undefined
  /**
   * A token bucket per group (e.g. per tenant, from the payload), so one group cannot use up the queue's
   * rate.
   */
  readonly groupRateLimit?: GroupRateLimit<never> | undefined
  /** How many completed jobs to keep (the newest `count`, none older than `ageMs`). Default: all. */
  readonly removeOnComplete?: Retention | undefined
  /** How many failed jobs to keep, as for `removeOnComplete`. */
  readonly removeOnFail?: Retention | undefined
  /** List jobs that fail for good under `deadLetters` (default false). */
  readonly deadLetter?: boolean | undefined
  /** Log lines kept per job, the newest (default 100). */
  readonly keepLogs?: number | undefined
  /** The largest payload as stored JSON (default 131 072, a Cloudflare Queues message; at most 2 MB). */
  readonly maxPayloadBytes?: number | undefined
  /**
   * `"external"`: the queue has no handler here; its due jobs wait to be leased (`lease`) by workers
   * elsewhere, who settle them with the lease's fencing token. Default `"inline"`.
   */
  readonly processing?: "inline" | "external" | Transport | undefined
  /** An external queue's default lease: a Duration or milliseconds, 1 second to 1 day (default 30 seconds). */
  readonly leaseMs?: Duration.DurationInput | undefined
  /** An external queue's leases a job may let expire before it fails (`JobStalledError`); default 1. */
  readonly maxStalled?: number | undefined
  /** Run due jobs in batches (`Jobs.batchQueue`): up to `size` at once, waiting up to `waitMs` for more. */
  readonly batch?: Batch | undefined
}

/**
 * A batched queue's batches. `Time`: a Duration or milliseconds on the Effect face, milliseconds
 * (`Batch<number>`) on the promise face.
 */
export interface Batch<Time = Duration.DurationInput> {
  /** The most jobs one call of the handler takes (1 to `MAX_BATCH_SIZE`). */
  readonly size: number
  /**
   * When fewer than `size` jobs are due, how long they wait (durably) for more before running what is
   * there: at most 1 day; default 0 (run what is due at once).
   */
  readonly waitMs?: Time | undefined
}

/** The largest `batch.size`. */
export const MAX_BATCH_SIZE = 100
/** The longest `batch.waitMs`. */
export const MAX_BATCH_WAIT_MS = 86_400_000

/**
 * An external queue delivered through Cloudflare Queues: the object leases each due job itself and
 * sends its envelope to `queue` (a producer binding); a `DurabilityJobs.consumer` runs it.
 */
export interface Transport {
  /** The producer binding (`env.EMAIL_QUEUE`). */
  readonly queue: QueueProducer
  /** Put the payload in the envelope (default false: the consumer gets it from the object with `start`). */
  readonly includePayload?: boolean | undefined
}

/** What the transport needs of a Queues producer binding. */
export interface QueueProducer {
  readonly sendBatch: (messages: Iterable<{ readonly body: unknown; readonly contentType?: "json" }>) => Promise<unknown>
}

/** An external queue's leases. */
export interface External {
  readonly leaseMs: number
  readonly maxStalled: number
  /** Set when the object sends its leased jobs to a Cloudflare Queue. */
  readonly transport: { readonly producer: QueueProducer; readonly includePayload: boolean } | undefined
}

export const DEFAULT_LEASE_MS = 30_000
export const MIN_LEASE_MS = 1_000
export const MAX_LEASE_MS = 86_400_000

export interface Resolved {
  /** The queue's own limit, whatever the keys (a keyed concurrency's `total`). */
  readonly concurrency: number | undefined
  /** Set for a concurrency by key. */
  readonly keyed: { readonly key: (payload: unknown) => string; readonly limit: number } | undefined
  readonly rateLimit: RateLimit | undefined
  readonly groupRateLimit: GroupRateLimit<unknown> | undefined
  readonly removeOnComplete: Retention<number> | undefined
  readonly removeOnFail: Retention<number> | undefined
  readonly deadLetter: boolean
  readonly keepLogs: number
  readonly maxPayloadBytes: number
  /** Set for a queue processed by external workers. */
  readonly external: External | undefined
  /** Set for a batched queue. */
  readonly batch: { readonly size: number; readonly waitMs: number } | undefined
}

/** Log lines kept per job when a queue names no `keepLogs`. */
export const DEFAULT_KEEP_LOGS = 100
/** The largest payload when a queue names no `maxPayloadBytes` (bytes of stored JSON). */
export const DEFAULT_MAX_PAYLOAD_BYTES = 131_072
/** A progress value or a log line, as stored. */
export const MAX_ENTRY_BYTES = 65_536

const invalid = (field: string, kind: "range" | "type", message: string, value: unknown) =>
  new InvalidOptionError({ field, kind, message: `${field} ${message}, got ${shown(value)}` })

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Why `limit` is not a rate limit, or undefined (`field` names it in the message). */
export const rateLimitProblem = (
  field: string,
  limit: unknown,
  make: (field: string, kind: "range" | "type", message: string, value: unknown) => Error = invalid
): Error | undefined => {
  if (!isObject(limit)) return make(field, "type", "must be an object { capacity, refillPerSecond }", limit)
  if (!isPositiveInteger(limit.capacity)) return make(`${field}.capacity`, "range", "must be a positive integer", limit.capacity)
  const refill = limit.refillPerSecond
  if (typeof refill !== "number" || !Number.isFinite(refill) || refill <= 0 || refill > 1_000_000) {
    return make(`${field}.refillPerSecond`, "range", "must be a number above 0 and at most 1 000 000", refill)
  }
  return undefined
}

const isNonNegative = (ms: number) => Number.isSafeInteger(ms) && ms >= 0

const retention = (field: string, value: unknown): Effect.Effect<Retention<number> | undefined, InvalidOptionError> => {
  if (value === undefined) return Effect.succeed(undefined)
  if (!isObject(value)) return Effect.fail(invalid(field, "type", "must be an object { count?, ageMs? }", value))
  const { count } = value
  if (count !== undefined && !(typeof count === "number" && Number.isSafeInteger(count) && count >= 0)) {
    return Effect.fail(invalid(`${field}.count`, "range", "must be a non-negative integer", count))
  }
  let ageMs: number | undefined
  if (value.ageMs !== undefined) {
    const age = Time.check(`${field}.ageMs`, value.ageMs, isNonNegative, {
      number: "a non-negative safe integer",
      duration: "a finite Duration"
    })
    if (Time.isProblem(age)) return Effect.fail(new InvalidOptionError({ field: `${field}.ageMs`, ...age }))
    ageMs = age.millis
  }
  return Effect.succeed({
    ...(count === undefined ? {} : { count }),
    ...(ageMs === undefined ? {} : { ageMs })
  })
}

/** A queue's `concurrency` checked: a number, or a limit per key (`field` names it in messages). */
const concurrencyOf = (
  field: string,
  value: unknown
): Effect.Effect<Pick<Resolved, "concurrency" | "keyed">, InvalidOptionError> => {
  if (value === undefined) return Effect.succeed({ concurrency: undefined, keyed: undefined })
  if (typeof value === "number") {
    return isPositiveInteger(value)
      ? Effect.succeed({ concurrency: value, keyed: undefined })
      : Effect.fail(invalid(field, "range", "must be a positive integer", value))
  }
  if (!isObject(value)) return Effect.fail(invalid(field, "type", "must be a positive integer or an object { key, limit, total? }", value))
  if (typeof value.key !== "function") return Effect.fail(invalid(`${field}.key`, "type", "must be a function (payload) => string", value.key))
  if (!isPositiveInteger(value.limit)) return Effect.fail(invalid(`${field}.limit`, "range", "must be a positive integer", value.limit))
  if (value.total !== undefined && !isPositiveInteger(value.total)) {
    return Effect.fail(invalid(`${field}.total`, "range", "must be a positive integer", value.total))
  }
  return Effect.succeed({
    concurrency: value.total as number | undefined,
    keyed: { key: value.key as (payload: unknown) => string, limit: value.limit as number }
  })
}

/** The queue's options, checked; `prefix` is e.g. "queues.email.". */
export const resolve = (prefix: string, options: QueueOptions): Effect.Effect<Resolved, InvalidOptionError> =>
  Effect.gen(function*() {
    const { deadLetter, groupRateLimit, keepLogs, maxPayloadBytes, rateLimit } = options
    const { concurrency, keyed } = yield* concurrencyOf(`${prefix}concurrency`, options.concurrency)
    if (rateLimit !== undefined) {
      const problem = rateLimitProblem(`${prefix}rateLimit`, rateLimit)
      if (problem !== undefined) return yield* Effect.fail(problem as InvalidOptionError)
    }
    if (groupRateLimit !== undefined) {
      const problem = rateLimitProblem(`${prefix}groupRateLimit`, groupRateLimit)
      if (problem !== undefined) return yield* Effect.fail(problem as InvalidOptionError)
      if (typeof groupRateLimit.key !== "function") {
        return yield* invalid(`${prefix}groupRateLimit.key`, "type", "must be a function (payload) => string", groupRateLimit.key)
      }
    }
    if (deadLetter !== undefined && typeof deadLetter !== "boolean") {
      return yield* invalid(`${prefix}deadLetter`, "type", "must be a boolean", deadLetter)
    }
    if (keepLogs !== undefined && !(typeof keepLogs === "number" && Number.isSafeInteger(keepLogs) && keepLogs >= 0)) {
      return yield* invalid(`${prefix}keepLogs`, "range", "must be a non-negative integer", keepLogs)
    }
    if (
      maxPayloadBytes !== undefined &&
      !(isPositiveInteger(maxPayloadBytes) && maxPayloadBytes <= Json.MAX_ROW_BYTES)
    ) {
      return yield* invalid(
        `${prefix}maxPayloadBytes`,
        "range",
        `must be a positive integer of at most ${Json.MAX_ROW_BYTES}`,
        maxPayloadBytes
      )
    }
    const { maxStalled, processing } = options
    const transport = isObject(processing) ? processing as unknown as Transport : undefined
    if (processing !== undefined && processing !== "inline" && processing !== "external" && transport === undefined) {
      return yield* invalid(`${prefix}processing`, "type", `must be "inline", "external" or { queue: <a Queues producer binding> }`, processing)
    }
    if (transport !== undefined) {
      if (!isObject(transport.queue) || typeof (transport.queue as { sendBatch?: unknown }).sendBatch !== "function") {
        return yield* invalid(`${prefix}processing.queue`, "type", "must be a Cloudflare Queues producer binding (with sendBatch)", transport.queue)
      }
      if (transport.includePayload !== undefined && typeof transport.includePayload !== "boolean") {
        return yield* invalid(`${prefix}processing.includePayload`, "type", "must be a boolean", transport.includePayload)
      }
    }
    const externallyProcessed = processing === "external" || transport !== undefined
    let leaseMs: number | undefined
    if (options.leaseMs !== undefined) {
      const lease = Time.check(
        `${prefix}leaseMs`,
        options.leaseMs,
        (ms) => Number.isSafeInteger(ms) && ms >= MIN_LEASE_MS && ms <= MAX_LEASE_MS,
        { number: `an integer from ${MIN_LEASE_MS} to ${MAX_LEASE_MS}`, duration: "a Duration from 1 second to 1 day" }
      )
      if (Time.isProblem(lease)) return yield* new InvalidOptionError({ field: `${prefix}leaseMs`, ...lease })
      leaseMs = lease.millis
    }
    if (maxStalled !== undefined && !(typeof maxStalled === "number" && Number.isSafeInteger(maxStalled) && maxStalled >= 0)) {
      return yield* invalid(`${prefix}maxStalled`, "range", "must be a non-negative integer", maxStalled)
    }
    if (!externallyProcessed && (leaseMs !== undefined || maxStalled !== undefined)) {
      return yield* invalid(`${prefix}leaseMs`, "type", `and maxStalled apply to processing: "external" only`, leaseMs ?? maxStalled)
    }
    const batch = yield* batchOf(prefix, options.batch, externallyProcessed, keyed !== undefined)
    return {
      batch,
      external: externallyProcessed
        ? {
          leaseMs: leaseMs ?? DEFAULT_LEASE_MS,
          maxStalled: maxStalled ?? 1,
          transport: transport === undefined
            ? undefined
            : { producer: transport.queue, includePayload: transport.includePayload ?? false }
        }
        : undefined,
      concurrency,
      keyed,
      rateLimit: rateLimit === undefined ? undefined : { capacity: rateLimit.capacity, refillPerSecond: rateLimit.refillPerSecond },
      groupRateLimit: groupRateLimit as GroupRateLimit<unknown> | undefined,
      removeOnComplete: yield* retention(`${prefix}removeOnComplete`, options.removeOnComplete),
      removeOnFail: yield* retention(`${prefix}removeOnFail`, options.removeOnFail),
      deadLetter: deadLetter ?? false,
      keepLogs: keepLogs ?? DEFAULT_KEEP_LOGS,
      maxPayloadBytes: maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES
    }
  })

const batchOf = (
  prefix: string,
  batch: unknown,
  externallyProcessed: boolean,
  keyed: boolean
): Effect.Effect<Resolved["batch"], InvalidOptionError> => {
  const field = `${prefix}batch`
  if (batch === undefined) return Effect.succeed(undefined)
  if (!isObject(batch)) return Effect.fail(invalid(field, "type", "must be an object { size, waitMs? }", batch))
  // A lease hands out jobs one by one to workers elsewhere: there is no handler here to batch them for.
  if (externallyProcessed) return Effect.fail(invalid(field, "type", "applies to queues processed here only, not to external ones", batch))
  // A call holds each of its jobs' keys: not built (nor tested) yet, so refused rather than left to chance.
  if (keyed) return Effect.fail(invalid(field, "type", "does not combine with a concurrency by key yet", batch))
  const { size } = batch
  if (!(isPositiveInteger(size) && size <= MAX_BATCH_SIZE)) {
    return Effect.fail(invalid(`${field}.size`, "range", `must be an integer from 1 to ${MAX_BATCH_SIZE}`, size))
  }
  if (batch.waitMs === undefined) return Effect.succeed({ size, waitMs: 0 })
  const wait = Time.check(`${field}.waitMs`, batch.waitMs, (ms) => Number.isSafeInteger(ms) && ms >= 0 && ms <= MAX_BATCH_WAIT_MS, {
    number: `an integer from 0 to ${MAX_BATCH_WAIT_MS}`,
    duration: "a Duration of at most 1 day"
  })
  if (Time.isProblem(wait)) return Effect.fail(new InvalidOptionError({ field: `${field}.waitMs`, ...wait }))
  return Effect.succeed({ size, waitMs: wait.millis })
}
