/**
 * The Worker that vitest-pool-workers loads for the workerd test project.
 * Each Durable Object class here exists only for tests.
 */
import { DurableObject } from "cloudflare:workers"
import { Effect } from "effect"
import { NonRetryableError } from "../../src/shared/Errors.js"
import { DurabilityScheduler, internals } from "../../src/facade/DurabilityScheduler.js"
import * as RetryPolicy from "../../src/engine/RetryPolicy.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import { StorageService } from "../../src/engine/StorageService.js"
import * as TaskTable from "../shared/TaskTable.js"
import { DurabilityInspector, type DurabilityInspectorHandler } from "../../src/inspector.js"
import type { InspectedObject } from "./objects/InspectedObject.js"
import { Deliveries, type Idleness } from "./objects/idle.js"
import { queuesJobsQueueHandler, type QueuesEnv } from "./objects/QueuesJobsObject.js"

export { ChaosObject } from "./objects/ChaosObject.js"
export { EffectLedger } from "./objects/EffectLedger.js"
export { LabObject } from "./objects/LabObject.js"
export { ManagedObject } from "./objects/ManagedObject.js"
export { HandoffObject, ParityObject } from "./objects/ParityObject.js"
export { JobsChaosObject } from "./objects/JobsChaosObject.js"
export { JobsObject } from "./objects/JobsObject.js"
export { LeasesChaosObject } from "./objects/LeasesChaosObject.js"
export { StepsObject } from "./objects/StepsObject.js"
export { SchedulesObject } from "./objects/SchedulesObject.js"
export { ShardedJobsObject } from "./objects/ShardedJobsObject.js"
export { QueuesJobsObject } from "./objects/QueuesJobsObject.js"
export { InspectedObject } from "./objects/InspectedObject.js"
export { WorkflowEngineObject } from "./objects/WorkflowEngineObject.js"
export { WorkflowsObject } from "./objects/WorkflowsObject.js"
export { RoutingObject } from "./objects/RoutingObject.js"
export { LogObject } from "./objects/LogObject.js"

/** A bare SQLite-backed object: tests reach its storage through `runInDurableObject`. */
export class StorageObject extends DurableObject {}

/** The settings `EngineObject` runs with; the tests compute expected times from them. */
export const ENGINE_SETTINGS = {
  alarmMinDelayMs: 1_000,
  maxAttempts: 3,
  retryDelayMs: 50,
  attemptTimeoutMs: 1_000,
  /**
   * The first attempt of a `held-` task: far beyond any test, so only a reset ends it. A test that resets
   * the object mid-attempt then needs no race with `attemptTimeoutMs` to find the attempt still running.
   */
  heldFirstAttemptMs: 600_000
} as const

/** One handler call, as `EngineObject` recorded it in its own table (which survives resets). */
export interface CallRecord {
  readonly seq: number
  readonly id: string
  readonly attempt: number
  readonly generation: string
  /** `Date.now()` when the handler started. */
  readonly at: number
  /** 1 when a platform alarm (with its `AlarmInvocationInfo`) started the attempt. */
  readonly from_alarm: number
  /** 1 once the handler saw its signal aborted. */
  readonly aborted: number
  /** The instance (one per constructor call) that ran the handler. */
  readonly instance: string
  /** `execution.row` as JSON: the record as stored when the attempt was claimed. */
  readonly row: string
}

/** One `alarm(info)` delivery to `EngineObject`. */
export interface AlarmRecord {
  readonly seq: number
  readonly at: number
  readonly instance: string
  /** JSON of the info the platform passed (`null` for `runDurableObjectAlarm`). */
  readonly info: string
  /** What `ctx.storage.getAlarm()` returned when `alarm()` was entered. */
  readonly seen: number | null
}

const CREATE_RECORDS = `
  CREATE TABLE IF NOT EXISTS engine_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    generation TEXT NOT NULL,
    at INTEGER NOT NULL,
    from_alarm INTEGER NOT NULL,
    aborted INTEGER NOT NULL DEFAULT 0,
    instance TEXT NOT NULL,
    row TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS engine_alarms (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    instance TEXT NOT NULL,
    info TEXT NOT NULL,
    seen INTEGER
  );
`

class FlakyError extends Error {
  override readonly name = "FlakyError"
}

/**
 * The engine behind the promise facade, over real SQLite storage and the real
 * alarm. Handlers behave by task id prefix:
 * - `ok-`: succeeds;
 * - `flaky-`: fails (retryable) on attempt 1, then succeeds;
 * - `fail-`: fails with `NonRetryableError`;
 * - `hang-`: waits for its signal to be aborted (timeout), then fails with the reason;
 * - `held-`: as `hang-`, but its first attempt times out only after `heldFirstAttemptMs` (a reset ends it).
 */
export class EngineObject extends DurableObject {
  readonly instance = crypto.randomUUID()
  /** What the library logged in this instance. */
  readonly logged: Array<Readonly<Record<string, unknown>>> = []
  readonly scheduler: DurabilityScheduler
  readonly tasks: Scheduler.TableHandle
  private readonly deliveries = new Deliveries()

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec(CREATE_RECORDS)
    this.scheduler = new DurabilityScheduler({
      context: ctx,
      alarmMinDelayMs: ENGINE_SETTINGS.alarmMinDelayMs,
      // In memory, not on the console: the test pool hangs when an instance it reset writes to the console
      // (workers-sdk#14180, fixed in pool 0.18.6, which needs vitest 4). Production has no such limit.
      log: (entry) => void this.logged.push(entry)
    })
    this.tasks = this.run(Effect.gen(this, function*() {
      const storage = yield* StorageService
      yield* storage.exec(TaskTable.CREATE_TABLE)
      const table = yield* TaskTable.table({
        handler: (execution) => this.handle(execution),
        maxAttempts: ENGINE_SETTINGS.maxAttempts,
        attemptTimeoutMs: ENGINE_SETTINGS.attemptTimeoutMs,
        schedule: RetryPolicy.fromDelay(() => ENGINE_SETTINGS.retryDelayMs)
      })
      // The policy gets the row as read before the claim (this table sets no `attemptLimits`, so the engine
      // reads, then claims): `attempt` 0 means the first attempt is about to run.
      const policy = (row: Parameters<typeof table.policy>[0]) =>
        String(row.id).startsWith("held-") && Number(row.attempt) === 0
          ? { ...table.policy(row), attemptTimeoutMs: ENGINE_SETTINGS.heldFirstAttemptMs }
          : table.policy(row)
      return yield* (yield* Scheduler.Scheduler).attach({ ...table, policy })
    }))
  }

  private handle(execution: Scheduler.Execution): Effect.Effect<unknown, unknown> {
    const { attempt, key, signal } = execution
    return Effect.gen(this, function*() {
      this.ctx.storage.sql.exec(
        `INSERT INTO engine_calls (id, attempt, generation, at, from_alarm, aborted, instance, row)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        key,
        attempt,
        execution.generation,
        Date.now(),
        execution.platform === undefined ? 0 : 1,
        signal.aborted ? 1 : 0,
        this.instance,
        JSON.stringify(execution.row)
      )
      if (key.startsWith("ok-")) return { id: key, attempt }
      if (key.startsWith("flaky-")) {
        if (attempt === 1) return yield* Effect.fail(new FlakyError(`${key} failed on attempt 1`))
        return { id: key, attempt }
      }
      if (key.startsWith("fail-")) return yield* new NonRetryableError({ message: `${key} cannot succeed` })
      if (key.startsWith("hang-") || key.startsWith("held-")) {
        return yield* Effect.async<never, unknown>((resume) => {
          const onAbort = () => {
            this.ctx.storage.sql.exec(
              "UPDATE engine_calls SET aborted = 1 WHERE id = ? AND attempt = ? AND instance = ?",
              key,
              attempt,
              this.instance
            )
            resume(Effect.fail(signal.reason))
          }
          if (signal.aborted) onAbort()
          else signal.addEventListener("abort", onAbort, { once: true })
          return Effect.sync(() => signal.removeEventListener("abort", onAbort))
        })
      }
      return yield* Effect.die(new Error(`No test behaviour for task id ${key}`))
    })
  }

  private run<A, E>(effect: Effect.Effect<A, E, Scheduler.Services>): A {
    return internals(this.scheduler).runtime.runSync(effect)
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.deliveries.around(async () => {
      const seen = await this.ctx.storage.getAlarm()
      this.ctx.storage.sql.exec(
        "INSERT INTO engine_alarms (at, instance, info, seen) VALUES (?, ?, ?, ?)",
        Date.now(),
        this.instance,
        JSON.stringify(info ?? null),
        seen
      )
      await this.scheduler.alarm(info)
    })
  }

  /**
   * Registers (or replaces) a pending task due at `dueAt` (default: now) through
   * the engine. `alarm` is the platform's alarm read right after the write, in
   * the same turn, before any timer can run; the write's clock was in
   * `[before, after]` (the clock can tick during synchronous SQL).
   */
  async register(id: string, dueAt?: number) {
    const before = Date.now()
    const generation = this.run(TaskTable.register(this.tasks, id, dueAt))
    const after = Date.now()
    const alarm = await this.ctx.storage.getAlarm()
    return { generation, before, after, alarm, instance: this.instance }
  }

  /**
   * `register` due `delayMs` after this object's clock, read in the same turn as the write: a due time
   * computed from a `now` read in an earlier call would shrink by however long the calls in between took.
   */
  async registerIn(id: string, delayMs: number) {
    const due = Date.now() + delayMs
    return { ...(await this.register(id, due)), due }
  }

  /** A `handle.write` whose body inserts a pending task due at `dueAt` and then fails. */
  writeThenFail(id: string, dueAt: number): { readonly name: string; readonly message: string } {
    const write = Effect.flatMap(StorageService, (storage) =>
      this.tasks.write(
        storage.exec(
          "INSERT INTO test_tasks (id, generation_id, status, attempt, next_attempt_at) VALUES (?, 'doomed', 'pending', 0, ?)",
          [id, dueAt]
        ).pipe(Effect.zipRight(Effect.fail(new Error("the write body failed after its insert"))))
      ))
    try {
      this.run(write)
    } catch (error) {
      return { name: (error as Error).name, message: (error as Error).message }
    }
    throw new Error("writeThenFail: the write unexpectedly succeeded")
  }

  /** `handle.tryStart`: starts the task now if a permit is free. */
  tryStart(id: string): boolean {
    return this.run(this.tasks.tryStart(id))
  }

  rows(): ReadonlyArray<TaskTable.TaskRow> {
    return this.run(TaskTable.all)
  }

  calls(): ReadonlyArray<CallRecord> {
    return this.ctx.storage.sql.exec("SELECT * FROM engine_calls ORDER BY seq").toArray() as unknown as ReadonlyArray<
      CallRecord
    >
  }

  alarms(): ReadonlyArray<AlarmRecord> {
    return this.ctx.storage.sql.exec("SELECT * FROM engine_alarms ORDER BY seq").toArray() as unknown as ReadonlyArray<
      AlarmRecord
    >
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  /** The alarm and the deliveries in flight, for a test that ends once the object is idle. */
  idle(): Promise<Idleness> {
    return this.deliveries.idleness(this.ctx.storage)
  }

  now(): number {
    return Date.now()
  }

  whoami(): string {
    return this.instance
  }
}

/** The token of the inspector this worker mounts at `/_durability` (inspector.concurrency.test.ts). */
export const INSPECTOR_TOKEN = "worker-inspector-token-0123456789"
const INSPECTED_NAMES = ["concurrent-0", "concurrent-1", "concurrent-2", "concurrent-3"]

type WorkerEnv = QueuesEnv & { readonly INSPECTED_OBJECT: DurableObjectNamespace<InspectedObject> }

// Built once per isolate and shared by every request, as the README's mount snippet does.
let inspector: DurabilityInspectorHandler | undefined

export default {
  fetch: async (request: Request, env: WorkerEnv) => {
    inspector ??= DurabilityInspector.handler({
      objects: { namespace: env.INSPECTED_OBJECT, names: INSPECTED_NAMES },
      token: INSPECTOR_TOKEN,
      log: () => undefined
    })
    return (await inspector(request)) ?? new Response("durability test worker")
  },
  // The Queues transport's consumer and dead-letter consumer (jobs.queues.test.ts).
  queue: (batch: MessageBatch, env: WorkerEnv) => queuesJobsQueueHandler(batch, env)
} satisfies ExportedHandler<WorkerEnv>
export { FacesObject } from "./objects/FacesObject.js"
export { FanoutObject } from "./objects/FanoutObject.js"
