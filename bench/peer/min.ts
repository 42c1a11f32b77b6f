/** B6: the smallest useful worker on the Agents SDK scheduler (one scheduled callback). */
import { Agent, getAgentByName } from "agents"

export class Jobs extends Agent<Record<string, unknown>> {
  async send(id: string, to: string): Promise<unknown> {
    const schedule = await this.schedule(0, "deliver", { id, to })
    return { id: schedule.id }
  }

  deliver(payload: { id: string; to: string }): { sent: string } {
    return { sent: payload.to }
  }
}

export default {
  async fetch(request: Request, env: { JOBS: DurableObjectNamespace<Jobs> }): Promise<Response> {
    const id = new URL(request.url).searchParams.get("id") ?? "1"
    const stub = await getAgentByName(env.JOBS, "jobs")
    return Response.json(await stub.send(id, "someone"))
  }
}
