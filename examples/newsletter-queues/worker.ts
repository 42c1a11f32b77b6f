/**
 * Example: the newsletter's emails processed by a Cloudflare Queues consumer, and the same queue
 * sharded over several objects (`DurabilityJobs` external queues, `DurabilityJobs.consumer`, `DurabilityJobs.router`).
 *
 * A `Mailroom` object keeps the `email` jobs (payloads, attempts, rate limit, dead letters) and sends
 * each due one as a small envelope to the `durability-examples-email` queue (its producer binding
 * `EMAIL_QUEUE`); the consumer below runs it, calling the owning object back over RPC (`jobsCall`) to
 * start, heartbeat and complete it with the lease's fencing token. An address containing "flaky" fails
 * its first attempt (the object retries it: a new lease, a new envelope); one containing "bounce"
 * always fails and is dead-lettered. `/mailroom-sharded` spreads the same jobs over 4 Mailroom objects
 * by job id, and reads them back through the router.
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  DurabilityJobs,
  DurabilityScheduler,
  type DurableQueuedJob,
  answerInspection
} from "durability"
import { answer, json } from "../http.js"

export interface Env {
  readonly MAILROOM: DurableObjectNamespace<Mailroom>
  readonly EMAIL_QUEUE: Queue
}

export interface Email {
  readonly to: string
  readonly subject: string
}

export const HELP = `  # newsletter through Cloudflare Queues (external queue, consumer Worker, fencing tokens) and sharded
  curl -X POST http://127.0.0.1:8787/mailroom/demo/send -d '{"subject":"Spring sale","to":["ann@example.com","flaky-bob@example.com","bounce-dan@example.com"]}'
  curl 'http://127.0.0.1:8787/mailroom/demo/jobs?waitMs=10000'          # once none is waiting or active
  curl http://127.0.0.1:8787/mailroom/demo/dead-letters
  curl -X POST http://127.0.0.1:8787/mailroom-sharded/send -d '{"subject":"Digest","to":["a@example.com","b@example.com","c@example.com","d@example.com","e@example.com"]}'
  curl 'http://127.0.0.1:8787/mailroom-sharded/jobs?waitMs=10000'        # fan-in over the 4 shards
`

const SHARDS = 4

export class Mailroom extends DurableObject<Env> {
  private readonly scheduler = new DurabilityScheduler({ context: this.ctx })
  readonly jobs = new DurabilityJobs({
    scheduler: this.scheduler,
    queues: {
      email: {
        // Leased and sent to the queue by this object; the consumer below runs them.
        processing: { queue: this.env.EMAIL_QUEUE },
        leaseMs: 15_000,
        rateLimit: { capacity: 20, refillPerSecond: 10 },
        retries: { maxAttempts: 3, delay: () => 1_000 },
        deadLetter: true
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

  /** The consumer's (and the router's) calls: `DurabilityJobs.serve` runs them against this object's jobs. */
  jobsCall(call: unknown): Promise<unknown> {
    return DurabilityJobs.serve(this.jobs, call)
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url)
    const action = url.pathname.split("/").filter((part) => part.length > 0)[2]
    return answer(async () => {
      if (request.method === "POST" && action === "send") {
        const body = await request.json() as { readonly subject?: unknown; readonly to?: unknown }
        const to = Array.isArray(body.to) ? body.to.filter((address): address is string => typeof address === "string") : []
        if (typeof body.subject !== "string" || to.length === 0) return json({ error: "Give { subject, to: [addresses] }" }, 400)
        const subject = body.subject
        return json(await this.jobs.email.addBulk(to.map((address) => ({ id: address, payload: { to: address, subject } }))), 202)
      }
      if (action === "jobs") return json(await this.listing(Number(url.searchParams.get("waitMs") ?? "0")))
      if (action === "dead-letters") return json(await this.jobs.email.deadLetters.list())
      return json({ error: "See GET /" }, 404)
    })
  }

  /** Every email job as it stands; with `waitMs`, once none is waiting, delayed or active (or the time ran out). */
  private async listing(waitMs: number) {
    const deadline = Date.now() + Math.min(Math.max(waitMs, 0), 30_000)
    for (;;) {
      const counts = await this.jobs.email.counts()
      if (counts.waiting + counts.delayed + counts.active === 0 || Date.now() >= deadline) {
        const page = await this.jobs.email.list({ limit: 100 })
        return {
          counts,
          jobs: page.items.map((job) => ({
            id: job.id,
            state: job.state,
            attempt: job.attempt,
            ...(job.result === undefined ? {} : { result: job.result }),
            ...(job.error === undefined ? {} : { error: job.error.message })
          }))
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
}

/** Stands in for an email provider: flaky addresses fail their first attempt, bounces always fail. */
const sendEmail = async (job: DurableQueuedJob<Email>) => {
  await job.log(`attempt ${job.attempt}: sending "${job.payload.subject}" to ${job.payload.to}`)
  if (job.payload.to.includes("bounce")) throw new Error(`550 mailbox ${job.payload.to} unavailable`)
  if (job.payload.to.includes("flaky") && job.attempt === 1) throw new Error("421 service busy, try again later")
  return { messageId: `msg-${job.idempotencyKey.slice(-8)}` }
}

/** The Queues consumer of the email queue, and of its dead-letter queue. */
export const queue = async (batch: MessageBatch, env: Env): Promise<void> => {
  if (batch.queue.endsWith("-dlq")) return await deadLetters(batch, env)
  return await consume(batch, env)
}

const consume = DurabilityJobs.consumer<Env>({
  namespace: (env) => env.MAILROOM,
  handlers: { email: (job: DurableQueuedJob<Email>) => sendEmail(job) }
})

const deadLetters = DurabilityJobs.deadLetterConsumer<Env>({ namespace: (env) => env.MAILROOM })

export const router = (env: Env) =>
  DurabilityJobs.router({ namespace: env.MAILROOM, shards: SHARDS, name: "mailroom-shard" })

/** `/mailroom/<object>/...` goes to that object; `/mailroom-sharded/...` to the router over 4 objects. */
export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url)
    const [prefix, name, action] = url.pathname.split("/").filter((part) => part.length > 0)
    if (prefix === "mailroom") {
      if (name === undefined) return json({ error: "Use /mailroom/<object>/..." }, 404)
      return await env.MAILROOM.get(env.MAILROOM.idFromName(name)).fetch(request)
    }
    // /mailroom-sharded/<action>
    const queue = router(env).queue("email")
    if (request.method === "POST" && name === "send") {
      const body = await request.json() as { readonly subject?: unknown; readonly to?: unknown }
      const to = Array.isArray(body.to) ? body.to.filter((address): address is string => typeof address === "string") : []
      if (typeof body.subject !== "string" || to.length === 0) return json({ error: "Give { subject, to: [addresses] }" }, 400)
      const subject = body.subject
      const added = await queue.addBulk(to.map((address) => ({ id: address, payload: { to: address, subject } })))
      return json(added.map((result, index) => ({ ...result, shard: router(env).shardOf(to[index]!) })), 202)
    }
    if (name === "jobs") {
      const deadline = Date.now() + Math.min(Math.max(Number(url.searchParams.get("waitMs") ?? "0"), 0), 30_000)
      for (;;) {
        const counts = await queue.counts()
        if (counts.waiting + counts.delayed + counts.active === 0 || Date.now() >= deadline) {
          const page = await queue.list({ limit: 100 })
          return json({ counts, jobs: page.items.map((job) => ({ id: job.id, state: job.state, attempt: job.attempt })) })
        }
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
    }
    void action
    return json({ error: "See GET /" }, 404)
  }
}
