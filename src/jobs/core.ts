/**
 * The job queues' state shared by their calls (queue settings, what this isolate knows), and their
 * part in the engine: how a job runs, completes, is gated by its rate limits and what its end
 * changes around it.
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Runtime from "effect/Runtime"
import type * as Background from "../engine/Background.js"
import { Admission, type DurableTable, LeaseExpiry, type Execution, type SettledWork, type TableHandle } from "../engine/DurableTable.js"
import type { RankedSlot } from "../engine/slot.js"
import {
  DurableResultSerializationError,
  InvalidInputError,
  JobCanceledError,
  JobStalledError,
  NonRetryableError,
  type StorageError
} from "../shared/Errors.js"
import * as Lifecycle from "../engine/Lifecycle.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import { provideCaptured } from "../engine/capability.js"
import * as Json from "../shared/json.js"
import * as Plain from "../shared/plain.js"
import * as StepMemo from "../steps/memo.js"
import * as Validate from "../shared/validate.js"
import * as Steps from "../steps/Steps.js"
import type * as Watchers from "../engine/watchers.js"
import * as Batch from "./batch.js"
import * as Bucket from "./bucket.js"
import * as BucketsTable from "./bucketsTable.js"
import type { AnyQueueDefinition, CurrentJobTag } from "./definition.js"
import * as Flow from "./flow.js"
import * as JobsTable from "./jobsTable.js"
import * as Keyed from "./keyed.js"
import * as LogsTable from "./logsTable.js"
import * as Metrics from "./metrics.js"
import * as Options from "./options.js"
import * as Rows from "./rows.js"
import * as Tracing from "./tracing.js"
import * as Transport from "./transport.js"
import * as Upkeep from "./upkeep.js"
import * as TimerSupport from "../engine/timerSupport.js"
import type { ChildValue, JobContext, JobEvent, JobEventDraft, JobEventHook, RateLimit } from "./types.js"

/** The start of every job's `idempotencyKey`; a generation follows it. */
export const IDEMPOTENCY_PREFIX = "durability-job:v1:"

export interface QueueRuntime {
  readonly name: string
  readonly definition: AnyQueueDefinition
  readonly options: Options.Resolved
  readonly maxAttempts: number
  readonly slot: RankedSlot | undefined
  /** An inline queue's concurrency by key: its jobs running here, by key (see `keyed.ts`). */
  readonly keys?: Keyed.KeyState | undefined
  /** `setRateLimit`'s stored override: a limit, `null` for none, `undefined` for the definition's. */
  override: RateLimit | null | undefined
  /**
   * The stored pause flag as last written or read here (the table stays the truth every claim checks):
   * a paused queue's jobs are not started eagerly, so they never show as `active` for a moment.
   */
  paused: boolean
}

export interface Core {
  readonly storage: StorageService
  readonly background: Background.Background
  readonly watchers: Watchers.Watchers
  readonly queues: ReadonlyMap<string, QueueRuntime>
  readonly hook: JobEventHook | undefined
  /** Keys whose cancel was asked while they executed here: their end is `canceled`. */
  readonly canceling: Map<string, string>
  /** Finished jobs per `<queue>/<status>` as last counted by retention (undefined: count again). */
  readonly retained: Map<string, number | undefined>
  /** The next insertion order. */
  readonly seq: { next: number }
  readonly flow: Flow.Context
  /** The object's id, for the envelopes of a Queues transport (`SchedulerConfig.objectId`). */
  readonly objectId: string | undefined
  /** Set when a queue has a concurrency by key: the rounds its keys take turns by (see `keyed.ts`). */
  readonly rounds?: Keyed.Rounds | undefined
  /** The table's handle, once attached (as `watchers` and `seq`: see `setup.ts`). */
  readonly handle: TableHandle
  /** The attempts running here with an open span (only with a tracer of the user's: see `tracing.ts`). */
  readonly spans: Tracing.Spans
}

/** Tells the events (after the commit) and wakes the waiters of finished keys. */
export const tell = (core: Core, events: ReadonlyArray<JobEventDraft>, finished: ReadonlyArray<string> = []): Effect.Effect<void> =>
  // Inside a caller's transaction (`StorageService.atomically`), told once it committed.
  core.storage.afterCommit(Effect.suspend(() => {
    for (const key of finished) core.watchers.notify(key)
    for (const event of events) Metrics.told(event)
    if (core.hook === undefined || events.length === 0) return Effect.void
    return Effect.forEach(events, (event) =>
      Lifecycle.emitTo<JobEvent>(core.background, core.hook, (timestamp) =>
        ({ ...event, entityKind: "job", timestamp }) as JobEvent), { discard: true })
  }))

export const queueOfKey = (key: string): string => key.slice(0, key.indexOf("/"))

/** A job's place among those waiting for its queue's slot: higher priority first, then its round, then first added. */
export const rankOf = (row: Row): ReadonlyArray<number> => [-Number(row.priority), Number(row.turn ?? 0), Number(row.seq)]

/** The stored job under `key`, if any. */
export const readJob = (core: Core, key: string): Effect.Effect<Row | undefined, StorageError> => JobsTable.read(core.storage, key)

/** A bad argument of a call, naming the field. */
export const invalidInput = (field: string, kind: "range" | "type", message: string): InvalidInputError =>
  new InvalidInputError({ field, kind, message })

/** The keys of `queue`'s jobs executing in this isolate now. */
export const executingIn = (core: Core, queue: string): Array<string> => {
  const prefix = `${queue}/`
  return [...core.handle.executingKeys()].filter((key) => key.startsWith(prefix))
}

/** The rate limit in force for `queue`. */
export const rateLimitOf = (queue: QueueRuntime): RateLimit | undefined =>
  queue.override === null ? undefined : queue.override ?? queue.options.rateLimit

const tooLarge = (field: string, bytes: number) =>
  new InvalidInputError({
    field,
    kind: "range",
    message: `${field} is ${bytes} bytes; at most ${Options.MAX_ENTRY_BYTES} bytes are stored`
  })

export const utf8Bytes = (text: string): number => new TextEncoder().encode(text).byteLength

/** A progress value as stored: JSON of at most `MAX_ENTRY_BYTES` bytes. */
export const progressText = (value: unknown): Effect.Effect<string, InvalidInputError> =>
  Effect.flatMap(Validate.json("progress", value), (text) => {
    const bytes = text.length * 3 > Options.MAX_ENTRY_BYTES ? utf8Bytes(text) : 0
    return bytes > Options.MAX_ENTRY_BYTES ? Effect.fail(tooLarge("progress", bytes)) : Effect.succeed(text)
  })

/** A log line as stored: a string of at most `MAX_ENTRY_BYTES` bytes. */
export const logLine = (message: unknown): Effect.Effect<string, InvalidInputError> => {
  if (typeof message !== "string") {
    return Effect.fail(invalidInput("message", "type", `message must be a string, got ${Validate.shown(message)}`))
  }
  const bytes = message.length * 3 > Options.MAX_ENTRY_BYTES ? utf8Bytes(message) : 0
  return bytes > Options.MAX_ENTRY_BYTES ? Effect.fail(tooLarge("message", bytes)) : Effect.succeed(message)
}

/**
 * Appends a line to the log of the job under `key` while it meets `holds` (a condition on its row),
 * keeping the newest `keep` lines. Returns whether the line was appended.
 */
export const appendLog = (
  core: Core,
  key: string,
  message: string,
  at: number,
  keep: number,
  holds: JobsTable.Condition
): Effect.Effect<boolean, StorageError> =>
  Effect.gen(function*() {
    const [added] = yield* LogsTable.append(core.storage, key, message, at, JobsTable.holding(key, holds))
    if (added === undefined) return false
    const seq = Number(added.seq)
    if (seq > keep) yield* LogsTable.trim(core.storage, key, seq - keep)
    return true
  })

/** The handler's view of its job: progress, log lines and its children's values go straight to storage. */
const jobContext = (core: Core, execution: Execution, queue: QueueRuntime, payload: unknown): JobContext<unknown> => {
  const { storage } = core
  const row = execution.row
  const id = String(row.id)
  const key = execution.key
  return {
    id,
    queue: queue.name,
    payload,
    attempt: execution.attempt,
    maxAttempts: queue.maxAttempts,
    signal: execution.signal,
    idempotencyKey: `${IDEMPOTENCY_PREFIX}${execution.generation}`,
    progress: (value) =>
      Effect.gen(function*() {
        const text = yield* progressText(value)
        const [updated] = yield* JobsTable.setProgress(storage, key, execution.generation, text)
        if (updated !== undefined) yield* tell(core, [{ type: "progress", queue: queue.name, id, progress: value }])
      }),
    log: (message) =>
      Effect.gen(function*() {
        const line = yield* logLine(message)
        const keep = queue.options.keepLogs
        if (keep === 0) return
        const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        // Only while this job (this generation) is unfinished, as for progress: a handler still running
        // after its job ended, or was removed and added again under the same id, writes nothing.
        yield* appendLog(core, key, line, now, keep, JobsTable.unfinished(execution.generation))
      }),
    childrenValues: Effect.map(
      JobsTable.childValues(storage, key),
      (rows) => {
        const values: Record<string, ChildValue> = {}
        for (const child of rows) {
          const state = Rows.stateOf(child, Number.MAX_SAFE_INTEGER, false)
          values[String(child.id)] = {
            queue: String(child.queue),
            state,
            ...(child.result === null || child.result === undefined ? {} : { result: Json.decode(String(child.result)) }),
            ...(Rows.errorOf(child) === undefined ? {} : { error: Rows.errorOf(child)! })
          }
        }
        return values
      }
    )
  }
}

const unstorable = (queue: string, reason: string, cause?: unknown) =>
  new DurableResultSerializationError({
    message: `The result of a job of queue "${queue}" ${reason}`,
    ...(cause === undefined ? {} : { cause })
  })

/** Why a result cannot be stored, as the queue's terminal error. */
const unstorableResult = (queue: string, failure: Json.Unstorable) => {
  const { cause, detail } = Json.unstorableDetail(failure)
  return unstorable(queue, detail, cause)
}

/** A plain result's stored JSON, or why it cannot be stored. */
const storedResult = (queue: string, value: unknown): Exit.Exit<string, DurableResultSerializationError> =>
  Json.storedExit(value, "result", (failure) => unstorableResult(queue, failure))

/**
 * A cancel aborts the handler by interrupting its fiber, and an interrupted fiber's exit carries no
 * failure of its own (the engine would record a plain interruption and retry it), nor the value of a
 * handler that finished anyway. So the end of a canceled run, whatever it is, is caught here
 * (uninterruptibly) and becomes `JobCanceledError`: terminal, never retried, settled as `canceled`.
 */
const endsCanceled = <A>(canceled: () => JobCanceledError | undefined, body: Effect.Effect<A, unknown>): Effect.Effect<A, unknown> =>
  Effect.uninterruptibleMask((restore) =>
    restore(body).pipe(
      Effect.matchCauseEffect({
        onFailure: (cause) => {
          const error = canceled()
          const failure = Cause.failureOption(cause)
          return error === undefined || (Option.isSome(failure) && failure.value instanceof JobCanceledError)
            ? Effect.failCause(cause)
            : Effect.fail(error)
        },
        onSuccess: (value) => {
          const error = canceled()
          return error === undefined ? Effect.succeed(value) : Effect.fail(error)
        }
      })
    )
  )

/** A handler's exit that is already there: the attempt's span (if any) ends with it. */
const endedNow = <A, E>(traced: Tracing.Attempt | undefined, exit: Exit.Exit<A, E>): Exit.Exit<A, E> => {
  if (traced !== undefined) Tracing.ended(traced, exit)
  return exit
}

/** The promise face's handler, called directly: the job, its attempt's step runner and the engine's runtime. */
export type PlainJobHandler = (job: JobContext<unknown>, steps: () => Steps.StepRunner, runtime: Runtime.Runtime<never>) => unknown

/** The attempt's step runner, made when the handler first asks for it. */
const stepsOf = (core: Core, execution: Execution) => () =>
  StepMemo.runner(core.storage, {
    capability: "jobs",
    current: JobsTable.IS_CURRENT,
    key: execution.key,
    generation: execution.generation
  })

/** Keys a statement may list (a Durable Object statement takes at most 100 bindings). */
const MAX_EXCLUDED = 64

/** The token buckets a job needs before it starts (or is leased): its queue's, and its group's. */
export const bucketsOf = (queue: QueueRuntime, row: Row): Array<{ readonly key: string; readonly limit: RateLimit }> => {
  const buckets: Array<{ readonly key: string; readonly limit: RateLimit }> = []
  const limit = rateLimitOf(queue)
  if (limit !== undefined) buckets.push({ key: "", limit })
  const group = queue.options.groupRateLimit
  if (group !== undefined && typeof row.group_key === "string") buckets.push({ key: `g:${row.group_key}`, limit: group })
  return buckets
}

/**
 * In the claim's transaction: takes a token from each of the job's buckets, or takes none and
 * moves every pending job of the empty bucket (queue or group) to when its next token is there,
 * so the wake-up goes straight to that time.
 */
const gate = (core: Core, queue: QueueRuntime, buckets: ReturnType<typeof bucketsOf>, self: string) => (now: number) =>
  Effect.gen(function*() {
    const { storage } = core
    const stored = yield* BucketsTable.readSome(storage, queue.name, buckets.map((bucket) => bucket.key))
    const stateOf = (key: string): Bucket.State | undefined => {
      const found = stored.find((bucket) => bucket.group_key === key)
      return found === undefined ? undefined : { tokens: Number(found.tokens), updatedAt: Number(found.updated_at) }
    }
    const decisions = buckets.map((bucket) => ({ bucket, decision: Bucket.decide(bucket.limit, stateOf(bucket.key), now) }))
    const empty = decisions.filter((entry) => !entry.decision.take)
    if (empty.length === 0) {
      for (const { bucket, decision } of decisions) {
        if (!decision.take) continue
        yield* BucketsTable.store(storage, queue.name, bucket.key, decision.after.tokens, decision.after.updatedAt)
      }
      return Admission.Run()
    }
    // Jobs running now keep their times (their run is not waiting for a token). The gated job counts
    // as executing from before its claim: it must move too, or it stays due and is gated again at once,
    // in a loop that never lets the clock move.
    const running = executingIn(core, queue.name).filter((key) => key !== self).slice(0, MAX_EXCLUDED)
    for (const { bucket, decision } of empty) {
      if (decision.take) continue
      yield* JobsTable.holdUntil(storage, queue.name, decision.readyAt, bucket.key === "" ? undefined : bucket.key.slice(2), running)
    }
    // This job waits for the last of its empty buckets.
    return Admission.Defer({
      at: Math.max(...empty.map(({ decision }) => decision.take ? now : decision.readyAt)),
      committed: () => Metrics.rateLimited(queue.name)
    })
  })

/**
 * Leased jobs (see `lease.ts`): what becomes of one whose lease's time came (the engine's lease timer).
 * A lease extended meanwhile is left to its new end; an expired one goes back to waiting (its attempt
 * counted), or to its end: past its attempts (exhausted) or past `maxStalled` (`JobStalledError`).
 */
const expired = (core: Core, row: Row, now: number): LeaseExpiry => {
  if (Number(row.leased_until) > now) return LeaseExpiry.Extended({ at: Number(row.leased_until) })
  const queue = core.queues.get(String(row.queue))
  const settings = queue?.options.external
  const stalled = Number(row.stalled) + 1
  const key = String(row.key)
  const generation = String(row.generation_id)
  // The job's end clears the lease with its settle (`settled`); this keeps the count of its stalls.
  const counted = JobsTable.countStall(core.storage, key, generation, stalled)
  if (queue === undefined || settings === undefined) {
    return LeaseExpiry.Failed({
      error: new NonRetryableError({ message: `No external queue "${String(row.queue)}" is defined any more` }),
      write: Effect.asVoid(counted)
    })
  }
  if (Number(row.attempt) >= queue.maxAttempts) return LeaseExpiry.Exhausted({ write: Effect.asVoid(counted) })
  if (stalled > settings.maxStalled) {
    return LeaseExpiry.Failed({
      error: new JobStalledError({
        message: `Job "${String(row.id)}" of queue "${queue.name}" stalled: its lease expired ${stalled} times ` +
          `(maxStalled ${settings.maxStalled})`
      }),
      write: Effect.asVoid(counted)
    })
  }
  return LeaseExpiry.Released({
    write: Effect.gen(function*() {
      yield* JobsTable.releaseLease(core.storage, key, generation, stalled, now)
      // A transport's job is dispatched again at once; one it held back at the queue's concurrency too.
      if (settings.transport === undefined) return []
      const freed = queue.options.concurrency === undefined ? [] : yield* Transport.freeSlot(core, queue, now)
      // Its key's first waiting job looks again now (this job itself is due again at once: one of them waits again).
      const waiting = typeof row.concurrency_key === "string" ? yield* JobsTable.freeKey(core.storage, queue.name, row.concurrency_key, now) : []
      return [String(row.key), ...[...freed, ...waiting].map((made) => String(made.key))].map((key) => ({ key, at: now, start: true }))
    })
  })
}

/** What the capability attaches: how a job runs, completes, is gated and what its end changes. */
export const participant = <I>(
  core: Core,
  context: Context.Context<unknown>,
  currentJob: CurrentJobTag<I>
): Pick<DurableTable<string>, "run" | "complete" | "completeMany" | "describe" | "entity" | "completesInOneStatement" | "dispatch" | "holds" | "admission" | "settled" | "timers" | "leases"> =>
  // A queue may have timers or leases: the engine's support for them comes with the jobs.
  TimerSupport.withTimers({
    // Succeeds with the result's stored JSON.
    run: (execution) => {
      const canceled = () => {
        const reason = core.canceling.get(execution.key)
        return reason === undefined ? undefined : new JobCanceledError({ message: canceledMessage(execution.row, reason) })
      }
      const name = String(execution.row.queue)
      const queue = core.queues.get(name)
      // The claim committed (with its time, `started_at`): the attempt starts here and now.
      const claimedAt = execution.row.started_at === null || execution.row.started_at === undefined
        ? undefined
        : Number(execution.row.started_at)
      if (queue !== undefined && queue.options.external === undefined) {
        Metrics.started(name, claimedAt === undefined ? undefined : claimedAt - Number(execution.row.next_attempt_at))
      }
      const tracing = Tracing.of(execution.runtime)
      const traced = tracing === undefined ? undefined : Tracing.started(core.spans, tracing, {
        key: execution.key,
        queue: name,
        id: String(execution.row.id),
        attempt: execution.attempt,
        claimedAt
      })
      if (queue?.options.batch !== undefined) {
        const ran = endsCanceled(canceled, batched(core, context, execution, queue, queue.options.batch.size))
        return traced === undefined ? ran : Tracing.around(traced, ran)
      }
      const steps = stepsOf(core, execution)
      const plain = queue === undefined ? undefined : Plain.plainOf<PlainJobHandler>(queue.definition)
      if (
        plain !== undefined && queue!.options.external === undefined &&
        queue!.definition.payload.identity === true && queue!.definition.result.identity === true
      ) {
        // No schema either way: the promise face's handler is called here, and a plain value settles with no fiber.
        const job = jobContext(core, execution, queue!, Json.decode(String(execution.row.payload)))
        let returned: unknown
        try {
          returned = plain(job, steps, execution.runtime)
        } catch (error) {
          const reason = canceled()
          return endedNow(traced, Exit.fail(reason === undefined || error instanceof JobCanceledError ? error : reason))
        }
        if (Plain.maybeThenable(returned)) {
          const awaited = endsCanceled(canceled, Effect.flatMap(Plain.awaitReturned(returned), (value) => storedResult(name, value)))
          return traced === undefined ? awaited : Tracing.around(traced, awaited)
        }
        const reason = canceled()
        return endedNow<string, unknown>(traced, reason === undefined ? storedResult(name, returned) : Exit.fail(reason))
      }
      const body = Effect.gen(function*() {
        if (queue === undefined) return yield* new NonRetryableError({ message: `No queue "${name}" is defined any more` })
        // Never claimed here: a lease claims them (`expired` ends the ones whose leases expired).
        if (queue.options.external !== undefined) {
          return yield* new NonRetryableError({ message: `Job "${String(execution.row.id)}" of queue "${name}" is processed externally, not here` })
        }
        const payload = yield* Effect.mapError(
          queue.definition.payload.decode(Json.decode(String(execution.row.payload))),
          (cause) => new NonRetryableError({ message: `The stored payload of a job of queue "${name}" does not decode`, cause })
        )
        const job = jobContext(core, execution, queue, payload)
        // Both in one provide: one context update per attempt, as before steps.
        const handled = queue.definition.handler(job as JobContext<never>).pipe(
          Effect.provide(Context.add(Context.make(currentJob, { job }), Steps.CurrentCall, steps()))
        ) as Effect.Effect<unknown, unknown, unknown>
        const value = yield* provideCaptured(handled, context)
        return yield* Effect.mapError(Json.encodeStored(queue.definition.result, value, "result"), (failure) => unstorableResult(name, failure))
      })
      const ran = endsCanceled(canceled, body)
      return traced === undefined ? ran : Tracing.around(traced, ran)
    },
    complete: (execution, text, settledAt) =>
      Effect.map(JobsTable.complete(core.storage, execution, text, settledAt), (rows) => rows.length > 0),
    completesInOneStatement: true,
    completeMany: (completed) => JobsTable.completeMany(core.storage, completed),
    describe: (row) => `job "${String(row.id)}" of queue "${String(row.queue)}"`,
    entity: (row) => ({
      entityKind: "job",
      id: String(row.key),
      generation: String(row.generation_id),
      queue: String(row.queue),
      jobId: String(row.id)
    }),
    dispatch: {
      order: JobsTable.START_ORDER,
      rank: { columns: JobsTable.RANK_COLUMNS, of: rankOf },
      startedColumn: "started_at",
      slotOf: (key) => core.queues.get(queueOfKey(key))?.slot
    },
    // A paused queue's jobs, a leased job, and an external queue's jobs without a transport (they wait for
    // `lease`; a transport's are leased by their admission).
    holds: {
      where: JobsTable.claimable(
        [...core.queues.values()].filter((queue) => queue.options.external !== undefined && queue.options.external.transport === undefined)
          .map((queue) => queue.name),
        [...core.queues.values()].some((queue) => queue.options.external !== undefined)
      ),
      holds: (key) => {
        const queue = core.queues.get(queueOfKey(key))
        return queue?.paused === true || (queue?.options.external !== undefined && queue.options.external.transport === undefined)
      }
    },
    // Rate limits take a token, or defer to the next; a transport's job is leased to its Cloudflare Queue.
    admission: {
      mayApply: (key) => {
        const queue = core.queues.get(queueOfKey(key))
        return queue !== undefined &&
          (queue.options.external !== undefined || rateLimitOf(queue) !== undefined || queue.options.groupRateLimit !== undefined ||
            queue.options.keyed !== undefined || (queue.options.batch?.waitMs ?? 0) > 0)
      },
      of: (row) => {
        const queue = core.queues.get(String(row.queue))
        if (queue === undefined) return undefined
        const buckets = bucketsOf(queue, row)
        const tokens = buckets.length === 0 ? undefined : gate(core, queue, buckets, String(row.key))
        if (queue.options.external !== undefined) {
          if (queue.options.external.transport === undefined || core.objectId === undefined) return undefined
          // Its key's room first: a job that waits for its key takes no token.
          const limits = queue.options.keyed === undefined ? tokens : (now: number) =>
            Effect.flatMap(Keyed.transportWait(core, queue, row, now), (waits) =>
              waits !== undefined ? Effect.succeed(waits) : tokens === undefined ? Effect.succeed(Admission.Run()) : tokens(now))
          return Transport.dispatch(core, queue, row, core.objectId, limits)
        }
        const keys = queue.keys
        const admitted = keys === undefined ? undefined : Keyed.admit(core, queue, keys, row)
        // Its key's room first (a job that waits for its key takes no token); a job its tokens defer gives it back.
        const limits = keys === undefined || admitted === undefined ? tokens : tokens === undefined ? admitted : (now: number) =>
          Effect.flatMap(admitted(now), (decision) =>
            decision._tag !== "Run" ? Effect.succeed(decision) : Effect.tap(tokens(now), (limited) => {
              if (limited._tag !== "Run") Keyed.forget(keys, row)
            }))
        const { batch } = queue.options
        if (batch === undefined || batch.waitMs === 0) return limits
        const waits = Batch.admit(core.storage, queue.name, batch, executingIn(core, queue.name), String(row.key))
        // A job that waits for its batch takes no token.
        return limits === undefined
          ? waits
          : (now: number): Effect.Effect<Admission, StorageError> =>
            Effect.flatMap(waits(now), (decision): Effect.Effect<Admission, StorageError> =>
              decision._tag === "Run" ? limits(now) : Effect.succeed(decision))
      }
    },
    settled: (row, settlement) => settled(core, row, settlement),
    // The jobs' timers, when a queue has them: retention by age, and each transport queue's outbox. (Declared
    // only then: a table with timers or leases pays for them in every reconciliation of the alarm.)
    ...(ageBounds(core).length > 0 || [...core.queues.values()].some((queue) => queue.options.external?.transport !== undefined)
      ? {
        timers: {
          fire: (timer, now) =>
            timer.key.startsWith(Transport.OUTBOX_TIMER) ? Transport.flush(core, timer.key, now) : retentionFire(core, now)
        }
      }
      : {}),
    ...([...core.queues.values()].some((queue) => queue.options.external !== undefined)
      ? { leases: { expired: (row, now) => expired(core, row, now) } }
      : {})
  })

/** A claimed job of a batched queue: decoded, then one of its queue's batch (see `batch.ts`). */
const batched = (
  core: Core,
  context: Context.Context<unknown>,
  execution: Execution,
  queue: QueueRuntime,
  size: number
): Effect.Effect<string, unknown> =>
  Effect.gen(function*() {
    const name = queue.name
    const payload = yield* Effect.mapError(
      queue.definition.payload.decode(Json.decode(String(execution.row.payload))),
      (cause) => new NonRetryableError({ message: `The stored payload of a job of queue "${name}" does not decode`, cause })
    )
    return yield* Batch.join(queue, size, jobContext(core, execution, queue, payload), callBatch(queue, context), execution.runtime)
  })

/** One call of a batched queue's handler: each job's result as stored, or its failure. */
const callBatch = (queue: QueueRuntime, context: Context.Context<unknown>): Batch.Call => (jobs) => {
  const name = queue.name
  const handled = queue.definition.batchHandler!(jobs as ReadonlyArray<JobContext<never>>) as Effect.Effect<unknown, unknown, unknown>
  return Effect.flatMap(provideCaptured(handled, context), (outcomes): Effect.Effect<ReadonlyArray<Exit.Exit<string, unknown>>, unknown> => {
    const problem = Batch.outcomesProblem(name, outcomes, jobs.length)
    if (problem !== undefined) return Effect.fail(new Batch.JobBatchOutcomesError({ message: problem }))
    return Effect.forEach(outcomes as ReadonlyArray<Exit.Exit<unknown, unknown>>, (outcome): Effect.Effect<Exit.Exit<string, unknown>> =>
      Exit.isFailure(outcome)
        ? Effect.succeed(Exit.failCause(outcome.cause))
        : Effect.exit(Effect.mapError(Json.encodeStored(queue.definition.result, outcome.value, "result"), (failure) => unstorableResult(name, failure))))
  })
}

/**
 * Inside a transaction whose changes failed other jobs (parents failed by a child: their own settle
 * never runs): their queues' `removeOnFail` bound, their failed jobs counted afresh.
 */
export const trimChained = (core: Core, out: Flow.Changes, at: number): Effect.Effect<void, StorageError> =>
  Effect.suspend(() => {
    const queues = new Set(out.events.flatMap((event) => event.type === "failed" ? [event.queue] : []))
    return Effect.forEach(queues, (name) => {
      const retention = core.queues.get(name)?.options.removeOnFail
      if (retention === undefined) return Effect.void
      return Effect.map(
        Flow.trim(core.flow, out, name, "failed", retention, at, undefined),
        (after) => void core.retained.set(`${name}/failed`, after)
      )
    }, { discard: true })
  })

export const canceledMessage = (row: Row, reason: string): string =>
  `Job "${String(row.id)}" of queue "${String(row.queue)}" was canceled${reason === "" ? "" : `: ${reason}`}`

/** Every queue's age bounds (`removeOnComplete.ageMs`, `removeOnFail.ageMs`). */
const ageBounds = (core: Core): ReadonlyArray<Upkeep.AgeBound> =>
  [...core.queues.values()].flatMap((queue) => [
    ...(queue.options.removeOnComplete?.ageMs === undefined
      ? []
      : [{ queue: queue.name, status: "completed" as const, ageMs: queue.options.removeOnComplete.ageMs }]),
    ...(queue.options.removeOnFail?.ageMs === undefined
      ? []
      : [{ queue: queue.name, status: "failed" as const, ageMs: queue.options.removeOnFail.ageMs }])
  ])

/** The retention timer's fire (see `upkeep.ts`): every queue trimmed by age, the timer set to the next time. */
export const retentionFire = (core: Core, now: number): SettledWork =>
  Effect.gen(function*() {
    const out = Flow.changes()
    const bounds = ageBounds(core)
    yield* Upkeep.trim(core.flow, out, bounds, now)
    yield* Upkeep.reschedule(core.storage, core.handle.timers, bounds, now)
    return {
      pending: out.pending,
      after: Effect.zipRight(
        Effect.sync(() => {
          for (const { queue, status } of bounds) core.retained.delete(`${queue}/${status}`)
        }),
        tell(core, out.events)
      )
    }
  })

/**
 * When the jobs are made: every leased job has its lease's timer (leases stored before the engine kept
 * them had the job's own `next_attempt_at` instead). Only objects with external queues look.
 */
export const resumeLeases = (core: Core): Effect.Effect<void, StorageError> =>
  ![...core.queues.values()].some((queue) => queue.options.external !== undefined)
    ? Effect.void
    // Each timer covers itself: no reconciliation (a new instance may not have read its alarm yet).
    : core.handle.writePending(Effect.flatMap(
      JobsTable.leased(core.storage),
      (rows) => Effect.forEach(rows, (row) => core.handle.resumeLease(row, Number(row.leased_until)), { discard: true })
    ), () => undefined)

/** When the jobs are made: the retention timer covers every kept job with an age bound. */
export const ensureRetention = (core: Core): Effect.Effect<void, StorageError> => {
  const bounds = ageBounds(core)
  if (bounds.length === 0) return Effect.void
  return Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) =>
    core.handle.writePending(Upkeep.ensure(core.storage, core.handle.timers, bounds, now), () => undefined))
}

/** What a job's end changes around it (see `Flow`); `undefined` when nothing (the settle keeps one statement). */
const settled = (
  core: Core,
  row: Row,
  settlement: Parameters<NonNullable<DurableTable["settled"]>>[1]
): SettledWork | undefined => {
  const key = String(row.key)
  const name = String(row.queue)
  const queue = core.queues.get(name)
  const hasParent = row.parent_key !== null && row.parent_key !== undefined
  const canceling = core.canceling.has(key)
  if (settlement.outcome === "completed" && !hasParent && !canceling && queue?.options.removeOnComplete === undefined) {
    return undefined
  }
  return Effect.gen(function*() {
    const out = Flow.changes()
    const { at } = settlement
    // The row as the settle left it (a cancel asked meanwhile turned its end into `canceled`).
    const [current] = settlement.outcome === "failed"
      // A leased job that failed (its last lease expired: exhausted) holds no lease any more.
      ? yield* JobsTable.finishFailed(core.storage, key, at)
      : hasParent || canceling
      ? [yield* JobsTable.read(core.storage, key)]
      : [{ ...row, status: "completed" }]
    if (current !== undefined) {
      if (current.status === "completed") yield* Flow.completed(core.flow, out, current, at)
      else if (current.status === "canceled") {
        yield* Flow.canceled(core.flow, out, current, String(current.cancel_reason ?? ""), at, false)
      } else if (settlement.outcome === "failed") yield* Flow.failed(core.flow, out, current, settlement.error, at, 0, false)
      const status = current.status === "completed" ? "completed" : current.status === "failed" ? "failed" : undefined
      const retention = status === "completed"
        ? queue?.options.removeOnComplete
        : status === "failed"
        ? queue?.options.removeOnFail
        : undefined
      if (status !== undefined && retention !== undefined) {
        const counter = `${name}/${status}`
        const known = core.retained.get(counter)
        const after = yield* Flow.trim(core.flow, out, name, status, retention, at, known === undefined ? undefined : known + 1)
        core.retained.set(counter, after)
        // This job is kept until its age passes: the upkeep wakes the object then, even if nothing else happens.
        if (retention.ageMs !== undefined) yield* Upkeep.due(core.handle.timers, at + retention.ageMs + 1)
      }
      yield* trimChained(core, out, at)
    }
    return {
      pending: out.pending,
      after: Effect.zipRight(
        Effect.sync(() => core.canceling.delete(key)),
        tell(core, out.events, out.finished)
      )
    }
  })
}
