/**
 * Testing promise-face code as a user writes it: `TestObjectState` stands in for
 * the object's `ctx`; the test moves the object's clock with `advance`, and retries,
 * early timers and the physical alarm run as they come due. Nothing waits in real time.
 */
import { describe, expect, it } from "vitest"
import {
  Durability,
  DurabilityAlarms,
  DurabilityScheduler,
  type DurabilityContext,
  type DurableAlarmInfo,
  type DurableCall
} from "durability"
import { TestObjectState } from "durability/testing"

/** The object under test: its helpers, built on a context as the object's constructor builds them. */
const build = (context: DurabilityContext, log: Array<string>, now: () => number) => {
  const scheduler = new DurabilityScheduler({ context, alarmMinDelayMs: 1_000 })
  const billing = new Durability({
    scheduler,
    retries: { maxAttempts: 5, delay: (attempt) => attempt * 1_000 },
    handlers: {
      charge: async (call: DurableCall<{ readonly cents: number }>) => {
        log.push(`charge#${call.attempt}@${now()}`)
        if (call.attempt < 3) throw new Error("gateway down")
        return { charged: call.payload.cents }
      }
    }
  })
  const alarms = new DurabilityAlarms({
    scheduler,
    handlers: { renew: (info: DurableAlarmInfo) => void log.push(`renew@${now()} for ${info.scheduledTime}`) }
  })
  return { billing, alarms }
}

describe("TestObjectState: promise-face helpers on a test clock", () => {
  it("retries run at their persisted times as the clock moves; far work runs through the physical alarm", async () => {
    const state = await TestObjectState.make({ startTime: 1_000_000 })
    const log: Array<string> = []
    const { alarms, billing } = build(state.context, log, state.now)

    await billing.charge({ id: "inv-1", payload: { cents: 500 } })
    await state.advance(0)
    expect(log).toEqual(["charge#1@1000000"])
    expect(await billing.charge.getResult("inv-1")).toMatchObject({ status: "pending", attempt: 1, nextAttemptAt: 1_001_000 })
    await state.advance("1 second")
    await state.advance("2 seconds")
    expect(log).toEqual(["charge#1@1000000", "charge#2@1001000", "charge#3@1003000"])
    expect(await billing.charge.getResult("inv-1")).toEqual({ status: "completed", result: { charged: 500 } })

    // An hour ahead is far beyond alarmMinDelayMs: the physical alarm runs it, delivered by the platform.
    await alarms.renew(state.now() + 3_600_000)
    expect(state.storage.alarmAt).toBe(1_003_000 + 3_600_000)
    await state.advance("1 hour")
    expect(log.at(-1)).toBe(`renew@${1_003_000 + 3_600_000} for ${1_003_000 + 3_600_000}`)
    // The platform delivered the alarm at each retry's time too (where the engine had set it), then this one.
    expect(state.deliveries().at(-1)).toEqual({ at: 4_603_000, info: { isRetry: false, retryCount: 0 }, failed: false })
  })

  it("an eviction loses the running attempt; the next instance's alarm runs it again, at the same clock", async () => {
    const state = await TestObjectState.make()
    const log: Array<string> = []
    let hang = true
    const hanging = new Durability({
      context: state.context,
      handlers: {
        work: async (call: DurableCall<null>) => {
          log.push(`work#${call.attempt}@${state.now()}`)
          if (hang) await new Promise<never>(() => undefined)
        }
      }
    })
    await hanging.work({ id: "w", payload: null })
    await state.advance(0)
    expect(log).toEqual(["work#1@0"])
    expect(state.storage.alarmAt).toBe(15_000)

    const next = await state.restart()
    hang = false
    const again = new Durability({
      context: next.context,
      handlers: { work: async (call: DurableCall<null>) => void log.push(`work#${call.attempt}@${next.now()}`) }
    })
    expect(next.now()).toBe(0)
    expect(await next.fireAlarm()).toBe(true)
    expect(log).toEqual(["work#1@0", "work#2@15000"])
    expect(await again.work.getResult("w")).toEqual({ status: "completed", result: undefined })
  })

  it("advance before any helper exists is refused with a clear message", async () => {
    const state = await TestObjectState.make()
    await expect(state.advance(1)).rejects.toThrow("build a DurabilityScheduler (or a helper) on state.context first")
    expect(await state.fireAlarm()).toBe(false)
  })
})
