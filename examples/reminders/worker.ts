/**
 * Example: durable reminders, Effect-native.
 *
 * Each `Reminders` object owns a `reminders` table and attaches it to the
 * durability engine as a `DurableTable`. Registering a reminder goes through
 * `handle.write`, which reconciles the object's one physical alarm in the same
 * transaction; the alarm (or the in-memory early timer) runs the reminder when
 * it is due. A message containing "flaky" fails on its first attempt, to show
 * a persisted retry.
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import { Clock, Effect, Either, Layer, ManagedRuntime, ParseResult, Schema } from "effect"
import { Errors, InspectionRegistry, Inspector, Migrations, RetryPolicy, Scheduler, StorageService } from "durability/effect"

export interface Env {
  readonly REMINDERS: DurableObjectNamespace<Reminders>
}

export interface ReminderRow {
  readonly name: string
  readonly message: string
  readonly status: string
  readonly attempt: number
  readonly next_attempt_at: number
  readonly fired_at: number | null
  readonly last_error: string | null
  readonly last_error_name: string | null
}

export interface ReminderList {
  readonly now: number
  /** The object's physical alarm (ms since epoch), or null when nothing is pending. */
  readonly alarm: number | null
  readonly reminders: ReadonlyArray<ReminderRow>
}

const migrations: ReadonlyArray<Migrations.Migration> = [
  {
    name: "reminders_0001_create",
    up: `
      CREATE TABLE reminders (
        name TEXT PRIMARY KEY,
        generation_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
        attempt INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        last_error TEXT,
        last_error_name TEXT,
        message TEXT NOT NULL,
        fired_at INTEGER
      );
      CREATE INDEX reminders_pending_idx ON reminders (status, next_attempt_at);
    `,
    down: `
      DROP INDEX IF EXISTS reminders_pending_idx;
      DROP TABLE IF EXISTS reminders;
    `
  }
]

/** Runs the migrations, reads the alarm, and attaches the `reminders` table to the engine. */
const setup = Effect.gen(function*() {
  yield* Migrations.migrate("reminders", migrations)
  const scheduler = yield* Scheduler.Scheduler
  yield* scheduler.warm
  const storage = yield* StorageService.StorageService
  return yield* scheduler.attach({
    kind: "reminders",
    table: "reminders",
    keyColumn: "name",
    policy: () => ({
      maxAttempts: 3,
      schedule: RetryPolicy.fromDelay((attempt) => attempt * 1_000),
      attemptTimeoutMs: 30_000,
      timeoutError: (timeoutMs) =>
        new Errors.DurableAttemptTimeoutError({ message: `Reminder timed out after ${timeoutMs} ms`, timeoutMs })
    }),
    // "Delivers" the reminder; the value returned goes to `complete`.
    run: (execution) =>
      Effect.gen(function*() {
        const message = String(execution.row.message)
        if (execution.attempt === 1 && message.includes("flaky")) {
          return yield* Effect.fail(new Error(`delivery of "${execution.key}" failed on purpose (attempt 1)`))
        }
        yield* Effect.log(`reminder ${execution.key} (attempt ${execution.attempt}): ${message}`)
        return yield* Clock.currentTimeMillis
      }),
    // Runs inside the settle transaction; only the attempt that was claimed may complete the row.
    // `last_error` is kept so the listing shows why an earlier attempt failed.
    complete: (execution, firedAt) =>
      Effect.map(
        storage.exec(
          `UPDATE reminders SET status = 'completed', fired_at = ?
           WHERE name = ? AND generation_id = ? AND status = 'pending' AND attempt = ? RETURNING name`,
          [Number(firedAt), execution.key, execution.generation, execution.attempt]
        ),
        (rows) => rows.length > 0
      ),
    describe: (row) => `reminder "${String(row.name)}"`,
    entity: (row) => ({ entityKind: "reminder", id: String(row.name), generation: String(row.generation_id) })
  })
})

export class Reminders extends DurableObject<Env> {
  private readonly runtime: ManagedRuntime.ManagedRuntime<
    Scheduler.Services | InspectionRegistry.InspectionRegistry,
    Errors.InvalidOptionError
  >
  private readonly reminders: Promise<Scheduler.TableHandle>

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    // One runtime per instance; building it does no I/O. The registry is what `Inspector` reads.
    this.runtime = ManagedRuntime.make(
      Layer.merge(Scheduler.layerDurableObject(ctx, { alarmMinDelayMs: 1_000 }), InspectionRegistry.layer)
    )
    // No request or alarm reaches the object before the table is attached.
    this.reminders = ctx.blockConcurrencyWhile(() => this.runtime.runPromise(setup))
    this.reminders.catch(() => undefined)
  }

  /** Inserts or replaces a pending reminder due in `inMs`; the alarm is reconciled in the same transaction. */
  async schedule(name: string, message: string, inMs: number): Promise<{ name: string; dueAt: number }> {
    const handle = await this.reminders
    return this.runtime.runPromise(Effect.gen(function*() {
      const storage = yield* StorageService.StorageService
      const dueAt = (yield* Clock.currentTimeMillis) + inMs
      yield* handle.write(storage.exec(
        `INSERT INTO reminders (name, generation_id, status, attempt, next_attempt_at, message)
         VALUES (?, ?, 'pending', 0, ?, ?)
         ON CONFLICT (name) DO UPDATE SET generation_id = excluded.generation_id, status = 'pending', attempt = 0,
           next_attempt_at = excluded.next_attempt_at, message = excluded.message,
           last_error = NULL, last_error_name = NULL, fired_at = NULL`,
        [name, crypto.randomUUID(), dueAt, message]
      ))
      return { name, dueAt }
    }))
  }

  /** The object's reminders; with `untilSettled`, first waits (up to 30 s) until none is pending. */
  async list(untilSettled = false): Promise<ReminderList> {
    await this.reminders
    const deadline = Date.now() + 30_000
    while (untilSettled && Date.now() < deadline && this.pending() > 0) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    const rows = await this.runtime.runPromise(Effect.flatMap(StorageService.StorageService, (storage) =>
      storage.exec(
        `SELECT name, message, status, attempt, next_attempt_at, fired_at, last_error, last_error_name
         FROM reminders ORDER BY next_attempt_at, name`
      )))
    return {
      now: Date.now(),
      alarm: await this.ctx.storage.getAlarm(),
      reminders: rows as unknown as ReadonlyArray<ReminderRow>
    }
  }

  private pending(): number {
    return Number(this.ctx.storage.sql.exec("SELECT COUNT(*) AS n FROM reminders WHERE status = 'pending'").one().n)
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.reminders
    await this.runtime.runPromise(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm(info)))
  }

  /**
   * The inspector's RPC (examples/index.ts mounts it at /_durability): the Effect face's `Inspector`
   * answers (`answer` never fails). The reminders table is the app's own, so the inspector shows the
   * scheduler's summary: its physical alarm, timer, permits and running keys.
   */
  async inspect(request: unknown): Promise<Inspector.Answer> {
    await this.reminders
    return this.runtime.runPromise(Effect.flatMap(Inspector.make, (inspector) => inspector.answer(request)))
  }
}

const MAX_DELAY_MS = 7 * 24 * 60 * 60 * 1000

const ReminderBody = Schema.Struct({
  message: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1_000)).annotations({
    message: () => ({ message: "must be a string of 1 to 1000 characters", override: true })
  }),
  inMs: Schema.Int.pipe(Schema.between(0, MAX_DELAY_MS)).annotations({
    message: () => ({ message: `must be an integer of milliseconds from 0 to ${MAX_DELAY_MS}`, override: true })
  })
}).annotations({ identifier: "{ message, inMs }" })

const HELP = `durability examples: reminders

  # schedule a reminder in 2 s on object "demo"
  curl -X POST http://127.0.0.1:8787/reminders/demo/tea -d '{"message":"tea is ready","inMs":2000}'
  # a message containing "flaky" fails on attempt 1 and is retried
  curl -X POST http://127.0.0.1:8787/reminders/demo/flaky -d '{"message":"flaky delivery","inMs":1000}'
  # list the object's reminders and its physical alarm (until=settled: once none is pending)
  curl http://127.0.0.1:8787/reminders/demo
  curl 'http://127.0.0.1:8787/reminders/demo?until=settled'
`

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body, null, 2) + "\n", {
    status,
    headers: { "content-type": "application/json" }
  })

const badRequest = (error: string) => json({ error }, 400)

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url)
    const parts = url.pathname.split("/").filter((part) => part.length > 0).map(decodeURIComponent)
    if (parts.length === 0) {
      return new Response(HELP, { headers: { "content-type": "text/plain; charset=utf-8" } })
    }
    const [route, object, name] = parts
    if (route !== "reminders" || object === undefined || parts.length > 3) {
      return json({ error: "Not found; see GET /" }, 404)
    }
    const stub = env.REMINDERS.get(env.REMINDERS.idFromName(object))
    if (name === undefined) {
      if (request.method !== "GET") return json({ error: "Use GET /reminders/<object>" }, 405)
      return json(await stub.list(url.searchParams.get("until") === "settled"))
    }
    if (request.method !== "POST") return json({ error: "Use POST /reminders/<object>/<name>" }, 405)
    let body: unknown
    try {
      body = await request.json()
    } catch {
      return badRequest("Body must be JSON: {\"message\": string, \"inMs\": number}")
    }
    const decoded = Schema.decodeUnknownEither(ReminderBody, { errors: "all" })(body)
    if (Either.isLeft(decoded)) {
      const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
      return badRequest(issues.map((issue) => `${issue.path.join(".") || "body"}: ${issue.message}`).join("; "))
    }
    return json(await stub.schedule(name, decoded.right.message, decoded.right.inMs), 201)
  }
} satisfies ExportedHandler<Env>
