/**
 * Fault injection at the storage boundary (issue 5, part 2).
 *
 * One representative scenario on one simulated object (operations and named
 * alarms: migrations, registrations with eager starts, a duplicate, a
 * failing-then-succeeding handler retried by the early timer, one retried by
 * the physical alarm, a fatal failure, a replaced named alarm, a purge, a
 * physical alarm pass) runs once fault-free, counting the N SQL statements and
 * M alarm writes it issues; then once per k in 1..N with the k-th statement
 * failing and twice per k in 1..M with the k-th alarm write failing
 * (`FaultyStorage`): as a rejected promise, which workerd reports after the
 * transaction committed, and as a synchronous throw, which rolls the transaction
 * back. A rejected call is fine: the caller sees it, storage must
 * be exactly as before the call, and the caller retries it once. Then the object
 * recovers on its own (early timer, physical alarm, until nothing is pending).
 *
 * Checked after every step: every row consistent (nothing half-written), attempt
 * ≤ maxAttempts, lost wake-up (any pending row ⇒ the physical alarm or the early
 * timer at or before max(its due time, now + alarmMinDelayMs)); after an alarm
 * write failed inside an alarm pass, the fallback alarm is armed. At the end: no
 * lost work (every registration completed or failed as its policy dictates,
 * every scheduled name ran its latest occurrence, nothing pending after a
 * restart), and no completion of a stale generation.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, TestContext } from "effect"
import { NonRetryableError } from "../../src/shared/Errors.js"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Operations from "../../src/operations/Operations.js"
import * as StorageService from "../../src/engine/StorageService.js"
import type { Row } from "../../src/engine/StorageService.js"
import * as FaultyStorage from "../../src/testing/FaultyStorage.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../src/testing/TestDurability.js"
import * as Sim from "./support/sim.js"

const MIN_DELAY = 15_000
const MAX_ATTEMPTS = 5

interface HandlerCall {
  readonly key: string
  readonly attempt: number
  readonly at: number
  /** Operations: the row's generation when the handler ran; alarms: the idempotency key. */
  readonly generation: string
  readonly outcome: "ok" | "fail"
}

type Plan =
  | {
    readonly kind: FaultyStorage.FaultKind
    readonly call: number
    /** How a failed alarm write surfaces (see FaultyStorage). */
    readonly alarmFaults: "reject" | "throw"
  }
  | undefined

interface RunResult {
  readonly sql: number
  readonly alarm: number
  readonly injected: ReadonlyArray<FaultyStorage.InjectedFault>
  readonly rejected: ReadonlyArray<string>
  readonly violations: ReadonlyArray<string>
  readonly passAlarmFaults: number
  readonly fallbacks: number
}

const generationOf = (storage: MemoryStorage.MemoryStorage, table: string, key: string, value: string) =>
  String(storage.sql.exec(`SELECT generation_id FROM ${table} WHERE ${key} = ?`, value).toArray()[0]?.generation_id)

const scenario = (plan: Plan): Effect.Effect<RunResult, unknown> =>
  Effect.gen(function*() {
    const inner = yield* MemoryStorage.make
    const storage = FaultyStorage.make(inner, { alarmFaults: plan?.alarmFaults })
    if (plan !== undefined) storage.failCall(plan.kind, plan.call)
    const log: Array<HandlerCall> = []
    const violations: Array<string> = []
    const rejected: Array<string> = []
    let passAlarmFaults = 0
    const fingerprint: Sim.Fingerprint = () => `${inner.statements.length}:${inner.alarmAt}:${log.length}`
    const object = yield* TestDurability.make({ alarms: "manual", storage, scheduler: { alarmMinDelayMs: MIN_DELAY } })

    const record = (key: string, attempt: number, generation: string, outcome: HandlerCall["outcome"]) =>
      Effect.map(Clock.currentTimeMillis, (at) => void log.push({ key, attempt, at, generation, outcome }))
    const failFirst = (call: Operations.DurableCall<unknown>, retryable: boolean) =>
      Effect.gen(function*() {
        const generation = generationOf(inner, "durability_calls", "id", call.id)
        if (call.attempt === 1 || !retryable) {
          yield* record(call.id, call.attempt, generation, "fail")
          return yield* (retryable ? Effect.fail(new Error("transient")) : new NonRetryableError({ message: "fatal" }))
        }
        yield* record(call.id, call.attempt, generation, "ok")
        return { id: call.id, attempt: call.attempt }
      })
    const succeed = (call: Operations.DurableCall<unknown>) =>
      Effect.gen(function*() {
        yield* record(call.id, call.attempt, generationOf(inner, "durability_calls", "id", call.id), "ok")
        return { id: call.id, attempt: call.attempt }
      })
    const retries = (delay: number) => ({ maxAttempts: MAX_ATTEMPTS, delay: () => delay })
    const definitions = {
      charge: Operations.operation({ retries: retries(1_000), handler: succeed }),
      flaky: Operations.operation({ retries: retries(1_000), handler: (call) => failFirst(call, true) }),
      slowRetry: Operations.operation({ retries: retries(20_000), handler: (call) => failFirst(call, true) }),
      doomed: Operations.operation({ retries: retries(1_000), handler: (call) => failFirst(call, false) })
    }
    const alarmHandler = (failFirstAttempt: boolean) => (info: NamedAlarms.DurableAlarmInfo) =>
      Effect.gen(function*() {
        const fails = failFirstAttempt && info.attempt === 1
        yield* record(info.name, info.attempt, info.idempotencyKey, fails ? "fail" : "ok")
        if (fails) return yield* Effect.fail(new Error("transient"))
      })
    const alarmDefinitions = {
      tick: NamedAlarms.alarm({ retries: retries(1_000), handler: alarmHandler(false) }),
      flap: NamedAlarms.alarm({ retries: retries(1_000), handler: alarmHandler(true) })
    }

    const limits: Sim.Limits = { minDelayMs: MIN_DELAY, maxAttempts: () => MAX_ATTEMPTS }
    const check = (where: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const found = [
          ...Sim.checkRows(inner, limits),
          ...Sim.checkWakeup(inner, now, yield* Sim.timerAt(object), MIN_DELAY)
        ]
        for (const violation of found) violations.push(`after ${where}: ${violation}`)
      })

    /** A call of the application: may be rejected (then storage is unchanged) and is retried once. */
    const call = <A>(name: string, effect: Effect.Effect<A, unknown>) =>
      Effect.gen(function*() {
        // Only an injected fault may reject a call (nothing else is wrong with them).
        const before = storage.armed() > 0 ? Sim.image(inner) : undefined
        let exit = yield* Effect.exit(effect)
        if (Exit.isFailure(exit)) {
          rejected.push(name)
          if (before === undefined) violations.push(`${name} rejected without a fault: ${String(exit.cause)}`)
          else if (Sim.image(inner) !== before) violations.push(`rejected ${name} changed storage`)
          yield* Sim.pump(fingerprint)
          exit = yield* Effect.exit(effect)
        }
        yield* Sim.pump(fingerprint)
        yield* check(name)
        if (Exit.isFailure(exit)) {
          violations.push(`${name} was rejected twice: ${String(exit.cause)}`)
          return yield* Effect.fail(`${name} unavailable`)
        }
        return exit.value
      })

    /** The platform firing the physical alarm; a fault inside it must leave the fallback alarm armed. */
    const fire = (name: string) =>
      Effect.gen(function*() {
        const faultsBefore = storage.injected.length
        const fired = yield* Sim.fireAlarm(object, fingerprint)
        if (fired._tag === "Fired") {
          if (Exit.isFailure(fired.exit)) violations.push(`${name}: alarm() threw to the platform: ${fired.exit.cause}`)
          const during = storage.injected.slice(faultsBefore)
          if (during.some((fault) => fault.kind === "alarm")) {
            passAlarmFaults++
            if (Sim.pendingCount(inner) > 0 && inner.alarmAt === null) {
              violations.push(`${name}: an alarm write failed in the pass and no fallback alarm is armed`)
            }
          }
        }
        yield* check(name)
      })

    const ops = yield* call("Operations.make", object.run(Operations.make(definitions)))
    const alarms = yield* call("NamedAlarms.make", object.run(NamedAlarms.make(alarmDefinitions)))
    for (const [operation, id] of [["charge", "a"], ["flaky", "b"], ["slowRetry", "c"], ["doomed", "d"]] as const) {
      yield* call(`register ${id}`, object.run(ops.register(operation, { id, payload: null })))
    }
    yield* call("schedule flap", object.run(alarms.schedule("flap", 2_000)))
    yield* call("schedule tick", object.run(alarms.schedule("tick", 20_000)))
    yield* call("replace tick", object.run(alarms.schedule("tick", 25_000)))
    const tickGeneration = generationOf(inner, "durability_alarms", "name", "tick")

    // Early timer: b's retry at 1 000, flap at 2 000 and its retry at 3 000.
    yield* Sim.advanceTo(5_000, fingerprint)
    yield* check("advance to 5000")
    yield* call("register e", object.run(ops.register("charge", { id: "e", payload: null })))
    yield* call("register g", object.run(ops.register("slowRetry", { id: "g", payload: null })))
    yield* call("register a again", object.run(ops.register("charge", { id: "a", payload: null })))
    yield* call("purge", object.run(ops.purgeBefore(1)))
    // The physical alarm: g's retry and tick, both at 25 000.
    yield* fire("alarm pass")

    // Recovery: the object's own wake-ups until nothing is pending.
    let n = 0
    const drained = yield* Sim.drain(object, inner, fingerprint, Effect.suspend(() => check(`wake-up ${++n}`)))
    if (drained.stuck !== undefined) violations.push(`recovery: ${drained.stuck}`)

    // No lost work.
    const calls = new Map(Sim.rows(inner, "durability_calls", "id").map((row) => [String(row.id), row] as const))
    if ([...calls.keys()].join() !== "e,g") violations.push(`calls left: ${[...calls.keys()].join()}, want e,g`)
    for (const id of ["e", "g"]) {
      const row: Row | undefined = calls.get(id)
      if (row?.status !== "completed") {
        violations.push(`${id} ended ${String(row?.status)}, want completed`)
        continue
      }
      // The stored result came from a run of this very generation.
      const result = JSON.parse(String(row.result)) as { readonly value: { readonly attempt: number } }
      const producer = log.find((entry) => entry.key === id && entry.attempt === result.value.attempt)
      if (producer === undefined || producer.generation !== row.generation_id || producer.outcome !== "ok") {
        violations.push(`${id}: result ${String(row.result)} not produced by its own generation`)
      }
    }
    const leftAlarms = Sim.rows(inner, "durability_alarms", "name")
    if (leftAlarms.length > 0) violations.push(`named alarms left: ${JSON.stringify(leftAlarms)}`)
    const tickRuns = log.filter((entry) => entry.key === "tick")
    if (!tickRuns.some((entry) => entry.outcome === "ok" && entry.generation === `durability-alarm:v1:${tickGeneration}`)) {
      violations.push("tick's latest occurrence never ran")
    }
    if (tickRuns.some((entry) => entry.generation !== `durability-alarm:v1:${tickGeneration}`)) {
      violations.push("tick's replaced occurrence ran")
    }
    if (!log.some((entry) => entry.key === "flap" && entry.outcome === "ok")) violations.push("flap never succeeded")
    for (const entry of log) {
      if (entry.attempt > MAX_ATTEMPTS) violations.push(`${entry.key} ran attempt ${entry.attempt}`)
    }
    // Recovery needs nothing from memory: a new instance finds nothing pending. An alarm may be
    // left (a fallback armed after a failed pass): it fires once, runs nothing and clears itself.
    const next = yield* object.restart
    const runs = log.length
    yield* Sim.fireAlarm(next, fingerprint)
    if (Sim.pendingCount(inner) > 0 || inner.alarmAt !== null || log.length !== runs) {
      violations.push("work or an alarm left after recovery")
    }
    yield* next.evict

    const fallbacks = (yield* object.background.reports).filter((r) => r.event === "durability.alarm.failed").length
    return {
      sql: storage.calls("sql"),
      alarm: storage.calls("alarm"),
      injected: storage.injected,
      rejected,
      violations,
      passAlarmFaults,
      fallbacks
    }
  }).pipe(Effect.scoped, Sim.counted, Effect.provide(TestContext.TestContext))

describe("fault injection at the storage boundary", () => {
  it.effect("an alarm write rejected after its transaction committed is written again, or else forgotten", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStorage.make
      const storage = FaultyStorage.make(inner)
      const service = yield* StorageService.make(storage)
      const settle = Effect.promise(() => Promise.resolve()).pipe(Effect.repeatN(3))
      storage.failNext("alarm")
      yield* service.transaction(service.setAlarm(5_000))
      yield* settle
      expect(storage.injected).toHaveLength(1)
      expect(inner.alarmAt).toBe(5_000)
      expect(yield* service.alarm).toBe(5_000)
      // The write and its retry both fail: the service no longer claims an alarm it does not have,
      // so the next reconciliation sets it.
      storage.failCall("alarm", storage.calls("alarm") + 1)
      storage.failCall("alarm", storage.calls("alarm") + 2)
      yield* service.transaction(service.setAlarm(9_000))
      yield* settle
      expect(storage.injected).toHaveLength(3)
      expect(inner.alarmAt).toBe(5_000)
      expect(yield* service.alarm).toBeUndefined()
    }))

  it.effect("every statement and every alarm write of the scenario fails once; the invariants hold", () =>
    Effect.gen(function*() {
      const clean = yield* scenario(undefined)
      expect(clean.violations).toEqual([])
      expect(clean.rejected).toEqual([])
      const figures = {
        statements: clean.sql,
        alarmWrites: clean.alarm,
        runs: 0,
        faultsInjected: 0,
        rejectedCalls: 0,
        passAlarmFaults: 0,
        fallbackAlarms: 0,
        violations: 0
      }
      const failures: Array<string> = []
      const plans = [
        ...Array.from({ length: clean.sql }, (_, i) => ({ kind: "sql" as const, call: i + 1, alarmFaults: "reject" as const })),
        ...(["reject", "throw"] as const).flatMap((alarmFaults) =>
          Array.from({ length: clean.alarm }, (_, i) => ({ kind: "alarm" as const, call: i + 1, alarmFaults }))
        )
      ]
      const cpu = process.cpuUsage()
      for (const plan of plans) {
        const run = yield* scenario(plan)
        figures.runs++
        figures.faultsInjected += run.injected.length
        figures.rejectedCalls += run.rejected.length
        figures.passAlarmFaults += run.passAlarmFaults
        figures.fallbackAlarms += run.fallbacks
        figures.violations += run.violations.length
        const name = `${plan.kind}${plan.kind === "alarm" ? ` (${plan.alarmFaults})` : ""} #${plan.call}`
        if (run.injected.length !== 1) failures.push(`${name}: ${run.injected.length} faults injected`)
        for (const violation of run.violations) {
          failures.push(`${name} (${run.injected[0]?.target.slice(0, 80)}): ${violation}`)
        }
      }
      const cpuSeconds = (process.cpuUsage(cpu).user / 1e6).toFixed(1)
      console.log(`fault injection: ${JSON.stringify(figures)}, ${cpuSeconds}s CPU`)
      expect(failures).toEqual([])
      expect(figures.runs).toBe(clean.sql + 2 * clean.alarm)
    }), 120_000)
})
