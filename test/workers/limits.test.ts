/**
 * Limits that only real Durable Object SQLite enforces: a row (all its columns
 * together) is limited to about 2.2 MB (SQLITE_TOOBIG beyond). In-memory SQLite
 * has no such limit, so these run in workerd: a call whose completed row or
 * failure record would exceed it must still settle at once, without running its
 * handler (and its side effect) again.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect, it } from "vitest"
import { waitFor } from "./support/lab.js"
import { Durability, type DurableCall, NonRetryableError } from "../../src/index.js"

it("an oversized result or an enormous failure message settles the call after one handler call", async () => {
  const stub = env.STORAGE_OBJECT.get(env.STORAGE_OBJECT.newUniqueId())
  await runInDurableObject(stub, async (_instance, state) => {
    const calls = { big: 0, loud: 0 }
    const durability = new Durability({
      context: state,
      alarmMinDelayMs: 1_000,
      retries: { maxAttempts: 3, delay: () => 10 },
      handlers: {
        // 1.5 MB of payload + 1.5 MB of result: one row of 3 MB.
        big: (call: DurableCall<string>) => {
          calls.big++
          return "r".repeat(1_500_000) + String(call.payload.length)
        },
        // Terminal at once: recording it must not fail on its size (or the handler would run again).
        loud: () => {
          calls.loud++
          throw new NonRetryableError("e".repeat(3_000_000))
        }
      }
    })
    await durability.big({ id: "big", payload: "p".repeat(1_500_000) })
    await durability.loud({ id: "loud", payload: null })
    // Both settle at once (no retry is due); the wait's deadline only bounds how long a failure takes to show.
    await waitFor(
      async () => state.storage.sql.exec("SELECT id, status FROM durability_calls").toArray(),
      (rows) => rows.every((row) => row.status !== "pending")
    )
    expect(calls).toEqual({ big: 1, loud: 1 })
    expect(await durability.big.getResult("big")).toMatchObject({
      status: "failed",
      attempt: 1,
      error: { name: "DurableResultSerializationError" }
    })
    const loud = await durability.loud.getResult("loud")
    // Recorded clipped, at attempt 1, as itself (not as "exhausted" after re-running it).
    expect(loud).toMatchObject({ status: "failed", attempt: 1, error: { name: "NonRetryableError" } })
    expect(loud.status === "failed" ? loud.error.message.length : 0).toBeLessThan(8_300)
    // Reconciled once the engine has been idle for a moment (Scheduler.UPKEEP_DELAY).
    expect(await waitFor(() => state.storage.getAlarm(), (at) => at === null)).toBeNull()
  })
})
