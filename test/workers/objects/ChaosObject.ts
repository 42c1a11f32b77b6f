/**
 * `ChaosObject`: the application of the eviction chaos test. Written against
 * the PUBLIC promise API like `LabObject`: one `DurabilityScheduler` shared by
 * a `Durability` (one method per behaviour) and a `DurabilityAlarms` (63 chaos
 * names and 6 of the platform-delivery phase, the behaviour fixed by the name),
 * `alarm(info)` delegated to the scheduler.
 *
 * Every handler call, every settle event (lifecycle hook) and every platform
 * alarm delivery is recorded in the object's own tables, which survive resets;
 * external effects go to an `EffectLedger` (another object), keyed by the call
 * id or the alarm's idempotencyKey, so duplicates are deduplicated there and
 * visible in its deliveries.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  DurabilityScheduler,
  type DurabilityAlarmsInstance,
  type DurabilityInstance,
  type DurabilityLifecycleEvent,
  type DurableAlarmInfo,
  type DurableCall,
  NonRetryableError
} from "../../../src/index.js"
import { deliveriesAround, recordDelivery } from "./deliveryLog.js"
import type { ApplyResult, EffectLedger } from "./EffectLedger.js"
import type { OperationRow } from "./LabObject.js"

/**
 * What an operation method does on attempt n:
 * - `ok`: applies the effect, succeeds;
 * - `transient`: fails (retryable) while n ≤ failTimes, then as `ok`;
 * - `permanent`: throws NonRetryableError, before any effect;
 * - `exhaust`: fails (retryable) on every attempt, before any effect;
 * - `timeout`: attempt 1 waits for its signal (the attempt timeout), later ones as `ok`;
 * - `ignoreAbort`: attempt 1 ignores the timeout, holds, applies the effect and returns late; later ones as `ok`;
 * - `afterEffect`: applies the effect, then fails (retryable) on attempt 1; later ones as `ok`.
 */
export type ChaosBehaviour = "ok" | "transient" | "permanent" | "exhaust" | "timeout" | "ignoreAbort" | "afterEffect"

export const CHAOS_BEHAVIOURS: ReadonlyArray<ChaosBehaviour> = [
  "ok",
  "transient",
  "permanent",
  "exhaust",
  "timeout",
  "ignoreAbort",
  "afterEffect"
]

export const CHAOS = {
  alarmConcurrency: 8,
  alarmMinDelayMs: 1_000,
  retryDelayMs: 40,
  /** How long an `ignoreAbort` attempt 1 holds (past its timeout). */
  holdMs: 700,
  /** Per behaviour: total attempts and the attempt timeout (operations and named alarms alike). */
  policies: {
    ok: { maxAttempts: 4, attemptTimeoutMs: 3_000 },
    transient: { maxAttempts: 4, attemptTimeoutMs: 3_000 },
    permanent: { maxAttempts: 4, attemptTimeoutMs: 3_000 },
    exhaust: { maxAttempts: 3, attemptTimeoutMs: 3_000 },
    timeout: { maxAttempts: 4, attemptTimeoutMs: 200 },
    // Attempt 1 holds past it; a later attempt (one ledger call) must fit in it, which at 150 ms a machine
    // with two CPU hogs beside the suite overran (every retry timed out, the call exhausted its attempts).
    ignoreAbort: { maxAttempts: 4, attemptTimeoutMs: 300 },
    afterEffect: { maxAttempts: 4, attemptTimeoutMs: 3_000 }
  } satisfies Record<ChaosBehaviour, { readonly maxAttempts: number; readonly attemptTimeoutMs: number }>,
  alarmsPerBehaviour: 9
} as const

/** The named alarms: `<behaviour>-<n>`. A timed-out attempt is terminal, except for `ignoreAbort` names (retryTimeouts). */
export const CHAOS_ALARM_NAMES: ReadonlyArray<string> = CHAOS_BEHAVIOURS.flatMap((behaviour) =>
  Array.from({ length: CHAOS.alarmsPerBehaviour }, (_, n) => `${behaviour}-${String(n).padStart(2, "0")}`)
)

export const behaviourOfAlarm = (name: string): ChaosBehaviour => name.slice(0, name.lastIndexOf("-")) as ChaosBehaviour

/**
 * The named alarms of the chaos test's platform-delivery phase, apart from the 63 above:
 * - `ok` names apply their effect and succeed;
 * - `slow` names apply their effect, then hold `slowHoldMs` before succeeding, every attempt
 *   (so a reset can cut a platform delivery short after the effect, before the settle).
 */
export const PLATFORM_ALARMS = {
  ok: ["platform-ok-0", "platform-ok-1", "platform-ok-2"],
  slow: ["platform-slow-0", "platform-slow-1", "platform-slow-2"],
  slowHoldMs: 600,
  policy: { maxAttempts: 4, attemptTimeoutMs: 3_000 }
} as const

/** What a handler call does: a chaos behaviour, or the platform phase's `slow`. */
export type ChaosCallBehaviour = ChaosBehaviour | "slow"

export interface ChaosPayload {
  /** `transient`: how many attempts fail first. */
  readonly failTimes: number
}

export interface ChaosResult {
  readonly source: string
  readonly attempt: number
  readonly effect: number
}

export interface ChaosCall {
  readonly seq: number
  readonly kind: "operation" | "alarm"
  readonly behaviour: ChaosCallBehaviour
  /** The call id or the alarm name. */
  readonly source: string
  readonly attempt: number
  /** The ledger key: the call id, or the alarm's idempotencyKey. */
  readonly dedup_key: string
  readonly instance: string
  readonly from_alarm: number
  readonly started_at: number
  readonly ended_at: number | null
  readonly outcome: "running" | "completed" | "failed"
}

export interface ChaosEvent {
  readonly seq: number
  readonly kind: string
  readonly id: string
  readonly generation: string
  readonly type: string
  readonly outcome: string | null
  readonly attempt: number
  readonly instance: string
}

export interface ChaosAudit {
  readonly instance: string
  readonly now: number
  readonly alarm: number | null
  readonly pending: number
  readonly earliest: number | null
}

export interface ChaosEnv {
  readonly EFFECT_LEDGER: DurableObjectNamespace<EffectLedger>
}

const CREATE = `
  CREATE TABLE IF NOT EXISTS chaos_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    behaviour TEXT NOT NULL,
    source TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    dedup_key TEXT NOT NULL,
    instance TEXT NOT NULL,
    from_alarm INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    outcome TEXT NOT NULL DEFAULT 'running'
  );
  CREATE TABLE IF NOT EXISTS chaos_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    generation TEXT NOT NULL,
    type TEXT NOT NULL,
    outcome TEXT,
    attempt INTEGER NOT NULL,
    instance TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS chaos_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    ended_at INTEGER,
    instance TEXT NOT NULL,
    info TEXT NOT NULL
  );
`

class TransientError extends Error {
  override readonly name = "TransientError"
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Rejects with the signal's reason once it is aborted (the attempt timeout); never, if the object resets first. */
const untilAborted = (signal: AbortSignal): Promise<never> =>
  new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener("abort", () => reject(signal.reason), { once: true })
  })

interface Invocation {
  readonly kind: ChaosCall["kind"]
  readonly behaviour: ChaosCallBehaviour
  readonly source: string
  readonly attempt: number
  readonly dedupKey: string
  readonly failTimes: number
  readonly signal: AbortSignal
  readonly fromAlarm: boolean
}

type OperationHandler = (call: DurableCall<ChaosPayload>) => Promise<ChaosResult>
type AlarmHandler = (info: DurableAlarmInfo) => Promise<ChaosResult>

const operationPolicies = () => {
  const methods: Record<string, { attemptTimeoutMs: number; retries: { maxAttempts: number } }> = {}
  for (const behaviour of CHAOS_BEHAVIOURS) {
    const { attemptTimeoutMs, maxAttempts } = CHAOS.policies[behaviour]
    methods[behaviour] = { attemptTimeoutMs, retries: { maxAttempts } }
  }
  return methods
}

export class ChaosObject extends DurableObject<ChaosEnv> {
  readonly instance = crypto.randomUUID()
  /** What the library logged in this instance (see the scheduler's `log` below). */
  readonly logged: Array<Readonly<Record<string, unknown>>> = []

  readonly scheduler: DurabilityScheduler
  readonly durability: DurabilityInstance<Record<ChaosBehaviour, OperationHandler>>
  readonly alarms: DurabilityAlarmsInstance<Record<string, AlarmHandler>>

  constructor(ctx: DurableObjectState, env: ChaosEnv) {
    super(ctx, env)
    ctx.storage.sql.exec(CREATE)
    this.scheduler = new DurabilityScheduler({
      context: ctx,
      alarmConcurrency: CHAOS.alarmConcurrency,
      alarmMinDelayMs: CHAOS.alarmMinDelayMs,
      // Kept in memory, not written to the console: the test pool hangs when an instance it reset writes to
      // the console (workers-sdk#14180, fixed in pool 0.18.6, which needs vitest 4), and this object is reset
      // all the time. Production has no such limit.
      log: (entry) => void this.logged.push(entry)
    })
    const onLifecycleEvent = (event: DurabilityLifecycleEvent) => {
      if (event.type !== "attempt_settled" && event.type !== "terminal") return
      ctx.storage.sql.exec(
        "INSERT INTO chaos_events (kind, id, generation, type, outcome, attempt, instance) VALUES (?, ?, ?, ?, ?, ?, ?)",
        event.entityKind,
        event.id,
        event.generation,
        event.type,
        event.type === "attempt_settled" ? event.outcome : null,
        event.attempt,
        this.instance
      )
    }
    const handlers = {} as Record<ChaosBehaviour, OperationHandler>
    for (const behaviour of CHAOS_BEHAVIOURS) {
      handlers[behaviour] = (call) =>
        this.invoke({
          kind: "operation",
          behaviour,
          source: call.id,
          attempt: call.attempt,
          dedupKey: call.id,
          failTimes: call.payload.failTimes,
          signal: call.signal,
          fromAlarm: false
        })
    }
    this.durability = new Durability({
      scheduler: this.scheduler,
      handlers,
      retries: { delay: () => CHAOS.retryDelayMs },
      methods: operationPolicies(),
      onLifecycleEvent
    })
    const alarmHandlers: Record<string, AlarmHandler> = {}
    const alarmMethods: Record<string, { attemptTimeoutMs: number; retries: { maxAttempts: number }; retryTimeouts: boolean }> = {}
    for (const name of CHAOS_ALARM_NAMES) {
      const behaviour = behaviourOfAlarm(name)
      alarmHandlers[name] = (info) =>
        this.invoke({
          kind: "alarm",
          behaviour,
          source: info.name,
          attempt: info.attempt,
          dedupKey: info.idempotencyKey,
          failTimes: 1,
          signal: info.signal,
          fromAlarm: info.platform !== undefined
        })
      const { attemptTimeoutMs, maxAttempts } = CHAOS.policies[behaviour]
      alarmMethods[name] = { attemptTimeoutMs, retries: { maxAttempts }, retryTimeouts: behaviour === "ignoreAbort" }
    }
    const platformNames: ReadonlyArray<readonly [string, "ok" | "slow"]> = [
      ...PLATFORM_ALARMS.ok.map((name) => [name, "ok"] as const),
      ...PLATFORM_ALARMS.slow.map((name) => [name, "slow"] as const)
    ]
    for (const [name, behaviour] of platformNames) {
      alarmHandlers[name] = (info) =>
        this.invoke({
          kind: "alarm",
          behaviour,
          source: info.name,
          attempt: info.attempt,
          dedupKey: info.idempotencyKey,
          failTimes: 0,
          signal: info.signal,
          fromAlarm: info.platform !== undefined
        })
      const { attemptTimeoutMs, maxAttempts } = PLATFORM_ALARMS.policy
      alarmMethods[name] = { attemptTimeoutMs, retries: { maxAttempts }, retryTimeouts: false }
    }
    this.alarms = new DurabilityAlarms({
      scheduler: this.scheduler,
      handlers: alarmHandlers,
      retries: { delay: () => CHAOS.retryDelayMs },
      methods: alarmMethods,
      onLifecycleEvent
    })
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await recordDelivery(this.ctx.storage.sql, "chaos_deliveries", this.instance, info, () => this.scheduler.alarm(info))
  }

  private ledger(): DurableObjectStub<EffectLedger> {
    return this.env.EFFECT_LEDGER.get(this.env.EFFECT_LEDGER.idFromName(this.ctx.id.toString()))
  }

  private async invoke(call: Invocation): Promise<ChaosResult> {
    const sql = this.ctx.storage.sql
    const [row] = sql.exec<{ seq: number }>(
      `INSERT INTO chaos_calls (kind, behaviour, source, attempt, dedup_key, instance, from_alarm, started_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
      call.kind,
      call.behaviour,
      call.source,
      call.attempt,
      call.dedupKey,
      this.instance,
      call.fromAlarm ? 1 : 0,
      Date.now()
    ).toArray()
    const end = (outcome: "completed" | "failed") =>
      sql.exec("UPDATE chaos_calls SET ended_at = ?, outcome = ? WHERE seq = ?", Date.now(), outcome, row!.seq)
    try {
      const result = await this.behave(call)
      end("completed")
      return result
    } catch (error) {
      end("failed")
      throw error
    }
  }

  private async behave(call: Invocation): Promise<ChaosResult> {
    const apply = async (): Promise<ChaosResult> => {
      const applied: ApplyResult = await this.ledger().apply({
        source: call.source,
        key: call.dedupKey,
        attempt: call.attempt
      })
      return { source: call.source, attempt: call.attempt, effect: applied.effect }
    }
    const fail = (what: string) => new TransientError(`${call.source}: ${what} on attempt ${call.attempt}`)
    switch (call.behaviour) {
      case "ok":
        return apply()
      case "transient":
        if (call.attempt <= call.failTimes) throw fail("transient failure")
        return apply()
      case "permanent":
        throw new NonRetryableError(`${call.source} cannot succeed`)
      case "exhaust":
        throw fail("always fails")
      case "timeout":
        if (call.attempt === 1) return untilAborted(call.signal)
        return apply()
      case "ignoreAbort":
        if (call.attempt === 1) await sleep(CHAOS.holdMs)
        return apply()
      case "afterEffect": {
        const result = await apply()
        if (call.attempt === 1) throw fail("failure after the effect")
        return result
      }
      case "slow": {
        const result = await apply()
        await sleep(PLATFORM_ALARMS.slowHoldMs)
        return result
      }
    }
  }

  // RPC surface used by the chaos test.

  /** Registers each call (idempotent: re-submitting a batch after a reset is safe). */
  async submit(calls: ReadonlyArray<{ readonly behaviour: ChaosBehaviour; readonly id: string; readonly failTimes: number }>) {
    for (const call of calls) {
      await this.durability[call.behaviour]({ id: call.id, payload: { failTimes: call.failTimes } })
    }
    return calls.length
  }

  /**
   * Schedules each name that was never scheduled (no row and no handler call),
   * so re-submitting a batch after a reset never replaces an occurrence.
   */
  async scheduleOnce(alarms: ReadonlyArray<{ readonly name: string; readonly at: number }>) {
    let scheduled = 0
    for (const { at, name } of alarms) {
      const sql = this.ctx.storage.sql
      const known = sql.exec("SELECT 1 FROM durability_alarms WHERE name = ?", name).toArray().length > 0 ||
        sql.exec("SELECT 1 FROM chaos_calls WHERE kind = 'alarm' AND source = ?", name).toArray().length > 0
      if (known) continue
      await this.alarms[name]!(at)
      scheduled++
    }
    return scheduled
  }

  /** Schedules (or replaces) `name` at `at`; returns the new occurrence's generation. */
  async reschedule(name: string, at: number): Promise<string> {
    await this.alarms[name]!(at)
    const [row] = this.ctx.storage.sql.exec<{ generation_id: string }>(
      "SELECT generation_id FROM durability_alarms WHERE name = ?",
      name
    ).toArray()
    return row!.generation_id
  }

  /** The stored pending work and the platform alarm, read together. */
  async audit(): Promise<ChaosAudit> {
    const sql = this.ctx.storage.sql
    const [row] = sql.exec<{ pending: number; earliest: number | null }>(
      `SELECT COUNT(*) AS pending, MIN(at) AS earliest FROM (
         SELECT next_attempt_at AS at FROM durability_calls WHERE status = 'pending'
         UNION ALL SELECT next_attempt_at AS at FROM durability_alarms WHERE status = 'pending')`
    ).toArray()
    const now = Date.now()
    const alarm = await this.ctx.storage.getAlarm()
    return { instance: this.instance, now, alarm, pending: row!.pending, earliest: row!.earliest }
  }

  state() {
    const sql = this.ctx.storage.sql
    const all = <T>(query: string) => sql.exec(query).toArray() as unknown as ReadonlyArray<T>
    return {
      instance: this.instance,
      operations: all<OperationRow>("SELECT * FROM durability_calls ORDER BY id"),
      alarms: all<AlarmRow>("SELECT * FROM durability_alarms ORDER BY name"),
      calls: all<ChaosCall>("SELECT * FROM chaos_calls ORDER BY seq"),
      events: all<ChaosEvent>("SELECT * FROM chaos_events ORDER BY seq"),
      deliveries: all<ChaosDelivery>("SELECT * FROM chaos_deliveries ORDER BY seq")
    }
  }

  /** The deliveries still running (or cut by a reset), or begun or ended at or after `at`. */
  deliveriesAround(at: number): ReadonlyArray<ChaosDelivery> {
    return deliveriesAround<ChaosDelivery>(this.ctx.storage.sql, "chaos_deliveries", at)
  }

  /** Handler calls a reset cut short: begun in an instance that is gone, never ended. */
  callsCut(): number {
    return this.ctx.storage.sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM chaos_calls WHERE instance <> ? AND ended_at IS NULL",
      this.instance
    ).toArray()[0]!.n
  }

  /**
   * What the platform does when an alarm invocation fails: the alarm stays set, to be
   * retried. (`runDurableObjectAlarm` deletes the alarm first and never retries.)
   */
  async restoreAlarm(at: number): Promise<boolean> {
    if ((await this.ctx.storage.getAlarm()) !== null) return false
    await this.ctx.storage.setAlarm(at)
    return true
  }

  /**
   * A light look at some named alarms (cheap enough to poll every few ms): their rows, their
   * handler calls and settle events, and the `alarm(info)` deliveries that started at or after
   * `since`, with the platform alarm.
   */
  async probe(names: ReadonlyArray<string>, since: number): Promise<ChaosProbe> {
    const sql = this.ctx.storage.sql
    const list = JSON.stringify(names)
    const all = <T>(query: string, ...bindings: Array<string | number>) =>
      sql.exec(query, ...bindings).toArray() as unknown as ReadonlyArray<T>
    const inList = "IN (SELECT value FROM json_each(?))"
    const alarm = await this.ctx.storage.getAlarm()
    return {
      instance: this.instance,
      now: Date.now(),
      alarm,
      alarms: all<AlarmRow>(`SELECT * FROM durability_alarms WHERE name ${inList} ORDER BY name`, list),
      calls: all<ChaosCall>(`SELECT * FROM chaos_calls WHERE kind = 'alarm' AND source ${inList} ORDER BY seq`, list),
      events: all<ChaosEvent>(`SELECT * FROM chaos_events WHERE kind = 'named_alarm' AND id ${inList} ORDER BY seq`, list),
      deliveries: all<ChaosDelivery>("SELECT * FROM chaos_deliveries WHERE at >= ? ORDER BY seq", since)
    }
  }

  /** Handler calls of this instance still running (calls of reset instances never end). */
  running(): number {
    return this.ctx.storage.sql.exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM chaos_calls WHERE instance = ? AND ended_at IS NULL",
      this.instance
    ).toArray()[0]!.n
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  now(): number {
    return Date.now()
  }

  whoami(): string {
    return this.instance
  }
}

/** The stored operation row, as the lab object reads it (same table). */
export type { OperationRow }

export interface ChaosDelivery {
  readonly seq: number
  readonly at: number
  /** When `alarm()` returned (null while it runs, and for ever once a reset cut it). */
  readonly ended_at: number | null
  readonly instance: string
  /** JSON of the `AlarmInvocationInfo` (`"null"` for `runDurableObjectAlarm`). */
  readonly info: string
}

export interface ChaosProbe {
  readonly instance: string
  readonly now: number
  readonly alarm: number | null
  readonly alarms: ReadonlyArray<AlarmRow>
  readonly calls: ReadonlyArray<ChaosCall>
  readonly events: ReadonlyArray<ChaosEvent>
  readonly deliveries: ReadonlyArray<ChaosDelivery>
}

export interface AlarmRow {
  readonly name: string
  readonly generation_id: string
  readonly status: "pending" | "failed"
  readonly scheduled_at: number
  readonly next_attempt_at: number
  readonly attempt: number
  readonly last_error: string | null
  readonly last_error_name: string | null
}
