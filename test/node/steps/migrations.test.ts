/**
 * The steps' migrations: `durability_0006_operations_steps` and `durability_0006_jobs_steps` share
 * one memo table, each adds the triggers on its own table; a revert removes only its triggers and
 * memos (the table stays for the other); an object migrated before steps gets them at `make`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as Operations from "../../../src/operations/Operations.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { memos, sideEffects, type TestObject } from "./support.js"

const triggers = (object: TestObject) =>
  Effect.sync(() =>
    object.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%_steps_%' ORDER BY name")
      .toArray().map((row) => row.name)
  )

const memo = (object: TestObject, capability: string, key: string, generation: string) =>
  Effect.sync(() =>
    object.storage.sql.exec(
      "INSERT INTO durability_steps VALUES (?, ?, ?, 'a', '{\"kind\":\"value\",\"value\":1}', 0)",
      capability,
      key,
      generation
    )
  )

describe("the steps' migrations", () => {
  it.scoped("operations and jobs share one memo table; each adds the triggers on its own table", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      expect(yield* object.run(Operations.migrate())).toMatchObject({ applied: expect.arrayContaining(["durability_0006_operations_steps"]) })
      expect(yield* object.run(Jobs.migrate())).toEqual({
        applied: ["durability_0005_create_jobs", "durability_0006_jobs_steps", "durability_0009_jobs_leases", "durability_0010_jobs_outbox", "durability_0011_jobs_queue_order", "durability_0012_jobs_retention_timer", "durability_0014_jobs_state_counts", "durability_0019_jobs_concurrency_keys", "durability_0020_jobs_cancel_on", "durability_0022_jobs_batches"],
        rolledBack: []
      })
      expect(yield* triggers(object)).toEqual([
        "durability_calls_steps_ended",
        "durability_calls_steps_gone",
        "durability_calls_steps_replaced",
        "durability_jobs_steps_ended",
        "durability_jobs_steps_gone",
        "durability_jobs_steps_replaced"
      ])
    }))

  it.scoped("a revert removes its capability's triggers and memos only; the other's still work", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      yield* object.run(Operations.migrate())
      yield* object.run(Jobs.migrate())
      const sql = object.storage.sql
      sql.exec(
        `INSERT INTO durability_jobs (key, queue, id, generation_id, status, next_attempt_at, run_at, seq, payload, created_at)
         VALUES ('q/1', 'q', '1', 'g1', 'pending', 0, 0, 1, 'null', 0)`
      )
      yield* memo(object, "operations", "call-1", "g0")
      yield* memo(object, "jobs", "q/1", "g1")

      expect(yield* object.run(Operations.migrate("durability_0004_calls_generation_and_created_at"))).toEqual({
        applied: [],
        rolledBack: ["durability_0006_operations_steps"]
      })
      expect((yield* memos(object)).map((row) => `${row.capability}:${row.record_key}`)).toEqual(["jobs:q/1"])
      expect(yield* triggers(object)).toEqual(["durability_jobs_steps_ended", "durability_jobs_steps_gone", "durability_jobs_steps_replaced"])
      sql.exec("DELETE FROM durability_jobs WHERE key = 'q/1'")
      expect(yield* memos(object)).toEqual([])

      // Reverting the other one too leaves the (empty) table; applying again finds it.
      yield* object.run(Jobs.migrate(null))
      expect(yield* triggers(object)).toEqual([])
      expect(sql.exec("SELECT name FROM sqlite_master WHERE name = 'durability_steps'").toArray()).toEqual([{ name: "durability_steps" }])
      expect(yield* object.run(Operations.migrate())).toEqual({ applied: ["durability_0006_operations_steps"], rolledBack: [] })
      expect(yield* triggers(object)).toHaveLength(3)
    }))

  it.scoped("an object migrated before steps gets them at make; its pending call runs with steps", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      yield* object.run(Operations.migrate("durability_0004_calls_generation_and_created_at"))
      object.storage.sql.exec(
        `INSERT INTO durability_calls (id, operation, payload, status, next_attempt_at, generation_id, created_at)
         VALUES ('old', 'pay', '{"kind":"value","value":null}', 'pending', 0, 'g-old', 0)`
      )
      const effects = sideEffects()
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({ handler: (_: Operations.DurableCall<null>) => Operations.step("charge", effects.run("charge", 7)) })
      }))
      expect(yield* triggers(object)).toHaveLength(3)
      yield* object.run(ops.register("pay", { id: "new", payload: null }))
      yield* TestClock.adjust(15_000)
      expect(effects.runs).toEqual({ charge: 2 })
      expect(yield* object.run(ops.getResult("pay", "old"))).toEqual({ status: "completed", result: 7 })
      expect(yield* memos(object)).toEqual([])
    }))
})
