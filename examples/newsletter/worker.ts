/**
 * Example: a newsletter sender on job queues (`DurabilityJobs`, promise API).
 *
 * One `Newsletter` object serves many tenants. Sending a newsletter adds a flow in one
 * transaction: a `newsletter` parent job whose children are one `email` job per recipient. The
 * `email` queue has a token-bucket rate limit of its own and one per tenant (`groupRateLimit`), so
 * a big tenant cannot starve the others; its jobs report progress and write log lines, and retry
 * with a delay. The fake provider (`provider.ts`) refuses an address containing "flaky" twice
 * (the retries get it through) and one containing "bounce" always (the job fails for good and is
 * dead-lettered, until `/provider/fix` repairs the mailbox and the dead letter is redriven).
 * Children use `onFailure: "ignore"`, so the parent runs anyway and reports which failed.
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  DurabilityJobs,
  DurabilityScheduler,
  type DurableJob,
  type DurableJobState,
  type DurableQueue,
  answerInspection
} from "durability"
import { answer, HttpError, json, objectBody } from "../http.js"
import { FakeProvider } from "./provider.js"

export interface Env {
  readonly NEWSLETTER: DurableObjectNamespace<Newsletter>
}

export interface EmailPayload {
  readonly tenant: string
  readonly newsletterId: string
  readonly to: string
  readonly subject: string
}

export interface NewsletterPayload {
  readonly tenant: string
  readonly subject: string
  readonly recipients: number
}

export interface Delivery {
  readonly to: string
  readonly messageId: string
}

export interface Report {
  readonly delivered: number
  readonly failed: ReadonlyArray<{ readonly id: string; readonly to: string; readonly state: DurableJobState; readonly error: string }>
}

const QUEUES = ["newsletter", "email"] as const

/** Stands in for rendering the message: takes a little time (so `active` is visible), honours the signal. */
const render = (signal: AbortSignal, ms: number) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener("abort", () => {
      clearTimeout(timer)
      reject(signal.reason)
    }, { once: true })
  })

export class Newsletter extends DurableObject<Env> {
  private readonly provider = new FakeProvider(this.ctx.storage.sql)
  // One scheduler per object: it owns the object's one alarm.
  private readonly scheduler = new DurabilityScheduler({ context: this.ctx })
  private readonly jobs = new DurabilityJobs({
    scheduler: this.scheduler,
    queues: {
      newsletter: {
        handler: (job: DurableJob<NewsletterPayload>) => this.report(job),
        removeOnComplete: { ageMs: 7 * 86_400_000 }
      },
      email: {
        handler: (job: DurableJob<EmailPayload>) => this.sendEmail(job),
        concurrency: 4,
        // The provider's account limit, and each tenant's share of it.
        rateLimit: { capacity: 10, refillPerSecond: 5 },
        groupRateLimit: { key: (payload: EmailPayload) => payload.tenant, capacity: 2, refillPerSecond: 1 },
        retries: { maxAttempts: 3, delay: (attempt) => attempt * 1_000 },
        attemptTimeoutMs: 10_000,
        removeOnComplete: { count: 1_000, ageMs: 86_400_000 },
        removeOnFail: { ageMs: 7 * 86_400_000 },
        deadLetter: true,
        keepLogs: 20
      }
    }
  })

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  /** The inspector's RPC (examples/index.ts mounts it at /_durability): the scheduler answers. */
  inspect(request: unknown) {
    return answerInspection(this.scheduler, request)
  }

  override fetch(request: Request): Promise<Response> {
    return answer(() => this.route(request))
  }

  /** One recipient: render, hand to the provider under the job's idempotency key, report. */
  private async sendEmail(job: DurableJob<EmailPayload>): Promise<Delivery> {
    const { subject, to } = job.payload
    await job.log(`attempt ${job.attempt}/${job.maxAttempts}: rendering "${subject}" for ${to}`)
    await job.progress(20)
    await render(job.signal, 500)
    await job.progress(60)
    // The key is the same on every attempt of this job: a retry after the provider accepted
    // the message (an eviction, a timeout) gets the same message back, not a second email.
    const outcome = this.provider.send({ idempotencyKey: job.idempotencyKey, to, subject })
    if (!outcome.ok) {
      await job.log(`provider refused: ${outcome.error}`)
      throw new Error(outcome.error)
    }
    await job.log(`accepted as ${outcome.messageId}${outcome.replayed ? " (replayed)" : ""}`)
    await job.progress(100)
    return { to, messageId: outcome.messageId }
  }

  /** The parent: runs once every recipient's job finished, whatever their outcome (`onFailure: "ignore"`). */
  private async report(job: DurableJob<NewsletterPayload>): Promise<Report> {
    const children = Object.entries(await job.childrenValues())
    const failed: Array<Report["failed"][number]> = []
    for (const [id, child] of children) {
      if (child.state === "completed") continue
      const email = await this.jobs.email.get(id)
      failed.push({ id, to: email?.payload.to ?? "?", state: child.state, error: child.error?.message ?? child.state })
    }
    const delivered = children.length - failed.length
    await job.log(`${delivered} of ${children.length} delivered for ${job.payload.tenant}`)
    for (const failure of failed) await job.log(`${failure.id} (${failure.to}) ${failure.state}: ${failure.error}`)
    await job.progress(100)
    return { delivered, failed }
  }

  private queue(name: string | undefined): DurableQueue<unknown, unknown> {
    if (name === "newsletter") return this.jobs.newsletter
    if (name === "email") return this.jobs.email
    throw new HttpError(404, `No queue ${JSON.stringify(name)}; queues: ${QUEUES.join(", ")}`)
  }

  /** A job with, for a parent, each child's state, attempt and progress. */
  private async describe(queue: DurableQueue<unknown, unknown>, id: string, waitMs: number) {
    const job = waitMs > 0 ? await queue.job(id).wait({ timeoutMs: waitMs }) : await queue.get(id)
    if (job === undefined) throw new HttpError(404, `No job "${id}"`)
    if (job.children === undefined) return job
    const children = await Promise.all(job.children.map(async (child) => {
      const info = await this.queue(child.queue).get(child.id)
      return info === undefined ? { id: child.id, state: "removed" } : {
        id: child.id,
        to: (info.payload as EmailPayload).to,
        state: info.state,
        attempt: info.attempt,
        progress: info.progress,
        ...(info.error === undefined ? {} : { error: info.error.message })
      }
    }))
    return { ...job, children }
  }

  private async route(request: Request): Promise<Response> {
    const url = new URL(request.url)
    // /newsletter/<object>/<action>/...
    const [, , action, ...rest] = url.pathname.split("/").filter((part) => part.length > 0).map(decodeURIComponent)
    const post = request.method === "POST"
    const body = () => objectBody(request)
    const waitMs = Math.min(Math.max(Number(url.searchParams.get("waitMs") ?? "0") || 0, 0), 30_000)

    if (post && action === "send" && rest.length === 0) return json(await this.send(await body()), 202)
    if (!post && action === "jobs" && rest.length === 2) return json(await this.describe(this.queue(rest[0]), rest[1]!, waitMs))
    if (!post && action === "jobs" && rest.length === 1) {
      const states = url.searchParams.get("state")?.split(",") as Array<DurableJobState> | undefined
      const cursor = url.searchParams.get("cursor") ?? undefined
      const limit = url.searchParams.has("limit") ? Number(url.searchParams.get("limit")) : undefined
      const page = await this.queue(rest[0]).list({ states, cursor, limit })
      return json({ ...page, items: page.items.map(({ id, state, attempt, progress, runAt }) => ({ id, state, attempt, progress, runAt })) })
    }
    if (!post && action === "logs" && rest.length === 2) return json(await this.queue(rest[0]).logs(rest[1]!))
    if (!post && action === "counts" && rest.length === 0) {
      const counts: Record<string, unknown> = {}
      for (const name of QUEUES) {
        const queue = this.queue(name)
        counts[name] = { paused: await queue.isPaused(), ...(await queue.counts()) }
      }
      return json(counts)
    }
    if (!post && action === "dead-letters" && rest.length === 0) return json(await this.jobs.email.deadLetters.list())
    if (post && action === "redrive" && rest.length === 0) {
      const { ids } = await body()
      const redriven = await this.jobs.email.deadLetters.redrive(ids === undefined ? {} : { ids: ids as Array<string> })
      return json({ redriven })
    }
    if (post && (action === "pause" || action === "resume") && rest.length === 1) {
      const queue = this.queue(rest[0])
      await (action === "pause" ? queue.pause() : queue.resume())
      return json({ queue: rest[0], paused: await queue.isPaused() })
    }
    if (action === "provider" && rest.length === 0 && !post) return json(this.provider.view())
    if (action === "provider" && rest[0] === "fix" && rest.length === 1 && post) {
      const { address } = await body()
      if (typeof address !== "string" || address.length === 0) throw new HttpError(400, "address must be a non-empty string")
      this.provider.fix(address)
      return json(this.provider.view().fixed)
    }
    throw new HttpError(404, "Not found; see GET /")
  }

  /** Adds the newsletter and its emails as one flow: all of it, or nothing. */
  private async send(input: Record<string, unknown>) {
    const { id = `nl-${crypto.randomUUID().slice(0, 8)}`, recipients, subject = "News", tenant } = input
    if (typeof tenant !== "string" || !/^[\w-]{1,64}$/.test(tenant)) throw new HttpError(400, "tenant must be 1 to 64 letters, digits, - or _")
    if (typeof id !== "string" || !/^[\w-]{1,64}$/.test(id)) throw new HttpError(400, "id must be 1 to 64 letters, digits, - or _")
    if (typeof subject !== "string" || subject.length > 200) throw new HttpError(400, "subject must be a string of at most 200 characters")
    if (
      !Array.isArray(recipients) || recipients.length === 0 || recipients.length > 500 ||
      !recipients.every((to): to is string => typeof to === "string" && /^[^@\s]+@[^@\s]+$/.test(to))
    ) {
      throw new HttpError(400, "recipients must be an array of 1 to 500 email addresses")
    }
    // For a clearer answer only: the flow itself rejects an existing id, in its transaction.
    if (await this.jobs.newsletter.get(id) !== undefined) throw new HttpError(409, `Newsletter "${id}" exists already`)
    const payload: NewsletterPayload = { tenant, subject, recipients: recipients.length }
    return this.jobs.flow({
      queue: "newsletter",
      id,
      payload,
      children: recipients.map((to, index) => ({
        queue: "email",
        id: `${id}-${index + 1}`,
        payload: { tenant, newsletterId: id, to, subject } satisfies EmailPayload,
        // A failed recipient must not fail the newsletter: the parent runs and reports it.
        onFailure: "ignore" as const
      }))
    })
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP routes: /newsletter/<object>/...
// ---------------------------------------------------------------------------------------------

export const HELP = `  # newsletter (promise API, job queues): a flow of per-recipient emails, rate limits, retries, dead letters
  curl -X POST http://127.0.0.1:8787/newsletter/demo/send -d '{"id":"spring","tenant":"acme","subject":"Spring sale","recipients":["ann@example.com","flaky-bob@example.com","cat@example.com","bounce-dan@example.com","eve@example.com"]}'
  curl http://127.0.0.1:8787/newsletter/demo/jobs/newsletter/spring            # the parent and each recipient's state
  curl http://127.0.0.1:8787/newsletter/demo/counts
  curl 'http://127.0.0.1:8787/newsletter/demo/jobs/newsletter/spring?waitMs=15000'   # waits until it finished
  curl 'http://127.0.0.1:8787/newsletter/demo/jobs/email?state=completed,failed'
  curl http://127.0.0.1:8787/newsletter/demo/logs/email/spring-2
  curl http://127.0.0.1:8787/newsletter/demo/dead-letters
  curl -X POST http://127.0.0.1:8787/newsletter/demo/provider/fix -d '{"address":"bounce-dan@example.com"}'
  curl -X POST http://127.0.0.1:8787/newsletter/demo/redrive -d '{"ids":["spring-4"]}'
  curl http://127.0.0.1:8787/newsletter/demo/provider
  curl -X POST http://127.0.0.1:8787/newsletter/demo/pause/email
  curl -X POST http://127.0.0.1:8787/newsletter/demo/resume/email
`

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const [route, object] = new URL(request.url).pathname.split("/").filter((part) => part.length > 0)
    if (route !== "newsletter" || object === undefined) return json({ error: "Not found; see GET /" }, 404)
    return env.NEWSLETTER.get(env.NEWSLETTER.idFromName(decodeURIComponent(object))).fetch(request)
  }
} satisfies ExportedHandler<Env>
