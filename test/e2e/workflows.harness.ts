/**
 * The object the workflows browser test inspects (`workflows.e2e.mjs` bundles this file and imports it):
 * a `TestObjectState` object with `DurabilityWorkflows`, instances in every status but queued and running,
 * and `DurabilityInspector.handler` over it on a loopback HTTP server. No wrangler: the page, the API and
 * the answering are the library's own; only the object's storage and clock are the test kit's (its clock
 * starts at the real time and is stepped by `advance(0)` so woken instances run).
 */
import http from "node:http"
import { answerInspection, DurabilityScheduler, DurabilityWorkflows, NonRetryableError, type WorkflowEvent, type WorkflowStep } from "../../src/index.js"
import { DurabilityInspector } from "../../src/inspector.js"
import { TestObjectState } from "../../src/testing.js"

/** A params value that would run if the page ever parsed stored data as HTML. */
export const XSS = `<script>window.__xss="params"</script>"><img src=x onerror="window.__xss='params'">`

type Params = { readonly plan: "done" | "sleep" | "wait" | "break"; readonly note?: string }

export const start = async (options: { readonly token: string; readonly prefix: string }) => {
  const state = await TestObjectState.make({ startTime: Date.now() })
  const scheduler = new DurabilityScheduler({ context: state.context, log: () => undefined })
  const workflows = new DurabilityWorkflows({
    scheduler,
    workflows: {
      orders: async (event: WorkflowEvent<Params>, step: WorkflowStep) => {
        const charged = await step.do("charge", () => ({ receipt: `r-${event.instanceId}` }))
        if (event.payload.plan === "break") {
          await step.do("ship", { retries: { limit: 0, delay: 1 } }, () => {
            throw new NonRetryableError("the courier refused the parcel")
          })
        }
        if (event.payload.plan === "sleep") await step.sleep("cool off", "1 day")
        if (event.payload.plan === "wait") {
          const approval = await step.waitForEvent<{ by: string }>("approval", { type: "approved", timeout: "1 day" })
          return { ...charged, by: approval.payload.by }
        }
        return charged
      }
    }
  })
  const create = async (id: string, params: Params) => {
    await workflows.orders.create({ id, params })
    await state.advance(1)
  }
  await create("done", { plan: "done", note: XSS })
  await create("sleepy", { plan: "sleep" })
  await create("waiter", { plan: "wait" })
  await create("broken", { plan: "break" })
  await create("paused", { plan: "sleep" })
  await create("ended", { plan: "sleep" })
  await (await workflows.orders.get("paused")).pause()
  await (await workflows.orders.get("ended")).terminate()

  // What an action woke runs: the test kit's clock moves only when told.
  let stepping = true
  const stepper = (async () => {
    while (stepping) {
      await state.advance(0)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  })()

  const handler = DurabilityInspector.handler({
    prefix: options.prefix,
    token: options.token,
    objects: { resolve: (name) => name === "shop" ? { inspect: (request: unknown) => answerInspection(scheduler, request) } : undefined, list: () => ["shop"] }
  })
  const server = http.createServer(async (incoming, outgoing) => {
    const chunks: Array<Buffer> = []
    for await (const chunk of incoming) chunks.push(chunk as Buffer)
    const headers = new Headers()
    for (const [name, value] of Object.entries(incoming.headers)) {
      if (typeof value === "string") headers.set(name, value)
      else if (Array.isArray(value)) headers.set(name, value.join(", "))
    }
    const body = chunks.length === 0 || incoming.method === "GET" || incoming.method === "HEAD" ? null : Buffer.concat(chunks)
    const response = (await handler(new Request(`http://${incoming.headers.host}${incoming.url}`, { method: incoming.method!, headers, body }))) ??
      new Response("not the inspector's", { status: 404 })
    const sent: Record<string, string> = {}
    response.headers.forEach((value, name) => {
      sent[name] = value
    })
    outgoing.writeHead(response.status, sent)
    outgoing.end(Buffer.from(await response.arrayBuffer()))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  return {
    base: `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`,
    rows: (sql: string) => state.storage.sql.exec(sql).toArray(),
    close: async () => {
      stepping = false
      await stepper
      await new Promise((resolve) => server.close(resolve))
    }
  }
}
