/**
 * The promise face: one DurabilityScheduler shared by a Durability (one operation) and a
 * DurabilityAlarms (one named alarm); the object's alarm() is forwarded to the scheduler.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  DurabilityScheduler,
  type DurableAlarmInfo,
  type DurableCall,
  NonRetryableError,
  answerInspection
} from "durability"
import type { Env } from "./env.js"

interface Invoice {
  readonly customer: string
  readonly cents: number
}

const PERIOD_MS = 30 * 24 * 60 * 60 * 1000

export class Billing extends DurableObject<Env> {
  private readonly scheduler = new DurabilityScheduler({ context: this.ctx, alarmConcurrency: 4 })

  private readonly invoices = new Durability({
    scheduler: this.scheduler,
    retries: { maxAttempts: 3 },
    handlers: {
      charge: async (call: DurableCall<Invoice>) => {
        if (call.payload.cents <= 0) throw new NonRetryableError(`nothing to charge for ${call.id}`)
        const response = await fetch("https://payments.example.com/charges", {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": call.id },
          body: JSON.stringify(call.payload),
          signal: call.signal
        })
        if (!response.ok) throw new Error(`payments answered ${response.status}`)
        return { chargedCents: call.payload.cents, attempt: call.attempt }
      }
    }
  })

  private readonly renewals = new DurabilityAlarms({
    scheduler: this.scheduler,
    handlers: {
      renew: async (info: DurableAlarmInfo): Promise<void> => {
        await this.invoices.charge({ id: info.idempotencyKey, payload: { customer: "alice", cents: 1200 } })
        await this.renewals.renew(info.scheduledTime + PERIOD_MS)
      }
    }
  })

  async subscribe(): Promise<void> {
    await this.renewals.renew(Date.now() + PERIOD_MS)
  }

  async invoice(id: string) {
    const result = await this.invoices.charge.getResult(id)
    return result.status === "completed" ? result.result.chargedCents : result.status
  }

  /** The inspector's RPC (`durability/inspector`, mounted in index.ts): the scheduler answers. */
  inspect(request: unknown) {
    return answerInspection(this.scheduler, request)
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }
}
