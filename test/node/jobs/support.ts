/**
 * Shared by the job-queue suites: reading what is durable (rows of the job tables, a full dump to
 * prove a rejected call changed nothing), recording lifecycle events, and handlers held open by hand.
 */
import { Deferred, Effect, FiberId } from "effect"
import type * as Jobs from "../../../src/jobs/Jobs.js"
import type { SqlValue } from "../../../src/engine/StorageService.js"
import type * as TestDurability from "../../../src/testing/TestDurability.js"

export type TestObject = TestDurability.TestObject
export type Row = Record<string, SqlValue>

export const JOB_TABLES = [
  "durability_jobs",
  "durability_job_queues",
  "durability_job_buckets",
  "durability_job_dedup",
  "durability_job_logs",
  "durability_job_dead_letters"
] as const

/** Rows straight from the object's SQLite. */
export const rows = (object: TestObject, sql: string, ...bindings: Array<SqlValue>): Effect.Effect<Array<Row>> =>
  Effect.sync(() => object.storage.sql.exec(sql, ...bindings).toArray() as Array<Row>)

export const jobRow = (object: TestObject, queue: string, id: string): Effect.Effect<Row | undefined> =>
  Effect.map(rows(object, "SELECT * FROM durability_jobs WHERE key = ?", `${queue}/${id}`), ([row]) => row)

export const count = (object: TestObject, sql: string, ...bindings: Array<SqlValue>): Effect.Effect<number> =>
  Effect.map(rows(object, sql, ...bindings), ([row]) => Number(Object.values(row ?? {})[0] ?? 0))

/** A payload, result or progress value as the job tables store it. */
export const stored = (value: unknown): string => JSON.stringify({ kind: "value", value })

/** Every row of every job table, in a fixed order: equal dumps mean storage did not change. */
export const dump = (object: TestObject): Effect.Effect<Record<string, Array<Row>>> =>
  Effect.sync(() =>
    Object.fromEntries(
      JOB_TABLES.map((table) => [table, object.storage.sql.exec(`SELECT * FROM ${table} ORDER BY 1, 2`).toArray() as Array<Row>])
    )
  )

export const recorder = () => {
  const events: Array<Jobs.JobEvent> = []
  return {
    events,
    hook: (event: Jobs.JobEvent) => void events.push(event),
    of: <T extends Jobs.JobEvent["type"]>(type: T) =>
      events.filter((event): event is Extract<Jobs.JobEvent, { readonly type: T }> => event.type === type)
  }
}

/** Gates keyed by job id: a handler awaits its gate, the test opens it. */
export const gates = () => {
  const made = new Map<string, Deferred.Deferred<void>>()
  const of = (id: string) => {
    let gate = made.get(id)
    if (gate === undefined) {
      gate = Deferred.unsafeMake<void>(FiberId.none)
      made.set(id, gate)
    }
    return gate
  }
  return {
    wait: (id: string) => Deferred.await(of(id)),
    open: (id: string) => Deferred.succeed(of(id), undefined)
  }
}
