/**
 * Example: the image jobs, Effect-native (`durability/effect`).
 *
 * One `ManagedRuntime` per object instance over the engine's layer merged with
 * the app's own `ImageStore` layer. `Operations.make` and `NamedAlarms.make`
 * run on that runtime, so the handlers' requirement (`ImageStore`) is provided
 * once, for the object, and every attempt runs with it. `alarm()` delegates to
 * the scheduler. The jobs themselves are in `effect-jobs.ts`.
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import { type Errors, InspectionRegistry, Inspector, type Operations, Scheduler, StorageService } from "durability/effect"
import { ImageStore, type Jobs, makeCapabilities, type Maintenance, type Rendition, upload } from "./effect-jobs.js"
import { parseUpload, routeParts, type UploadInput } from "./worker.js"

export interface Env {
  readonly IMAGE_JOBS_EFFECT: DurableObjectNamespace<ImageJobsEffect>
}

export interface EffectImageView {
  readonly now: number
  readonly alarm: number | null
  readonly jobs: ReadonlyArray<{ readonly id: string; readonly result: Operations.OperationResult<Rendition> }>
  readonly renditions: ReadonlyArray<Rendition>
  readonly calls: ReadonlyArray<Record<string, unknown>>
}

interface Capabilities {
  readonly jobs: Jobs
  readonly maintenance: Maintenance
}

export class ImageJobsEffect extends DurableObject<Env> {
  private readonly runtime: ManagedRuntime.ManagedRuntime<
    Scheduler.Services | InspectionRegistry.InspectionRegistry | ImageStore,
    Errors.InvalidOptionError
  >
  private readonly capabilities: Promise<Capabilities>

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    // Built once per instance, with no I/O: the engine's services, the registry the capabilities'
    // inspection sources go to (what `Inspector` reads), plus the app's.
    this.runtime = ManagedRuntime.make(
      Layer.mergeAll(
        Scheduler.layerDurableObject(ctx, { alarmConcurrency: 5 }),
        InspectionRegistry.layer,
        ImageStore.layer(ctx.storage.sql)
      )
    )
    // No request or alarm reaches the object before both capabilities are attached.
    this.capabilities = ctx.blockConcurrencyWhile(() =>
      this.runtime.runPromise(Effect.gen(function*() {
        yield* (yield* Scheduler.Scheduler).warm
        return yield* makeCapabilities
      }))
    )
    this.capabilities.catch(() => undefined)
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.capabilities
    await this.runtime.runPromise(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm(info)))
  }

  /** The inspector's RPC (examples/index.ts mounts it at /_durability): the Effect face's `Inspector` answers (never fails). */
  async inspect(request: unknown): Promise<Inspector.Answer> {
    await this.capabilities
    return this.runtime.runPromise(Effect.flatMap(Inspector.make, (inspector) => inspector.answer(request)))
  }

  /** Registers the jobs; a payload its Schema rejects comes back as `{ error }` and nothing is written for it. */
  async upload(imageId: string, input: UploadInput): Promise<{ imageId: string; jobs: ReadonlyArray<string>; expiresAt: number } | { error: string }> {
    const capabilities = await this.capabilities
    const result = await this.runtime.runPromise(Effect.either(upload(capabilities, imageId, input)))
    return Either.isRight(result) ? result.right : { error: `${result.left._tag}: ${result.left.message}` }
  }

  async view(imageId: string, waitMs: number): Promise<EffectImageView> {
    const { jobs } = await this.capabilities
    return this.runtime.runPromise(Effect.gen(function*() {
      const storage = yield* StorageService.StorageService
      const listCalls = storage.exec(
        `SELECT id, operation, status, attempt, last_error, last_error_name FROM durability_calls
         WHERE id LIKE ? ORDER BY id`,
        [`${imageId}:%`]
      )
      const results = yield* Effect.forEach(yield* listCalls, (call) =>
        Effect.map(
          jobs.wait(String(call.operation) as "resize" | "thumbnail", String(call.id), waitMs),
          (result) => ({ id: String(call.id), result })
        ), { concurrency: "unbounded" })
      return {
        now: Date.now(),
        alarm: yield* storage.readAlarm,
        jobs: results,
        renditions: yield* (yield* ImageStore).renditions(imageId),
        // The raw rows of `durability_calls`, read after the waits.
        calls: yield* listCalls
      }
    }).pipe(Effect.orDie))
  }
}

export const HELP = `  # image-jobs, Effect-native: Schema payloads, a Schedule retry policy, ImageStore provided by the runtime
  curl -X POST http://127.0.0.1:8787/images-effect/demo/cat -d '{"width":4000,"height":3000,"sizes":[1024,512]}'
  curl 'http://127.0.0.1:8787/images-effect/demo/cat?waitMs=3000'
  curl -X POST http://127.0.0.1:8787/images-effect/demo/flaky-fox -d '{"width":800,"height":600,"sizes":[400,1600]}'
  curl 'http://127.0.0.1:8787/images-effect/demo/flaky-fox?waitMs=5000'
`

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body, null, 2) + "\n", { status, headers: { "content-type": "application/json" } })

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { parts, waitMs } = routeParts(request)
    const [route, bucket, imageId] = parts
    if (route !== "images-effect" || bucket === undefined || imageId === undefined || parts.length > 3) {
      return json({ error: "Not found; see GET /" }, 404)
    }
    const stub = env.IMAGE_JOBS_EFFECT.get(env.IMAGE_JOBS_EFFECT.idFromName(bucket))
    if (request.method === "GET") return json(await stub.view(imageId, waitMs))
    if (request.method !== "POST") return json({ error: "Use GET or POST /images-effect/<bucket>/<imageId>" }, 405)
    let body: unknown
    try {
      body = await request.json()
    } catch {
      return json({ error: "Body must be JSON" }, 400)
    }
    const input = parseUpload(body)
    if (typeof input === "string") return json({ error: input }, 400)
    const result = await stub.upload(imageId, input)
    return json(result, "error" in result ? 400 : 202)
  }
} satisfies ExportedHandler<Env>
