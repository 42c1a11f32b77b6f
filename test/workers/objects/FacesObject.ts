/**
 * `FacesObject`: both faces on one scheduler, as a user mixes them: promise-face operations
 * (`Durability`) and Effect-face named alarms (`NamedAlarms.make` through `scheduler.runtime(layer)`,
 * whose handler needs a service of the object's layer). Its RPC methods fail the ways a caller meets,
 * so the test can see what reaches the other side of a real RPC boundary.
 */
import { DurableObject } from "cloudflare:workers"
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import { NamedAlarms, Scheduler, StorageService } from "../../../src/effect.js"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityScheduler,
  type DurableCall,
  type DurableOperationResult
} from "../../../src/index.js"
import { Deliveries, type Idleness } from "./idle.js"

/** What the object's Effect handlers write through: its own table, so a run survives the instance. */
class Ledger extends Context.Tag("test/Ledger")<Ledger, { readonly record: (what: string) => Effect.Effect<void> }>() {}

export class FacesObject extends DurableObject {
  static readonly MIN_DELAY_MS = 1_000

  readonly scheduler = new DurabilityScheduler({ context: this.ctx, alarmMinDelayMs: FacesObject.MIN_DELAY_MS })
  private readonly deliveries = new Deliveries()

  readonly durability = new Durability({
    scheduler: this.scheduler,
    handlers: {
      resize: (call: DurableCall<{ readonly width: number }>) => {
        this.record(`resize ${call.id}`)
        return { width: call.payload.width }
      },
      crop: (call: DurableCall<null>) => call.id
    }
  })

  readonly runtime = this.scheduler.runtime(Layer.sync(Ledger, () => ({
    record: (what: string) => Effect.sync(() => this.record(what))
  })))

  private readonly alarms = this.ctx.blockConcurrencyWhile(() =>
    this.runtime.runPromise(NamedAlarms.make({
      cleanup: NamedAlarms.alarm({
        handler: (info) =>
          Effect.flatMap(Ledger, (ledger) => ledger.record(`cleanup ${info.scheduledTime} ${JSON.stringify(info.payload) ?? "-"}`))
      })
    }))
  )

  private record(what: string): void {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY, what TEXT NOT NULL)")
    this.ctx.storage.sql.exec("INSERT INTO ledger (what) VALUES (?)", what)
  }

  ledger(): Array<string> {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY, what TEXT NOT NULL)")
    return this.ctx.storage.sql.exec<{ what: string }>("SELECT what FROM ledger ORDER BY seq").toArray().map((row) => row.what)
  }

  /** Promise face: registers `resize`. */
  async resize(id: string, width: number): Promise<void> {
    await this.durability.resize({ id, payload: { width } })
  }

  /** Promise face: registers `crop` under an id (a `resize` id is a `DuplicateDurableCallError`). */
  async crop(id: string): Promise<void> {
    await this.durability.crop({ id, payload: null })
  }

  result(id: string): Promise<DurableOperationResult<{ readonly width: number }>> {
    return this.durability.resize.getResult(id)
  }

  /** Effect face, through the scheduler's runtime: schedules the named alarm (a bad time is a RangeError). */
  async cleanupAt(at: number, payload?: { readonly bucket: string }): Promise<number> {
    const alarms = await this.alarms
    return this.runtime.runPromise(Effect.as(alarms.schedule("cleanup", at, payload), at))
  }

  /**
   * Effect face, `Scheduler.transaction`: a ledger row and the cleanup alarm commit together; with `fail`,
   * the transaction fails after both and neither stays. Answers rather than rejects.
   */
  async planCleanup(at: number, fail: boolean): Promise<"committed" | "rolled back"> {
    const alarms = await this.alarms
    const exit = await this.runtime.runPromise(Effect.exit(Scheduler.transaction(Effect.gen(function*() {
      const storage = yield* StorageService.StorageService
      yield* storage.exec("CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY, what TEXT NOT NULL)")
      yield* storage.exec("INSERT INTO ledger (what) VALUES (?)", [`planned ${at}`])
      yield* alarms.schedule("cleanup", at)
      if (fail) return yield* Effect.fail("refused" as const)
    }))))
    return exit._tag === "Success" ? "committed" : "rolled back"
  }

  /** Effect face, through a `ManagedRuntime` of the user's own over `scheduler.layer`: rejects with a FiberFailure. */
  async ownRuntimeCleanup(name: string): Promise<void> {
    const alarms = await this.alarms
    const own = ManagedRuntime.make(this.scheduler.layer)
    try {
      // A name the helper does not have: the caller learns it from the error.
      await own.runPromise(alarms.schedule(name as "cleanup", Date.now()))
    } finally {
      await own.dispose()
    }
  }

  idle(): Promise<Idleness> {
    return this.deliveries.idleness(this.ctx.storage)
  }

  override alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.deliveries.around(() => this.scheduler.alarm(info))
  }
}
