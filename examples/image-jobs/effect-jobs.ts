/**
 * The Effect-native image jobs: a user service (`ImageStore`), Schema payloads
 * and results, a `Schedule` as the retry policy, and the handlers.
 *
 * Nothing here imports `cloudflare:workers`: the handlers only need
 * `ImageStore`, which the Durable Object provides once through its runtime's
 * layer (see `effect-worker.ts`), and a test provides on `TestDurability`.
 */
import { Clock, Context, Deferred, Effect, Layer, Option, Schedule, Schema } from "effect"
import { Errors, NamedAlarms, Operations } from "durability/effect"

// ---------------------------------------------------------------------------------------------
// A user service: the bucket's images and renditions, in the object's own tables
// ---------------------------------------------------------------------------------------------

/** What `ctx.storage.sql` is to this service (a SQLite-backed object's storage, or a test double). */
export interface SqlLike {
  exec(query: string, ...bindings: Array<any>): { toArray(): Array<Record<string, unknown>> }
}

export interface Original {
  readonly id: string
  readonly width: number
  readonly height: number
  readonly uploadedAt: number
  readonly expiresAt: number
}

export const Rendition = Schema.Struct({
  key: Schema.String,
  width: Schema.Int,
  height: Schema.Int,
  bytes: Schema.Int
})
export type Rendition = typeof Rendition.Type

export interface Expiry {
  readonly expired: ReadonlyArray<string>
  /** The oldest upload still kept (its jobs were registered at or after it), or null. */
  readonly oldestUpload: number | null
  readonly nextExpiry: number | null
}

export class ImageStore extends Context.Tag("examples/ImageStore")<ImageStore, {
  readonly init: Effect.Effect<void>
  readonly putOriginal: (image: Original) => Effect.Effect<void>
  readonly original: (imageId: string) => Effect.Effect<Option.Option<Original>>
  readonly putRendition: (imageId: string, rendition: Rendition) => Effect.Effect<void>
  readonly renditions: (imageId: string) => Effect.Effect<ReadonlyArray<Rendition>>
  readonly expire: (now: number) => Effect.Effect<Expiry>
  readonly nextExpiry: Effect.Effect<number | null>
}>() {
  /** Builds synchronously with no I/O, like the scheduler's layer; `init` creates the tables. */
  static readonly layer = (sql: SqlLike): Layer.Layer<ImageStore> =>
    Layer.sync(ImageStore, () => {
      const rows = (query: string, ...bindings: Array<unknown>) => Effect.sync(() => sql.exec(query, ...bindings).toArray())
      const minimum = (column: "uploaded_at" | "expires_at") =>
        Effect.map(rows(`SELECT MIN(${column}) AS at FROM fx_images`), ([row]) => typeof row?.at === "number" ? row.at : null)
      return {
        init: Effect.asVoid(rows(`
          CREATE TABLE IF NOT EXISTS fx_images (
            id TEXT PRIMARY KEY, width INTEGER NOT NULL, height INTEGER NOT NULL,
            uploaded_at INTEGER NOT NULL, expires_at INTEGER NOT NULL
          );
          CREATE TABLE IF NOT EXISTS fx_renditions (
            key TEXT PRIMARY KEY, image_id TEXT NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
            bytes INTEGER NOT NULL
          )`)),
        putOriginal: (image) =>
          Effect.asVoid(rows(
            `INSERT INTO fx_images (id, width, height, uploaded_at, expires_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`,
            image.id,
            image.width,
            image.height,
            image.uploadedAt,
            image.expiresAt
          )),
        original: (imageId) =>
          Effect.map(rows("SELECT * FROM fx_images WHERE id = ?", imageId), ([row]) =>
            Option.map(Option.fromNullable(row), (found) => ({
              id: String(found.id),
              width: Number(found.width),
              height: Number(found.height),
              uploadedAt: Number(found.uploaded_at),
              expiresAt: Number(found.expires_at)
            }))),
        putRendition: (imageId, rendition) =>
          Effect.asVoid(rows(
            `INSERT INTO fx_renditions (key, image_id, width, height, bytes) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (key) DO NOTHING`,
            rendition.key,
            imageId,
            rendition.width,
            rendition.height,
            rendition.bytes
          )),
        renditions: (imageId) =>
          Effect.map(
            rows("SELECT key, width, height, bytes FROM fx_renditions WHERE image_id = ? ORDER BY width DESC", imageId),
            (found) => found as unknown as ReadonlyArray<Rendition>
          ),
        expire: (now) =>
          Effect.gen(function*() {
            const expired = (yield* rows("DELETE FROM fx_images WHERE expires_at <= ? RETURNING id", now)).map((row) =>
              String(row.id)
            )
            for (const id of expired) yield* rows("DELETE FROM fx_renditions WHERE image_id = ?", id)
            return { expired, oldestUpload: yield* minimum("uploaded_at"), nextExpiry: yield* minimum("expires_at") }
          }),
        nextExpiry: minimum("expires_at")
      }
    })
}

// ---------------------------------------------------------------------------------------------
// Operations: Schema payloads, a Schedule as retry policy, handlers that use ImageStore
// ---------------------------------------------------------------------------------------------

export const ResizePayload = Schema.Struct({
  imageId: Schema.NonEmptyString,
  width: Schema.Int.pipe(Schema.between(16, 20_000))
})

export const ThumbnailPayload = Schema.Struct({
  imageId: Schema.NonEmptyString,
  size: Schema.Int.pipe(Schema.between(16, 512))
})

export class RenderError extends Schema.TaggedError<RenderError>()("RenderError", { message: Schema.String }) {}

/**
 * The retry policy of every job, as an Effect `Schedule`: the engine steps it
 * after a failed attempt and persists the next attempt time (it never sleeps
 * on it). 500 ms, 1 s, 2 s … with ±20 % jitter; `maxAttempts` caps the total.
 */
export const retrySchedule = Schedule.exponential("500 millis").pipe(Schedule.jittered)

const original = (imageId: string) =>
  Effect.flatMap(ImageStore, (store) => store.original(imageId)).pipe(
    Effect.flatMap(Option.match({
      // Retrying cannot bring the image back: fail terminally.
      onNone: () => new Errors.NonRetryableError({ message: `image "${imageId}" no longer exists` }),
      onSome: Effect.succeed
    }))
  )

/** Stands in for real image work: takes a moment, and crashes once on a "flaky" image. */
const render = (imageId: string, attempt: number, key: string, width: number, height: number) =>
  Effect.gen(function*() {
    if (imageId.includes("flaky") && attempt === 1) {
      return yield* new RenderError({ message: `renderer crashed on ${key} (flaky image)` })
    }
    yield* Effect.sleep("150 millis")
    const rendition: Rendition = { key, width, height, bytes: Math.round(width * height * 0.15) }
    yield* Effect.flatMap(ImageStore, (store) => store.putRendition(imageId, rendition))
    yield* Effect.log(`rendered ${key} (attempt ${attempt})`)
    return rendition
  })

export const jobs = {
  resize: Operations.operation({
    payload: ResizePayload,
    result: Rendition,
    attemptTimeoutMs: 30_000,
    retries: { maxAttempts: 4, schedule: retrySchedule },
    handler: (call) =>
      Effect.gen(function*() {
        const image = yield* original(call.payload.imageId)
        if (call.payload.width > image.width) {
          return yield* new Errors.NonRetryableError({ message: `cannot upscale ${image.width}px to ${call.payload.width}px` })
        }
        const height = Math.round(image.height * call.payload.width / image.width)
        const key = `${image.id}/w${call.payload.width}.webp`
        return yield* render(image.id, call.attempt, key, call.payload.width, height)
      })
  }),
  thumbnail: Operations.operation({
    payload: ThumbnailPayload,
    result: Rendition,
    retries: { maxAttempts: 4, schedule: retrySchedule },
    handler: (call) =>
      Effect.gen(function*() {
        const image = yield* original(call.payload.imageId)
        const key = `${image.id}/thumb${call.payload.size}.webp`
        return yield* render(image.id, call.attempt, key, call.payload.size, call.payload.size)
      })
  })
}

export type Jobs = Operations.Operations<typeof jobs>
export type Maintenance = NamedAlarms.NamedAlarms<{ readonly cleanup: NamedAlarms.AnyAlarmDefinition }>

/**
 * Attaches both capabilities to the object's scheduler. Needs `ImageStore` (from
 * the runtime's layer) besides the engine's services. `cleanup` deletes expired
 * images, purges their job records and schedules itself for the next expiry;
 * a handler that schedules its own name gets its service through a `Deferred`.
 */
export const makeCapabilities = Effect.gen(function*() {
  const store = yield* ImageStore
  yield* store.init
  const jobService = yield* Operations.make(jobs)
  const self = yield* Deferred.make<Maintenance>()
  const maintenance = yield* NamedAlarms.make({
    cleanup: NamedAlarms.alarm({
      handler: (info) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const expiry = yield* (yield* ImageStore).expire(now)
          const purged = yield* jobService.purgeBefore(expiry.oldestUpload ?? now)
          yield* Effect.log(`cleanup (attempt ${info.attempt}): ${expiry.expired.length} expired, ${purged} purged`)
          if (expiry.nextExpiry !== null) yield* (yield* Deferred.await(self)).schedule("cleanup", expiry.nextExpiry)
        })
    })
  })
  yield* Deferred.succeed(self, maintenance)
  return { jobs: jobService, maintenance } as const
})

/** Stores the image, registers its jobs (Schema-checked payloads) and schedules `cleanup`. */
export const upload = (
  capabilities: { readonly jobs: Jobs; readonly maintenance: Maintenance },
  imageId: string,
  input: { readonly width: number; readonly height: number; readonly sizes: ReadonlyArray<number>; readonly retentionMs: number }
) =>
  Effect.gen(function*() {
    const store = yield* ImageStore
    const now = yield* Clock.currentTimeMillis
    const expiresAt = now + input.retentionMs
    yield* store.putOriginal({ id: imageId, width: input.width, height: input.height, uploadedAt: now, expiresAt })
    const ids: Array<string> = []
    for (const width of input.sizes) {
      const id = `${imageId}:resize:${width}`
      yield* capabilities.jobs.register("resize", { id, payload: { imageId, width } })
      ids.push(id)
    }
    const thumbnail = `${imageId}:thumbnail:128`
    yield* capabilities.jobs.register("thumbnail", { id: thumbnail, payload: { imageId, size: 128 } })
    ids.push(thumbnail)
    // At the earliest expiry; scheduling a name replaces its pending occurrence.
    yield* capabilities.maintenance.schedule("cleanup", (yield* store.nextExpiry) ?? expiresAt)
    return { imageId, jobs: ids, expiresAt }
  })
