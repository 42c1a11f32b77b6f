/**
 * Recurring schedules in workerd, through real alarms and real SQLite: the slots of an interval
 * schedule, a run after an eviction woken by the stored alarm, a reset mid-run, a pause across a
 * reset, a manual run beside the cadence, and re-registering the same schedule on a cold start.
 * Every scenario ends idle: no run in progress, no schedule left, no alarm.
 */
import { describe, expect, it } from "vitest"
import type { RunCall } from "./objects/SchedulesObject.js"
import { callsOf, completedOf, finish, freshSchedules, reset, type Schedules, sleep, waitFor } from "./support/schedules.js"

/** Each scenario waits for several real slots. */
const SLOW = { timeout: 25_000 }

const slotsOf = (calls: ReadonlyArray<RunCall>) => calls.map((call) => call.scheduled_time)

/** Waits until the schedule's `runCount` reached `count`: the run's settle is committed, not only its handler. */
const settledRuns = (schedules: Schedules, key: string, count: number) =>
  waitFor(() => schedules.stub.get(key), (info) => info !== undefined && info.runCount >= count, 6_000)

describe("schedules: cadence", () => {
  it("an everyMs schedule runs at its slots through the alarm: each slot is the previous plus everyMs, run after it", SLOW, async () => {
    const schedules = freshSchedules()
    const every = 1_500
    const before = await schedules.stub.now()
    const created = await schedules.stub.upsert("cadence", { everyMs: every }, { limit: 3 })
    const after = await schedules.stub.now()
    expect(created).toMatchObject({ created: true, changed: true })
    const first = created.nextRunAt!
    expect(first).toBeGreaterThanOrEqual(before + every)
    expect(first).toBeLessThanOrEqual(after + every)
    // More than the minimum delay ahead: the alarm is armed for the slot itself.
    expect(await schedules.stub.alarmAt()).toBe(first)

    const calls = await completedOf(schedules, "cadence", 3, 10_000)
    // No drift: slot n is the first slot plus n intervals, however late each run started.
    expect(slotsOf(calls)).toEqual([first, first + every, first + 2 * every])
    expect(calls.map((call) => [call.run_number, call.attempt, call.manual, call.in_alarm])).toEqual([
      [1, 1, 0, 1],
      [2, 1, 0, 1],
      [3, 1, 0, 1]
    ])
    for (const call of calls) expect(call.started_at).toBeGreaterThanOrEqual(call.scheduled_time)
    expect(new Set(calls.map((call) => call.idempotency_key)).size).toBe(3)

    // The limit reached, the schedule ends and no longer holds the alarm.
    const ended = await waitFor(() => schedules.stub.get("cadence"), (info) => info?.status === "ended", 6_000)
    expect(ended).toMatchObject({
      runCount: 3,
      nextRunAt: null,
      missedCount: 0,
      currentRun: null,
      lastRun: { scheduledTime: first + 2 * every, runNumber: 3, outcome: "completed", manual: false }
    })
    expect(await waitFor(() => schedules.stub.alarmAt(), (at) => at === null)).toBeNull()
    expect(await finish(schedules, ["cadence"])).toHaveLength(3)
  })

  it("a run held open past the next slot: that slot waits for it (overlap wait), then runs on time, once", SLOW, async () => {
    const schedules = freshSchedules()
    const every = 1_500
    await schedules.stub.hold("overlap", 1, 1)
    const { nextRunAt } = await schedules.stub.upsert("overlap", { everyMs: every })
    const [held] = await callsOf(schedules, "overlap", 1)
    expect(held).toMatchObject({ scheduled_time: nextRunAt, run_number: 1, held: 1, outcome: "running" })
    const second = nextRunAt! + every
    // Slot 2 comes due while run 1 is still open: it does not start beside it.
    await waitFor(() => schedules.stub.now(), (now) => now >= second + 200, 6_000)
    expect(await schedules.stub.calls()).toHaveLength(1)

    await schedules.stub.release("overlap", 1, 1)
    const calls = await completedOf(schedules, "overlap", 2)
    expect(calls.map((call) => [call.scheduled_time, call.run_number, call.attempt])).toEqual([
      [nextRunAt, 1, 1],
      [second, 2, 1]
    ])
    expect(calls[1]!.started_at).toBeGreaterThanOrEqual(calls[0]!.ended_at!)
    expect(await settledRuns(schedules, "overlap", 2)).toMatchObject({ missedCount: 0 })
    await finish(schedules, ["overlap"])
  })
})

describe("schedules: eviction", () => {
  it("a recurring run after eviction: the stored alarm wakes a new instance, which runs the next slot", SLOW, async () => {
    const schedules = freshSchedules()
    const every = 2_500
    const { nextRunAt } = await schedules.stub.upsert("evicted", { everyMs: every })
    const [first] = await completedOf(schedules, "evicted", 1)
    expect(first).toMatchObject({ scheduled_time: nextRunAt, run_number: 1, attempt: 1 })
    await settledRuns(schedules, "evicted", 1)
    const second = first!.scheduled_time + every

    await reset(schedules)
    // The new instance exists (this call made it), but nothing ran: its slot is ahead, and the
    // stored alarm, not a call, is what will run it.
    expect(await schedules.stub.calls()).toHaveLength(1)
    expect((await schedules.stub.rows())[0]).toMatchObject({ next_attempt_at: second, slot_at: second, run_slot: null })
    expect(await schedules.stub.alarmAt()).not.toBeNull()
    const instance = await schedules.stub.whoami()
    expect(instance).not.toBe(first!.instance)

    const calls = await completedOf(schedules, "evicted", 2)
    expect(calls[1]).toMatchObject({ scheduled_time: second, run_number: 2, attempt: 1, manual: 0, instance, in_alarm: 1 })
    expect(calls[1]!.started_at).toBeGreaterThanOrEqual(second)
    expect(calls[1]!.idempotency_key).not.toBe(first!.idempotency_key)
    // The platform delivered an alarm to the new instance, at or after the slot, before the run started.
    const alarms = (await schedules.stub.alarms()).filter((alarm) => alarm.instance === instance)
    expect(alarms.some((alarm) => alarm.at >= second && alarm.at <= calls[1]!.started_at)).toBe(true)

    const info = await settledRuns(schedules, "evicted", 2)
    expect(info).toMatchObject({
      lastRun: { scheduledTime: second, runNumber: 2, outcome: "completed" },
      missedCount: 0
    })
    // Still on the grid after the eviction (a later run may have started meanwhile).
    expect((info!.nextRunAt! - first!.scheduled_time) % every).toBe(0)
    await finish(schedules, ["evicted"])
  })

  it("a reset mid-run: the retry has the same slot and idempotency key (attempt 2), and the schedule goes on", SLOW, async () => {
    const schedules = freshSchedules()
    const every = 2_000
    await schedules.stub.hold("midrun", 1, 1)
    const { nextRunAt } = await schedules.stub.upsert("midrun", { everyMs: every })
    const [held] = await callsOf(schedules, "midrun", 1)
    expect(held).toMatchObject({ scheduled_time: nextRunAt, run_number: 1, attempt: 1, held: 1, outcome: "running" })
    expect((await schedules.stub.get("midrun"))?.currentRun).toMatchObject({
      scheduledTime: nextRunAt,
      runNumber: 1,
      attempt: 1
    })

    await reset(schedules)
    const [retry] = await completedOf(schedules, "midrun", 1)
    expect(retry).toMatchObject({
      scheduled_time: held!.scheduled_time,
      idempotency_key: held!.idempotency_key,
      run_number: 1,
      attempt: 2,
      held: 0
    })
    expect(retry!.instance).not.toBe(held!.instance)

    // The schedule continues from the slot, not from the retry's time.
    const completed = await completedOf(schedules, "midrun", 2)
    expect(completed[1]).toMatchObject({ scheduled_time: held!.scheduled_time + every, run_number: 2, attempt: 1 })
    const info = await settledRuns(schedules, "midrun", 2)
    expect(info).toMatchObject({ lastRun: { runNumber: 2, outcome: "completed" } })
    const calls = await finish(schedules, ["midrun"])
    // Attempt 1 was cut short by the reset (it never ended); run 1 completed once, in attempt 2.
    expect(calls.filter((call) => call.run_number === 1).map((call) => [call.attempt, call.outcome])).toEqual([
      [1, "running"],
      [2, "completed"]
    ])
  })
})

describe("schedules: pause and trigger", () => {
  it("a pause survives a reset: no run and no alarm while paused; resume runs the next slot on the grid", SLOW, async () => {
    const schedules = freshSchedules()
    const every = 2_000
    const graceMs = 600
    await schedules.stub.upsert("paused", { everyMs: every }, { graceMs })
    const [first] = await completedOf(schedules, "paused", 1)
    await settledRuns(schedules, "paused", 1)
    const slot1 = first!.scheduled_time

    expect(await schedules.stub.pause("paused")).toBe(true)
    const pausedAt = await schedules.stub.now()
    // A paused schedule does not wake the object.
    expect(await waitFor(() => schedules.stub.alarmAt(), (at) => at === null)).toBeNull()

    await reset(schedules)
    expect(await schedules.stub.get("paused")).toMatchObject({ status: "paused", nextRunAt: slot1 + every })
    expect((await schedules.stub.rows())[0]).toMatchObject({ paused: 1 })
    // Past slot 2 by more than the grace (a live schedule would have run it), and nothing ran or woke the object.
    await sleep(Math.max(0, slot1 + every + graceMs + 300 - (await schedules.stub.now())))
    expect(await schedules.stub.calls()).toHaveLength(1)
    expect(await schedules.stub.alarmAt()).toBeNull()
    expect((await schedules.stub.alarms()).filter((alarm) => alarm.at >= pausedAt)).toEqual([])

    const resumedAt = await schedules.stub.now()
    expect(await schedules.stub.resume("paused")).toBe(true)
    const calls = await completedOf(schedules, "paused", 2)
    // Slot 2 was missed while paused (skipped: past its grace); slot 3 runs, on the same grid.
    expect(calls[1]).toMatchObject({ scheduled_time: slot1 + 2 * every, run_number: 2, attempt: 1 })
    expect(calls[1]!.started_at).toBeGreaterThanOrEqual(Math.max(resumedAt, slot1 + 2 * every))
    expect(await settledRuns(schedules, "paused", 2)).toMatchObject({ status: "active", missedCount: 1 })
    await finish(schedules, ["paused"])
  })

  it("trigger runs once now, and the slots go on as before", SLOW, async () => {
    const schedules = freshSchedules()
    const every = 2_000
    const { nextRunAt } = await schedules.stub.upsert("manual", { everyMs: every })
    const slot1 = nextRunAt!
    const triggeredAt = await schedules.stub.now()
    expect(await schedules.stub.trigger("manual")).toBe(true)

    const [manual] = await completedOf(schedules, "manual", 1)
    expect(manual).toMatchObject({ manual: 1, run_number: 1, attempt: 1 })
    expect(manual!.scheduled_time).toBeGreaterThanOrEqual(triggeredAt)
    // It ran when asked, not at the slot.
    expect(manual!.started_at).toBeLessThan(slot1)
    expect(await settledRuns(schedules, "manual", 1)).toMatchObject({
      nextRunAt: slot1,
      lastRun: { manual: true, runNumber: 1, outcome: "completed" }
    })

    const calls = await completedOf(schedules, "manual", 3, 8_000)
    expect(calls.slice(1).map((call) => [call.scheduled_time, call.run_number, call.manual])).toEqual([
      [slot1, 2, 0],
      [slot1 + every, 3, 0]
    ])
    expect(calls[1]!.idempotency_key).not.toBe(manual!.idempotency_key)
    const all = await finish(schedules, ["manual"])
    expect(all.filter((call) => call.manual === 1)).toHaveLength(1)
  })
})

describe("schedules: cold start", () => {
  it("an upsert with the same spec after a reset changes nothing: same row, same next run, no extra run", SLOW, async () => {
    const schedules = freshSchedules()
    const every = 2_500
    const options = { payload: { tag: "boot" }, catchUp: "latest" } as const
    const created = await schedules.stub.upsert("boot", { everyMs: every }, options)
    expect(created).toMatchObject({ created: true, changed: true })
    const [first] = await completedOf(schedules, "boot", 1)
    const info = await settledRuns(schedules, "boot", 1)
    const [row] = await schedules.stub.rows()
    const alarm = await schedules.stub.alarmAt()
    const second = first!.scheduled_time + every
    expect(info).toMatchObject({ nextRunAt: second, payload: { tag: "boot" } })

    await reset(schedules)
    // What an object does in its constructor on every cold start.
    expect(await schedules.stub.upsert("boot", { everyMs: every }, options)).toEqual({
      created: false,
      changed: false,
      nextRunAt: second
    })
    expect(await schedules.stub.get("boot")).toEqual(info)
    expect(await schedules.stub.list()).toEqual([info])
    expect(await schedules.stub.rows()).toEqual([row])
    expect(await schedules.stub.alarmAt()).toBe(alarm)
    expect(await schedules.stub.calls()).toHaveLength(1)

    const calls = await completedOf(schedules, "boot", 2)
    expect(calls[1]).toMatchObject({ scheduled_time: second, run_number: 2, attempt: 1, tag: "boot" })
    const all = await finish(schedules, ["boot"])
    // One run per slot, none in between.
    expect(slotsOf(all.filter((call) => call.scheduled_time <= second))).toEqual([first!.scheduled_time, second])
  })
})
