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
import { Effect } from "effect"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  type DurableCall,
  DurabilityScheduler,
  type DurableOperationResult
} from "../../../src/index.js"
import { internals } from "../../../src/facade/DurabilityScheduler.js"
import { PermitSemaphore } from "../../../src/engine/PermitSemaphore.js"
import { Deliveries, type Idleness } from "./idle.js"

const CREATE = `
  CREATE TABLE IF NOT EXISTS parity_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    what TEXT NOT NULL,
    at INTEGER NOT NULL,
    aborted INTEGER NOT NULL DEFAULT 0
  );
`

export class ParityObject extends DurableObject {
  static readonly MIN_DELAY_MS = 1_000

  /** Resolves the held version-1 `send` (it ignores its abort signal). */
  private releaseHeld: (() => void) | undefined
  private readonly deliveries = new Deliveries()

  readonly billing = new Durability({
    context: this.ctx,
    alarmMinDelayMs: ParityObject.MIN_DELAY_MS,
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
    alarmMinDelayMs: ParityObject.MIN_DELAY_MS,
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

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.deliveries.around(() => this.renewals.alarm(info))
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

  /** Registers a `ping` due now; resolves with the platform alarm as its write left it (read in the same call). */
  async ping(id: string): Promise<number | null> {
    await this.billing.ping({ id, payload: null })
    return this.ctx.storage.getAlarm()
  }

  failWithWorkflowsError(id: string): Promise<void> {
    return this.billing.workflowsFailure({ id, payload: null })
  }

  purge(before: number): Promise<number> {
    return this.billing.purgeBefore(before)
  }

  /** Schedules `renew` `delayMs` after this object's clock (read in the same call); resolves with its time. */
  async renewIn(delayMs: number): Promise<number> {
    const at = Date.now() + delayMs
    await this.renewals.renew(at)
    return at
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

  /** The alarm and the deliveries in flight, for a scenario that ends once the object is idle. */
  idle(): Promise<Idleness> {
    return this.deliveries.idleness(this.ctx.storage)
  }

  /**
   * Handler executions in flight in this instance: the permits taken. An execution keeps its permit until
   * its handler has really ended and its outcome was settled, so 0 means every late settle has been made.
   */
  executing(): number {
    // Both helpers were built from { context }: the same options give back the object's one scheduler.
    const scheduler = new DurabilityScheduler({ context: this.ctx, alarmMinDelayMs: ParityObject.MIN_DELAY_MS })
    return internals(scheduler).runtime.runSync(
      Effect.flatMap(PermitSemaphore, (permits) => Effect.map(permits.available, (free) => permits.capacity - free))
    )
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

  private readonly inFlight = new Deliveries()
  /**
   * The handler holds until the test releases it (`finish`): so the handoff comes first however slow the
   * machine, and the test chooses when the handler settles (see the handoff test). A held handler of fixed
   * length ended 200 ms before the continuation alarm's time, so a busy machine could delete that alarm as
   * workerd delivered it, after the test saw the object idle (the pool's storage isolation then met the delivery).
   */
  private release!: () => void
  private readonly released = new Promise<void>((resolve) => (this.release = resolve))

  readonly alarms = new DurabilityAlarms({
    context: this.ctx,
    alarmMinDelayMs: HandoffObject.MIN_DELAY_MS,
    alarmHandoffMs: HandoffObject.HANDOFF_MS,
    handlers: {
      slow: async (info) => {
        this.ctx.storage.sql.exec("INSERT INTO handoff_calls (attempt, at) VALUES (?, ?)", info.attempt, Date.now())
        await this.released
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

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.inFlight.around(async () => {
      const startedAt = Date.now()
      await this.alarms.alarm(info)
      const alarmLeft = await this.ctx.storage.getAlarm()
      this.ctx.storage.sql.exec(
        "INSERT INTO handoff_deliveries (started_at, returned_at, alarm_left) VALUES (?, ?, ?)",
        startedAt,
        Date.now(),
        alarmLeft
      )
    })
  }

  /** Schedules `slow` just beyond the early timer's window, so the platform alarm runs it. */
  start(): Promise<void> {
    return this.alarms.slow(Date.now() + HandoffObject.MIN_DELAY_MS + 100)
  }

  /** Lets the held handler finish. */
  finish(): void {
    this.release()
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

  /** The alarm and the deliveries in flight, for a scenario that ends once the object is idle. */
  idle(): Promise<Idleness> {
    return this.inFlight.idleness(this.ctx.storage)
  }
}
