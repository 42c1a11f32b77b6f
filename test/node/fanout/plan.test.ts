/**
 * The query a target's pass reads its first deliveries with walks the (target, attempt, phase, seq) index in
 * seq order and stops at the batch size: it never sorts the target's whole backlog (which made each pass cost
 * a millisecond over 5 000 waiting deliveries in bench F1). Asserted on SQLite's own plan for the statement.
 */
import { describe, expect, it } from "vitest"
import { DurabilityFanout } from "durability"
import { TestObjectState } from "durability/testing"
import { FIRST_DUE } from "../../../src/fanout/deliveriesTable.js"

describe("fanout's due query", () => {
  it("reads first deliveries through the index in seq order, with no sort of the backlog", async () => {
    const state = await TestObjectState.make({ startTime: 1_000 })
    DurabilityFanout.migrate(state.context)
    const plan = state.storage.sql.exec(`EXPLAIN QUERY PLAN ${FIRST_DUE}`, "a", 1_000, 10).toArray().map((row) => String(row.detail))
    expect(plan).toEqual([
      "SEARCH d USING INDEX durability_fanout_deliveries_first_idx (target_id=? AND attempt=? AND phase=?)",
      "SEARCH m USING INDEX sqlite_autoindex_durability_fanout_messages_1 (key=?) LEFT-JOIN"
    ])
  })
})
