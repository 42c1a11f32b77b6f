/**
 * Limits that only real Durable Object SQLite enforces: a row (all its columns
 * together) is limited to about 2.2 MB (SQLITE_TOOBIG beyond). In-memory SQLite
 * has no such limit, so these run in workerd: a call whose completed row or
 * failure record would exceed it must still settle at once, without running its
 * handler (and its side effect) again.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect, it } from "vitest"
import { sleep } from "./support/lab.js"
import { Durability, type DurableCall, NonRetryableError } from "../../src/index.js"

it("an oversized result or an enormous failure message settles the call after one handler call", { timeout: 15_000 }, async () => {
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
    const settled = async () => {
      for (let poll = 0; poll < 100; poll++) {
        const rows = state.storage.sql.exec("SELECT id, status FROM durability_calls").toArray()
        if (rows.every((row) => row.status !== "pending")) return
        await sleep(50)
      }
      throw new Error("the calls did not settle within 5 s")
    }
    await settled()
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
    let alarm = await state.storage.getAlarm()
    for (let poll = 0; alarm !== null && poll < 40; poll++) {
      await sleep(50)
      alarm = await state.storage.getAlarm()
    }
    expect(alarm).toBeNull()
  })
})
