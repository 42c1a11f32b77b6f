/**
 * Helpers for the job queue scenarios: a fresh `JobsObject`, forced resets, waiting on persisted
 * state, and the end every scenario checks (nothing left running, pending or armed).
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect } from "vitest"
import * as Json from "../../../src/shared/json.js"
import { IDLE, isIdle } from "../objects/idle.js"
import type { JobCall, JobRow, JobsObject, QueueName } from "../objects/JobsObject.js"
import { waitFor } from "./lab.js"

export { sleep, waitFor } from "./lab.js"

export interface Jobs {
  readonly id: DurableObjectId
  /** The current stub; replaced by `reset`. */
  stub: DurableObjectStub<JobsObject>
}

export const freshJobs = (): Jobs => {
  const id = env.JOBS_OBJECT.newUniqueId()
  return { id, stub: env.JOBS_OBJECT.get(id) }
}

/** Forces a reset: in-memory state, timers and running handlers are gone; storage and the alarm stay. */
export const reset = async (jobs: Jobs): Promise<void> => {
  await expect(runInDurableObject(jobs.stub, (_instance, state) => state.abort("reset by the scenario"))).rejects.toThrow()
  jobs.stub = env.JOBS_OBJECT.get(jobs.id)
}

/** A payload, result or progress as the library stores it (its own JSON envelope), decoded. */
export const stored = (text: string | null): unknown => text === null ? undefined : Json.decode(text)

export const rowOf = async (jobs: Jobs, id: string, queue?: QueueName): Promise<JobRow | undefined> =>
  (await jobs.stub.rows(queue)).find((row) => row.id === id)

const unfinished = (row: JobRow | undefined) => row !== undefined && (row.status === "pending" || row.status === "waiting_children")

/** Waits until the job `id` finished, and returns its row. */
export const finishedRow = async (jobs: Jobs, id: string, queue?: QueueName, timeoutMs?: number): Promise<JobRow> =>
  (await waitFor(() => rowOf(jobs, id, queue), (row) => row !== undefined && !unfinished(row), timeoutMs))!

/** Waits until `count` handler calls were recorded for `queue` (and `id`). */
export const callsOf = (jobs: Jobs, queue: QueueName, count: number, id?: string, timeoutMs?: number) =>
  waitFor(
    async () => (await jobs.stub.calls()).filter((call) => call.queue === queue && (id === undefined || call.id === id)),
    (calls) => calls.length >= count,
    timeoutMs
  )

/**
 * Nothing is left: every handler of the current instance ended, no job is unfinished, and the
 * engine deleted the alarm (it does so once idle). Ending a test this way keeps the pool's
 * isolated storage poppable.
 */
export const expectIdle = async (jobs: Jobs): Promise<ReadonlyArray<JobCall>> => {
  const current = await jobs.stub.whoami()
  const calls = await waitFor(
    () => jobs.stub.calls(),
    (list) => list.every((call) => call.instance !== current || call.ended_at !== null)
  )
  expect((await jobs.stub.rows()).filter(unfinished)).toEqual([])
  // A null alarm alone is not idle: the platform reports none while it delivers one (objects/idle.ts).
  expect(await waitFor(() => jobs.stub.idle(), isIdle)).toEqual(IDLE)
  return calls
}
