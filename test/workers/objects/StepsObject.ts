/**
 * `StepsObject`: durable steps written against the public promise API, over real SQLite storage
 * (with the memo table's triggers) and the real alarm. One operation (`order`) and one job queue
 * (`render`) whose handlers store step "a", hold on attempt 1 until the object is reset (or their
 * signal aborts), then store step "b". Every real run of a step and every handler call is recorded
 * in the object's own tables, which survive resets; the scenarios read them over RPC.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityJobs,
  DurabilityScheduler,
  type DurableCall,
  type DurableJob
} from "../../../src/index.js"
import { Deliveries, type Idleness } from "./idle.js"

/**
 * `attemptTimeoutMs` is far beyond any test: attempt 1 holds until the object is reset, and a timeout first
 * would turn "reset mid-handler" into a race with the clock. No attempt here is meant to time out.
 */
export const STEPS = { alarmMinDelayMs: 1_000, attemptTimeoutMs: 600_000 } as const

/** What the handlers of both kinds get as payload. */
export interface StepsWork {
  /** Attempt 1 holds (after step "a") until the object is reset. */
  readonly hold: boolean
}

/** Step "a"'s value: which instance and attempt really ran it. */
export interface StepA {
  readonly instance: string
  readonly attempt: number
}

/** One real run of a step's function. */
export interface StepRun {
  readonly seq: number
  readonly kind: "operation" | "job"
  readonly id: string
  readonly step: string
  readonly attempt: number
  readonly instance: string
}

/** One handler call, with the value step "a" gave it. */
export interface StepsCall {
  readonly seq: number
  readonly kind: "operation" | "job"
  readonly id: string
  readonly attempt: number
  readonly instance: string
  /** JSON of step "a"'s value as this call saw it. */
  readonly a: string
}

export interface MemoRow {
  readonly capability: string
  readonly record_key: string
  readonly generation: string
  readonly name: string
  readonly value: string
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS steps_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    step TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    instance TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS steps_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    instance TEXT NOT NULL,
    a TEXT NOT NULL
  );
`

/** Rejects with the signal's reason once it is aborted; never settles if the object resets first. */
const untilAborted = (signal: AbortSignal): Promise<never> =>
  new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener("abort", () => reject(signal.reason), { once: true })
  })

export class StepsObject extends DurableObject {
  readonly instance = crypto.randomUUID()
  readonly records = this.ctx.storage.sql.exec(CREATE)
  private readonly deliveries = new Deliveries()

  readonly scheduler = new DurabilityScheduler({
    context: this.ctx,
    alarmMinDelayMs: STEPS.alarmMinDelayMs,
    // Not the console: the test pool hangs when an instance it reset writes to the console.
    log: () => undefined
  })

  readonly durability = new Durability({
    scheduler: this.scheduler,
    attemptTimeoutMs: STEPS.attemptTimeoutMs,
    handlers: {
      order: (call: DurableCall<StepsWork>) =>
        this.handle("operation", call.id, call.attempt, call.payload, call.signal, call.step)
    }
  })

  readonly jobs = new DurabilityJobs({
    scheduler: this.scheduler,
    attemptTimeoutMs: STEPS.attemptTimeoutMs,
    queues: {
      render: {
        handler: (job: DurableJob<StepsWork>) => this.handle("job", job.id, job.attempt, job.payload, job.signal, job.step)
      }
    }
  })

  private async handle(
    kind: "operation" | "job",
    id: string,
    attempt: number,
    work: StepsWork,
    signal: AbortSignal,
    step: DurableCall<unknown>["step"]
  ): Promise<{ readonly a: StepA; readonly b: string }> {
    const ran = (name: string) =>
      void this.ctx.storage.sql.exec(
        "INSERT INTO steps_runs (kind, id, step, attempt, instance) VALUES (?, ?, ?, ?, ?)",
        kind,
        id,
        name,
        attempt,
        this.instance
      )
    const a = await step("a", (): StepA => (ran("a"), { instance: this.instance, attempt }))
    this.ctx.storage.sql.exec(
      "INSERT INTO steps_calls (kind, id, attempt, instance, a) VALUES (?, ?, ?, ?, ?)",
      kind,
      id,
      attempt,
      this.instance,
      JSON.stringify(a)
    )
    if (work.hold && attempt === 1) await untilAborted(signal)
    const b = await step("b", () => (ran("b"), `b of attempt ${attempt}`))
    return { a, b }
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.deliveries.around(() => this.scheduler.alarm(info))
  }

  // RPC surface used by the scenarios (none of them rejects: a rejected RPC breaks isolated storage).

  order(id: string, work: StepsWork): Promise<void> {
    return this.durability.order({ id, payload: work })
  }

  async render(id: string, work: StepsWork): Promise<void> {
    await this.jobs.render.add({ id, payload: work })
  }

  memos(): ReadonlyArray<MemoRow> {
    return this.ctx.storage.sql.exec("SELECT * FROM durability_steps ORDER BY capability, record_key, name").toArray() as unknown as ReadonlyArray<MemoRow>
  }

  runs(): ReadonlyArray<StepRun> {
    return this.ctx.storage.sql.exec("SELECT * FROM steps_runs ORDER BY seq").toArray() as unknown as ReadonlyArray<StepRun>
  }

  calls(): ReadonlyArray<StepsCall> {
    return this.ctx.storage.sql.exec("SELECT * FROM steps_calls ORDER BY seq").toArray() as unknown as ReadonlyArray<StepsCall>
  }

  /** The record's stored status and result (JSON of the library's envelope), or null. */
  record(kind: "operation" | "job", id: string): { readonly status: string; readonly attempt: number; readonly result: string | null } | null {
    const [row] = kind === "operation"
      ? this.ctx.storage.sql.exec("SELECT status, attempt, result FROM durability_calls WHERE id = ?", id).toArray()
      : this.ctx.storage.sql.exec("SELECT status, attempt, result FROM durability_jobs WHERE key = ?", `render/${id}`).toArray()
    return row === undefined
      ? null
      : { status: String(row.status), attempt: Number(row.attempt), result: row.result === null ? null : String(row.result) }
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  /** The alarm and the deliveries in flight, for a scenario that ends once the object is idle. */
  idle(): Promise<Idleness> {
    return this.deliveries.idleness(this.ctx.storage)
  }

  whoami(): string {
    return this.instance
  }
}
