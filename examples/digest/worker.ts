/**
 * Example: a daily digest in each user's time zone (`DurabilitySchedules`, promise API), whose run
 * is two durable steps.
 *
 * One `Digest` object serves many users. Subscribing upserts a cron schedule (`0 8 * * *` by
 * default) in the user's IANA time zone, keyed by the user: subscribing again with the same
 * settings changes nothing, so it is safe to call on every sign-in. Each run builds the digest
 * (step "build") and sends it (step "send"). A user with `flakyMailbox` makes the first send of
 * each run fail: the retry gets the stored digest back instead of building it again, and sends it
 * under the run's idempotency key, so the mailbox keeps one copy per day whatever happens.
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import { answerInspection, type AlarmInvocationInfo, DurabilityScheduler, DurabilitySchedules, type DurableScheduleRun } from "durability"
import { answer, HttpError, json, objectBody } from "../http.js"

export interface Env {
  readonly DIGEST: DurableObjectNamespace<Digest>
}

export interface DigestPayload {
  readonly userId: string
  readonly flakyMailbox: boolean
}

export const HELP = `  # digest (recurring schedules in the user's time zone, each run two durable steps)
  curl -X POST http://127.0.0.1:8787/digest/demo/users/ana -d '{"timezone":"Europe/Lisbon","hour":8,"flakyMailbox":true}'
  curl -X POST http://127.0.0.1:8787/digest/demo/users/ana/trigger
  curl 'http://127.0.0.1:8787/digest/demo/users/ana?waitMs=5000'
  curl -X POST http://127.0.0.1:8787/digest/demo/users/bo -d '{"timezone":"Asia/Tokyo","cron":"*/10 * * * * *"}'
  curl http://127.0.0.1:8787/digest/demo/users/bo        # 25 s later: a run every 10 s, on the slot
  curl -X POST http://127.0.0.1:8787/digest/demo/users/ana/pause
  curl -X DELETE http://127.0.0.1:8787/digest/demo/users/ana
`

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export class Digest extends DurableObject<Env> {
  // One scheduler per object: it owns the object's one alarm.
  private readonly scheduler = new DurabilityScheduler({ context: this.ctx })
  private readonly schedules = new DurabilitySchedules({
    scheduler: this.scheduler,
    // At most two digests build at once, whatever else the object runs.
    concurrency: 2,
    retries: { maxAttempts: 3, delay: () => 2_000 },
    handlers: {
      daily: (run: DurableScheduleRun<DigestPayload>) => this.sendDigest(run)
    }
  })

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    // The app's own tables: what each step did, so the walkthrough can show it.
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS digest_builds (
      user_id TEXT NOT NULL, run_number INTEGER NOT NULL, attempt INTEGER NOT NULL, built_at INTEGER NOT NULL)`)
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS digest_mailbox (
      idempotency_key TEXT PRIMARY KEY, user_id TEXT NOT NULL, body TEXT NOT NULL, sent_at INTEGER NOT NULL)`)
  }

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

  private async sendDigest(run: DurableScheduleRun<DigestPayload>): Promise<void> {
    const { flakyMailbox, userId } = run.payload
    // Step 1: build once per run; a retry gets this value back without building again.
    const body = await run.step("build", () => {
      this.ctx.storage.sql.exec(
        "INSERT INTO digest_builds (user_id, run_number, attempt, built_at) VALUES (?, ?, ?, ?)",
        userId,
        run.runNumber,
        run.attempt,
        Date.now()
      )
      return `Digest #${run.runNumber} for ${userId}, for the slot ${new Date(run.scheduledTime).toISOString()}`
    })
    if (flakyMailbox && run.attempt === 1) throw new Error("the mailbox is busy, try again")
    // Step 2: send under the run's idempotency key (stable across its retries): one copy per run.
    await run.step("send", () => {
      this.ctx.storage.sql.exec(
        "INSERT INTO digest_mailbox (idempotency_key, user_id, body, sent_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        run.idempotencyKey,
        userId,
        body,
        Date.now()
      )
      return run.idempotencyKey
    })
  }

  private async subscribe(userId: string, body: Record<string, unknown>) {
    const timezone = typeof body.timezone === "string" ? body.timezone : "UTC"
    const hour = body.hour === undefined ? 8 : Number(body.hour)
    const cron = typeof body.cron === "string" ? body.cron : `0 ${hour} * * *`
    const payload: DigestPayload = { userId, flakyMailbox: body.flakyMailbox === true }
    // Missed while the object was away (it is evicted between runs): the latest missed digest still goes out.
    const result = await this.schedules.daily.upsert(userId, { cron, timezone }, { payload, catchUp: "latest" })
    return { ...result, nextRunAt: result.nextRunAt === null ? null : new Date(result.nextRunAt).toISOString() }
  }

  private async describe(userId: string) {
    const schedule = await this.schedules.daily.get(userId)
    if (schedule === undefined) throw new HttpError(404, `No digest for "${userId}"`)
    const builds = this.ctx.storage.sql.exec(
      "SELECT run_number AS runNumber, attempt FROM digest_builds WHERE user_id = ? ORDER BY rowid",
      userId
    ).toArray()
    const mailbox = this.ctx.storage.sql.exec(
      "SELECT body, sent_at AS sentAt FROM digest_mailbox WHERE user_id = ? ORDER BY sent_at",
      userId
    ).toArray().map((row) => ({ body: row.body, sentAt: new Date(Number(row.sentAt)).toISOString() }))
    const iso = (ms: number | null | undefined) => ms === null || ms === undefined ? null : new Date(ms).toISOString()
    return {
      user: userId,
      schedule: schedule.description,
      status: schedule.status,
      nextRunAt: iso(schedule.nextRunAt),
      runCount: schedule.runCount,
      currentRun: schedule.currentRun === null ? null : {
        ...schedule.currentRun,
        scheduledTime: iso(schedule.currentRun.scheduledTime),
        nextAttemptAt: iso(schedule.currentRun.nextAttemptAt)
      },
      lastRun: schedule.lastRun === null ? null : {
        runNumber: schedule.lastRun.runNumber,
        scheduledTime: iso(schedule.lastRun.scheduledTime),
        manual: schedule.lastRun.manual,
        outcome: schedule.lastRun.outcome,
        settledAt: iso(schedule.lastRun.settledAt)
      },
      builds,
      mailbox
    }
  }

  /** Waits (up to `waitMs`) until no run of the user's digest is pending or in progress. */
  private async settled(userId: string, waitMs: number) {
    const deadline = Date.now() + waitMs
    for (;;) {
      const schedule = await this.schedules.daily.get(userId)
      const busy = schedule !== undefined && (schedule.currentRun !== null || (schedule.nextRunAt ?? Infinity) <= Date.now())
      if (!busy || Date.now() >= deadline) return
      await sleep(100)
    }
  }

  private async route(request: Request): Promise<Response> {
    const url = new URL(request.url)
    // /digest/<object>/users/<userId>[/<action>]
    const [, , users, userId, action, ...rest] = url.pathname.split("/").filter((part) => part.length > 0).map(decodeURIComponent)
    if (users !== "users" || userId === undefined || rest.length > 0) throw new HttpError(404, "See GET / for the routes")
    const body = () => objectBody(request)
    const waitMs = Math.min(Math.max(Number(url.searchParams.get("waitMs") ?? "0") || 0, 0), 30_000)
    switch (`${request.method} ${action ?? ""}`) {
      case "POST ":
        return json(await this.subscribe(userId, await body()))
      case "GET ":
        await this.settled(userId, waitMs)
        return json(await this.describe(userId))
      case "POST trigger":
        return json({ triggered: await this.schedules.daily.trigger(userId) }, 202)
      case "POST pause":
        return json({ paused: await this.schedules.daily.pause(userId) })
      case "POST resume":
        return json({ resumed: await this.schedules.daily.resume(userId) })
      case "DELETE ":
        return json({ removed: await this.schedules.daily.remove(userId) })
      default:
        throw new HttpError(404, "See GET / for the routes")
    }
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    // /digest/<object>/...: one object per name.
    const [, name] = new URL(request.url).pathname.split("/").filter((part) => part.length > 0)
    if (name === undefined) return json({ error: "Use /digest/<object>/users/<userId>" }, 404)
    return await env.DIGEST.get(env.DIGEST.idFromName(name)).fetch(request)
  }
}
