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
 * Two harness rules keep the audit honest: while an alarm is being delivered,
 * `getAlarm()` reads null, so a null alarm counts as lost only when no delivery
 * (the object records each one's start and end) nor `runDurableObjectAlarm` of
 * the driver is in flight, looked at again once they ended
 * (support/chaos.ts); and `runDurableObjectAlarm` deletes the alarm before
 * calling `alarm()` and never retries, so when a reset cuts one short the alarm
 * is put back, as the platform keeps a failed alarm for its retry.
 *
 * A final phase exercises what the draining above never needs (its kicks and the
 * engine's timers run everything first): the platform itself delivering the
 * alarm after an eviction. Named alarms are scheduled beyond alarmMinDelayMs (no
 * early timer covers them) and the object is reset at once, so no timer survives
 * and nothing calls `runDurableObjectAlarm`: only the platform delivering the
 * stored alarm can run them, each exactly once with its idempotencyKey. Then a
 * platform delivery is cut short by a reset while its handler holds after its
 * effect: the alarm is delivered again by the platform (workerd runs the alarm
 * the engine re-armed before any work, in place of its own backoff retry), and
 * the occurrence completes once, on attempt 2, with one effect.
 *
 * A run reports three things apart (test/shared/Verdict.ts): invariant
 * violations, the only failures called so; harness problems (a call of the
 * driver unanswered through its retries, a premise not reached, a wait of the
 * driver spent while the alarm still covered the work), which fail the run as a
 * "harness" failure; and the figures, printed. The premises are part of the
 * scenario, not a race with the clock: every registration is sent whatever the
 * time, the rounds go on until at least MIN_RESETS resets were done, and when
 * no reset happened to cut an attempt, the driver resets while one runs.
 *
 * The seed is printed with the figures; a failure message starts with it.
 * Set CHAOS_SEED below to replay one.
 *
 * A second test races two executions of one key in workerd (fencing).
 */
import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { describe, expect, it } from "vitest"
import * as Verdict from "../shared/Verdict.js"
import { alarmCoverage, DRIVER_CALL, patiently } from "./support/chaos.js"
import { sleep, WAIT_MS } from "./support/lab.js"
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
  type ChaosProbe,
  type ChaosResult,
  PLATFORM_ALARMS
} from "./objects/ChaosObject.js"
import { prng } from "../shared/prng.js"

/** Replay a failing run by putting its seed here. */
const CHAOS_SEED: number | undefined = undefined

const OPERATIONS = 322
const BATCH = 23
/** Resets injected at most, and at least: the rounds go on until MIN_RESETS were done, however slow the machine. */
const RESETS = 40
const MIN_RESETS = 15
/** Resets the driver makes while it sees an attempt running, when none of the rounds' resets cut one. */
const CUT_TRIES = 8
/** Named alarms are due within this long after the start. */
const ALARM_SPREAD_MS = 8_000
/**
 * Once every registration is sent, more rounds (and resets) while the work drains, for this long
 * from the start at most; the MIN_RESETS are done whatever the time.
 */
const CHAOS_MS = 15_000
/**
 * The drain after the rounds, bounded: what is left then is due within seconds (retries and named
 * alarms spread over ALARM_SPREAD_MS), a few seconds on a quiet machine. Spent while the alarm still
 * covers the work, it is a harness problem; work the alarm does not cover is a violation whatever the
 * time. A run takes 10–20 s (more when the machine is loaded); the platform phase comes after it
 * (about 5 s, capped at PLATFORM_BUDGET_MS). CHAOS_MS, the CUT_TRIES, this and the platform phase stay
 * inside the test's 75 s, so the verdict, not vitest's timeout, ends a slow run.
 */
const DRAIN_MS = 20_000
const IDEMPOTENCY_PREFIX = "durability-alarm:v1:"
/** The platform phase: its alarms are due this long after they are scheduled (beyond alarmMinDelayMs). */
const PLATFORM_DUE_MS = 1_500
/** The platform phase: each wait is bounded by this, and the whole phase by PLATFORM_BUDGET_MS. */
const PLATFORM_WAIT_MS = 10_000
const PLATFORM_BUDGET_MS = 20_000
/** How often the platform phase polls the object (to cut a delivery short while its handler holds). */
const PLATFORM_POLL_MS = 10


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
  const chaosBy = started + CHAOS_MS

  const id = env.CHAOS_OBJECT.newUniqueId()
  let stub: DurableObjectStub<ChaosObject> = env.CHAOS_OBJECT.get(id)
  const ledger: DurableObjectStub<EffectLedger> = env.EFFECT_LEDGER.get(env.EFFECT_LEDGER.idFromName(id.toString()))

  const verdict = Verdict.make()
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
    platformAlarmRetries: 0,
    platform: {
      deliveries: 0,
      alarmsRun: 0,
      deliveriesCut: 0,
      slowAlarmsNotCut: 0,
      redeliveries: [] as Array<{ readonly afterMs: number; readonly info: unknown }>,
      elapsedMs: 0
    },
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
    violations: 0,
    harnessProblems: 0
  }

  /** Forces a reset of the object at this moment: memory, timers and running handlers are gone. */
  const reset = async () => {
    let victim: string | undefined
    await runInDurableObject(stub, (instance: ChaosObject, state) => {
      victim = instance.instance
      state.abort("reset by the chaos test")
    }).then(
      () => verdict.harness("reset: state.abort() did not throw, the object was not reset"),
      () => undefined
    )
    if (victim !== undefined) killed.add(victim)
    stub = env.CHAOS_OBJECT.get(id)
    figures.resets++
  }

  /** The lost-wake-up invariant on the stored state: pending work is covered by the platform alarm. */
  const audit = async (when: string) => {
    let first = true
    const coverage = await alarmCoverage({
      look: async () => {
        let seen: ChaosAudit
        try {
          seen = await stub.audit()
        } catch {
          return undefined // reset under us: nothing to read
        }
        if (first) figures.audits++
        else figures.auditsDuringAlarmDelivery++
        first = false
        const latest = seen.pending === 0 || seen.earliest === null ? null : Math.max(seen.earliest, seen.now + CHAOS.alarmMinDelayMs)
        return { now: seen.now, instance: seen.instance, alarm: seen.alarm, latest }
      },
      deliveries: (since) => stub.deliveriesAround(since),
      kicks: { inFlight: kicks, begun: () => figures.runAlarmCalls }
    })
    if (coverage._tag === "violation") verdict.violation(`${when}: pending row(s) without a wake-up: ${coverage.message}`)
    if (coverage._tag === "harness") verdict.harness(`${when}: ${coverage.message}`)
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

  /**
   * Sends until it goes through (DRIVER_CALL); false, and a harness problem, when the driver's
   * patience ran out. A reset cut the RPC: the object may have committed part of the batch; both
   * calls are idempotent, so sending the batch again is safe.
   */
  const retried = async (label: string, send: () => Promise<unknown>): Promise<boolean> => {
    const answer = await patiently(label, DRIVER_CALL, send, () => {
      figures.resubmitted++
      stub = env.CHAOS_OBJECT.get(id)
    })
    if (!answer.ok) verdict.harness(answer.problem)
    return answer.ok
  }

  /**
   * Polls the platform phase's alarms until `done` (bounded). On a timeout, the audit finds a
   * violation if the alarm does not cover the work; with the alarm there, the platform not
   * delivering within the wait is the driver's problem.
   */
  const probeUntil = async (
    names: ReadonlyArray<string>,
    since: number,
    done: (seen: ChaosProbe) => boolean,
    label: string,
    until: number
  ): Promise<ChaosProbe | undefined> => {
    const limit = Math.min(Date.now() + PLATFORM_WAIT_MS, until)
    for (;;) {
      const seen = await stub.probe(names, since).catch(() => undefined)
      if (seen !== undefined && done(seen)) return seen
      if (Date.now() > limit) {
        await audit(`platform phase, ${label}`)
        verdict.harness(`platform phase, ${label}: not reached within the driver's wait: ${JSON.stringify(seen)}`)
        return undefined
      }
      await sleep(PLATFORM_POLL_MS)
    }
  }

  /** Every occurrence settled, every handler call of a live instance ended, and no alarm left. */
  const settled = (seen: ChaosProbe) =>
    seen.alarms.length === 0 && seen.alarm === null &&
    seen.calls.every((call) => call.ended_at !== null || killed.has(call.instance))

  const settlesIn = (seen: ChaosProbe, name: string) =>
    seen.events.filter((event) =>
      event.id === name && (event.type === "terminal" || event.outcome !== "retry_scheduled")
    )

  /**
   * The platform delivering the alarm after an eviction, then a platform delivery cut short by
   * a reset. Nothing here calls `runDurableObjectAlarm`, and every scheduling is followed by a
   * reset, so no in-memory timer survives: the platform's delivery is the only way the work runs.
   */
  const platformPhase = async () => {
    const phaseStarted = Date.now()
    const until = phaseStarted + PLATFORM_BUDGET_MS
    const phase = figures.platform
    const deliveredBy = (seen: ChaosProbe, label: string) => {
      if (seen.deliveries.some((delivery) => delivery.info === "null")) {
        verdict.harness(`platform phase, ${label}: the driver's runDurableObjectAlarm ran during the phase`)
      }
      return seen.deliveries.filter((delivery) => delivery.info !== "null")
    }

    // 1. Alarms due after an eviction: the platform delivers the stored alarm.
    {
      const names = PLATFORM_ALARMS.ok
      const since = await stub.now()
      const due = since + PLATFORM_DUE_MS
      const keys = new Map<string, string>()
      for (const name of names) keys.set(name, `${IDEMPOTENCY_PREFIX}${await stub.reschedule(name, due)}`)
      const armed = await stub.alarmAt()
      if (armed === null || armed < due) verdict.violation(`platform phase: alarm ${armed} for alarms due at ${due}`)
      await reset()
      const seen = await probeUntil(names, since, settled, "alarms due after an eviction", until)
      if (seen !== undefined) {
        const delivered = deliveredBy(seen, "alarms due after an eviction")
        if (delivered.length === 0) verdict.violation("platform phase: the alarms ran without a platform delivery")
        phase.deliveries += delivered.length
        const ledgerDeliveries = await ledger.deliveriesOf([...keys.values()])
        for (const name of names) {
          const label = `platform phase, named alarm ${name}`
          const key = keys.get(name)!
          const calls = seen.calls.filter((call) => call.source === name)
          const [call] = calls
          if (calls.length !== 1 || call === undefined) {
            verdict.violation(`${label}: ran ${calls.length} times: ${JSON.stringify(calls)}`)
            continue
          }
          phase.alarmsRun++
          if (call.attempt !== 1 || call.outcome !== "completed" || call.dedup_key !== key) {
            verdict.violation(`${label}: ran ${JSON.stringify(call)}, expected attempt 1 completed with ${key}`)
          }
          if (call.from_alarm !== 1 || !delivered.some((delivery) => delivery.instance === call.instance)) {
            verdict.violation(`${label}: not run by a platform delivery: ${JSON.stringify({ call, delivered })}`)
          }
          if (killed.has(call.instance)) verdict.violation(`${label}: ran in the instance that was reset`)
          if (call.started_at < due) verdict.violation(`${label}: ran at ${call.started_at}, before its due time ${due}`)
          const settles = settlesIn(seen, name)
          if (settles.length !== 1 || settles[0]!.outcome !== "completed" || `${IDEMPOTENCY_PREFIX}${settles[0]!.generation}` !== key) {
            verdict.violation(`${label}: settled ${JSON.stringify(settles)}`)
          }
          const effects = ledgerDeliveries.filter((delivery) => delivery.key === key)
          if (effects.length !== 1 || effects[0]!.outcome !== "applied" || effects[0]!.attempt !== 1) {
            verdict.violation(`${label}: ledger deliveries ${JSON.stringify(effects)}`)
          }
        }
      }
    }

    // 2. A platform delivery cut short by a reset while the handler holds after its effect: the
    // alarm is delivered again, and the occurrence completes once, on attempt 2, with one effect.
    // (Should the handler end before the cut, which takes a stall of slowHoldMs, the next name tries again.)
    for (const name of PLATFORM_ALARMS.slow) {
      if (phase.deliveriesCut > 0 || Date.now() > until) break
      const label = `platform phase, named alarm ${name}`
      const since = await stub.now()
      const due = since + PLATFORM_DUE_MS
      const key = `${IDEMPOTENCY_PREFIX}${await stub.reschedule(name, due)}`
      await reset()
      const started = await probeUntil([name], since, (seen) => seen.calls.length > 0, `${name} started`, until)
      if (started === undefined) break
      let atCut: ChaosProbe | undefined
      for (;;) {
        const [seen, effects] = await Promise.all([
          stub.probe([name], since).catch(() => undefined),
          ledger.deliveriesOf([key])
        ])
        // Too late once the handler ended; cut as soon as its effect is applied.
        if (seen?.calls.some((call) => call.ended_at !== null)) break
        if (seen !== undefined && effects.length > 0) {
          atCut = seen
          await reset()
          break
        }
        if (Date.now() > until) break
        await sleep(PLATFORM_POLL_MS)
      }
      const seen = await probeUntil([name], since, settled, `${name} settled`, until)
      if (seen === undefined) break
      const delivered = deliveredBy(seen, name)
      phase.deliveries += delivered.length
      const calls = seen.calls
      const effects = await ledger.deliveriesOf([key])
      const settles = settlesIn(seen, name)
      const settledOnce = (attempt: number) =>
        settles.length === 1 && settles[0]!.outcome === "completed" && settles[0]!.attempt === attempt &&
        `${IDEMPOTENCY_PREFIX}${settles[0]!.generation}` === key
      if (calls.some((call) => call.dedup_key !== key)) verdict.violation(`${label}: ran with another key: ${JSON.stringify(calls)}`)
      if (calls.some((call) => call.from_alarm !== 1)) verdict.violation(`${label}: not run by a platform delivery: ${JSON.stringify(calls)}`)
      if (calls.some((call) => call.started_at < due)) verdict.violation(`${label}: ran before its due time ${due}`)
      const first = calls[0]
      if (atCut === undefined || (first !== undefined && first.ended_at !== null)) {
        // Not cut short (the handler ended first): it ran once.
        phase.slowAlarmsNotCut++
        phase.alarmsRun++
        if (calls.length !== 1 || first?.outcome !== "completed") verdict.violation(`${label}: ran ${JSON.stringify(calls)}`)
        if (!settledOnce(1)) verdict.violation(`${label}: settled ${JSON.stringify(settles)}`)
        if (effects.map((delivery) => delivery.outcome).join() !== "applied") {
          verdict.violation(`${label}: ledger deliveries ${JSON.stringify(effects)}`)
        }
        continue
      }
      phase.deliveriesCut++
      phase.alarmsRun++
      // The delivery that was cut short, and those after it.
      const cutDelivery = atCut.deliveries.filter((delivery) => delivery.info !== "null").at(-1)
      const redelivered = delivered.filter((delivery) => delivery.seq > (cutDelivery?.seq ?? Number.POSITIVE_INFINITY))
      for (const delivery of redelivered) {
        phase.redeliveries.push({ afterMs: delivery.at - (cutDelivery?.at ?? 0), info: JSON.parse(delivery.info) as unknown })
      }
      const [cut, retry] = calls
      if (calls.length !== 2 || cut === undefined || retry === undefined) {
        verdict.violation(`${label}: expected attempt 1 cut short and attempt 2 completed, ran ${JSON.stringify(calls)}`)
        continue
      }
      if (cut.attempt !== 1 || cut.ended_at !== null || !killed.has(cut.instance) || cut.instance !== cutDelivery?.instance) {
        verdict.violation(`${label}: attempt 1 was not cut short in the delivery that was reset: ${JSON.stringify({ cut, cutDelivery })}`)
      }
      if (retry.attempt !== 2 || retry.outcome !== "completed" || killed.has(retry.instance)) {
        verdict.violation(`${label}: after the cut, ran ${JSON.stringify(retry)}`)
      }
      if (redelivered.length === 0) {
        verdict.violation(`${label}: completed after the cut without another platform delivery`)
      } else if (!redelivered.some((delivery) => delivery.instance === retry.instance && delivery.at <= retry.started_at)) {
        verdict.violation(`${label}: attempt 2 was not run by a platform delivery after the cut: ${JSON.stringify({ retry, redelivered })}`)
      }
      if (!settledOnce(2)) verdict.violation(`${label}: settled ${JSON.stringify(settles)}`)
      // The effect of attempt 1 is the one: attempt 2's delivery is deduplicated.
      if (JSON.stringify(effects.map((delivery) => [delivery.attempt, delivery.outcome])) !== JSON.stringify([[1, "applied"], [2, "deduplicated"]])) {
        verdict.violation(`${label}: ledger deliveries ${JSON.stringify(effects)}`)
      }
    }
    if (phase.deliveriesCut === 0) verdict.harness("platform phase: premise not reached: no platform delivery was cut short by a reset")
    phase.elapsedMs = Date.now() - phaseStarted
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

    // What the object answered: only that can be lost (what the driver gave up on may never have landed).
    const registered = new Set<string>()
    const scheduled = new Set<string>()
    // Registration and draining overlap; resets land in registrations, alarm passes and handlers.
    // Every batch is sent, however long it takes; then rounds go on while the work drains, until at
    // least MIN_RESETS were done.
    let submitted = 0
    for (let step = 0; ; step++) {
      const batch = batches[submitted]
      if (batch === undefined && figures.resets >= MIN_RESETS) {
        if (figures.resets >= RESETS || Date.now() > chaosBy) break
        const { pending } = await stub.audit().catch(() => ({ pending: 1 }))
        if (pending === 0) break
      }
      // One RPC per registration, as separate requests would: a reset can land between any two.
      const sending = batch === undefined ? Promise.resolve() : Promise.all([
        ...batch.operations.map(async (spec) => {
          if (await retried(`register ${spec.id}`, () => stub.submit([spec]))) registered.add(spec.id)
        }),
        (async () => {
          if (batch.alarms.length === 0) return
          if (await retried(`alarms batch ${submitted}`, () => stub.scheduleOnce(batch.alarms))) {
            for (const { name } of batch.alarms) scheduled.add(name)
          }
        })()
      ])
      const roll = random()
      // Past the registrations, a round short of the least resets always resets.
      if (roll < 0.55 || (batch === undefined && figures.resets < MIN_RESETS)) {
        await maybeReset(batch === undefined ? "drain" : "registration")
      } else if (roll < 0.8) await Promise.race([kick(), sleep(10 + Math.floor(random() * 50))])
      else await sleep(20 + Math.floor(random() * 100))
      await sending
      if (batch !== undefined) submitted++
      if (random() < 0.25) await audit(`step ${step}`)
    }
    // A premise: an attempt cut short by a reset. When no reset of the rounds landed in one, the
    // driver resets while it sees one running (started by the alarm it runs now).
    // (A count it cannot read is taken as some: the premise check at the end reads the stored calls.)
    const noneCut = async () => (await stub.callsCut().catch(() => 1)) === 0
    for (let tries = 0; tries < CUT_TRIES && (await noneCut()); tries++) {
      void kick()
      for (let poll = 0; poll < 40 && ((await stub.running().catch(() => 0)) === 0); poll++) await sleep(10)
      const cut = [...kicks]
      await reset()
      await Promise.all(cut)
      await audit(`after reset #${figures.resets}, made to cut an attempt`)
    }
    if (await retried("every named alarm", () => stub.scheduleOnce(alarms))) for (const { name } of alarms) scheduled.add(name)
    await Promise.all([...kicks])

    // Settle: no more resets; wait (bounded) for the last handlers and the alarm to go.
    let drained = false
    for (const drainBy = Date.now() + DRAIN_MS;;) {
      const [seen, running] = await Promise.all([stub.audit(), stub.running()]).catch(() => [undefined, undefined] as const)
      if (seen !== undefined && running !== undefined && seen.pending === 0 && running === 0 && seen.alarm === null) {
        drained = true
        break
      }
      if (Date.now() > drainBy) {
        // Work the alarm does not cover is a violation (the audit says so); work it covers, not done
        // within the drain's budget, is the driver's problem.
        await audit("when the drain's budget ran out")
        verdict.harness(`not drained within the driver's ${DRAIN_MS} ms: ${JSON.stringify({ ...seen, running })}`)
        break
      }
      if (seen === undefined || seen.pending > 0) await Promise.race([kick(), sleep(500)])
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
        verdict.violation(`an unkeyed effect from ${effect.source}`)
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
      if (attempt > max) verdict.violation(`${label}: attempt ${attempt} > maxAttempts ${max}`)
      const numbers = calls.map((call) => call.attempt)
      if (new Set(numbers).size !== numbers.length) verdict.violation(`${label}: an attempt number ran twice: ${numbers}`)
      for (const number of numbers) {
        if (number > attempt || number < 1) verdict.violation(`${label}: ran attempt ${number}, stored attempt ${attempt}`)
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
          verdict.violation(`${label}: exhausted at attempt ${attempt}/${max} although its last attempt was not cut short`)
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
          verdict.violation(`${label}: ${name} for a ${kind}`)
        } else if (took < timeoutMs - 5) {
          verdict.violation(`${label}: ${name} at attempt ${attempt}, which ran ${took} ms (timeout ${timeoutMs} ms)`)
        } else if (retried && attempt !== max) {
          verdict.violation(`${label}: a retryable timeout was final at attempt ${attempt}/${max}`)
        }
        return
      }
      const expected = failsOnAttempt(behaviour, attempt, failTimes)
      if (expected !== name) {
        verdict.violation(`${label}: failed with ${name} at attempt ${attempt}; its behaviour fails there with ${expected}`)
        return
      }
      if (name === "TransientError" && attempt !== max) {
        verdict.violation(`${label}: a retryable failure was final at attempt ${attempt}/${max}`)
      }
      if (last === undefined || last.outcome !== "failed") {
        verdict.violation(`${label}: failed at attempt ${attempt}, but that attempt did not fail`)
      }
    }

    // Operations.
    const rows = new Map(state.operations.map((row) => [row.id, row]))
    if (rows.size > OPERATIONS || (registered.size === OPERATIONS && rows.size !== OPERATIONS)) {
      verdict.violation(`${rows.size} operation rows for ${OPERATIONS} registrations`)
    }
    for (const spec of specs) {
      const label = `operation ${JSON.stringify(spec.id)} (${spec.behaviour})`
      const row = rows.get(spec.id)
      if (row === undefined) {
        // A registration the driver gave up on (a harness problem already) may never have landed.
        if (registered.has(spec.id)) verdict.violation(`${label}: lost (no row)`)
        continue
      }
      const max = CHAOS.policies[spec.behaviour].maxAttempts
      const calls = callsBy.get(`operation:${spec.id}`) ?? []
      const keyed = effectsByKey.get(spec.id) ?? []
      checkAttempts(label, calls, row.attempt, max)
      if (row.operation !== spec.behaviour) verdict.violation(`${label}: stored as ${row.operation}`)
      const settles = settlesOf("operation", spec.id)
      if (settles.length > 1) verdict.violation(`${label}: settled ${settles.length} times`)
      if (keyed.length > 1) verdict.violation(`${label}: ${keyed.length} ledger effects for one call id`)
      if (row.status === "pending") {
        // Not drained: the drain's harness problem (and the audit, should the alarm not cover it) says so.
        if (drained) verdict.violation(`${label}: still pending at attempt ${row.attempt}`)
      } else if (row.status === "completed") {
        figures.completed++
        const result = (JSON.parse(row.result ?? "null") as { readonly value?: ChaosResult }).value
        const ran = calls.find((call) => call.attempt === row.attempt)
        if (!canSucceed(spec.behaviour)) verdict.violation(`${label}: completed, but it can never succeed`)
        if (failsOnAttempt(spec.behaviour, row.attempt, spec.failTimes) !== undefined) {
          verdict.violation(`${label}: completed at attempt ${row.attempt}, where its behaviour fails`)
        }
        if (result?.source !== spec.id || result.attempt !== row.attempt) {
          verdict.violation(`${label}: result ${row.result} is not that of attempt ${row.attempt}`)
        }
        if (ran === undefined || ran.outcome !== "completed") {
          verdict.violation(`${label}: completed at attempt ${row.attempt}, whose handler did not complete`)
        }
        if (keyed.length !== 1 || keyed[0]!.seq !== result?.effect) {
          verdict.violation(`${label}: completed with effect ${result?.effect}, ledger has ${JSON.stringify(keyed)}`)
        }
        if (row.last_error !== null || row.last_error_name !== null) verdict.violation(`${label}: completed with an error`)
      } else {
        const name = row.last_error_name ?? "Error"
        figures.failed[name] = (figures.failed[name] ?? 0) + 1
        checkFailure(label, spec.behaviour, spec.failTimes, name, row.attempt, max, calls, "operation")
        if (!canSucceed(spec.behaviour) && keyed.length > 0) verdict.violation(`${label}: failed before any effect, yet has one`)
      }
    }
    for (const row of state.operations) {
      if (!specs.some((spec) => spec.id === row.id)) verdict.violation(`an unknown operation row ${JSON.stringify(row.id)}`)
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
        // Never scheduled (the driver gave up on it), or still due when the drain's budget ran out: harness problems already.
        if (scheduled.has(name) && (drained || row === undefined)) {
          verdict.violation(`${label}: never ran${row === undefined ? " and has no row (lost)" : ""}`)
        }
        continue
      }
      if (keys.size !== 1) verdict.violation(`${label}: ran with ${keys.size} idempotency keys: ${[...keys].join(", ")}`)
      const key = calls[0]!.dedup_key
      if (!/^durability-alarm:v1:[0-9a-f-]{36}$/.test(key)) verdict.violation(`${label}: malformed idempotencyKey ${key}`)
      const settles = settlesOf("named_alarm", name)
      if (settles.length > 1) verdict.violation(`${label}: settled ${settles.length} times`)
      const keyed = effectsByKey.get(key) ?? []
      if (keyed.length > 1) verdict.violation(`${label}: ${keyed.length} ledger effects for one idempotencyKey`)
      if (row === undefined) {
        // Deleted: succeeded.
        figures.alarmsSucceeded++
        const attempt = Math.max(...calls.map((call) => call.attempt))
        checkAttempts(label, calls, attempt, max)
        if (!canSucceed(behaviour)) verdict.violation(`${label}: succeeded, but it cannot`)
        // A timed-out attempt is terminal for a named alarm: attempt 2 runs only if a reset cut attempt 1 short.
        if (behaviour === "timeout" && !cut(calls.find((call) => call.attempt === 1))) {
          verdict.violation(`${label}: succeeded after a timeout, which is terminal`)
        }
        if (!calls.some((call) => call.outcome === "completed")) verdict.violation(`${label}: deleted without a completed run`)
        if (keyed.length !== 1) verdict.violation(`${label}: succeeded with ${keyed.length} ledger effects`)
      } else {
        checkAttempts(label, calls, row.attempt, max)
        if (`${IDEMPOTENCY_PREFIX}${row.generation_id}` !== key) {
          verdict.violation(`${label}: ran with ${key}, but its occurrence is ${row.generation_id}`)
        }
        if (row.status === "pending") {
          if (drained) verdict.violation(`${label}: still pending at attempt ${row.attempt}`)
          continue
        }
        const name = row.last_error_name ?? "Error"
        figures.alarmsFailed[name] = (figures.alarmsFailed[name] ?? 0) + 1
        checkFailure(label, behaviour, 1, name, row.attempt, max, calls, "alarm")
        if (!canSucceed(behaviour) && keyed.length > 0) verdict.violation(`${label}: failed before any effect, yet has one`)
        if (behaviour === "timeout" && keyed.length > 0 && !cut(calls.find((call) => call.attempt === 1))) {
          verdict.violation(`${label}: has an effect, but its attempt 1 timed out (terminal)`)
        }
      }
    }

    // The ledger: each effect belongs to a known call id or occurrence, applied once.
    const knownKeys = new Set([...specs.map((spec) => spec.id), ...state.calls.map((call) => call.dedup_key)])
    for (const effect of effects) {
      if (effect.key !== null && !knownKeys.has(effect.key)) verdict.violation(`an effect with an unknown key ${effect.key}`)
    }
    const applied = new Map<string, number>()
    for (const delivery of deliveries) {
      if (delivery.outcome !== "applied" || delivery.key === null) continue
      applied.set(delivery.key, (applied.get(delivery.key) ?? 0) + 1)
    }
    for (const [key, count] of applied) if (count > 1) verdict.violation(`${key}: applied ${count} times`)

    // The premises of what the run is meant to exercise: unmet, the run proves less (a harness problem).
    if (figures.resets < MIN_RESETS) verdict.harness(`premise not reached: only ${figures.resets} resets injected (wanted ${MIN_RESETS})`)
    if (figures.attemptsCutByResets === 0) verdict.harness("premise not reached: no attempt was cut short by a reset")

    // The platform's own delivery, after the checks above (its resets and calls are not theirs). It
    // needs the object idle: not drained, the drain's harness problem stands for it.
    await Promise.all([...kicks])
    if (drained) await platformPhase()

    // The figures, over the whole run.
    const final = await stub.state()
    const platformDeliveries = final.deliveries.filter((delivery) => delivery.info !== "null")
    figures.platformAlarmDeliveries = platformDeliveries.length
    figures.platformAlarmRetries = platformDeliveries.filter((delivery) =>
      (JSON.parse(delivery.info) as { readonly isRetry?: boolean }).isRetry === true
    ).length
    figures.attemptsRun = final.calls.length
    figures.attemptsCutByResets = final.calls.filter((call) => call.ended_at === null).length
    figures.ledgerEffects = (await ledger.effects()).length
    figures.deduplicatedDeliveries = (await ledger.deliveries()).filter((delivery) => delivery.outcome === "deduplicated").length
  } finally {
    figures.elapsedMs = Date.now() - started
    figures.violations = verdict.violations.length
    figures.harnessProblems = verdict.harnessProblems.length
    console.log(`eviction chaos: ${JSON.stringify(figures)}`)
  }
  Verdict.settle(`eviction chaos (seed ${seed})`, verdict, 50)
})

describe("fencing in workerd", () => {
  const waitFor = async <A>(probe: () => Promise<A>, done: (value: A) => boolean, timeoutMs = WAIT_MS): Promise<A> => {
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
