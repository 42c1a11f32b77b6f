/**
 * The engine and the `DurabilityScheduler` facade inside workerd: real SQLite
 * storage, the real alarm (which fires by itself), real timers and real
 * resets. `EngineObject` (worker.ts) runs the `TaskTable` participant with
 * handlers chosen by task id and records every handler call and alarm
 * delivery in its own tables, so the records survive a reset of the object.
 * isolatedStorage gives every test empty storage and no alarm.
 */
import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import { DurabilityScheduler, internals } from "../../src/facade/DurabilityScheduler.js"
import type { TaskRow } from "../shared/TaskTable.js"
import { WAIT_MS, waitFor } from "./support/lab.js"
import { IDLE, isIdle } from "./objects/idle.js"
import { type EngineObject, ENGINE_SETTINGS } from "./worker.js"

type Stub = DurableObjectStub<EngineObject>

const { alarmMinDelayMs, attemptTimeoutMs, maxAttempts, retryDelayMs } = ENGINE_SETTINGS

const fresh = (): { readonly id: DurableObjectId; readonly stub: Stub } => {
  const id = env.ENGINE_OBJECT.newUniqueId()
  return { id, stub: env.ENGINE_OBJECT.get(id) }
}

const rowOf = async (stub: Stub, id: string): Promise<TaskRow | undefined> =>
  (await stub.rows()).find((row) => row.id === id)

const waitForRow = (stub: Stub, id: string, done: (row: TaskRow) => boolean, timeoutMs = WAIT_MS) =>
  waitFor(() => rowOf(stub, id), (row) => row !== undefined && done(row), timeoutMs) as Promise<TaskRow>

const settled = (row: TaskRow) => row.status !== "pending"

/**
 * Due times are read from the object's clock in the same turn as the write (`registerIn`): one computed
 * from a `now` of an earlier call shrinks by however long the calls in between took.
 *
 * `PAST_WINDOW_MS`: how far beyond the early timer's window (`alarmMinDelayMs`) a task is due when only the
 * platform alarm may run it. The clock moves between the due's reading and the write's only by a few
 * synchronous statements (a preempted process loses milliseconds), so 200 ms keeps it outside by construction.
 *
 * `LOOK_MS`: added when a test reads state that only holds until that alarm fires (the alarm is still armed,
 * the row not yet claimed) after a reset. Real time is the point there, so it is a margin: the reads are at
 * most five calls, one of them a reset; with two CPU hogs beside the suite a call took ~100 ms at p99 and
 * ~250 ms at worst, so the 2.2 s before the alarm leave four times their p99 and about twice their worst.
 */
const PAST_WINDOW_MS = 200
const LOOK_MS = 1_000

/**
 * A barrier instead of a pause before a "nothing else ran" check: registers `ok-probe` due `afterMs` from
 * now and waits until it has completed. A pass starts due rows in due order, so by then anything due no
 * later than the probe (a retry that must not exist, a row that must have been rolled back) has started
 * and recorded its call, however slow the machine.
 */
const probe = async (stub: Stub, afterMs = 0): Promise<void> => {
  await stub.registerIn("ok-probe", afterMs)
  await waitForRow(stub, "ok-probe", settled)
}

/** Resets the object (its in-memory state and timers are gone; storage and alarm stay). Returns a new stub. */
const evict = async (id: DurableObjectId, stub: Stub): Promise<Stub> => {
  await expect(runInDurableObject(stub, (_instance, state) => state.abort("reset by the test"))).rejects.toThrow()
  return env.ENGINE_OBJECT.get(id)
}

/** The alarm a registration armed is max(due, now + alarmMinDelayMs) for the write's `now`. */
const expectAlarmFor = (
  registered: { readonly alarm: number | null; readonly before: number; readonly after: number },
  due: number
) => {
  expect(registered.alarm).not.toBeNull()
  expect(registered.alarm).toBeGreaterThanOrEqual(Math.max(due, registered.before + alarmMinDelayMs))
  expect(registered.alarm).toBeLessThanOrEqual(Math.max(due, registered.after + alarmMinDelayMs))
}

describe("the alarm is armed in the same transaction as the write", () => {
  it("sets the platform alarm to the due time when it is beyond the minimum delay", async () => {
    const { stub } = fresh()
    // Far beyond the window, so nothing can run before the checks below, however slow the machine.
    const registered = await stub.registerIn("ok-later", 60_000)
    const { due } = registered
    expectAlarmFor(registered, due)
    expect(registered.alarm).toBe(due)
    expect(await stub.alarmAt()).toBe(due)
    expect(await stub.rows()).toMatchObject([{ id: "ok-later", status: "pending", attempt: 0, next_attempt_at: due }])
    expect(await stub.calls()).toEqual([])
  })

  it("never sets the platform alarm sooner than the minimum delay; the early timer runs the work", async () => {
    const { stub } = fresh()
    // The platform alarm is at least alarmMinDelayMs after the write, 700 ms after the due time: the early
    // timer's fire, one synchronous attempt and its pass's reconciliation (which deletes the alarm) fit in
    // it with room (with two CPU hogs beside the suite, a timer turn or a call took ~250 ms at worst).
    const registered = await stub.registerIn("ok-soon", 300)
    const { due } = registered
    expectAlarmFor(registered, due)
    expect(registered.alarm).toBeGreaterThan(due)

    const row = await waitForRow(stub, "ok-soon", settled)
    expect(row).toMatchObject({ status: "completed", attempt: 1, result: JSON.stringify({ id: "ok-soon", attempt: 1 }) })
    const calls = await stub.calls()
    expect(calls).toHaveLength(1)
    // The in-memory early timer ran it (no platform alarm info), not before its due time.
    expect(calls[0]).toMatchObject({ id: "ok-soon", attempt: 1, from_alarm: 0 })
    expect(calls[0]!.at).toBeGreaterThanOrEqual(due)
    // The reconciliation follows the settle (possibly a turn later); once the alarm is gone, none can come.
    expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
    expect(await stub.alarms()).toEqual([])
  })

  it("a write whose body inserts a task and then fails leaves no row and no alarm", async () => {
    const { stub } = fresh()
    const now = await stub.now()
    const failure = await stub.writeThenFail("ok-doomed", now)
    expect(failure.message).toBe("the write body failed after its insert")
    expect(await stub.rows()).toEqual([])
    expect(await stub.alarmAt()).toBeNull()
    // Had the insert survived, the task (due at `now`, before the probe) would have run by the probe's end.
    await probe(stub)
    expect((await stub.calls()).map((call) => call.id)).toEqual(["ok-probe"])
    expect((await stub.rows()).map((row) => row.id)).toEqual(["ok-probe"])
    expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
  })

  it("a failed write leaves an armed alarm unchanged", async () => {
    const { stub } = fresh()
    // Far beyond the window, so the alarm cannot fire during the test, however slow the machine.
    const { due } = await stub.registerIn("ok-later", 60_000)
    expect(await stub.alarmAt()).toBe(due)

    // Its insert would have pulled the alarm in to now + minDelay: it is rolled back with the body.
    const failure = await stub.writeThenFail("ok-doomed", await stub.now())
    expect(failure.message).toBe("the write body failed after its insert")
    expect(await stub.alarmAt()).toBe(due)
    expect((await stub.rows()).map((row) => row.id)).toEqual(["ok-later"])

    // A later write still reconciles against the alarm that is really armed.
    await stub.register("ok-even-later", due + 1_000)
    expect(await stub.alarmAt()).toBe(due)
    // Had the doomed insert survived, it (due at `now`, before the probe) would have run by the probe's end.
    await probe(stub)
    expect((await stub.calls()).map((call) => call.id)).toEqual(["ok-probe"])
    // The probe pulled the alarm in; once it completed, the engine reconciled it back to the pending work.
    expect(await waitFor(() => stub.alarmAt(), (at) => at === null || at >= due)).toBe(due)
  })
})

describe("a real alarm runs due work", () => {
  it("fires by itself at the due time and completes a task the early timer cannot see", async () => {
    const { stub } = fresh()
    // Beyond alarmMinDelayMs, so no early timer is armed: only the physical alarm can run it. That nothing
    // ran it sooner is what the one call's `from_alarm` and `at` below say.
    const registered = await stub.registerIn("ok-alarm", alarmMinDelayMs + PAST_WINDOW_MS)
    const { due } = registered
    expect(registered.alarm).toBe(due)

    const row = await waitForRow(stub, "ok-alarm", settled)
    expect(row).toMatchObject({ status: "completed", attempt: 1, generation_id: registered.generation })
    const calls = await stub.calls()
    expect(calls).toHaveLength(1)
    expect(calls[0]).toMatchObject({ id: "ok-alarm", attempt: 1, from_alarm: 1, instance: registered.instance })
    expect(calls[0]!.at).toBeGreaterThanOrEqual(due)
    const alarms = await stub.alarms()
    expect(alarms).toHaveLength(1)
    expect(JSON.parse(alarms[0]!.info)).toMatchObject({ isRetry: false, retryCount: 0 })
    // Inside the handler the platform already reports no alarm (the engine's readPhysical relies on it).
    expect(alarms[0]!.seen).toBeNull()
    expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
  })

  it("a task registered just before eviction runs on the new instance from the alarm", async () => {
    const { id, stub } = fresh()
    const registered = await stub.registerIn("ok-evicted", alarmMinDelayMs + PAST_WINDOW_MS + LOOK_MS)
    const { due } = registered
    expect(registered.alarm).toBe(due)
    const next = await evict(id, stub)
    expect(await next.alarmAt()).toBe(due)
    expect(await next.rows()).toMatchObject([{ id: "ok-evicted", status: "pending", attempt: 0 }])

    const row = await waitForRow(next, "ok-evicted", settled)
    expect(row).toMatchObject({ status: "completed", attempt: 1, generation_id: registered.generation })
    const calls = await next.calls()
    expect(calls).toHaveLength(1)
    expect(calls[0]).toMatchObject({ attempt: 1, from_alarm: 1, generation: registered.generation })
    expect(calls[0]!.instance).not.toBe(registered.instance)
    expect(await waitFor(() => next.idle(), isIdle)).toEqual(IDLE)
  })

  it("runDurableObjectAlarm runs work that came due while no timer could see it", async () => {
    const { stub } = fresh()
    const registered = await stub.registerIn("ok-manual", 60_000)
    const { due } = registered
    expect(registered.alarm).toBe(due)

    // Time passes (simulated): the task is due now, but no early timer was armed for it.
    await runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec("UPDATE test_tasks SET next_attempt_at = ? WHERE id = 'ok-manual'", Date.now() - 1)
    })
    expect(await stub.calls()).toEqual([])

    expect(await runDurableObjectAlarm(stub)).toBe(true)
    // The alarm pass resolves once the outcome is durable.
    expect(await rowOf(stub, "ok-manual")).toMatchObject({ status: "completed", attempt: 1 })
    expect(await stub.calls()).toMatchObject([{ id: "ok-manual", attempt: 1, from_alarm: 0 }])
    expect(await stub.alarmAt()).toBeNull()
    expect(await runDurableObjectAlarm(stub)).toBe(false)
  })

  it("an alarm that runs before the work is due re-arms the alarm for it", async () => {
    const { stub } = fresh()
    const { due } = await stub.registerIn("ok-not-yet", 60_000)
    expect(await runDurableObjectAlarm(stub)).toBe(true)
    expect(await stub.calls()).toEqual([])
    expect(await rowOf(stub, "ok-not-yet")).toMatchObject({ status: "pending", attempt: 0 })
    expect(await stub.alarmAt()).toBe(due)
  })
})

describe("work survives eviction", () => {
  it("a task mid-attempt resumes on the new instance with attempt + 1 and the same generation", async () => {
    const { id, stub } = fresh()
    const registered = await stub.registerIn("held-1", alarmMinDelayMs + PAST_WINDOW_MS + LOOK_MS)
    const { due } = registered
    expect(registered.alarm).toBe(due)
    // Started eagerly, before its due time. A `held-` first attempt only ends with the reset, so it is
    // still running when the object is reset, however long the calls before it take.
    expect(await stub.tryStart("held-1")).toBe(true)
    await waitFor(() => stub.calls(), (calls) => calls.length === 1)
    expect(await rowOf(stub, "held-1")).toMatchObject({ status: "pending", attempt: 1 })

    const next = await evict(id, stub)
    expect(await next.alarmAt()).toBe(due)
    expect(await next.rows()).toMatchObject([
      { id: "held-1", status: "pending", attempt: 1, generation_id: registered.generation }
    ])

    // The real alarm starts attempt 2; it and attempt 3 time out; attempt 3 is the last. The deadline
    // bounds how long a failure takes to show: the alarm plus two timed-out attempts are ~4 s of real
    // time, which two CPU hogs beside the suite stretch about threefold.
    const row = await waitForRow(next, "held-1", settled, 2 * WAIT_MS)
    expect(row).toMatchObject({
      status: "failed",
      attempt: maxAttempts,
      generation_id: registered.generation,
      last_error_name: "DurableAttemptTimeoutError",
      last_error: `Task attempt timed out after ${attemptTimeoutMs} ms`
    })
    const calls = await next.calls()
    expect(calls.map((call) => call.attempt)).toEqual([1, 2, 3])
    expect(calls.every((call) => call.generation === registered.generation)).toBe(true)
    const [first, second, third] = calls
    expect(first).toMatchObject({ instance: registered.instance, from_alarm: 0, aborted: 0 })
    // Attempt 2 came from the platform alarm on a new instance, not before the due time.
    expect(second).toMatchObject({ from_alarm: 1, aborted: 1 })
    expect(second!.instance).not.toBe(registered.instance)
    expect(second!.at).toBeGreaterThanOrEqual(due)
    // Attempt 3 is the retry, run by the early timer of the same instance.
    expect(third).toMatchObject({ instance: second!.instance, from_alarm: 0, aborted: 1 })
    expect(third!.at).toBeGreaterThanOrEqual(second!.at + attemptTimeoutMs + retryDelayMs)
    expect(await waitFor(() => next.idle(), isIdle)).toEqual(IDLE)
    // Nothing runs again: a fourth attempt would be due retryDelayMs after the third ended, before the probe.
    await probe(next, retryDelayMs)
    expect((await next.calls()).map((call) => call.id)).toEqual([...Array(maxAttempts).fill("held-1"), "ok-probe"])
    // End idle (the probe re-armed the alarm), so the pool can pop this test's storage.
    expect(await waitFor(() => next.idle(), isIdle)).toEqual(IDLE)
  })

  it("a task whose attempts were all used by lost instances fails without running again", async () => {
    const { id, stub } = fresh()
    const registered = await runInDurableObject(stub, (instance: EngineObject, state) => {
      const registering = instance.registerIn("hang-exhausted", alarmMinDelayMs + PAST_WINDOW_MS)
      // As if every allowed attempt had been claimed by an instance that was then reset. In the same turn
      // as the registration's write (before its promise is awaited), so no alarm can come in between.
      state.storage.sql.exec("UPDATE test_tasks SET attempt = ? WHERE id = 'hang-exhausted'", maxAttempts)
      return registering
    })
    const next = await evict(id, stub)

    const row = await waitForRow(next, "hang-exhausted", settled)
    expect(row).toMatchObject({
      status: "failed",
      attempt: maxAttempts,
      generation_id: registered.generation,
      last_error_name: "DurableAttemptsExhaustedError"
    })
    expect(await next.calls()).toEqual([])
    expect(await next.alarms()).toHaveLength(1)
    expect(await waitFor(() => next.idle(), isIdle)).toEqual(IDLE)
  })
})

describe("the attempt lifecycle", () => {
  it("flaky: attempt 1 fails and persists its retry time, attempt 2 completes", async () => {
    const { stub } = fresh()
    // Both attempts come from the early timer (from_alarm 0 below): the platform alarm is alarmMinDelayMs
    // after the registration and attempt 2 is due retryDelayMs after attempt 1, which leaves ~950 ms for two
    // timer fires (with two CPU hogs beside the suite, a timer turn or a call took ~250 ms at worst).
    const registered = await stub.register("flaky-1")
    const row = await waitForRow(stub, "flaky-1", settled)
    expect(row).toMatchObject({
      status: "completed",
      attempt: 2,
      generation_id: registered.generation,
      result: JSON.stringify({ id: "flaky-1", attempt: 2 }),
      last_error: null,
      last_error_name: null
    })

    const calls = await stub.calls()
    expect(calls.map((call) => call.attempt)).toEqual([1, 2])
    const [first, second] = calls
    expect(first).toMatchObject({ generation: registered.generation, from_alarm: 0, aborted: 0 })
    expect(second).toMatchObject({ generation: registered.generation, from_alarm: 0, aborted: 0 })
    // What attempt 1 left in storage, as attempt 2 read it when it was claimed.
    const stored = JSON.parse(second!.row) as TaskRow
    expect(stored).toMatchObject({
      status: "pending",
      attempt: 1,
      generation_id: registered.generation,
      last_error: "flaky-1 failed on attempt 1",
      last_error_name: "FlakyError",
      result: null
    })
    expect(stored.next_attempt_at).toBeGreaterThanOrEqual(first!.at + retryDelayMs)
    expect(second!.at).toBeGreaterThanOrEqual(stored.next_attempt_at)
    expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
  })

  it("fail: one attempt, failed with NonRetryableError", async () => {
    const { stub } = fresh()
    const registered = await stub.register("fail-1")
    const row = await waitForRow(stub, "fail-1", settled)
    expect(row).toMatchObject({
      status: "failed",
      attempt: 1,
      generation_id: registered.generation,
      last_error: "fail-1 cannot succeed",
      last_error_name: "NonRetryableError",
      result: null
    })
    // A retry would be due retryDelayMs after the failure, before the probe.
    await probe(stub, retryDelayMs)
    expect(await stub.calls()).toMatchObject([{ id: "fail-1", attempt: 1 }, { id: "ok-probe", attempt: 1 }])
    expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
  })

  it("keeps the alarm while anything is pending and deletes it when nothing is", async () => {
    const { stub } = fresh()
    const { due: later } = await stub.registerIn("ok-later", 60_000)
    await stub.register("flaky-2")
    await stub.register("fail-2")
    await waitFor(() => stub.rows(), (rows) => rows.filter(settled).length === 2)
    expect(await stub.rows()).toMatchObject([
      { id: "fail-2", status: "failed", attempt: 1 },
      { id: "flaky-2", status: "completed", attempt: 2 },
      { id: "ok-later", status: "pending", attempt: 0 }
    ])
    expect(await waitFor(() => stub.alarmAt(), (at) => at === null || at >= later)).toBe(later)

    // Started eagerly long before its due time; the last pending work is gone, so is the alarm.
    expect(await stub.tryStart("ok-later")).toBe(true)
    await waitForRow(stub, "ok-later", settled)
    expect(await rowOf(stub, "ok-later")).toMatchObject({ status: "completed", attempt: 1 })
    // Reconciled once the engine has been idle for a moment (Scheduler.UPKEEP_DELAY).
    expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
    expect((await stub.calls()).map((call) => `${call.id}#${call.attempt}`).sort()).toEqual([
      "fail-2#1",
      "flaky-2#1",
      "flaky-2#2",
      "ok-later#1"
    ])
  })
})

describe("the DurabilityScheduler facade in workerd", () => {
  const thrown = (run: () => unknown): unknown => {
    try {
      run()
    } catch (error) {
      return error
    }
    throw new Error("expected a throw")
  }

  it("rejects bad options with the messages of resolveConfig", async () => {
    const { stub } = fresh()
    await runInDurableObject(stub, (instance, state) => {
      const make = (options: Record<string, unknown>) => () =>
        new DurabilityScheduler({ context: state, ...options } as ConstructorParameters<typeof DurabilityScheduler>[0])
      const cases: ReadonlyArray<readonly [Record<string, unknown>, ErrorConstructor, string]> = [
        [{ alarmConcurrency: 0 }, RangeError, "alarmConcurrency must be a positive integer, got 0"],
        [{ alarmConcurrency: 1.5 }, RangeError, "alarmConcurrency must be a positive integer, got 1.5"],
        [{ alarmMinDelayMs: "1000" }, RangeError, 'alarmMinDelayMs must be a positive integer, got "1000"'],
        [{ alarmMinDelayMs: 999 }, RangeError, "alarmMinDelayMs must be between 1000 and 15000, got 999"],
        [{ alarmMinDelayMs: 15_001 }, RangeError, "alarmMinDelayMs must be between 1000 and 15000, got 15001"],
        [{ alarmHandoffMs: -1 }, RangeError, "alarmHandoffMs must be a positive integer, got -1"],
        [{ alarmHandoffMs: Number.NaN }, RangeError, "alarmHandoffMs must be a positive integer, got NaN"],
        [{ liveTimers: "yes" }, TypeError, 'liveTimers must be a boolean, got "yes"'],
        [{ onAlarmRetry: 42 }, TypeError, "onAlarmRetry must be a function, got 42"]
      ]
      for (const [options, ErrorClass, message] of cases) {
        const error = thrown(make(options))
        expect(error, JSON.stringify(options)).toBeInstanceOf(ErrorClass)
        expect((error as Error).message).toBe(message)
      }
      const noContext = thrown(() =>
        new DurabilityScheduler({ context: {} } as unknown as ConstructorParameters<typeof DurabilityScheduler>[0])
      )
      expect(noContext).toBeInstanceOf(TypeError)
      expect((noContext as Error).message).toBe("context must be a Durable Object state whose class uses SQLite storage")
      const noConfig = thrown(() =>
        new DurabilityScheduler(null as unknown as ConstructorParameters<typeof DurabilityScheduler>[0])
      )
      expect(noConfig).toBeInstanceOf(TypeError)
      expect((noConfig as Error).message).toBe("DurabilityScheduler needs a config object")
      // This object already has its scheduler: another one with other options is refused.
      expect((thrown(make({ alarmMinDelayMs: 2_000 })) as Error).message).toContain("pass it to every helper as { scheduler }")
      expect((instance as EngineObject).scheduler).toBeInstanceOf(DurabilityScheduler)
    })
    // The edges are accepted, each on an object of its own; the same options again give the same scheduler.
    for (const options of [{ alarmMinDelayMs: 1_000 }, { alarmMinDelayMs: 15_000, liveTimers: true }]) {
      const bare = env.STORAGE_OBJECT.get(env.STORAGE_OBJECT.newUniqueId())
      await runInDurableObject(bare, (_instance, state) => {
        const scheduler = new DurabilityScheduler({ context: state, ...options })
        expect(scheduler).toBeInstanceOf(DurabilityScheduler)
        expect(new DurabilityScheduler({ context: state, ...options })).toBe(scheduler)
      })
    }
  })

  it("internals rejects objects it did not create", async () => {
    const { stub } = fresh()
    await runInDurableObject(stub, (instance: EngineObject) => {
      expect(() => internals({})).toThrow(new Error("Unknown DurabilityScheduler instance"))
      expect(() => internals(null)).toThrow(new Error("Unknown DurabilityScheduler instance"))
      expect(() => internals(Object.create(DurabilityScheduler.prototype))).toThrow(
        new Error("Unknown DurabilityScheduler instance")
      )
      expect(internals(instance.scheduler).config).toMatchObject({
        alarmMinDelayMs,
        alarmConcurrency: 10,
        liveTimers: false,
        objectId: stub.id.toString()
      })
    })
  })
})
