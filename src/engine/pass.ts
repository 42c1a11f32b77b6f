/**
 * An alarm pass: every table's due rows (a batch each), run under the shared permits, raced against
 * the platform's time limit. A pass started by the platform re-arms the physical alarm before any
 * work runs, hands off (returns, the work continuing) before `alarmHandoffMs`, and after a failure
 * arms its own fallback alarm, so the platform's few retries are only the last resort.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Background from "./Background.js"
import type { StorageError } from "../shared/Errors.js"
import type { AlarmRetryInfo } from "./SchedulerConfig.js"
import * as Attempt from "./attempt.js"
import type { Start } from "./participant.js"
import { errorOf } from "../shared/cause.js"
import type { Engine, Run } from "./engine.js"
import * as Fork from "../shared/fork.js"
import type { AlarmInvocationInfo } from "../shared/platform.js"

/** The due rows one table's share of a pass took (queued, so other passes and the timer leave them). */
interface DueBatch {
  readonly run: Run
  /** Taken keys not started yet. */
  readonly waiting: Set<string>
  readonly keys: ReadonlyArray<string>
  /** Each key's rank among those waiting for its group's slot (`Dispatch.rank`). */
  readonly ranks: ReadonlyMap<string, ReadonlyArray<number>> | undefined
}

/** Takes up to a batch of the table's due rows. Pair with `release`. */
const takeDue = (run: Run, now: number): Effect.Effect<DueBatch, StorageError> => {
  const { participant } = run
  const batch = participant.dueBatchSize
  // Rows another pass already took are left to it (and do not count against this batch).
  return Effect.map(run.engine.storage.exec(participant.sql.due, [now, batch + participant.queued.size]), (scanned) => {
    const taken = scanned.filter((row) => !participant.queued.has(String(row.key))).slice(0, batch)
    const keys = taken.map((row) => String(row.key))
    for (const key of keys) participant.queued.add(key)
    const rank = participant.table.dispatch?.rank
    const ranks = rank === undefined ? undefined : new Map(taken.map((row) => [String(row.key), rank.of(row)]))
    return { run, waiting: new Set(keys), keys, ranks }
  })
}

/** Gives back the keys of a batch that never started (the pass failed or was interrupted). */
const release = (batch: DueBatch): void => {
  for (const key of batch.waiting) batch.run.participant.queued.delete(key)
  batch.waiting.clear()
}

/** The batch's keys by their group slot (`Dispatch.slotOf`), each in due order. */
const groupsOf = (run: Run, keys: ReadonlyArray<string>): ReadonlyArray<ReadonlyArray<string>> => {
  const slotOf = run.participant.table.dispatch?.slotOf
  if (slotOf === undefined) return [keys]
  const groups = new Map<unknown, Array<string>>()
  for (const key of keys) {
    const slot = slotOf(key)
    const group = groups.get(slot)
    if (group === undefined) groups.set(slot, [key])
    else group.push(key)
  }
  return groups.size === 0 ? [keys] : [...groups.values()]
}

/**
 * Runs a taken batch under the pool: this fiber starts each row as a permit frees up (in order),
 * then awaits every outcome; every row gets its chance, then the first infrastructure failure fails the pass.
 */
const runBatch = (batch: DueBatch, now: number, platform: AlarmInvocationInfo | undefined) =>
  Effect.gen(function*() {
    const { run, waiting } = batch
    const outcomes: Array<Deferred.Deferred<void, StorageError>> = []
    let failed: Exit.Exit<void, StorageError> | undefined
    const taken = (key: string) => {
      waiting.delete(key)
      run.participant.queued.delete(key)
    }
    // Queued while it waits for its permit, so the timer and other passes leave it.
    const launch = (key: string, start: Omit<Start, "permit">) =>
      Effect.map(Attempt.launch(run, key, start), (outcome) => {
        outcomes.push(outcome)
        taken(key)
      })
    // Each group's keys in order: run here while a slot and a permit are free (a plain value settles with
    // no fiber); from the first that must wait on, launched in turn (so none overtakes it).
    const launchAll = (keys: ReadonlyArray<string>) => {
      let inline = true
      return Effect.forEach(keys, (key) => {
        const start = { platform, dueBy: now, rank: batch.ranks?.get(key) }
        if (!inline) return launch(key, start)
        return Effect.flatMap(Attempt.runNow(run, key, start, () => taken(key)), (ran) => {
          if (ran === undefined) {
            inline = false
            return launch(key, start)
          }
          if (!Exit.isExit(ran)) outcomes.push(ran)
          else if (failed === undefined && Exit.isFailure(ran)) failed = ran
          return Effect.void
        })
      }, { discard: true })
    }
    const groups = groupsOf(run, batch.keys)
    yield* groups.length === 1
      ? launchAll(groups[0]!)
      // One launcher per group: a group waiting for its own slot never holds up another.
      : Effect.forEach(groups, launchAll, { concurrency: "unbounded", discard: true })
    for (const outcome of outcomes) {
      const exit = yield* Effect.exit(Deferred.await(outcome))
      if (failed === undefined && Exit.isFailure(exit)) failed = exit
    }
    if (failed !== undefined) return yield* failed
  })

const runDue = (engine: Engine, startedAt: number, info: AlarmInvocationInfo | undefined) =>
  Effect.suspend(() => {
    engine.upkeep.passes.running++
    const batches: Array<DueBatch> = []
    return engine.alarms.whileAwake(Effect.gen(function*() {
      // Timers first (the due scans then see what they made pending); only tables with timers or leases have any.
      if (engine.timers !== undefined) yield* engine.timers.fireDue(engine, startedAt)
      for (const participant of engine.participants) batches.push(yield* takeDue({ engine, participant }, startedAt))
      // The pass can take long (a handler attached to, a full pool): arm the timer now for later work
      // it did not take, whenever it is due (the object is awake meanwhile). Work already due waits for
      // this pass to end.
      yield* engine.upkeep.reported(engine.upkeep.refreshTimer(startedAt))
      yield* Effect.forEach(batches, (batch) => runBatch(batch, startedAt, info), {
        concurrency: "unbounded",
        discard: true
      })
    })).pipe(Effect.ensuring(Effect.sync(() => {
      engine.upkeep.passes.running--
      batches.forEach(release)
    })))
  })

/** After a failed pass: the fallback alarm, the report and the `onAlarmRetry` hook. */
const armFallback = (engine: Engine, cause: unknown, info: AlarmInvocationInfo | undefined) =>
  Effect.gen(function*() {
    const { background, config } = engine
    yield* engine.alarms.fallback
    const error = Background.serializeError(cause)
    yield* background.report("durability.alarm.failed", { error, retryInMs: config.alarmMinDelayMs })
    const hook = config.onAlarmRetry
    if (hook === undefined) return
    const retryInfo: AlarmRetryInfo = {
      error,
      retryInMs: config.alarmMinDelayMs,
      ...(info === undefined ? {} : { isRetry: info.isRetry, retryCount: info.retryCount }),
      ...(config.objectId === undefined ? {} : { objectId: config.objectId })
    }
    const hookFailed = (failure: unknown) =>
      background.report("durability.alarm.retry_hook_failed", { error: Background.serializeError(failure) })
    try {
      const returned = hook(retryInfo)
      if (returned !== undefined && typeof returned.then === "function") {
        yield* Background.waitUntilOr(background, returned, hookFailed)
      }
    } catch (failure) {
      yield* hookFailed(failure)
    }
  })

/** A pass started by the early timer: it leaves the physical alarm alone and runs to the end. */
export const timerPass = (engine: Engine): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* runDue(engine, yield* Clock.currentTimeMillis, undefined)
    yield* engine.upkeep.write(Effect.void)
  }).pipe(
    Effect.catchAllCause((cause) => {
      const error = errorOf(cause)
      return Effect.catchAllCause(
        armFallback(engine, error, undefined),
        () => engine.background.report("durability.background_execution.failed", { error: Background.serializeError(error) })
      )
    })
  )

/**
 * A pass started by the platform. Fails only when the pass failed AND its fallback alarm could not
 * be armed, so the platform's own retries are the last resort.
 */
export const alarmPass = (
  engine: Engine,
  info: AlarmInvocationInfo | undefined
): Effect.Effect<void, unknown> =>
  Effect.gen(function*() {
    // The platform consumed the alarm. Re-arm it before any work runs, so a crash in this pass is
    // recovered by our own alarm, not only by the platform's few retries.
    yield* engine.alarms.delivered
    yield* engine.storage.transaction(engine.upkeep.reconcile)
    const startedAt = yield* Clock.currentTimeMillis
    const work = yield* Fork.detached(runDue(engine, startedAt, info), engine.scope)
    const remaining = Math.max(0, engine.config.alarmHandoffMs - ((yield* Clock.currentTimeMillis) - startedAt))
    const finished = yield* Effect.timeoutOption(Fiber.await(work), Duration.millis(remaining))
    if (Option.isNone(finished)) {
      // Hand off before the platform's wall-time limit; the work keeps running and the next pass attaches to it.
      yield* engine.background.waitUntil(Fork.settled(work))
      yield* engine.alarms.handoff
      return
    }
    yield* finished.value
    yield* engine.upkeep.write(Effect.void)
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.catchAllCause(
        armFallback(engine, errorOf(cause), info),
        // Only now does the platform's limited retry take over.
        () => Effect.failCause(cause)
      )
    )
  )
