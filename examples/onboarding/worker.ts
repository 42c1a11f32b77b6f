/**
 * Example: user onboarding as a durable workflow (`DurabilityWorkflows`, promise API, Cloudflare Workflows style).
 *
 * Each `/onboarding/<object>` is one `Onboarding` object; each user who signs up is one instance of its
 * `onboarding` workflow, under the user's id. The workflow sends a verification mail (a step), waits up to
 * 24 hours for an `email.verified` event, sleeps 3 days and sends a tips mail (a step). While it waits or
 * sleeps the instance holds nothing but its rows: a durable timer on the object's one alarm wakes it. An
 * event sent before the wait is reached is kept for it. A user who never verifies ends `{ verified: false }`
 * when the wait times out. The demo shortens both waits through the instance's params:
 * `{ "verifyWithin": "5 seconds", "tipsAfter": "10 seconds" }` (defaults "24 hours" and "3 days").
 *
 * The mail service is a stand-in: it takes 2 seconds per mail and records it in the object's
 * `onboarding_mail` table (and logs it), so the walkthrough can send the verification event while the
 * first mail is still going out, before the wait is reached.
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  answerInspection,
  DurabilityScheduler,
  DurabilityWorkflows,
  type WorkflowDuration,
  type WorkflowEvent,
  type WorkflowInstanceInfo,
  WorkflowFinishedError,
  WorkflowNotFoundError,
  type WorkflowStep,
  WorkflowTimeoutError
} from "durability"
import { answer, HttpError, json, objectBody } from "../http.js"

export interface Env {
  readonly ONBOARDING: DurableObjectNamespace<Onboarding>
}

/** An instance's params: who signed up, and (for the demo) how long its waits are. */
export interface SignUp {
  readonly email: string
  /** How long to wait for `email.verified` (default "24 hours"). */
  readonly verifyWithin?: WorkflowDuration | undefined
  /** How long after verification the tips mail goes out (default "3 days"). */
  readonly tipsAfter?: WorkflowDuration | undefined
}

export type OnboardingOutput =
  | { readonly verified: false }
  | { readonly verified: true; readonly verifiedAt: string; readonly tipsMail: string }

export const HELP = `  # onboarding (a durable workflow: a mail, an event wait of 24 h, a 3-day sleep, a mail)
  curl -X POST http://127.0.0.1:8787/onboarding/demo/users/ana -d '{"email":"ana@example.com"}'
  curl -X POST http://127.0.0.1:8787/onboarding/demo/users/ana/events/email.verified -d '{"code":"123456"}'
  curl http://127.0.0.1:8787/onboarding/demo/users/ana
  curl -X POST http://127.0.0.1:8787/onboarding/demo/users/bo -d '{"email":"bo@example.com","verifyWithin":"5 seconds","tipsAfter":"10 seconds"}'
  curl http://127.0.0.1:8787/onboarding/demo/users/bo      # 8 s later: the wait timed out
`

/** The stand-in mail service's latency. */
const MAIL_LATENCY_MS = 2_000

export class Onboarding extends DurableObject<Env> {
  // One scheduler per object: it owns the object's one alarm.
  private readonly scheduler = new DurabilityScheduler({ context: this.ctx })
  private readonly workflows = new DurabilityWorkflows({
    scheduler: this.scheduler,
    workflows: {
      onboarding: (event: WorkflowEvent<SignUp>, step: WorkflowStep) => this.onboard(event, step)
    }
  })

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    // The app's own table: the mails the stand-in service sent, so the walkthrough can show them.
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS onboarding_mail (
      id TEXT PRIMARY KEY, user_id TEXT NOT NULL, kind TEXT NOT NULL, sent_at INTEGER NOT NULL)`)
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  /** The inspector's RPC (examples/index.ts mounts it at /_durability): the scheduler answers. */
  inspect(request: unknown) {
    return answerInspection(this.scheduler, request)
  }

  override fetch(request: Request): Promise<Response> {
    return answer(() =>
      this.route(request).catch((error: unknown) => {
        if (error instanceof WorkflowNotFoundError) throw new HttpError(404, error.message)
        if (error instanceof WorkflowFinishedError) throw new HttpError(409, error.message)
        throw error
      })
    )
  }

  /** The workflow. Replayed from the start on every run: a completed step returns what it stored. */
  private async onboard(event: WorkflowEvent<SignUp>, step: WorkflowStep): Promise<OnboardingOutput> {
    const user = event.instanceId
    // Its id (the mail's idempotency key) is the same on every retry of the step.
    await step.do("send verification mail", () => this.sendMail(`${user}:verify`, user, "verification"))
    let verifiedAt: Date
    try {
      // An event sent before this point (even while the mail above was going out) is kept for this wait.
      const verified = await step.waitForEvent("wait for verification", {
        type: "email.verified",
        timeout: event.payload.verifyWithin ?? "24 hours"
      })
      verifiedAt = verified.timestamp
    } catch (error) {
      if (error instanceof WorkflowTimeoutError) return { verified: false }
      throw error
    }
    await step.sleep("wait before tips", event.payload.tipsAfter ?? "3 days")
    const tipsMail = await step.do("send tips mail", () => this.sendMail(`${user}:tips`, user, "tips"))
    return { verified: true, verifiedAt: verifiedAt.toISOString(), tipsMail }
  }

  private async sendMail(id: string, user: string, kind: string): Promise<string> {
    await new Promise((resolve) => setTimeout(resolve, MAIL_LATENCY_MS))
    this.ctx.storage.sql.exec(
      "INSERT INTO onboarding_mail (id, user_id, kind, sent_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
      id,
      user,
      kind,
      Date.now()
    )
    console.log(`onboarding: ${kind} mail to "${user}" sent (${id})`)
    return id
  }

  private view(info: WorkflowInstanceInfo) {
    const iso = (ms: number | null) => ms === null ? null : new Date(ms).toISOString()
    const mails = this.ctx.storage.sql.exec("SELECT kind, sent_at FROM onboarding_mail WHERE user_id = ? ORDER BY sent_at", info.id)
      .toArray().map((row) => ({ kind: row.kind, sentAt: iso(Number(row.sent_at)) }))
    return {
      id: info.id,
      status: info.status,
      ...(info.output === undefined ? {} : { output: info.output }),
      ...(info.error === null ? {} : { error: info.error }),
      ...(info.waitingFor.length === 0 ? {} : { waitingFor: info.waitingFor }),
      ...(info.wakeAt === null ? {} : { wakeAt: iso(info.wakeAt) }),
      steps: info.steps.map((one) => ({
        name: one.name,
        status: one.status,
        ...(one.wakeAt === null || one.status === "completed" ? {} : { until: iso(one.wakeAt) }),
        ...(one.error === null ? {} : { error: one.error.name })
      })),
      mails
    }
  }

  private async route(request: Request): Promise<Response> {
    // /onboarding/<object>/users/<id>[/events/<type>]
    const parts = new URL(request.url).pathname.split("/").filter((part) => part.length > 0).map(decodeURIComponent)
    const [, , users, id, events, type, ...rest] = parts
    if (users !== "users" || id === undefined || rest.length > 0) throw new HttpError(404, "See GET / for the routes")
    const body = () => objectBody(request)
    const onboarding = this.workflows.onboarding
    if (events === undefined && request.method === "POST") {
      const input = await body()
      if (typeof input.email !== "string") throw new HttpError(400, "email must be a string")
      const params: SignUp = {
        email: input.email,
        ...(input.verifyWithin === undefined ? {} : { verifyWithin: input.verifyWithin as WorkflowDuration }),
        ...(input.tipsAfter === undefined ? {} : { tipsAfter: input.tipsAfter as WorkflowDuration })
      }
      // The user's id is the instance's: signing up twice returns the first instance unchanged.
      const instance = await onboarding.create({ id, params })
      return json(this.view(await instance.status()), 201)
    }
    if (events === undefined && request.method === "GET") {
      return json(this.view(await (await onboarding.get(id)).status()))
    }
    if (events === "events" && type !== undefined && request.method === "POST") {
      const instance = await onboarding.get(id)
      await instance.sendEvent({ type, payload: await body() })
      return json(this.view(await instance.status()), 202)
    }
    throw new HttpError(404, "See GET / for the routes")
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    // /onboarding/<object>/...: one object per name.
    const [, name] = new URL(request.url).pathname.split("/").filter((part) => part.length > 0)
    if (name === undefined) return json({ error: "Use /onboarding/<object>/users/<id>" }, 404)
    return await env.ONBOARDING.get(env.ONBOARDING.idFromName(name)).fetch(request)
  }
}
