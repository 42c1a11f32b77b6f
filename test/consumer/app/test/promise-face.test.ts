/**
 * A promise-face object tested as its author would: the helpers built on TestObjectState's context
 * (where the object passes this.ctx), time moved with advance(), no workerd and no real waiting.
 */
import { Durability, DurabilityAlarms, DurabilityScheduler, type DurabilityContext, type DurableCall } from "durability"
import { TestObjectState } from "durability/testing"
import { describe, expect, it } from "vitest"

const billing = (context: DurabilityContext, gateway: (cents: number) => Promise<string>) => {
  const scheduler = new DurabilityScheduler({ context })
  const invoices = new Durability({
    scheduler,
    retries: { maxAttempts: 4, delay: (attempt) => attempt * 10_000 },
    handlers: { charge: async (call: DurableCall<{ cents: number }>) => ({ receipt: await gateway(call.payload.cents) }) }
  })
  const renewals = new DurabilityAlarms({
    scheduler,
    handlers: { renew: async (info) => void await invoices.charge({ id: info.idempotencyKey, payload: { cents: 1200 } }) }
  })
  return { invoices, renewals }
}

describe("billing on the promise face", () => {
  it("a renewal a day ahead charges through the gateway, retried on the object's clock", async () => {
    const state = await TestObjectState.make()
    const answers = ["declined", "declined", "rcpt-1"]
    const { invoices, renewals } = billing(state.context, async () => {
      const answer = answers.shift() ?? "rcpt-extra"
      if (answer === "declined") throw new Error("declined")
      return answer
    })
    await renewals.renew(state.now() + 86_400_000)
    await state.advance("1 day")
    const [occurrence] = (await invoices.charge.list()).items
    expect(occurrence).toMatchObject({ status: "pending", attempt: 1 })
    await state.advance("30 seconds")
    expect(await invoices.charge.getResult(occurrence!.id)).toEqual({ status: "completed", result: { receipt: "rcpt-1" } })
    expect(answers).toEqual([])
  })
})
