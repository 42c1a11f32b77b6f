/**
 * Recurring schedules in workerd: only what needs the real alarm, real resets and real SQLite. One
 * cadence through the alarm (armed for each slot by the write before it, deleted when the schedule
 * ends), a run after a reset woken by the stored alarm, and a reset mid-run whose retry the stored
 * alarm wakes. The schedule logic (overlap, trigger, pause, catch-up, the cold-start upsert, and
 * these scenarios again at exact instants) runs on the test kit's clock in test/node/schedules.
 * Every scenario ends idle: no run in progress, no schedule left, no alarm.
 *
 * Real time: a write arms the physical alarm at max(its earliest work, the write + alarmMinDelayMs),
 * so a slot gets the alarm itself only when the write before it came at least alarmMinDelayMs before
 * it. Each interval is therefore alarmMinDelayMs plus a slack for the steps the scenario (or the pass)
 * takes before the next slot. Whether a step fit is read from the object's own records afterwards; one
 * that did not is a premise missed, not a broken invariant, and `withSlack` runs the scenario again
 * with a larger slack.
 */
import { describe, expect, it } from "vitest"
import { SCHEDULES } from "./objects/SchedulesObject.js"
import {
  callsOf,
  completedOf,
  finish,
  freshSchedules,
  passOf,
  premise,
  reset,
  type Schedules,
  waitFor,
  withSlack
} from "./support/schedules.js"

const MIN_DELAY = SCHEDULES.alarmMinDelayMs

/**
 * The slacks tried in turn. The steps they cover take a few milliseconds on a quiet machine (an RPC,
 * a handler doing one SQLite insert and update); 500 ms is two orders of magnitude more, and each
 * retry doubles it for a saturated machine.
 */
const SLACKS = [500, 1_000, 2_000] as const

/**
 * A deadline, not a premise: every slack tried, each try waiting for two intervals (at most
 * 2 × (1 000 + 2 000) ms) plus its RPCs, resets and finish.
 */
const TIMEOUT = { timeout: 60_000 }

/** How long to wait for `slots` more slots `every` apart: a deadline for a hung run, with room for a saturated machine. */
const deadline = (every: number, slots: number) => slots * every + 6_000

const ended = (schedules: Schedules, key: string) =>
  waitFor(() => schedules.stub.get(key), (info) => info?.status === "ended", 6_000)

describe("schedules: cadence", () => {
  it("an everyMs schedule runs at its slots through the alarm, armed for each slot; at its limit it ends and deletes the alarm", TIMEOUT, () =>
    withSlack(["cadence"], SLACKS, async (schedules, slackMs) => {
      const every = MIN_DELAY + slackMs
      const before = await schedules.stub.now()
      // catchUp "all": an alarm delivered late runs the slot it was armed for, so the slots seen do not
      // depend on how late the platform delivers.
      const created = await schedules.stub.upsert("cadence", { everyMs: every }, { limit: 2, catchUp: "all" })
      const armed = await schedules.stub.alarmReading()
      expect(created).toMatchObject({ created: true, changed: true })
      const first = created.nextRunAt!
      expect(first).toBeGreaterThanOrEqual(before + every)
      expect(first).toBeLessThanOrEqual(armed.readAt + every)
      // The upsert's write came before `readAt`: within the slack after `before`, it is at least
      // MIN_DELAY before `first`, and the reading came before the alarm could be delivered.
      premise(armed.readAt - before <= slackMs, () => `the upsert and the alarm's reading took ${armed.readAt - before} ms`)
      expect(armed.alarmAt).toBe(first)

      const calls = await completedOf(schedules, "cadence", 2, deadline(every, 2))
      // No drift: slot 2 is slot 1 plus the interval, however late run 1 started.
      expect(calls.map((call) => call.scheduled_time)).toEqual([first, first + every])
      for (const call of calls) expect(call.started_at).toBeGreaterThanOrEqual(call.scheduled_time)
      expect(new Set(calls.map((call) => call.idempotency_key)).size).toBe(2)
      // Run 1's pass re-armed the alarm with its last write, before it returned: within the slack after
      // slot 1, that write is at least MIN_DELAY before slot 2, so the alarm is armed for slot 2 itself.
      const pass = await passOf(schedules, calls[0]!)
      premise(pass.ended_at! - first <= slackMs, () => `run 1's alarm pass returned ${pass.ended_at! - first} ms after its slot`)
      expect(calls.map((call) => [call.run_number, call.attempt, call.manual, call.in_alarm])).toEqual([
        [1, 1, 0, 1],
        [2, 1, 0, 1]
      ])

      // The limit reached, the schedule ends and no longer holds the alarm.
      expect(await ended(schedules, "cadence")).toMatchObject({
        runCount: 2,
        nextRunAt: null,
        missedCount: 0,
        currentRun: null,
        lastRun: { scheduledTime: first + every, runNumber: 2, outcome: "completed", manual: false }
      })
      expect(await waitFor(() => schedules.stub.alarmAt(), (at) => at === null)).toBeNull()
      expect(await finish(schedules, ["cadence"])).toHaveLength(2)
    }))
})

describe("schedules: resets", () => {
  it("a recurring run after a reset: the stored alarm wakes a new instance, which runs the next slot", TIMEOUT, () =>
    withSlack(["evicted"], SLACKS, async (schedules, slackMs) => {
      const every = MIN_DELAY + slackMs
      const before = await schedules.stub.now()
      const { nextRunAt } = await schedules.stub.upsert("evicted", { everyMs: every }, { limit: 2 })
      const upserted = await schedules.stub.now()
      // As in the cadence: the alarm is armed for slot 1 itself, so an alarm pass runs run 1.
      premise(upserted - before <= slackMs, () => `the upsert took ${upserted - before} ms`)
      const [first] = await completedOf(schedules, "evicted", 1, deadline(every, 1))
      expect(first).toMatchObject({ scheduled_time: nextRunAt, run_number: 1, attempt: 1, in_alarm: 1 })
      const second = first!.scheduled_time + every

      // Reset once that pass returned: its last write armed the alarm for slot 2 (at max(slot 2, the
      // write + MIN_DELAY)), and that stored alarm is all the new instance has.
      await passOf(schedules, first!)
      await reset(schedules)
      const born = await schedules.stub.born()
      // This call made the new instance before slot 2 was due: the old one never reached slot 2, and
      // no call runs anything here, so only the stored alarm can.
      premise(born.at < second, () => `the new instance was made ${born.at - second} ms after slot 2 was due`)
      expect(born.instance).not.toBe(first!.instance)

      const calls = await completedOf(schedules, "evicted", 2, deadline(every, 1))
      expect(calls[1]).toMatchObject({
        scheduled_time: second,
        run_number: 2,
        attempt: 1,
        manual: 0,
        instance: born.instance,
        in_alarm: 1
      })
      expect(calls[1]!.started_at).toBeGreaterThanOrEqual(second)
      expect(calls[1]!.idempotency_key).not.toBe(first!.idempotency_key)
      // The platform delivered an alarm to the new instance, at or after the slot, before the run started.
      const alarms = (await schedules.stub.alarms()).filter((alarm) => alarm.instance === born.instance)
      expect(alarms.some((alarm) => alarm.at >= second && alarm.at <= calls[1]!.started_at)).toBe(true)

      // The limit counts the run made before the reset: the schedule ends after run 2.
      expect(await ended(schedules, "evicted")).toMatchObject({
        runCount: 2,
        missedCount: 0,
        nextRunAt: null,
        lastRun: { scheduledTime: second, runNumber: 2, outcome: "completed" }
      })
      const all = await finish(schedules, ["evicted"])
      // One attempt per slot: none twice, none started by the call that made the new instance.
      expect(all.map((call) => [call.scheduled_time, call.attempt, call.instance])).toEqual([
        [first!.scheduled_time, 1, first!.instance],
        [second, 1, born.instance]
      ])
    }))

  it("a reset mid-run: the retry has the same slot and idempotency key (attempt 2), and the schedule goes on", TIMEOUT, async () => {
    const schedules = freshSchedules()
    // No real-time premise: run 1 is held until the reset whenever it starts, and the claimed run keeps
    // an alarm stored (an alarm pass re-arms it for its start + MIN_DELAY before running anything),
    // which wakes the new instance for the retry whenever the reset came. The exact instants are in
    // test/node/schedules/evictions.test.ts.
    const every = MIN_DELAY + SLACKS[0]
    await schedules.stub.hold("midrun", 1, 1)
    const { nextRunAt } = await schedules.stub.upsert("midrun", { everyMs: every }, { limit: 2 })
    const [held] = await callsOf(schedules, "midrun", 1, { timeoutMs: deadline(every, 1) })
    expect(held).toMatchObject({ scheduled_time: nextRunAt, run_number: 1, attempt: 1, held: 1, outcome: "running" })
    expect((await schedules.stub.get("midrun"))?.currentRun).toMatchObject({
      scheduledTime: nextRunAt,
      runNumber: 1,
      attempt: 1
    })

    await reset(schedules)
    const [retry] = await completedOf(schedules, "midrun", 1, deadline(every, 1))
    expect(retry).toMatchObject({
      scheduled_time: held!.scheduled_time,
      idempotency_key: held!.idempotency_key,
      run_number: 1,
      attempt: 2,
      held: 0
    })
    expect(retry!.instance).not.toBe(held!.instance)

    // The schedule continues from the slot, not from the retry's time.
    const completed = await completedOf(schedules, "midrun", 2, deadline(every, 1))
    expect(completed[1]).toMatchObject({ scheduled_time: held!.scheduled_time + every, run_number: 2, attempt: 1 })
    expect(await ended(schedules, "midrun")).toMatchObject({ runCount: 2, lastRun: { runNumber: 2, outcome: "completed" } })
    const calls = await finish(schedules, ["midrun"])
    // Attempt 1 was cut short by the reset (it never ended); run 1 completed once, in attempt 2.
    expect(calls.filter((call) => call.run_number === 1).map((call) => [call.attempt, call.outcome])).toEqual([
      [1, "running"],
      [2, "completed"]
    ])
  })
})
