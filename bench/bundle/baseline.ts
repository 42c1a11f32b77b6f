/** B6: the same worker and object as lib-min.ts without any scheduling library (the baseline to subtract). */
import { DurableObject } from "cloudflare:workers"

export class Jobs extends DurableObject {
  async send(id: string, to: string): Promise<unknown> {
    return { id, sent: to }
  }

  override async alarm(): Promise<void> {}
}

export default {
  async fetch(request: Request, env: { JOBS: DurableObjectNamespace<Jobs> }): Promise<Response> {
    const id = new URL(request.url).searchParams.get("id") ?? "1"
    return Response.json(await env.JOBS.getByName("jobs").send(id, "someone"))
  }
}
