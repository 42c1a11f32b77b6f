import type { Env } from "./env.js"
import { inspect } from "./inspector.js"

export { Billing } from "./billing.js"
export { Images } from "./images-object.js"

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    // The inspector answers only under /_durability (undefined elsewhere).
    const inspected = await inspect(request, env)
    if (inspected !== undefined) return inspected
    const url = new URL(request.url)
    if (url.pathname === "/subscribe") {
      await env.BILLING.getByName("alice").subscribe()
      return new Response("subscribed\n")
    }
    if (url.pathname === "/resize") {
      const result = await env.IMAGES.getByName("images").resize(url.searchParams.get("id") ?? "cat", 256)
      return Response.json(result)
    }
    return new Response("not found\n", { status: 404 })
  }
} satisfies ExportedHandler<Env>
