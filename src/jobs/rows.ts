/**
 * A stored job as callers see it: its state (with "active" from this isolate's executions), its
 * error, its public info.
 * @internal
 */
import type { SerializedError } from "../shared/Errors.js"
import type { Row } from "../engine/StorageService.js"
import * as Json from "../shared/json.js"
import type { JobInfo, JobState } from "./types.js"

export const stateOf = (row: Row, now: number, executing: boolean): JobState => {
  switch (row.status) {
    case "pending":
      // A job leased to an external worker is active wherever it runs.
      return executing || (row.leased_until !== null && row.leased_until !== undefined)
        ? "active"
        : Number(row.next_attempt_at) > now
        ? "delayed"
        : "waiting"
    case "waiting_children":
      return "waiting-children"
    case "completed":
      return "completed"
    case "canceled":
      return "canceled"
    default:
      return "failed"
  }
}

export const errorOf = (row: Row): SerializedError | undefined =>
  row.last_error === null || row.last_error === undefined
    ? undefined
    : { name: row.last_error_name === null ? "Error" : String(row.last_error_name), message: String(row.last_error) }

const optionalNumber = <K extends string>(key: K, value: unknown): { readonly [P in K]?: number } =>
  (value === null || value === undefined ? {} : { [key]: Number(value) }) as { readonly [P in K]?: number }

/** The job's info with its payload and result as stored (the caller decodes them). */
export const infoOf = (
  row: Row,
  now: number,
  executing: boolean,
  maxAttempts: number,
  children: ReadonlyArray<Row>,
  childExecuting: (key: string) => boolean
): JobInfo<unknown, unknown> => {
  const parentKey = row.parent_key === null || row.parent_key === undefined ? undefined : String(row.parent_key)
  const error = errorOf(row)
  const separator = parentKey?.indexOf("/") ?? -1
  return {
    id: String(row.id),
    queue: String(row.queue),
    state: stateOf(row, now, executing),
    payload: Json.decode(String(row.payload)),
    ...(row.result === null || row.result === undefined ? {} : { result: Json.decode(String(row.result)) }),
    ...(error === undefined ? {} : { error }),
    attempt: Number(row.attempt),
    maxAttempts,
    priority: Number(row.priority),
    progress: row.progress === null || row.progress === undefined ? 0 : Json.decode(String(row.progress)),
    createdAt: Number(row.created_at),
    runAt: Number(row.next_attempt_at),
    ...optionalNumber("startedAt", row.started_at),
    ...optionalNumber("finishedAt", row.finished_at),
    ...(parentKey === undefined || separator < 0
      ? {}
      : { parentQueue: parentKey.slice(0, separator), parentId: parentKey.slice(separator + 1) }),
    ...(typeof row.cancel_on === "string" ? { cancelOn: row.cancel_on } : {}),
    ...(children.length === 0 ? {} : {
      children: children.map((child) => ({
        queue: String(child.queue),
        id: String(child.id),
        state: stateOf(child, now, childExecuting(String(child.key)))
      }))
    })
  }
}
