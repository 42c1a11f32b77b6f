/** B6: the smallest useful worker on this library's promise facade (one durable operation). */
import { DurableObject } from "cloudflare:workers"
import { type AlarmInvocationInfo, Durability, DurabilityScheduler, type DurableCall } from "../../src/index.js"

export class Jobs extends DurableObject {
  readonly scheduler = new DurabilityScheduler({ context: this.ctx })
  readonly jobs = new Durability({
    scheduler: this.scheduler,
    handlers: { send: (call: DurableCall<{ to: string }>) => ({ sent: call.payload.to }) }
  })

  async send(id: string, to: string): Promise<unknown> {
    await this.jobs.send({ id, payload: { to } })
    return this.jobs.send.getResult(id)
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }
}

export default {
  async fetch(request: Request, env: { JOBS: DurableObjectNamespace<Jobs> }): Promise<Response> {
    const id = new URL(request.url).searchParams.get("id") ?? "1"
    return Response.json(await env.JOBS.getByName("jobs").send(id, "someone"))
  }
}
