/**
 * `LabObject`: the fault-injection lab. A Durable Object written against the
 * PUBLIC promise API, exactly as an application would: one
 * `DurabilityScheduler` shared by a `Durability` (operations) and a
 * `DurabilityAlarms` (named alarms), with `alarm(info)` delegated to the
 * scheduler.
 *
 * Handlers are driven by their payload (`LabBehaviour`; for named alarms, the
 * behaviour stored when the name was scheduled). Their external effects go to
 * an `EffectLedger` object (one per lab object). Every handler call is
 * recorded in the lab's own table, which survives resets of the object.
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  DurabilityScheduler,
  type DurableAlarmInfo,
  type DurableCall,
  type DurableOperationResult,
  NonRetryableError
} from "../../../src/index.js"
import type { ApplyResult, EffectLedger } from "./EffectLedger.js"
import { Gates } from "./gates.js"
import { Deliveries, type Idleness } from "./idle.js"

/** The lab's settings; the scenarios compute their expectations from them. */
export const LAB = {
  alarmConcurrency: 3,
  alarmMinDelayMs: 1_000,
  /** Default retry delay (every method but `deferred`). */
  retryDelayMs: 20,
  /** Default attempt timeout. */
  attemptTimeoutMs: 1_000,
  /** `timed`: a short timeout for the timeout scenarios. */
  timedTimeoutMs: 150,
  /** `guarded`: few attempts, a timeout no reset scenario reaches. */
  guardedMaxAttempts: 3,
  guardedTimeoutMs: 10_000,
  /** `deferred`: a retry delay beyond alarmMinDelayMs, so only the physical alarm runs the retry. */
  deferredDelayMs: 1_500,
  defaultMaxAttempts: 5
} as const

/**
 * What a handler does on each attempt. `failTimes` counts the attempts that
 * misbehave (default 1); later attempts apply the effect with the stable key
 * and succeed.
 * - `ok`: apply the effect (stable key), succeed.
 * - `transient-before-effect`: fail before touching the ledger.
 * - `downstream`: apply the effect (stable key); the ledger may reject it. With a `gate`, the attempts after
 *   `failTimes` wait for it first.
 * - `after-effect-idempotent`: apply (stable key), then fail.
 * - `after-effect-unprotected`: apply without a key, then fail (every attempt applies).
 * - `honor-abort`: wait for the signal, then reject with its reason.
 * - `ignore-abort`: ignore the signal, hold `holdMs`, apply (stable key), return late.
 * - `non-retryable`: throw `NonRetryableError` (every attempt).
 * - `always-fail`: throw (every attempt).
 * - `hang-before-effect`: wait for the signal (or a reset) before the effect.
 * - `hang-after-idempotent` / `hang-after-unprotected`: apply, then wait for the signal (or a reset).
 * - `burst`: hold `holdMs` (or until `gate` opens), then fail before the effect; later attempts hold, apply
 *   without a key, succeed.
 * - `gated`: wait until the test opens the gate (`gate`, else the source's), ignoring the signal, then apply
 *   (stable key) and succeed.
 *
 * A gate (`open`) is how a scenario holds a handler running while it looks, however slow the machine: a
 * hold of some milliseconds would make "still running" a race with the clock.
 */
export type LabMode =
  | "ok"
  | "transient-before-effect"
  | "downstream"
  | "after-effect-idempotent"
  | "after-effect-unprotected"
  | "honor-abort"
  | "ignore-abort"
  | "non-retryable"
  | "always-fail"
  | "hang-before-effect"
  | "hang-after-idempotent"
  | "hang-after-unprotected"
  | "burst"
  | "gated"

export interface LabBehaviour {
  readonly mode: LabMode
  readonly failTimes?: number
  readonly holdMs?: number
  /** The gate (`open`) the mode waits for; see `LabMode`. */
  readonly gate?: string
}

export interface LabResult {
  readonly source: string
  readonly attempt: number
  readonly effect: number | null
}

/** One handler call, as the lab recorded it in its own table. */
export interface LabCall {
  readonly seq: number
  readonly kind: "operation" | "alarm"
  /** The operation (method) or the alarm name. */
  readonly method: string
  /** The call id, or the alarm name. */
  readonly source: string
  readonly attempt: number
  /** The stable key of the call: its id, or the alarm's idempotencyKey. */
  readonly dedup_key: string
  readonly instance: string
  /** 1 when a platform alarm (with its info) started the attempt (named alarms only). */
  readonly from_alarm: number
  readonly scheduled_time: number | null
  readonly started_at: number
  readonly ended_at: number | null
  /** Handlers of this instance running when this one started, itself included. */
  readonly concurrent: number
  /** Whether the signal was already aborted at the start / was aborted at some point. */
  readonly aborted_at_start: number
  readonly aborted: number
  readonly outcome: "running" | "completed" | "failed"
}

/** One `alarm(info)` delivery. */
export interface LabAlarm {
  readonly seq: number
  readonly at: number
  readonly instance: string
  readonly info: string
}

export interface LabEnv {
  readonly EFFECT_LEDGER: DurableObjectNamespace<EffectLedger>
}

export type LabMethod = "effect" | "timed" | "guarded" | "deferred"
export type LabAlarmName = "alpha" | "beta" | "gamma"

const CREATE = `
  CREATE TABLE IF NOT EXISTS lab_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    method TEXT NOT NULL,
    source TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    dedup_key TEXT NOT NULL,
    instance TEXT NOT NULL,
    from_alarm INTEGER NOT NULL,
    scheduled_time INTEGER,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    concurrent INTEGER NOT NULL,
    aborted_at_start INTEGER NOT NULL,
    aborted INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL DEFAULT 'running'
  );
  CREATE TABLE IF NOT EXISTS lab_alarm_behaviours (
    name TEXT PRIMARY KEY,
    behaviour TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS lab_alarms (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    instance TEXT NOT NULL,
    info TEXT NOT NULL
  );
`

class TransientError extends Error {
  override readonly name = "TransientError"
}

interface Invocation {
  readonly kind: LabCall["kind"]
  readonly method: string
  readonly source: string
  readonly attempt: number
  readonly dedupKey: string
  readonly signal: AbortSignal
  readonly fromAlarm: boolean
  readonly scheduledTime: number | null
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Never resolves: rejects with the signal's reason once it is aborted (a timeout), unless the object resets first. */
const untilAborted = (signal: AbortSignal): Promise<never> =>
  new Promise<never>((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener("abort", () => reject(signal.reason), { once: true })
  })

export class LabObject extends DurableObject<LabEnv> {
  readonly instance = crypto.randomUUID()
  /** Handlers of this instance running right now (in memory: gone with a reset). */
  private active = 0
  private readonly delivering = new Deliveries()
  private readonly gates = new Gates()

  // The helpers are fields, as the library asks: every new instance rebuilds them before serving.
  /** What the library logged in this instance. */
  readonly logged: Array<Readonly<Record<string, unknown>>> = []

  readonly scheduler = new DurabilityScheduler({
    context: this.ctx,
    alarmConcurrency: LAB.alarmConcurrency,
    alarmMinDelayMs: LAB.alarmMinDelayMs,
    // In memory, not on the console: the test pool hangs when an instance it reset writes to the console
    // (workers-sdk#14180, fixed in pool 0.18.6, which needs vitest 4). Production has no such limit.
    log: (entry) => void this.logged.push(entry)
  })

  readonly durability = new Durability({
    scheduler: this.scheduler,
    handlers: {
      effect: (call: DurableCall<LabBehaviour>) => this.operation(call),
      timed: (call: DurableCall<LabBehaviour>) => this.operation(call),
      guarded: (call: DurableCall<LabBehaviour>) => this.operation(call),
      deferred: (call: DurableCall<LabBehaviour>) => this.operation(call)
    },
    attemptTimeoutMs: LAB.attemptTimeoutMs,
    retries: { delay: () => LAB.retryDelayMs },
    methods: {
      timed: { attemptTimeoutMs: LAB.timedTimeoutMs },
      guarded: { attemptTimeoutMs: LAB.guardedTimeoutMs, retries: { maxAttempts: LAB.guardedMaxAttempts } },
      deferred: { retries: { delay: () => LAB.deferredDelayMs } }
    }
  })

  readonly alarms = new DurabilityAlarms({
    scheduler: this.scheduler,
    handlers: {
      alpha: (info: DurableAlarmInfo) => this.named(info),
      beta: (info: DurableAlarmInfo) => this.named(info),
      gamma: (info: DurableAlarmInfo) => this.named(info)
    },
    attemptTimeoutMs: LAB.attemptTimeoutMs,
    retries: { delay: () => LAB.retryDelayMs },
    methods: { gamma: { attemptTimeoutMs: LAB.guardedTimeoutMs, retries: { maxAttempts: LAB.guardedMaxAttempts } } }
  })

  constructor(ctx: DurableObjectState, env: LabEnv) {
    super(ctx, env)
    ctx.storage.sql.exec(CREATE)
  }

  private operation(call: DurableCall<LabBehaviour>): Promise<LabResult> {
    return this.invoke(call.payload, {
      kind: "operation",
      method: call.operation,
      source: call.id,
      attempt: call.attempt,
      dedupKey: call.id,
      signal: call.signal,
      fromAlarm: false,
      scheduledTime: null
    })
  }

  private named(info: DurableAlarmInfo): Promise<LabResult> {
    return this.invoke(this.alarmBehaviour(info.name), {
      kind: "alarm",
      method: info.name,
      source: info.name,
      attempt: info.attempt,
      dedupKey: info.idempotencyKey,
      signal: info.signal,
      fromAlarm: info.platform !== undefined,
      scheduledTime: info.scheduledTime
    })
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    this.ctx.storage.sql.exec(
      "INSERT INTO lab_alarms (at, instance, info) VALUES (?, ?, ?)",
      Date.now(),
      this.instance,
      JSON.stringify(info ?? null)
    )
    await this.delivering.around(() => this.scheduler.alarm(info))
  }

  /** The alarm and the deliveries in flight, for a scenario that ends once the object is idle. */
  idle(): Promise<Idleness> {
    return this.delivering.idleness(this.ctx.storage)
  }

  private ledger(): DurableObjectStub<EffectLedger> {
    return this.env.EFFECT_LEDGER.get(this.env.EFFECT_LEDGER.idFromName(this.ctx.id.toString()))
  }

  private alarmBehaviour(name: string): LabBehaviour {
    const [row] = this.ctx.storage.sql.exec<{ behaviour: string }>(
      "SELECT behaviour FROM lab_alarm_behaviours WHERE name = ?",
      name
    ).toArray()
    return row === undefined ? { mode: "ok" } : (JSON.parse(row.behaviour) as LabBehaviour)
  }

  /** Runs one attempt as `behaviour` says, recording it in `lab_calls`. */
  private async invoke(behaviour: LabBehaviour, call: Invocation): Promise<LabResult> {
    const sql = this.ctx.storage.sql
    this.active++
    const [row] = sql.exec<{ seq: number }>(
      `INSERT INTO lab_calls (kind, method, source, attempt, dedup_key, instance, from_alarm, scheduled_time,
         started_at, concurrent, aborted_at_start)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
      call.kind,
      call.method,
      call.source,
      call.attempt,
      call.dedupKey,
      this.instance,
      call.fromAlarm ? 1 : 0,
      call.scheduledTime,
      Date.now(),
      this.active,
      call.signal.aborted ? 1 : 0
    ).toArray()
    const seq = row!.seq
    const markAborted = () => sql.exec("UPDATE lab_calls SET aborted = 1 WHERE seq = ?", seq)
    call.signal.addEventListener("abort", markAborted, { once: true })
    const end = (outcome: "completed" | "failed") =>
      sql.exec("UPDATE lab_calls SET ended_at = ?, outcome = ? WHERE seq = ?", Date.now(), outcome, seq)
    try {
      const result = await this.behave(behaviour, call)
      end("completed")
      return result
    } catch (error) {
      end("failed")
      throw error
    } finally {
      this.active--
    }
  }

  private async behave(behaviour: LabBehaviour, call: Invocation): Promise<LabResult> {
    const misbehaves = call.attempt <= (behaviour.failTimes ?? 1)
    const apply = async (key: string | null): Promise<ApplyResult> =>
      this.ledger().apply({ source: call.source, key, attempt: call.attempt })
    const done = (applied: ApplyResult | null): LabResult => ({
      source: call.source,
      attempt: call.attempt,
      effect: applied === null ? null : applied.effect
    })
    const fail = (what: string) => new TransientError(`${call.source}: ${what} on attempt ${call.attempt}`)
    const hang = () => untilAborted(call.signal)
    switch (behaviour.mode) {
      case "ok":
        return done(await apply(call.dedupKey))
      case "downstream":
        if (!misbehaves && behaviour.gate !== undefined) await this.gates.opened(behaviour.gate)
        return done(await apply(call.dedupKey))
      case "transient-before-effect":
        if (misbehaves) throw fail("failed before the effect")
        return done(await apply(call.dedupKey))
      case "after-effect-idempotent": {
        const applied = await apply(call.dedupKey)
        if (misbehaves) throw fail("failed after the effect")
        return done(applied)
      }
      case "after-effect-unprotected": {
        const applied = await apply(null)
        if (misbehaves) throw fail("failed after the effect")
        return done(applied)
      }
      case "honor-abort":
        if (misbehaves) return hang()
        return done(await apply(call.dedupKey))
      case "ignore-abort":
        if (misbehaves) await sleep(behaviour.holdMs ?? 0)
        return done(await apply(call.dedupKey))
      case "non-retryable":
        throw new NonRetryableError(`${call.source} cannot succeed`)
      case "always-fail":
        throw fail("always fails")
      case "hang-before-effect":
        if (misbehaves) return hang()
        return done(await apply(call.dedupKey))
      case "hang-after-idempotent": {
        const applied = await apply(call.dedupKey)
        if (misbehaves) return hang()
        return done(applied)
      }
      case "hang-after-unprotected": {
        const applied = await apply(null)
        if (misbehaves) return hang()
        return done(applied)
      }
      case "burst":
        await (behaviour.gate === undefined ? sleep(behaviour.holdMs ?? 0) : this.gates.opened(behaviour.gate))
        if (misbehaves) throw fail("failed in the burst")
        return done(await apply(null))
      case "gated":
        await this.gates.opened(behaviour.gate ?? call.source)
        return done(await apply(call.dedupKey))
    }
  }

  // RPC surface used by the scenarios.

  submit(method: LabMethod, id: string, behaviour: LabBehaviour): Promise<void> {
    return this.durability[method]({ id, payload: behaviour })
  }

  result(method: LabMethod, id: string): Promise<DurableOperationResult<LabResult>> {
    return this.durability[method].getResult(id)
  }

  wait(method: LabMethod, id: string, timeoutMs: number): Promise<DurableOperationResult<LabResult>> {
    return this.durability[method].job(id).wait({ timeoutMs })
  }

  /**
   * Stores the behaviour of `name`'s handler, then schedules (or replaces) the name at `at`; answers its row as
   * the schedule left it (read in the same turn: no run of it can come in between, however slow the machine).
   */
  async schedule(name: LabAlarmName, at: number, behaviour: LabBehaviour): Promise<AlarmRow | undefined> {
    this.ctx.storage.sql.exec(
      `INSERT INTO lab_alarm_behaviours (name, behaviour) VALUES (?, ?)
       ON CONFLICT (name) DO UPDATE SET behaviour = excluded.behaviour`,
      name,
      JSON.stringify(behaviour)
    )
    await this.alarms[name](at)
    return this.alarmRows().find((row) => row.name === name)
  }

  /** Opens `gate`: the handlers waiting for it go on, and later ones do not wait. */
  open(gate: string): void {
    this.gates.open(gate)
  }

  calls(): ReadonlyArray<LabCall> {
    return this.ctx.storage.sql.exec("SELECT * FROM lab_calls ORDER BY seq").toArray() as unknown as ReadonlyArray<
      LabCall
    >
  }

  deliveries(): ReadonlyArray<LabAlarm> {
    return this.ctx.storage.sql.exec("SELECT * FROM lab_alarms ORDER BY seq").toArray() as unknown as ReadonlyArray<
      LabAlarm
    >
  }

  /** `durability_calls`, as stored. */
  operationRows(): ReadonlyArray<OperationRow> {
    return this.ctx.storage.sql.exec("SELECT * FROM durability_calls ORDER BY created_at, id").toArray() as unknown as
      ReadonlyArray<OperationRow>
  }

  /** `durability_alarms`, as stored. */
  alarmRows(): ReadonlyArray<AlarmRow> {
    return this.ctx.storage.sql.exec("SELECT * FROM durability_alarms ORDER BY name").toArray() as unknown as
      ReadonlyArray<AlarmRow>
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

export interface OperationRow {
  readonly id: string
  readonly operation: string
  readonly payload: string
  readonly status: "pending" | "completed" | "failed"
  readonly result: string | null
  readonly attempt: number
  readonly next_attempt_at: number
  readonly last_error: string | null
  readonly last_error_name: string | null
  readonly completed_at: number | null
  readonly generation_id: string
  readonly created_at: number
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
  readonly created_at: number
}
