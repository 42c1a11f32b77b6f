/**
 * Example: image jobs with the promise API (`durability`).
 *
 * Each `ImageJobs` object is one bucket of images. Uploading an image stores
 * its metadata and registers durable operations for it: one `resize` per
 * requested width and one `thumbnail` (JSON payloads; the "rendering" is
 * simulated). A `cleanup` named alarm, scheduled for the earliest expiry,
 * deletes expired images with their renditions, purges their job records and
 * schedules itself for the next expiry. Both helpers share one scheduler.
 *
 * An image id containing "flaky" fails every job's first attempt (a retry);
 * a width larger than the original fails terminally (`NonRetryableError`).
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  type DurabilityAlarmsInstance,
  type DurabilityInstance,
  DurabilityScheduler,
  type DurableAlarmInfo,
  type DurableCall,
  type DurableOperationResult,
  NonRetryableError,
  answerInspection
} from "durability"

export interface Env {
  readonly IMAGE_JOBS: DurableObjectNamespace<ImageJobs>
}

export interface ResizePayload {
  readonly imageId: string
  readonly width: number
}

export interface ThumbnailPayload {
  readonly imageId: string
  readonly size: number
}

export interface Rendition {
  readonly key: string
  readonly width: number
  readonly height: number
  readonly bytes: number
}

export interface UploadInput {
  readonly width: number
  readonly height: number
  readonly sizes: ReadonlyArray<number>
  readonly retentionMs: number
}

export interface JobView {
  readonly id: string
  readonly operation: "resize" | "thumbnail"
  readonly result: DurableOperationResult<Rendition>
}

export interface ImageView {
  readonly now: number
  readonly alarm: number | null
  readonly image: Record<string, SqlStorageValue> | null
  readonly jobs: ReadonlyArray<JobView>
  readonly renditions: ReadonlyArray<Record<string, SqlStorageValue>>
  /** The pending `cleanup` occurrence, if any. */
  readonly cleanup: Record<string, SqlStorageValue> | null
}

type JobHandlers = {
  resize: (call: DurableCall<ResizePayload>) => Promise<Rendition>
  thumbnail: (call: DurableCall<ThumbnailPayload>) => Promise<Rendition>
}
type CleanupHandlers = { cleanup: (info: DurableAlarmInfo) => Promise<void> }

const THUMBNAIL_SIZE = 128

/** Stands in for real image work: takes a little time, honours the abort signal. */
const render = (signal: AbortSignal, ms: number) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener("abort", () => {
      clearTimeout(timer)
      reject(signal.reason)
    }, { once: true })
  })

export class ImageJobs extends DurableObject<Env> {
  private readonly scheduler: DurabilityScheduler
  private readonly jobs: DurabilityInstance<JobHandlers>
  private readonly maintenance: DurabilityAlarmsInstance<CleanupHandlers>

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    ctx.storage.sql.exec(`
      CREATE TABLE IF NOT EXISTS images (
        id TEXT PRIMARY KEY,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        uploaded_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        job_ids TEXT NOT NULL
      );
      CREATE TABLE IF NOT EXISTS renditions (
        key TEXT PRIMARY KEY,
        image_id TEXT NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        rendered_at INTEGER NOT NULL
      );
    `)
    this.scheduler = new DurabilityScheduler({ context: ctx, alarmConcurrency: 5 })
    this.jobs = new Durability({
      scheduler: this.scheduler,
      handlers: {
        resize: (call: DurableCall<ResizePayload>) => this.resize(call),
        thumbnail: (call: DurableCall<ThumbnailPayload>) => this.thumbnail(call)
      },
      attemptTimeoutMs: 30_000,
      retries: { maxAttempts: 3, delay: (attempt) => attempt * 500 }
    })
    this.maintenance = new DurabilityAlarms({
      scheduler: this.scheduler,
      handlers: { cleanup: (info: DurableAlarmInfo) => this.cleanup(info) }
    })
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  /** The inspector's RPC (examples/index.ts mounts it at /_durability): the scheduler answers. */
  inspect(request: unknown) {
    return answerInspection(this.scheduler, request)
  }

  /** Stores the image and registers its jobs; returns at once with the job ids. */
  async upload(imageId: string, input: UploadInput): Promise<{ imageId: string; jobs: ReadonlyArray<string>; expiresAt: number }> {
    const now = Date.now()
    const expiresAt = now + input.retentionMs
    const calls = [
      ...input.sizes.map((width) => ({ operation: "resize" as const, id: `${imageId}:resize:${width}`, width })),
      { operation: "thumbnail" as const, id: `${imageId}:thumbnail:${THUMBNAIL_SIZE}`, width: THUMBNAIL_SIZE }
    ]
    this.ctx.storage.sql.exec(
      `INSERT INTO images (id, width, height, uploaded_at, expires_at, job_ids) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`,
      imageId,
      input.width,
      input.height,
      now,
      expiresAt,
      JSON.stringify(calls.map(({ id, operation }) => ({ id, operation })))
    )
    // Ids are deterministic, so uploading the same image again registers nothing new.
    for (const call of calls) {
      if (call.operation === "resize") await this.jobs.resize({ id: call.id, payload: { imageId, width: call.width } })
      else await this.jobs.thumbnail({ id: call.id, payload: { imageId, size: call.width } })
    }
    await this.scheduleCleanup()
    return { imageId, jobs: calls.map((call) => call.id), expiresAt }
  }

  /** The image, its jobs (optionally waiting up to `waitMs` for each to settle) and its renditions. */
  async view(imageId: string, waitMs: number): Promise<ImageView> {
    const sql = this.ctx.storage.sql
    const image = sql.exec("SELECT * FROM images WHERE id = ?", imageId).toArray()[0] ?? null
    const calls = image === null
      ? []
      : JSON.parse(String(image.job_ids)) as ReadonlyArray<{ id: string; operation: "resize" | "thumbnail" }>
    const jobs = await Promise.all(calls.map(async ({ id, operation }): Promise<JobView> => ({
      id,
      operation,
      // A job handle: `wait` resolves when the call settles or the timeout passes.
      result: await this.jobs[operation].job(id).wait({ timeoutMs: waitMs })
    })))
    return {
      now: Date.now(),
      alarm: await this.ctx.storage.getAlarm(),
      image,
      jobs,
      renditions: sql.exec("SELECT * FROM renditions WHERE image_id = ? ORDER BY width DESC", imageId).toArray(),
      cleanup: sql.exec("SELECT name, scheduled_at, attempt, status FROM durability_alarms").toArray()[0] ?? null
    }
  }

  private async resize(call: DurableCall<ResizePayload>): Promise<Rendition> {
    const original = this.original(call.payload.imageId)
    if (call.payload.width > original.width) {
      throw new NonRetryableError(`cannot upscale ${original.width}px to ${call.payload.width}px`)
    }
    if (call.payload.imageId.includes("flaky") && call.attempt === 1) throw new Error("renderer crashed (flaky image)")
    await render(call.signal, 150)
    const height = Math.round(original.height * call.payload.width / original.width)
    return this.store(call.payload.imageId, `${call.payload.imageId}/w${call.payload.width}.webp`, call.payload.width, height)
  }

  private async thumbnail(call: DurableCall<ThumbnailPayload>): Promise<Rendition> {
    this.original(call.payload.imageId)
    if (call.payload.imageId.includes("flaky") && call.attempt === 1) throw new Error("renderer crashed (flaky image)")
    await render(call.signal, 50)
    const size = call.payload.size
    return this.store(call.payload.imageId, `${call.payload.imageId}/thumb${size}.webp`, size, size)
  }

  /** Deletes expired images and their job records, then schedules itself for the next expiry. */
  private async cleanup(info: DurableAlarmInfo): Promise<void> {
    const sql = this.ctx.storage.sql
    const now = Date.now()
    const expired = sql.exec("DELETE FROM images WHERE expires_at <= ? RETURNING id", now).toArray().map((row) => String(row.id))
    for (const id of expired) sql.exec("DELETE FROM renditions WHERE image_id = ?", id)
    // `purgeBefore` goes by creation time: cut at the oldest image kept, whose jobs were registered
    // at or after its upload. Records of newer expired images go with a later cleanup.
    const [oldest] = sql.exec<{ at: number | null }>("SELECT MIN(uploaded_at) AS at FROM images").toArray()
    const purged = await this.jobs.purgeBefore(oldest?.at ?? now)
    console.log(`cleanup (attempt ${info.attempt}): ${expired.length} image(s) expired, ${purged} job record(s) purged`)
    await this.scheduleCleanup()
  }

  /** `cleanup` at the earliest expiry; scheduling a name replaces its pending occurrence. */
  private async scheduleCleanup(): Promise<void> {
    const [next] = this.ctx.storage.sql.exec<{ at: number | null }>("SELECT MIN(expires_at) AS at FROM images").toArray()
    if (typeof next?.at === "number") await this.maintenance.cleanup(next.at)
  }

  private original(imageId: string): { width: number; height: number } {
    const [image] = this.ctx.storage.sql.exec<{ width: number; height: number }>(
      "SELECT width, height FROM images WHERE id = ?",
      imageId
    ).toArray()
    if (image === undefined) throw new NonRetryableError(`image "${imageId}" no longer exists`)
    return image
  }

  private store(imageId: string, key: string, width: number, height: number): Rendition {
    const bytes = Math.round(width * height * 0.15)
    this.ctx.storage.sql.exec(
      `INSERT INTO renditions (key, image_id, width, height, bytes, rendered_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET rendered_at = excluded.rendered_at`,
      key,
      imageId,
      width,
      height,
      bytes,
      Date.now()
    )
    return { key, width, height, bytes }
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP routes: /images/...
// ---------------------------------------------------------------------------------------------

export const HELP = `  # image-jobs (promise API): resize + thumbnail operations, a cleanup named alarm
  curl -X POST http://127.0.0.1:8787/images/demo/cat -d '{"width":4000,"height":3000,"sizes":[1024,512],"retentionMs":60000}'
  curl 'http://127.0.0.1:8787/images/demo/cat?waitMs=3000'   # waits up to 3 s for every job
  curl -X POST http://127.0.0.1:8787/images/demo/flaky-dog -d '{"width":800,"height":600,"sizes":[400,1600]}'
  curl 'http://127.0.0.1:8787/images/demo/flaky-dog?waitMs=3000'
`

/** Checks an upload body; shared by both image examples. */
export const parseUpload = (body: unknown): UploadInput | string => {
  const isInt = (value: unknown, min: number, max: number): value is number =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= min && value <= max
  if (typeof body !== "object" || body === null) return "Body must be a JSON object"
  const { width, height, sizes = [1024, 256], retentionMs = 60_000 } = body as Record<string, unknown>
  if (!isInt(width, 1, 20_000) || !isInt(height, 1, 20_000)) return "width and height must be integers from 1 to 20000"
  if (!Array.isArray(sizes) || sizes.length > 10 || !sizes.every((size) => isInt(size, 16, 20_000))) {
    return "sizes must be an array of at most 10 integers from 16 to 20000"
  }
  if (!isInt(retentionMs, 1_000, 86_400_000)) return "retentionMs must be an integer from 1000 to 86400000"
  return { width, height, sizes: sizes as ReadonlyArray<number>, retentionMs }
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body, null, 2) + "\n", { status, headers: { "content-type": "application/json" } })

/** `/images/<bucket>/<imageId>` (or another prefix) → the parts after the prefix. */
export const routeParts = (request: Request) => {
  const url = new URL(request.url)
  const parts = url.pathname.split("/").filter((part) => part.length > 0).map(decodeURIComponent)
  const waitMs = Number(url.searchParams.get("waitMs") ?? "0")
  return { parts, waitMs: Number.isSafeInteger(waitMs) && waitMs >= 0 && waitMs <= 30_000 ? waitMs : 0 }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { parts, waitMs } = routeParts(request)
    const [route, bucket, imageId] = parts
    if (route !== "images" || bucket === undefined || imageId === undefined || parts.length > 3) {
      return json({ error: "Not found; see GET /" }, 404)
    }
    const stub = env.IMAGE_JOBS.get(env.IMAGE_JOBS.idFromName(bucket))
    if (request.method === "GET") return json(await stub.view(imageId, waitMs))
    if (request.method !== "POST") return json({ error: "Use GET or POST /images/<bucket>/<imageId>" }, 405)
    let body: unknown
    try {
      body = await request.json()
    } catch {
      return json({ error: "Body must be JSON" }, 400)
    }
    const input = parseUpload(body)
    if (typeof input === "string") return json({ error: input }, 400)
    return json(await stub.upload(imageId, input), 202)
  }
} satisfies ExportedHandler<Env>
