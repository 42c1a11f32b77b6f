/**
 * `ManagedObject`: the management calls of both helpers over RPC, on real SQLite
 * and real alarms: registrations that start later, cancel and list of operations,
 * get / cancel / list of named alarms.
 */
import { DurableObject } from "cloudflare:workers"
import { Effect } from "effect"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  DurabilityScheduler,
  type DurableCall,
  type DurableListOptions,
  type DurableAlarmListOptions,
  type DurableAlarmPage,
  type DurableNamedAlarmState,
  type DurableOperationPage,
  type DurableOperationResult
} from "../../../src/index.js"
import { internals } from "../../../src/facade/DurabilityScheduler.js"
import { PermitSemaphore } from "../../../src/engine/PermitSemaphore.js"
import { Deliveries, type Idleness } from "./idle.js"

export class ManagedObject extends DurableObject {
  static readonly MIN_DELAY_MS = 1_000

  readonly scheduler = new DurabilityScheduler({ context: this.ctx, alarmMinDelayMs: ManagedObject.MIN_DELAY_MS })
  private readonly deliveries = new Deliveries()

  readonly durability = new Durability({
    scheduler: this.scheduler,
    handlers: {
      send: (call: DurableCall<{ readonly to: string }>) => {
        this.record(`send ${call.id}`)
        return { to: call.payload.to }
      },
      /** Runs until its signal is aborted, then fails with the signal's reason. */
      hold: (call: DurableCall<null>) => {
        this.record(`hold ${call.id}`)
        return new Promise<never>((_resolve, reject) => {
          call.signal.addEventListener("abort", () => {
            this.record(`aborted ${call.id}: ${(call.signal.reason as Error).name}`)
            reject(call.signal.reason)
          })
        })
      }
    }
  })

  readonly alarms = new DurabilityAlarms({
    scheduler: this.scheduler,
    handlers: {
      renew: (info) => void this.record(`renew@${info.scheduledTime}`),
      expire: (info) => void this.record(`expire@${info.scheduledTime}`)
    }
  })

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS managed_runs (seq INTEGER PRIMARY KEY, what TEXT, at INTEGER)")
  }

  private record(what: string): void {
    this.ctx.storage.sql.exec("INSERT INTO managed_runs (what, at) VALUES (?, ?)", what, Date.now())
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.deliveries.around(() => this.scheduler.alarm(info))
  }

  /**
   * Registers a `send` call; resolves with the platform alarm as the write left it, read in the same call
   * (so no alarm can have fired in between, however slow the machine).
   */
  async send(
    id: string,
    timing: { readonly runAt?: number; readonly runAtDate?: number; readonly delayMs?: number }
  ): Promise<number | null> {
    await this.durability.send({
      id,
      payload: { to: id },
      ...(timing.runAt === undefined ? {} : { runAt: timing.runAt }),
      ...(timing.runAtDate === undefined ? {} : { runAt: new Date(timing.runAtDate) }),
      ...(timing.delayMs === undefined ? {} : { delayMs: timing.delayMs })
    })
    return this.ctx.storage.getAlarm()
  }

  /** A batch of `send` calls in one transaction (`durability.send.many`). */
  sendMany(calls: ReadonlyArray<{ readonly id: string; readonly delayMs?: number }>): Promise<void> {
    return this.durability.send.many(
      calls.map(({ delayMs, id }) => ({ id, payload: { to: id }, ...(delayMs === undefined ? {} : { delayMs }) }))
    )
  }

  hold(id: string): Promise<void> {
    return this.durability.hold({ id, payload: null })
  }

  result(operation: "send" | "hold", id: string): Promise<DurableOperationResult<unknown>> {
    return this.durability[operation].getResult(id)
  }

  cancel(operation: "send" | "hold", id: string): Promise<boolean> {
    return this.durability[operation].cancel(id)
  }

  list(options?: DurableListOptions): Promise<DurableOperationPage<{ readonly to: string }>> {
    return this.durability.send.list(options)
  }

  schedule(name: "renew" | "expire", at: number, asDate: boolean): Promise<void> {
    return this.alarms[name](asDate ? new Date(at) : at)
  }

  getAlarm(name: "renew" | "expire"): Promise<DurableNamedAlarmState | undefined> {
    return this.alarms.get(name)
  }

  cancelAlarm(name: "renew" | "expire"): Promise<boolean> {
    return this.alarms.cancel(name)
  }

  /** Names only: a page's payloads are `unknown`, which RPC's types cannot carry. */
  async listAlarms(options?: DurableAlarmListOptions): Promise<{ readonly names: Array<string>; readonly cursor?: string | undefined }> {
    const page: DurableAlarmPage = await this.alarms.list(options)
    return { names: page.items.map((state) => state.name), ...(page.cursor === undefined ? {} : { cursor: page.cursor }) }
  }

  runs(): ReadonlyArray<{ readonly what: string; readonly at: number }> {
    return this.ctx.storage.sql.exec("SELECT what, at FROM managed_runs ORDER BY seq").toArray() as never
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
    return internals(this.scheduler).runtime.runSync(
      Effect.flatMap(PermitSemaphore, (permits) => Effect.map(permits.available, (free) => permits.capacity - free))
    )
  }
}
