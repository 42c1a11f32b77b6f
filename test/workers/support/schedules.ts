/**
 * Helpers for the recurring schedule scenarios: a fresh `SchedulesObject`, forced resets, waiting on
 * recorded runs, and the end every scenario checks (nothing running, no schedule left, no alarm).
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect } from "vitest"
import type { RunCall, SchedulesObject } from "../objects/SchedulesObject.js"
import { waitFor } from "./lab.js"

export { sleep, waitFor } from "./lab.js"

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
