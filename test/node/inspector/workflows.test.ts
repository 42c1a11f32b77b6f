/**
 * The inspector over workflows, on the promise face (`answerInspection` on `TestObjectState`): counts by
 * public status, pages of a workflow's instances walked by cursor and filtered by status, one instance's
 * timeline (steps, waits, sleeps, events with what consumed them), the actions through the capability's
 * own calls (asserted on the rows they leave), refused input that leaves storage as it was, redaction,
 * and the same through the HTTP API (routes, typed 400s, the origin check on actions).
 */
import { describe, expect, it } from "vitest"
import {
  answerInspection,
  type DurabilityInspectAnswer,
  type DurabilityRedactionTarget,
  DurabilityScheduler,
  DurabilityWorkflows,
  NonRetryableError,
  type WorkflowEvent,
  type WorkflowStep
} from "../../../src/index.js"
import { TestObjectState } from "../../../src/testing.js"

type Params = { readonly plan: "done" | "sleep" | "wait" | "break"; readonly card?: string }

const SECRET = "sk_live_0123456789"

const valueOf = (answer: DurabilityInspectAnswer): any => {
  if (!answer.ok) throw new Error(`expected a value, got ${answer.failure._tag}: ${answer.failure.message}`)
  return answer.value
}
const failureOf = (answer: DurabilityInspectAnswer) => {
  if (answer.ok) throw new Error(`expected a failure, got ${JSON.stringify(answer.value)}`)
  return answer.failure
}

/** An object with one workflow whose params choose how it goes: complete, sleep, wait for an event, or error. */
const setup = async () => {
  const state = await TestObjectState.make({ startTime: 1_000 })
  const scheduler = new DurabilityScheduler({ context: state.context, log: () => undefined })
  const workflows = new DurabilityWorkflows({
    scheduler,
    workflows: {
      orders: async (event: WorkflowEvent<Params>, step: WorkflowStep) => {
        const charged = await step.do("charge", () => ({ receipt: `r-${event.payload.card ?? "none"}` }))
        if (event.payload.plan === "break") {
          await step.do("ship", { retries: { limit: 0, delay: 1 } }, () => {
            throw new NonRetryableError(`card ${event.payload.card ?? ""} declined`)
          })
        }
        if (event.payload.plan === "sleep") await step.sleep("cool off", "1 day")
        if (event.payload.plan === "wait") {
          const approval = await step.waitForEvent<{ by: string }>("approval", { type: "approved", timeout: "1 hour" })
          return { ...charged, by: approval.payload.by }
        }
        return charged
      },
      refunds: async () => "refunded"
    }
  })
  const rows = (sql: string) => state.storage.sql.exec(sql).toArray()
  const ask = (request: unknown, options?: { redact?: (target: DurabilityRedactionTarget) => string }) => answerInspection(scheduler, request, options)
  return { state, scheduler, workflows, rows, ask }
}

/** Instances in each public status but queued and running (those pass in a moment under the test clock). */
const seed = async (ctx: Awaited<ReturnType<typeof setup>>) => {
  const { state, workflows } = ctx
  await workflows.orders.create({ id: "done", params: { plan: "done", card: SECRET } })
  await state.advance(1)
  await workflows.orders.create({ id: "sleepy", params: { plan: "sleep" } })
  await state.advance(1)
  await workflows.orders.create({ id: "waiter", params: { plan: "wait", card: SECRET } })
  await state.advance(1)
  await workflows.orders.create({ id: "broken", params: { plan: "break", card: SECRET } })
  await state.advance(1)
  const paused = await workflows.orders.create({ id: "paused", params: { plan: "sleep" } })
  await state.advance(1)
  const ended = await workflows.orders.create({ id: "ended", params: { plan: "sleep" } })
  await state.advance(1)
  await paused.pause()
  await ended.terminate()
}

const snapshot = (ctx: Awaited<ReturnType<typeof setup>>) =>
  JSON.stringify([
    ctx.rows("SELECT * FROM durability_workflows ORDER BY key"),
    ctx.rows("SELECT * FROM durability_workflow_steps ORDER BY instance, seq"),
    ctx.rows("SELECT * FROM durability_workflow_events ORDER BY id")
  ])

describe("inspector: workflows", () => {
  it("counts each workflow's instances by status, capped, from the state index", async () => {
    const ctx = await setup()
    await seed(ctx)
    const overview = valueOf(await ctx.ask({ _tag: "Overview" }))
    expect(overview.scheduler.capabilities).toEqual(["workflows"])
    expect(overview.workflows).toEqual({
      definitions: [
        { name: "orders", counts: { queued: 0, running: 0, paused: 1, waiting: 2, complete: 1, errored: 1, terminated: 1 } },
        { name: "refunds", counts: { queued: 0, running: 0, paused: 0, waiting: 0, complete: 0, errored: 0, terminated: 0 } }
      ]
    })
    // Every count is a range of the state index: it reads index entries only, never the rows.
    for (const where of ["status = 'pending' AND paused = 0 AND started_at IS NULL", "status IN ('pending', 'suspended') AND paused = 1"]) {
      const plan = ctx.rows(`EXPLAIN QUERY PLAN SELECT 1 FROM durability_workflows WHERE workflow = 'orders' AND ${where} LIMIT 10000`)
      expect(plan.map((row) => String(row.detail)).join(" ")).toMatch(/COVERING INDEX durability_workflows_state_idx/)
    }
    // Capped: past COUNT_CAP a count says "at least" (the page shows 10 000+), whatever the table holds.
    ctx.rows(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10005)
      INSERT INTO durability_workflows (key, workflow, instance_id, generation_id, status, next_attempt_at, params, created_at, updated_at)
      SELECT 'refunds/r' || i, 'refunds', 'r' || i, 'g', 'complete', 0, '{"kind":"undefined"}', 0, 0 FROM n`)
    const capped = valueOf(await ctx.ask({ _tag: "Overview" }))
    expect(capped.workflows.definitions[1].counts).toMatchObject({ complete: 10_000, errored: 0 })
  })

  it("adds the state index by its own migration, and takes it away on the way down", async () => {
    const state = await TestObjectState.make()
    const indexes = () => state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'durability_workflows_state_idx'").toArray()
    DurabilityWorkflows.migrate(state.context)
    expect(indexes()).toHaveLength(1)
    DurabilityWorkflows.migrate(state.context, "durability_0017_create_workflows")
    expect(indexes()).toHaveLength(0)
    DurabilityWorkflows.migrate(state.context)
    expect(indexes()).toHaveLength(1)
  })

  it("pages a workflow's instances newest first by cursor, filtered by status", async () => {
    const ctx = await setup()
    await seed(ctx)
    const ids: Array<string> = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = valueOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", limit: 4, ...(cursor === undefined ? {} : { cursor }) }))
      ids.push(...page.items.map((item: { id: string }) => item.id))
      cursor = page.cursor
      pages++
    } while (cursor !== undefined)
    expect(pages).toBe(2)
    expect(ids).toEqual(["ended", "paused", "broken", "waiter", "sleepy", "done"])

    const waiting = valueOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", status: "waiting" }))
    expect(waiting.items.map((item: { id: string }) => item.id)).toEqual(["waiter", "sleepy"])
    expect(waiting.items[0]).toMatchObject({
      workflow: "orders",
      id: "waiter",
      status: "waiting",
      params: { json: `{"plan":"wait","card":"${SECRET}"}`, truncated: false },
      waitingFor: ["event:approved"],
      wakeAt: 1_002 + 3_600_000,
      parent: null,
      startedAt: 1_002,
      endedAt: null
    })
    // Paused ones are read from the state index (few among the live ones), then sorted.
    expect(valueOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", status: "paused" })).items.map((item: { id: string }) => item.id)).toEqual([
      "paused"
    ])
    const done = valueOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", status: "complete" })).items[0]
    expect(done.output).toEqual({ json: `{"receipt":"r-${SECRET}"}`, truncated: false })
    const broken = valueOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", status: "errored" })).items[0]
    expect(broken.error).toEqual({ name: "NonRetryableError", message: `card ${SECRET} declined` })
    expect(valueOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", status: "terminated" })).items[0].error.name).toBe("WorkflowTerminatedError")
    expect(valueOf(await ctx.ask({ _tag: "Workflows", workflow: "refunds" }))).toEqual({ items: [] })

    expect(failureOf(await ctx.ask({ _tag: "Workflows", workflow: "nope" }))).toEqual({
      _tag: "NotFound",
      message: "No workflow \"nope\" in this object (workflows: orders, refunds)"
    })
    expect(failureOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", status: "sleeping" }))._tag).toBe("BadRequest")
    expect(failureOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", cursor: "not a cursor" }))._tag).toBe("BadRequest")
    expect(failureOf(await ctx.ask({ _tag: "Workflows", workflow: "orders", limit: 101 }))._tag).toBe("BadRequest")
  })

  it("shows one instance's timeline: steps in call order, sleeps, waits and the events it received", async () => {
    const ctx = await setup()
    await seed(ctx)
    const sleepy = valueOf(await ctx.ask({ _tag: "Workflow", workflow: "orders", id: "sleepy" }))
    expect(sleepy.instance).toMatchObject({ id: "sleepy", status: "waiting", waitingFor: [], wakeAt: 1_001 + 86_400_000 })
    expect(sleepy.steps).toEqual({
      total: 2,
      items: [
        {
          position: 1,
          name: "charge",
          kind: "do",
          status: "completed",
          attempt: 1,
          result: { json: "{\"receipt\":\"r-none\"}", truncated: false },
          wakeAt: null,
          startedAt: 1_001,
          endedAt: 1_001
        },
        { position: 2, name: "cool off", kind: "sleep", status: "waiting", attempt: 0, wakeAt: 1_001 + 86_400_000, startedAt: 1_001, endedAt: null }
      ]
    })
    expect(sleepy.events).toEqual({ items: [], total: 0 })

    const broken = valueOf(await ctx.ask({ _tag: "Workflow", workflow: "orders", id: "broken" }))
    expect(broken.steps.items[1]).toMatchObject({
      name: "ship",
      status: "failed",
      attempt: 1,
      error: { name: "NonRetryableError", message: `card ${SECRET} declined` }
    })

    // An event it waits for, and one of a type nothing waits for: consumed by the wait step, and kept.
    expect(valueOf(await ctx.ask({ _tag: "SendWorkflowEvent", workflow: "orders", id: "waiter", type: "noise", payload: [1] }))).toEqual({ changed: 1 })
    expect(valueOf(await ctx.ask({ _tag: "SendWorkflowEvent", workflow: "orders", id: "waiter", type: "approved", payload: { by: "ops" } }))).toEqual({ changed: 1 })
    await ctx.state.advance(0)
    const waiter = valueOf(await ctx.ask({ _tag: "Workflow", workflow: "orders", id: "waiter" }))
    expect(waiter.instance).toMatchObject({ status: "complete", output: { json: `{"receipt":"r-${SECRET}","by":"ops"}`, truncated: false } })
    expect(waiter.steps.items[1]).toMatchObject({ position: 2, name: "approval", kind: "event", status: "completed", wakeAt: 1_002 + 3_600_000 })
    expect(JSON.parse(waiter.steps.items[1].result.json)).toMatchObject({ type: "approved", payload: { by: "ops" } })
    expect(waiter.events).toEqual({
      total: 2,
      items: [
        { id: 1, type: "noise", payload: { json: "[1]", truncated: false }, sentAt: 1_006, consumedBy: null },
        { id: 2, type: "approved", payload: { json: "{\"by\":\"ops\"}", truncated: false }, sentAt: 1_006, consumedBy: 2 }
      ]
    })
    // Pages past the detail's first steps and events, by cursor.
    const steps = valueOf(await ctx.ask({ _tag: "WorkflowSteps", workflow: "orders", id: "waiter", limit: 1 }))
    expect(steps.items.map((step: { position: number }) => step.position)).toEqual([1])
    expect(valueOf(await ctx.ask({ _tag: "WorkflowSteps", workflow: "orders", id: "waiter", cursor: steps.cursor })).items.map((step: { name: string }) => step.name))
      .toEqual(["approval"])
    const events = valueOf(await ctx.ask({ _tag: "WorkflowEvents", workflow: "orders", id: "waiter", limit: 1 }))
    expect(events.items.map((event: { id: number }) => event.id)).toEqual([1])
    expect(valueOf(await ctx.ask({ _tag: "WorkflowEvents", workflow: "orders", id: "waiter", cursor: events.cursor })).items[0].id).toBe(2)

    expect(failureOf(await ctx.ask({ _tag: "Workflow", workflow: "orders", id: "ghost" }))).toEqual({
      _tag: "NotFound",
      message: "No instance \"ghost\" of workflow \"orders\""
    })
  })

  it("pauses, resumes, terminates, restarts and sends events through the capability's calls", async () => {
    const ctx = await setup()
    await seed(ctx)
    const instance = (id: string) => ctx.rows(`SELECT status, paused, ended_at FROM durability_workflows WHERE instance_id = '${id}'`)[0]
    const act = async (tag: string, id: string) => valueOf(await ctx.ask({ _tag: tag, workflow: "orders", id }))

    expect(await act("TerminateWorkflow", "waiter")).toEqual({ changed: 1 })
    expect(instance("waiter")).toMatchObject({ status: "terminated" })
    expect(await act("TerminateWorkflow", "waiter")).toEqual({ changed: 0 })

    expect(await act("PauseWorkflow", "sleepy")).toEqual({ changed: 1 })
    expect(instance("sleepy")).toMatchObject({ status: "suspended", paused: 1 })
    expect(await act("PauseWorkflow", "sleepy")).toEqual({ changed: 0 })
    // Paused while asleep: its time comes and goes, and it stays paused.
    await ctx.state.advance("1 day")
    expect((await (await ctx.workflows.orders.get("sleepy")).status()).status).toBe("paused")
    expect(await act("ResumeWorkflow", "sleepy")).toEqual({ changed: 1 })
    expect(await act("ResumeWorkflow", "sleepy")).toEqual({ changed: 0 })
    await ctx.state.advance(0)
    expect(instance("sleepy")).toMatchObject({ status: "complete", paused: 0 })
    // Nothing to do on an ended instance.
    expect(await act("PauseWorkflow", "sleepy")).toEqual({ changed: 0 })
    expect(await act("TerminateWorkflow", "sleepy")).toEqual({ changed: 0 })

    // Restart: its steps and events are gone and it runs from its first step again.
    expect(ctx.rows("SELECT COUNT(*) AS n FROM durability_workflow_steps WHERE instance = 'orders/broken'")[0]?.n).toBe(2)
    expect(await act("RestartWorkflow", "broken")).toEqual({ changed: 1 })
    expect(instance("broken")).toMatchObject({ status: "pending", paused: 0, ended_at: null })
    await ctx.state.advance(0)
    expect(instance("broken")).toMatchObject({ status: "failed" })

    // An event is stored for the first wait of its type, even one not reached yet.
    expect(valueOf(await ctx.ask({ _tag: "SendWorkflowEvent", workflow: "orders", id: "paused", type: "later" }))).toEqual({ changed: 1 })
    expect(ctx.rows("SELECT instance, type, payload, consumed_seq FROM durability_workflow_events")).toEqual([
      { instance: "orders/paused", type: "later", payload: "{\"kind\":\"undefined\"}", consumed_seq: null }
    ])

    expect(failureOf(await ctx.ask({ _tag: "PauseWorkflow", workflow: "orders", id: "ghost" }))._tag).toBe("NotFound")
    expect(failureOf(await ctx.ask({ _tag: "PauseWorkflow", workflow: "nope", id: "sleepy" }))._tag).toBe("NotFound")

    expect(valueOf(await ctx.ask({ _tag: "PurgeBefore", capability: "workflows", before: 1_001 }))).toEqual({ changed: 1 })
    expect(ctx.rows("SELECT instance_id FROM durability_workflows ORDER BY instance_id").map((row) => row.instance_id)).toEqual([
      "broken",
      "ended",
      "paused",
      "sleepy",
      "waiter"
    ])
  })

  it("refuses bad input with a BadRequest naming the field, and leaves storage as it was", async () => {
    const ctx = await setup()
    await seed(ctx)
    const before = snapshot(ctx)
    const refused = [
      { _tag: "SendWorkflowEvent", workflow: "orders", id: "waiter", type: "" },
      { _tag: "SendWorkflowEvent", workflow: "orders", id: "waiter", type: "not a type!" },
      { _tag: "SendWorkflowEvent", workflow: "orders", id: "waiter", type: "approved", payload: { big: "x".repeat(1_100_000) } },
      { _tag: "SendWorkflowEvent", workflow: "orders", id: "waiter", type: "approved", payload: 10n },
      { _tag: "SendWorkflowEvent", workflow: "orders", id: "waiter", type: "approved", extra: 1 },
      // An ended instance would never read it: refused, not dropped.
      { _tag: "SendWorkflowEvent", workflow: "orders", id: "done", type: "approved" },
      { _tag: "PauseWorkflow", workflow: "orders" },
      { _tag: "TerminateWorkflow", workflow: "", id: "waiter" },
      { _tag: "RestartWorkflow", workflow: "orders", id: "x".repeat(513) },
      { _tag: "PurgeBefore", capability: "workflows", before: -1 }
    ]
    for (const [index, request] of refused.entries()) {
      const failure = failureOf(await ctx.ask(request))
      expect(failure._tag, `refused[${index}]`).toBe("BadRequest")
    }
    expect(failureOf(await ctx.ask(refused[1]!)).message).toMatch(/^type must be 1–\d+ letters/)
    expect(failureOf(await ctx.ask(refused[5]!)).message).toMatch(/has ended \(complete\): it takes no more events/)
    expect(snapshot(ctx)).toBe(before)
  })

  it("passes params, outputs, step results, event payloads and errors through the redaction hook", async () => {
    const ctx = await setup()
    await seed(ctx)
    await ctx.workflows.orders.get("waiter").then((handle) => handle.sendEvent({ type: "noise", payload: { card: SECRET } }))
    const seen = new Set<string>()
    const redact = (target: DurabilityRedactionTarget) => {
      seen.add(`${target.capability}/${target.workflow}/${target.field}`)
      return target.text.replaceAll(SECRET, "[card]")
    }
    const answers = [
      valueOf(await ctx.ask({ _tag: "Workflows", workflow: "orders" }, { redact })),
      valueOf(await ctx.ask({ _tag: "Workflow", workflow: "orders", id: "done" }, { redact })),
      valueOf(await ctx.ask({ _tag: "Workflow", workflow: "orders", id: "broken" }, { redact })),
      valueOf(await ctx.ask({ _tag: "Workflow", workflow: "orders", id: "waiter" }, { redact })),
      valueOf(await ctx.ask({ _tag: "WorkflowSteps", workflow: "orders", id: "done" }, { redact })),
      valueOf(await ctx.ask({ _tag: "WorkflowEvents", workflow: "orders", id: "waiter" }, { redact }))
    ]
    expect(JSON.stringify(answers)).not.toContain(SECRET)
    expect(answers[1].instance.params.json).toBe("{\"plan\":\"done\",\"card\":\"[card]\"}")
    expect(answers[1].instance.output.json).toBe("{\"receipt\":\"r-[card]\"}")
    expect(answers[3].events.items[0].payload.json).toBe("{\"card\":\"[card]\"}")
    expect(seen).toEqual(
      new Set(["workflows/orders/params", "workflows/orders/output", "workflows/orders/result", "workflows/orders/error", "workflows/orders/payload"])
    )
    // Without a hook, what is stored is shown.
    expect(JSON.stringify(valueOf(await ctx.ask({ _tag: "Workflow", workflow: "orders", id: "done" })))).toContain(SECRET)
  })
})

describe("inspector HTTP API: workflows", () => {
  const TOKEN = "t0ken-for-the-workflows-suite"
  const serve = async () => {
    const ctx = await setup()
    await seed(ctx)
    // Imported by a name tsc does not follow: the handler's auth is typed with WebCrypto's `CryptoKey`, a
    // global of the workers' types that the node typecheck does not load (at runtime Node has it).
    const module: string = "../../../src/inspector/http.js"
    const { makeHandler } = await import(/* @vite-ignore */ module) as {
      readonly makeHandler: (config: Record<string, unknown>) => (request: Request) => Promise<Response | undefined>
    }
    const handler = makeHandler({
      prefix: "/_d",
      token: TOKEN,
      access: undefined,
      readOnly: false,
      listNames: async () => ["shop"],
      stubOf: (name: string) => name === "shop" ? { inspect: (request: unknown) => answerInspection(ctx.scheduler, request) } : undefined,
      method: "inspect",
      log: () => undefined
    })
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const response = await handler(
        new Request(`https://inspector.test/_d/api/objects/shop${path}`, {
          method,
          headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
          ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
        })
      )
      return { status: response!.status, body: await response!.json() as any }
    }
    return { ctx, call }
  }

  it("serves the list, the detail and each action, with typed 400s and the origin check", async () => {
    const { call, ctx } = await serve()
    const list = await call("GET", "/workflows/orders/instances?status=waiting&limit=1")
    expect(list.status).toBe(200)
    expect(list.body.items.map((item: { id: string }) => item.id)).toEqual(["waiter"])
    expect(list.body.cursor).toBeTypeOf("string")
    expect((await call("GET", "/workflows/orders/instances/sleepy")).body.steps.total).toBe(2)
    expect((await call("GET", "/workflows/orders/instances/sleepy/steps?limit=1")).body.items).toHaveLength(1)
    expect((await call("GET", "/workflows/orders/instances/sleepy/events")).body).toEqual({ items: [] })
    expect((await call("GET", "/workflows/orders/instances?status=sleeping")).body).toEqual({
      _tag: "BadRequest",
      message: "status: must be one of queued, running, paused, waiting, complete, errored, terminated"
    })
    expect((await call("GET", "/workflows/orders/instances/ghost")).status).toBe(404)

    expect(await call("POST", "/workflows/orders/instances/sleepy/pause", {})).toEqual({ status: 200, body: { changed: 1 } })
    expect(await call("POST", "/workflows/orders/instances/sleepy/resume")).toEqual({ status: 415, body: expect.objectContaining({ _tag: "UnsupportedMediaType" }) })
    expect(await call("POST", "/workflows/orders/instances/sleepy/resume", {})).toEqual({ status: 200, body: { changed: 1 } })
    expect(await call("POST", "/workflows/orders/instances/waiter/events", { type: "approved", payload: { by: "http" } })).toEqual({
      status: 200,
      body: { changed: 1 }
    })
    await ctx.state.advance(0)
    expect(ctx.rows("SELECT status FROM durability_workflows WHERE instance_id = 'waiter'")).toEqual([{ status: "complete" }])
    expect(await call("POST", "/workflows/orders/instances/paused/terminate", {})).toEqual({ status: 200, body: { changed: 1 } })
    expect(await call("POST", "/workflows/orders/instances/ended/restart", {})).toEqual({ status: 200, body: { changed: 1 } })
    await ctx.state.advance(0)

    const before = snapshot(ctx)
    expect(await call("POST", "/workflows/orders/instances/sleepy/events", { payload: 1 })).toEqual({
      status: 400,
      body: { _tag: "BadRequest", message: "type: is missing" }
    })
    expect((await call("POST", "/workflows/orders/instances/sleepy/events", { type: "a b" })).status).toBe(400)
    expect((await call("POST", "/workflows/orders/instances/sleepy/pause", { force: true })).body).toEqual({
      _tag: "BadRequest",
      message: "force: is unexpected (this action takes no fields)"
    })
    expect((await call("POST", "/workflows/orders/instances/sleepy/events", "{not json")).status).toBe(400)
    // Actions come from the inspector's own page only.
    expect((await call("POST", "/workflows/orders/instances/sleepy/terminate", {}, { origin: "https://evil.test" })).status).toBe(403)
    expect((await call("POST", "/workflows/orders/instances/sleepy/terminate", {}, { "sec-fetch-site": "cross-site" })).status).toBe(403)
    expect((await call("POST", "/workflows/orders/instances/sleepy/terminate", {}, { authorization: "Bearer wrong" })).status).toBe(401)
    expect(snapshot(ctx)).toBe(before)
  })
})
