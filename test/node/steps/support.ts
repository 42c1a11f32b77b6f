/**
 * Shared by the step suites: the memo rows as stored, and a counter of how often each step's side
 * effect really ran.
 */
import { Effect } from "effect"
import type * as TestDurability from "../../../src/testing/TestDurability.js"

export type TestObject = TestDurability.TestObject

export interface MemoRow {
  readonly capability: string
  readonly record_key: string
  readonly generation: string
  readonly name: string
  readonly value: string
  readonly created_at: number
}

/** Every memo row, in key order. */
export const memos = (object: TestObject): Effect.Effect<Array<MemoRow>> =>
  Effect.sync(() =>
    object.storage.sql.exec("SELECT * FROM durability_steps ORDER BY capability, record_key, generation, name")
      .toArray() as unknown as Array<MemoRow>
  )

/** `name=value` of every memo row, values decoded from the stored envelope. */
export const memoNames = (object: TestObject): Effect.Effect<Array<string>> =>
  Effect.map(memos(object), (rows) => rows.map((row) => `${row.record_key}:${row.name}=${JSON.stringify(JSON.parse(row.value).value)}`))

/** Counts the real runs of each step's side effect. */
export const sideEffects = () => {
  const runs: Record<string, number> = {}
  return {
    runs,
    /** An effect that counts one run of `name` and succeeds with `value`. */
    run: <A>(name: string, value: A) => Effect.sync(() => ((runs[name] = (runs[name] ?? 0) + 1), value))
  }
}
