/**
 * Helpers for the fault scenarios: a fresh `LabObject` with its `EffectLedger`,
 * forced resets, and bounded polling of persisted state.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect } from "vitest"
import type { EffectLedger } from "../objects/EffectLedger.js"
import { IDLE, isIdle } from "../objects/idle.js"
import type { LabCall, LabObject, OperationRow } from "../objects/LabObject.js"

export type LabStub = DurableObjectStub<LabObject>
export type LedgerStub = DurableObjectStub<EffectLedger>

export interface Lab {
  readonly id: DurableObjectId
  /** The current stub; replaced by `reset`. */
  stub: LabStub
  readonly ledger: LedgerStub
}

/** A new lab object and the ledger it reports its effects to. */
export const freshLab = (): Lab => {
  const id = env.LAB_OBJECT.newUniqueId()
  return {
    id,
    stub: env.LAB_OBJECT.get(id),
    ledger: env.EFFECT_LEDGER.get(env.EFFECT_LEDGER.idFromName(id.toString()))
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Forces a reset of the lab object: its in-memory state, timers and running
 * handlers are gone; storage and the alarm stay. The lab gets a new stub.
 */
export const reset = async (lab: Lab): Promise<void> => {
  await expect(runInDurableObject(lab.stub, (_instance, state) => state.abort("reset by the scenario"))).rejects
    .toThrow()
  lab.stub = env.LAB_OBJECT.get(lab.id)
}

/**
 * How long `waitFor` polls by default. A deadline, not a premise: it bounds how long a condition the code
 * never reaches takes to fail. What the scenarios wait for is due within a few seconds of real time (the
 * alarm's minimum delay is 1 s; workerd retries an alarm a reset cut short about 2 s later), and a machine
 * with two CPU hogs beside the suite stretches that about 3×, so 10 s leaves room without hiding a hang.
 */
export const WAIT_MS = 10_000

/** Polls `probe` until `done` holds; fails after `timeoutMs` (bounded in time and in iterations). */
export const waitFor = async <A>(
  probe: () => Promise<A>,
  done: (value: A) => boolean,
  timeoutMs = WAIT_MS,
  intervalMs = 20
): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  const maxPolls = Math.ceil(timeoutMs / intervalMs) + 1
  let last: A = await probe()
  for (let poll = 0; !done(last); poll++) {
    if (Date.now() > deadline || poll >= maxPolls) {
      throw new Error(`Condition not met within ${timeoutMs} ms; last value: ${JSON.stringify(last)}`)
    }
    await sleep(intervalMs)
    last = await probe()
  }
  return last
}

export const rowOf = async (lab: Lab, id: string): Promise<OperationRow | undefined> =>
  (await lab.stub.operationRows()).find((row) => row.id === id)

/** Waits until the call `id` is no longer pending, and returns its row. */
export const settledRow = async (lab: Lab, id: string, timeoutMs?: number): Promise<OperationRow> =>
  (await waitFor(() => rowOf(lab, id), (row) => row !== undefined && row.status !== "pending", timeoutMs))!

/** Waits until the lab recorded `count` handler calls for `source`. */
export const callsOf = async (lab: Lab, source: string, count: number, timeoutMs?: number) =>
  waitFor(
    async () => (await lab.stub.calls()).filter((call) => call.source === source),
    (calls) => calls.length >= count,
    timeoutMs
  )

/**
 * Waits until every handler call of the current instance has really ended
 * (calls of instances lost to a reset never end), and returns all calls.
 */
export const allEnded = async (lab: Lab, timeoutMs?: number): Promise<ReadonlyArray<LabCall>> => {
  const current = await lab.stub.whoami()
  return waitFor(
    () => lab.stub.calls(),
    (calls) => calls.every((call) => call.instance !== current || call.ended_at !== null),
    timeoutMs
  )
}

/**
 * Nothing is left to run: every handler ended, no pending operation or named
 * alarm, no platform alarm. Ending a test this way also keeps the pool's
 * isolated storage poppable (it fails when an object is still busy).
 */
export const expectIdle = async (lab: Lab): Promise<void> => {
  await allEnded(lab)
  expect((await lab.stub.operationRows()).filter((row) => row.status === "pending")).toEqual([])
  expect((await lab.stub.alarmRows()).filter((row) => row.status === "pending")).toEqual([])
  // The engine reconciles the alarm once it has been idle for a moment (Scheduler.UPKEEP_DELAY); a null alarm
  // alone is not idle, since the platform reports none while it delivers one (objects/idle.ts).
  expect(await waitFor(() => lab.stub.idle(), isIdle)).toEqual(IDLE)
}
