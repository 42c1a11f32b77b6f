/**
 * Shared by the schedule suites: a recording handler (what each run saw, and when it ran by the
 * test clock), rows read straight from storage, and handlers held open by hand.
 */
import { Clock, Effect } from "effect"
import * as Schedules from "../../../src/schedules/Schedules.js"
import type { SqlValue } from "../../../src/engine/StorageService.js"
import type * as TestDurability from "../../../src/testing/TestDurability.js"

export type TestObject = TestDurability.TestObject
export type Row = Record<string, SqlValue>

export const HOUR = 60 * 60 * 1000
export const DAY = 24 * HOUR

export const rows = (object: TestObject, sql: string, ...bindings: Array<SqlValue>): Effect.Effect<Array<Row>> =>
  Effect.sync(() => object.storage.sql.exec(sql, ...bindings).toArray() as Array<Row>)

export const scheduleRow = (object: TestObject, name: string, key: string): Effect.Effect<Row | undefined> =>
  Effect.map(rows(object, "SELECT * FROM durability_schedules WHERE key = ?", `${name}/${key}`), ([row]) => row)

export const dump = (object: TestObject): Effect.Effect<Array<Row>> =>
  rows(object, "SELECT * FROM durability_schedules ORDER BY key")

export interface Seen {
  readonly key: string
  readonly scheduledTime: number
  readonly ranAt: number
  readonly runNumber: number
  readonly attempt: number
  readonly manual: boolean
  readonly idempotencyKey: string
  readonly payload: unknown
}

/** A handler that records every attempt; `behave` decides what the attempt does (default: succeed). */
export const recording = (behave?: (run: Schedules.ScheduleRun<unknown>) => Effect.Effect<unknown, unknown>) => {
  const seen: Array<Seen> = []
  const handler = (run: Schedules.ScheduleRun<unknown>) =>
    Effect.gen(function*() {
      const ranAt = yield* Clock.currentTimeMillis
      seen.push({
        key: run.key,
        scheduledTime: run.scheduledTime,
        ranAt,
        runNumber: run.runNumber,
        attempt: run.attempt,
        manual: run.manual,
        idempotencyKey: run.idempotencyKey,
        payload: run.payload
      })
      if (behave !== undefined) yield* behave(run)
    })
  return { seen, handler, slots: () => seen.map((s) => new Date(s.scheduledTime).toISOString()) }
}

/** Gates keyed by name: a handler awaits its gate, the test opens it. */
export { gates } from "../jobs/support.js"

export const iso = (ms: number) => new Date(ms).toISOString()
export const at = (text: string) => new Date(text).getTime()
