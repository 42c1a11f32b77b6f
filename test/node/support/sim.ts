/**
 * Drives one simulated object fast, and checks the engine's durable invariants.
 *
 * `TestClock.adjust` waits three real `setTimeout(0)` ticks per call (and per
 * sleep it fires) to let fibers settle, which is ~5 ms: too slow for thousands
 * of histories. Every fake here is synchronous, so fibers settle in microtasks;
 * `pump` yields until the object is quiet, and `advanceTo` moves the same
 * `TestClock` (its `TestClock.Data` state) sleep by sleep, exactly like
 * `TestClock.adjust` does minus the real-timer polling.
 */
import { Cause, Chunk, Deferred, Effect, type Exit, Fiber, Ref, Scheduler as EffectScheduler, TestClock } from "effect"
import * as AlarmService from "../../../src/engine/AlarmService.js"
import * as Scheduler from "../../../src/engine/Scheduler.js"
import type { Row } from "../../../src/engine/StorageService.js"
import type { MemoryStorage } from "../../../src/testing/MemoryStorage.js"
import type * as TestDurability from "../../../src/testing/TestDurability.js"
import { HarnessFailure, type Verdict } from "../../shared/Verdict.js"

/** Changes whenever the object did something observable (statements, alarm, sleeps, handler calls). */
export type Fingerprint = () => string

const clockState = Effect.flatMap(TestClock.testClock(), (clock) => {
  const state = (clock as unknown as { readonly clockState?: unknown }).clockState
  return typeof state === "object" && state !== null && Ref.RefTypeId in state
    ? Effect.succeed(state as Ref.Ref<TestClock.Data>)
    : Effect.die(new Error("TestClock internals changed: no clockState Ref (update test/node/support/sim.ts)"))
})

/** The earliest pending sleep on the TestClock, if any. */
export const nextSleep: Effect.Effect<number | null> = Effect.map(
  TestClock.sleeps(),
  (sleeps) => Chunk.reduce(sleeps, null as number | null, (min, at) => (min === null || at < min ? at : min))
)

/** Counts the tasks the Effect scheduler is given, so `pump` can tell when only its own fiber runs. */
class CountingScheduler implements EffectScheduler.Scheduler {
  scheduled = 0
  constructor(private readonly inner: EffectScheduler.Scheduler) {}
  shouldYield(fiber: Fiber.RuntimeFiber<unknown, unknown>) {
    return this.inner.shouldYield(fiber)
  }
  scheduleTask(task: EffectScheduler.Task, priority: number, fiber?: Fiber.RuntimeFiber<unknown, unknown>) {
    this.scheduled++
    this.inner.scheduleTask(task, priority, fiber)
  }
}

const counting = new CountingScheduler(EffectScheduler.defaultScheduler)

/** Runs `effect`, and every fiber it forks, on the counting scheduler (makes `pump` exact and fast). */
export const counted = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withScheduler(effect, counting)

/**
 * Yields until the object is quiet: no fiber but this one was scheduled and
 * `fingerprint` did not change for a few rounds in a row. Outside `counted`,
 * falls back to many rounds without a fingerprint change.
 */
export const pump = (fingerprint: Fingerprint): Effect.Effect<void> =>
  Effect.gen(function*() {
    let last = fingerprint()
    let quiet = 0
    for (let round = 0; round < 50_000; round++) {
      const before = counting.scheduled
      yield* Effect.yieldNow()
      const mine = counting.scheduled - before
      const next = fingerprint()
      const still = next === last && mine <= 1
      last = next
      quiet = still ? quiet + 1 : 0
      if (quiet === (mine === 1 ? 4 : 32)) return
    }
    // The driver's budget, not a finding: a busy loop in the engine would show as this too.
    return yield* Effect.die(new HarnessFailure("pump: the object never went quiet within 50 000 rounds"))
  })

/** Moves the TestClock to `target`, waking every sleep due on the way in time order (like `TestClock.adjust`). */
export const advanceTo = (target: number, fingerprint: Fingerprint): Effect.Effect<void> =>
  Effect.gen(function*() {
    const state = yield* clockState
    for (;;) {
      yield* pump(fingerprint)
      const data = yield* Ref.get(state)
      let first: readonly [number, Deferred.Deferred<void>] | undefined
      for (const sleep of data.sleeps) if (first === undefined || sleep[0] < first[0]) first = sleep
      if (first === undefined || first[0] > target) {
        if (target > data.instant) yield* Ref.set(state, TestClock.makeData(target, data.sleeps))
        return yield* pump(fingerprint)
      }
      const woken = first
      yield* Ref.set(
        state,
        TestClock.makeData(Math.max(data.instant, woken[0]), Chunk.filter(data.sleeps, (sleep) => sleep !== woken))
      )
      yield* Deferred.succeed(woken[1], undefined)
    }
  })

/** Runs `effect` in a fiber and moves the clock sleep by sleep until it ends (at most `maxSteps` sleeps). */
export const runTimed = <A, E>(
  effect: Effect.Effect<A, E>,
  fingerprint: Fingerprint,
  maxSteps = 200
): Effect.Effect<Exit.Exit<A, E>> =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    for (let step = 0;; step++) {
      yield* pump(fingerprint)
      const done = fiber.unsafePoll()
      if (done !== null) return done
      const next = yield* nextSleep
      if (next === null) {
        // Waiting on nothing the clock can wake: it never ends.
        yield* Fiber.interrupt(fiber)
        return yield* Effect.die(new Error(`runTimed: stuck after ${step} clock steps, with no sleep to wake it`))
      }
      if (step >= maxSteps) {
        yield* Fiber.interrupt(fiber)
        return yield* Effect.die(new HarnessFailure(`runTimed: not done within the driver's ${maxSteps} clock steps`))
      }
      yield* advanceTo(next, fingerprint)
    }
  })

export type FireResult =
  | { readonly _tag: "NoAlarm" }
  | { readonly _tag: "Fired"; readonly at: number; readonly exit: Exit.Exit<unknown, unknown> }

/**
 * What the platform does when the physical alarm is due: moves the clock to the
 * alarm, clears it, runs `alarm()` to its end (driving the clock meanwhile).
 */
export const fireAlarm = (object: TestDurability.TestObject, fingerprint: Fingerprint): Effect.Effect<FireResult> =>
  Effect.gen(function*() {
    for (;;) {
      const at = object.storage.alarmAt
      if (at === null) return { _tag: "NoAlarm" } as const
      const now = yield* TestClock.currentTimeMillis
      if (at > now) {
        // Timers on the way may move or clear the alarm: look again once there.
        yield* advanceTo(at, fingerprint)
        continue
      }
      object.storage.takeAlarm()
      const exit = yield* runTimed(
        object.run(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm({ isRetry: false, retryCount: 0 }))),
        fingerprint
      )
      return { _tag: "Fired", at: now, exit } as const
    }
  })

/** The early timer of the instance, if armed. */
export const timerAt = (object: TestDurability.TestObject): Effect.Effect<number | null> =>
  object.run(Effect.flatMap(AlarmService.AlarmService, (alarms) => alarms.timerAt))

const created = new WeakMap<MemoryStorage, Set<string>>()

/** Whether `table` exists (remembered once it does: these tables are never dropped here). */
const exists = (storage: MemoryStorage, table: string): boolean => {
  const known = created.get(storage) ?? new Set<string>()
  created.set(storage, known)
  if (known.has(table)) return true
  const found = storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", table).toArray()
  if (found.length > 0) known.add(table)
  return found.length > 0
}

/** Every row of `table` (none while the table does not exist yet). */
export const rows = (storage: MemoryStorage, table: string, key: string): ReadonlyArray<Row> =>
  exists(storage, table) ? storage.sql.exec(`SELECT * FROM ${table} ORDER BY ${key}`).toArray() : []

const TABLES = [["durability_calls", "id"], ["durability_alarms", "name"]] as const

/** The engine's durable timers: pending work as records are (the same wake-up invariant covers them). */
const TIMERS = "durability_timers"

const timerRows = (storage: MemoryStorage) =>
  exists(storage, TIMERS)
    ? storage.sql.exec(`SELECT owner || '/' || key AS key, at FROM ${TIMERS}`).toArray()
      .map((row) => ({ table: TIMERS, key: String(row.key), at: Number(row.at) }))
    : []

const pendingRows = (storage: MemoryStorage) => [
  ...TABLES.flatMap(([table, key]) =>
    exists(storage, table)
      ? storage.sql.exec(`SELECT ${key} AS key, next_attempt_at AS at FROM ${table} WHERE status = 'pending'`)
        .toArray().map((row) => ({ table, key: String(row.key), at: Number(row.at) }))
      : []
  ),
  ...timerRows(storage)
]

export const pendingCount = (storage: MemoryStorage): number => pendingRows(storage).length

/**
 * Brings the object to rest: runs the early timer and the physical alarm, in
 * time order, until nothing is pending (at most `maxWakeups` wake-ups). Returns
 * how many wake-ups it took, or a description of why it could not finish: a
 * lost wake-up (pending rows and nothing to wake them), or, with `budgetSpent`,
 * the driver's `maxWakeups` spent while every wake-up was there.
 */
export const drain = (
  object: TestDurability.TestObject,
  /** Where to read the rows (the storage under any fault wrapper: these reads must not count). */
  inspect: MemoryStorage,
  fingerprint: Fingerprint,
  afterEach: Effect.Effect<void> = Effect.void,
  maxWakeups = 60
): Effect.Effect<{ readonly wakeups: number; readonly stuck?: string | undefined; readonly budgetSpent?: boolean }> =>
  Effect.gen(function*() {
    for (let wakeups = 0; wakeups <= maxWakeups; wakeups++) {
      yield* pump(fingerprint)
      if (pendingCount(inspect) === 0) return { wakeups }
      const timer = yield* timerAt(object)
      const alarm = object.storage.alarmAt
      if (timer !== null && (alarm === null || timer < alarm)) {
        yield* advanceTo(timer, fingerprint)
      } else if (alarm !== null) {
        yield* fireAlarm(object, fingerprint)
      } else {
        const sleep = yield* nextSleep
        if (sleep === null) return { wakeups, stuck: "pending rows with neither an alarm, a timer nor a sleep" }
        yield* advanceTo(sleep, fingerprint)
      }
      yield* afterEach
    }
    return { wakeups: maxWakeups, stuck: `still pending after the driver's ${maxWakeups} wake-ups`, budgetSpent: true }
  })

export interface Limits {
  readonly minDelayMs: number
  readonly maxAttempts: (table: "durability_calls" | "durability_alarms", row: Row) => number
}

const isNum = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

/** Every row consistent on its own: what a torn (non-atomic) write would leave behind. */
export const checkRows = (
  storage: MemoryStorage,
  limits: Limits,
  calls: ReadonlyArray<Row> = rows(storage, "durability_calls", "id"),
  alarms: ReadonlyArray<Row> = rows(storage, "durability_alarms", "name")
): Array<string> => {
  const violations: Array<string> = []
  const bad = (row: Row, what: string) => violations.push(`${JSON.stringify(row)}: ${what}`)
  for (const row of calls) {
    const max = limits.maxAttempts("durability_calls", row)
    if (!isNum(row.attempt) || row.attempt < 0 || row.attempt > max) bad(row, `attempt outside [0, ${max}]`)
    if (typeof row.generation_id !== "string" || row.generation_id === "") bad(row, "no generation")
    if (!isNum(row.next_attempt_at) || !isNum(row.created_at)) bad(row, "times are not numbers")
    switch (row.status) {
      case "pending":
        if (row.result !== null || row.completed_at !== null) bad(row, "pending with a result")
        break
      case "completed":
        if (typeof row.result !== "string" || !isNum(row.completed_at)) bad(row, "completed without result")
        if (row.last_error !== null) bad(row, "completed with an error")
        if (!isNum(row.attempt) || row.attempt < 1) bad(row, "completed without an attempt")
        break
      case "failed":
        if (typeof row.last_error !== "string" || typeof row.last_error_name !== "string") {
          bad(row, "failed without an error")
        }
        if (row.result !== null) bad(row, "failed with a result")
        if (!isNum(row.attempt) || row.attempt < 1) bad(row, "failed without an attempt")
        break
      default:
        bad(row, "unknown status")
    }
  }
  for (const row of alarms) {
    const max = limits.maxAttempts("durability_alarms", row)
    if (!isNum(row.attempt) || row.attempt < 0 || row.attempt > max) bad(row, `attempt outside [0, ${max}]`)
    if (typeof row.generation_id !== "string" || row.generation_id === "") bad(row, "no generation")
    if (!isNum(row.scheduled_at) || !isNum(row.next_attempt_at) || row.next_attempt_at < row.scheduled_at) {
      bad(row, "next attempt before the scheduled time")
    }
    if (row.status === "pending" && row.attempt === 0 && row.last_error !== null) bad(row, "fresh occurrence with an error")
    if (row.status === "failed" && (typeof row.last_error !== "string" || !isNum(row.attempt) || row.attempt < 1)) {
      bad(row, "failed without an error or an attempt")
    }
    if (row.status !== "pending" && row.status !== "failed") bad(row, "unknown status")
  }
  return violations
}

/**
 * Lost wake-up: every pending row has the physical alarm or the early timer at
 * or before max(its due time, now + alarmMinDelayMs).
 */
export const checkWakeup = (
  storage: MemoryStorage,
  now: number,
  timer: number | null,
  minDelayMs: number,
  /** The rows of both tables, when already read. */
  read?: { readonly calls: ReadonlyArray<Row>; readonly alarms: ReadonlyArray<Row> }
): Array<string> => {
  const violations: Array<string> = []
  const alarm = storage.alarmAt
  const pending = read === undefined ? pendingRows(storage) : [
    ...[
      ...read.calls.map((row) => ({ table: "durability_calls", key: String(row.id), at: Number(row.next_attempt_at), row })),
      ...read.alarms.map((row) => ({ table: "durability_alarms", key: String(row.name), at: Number(row.next_attempt_at), row }))
    ].filter((entry) => entry.row.status === "pending"),
    ...timerRows(storage)
  ]
  for (const row of pending) {
    const bound = Math.max(row.at, now + minDelayMs)
    const covered = (alarm !== null && alarm <= bound) || (timer !== null && timer <= bound)
    if (!covered) {
      violations.push(`lost wake-up: ${row.table} "${row.key}" due ${row.at} at ${now}: alarm ${alarm}, timer ${timer}`)
    }
  }
  return violations
}

/**
 * A logical image of what the engine and the capabilities store (their rows,
 * the applied migrations, the alarm), to compare before/after a rejected call.
 */
export const image = (storage: MemoryStorage): string =>
  JSON.stringify([
    storage.alarmAt,
    rows(storage, "durability_calls", "id"),
    rows(storage, "durability_alarms", "name"),
    rows(storage, TIMERS, "owner, key"),
    rows(storage, "durability_migrations", "id").map((row) => row.name),
    storage.sql.exec("SELECT name FROM sqlite_master ORDER BY name").toArray()
  ])

/**
 * Runs a history, recording a `HarnessFailure` it throws (a budget of the driver spent) as the
 * harness problem it is; any other failure goes on as it is.
 */
export const recordingHarness = <E, R>(effect: Effect.Effect<void, E, R>, verdict: Verdict, where: string): Effect.Effect<void, E, R> =>
  Effect.catchAllCause(effect, (cause) => {
    const thrown = Cause.squash(cause)
    if (!(thrown instanceof HarnessFailure)) return Effect.failCause(cause)
    verdict.harness(`${where}: ${thrown.message}`)
    return Effect.void
  })
