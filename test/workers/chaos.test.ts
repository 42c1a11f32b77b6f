/**
 * Eviction chaos inside workerd: real SQLite storage, real alarms, real timers.
 *
 * A `ChaosObject` (objects/ChaosObject.ts, public promise API) gets 322
 * operations and 63 named alarms with mixed outcomes (succeed, fail
 * transiently, fail permanently, exhaust their attempts, time out, ignore their
 * abort, fail after an idempotent effect). While they drain, through the
 * engine's own timers, real platform alarms and `runDurableObjectAlarm`, the
 * object is reset (`state.abort()`) at random moments chosen by a seeded PRNG:
 * in the middle of registrations, of alarm passes, of handlers. Each reset is
 * followed by an audit of the crash state: any pending row must be covered by
 * the platform alarm at or before it is due (or at the earliest the minimum
 * delay allows).
 *
 * At the end, from storage, the object's own records and the external
 * `EffectLedger`: every operation is completed or failed exactly as its
 * policy dictates given which attempts the resets cut short; none is lost;
 * none completed twice (one completion event; one ledger effect per call id);
 * no attempt number ran twice or beyond maxAttempts; every named alarm ran
 * with one stable idempotencyKey and ended as its policy dictates.
 *
 * Two harness rules keep the audit honest: while the platform is delivering an
 * alarm, `getAlarm()` reads null, so a null alarm is accepted only if a platform
 * delivery began right then; and `runDurableObjectAlarm` deletes the alarm
 * before calling `alarm()` and never retries, so when a reset cuts one short
 * the alarm is put back, as the platform keeps a failed alarm for its retry.
 *
 * The seed is printed with the figures; a failure message starts with it.
 * Set CHAOS_SEED below to replay one.
 *
 * A second test races two executions of one key in workerd (fencing).
 */
import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import type { EffectLedger, LedgerDelivery, LedgerEffect } from "./objects/EffectLedger.js"
import {
  behaviourOfAlarm,
  CHAOS,
  CHAOS_ALARM_NAMES,
  CHAOS_BEHAVIOURS,
  type ChaosAudit,
  type ChaosBehaviour,
  type ChaosCall,
  type ChaosObject,
  type ChaosResult
} from "./objects/ChaosObject.js"

/** Replay a failing run by putting its seed here. */
const CHAOS_SEED: number | undefined = undefined

const OPERATIONS = 322
const BATCH = 23
/** Resets injected at most, and at least (the work may drain before the maximum is reached). */
const RESETS = 40
const MIN_RESETS = 15
/** Named alarms are due within this long after the start. */
const ALARM_SPREAD_MS = 8_000
/**
 * Workers time for the whole scenario, draining included; every wait below is bounded by it.
 * A run takes 10–20 s (more when the machine is loaded); this is the cap, not the expectation.
 */
const BUDGET_MS = 40_000
const IDEMPOTENCY_PREFIX = "durability-alarm:v1:"

/** mulberry32: small, fast, good enough to pick moments. */
const prng = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

interface OperationSpec {
  readonly behaviour: ChaosBehaviour
  readonly id: string
  readonly failTimes: number
}

/** Which attempt numbers a behaviour fails on purpose (so a final failure there is legitimate). */
const failsOnAttempt = (behaviour: ChaosBehaviour, attempt: number, failTimes: number): string | undefined => {
  switch (behaviour) {
    case "transient":
      return attempt <= failTimes ? "TransientError" : undefined
    case "permanent":
      return "NonRetryableError"
    case "exhaust":
      return "TransientError"
    case "afterEffect":
      return attempt === 1 ? "TransientError" : undefined
    default:
      return undefined
  }
}

const canSucceed = (behaviour: ChaosBehaviour) => behaviour !== "permanent" && behaviour !== "exhaust"

it("eviction chaos: hundreds of operations and named alarms survive random resets, none lost, none doubled", {
  timeout: 75_000
}, async () => {
  const seed = CHAOS_SEED ?? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) >>> 0
  const random = prng(seed)
  const started = Date.now()
  const deadline = started + BUDGET_MS

  const id = env.CHAOS_OBJECT.newUniqueId()
  let stub: DurableObjectStub<ChaosObject> = env.CHAOS_OBJECT.get(id)
  const ledger: DurableObjectStub<EffectLedger> = env.EFFECT_LEDGER.get(env.EFFECT_LEDGER.idFromName(id.toString()))

  const violations: Array<string> = []
  const killed = new Set<string>()
  const figures = {
    seed,
    operations: OPERATIONS,
    namedAlarms: CHAOS_ALARM_NAMES.length,
    resets: 0,
    resetsDuringRegistration: 0,
    resetsDuringAlarmRuns: 0,
    resubmitted: 0,
    runAlarmCalls: 0,
    alarmRetriesEmulated: 0,
    auditsDuringAlarmDelivery: 0,
    platformAlarmDeliveries: 0,
    audits: 0,
    attemptsRun: 0,
    attemptsCutByResets: 0,
    ledgerEffects: 0,
    deduplicatedDeliveries: 0,
    completed: 0,
    failed: {} as Record<string, number>,
    alarmsSucceeded: 0,
    alarmsFailed: {} as Record<string, number>,
    elapsedMs: 0,
    violations: 0
  }

  /** Forces a reset of the object at this moment: memory, timers and running handlers are gone. */
  const reset = async () => {
    let victim: string | undefined
    await runInDurableObject(stub, (instance: ChaosObject, state) => {
      victim = instance.instance
      state.abort("reset by the chaos test")
    }).then(
      () => violations.push("state.abort() did not throw"),
      () => undefined
    )
    if (victim !== undefined) killed.add(victim)
    stub = env.CHAOS_OBJECT.get(id)
    figures.resets++
  }

  /**
   * A platform alarm delivery that began at `at` or just after: while it is being
   * delivered, `getAlarm()` reads null, yet the work is covered (a failed delivery is retried).
   */
  const deliveryInFlight = async (at: number) => {
    for (let poll = 0; poll < 10; poll++) {
      const started = await stub.deliveriesSince(at - 20).catch(() => [])
      if (started.some((delivery) => delivery.info !== "null" && delivery.at <= at + 500)) return true
      await sleep(50)
    }
    return false
  }

  /** The lost-wakeup invariant on the stored state: pending work is covered by the platform alarm. */
  const audit = async (when: string) => {
    let seen: ChaosAudit
    try {
      seen = await stub.audit()
    } catch {
      return // reset under us: nothing to read
    }
    figures.audits++
    if (seen.pending === 0 || seen.earliest === null) return
    const latest = Math.max(seen.earliest, seen.now + CHAOS.alarmMinDelayMs)
    if (seen.alarm !== null && seen.alarm <= latest) return
    if (seen.alarm === null && await deliveryInFlight(seen.now)) {
      figures.auditsDuringAlarmDelivery++
      return
    }
    violations.push(
      `${when}: ${seen.pending} pending row(s) due at ${seen.earliest}, but the alarm is ${seen.alarm} (now ${seen.now})`
    )
  }

  /**
   * Runs the alarm now, as the platform would (not awaited: resets land in the middle of
   * it). `runDurableObjectAlarm` deletes the alarm before calling `alarm()` and never
   * retries; when a reset cuts the invocation short, the alarm is put back, as the
   * platform keeps a failed alarm for its retry.
   */
  const kicks = new Set<Promise<void>>()
  const kick = () => {
    figures.runAlarmCalls++
    const target = stub
    const running: Promise<void> = target.alarmAt().then(async (at) => {
      try {
        await runDurableObjectAlarm(target)
      } catch {
        if (at === null) return
        const restored = await env.CHAOS_OBJECT.get(id).restoreAlarm(at).catch(() => false)
        if (restored) figures.alarmRetriesEmulated++
      }
    }, () => undefined).finally(() => kicks.delete(running))
    kicks.add(running)
    return running
  }

  const maybeReset = async (during: "registration" | "drain") => {
    if (figures.resets >= RESETS) return
    if (random() < 0.5) void kick()
    await sleep(Math.floor(random() * 60))
    const cut = [...kicks]
    if (cut.length > 0) figures.resetsDuringAlarmRuns++
    await reset()
    if (during === "registration") figures.resetsDuringRegistration++
    // The invocations the reset cut short end now (and get their alarm back, as the platform would).
    await Promise.all(cut)
    await audit(`after reset #${figures.resets}`)
  }

  const retried = async (label: string, send: () => Promise<unknown>) => {
    for (let round = 0; Date.now() < deadline; round++) {
      try {
        await send()
        return
      } catch {
        // The reset cut the RPC: the object may have committed part of the batch. Both
        // calls are idempotent, so sending the batch again is safe.
        figures.resubmitted++
        stub = env.CHAOS_OBJECT.get(id)
      }
    }
    violations.push(`${label}: could not be submitted before the deadline`)
  }

  try {
    // Registration, with resets in the middle of it.
    const now = await stub.now()
    const specs: Array<OperationSpec> = Array.from({ length: OPERATIONS }, (_, n) => {
      const behaviour = CHAOS_BEHAVIOURS[n % CHAOS_BEHAVIOURS.length]!
      // Some ids are made of quotes and SQL: valid ids, stored and matched exactly.
      const id = n % 11 === 0 ? `op-${n}-'); DROP TABLE durability_calls; --` : `op-${n}-${behaviour}`
      return { behaviour, id, failTimes: 1 + Math.floor(random() * 2) }
    })
    // Named alarms are due over the first seconds, so resets keep finding work in flight.
    const alarms = CHAOS_ALARM_NAMES.map((name) => ({ name, at: now + Math.floor(random() * ALARM_SPREAD_MS) }))
    const batches = Array.from({ length: Math.ceil(specs.length / BATCH) }, (_, n) => ({
      operations: specs.slice(n * BATCH, (n + 1) * BATCH),
      alarms: alarms.slice(n * 5, (n + 1) * 5)
    }))

    // Registration and draining overlap; resets land in registrations, alarm passes and handlers.
    let submitted = 0
    for (let step = 0; Date.now() < deadline; step++) {
      const batch = batches[submitted]
      // One RPC per registration, as separate requests would: a reset can land between any two.
      const sending = batch === undefined ? Promise.resolve() : Promise.all([
        ...batch.operations.map((spec) => retried(`register ${spec.id}`, () => stub.submit([spec]))),
        batch.alarms.length === 0
          ? Promise.resolve()
          : retried(`alarms batch ${submitted}`, () => stub.scheduleOnce(batch.alarms))
      ])
      const roll = random()
      if (roll < 0.55) await maybeReset(batch === undefined ? "drain" : "registration")
      else if (roll < 0.8) await Promise.race([kick(), sleep(10 + Math.floor(random() * 50))])
      else await sleep(20 + Math.floor(random() * 100))
      await sending
      if (batch !== undefined) submitted++
      if (random() < 0.25) await audit(`step ${step}`)
      if (submitted < batches.length) continue
      if (figures.resets >= RESETS) break
      const { pending } = await stub.audit().catch(() => ({ pending: 1 }))
      if (pending === 0) break
    }
    await retried("every named alarm", () => stub.scheduleOnce(alarms))
    await Promise.all([...kicks])

    // Settle: no more resets; wait (bounded) for the last handlers and the alarm to go.
    for (;;) {
      const seen = await stub.audit()
      const running = await stub.running()
      if (seen.pending === 0 && running === 0 && seen.alarm === null) break
      if (Date.now() > deadline) {
        violations.push(`not drained within ${BUDGET_MS} ms: ${JSON.stringify({ ...seen, running })}`)
        break
      }
      if (seen.pending > 0) await Promise.race([kick(), sleep(500)])
      await sleep(50)
    }

    // The invariants, from what is stored.
    const state = await stub.state()
    const effects: ReadonlyArray<LedgerEffect> = await ledger.effects()
    const deliveries: ReadonlyArray<LedgerDelivery> = await ledger.deliveries()
    figures.platformAlarmDeliveries = state.deliveries.filter((delivery) => delivery.info !== "null").length
    figures.attemptsRun = state.calls.length
    figures.attemptsCutByResets = state.calls.filter((call) => call.ended_at === null).length
    figures.ledgerEffects = effects.length
    figures.deduplicatedDeliveries = deliveries.filter((delivery) => delivery.outcome === "deduplicated").length

    const callsBy = new Map<string, Array<ChaosCall>>()
    for (const call of state.calls) {
      const key = `${call.kind}:${call.source}`
      callsBy.set(key, [...(callsBy.get(key) ?? []), call])
    }
    const effectsByKey = new Map<string, Array<LedgerEffect>>()
    for (const effect of effects) {
      if (effect.key === null) {
        violations.push(`an unkeyed effect from ${effect.source}`)
        continue
      }
      effectsByKey.set(effect.key, [...(effectsByKey.get(effect.key) ?? []), effect])
    }
    const settlesOf = (kind: string, key: string) =>
      state.events.filter((event) =>
        event.kind === kind && event.id === key && (event.type === "terminal" || event.outcome !== "retry_scheduled")
      )
    /** An attempt whose handler never ended, or ran in an instance that was reset. */
    const cut = (call: ChaosCall | undefined) => call === undefined || killed.has(call.instance) || call.ended_at === null

    const checkAttempts = (label: string, calls: ReadonlyArray<ChaosCall>, attempt: number, max: number) => {
      if (attempt > max) violations.push(`${label}: attempt ${attempt} > maxAttempts ${max}`)
      const numbers = calls.map((call) => call.attempt)
      if (new Set(numbers).size !== numbers.length) violations.push(`${label}: an attempt number ran twice: ${numbers}`)
      for (const number of numbers) {
        if (number > attempt || number < 1) violations.push(`${label}: ran attempt ${number}, stored attempt ${attempt}`)
      }
    }

    /** A final failure named `name` at `attempt`: is it what the policy dictates? */
    const checkFailure = (
      label: string,
      behaviour: ChaosBehaviour,
      failTimes: number,
      name: string,
      attempt: number,
      max: number,
      calls: ReadonlyArray<ChaosCall>,
      kind: "operation" | "alarm"
    ) => {
      const last = calls.find((call) => call.attempt === attempt)
      if (name === "DurableAttemptsExhaustedError") {
        // Only when every attempt was used and the last one never settled (a reset cut it).
        if (attempt !== max || !cut(last)) {
          violations.push(`${label}: exhausted at attempt ${attempt}/${max} although its last attempt was not cut short`)
        }
        return
      }
      if (name === "DurableAlarmTimeoutError" || name === "DurableAttemptTimeoutError") {
        // Any attempt may time out (under load a ledger call can be slow), but only one that really
        // ran that long; a timeout is terminal for named alarms (unless retryTimeouts), retried for operations.
        const timeoutMs = CHAOS.policies[behaviour].attemptTimeoutMs
        const took = last === undefined ? 0 : (last.ended_at ?? Number.POSITIVE_INFINITY) - last.started_at
        const retried = kind === "operation" || behaviour === "ignoreAbort"
        if (name !== (kind === "alarm" ? "DurableAlarmTimeoutError" : "DurableAttemptTimeoutError")) {
          violations.push(`${label}: ${name} for a ${kind}`)
        } else if (took < timeoutMs - 5) {
          violations.push(`${label}: ${name} at attempt ${attempt}, which ran ${took} ms (timeout ${timeoutMs} ms)`)
        } else if (retried && attempt !== max) {
          violations.push(`${label}: a retryable timeout was final at attempt ${attempt}/${max}`)
        }
        return
      }
      const expected = failsOnAttempt(behaviour, attempt, failTimes)
      if (expected !== name) {
        violations.push(`${label}: failed with ${name} at attempt ${attempt}; its behaviour fails there with ${expected}`)
        return
      }
      if (name === "TransientError" && attempt !== max) {
        violations.push(`${label}: a retryable failure was final at attempt ${attempt}/${max}`)
      }
      if (last === undefined || last.outcome !== "failed") {
        violations.push(`${label}: failed at attempt ${attempt}, but that attempt did not fail`)
      }
    }

    // Operations.
    const rows = new Map(state.operations.map((row) => [row.id, row]))
    if (rows.size !== OPERATIONS) violations.push(`${rows.size} operation rows for ${OPERATIONS} registrations`)
    for (const spec of specs) {
      const label = `operation ${JSON.stringify(spec.id)} (${spec.behaviour})`
      const row = rows.get(spec.id)
      if (row === undefined) {
        violations.push(`${label}: lost (no row)`)
        continue
      }
      const max = CHAOS.policies[spec.behaviour].maxAttempts
      const calls = callsBy.get(`operation:${spec.id}`) ?? []
      const keyed = effectsByKey.get(spec.id) ?? []
      checkAttempts(label, calls, row.attempt, max)
      if (row.operation !== spec.behaviour) violations.push(`${label}: stored as ${row.operation}`)
      const settles = settlesOf("operation", spec.id)
      if (settles.length > 1) violations.push(`${label}: settled ${settles.length} times`)
      if (keyed.length > 1) violations.push(`${label}: ${keyed.length} ledger effects for one call id`)
      if (row.status === "pending") {
        violations.push(`${label}: still pending at attempt ${row.attempt}`)
      } else if (row.status === "completed") {
        figures.completed++
        const result = (JSON.parse(row.result ?? "null") as { readonly value?: ChaosResult }).value
        const ran = calls.find((call) => call.attempt === row.attempt)
        if (!canSucceed(spec.behaviour)) violations.push(`${label}: completed, but it can never succeed`)
        if (failsOnAttempt(spec.behaviour, row.attempt, spec.failTimes) !== undefined) {
          violations.push(`${label}: completed at attempt ${row.attempt}, where its behaviour fails`)
        }
        if (result?.source !== spec.id || result.attempt !== row.attempt) {
          violations.push(`${label}: result ${row.result} is not that of attempt ${row.attempt}`)
        }
        if (ran === undefined || ran.outcome !== "completed") {
          violations.push(`${label}: completed at attempt ${row.attempt}, whose handler did not complete`)
        }
        if (keyed.length !== 1 || keyed[0]!.seq !== result?.effect) {
          violations.push(`${label}: completed with effect ${result?.effect}, ledger has ${JSON.stringify(keyed)}`)
        }
        if (row.last_error !== null || row.last_error_name !== null) violations.push(`${label}: completed with an error`)
      } else {
        const name = row.last_error_name ?? "Error"
        figures.failed[name] = (figures.failed[name] ?? 0) + 1
        checkFailure(label, spec.behaviour, spec.failTimes, name, row.attempt, max, calls, "operation")
        if (!canSucceed(spec.behaviour) && keyed.length > 0) violations.push(`${label}: failed before any effect, yet has one`)
      }
    }
    for (const row of state.operations) {
      if (!specs.some((spec) => spec.id === row.id)) violations.push(`an unknown operation row ${JSON.stringify(row.id)}`)
    }

    // Named alarms.
    const alarmRows = new Map(state.alarms.map((row) => [row.name, row]))
    for (const { name } of alarms) {
      const label = `named alarm ${name}`
      const behaviour = behaviourOfAlarm(name)
      const max = CHAOS.policies[behaviour].maxAttempts
      const calls = callsBy.get(`alarm:${name}`) ?? []
      const row = alarmRows.get(name)
      const keys = new Set(calls.map((call) => call.dedup_key))
      if (calls.length === 0) {
        violations.push(`${label}: never ran${row === undefined ? " and has no row (lost)" : ""}`)
        continue
      }
      if (keys.size !== 1) violations.push(`${label}: ran with ${keys.size} idempotency keys: ${[...keys].join(", ")}`)
      const key = calls[0]!.dedup_key
      if (!/^durability-alarm:v1:[0-9a-f-]{36}$/.test(key)) violations.push(`${label}: malformed idempotencyKey ${key}`)
      const settles = settlesOf("named_alarm", name)
      if (settles.length > 1) violations.push(`${label}: settled ${settles.length} times`)
      const keyed = effectsByKey.get(key) ?? []
      if (keyed.length > 1) violations.push(`${label}: ${keyed.length} ledger effects for one idempotencyKey`)
      if (row === undefined) {
        // Deleted: succeeded.
        figures.alarmsSucceeded++
        const attempt = Math.max(...calls.map((call) => call.attempt))
        checkAttempts(label, calls, attempt, max)
        if (!canSucceed(behaviour)) violations.push(`${label}: succeeded, but it cannot`)
        // A timed-out attempt is terminal for a named alarm: attempt 2 runs only if a reset cut attempt 1 short.
        if (behaviour === "timeout" && !cut(calls.find((call) => call.attempt === 1))) {
          violations.push(`${label}: succeeded after a timeout, which is terminal`)
        }
        if (!calls.some((call) => call.outcome === "completed")) violations.push(`${label}: deleted without a completed run`)
        if (keyed.length !== 1) violations.push(`${label}: succeeded with ${keyed.length} ledger effects`)
      } else {
        checkAttempts(label, calls, row.attempt, max)
        if (`${IDEMPOTENCY_PREFIX}${row.generation_id}` !== key) {
          violations.push(`${label}: ran with ${key}, but its occurrence is ${row.generation_id}`)
        }
        if (row.status === "pending") {
          violations.push(`${label}: still pending at attempt ${row.attempt}`)
          continue
        }
        const name = row.last_error_name ?? "Error"
        figures.alarmsFailed[name] = (figures.alarmsFailed[name] ?? 0) + 1
        checkFailure(label, behaviour, 1, name, row.attempt, max, calls, "alarm")
        if (!canSucceed(behaviour) && keyed.length > 0) violations.push(`${label}: failed before any effect, yet has one`)
        if (behaviour === "timeout" && keyed.length > 0 && !cut(calls.find((call) => call.attempt === 1))) {
          violations.push(`${label}: has an effect, but its attempt 1 timed out (terminal)`)
        }
      }
    }

    // The ledger: each effect belongs to a known call id or occurrence, applied once.
    const knownKeys = new Set([...specs.map((spec) => spec.id), ...state.calls.map((call) => call.dedup_key)])
    for (const effect of effects) {
      if (effect.key !== null && !knownKeys.has(effect.key)) violations.push(`an effect with an unknown key ${effect.key}`)
    }
    const applied = new Map<string, number>()
    for (const delivery of deliveries) {
      if (delivery.outcome !== "applied" || delivery.key === null) continue
      applied.set(delivery.key, (applied.get(delivery.key) ?? 0) + 1)
    }
    for (const [key, count] of applied) if (count > 1) violations.push(`${key}: applied ${count} times`)

    // Coverage of what the test is meant to exercise.
    if (figures.resets < MIN_RESETS) violations.push(`only ${figures.resets} resets injected (wanted ${MIN_RESETS})`)
    if (figures.attemptsCutByResets === 0) violations.push("no attempt was cut short by a reset")
  } finally {
    figures.elapsedMs = Date.now() - started
    figures.violations = violations.length
    console.log(`eviction chaos: ${JSON.stringify(figures)}`)
    if (violations.length > 0) console.log(`eviction chaos (seed ${seed}) violations:\n${violations.slice(0, 50).join("\n")}`)
  }
  expect(violations, `seed ${seed}`).toEqual([])
})

describe("fencing in workerd", () => {
  const waitFor = async <A>(probe: () => Promise<A>, done: (value: A) => boolean, timeoutMs = 5_000): Promise<A> => {
    const deadline = Date.now() + timeoutMs
    for (let value = await probe();; value = await probe()) {
      if (done(value)) return value
      if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms: ${JSON.stringify(value)}`)
      await sleep(20)
    }
  }

  it("eager start + alarm pass: the timed-out attempt's late completion is refused; its retry settles once", async () => {
    const id = env.CHAOS_OBJECT.newUniqueId()
    const stub = env.CHAOS_OBJECT.get(id)
    const ledger = env.EFFECT_LEDGER.get(env.EFFECT_LEDGER.idFromName(id.toString()))
    await stub.submit([{ behaviour: "ignoreAbort", id: "late", failTimes: 1 }])
    // The platform alarm runs while the eager attempt 1 holds past its timeout.
    expect(await runDurableObjectAlarm(stub)).toBe(true)
    const state = await waitFor(() => stub.state(), (s) => s.operations[0]?.status === "completed" && s.calls.every((c) => c.ended_at !== null))
    expect(state.operations[0]).toMatchObject({ status: "completed", attempt: 2, last_error: null })
    expect((JSON.parse(state.operations[0]!.result!) as { value: ChaosResult }).value).toMatchObject({ attempt: 2 })
    const [first, second] = state.calls
    expect(state.calls.map((call) => [call.attempt, call.outcome])).toEqual([[1, "completed"], [2, "completed"]])
    // Attempt 2 waited for attempt 1 to really end (it ignored its abort).
    expect(second!.started_at).toBeGreaterThanOrEqual(first!.ended_at!)
    expect(first!.ended_at! - first!.started_at).toBeGreaterThanOrEqual(CHAOS.holdMs)
    // The alarm pass ran while attempt 1 held: it attached to it instead of starting another.
    expect(state.deliveries).toHaveLength(1)
    expect(state.deliveries[0]!.at).toBeLessThan(first!.ended_at!)
    expect(state.events.map((event) => [event.type, event.outcome, event.attempt])).toEqual([
      ["attempt_settled", "retry_scheduled", 1],
      ["attempt_settled", "completed", 2]
    ])
    expect((await ledger.deliveries()).map((delivery) => [delivery.attempt, delivery.outcome])).toEqual([
      [1, "applied"],
      [2, "deduplicated"]
    ])
    await waitFor(() => stub.alarmAt(), (at) => at === null)
  })

  it("old generation + replacement: the replaced occurrence's late settle is refused; the replacement runs with its own key", async () => {
    const id = env.CHAOS_OBJECT.newUniqueId()
    const stub = env.CHAOS_OBJECT.get(id)
    const name = "ignoreAbort-00"
    const first = await stub.reschedule(name, await stub.now())
    await waitFor(() => stub.running(), (running) => running === 1)
    // Replaced while attempt 1 of the first occurrence holds (and times out).
    const second = await stub.reschedule(name, await stub.now())
    expect(second).not.toBe(first)
    const state = await waitFor(() => stub.state(), (s) => s.alarms.length === 0 && s.calls.every((c) => c.ended_at !== null))
    expect(state.calls.map((call) => [call.dedup_key, call.attempt])).toEqual([
      [`${IDEMPOTENCY_PREFIX}${first}`, 1],
      [`${IDEMPOTENCY_PREFIX}${second}`, 1],
      [`${IDEMPOTENCY_PREFIX}${second}`, 2]
    ])
    // The first occurrence never settled after its replacement: its timeout (150 ms) is refused
    // unless it came before the replacement (a slow run), and its late success is never stored.
    const stale = state.events.filter((event) => event.generation === first).map((event) => [event.outcome, event.attempt])
    expect([[], [["retry_scheduled", 1]]]).toContainEqual(stale)
    expect(state.events.filter((event) => event.generation === second).map((event) => [event.outcome, event.attempt]))
      .toEqual([["retry_scheduled", 1], ["completed", 2]])
    // Never two handlers of one name at once.
    expect(state.calls[1]!.started_at).toBeGreaterThanOrEqual(state.calls[0]!.ended_at!)
    await waitFor(() => stub.alarmAt(), (at) => at === null)
  })
})
