/**
 * Helpers for the recurring schedule scenarios: a fresh `SchedulesObject`, forced resets, waiting on
 * recorded runs and alarm passes, the end every scenario checks (nothing running, no schedule left,
 * no alarm), and real-time premises told apart from broken invariants (`premise`, `withSlack`).
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect } from "vitest"
import * as Verdict from "../../shared/Verdict.js"
import type { RunCall, ScheduleAlarmRecord, SchedulesObject } from "../objects/SchedulesObject.js"
import { waitFor } from "./lab.js"

export { waitFor } from "./lab.js"

export interface Schedules {
  readonly id: DurableObjectId
  /** The current stub; replaced by `reset`. */
  stub: DurableObjectStub<SchedulesObject>
}

export const freshSchedules = (): Schedules => {
  const id = env.SCHEDULES_OBJECT.newUniqueId()
  return { id, stub: env.SCHEDULES_OBJECT.get(id) }
}

/** Forces a reset: in-memory state, timers and running handlers are gone; storage and the alarm stay. */
export const reset = async (schedules: Schedules): Promise<void> => {
  await expect(runInDurableObject(schedules.stub, (_instance, state) => state.abort("reset by the scenario"))).rejects
    .toThrow()
  schedules.stub = env.SCHEDULES_OBJECT.get(schedules.id)
}

/** Waits until `count` attempts of `key` were recorded that `match` (default: any), and returns them. */
export const callsOf = (
  schedules: Schedules,
  key: string,
  count: number,
  options: { readonly match?: (call: RunCall) => boolean; readonly timeoutMs?: number } = {}
): Promise<ReadonlyArray<RunCall>> =>
  waitFor(
    async () => (await schedules.stub.calls()).filter((call) => call.key === key && (options.match?.(call) ?? true)),
    (calls) => calls.length >= count,
    options.timeoutMs ?? 6_000
  )

/** Waits until `count` attempts of `key` completed, and returns those. */
export const completedOf = (schedules: Schedules, key: string, count: number, timeoutMs?: number) =>
  callsOf(schedules, key, count, {
    match: (call) => call.outcome === "completed",
    ...(timeoutMs === undefined ? {} : { timeoutMs })
  })

/**
 * Ends a scenario: pauses each schedule (no new slot starts), waits until no run is in progress and
 * every attempt of the current instance ended, removes them, and checks that nothing is left: no
 * row, no alarm. Calls of an instance lost to a reset never end and are not waited for.
 */
export const finish = async (schedules: Schedules, keys: ReadonlyArray<string>): Promise<ReadonlyArray<RunCall>> => {
  for (const key of keys) await schedules.stub.pause(key)
  await waitFor(() => schedules.stub.rows(), (rows) => rows.every((row) => row.run_slot === null), 6_000)
  const current = await schedules.stub.whoami()
  const calls = await waitFor(
    () => schedules.stub.calls(),
    (list) => list.every((call) => call.instance !== current || call.ended_at !== null)
  )
  for (const key of keys) expect(await schedules.stub.remove(key)).toBe(true)
  expect(await schedules.stub.rows()).toEqual([])
  expect(await waitFor(() => schedules.stub.alarmAt(), (at) => at === null)).toBeNull()
  return calls
}

/**
 * Waits until the `alarm()` that ran `call` returned, and returns its record: the pass's last write,
 * which re-armed the alarm for the next slot, came before `ended_at`.
 */
export const passOf = async (schedules: Schedules, call: RunCall, timeoutMs?: number): Promise<ScheduleAlarmRecord> => {
  const pass = (alarms: ReadonlyArray<ScheduleAlarmRecord>) =>
    alarms.filter((alarm) => alarm.instance === call.instance && alarm.at <= call.started_at).at(-1)
  const alarms = await waitFor(() => schedules.stub.alarms(), (list) => pass(list)?.ended_at != null, timeoutMs)
  return pass(alarms)!
}

/**
 * A real-time premise the scenario did not reach: its own steps did not fit between two real slots
 * on this machine. A harness problem, not a broken invariant: `withSlack` runs the scenario again
 * with more time between the slots.
 */
export class PremiseMissed extends Error {
  constructor(readonly what: string) {
    super(`harness: premise not reached: ${what}`)
  }
}

/** Throws `PremiseMissed` with `what` unless `held`. */
export const premise = (held: boolean, what: () => string): void => {
  if (!held) throw new PremiseMissed(what())
}

/**
 * Runs `scenario` on a fresh object with the first slack (the real time its steps get between two
 * slots), and again on a fresh one with the next slack each time it reports `PremiseMissed` (its
 * object is finished first: nothing of it keeps running). Fails with every missed premise when the
 * last slack missed too: a "harness" failure, never an invariant's.
 */
export const withSlack = async <A>(
  keys: ReadonlyArray<string>,
  slacksMs: ReadonlyArray<number>,
  scenario: (schedules: Schedules, slackMs: number) => Promise<A>
): Promise<A> => {
  const missed: Array<string> = []
  for (const slackMs of slacksMs) {
    const schedules = freshSchedules()
    try {
      return await scenario(schedules, slackMs)
    } catch (error) {
      if (!(error instanceof PremiseMissed)) throw error
      missed.push(`slack ${slackMs} ms: ${error.what}`)
      console.warn(`${error.message} (slack ${slackMs} ms); running the scenario again with more`)
      await finish(schedules, keys)
    }
  }
  throw new Verdict.HarnessFailure(`harness: premise not reached with any slack on this machine (${missed.join("; ")})`)
}
