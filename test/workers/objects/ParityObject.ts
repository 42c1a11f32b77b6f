/**
 * `ParityObject` and `HandoffObject`: regressions found by running the reference
 * library's own suites against this package, over real SQLite and real alarms.
 *
 * `ParityObject` builds both helpers from `{ context }` (no shared scheduler passed),
 * as a user migrating from the reference may: they must still share the object's
 * one scheduler.
 */
import { DurableObject } from "cloudflare:workers"
import { NonRetryableError as WorkflowsNonRetryableError } from "cloudflare:workflows"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  type DurableCall,
  type DurableOperationResult
} from "../../../src/index.js"

const CREATE = `
  CREATE TABLE IF NOT EXISTS parity_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    what TEXT NOT NULL,
    at INTEGER NOT NULL,
    aborted INTEGER NOT NULL DEFAULT 0
  );
`

export class ParityObject extends DurableObject {
  /** Resolves the held version-1 `send` (it ignores its abort signal). */
  private releaseHeld: (() => void) | undefined

  readonly billing = new Durability({
    context: this.ctx,
    alarmMinDelayMs: 1_000,
    retries: { delay: () => 50 },
    handlers: {
      send: async (call: DurableCall<{ readonly version: number }>) => {
        const seq = this.record(`send v${call.payload.version}#${call.attempt}`)
        call.signal.addEventListener("abort", () => {
          this.ctx.storage.sql.exec("UPDATE parity_runs SET aborted = 1 WHERE seq = ?", seq)
        })
        if (call.payload.version === 1) await new Promise<void>((resolve) => (this.releaseHeld = resolve))
        return `sent v${call.payload.version}`
      },
      ping: (call) => this.record(`ping ${call.id}`),
      workflowsFailure: () => {
        throw new WorkflowsNonRetryableError("token revoked", "AuthError")
      }
    }
  })

  readonly renewals = new DurabilityAlarms({
    context: this.ctx,
    alarmMinDelayMs: 1_000,
    handlers: { renew: (info) => void this.record(`renew#${info.attempt}`) }
  })

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec(CREATE)
  }

  private record(what: string): number {
    const [row] = this.ctx.storage.sql.exec<{ seq: number }>(
      "INSERT INTO parity_runs (what, at) VALUES (?, ?) RETURNING seq",
      what,
      Date.now()
    ).toArray()
    return row!.seq
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.renewals.alarm(info)
  }

  send(id: string, version: number): Promise<void> {
    return this.billing.send({ id, payload: { version } })
  }

  releaseHeldSend(): boolean {
    const release = this.releaseHeld
    release?.()
    return release !== undefined
  }

  result(operation: "send" | "ping" | "workflowsFailure", id: string): Promise<DurableOperationResult<unknown>> {
    return this.billing[operation].getResult(id)
  }

  ping(id: string): Promise<void> {
    return this.billing.ping({ id, payload: null })
  }

  failWithWorkflowsError(id: string): Promise<void> {
    return this.billing.workflowsFailure({ id, payload: null })
  }

  purge(before: number): Promise<number> {
    return this.billing.purgeBefore(before)
  }

  renew(at: number): Promise<void> {
    return this.renewals.renew(at)
  }

  runs(): ReadonlyArray<{ readonly what: string; readonly at: number; readonly aborted: number }> {
    return this.ctx.storage.sql.exec("SELECT what, at, aborted FROM parity_runs ORDER BY seq").toArray() as never
  }

  sendRow(id: string): Record<string, unknown> | undefined {
    return this.ctx.storage.sql.exec("SELECT * FROM durability_calls WHERE id = ?", id).toArray()[0]
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }
}

/** One `alarm()` delivery: when it started, when it returned, and the alarm it left armed. */
export interface HandoffDelivery {
  readonly startedAt: number
  readonly returnedAt: number
  readonly alarmLeft: number | null
}

/** Hands off after 1.2 s (longer than the 1 s minimum delay) while its one handler runs 2 s. */
export class HandoffObject extends DurableObject {
  static readonly HANDOFF_MS = 1_200
  static readonly MIN_DELAY_MS = 1_000
  static readonly HANDLER_MS = 2_000

  readonly alarms = new DurabilityAlarms({
    context: this.ctx,
    alarmMinDelayMs: HandoffObject.MIN_DELAY_MS,
    alarmHandoffMs: HandoffObject.HANDOFF_MS,
    handlers: {
      slow: async (info) => {
        this.ctx.storage.sql.exec("INSERT INTO handoff_calls (attempt, at) VALUES (?, ?)", info.attempt, Date.now())
        await new Promise((resolve) => setTimeout(resolve, HandoffObject.HANDLER_MS))
      }
    }
  })

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec(`
      CREATE TABLE IF NOT EXISTS handoff_deliveries (started_at INTEGER, returned_at INTEGER, alarm_left INTEGER);
      CREATE TABLE IF NOT EXISTS handoff_calls (attempt INTEGER, at INTEGER);
    `)
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    const startedAt = Date.now()
    await this.alarms.alarm(info)
    const alarmLeft = await this.ctx.storage.getAlarm()
    this.ctx.storage.sql.exec(
      "INSERT INTO handoff_deliveries (started_at, returned_at, alarm_left) VALUES (?, ?, ?)",
      startedAt,
      Date.now(),
      alarmLeft
    )
  }

  /** Schedules `slow` just beyond the early timer's window, so the platform alarm runs it. */
  start(): Promise<void> {
    return this.alarms.slow(Date.now() + HandoffObject.MIN_DELAY_MS + 100)
  }

  deliveries(): ReadonlyArray<HandoffDelivery> {
    return this.ctx.storage.sql.exec(
      "SELECT started_at AS startedAt, returned_at AS returnedAt, alarm_left AS alarmLeft FROM handoff_deliveries"
    ).toArray() as never
  }

  calls(): ReadonlyArray<{ readonly attempt: number }> {
    return this.ctx.storage.sql.exec("SELECT attempt FROM handoff_calls").toArray() as never
  }

  pending(): number {
    return Number(this.ctx.storage.sql.exec("SELECT COUNT(*) AS n FROM durability_alarms").one().n)
  }
}
