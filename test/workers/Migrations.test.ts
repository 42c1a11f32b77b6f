/**
 * The capabilities' migrations on real Durable Object SQLite: the table rebuilds
 * (RENAME, `unixepoch('subsec')`) and rollbacks run as workerd runs them.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect, it } from "vitest"
import { Durability, DurabilityAlarms } from "../../src/index.js"

const tables = (state: DurableObjectState) =>
  state.storage.sql
    .exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'durability_%' ORDER BY name")
    .toArray()
    .map((row) => row.name)

it("upgrades an operations table with old rows to generations and creation times, and rolls back", async () => {
  const stub = env.STORAGE_OBJECT.get(env.STORAGE_OBJECT.newUniqueId())
  await runInDurableObject(stub, async (_instance, state) => {
    expect(Durability.migrate(state, "durability_0002_pending_index")).toEqual({
      applied: ["durability_0001_create_calls", "durability_0002_pending_index"],
      rolledBack: []
    })
    state.storage.sql.exec(
      `INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at)
       VALUES ('old', 'resize', '{"kind":"value","value":1}', 'pending', 1, 5)`
    )
    expect(Durability.migrate(state)).toEqual({
      applied: ["durability_0004_calls_generation_and_created_at", "durability_0006_operations_steps"],
      rolledBack: []
    })
    const [row] = state.storage.sql.exec("SELECT generation_id, created_at, attempt FROM durability_calls").toArray()
    expect(row?.generation_id).toBe("legacy:old")
    expect(row?.created_at).toBeGreaterThan(1_700_000_000_000)
    expect(row?.attempt).toBe(1)

    expect(Durability.migrate(state, "durability_0002_pending_index")).toEqual({
      applied: [],
      rolledBack: ["durability_0006_operations_steps", "durability_0004_calls_generation_and_created_at"]
    })
    const columns = state.storage.sql.exec("SELECT name FROM pragma_table_info('durability_calls')").toArray()
    expect(columns.map((c) => c.name)).not.toContain("generation_id")
    expect(state.storage.sql.exec("SELECT id FROM durability_calls").toArray()).toEqual([{ id: "old" }])

    expect((Durability.migrate(state, null)).rolledBack).toEqual([
      "durability_0002_pending_index",
      "durability_0001_create_calls"
    ])
    // Nothing left: the memo table the capabilities share goes with the last revert.
    expect(tables(state)).toEqual([])
  })
})

it("applies and reverts the named alarms table independently of operations", async () => {
  const stub = env.STORAGE_OBJECT.get(env.STORAGE_OBJECT.newUniqueId())
  await runInDurableObject(stub, async (_instance, state) => {
    Durability.migrate(state)
    expect(DurabilityAlarms.migrate(state)).toEqual({
      applied: ["durability_0003_create_alarms", "durability_0004_alarms_generation_and_created_at", "durability_0013_alarms_payload"],
      rolledBack: []
    })
    expect(tables(state)).toEqual(["durability_alarms", "durability_calls", "durability_migrations", "durability_steps"])
    DurabilityAlarms.migrate(state, null)
    expect(tables(state)).toEqual(["durability_calls", "durability_migrations", "durability_steps"])
  })
})
