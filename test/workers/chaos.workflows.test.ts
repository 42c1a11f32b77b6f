/**
 * Eviction chaos for durable workflows inside workerd: real SQLite storage, real alarms, real timers.
 *
 * A `WorkflowsObject` (objects/WorkflowsObject.ts, public promise API) gets many instances of `mixed`:
 * step "s1" (failing on its first attempt for some: a durable retry delay), a sleep of 50–700 ms, step
 * "s2", 0–2 waits for an event of type "go", for some a child (`kid`: a step and a sleep), and step
 * "hold", which holds 60 ms of real time. The driver creates them in batches and sends each instance's
 * events at random rounds (some right after the create, before its wait is reached); a seeded PRNG
 * resets the object (`state.abort()`) at random moments, some while an event is being sent, and runs
 * the alarm itself at others (`runDurableObjectAlarm`). Each reset is counted by what the instances
 * were doing just before (a step running, between steps, sleeping, waiting for an event or a child)
 * and followed by an audit: whatever is due (a record to run, a workflow's durable timer) is covered by
 * the platform alarm, and no instance waiting on time lacks its timer.
 *
 * At the end, from the object's tables (instances, steps, events, its own log of step effects): every
 * instance (and child) complete with exactly the output its params imply; its steps at the expected
 * positions, all completed, one row per position; each step's callback ran once per attempt (no
 * attempt number twice), its stored result is the effect of its last attempt and nothing ran after it;
 * every event consumed exactly once, by the wait at its position, in the order sent; no sleep ended
 * before its wake time by the object's clock (the sleep's end and every run of the step after it); no
 * run past its attempts. Then the object is idle: no instance unfinished, no timer, no alarm.
 *
 * Findings are violations (the engine) or harness problems (the driver), as test/shared/Verdict.ts;
 * the figures are printed with the seed. Set CHAOS_SEED (or VITE_DURABILITY_WORKFLOWS_CHAOS_SEED) to replay the
 * PRNG's choices (workerd timing is real: the same plan, not the same interleaving).
 */
import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { it } from "vitest"
import * as Json from "../../src/shared/json.js"
import * as Verdict from "../shared/Verdict.js"
import {
  type MixedParams,
  type StepResult,
  type WfAudit,
  WF,
  type WorkflowsObject
} from "./objects/WorkflowsObject.js"
import { alarmCoverage, DRIVER_CALL, patiently } from "./support/chaos.js"
import { sleep } from "./support/lab.js"
import { prng } from "../shared/prng.js"

/** Replay a failing run by putting its seed here, or with `VITE_DURABILITY_WORKFLOWS_CHAOS_SEED=<seed>`. */
const CHAOS_SEED: number | undefined = undefined

/** The seed from the environment: the pool passes only `VITE_` variables into workerd (`import.meta.env`). */
const seedFromEnv = (): number | undefined => {
  const values = (import.meta as { readonly env?: Record<string, string | undefined> }).env ?? {}
  const value = values["VITE_DURABILITY_WORKFLOWS_CHAOS_SEED"] ?? ""
  if (value === "") return undefined
  const seed = Number(value)
  if (!Number.isSafeInteger(seed)) throw new Error(`VITE_DURABILITY_WORKFLOWS_CHAOS_SEED must be an integer, got ${value}`)
  return seed >>> 0
}

const INSTANCES = 60
const BATCH = 5
const RESETS = 30
const MIN_RESETS = 12
/** Rounds (and resets) go on after every create and event was sent, for this long from the start at most. */
const CHAOS_MS = 15_000
/** The drain after the rounds: what is left is due within a few seconds (sleeps under 1 s, the alarm's 1 s delay). */
const DRAIN_MS = 20_000


interface Planned {
  readonly id: string
  readonly params: MixedParams
  /** The round from which each of its events (n = 1, 2, …) may be sent, relative to its create's round. */
  readonly eventDelays: ReadonlyArray<number>
}

interface Output {
  readonly s1: StepResult
  readonly s2: StepResult
  readonly events: ReadonlyArray<{ readonly n: number }>
  readonly kid: string | null
  readonly s3: StepResult
}

it("eviction chaos: workflows sleep, wait, retry and run children through random resets, nothing lost or doubled", {
  timeout: 90_000
}, async () => {
  const seed = CHAOS_SEED ?? seedFromEnv() ?? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) >>> 0
  const random = prng(seed)
  const started = Date.now()
  const chaosBy = started + CHAOS_MS

  const objectId = env.WORKFLOWS_OBJECT.newUniqueId()
  let stub: DurableObjectStub<WorkflowsObject> = env.WORKFLOWS_OBJECT.get(objectId)
  const verdict = Verdict.make()
  const killed = new Set<string>()
  const figures = {
    seed,
    instances: INSTANCES,
    children: 0,
    events: 0,
    eventsBeforeTheirWait: 0,
    resets: 0,
    resetsWhile: { stepRunning: 0, betweenSteps: 0, sleeping: 0, waitingEvent: 0, waitingChild: 0, eventInFlight: 0, createInFlight: 0 },
    runAlarmCalls: 0,
    alarmRetriesEmulated: 0,
    audits: 0,
    resubmitted: 0,
    stepEffects: 0,
    quietAfterReset: 0,
    stepAttemptsCutByResets: 0,
    retriedSteps: 0,
    platformAlarmDeliveries: 0,
    elapsedMs: 0,
    violations: 0,
    harnessProblems: 0
  }

  const reset = async () => {
    let victim: string | undefined
    await runInDurableObject(stub, (instance: WorkflowsObject, state) => {
      victim = instance.instance
      state.abort("reset by the workflows chaos test")
    }).then(
      () => verdict.harness("reset: state.abort() did not throw, the object was not reset"),
      () => undefined
    )
    if (victim !== undefined) killed.add(victim)
    stub = env.WORKFLOWS_OBJECT.get(objectId)
    figures.resets++
  }

  const kicks = new Set<Promise<void>>()
  /** Runs the alarm now (not awaited: resets land in it); a run cut by a reset gets its alarm back, as on the platform. */
  const kick = () => {
    figures.runAlarmCalls++
    const target = stub
    const running: Promise<void> = target.alarmAt().then(async (at) => {
      try {
        await runDurableObjectAlarm(target)
      } catch {
        if (at === null) return
        const restored = await env.WORKFLOWS_OBJECT.get(objectId).restoreAlarm(at).catch(() => false)
        if (restored) figures.alarmRetriesEmulated++
      }
    }, () => undefined).finally(() => kicks.delete(running))
    kicks.add(running)
    return running
  }

  const audit = async (when: string) => {
    let first = true
    const coverage = await alarmCoverage({
      look: async () => {
        let seen: WfAudit
        try {
          seen = await stub.audit()
        } catch {
          return undefined
        }
        if (first) {
          first = false
          figures.audits++
          for (const key of seen.sleepersWithoutTimer) verdict.violation(`${when}: ${key} waits on time without a durable timer`)
        }
        const latest = seen.pending === 0 || seen.earliest === null ? null : Math.max(seen.earliest, seen.now + WF.alarmMinDelayMs)
        return { now: seen.now, instance: seen.instance, alarm: seen.alarm, latest }
      },
      deliveries: (since) => stub.deliveriesAround(since),
      kicks: { inFlight: kicks, begun: () => figures.runAlarmCalls }
    })
    if (coverage._tag === "violation") verdict.violation(`${when}: due work without a wake-up: ${coverage.message}`)
    if (coverage._tag === "harness") verdict.harness(`${when}: ${coverage.message}`)
  }

  const retried = async <A>(label: string, send: () => Promise<A>): Promise<A | undefined> => {
    const answer = await patiently(label, DRIVER_CALL, send, () => {
      figures.resubmitted++
      stub = env.WORKFLOWS_OBJECT.get(objectId)
    })
    if (answer.ok) return answer.value
    verdict.harness(answer.problem)
    return undefined
  }

  /** Resets now, counting what the instances were doing just before; `inFlight` names a call sent meanwhile. */
  const resetCounted = async (inFlight: Array<Promise<unknown>>, kinds: ReadonlyArray<"eventInFlight" | "createInFlight">) => {
    const phases = await stub.phases().catch(() => undefined)
    if (phases !== undefined) {
      for (const name of ["stepRunning", "betweenSteps", "sleeping", "waitingEvent", "waitingChild"] as const) {
        if (phases[name] > 0) figures.resetsWhile[name]++
      }
    }
    if (inFlight.length > 0) for (const kind of kinds) figures.resetsWhile[kind]++
    if (random() < 0.4) void kick()
    await sleep(Math.floor(random() * 25))
    const cut = [...kicks]
    await reset()
    await Promise.all(cut)
    // Now and then the driver leaves the object alone a while: only the platform alarm starts it again
    // (not a premise of any check: the figures count the platform's deliveries).
    if (random() < 0.15) {
      figures.quietAfterReset++
      await sleep(300 + Math.floor(random() * 900))
    }
    await audit(`after reset #${figures.resets}`)
  }

  // The plan: every instance's params and when its events go.
  const plan: Array<Planned> = Array.from({ length: INSTANCES }, (_, n) => {
    const waits = Math.floor(random() * 3)
    return {
      id: `m-${n}`,
      params: {
        sleepMs: 50 + Math.floor(random() * 650),
        waits,
        kidMs: random() < 0.4 ? 50 + Math.floor(random() * 350) : null,
        flaky: random() < 0.3
      },
      // 0: in the create's round (before the wait, as a rule); else a few rounds later.
      eventDelays: Array.from({ length: waits }, () => (random() < 0.35 ? 0 : 1 + Math.floor(random() * 6)))
    }
  })
  figures.children = plan.filter((one) => one.params.kidMs !== null).length
  figures.events = plan.reduce((sum, one) => sum + one.params.waits, 0)
  const batches = Array.from({ length: Math.ceil(plan.length / BATCH) }, (_, n) => plan.slice(n * BATCH, (n + 1) * BATCH))
  /** Events not sent yet: instance, n, and the round from which it goes. */
  const queued: Array<{ readonly id: string; readonly n: number; readonly from: number }> = []
  const answered = new Set<string>()

  const create = async (one: Planned) => {
    const made = await retried(`create ${one.id}`, () => stub.create("mixed", one.id, one.params))
    if (made === undefined) return
    if (!made.ok) verdict.violation(`create ${one.id} refused: ${made.error}: ${made.message}`)
    else answered.add(one.id)
  }
  const send = async (event: { readonly id: string; readonly n: number }) => {
    const sent = await retried(`event ${event.n} to ${event.id}`, () => stub.sendOnce("mixed", event.id, WF.eventType, event.n))
    if (sent !== undefined && !sent.ok) verdict.violation(`event ${event.n} to ${event.id} refused: ${sent.error}: ${sent.message}`)
  }

  try {
    let submitted = 0
    for (let round = 0;; round++) {
      const batch = batches[submitted]
      if (batch === undefined && queued.length === 0 && figures.resets >= MIN_RESETS) {
        if (figures.resets >= RESETS || Date.now() > chaosBy) break
        const audited = await stub.audit().catch(() => ({ unfinished: 1 }))
        if (audited.unfinished === 0) break
      }
      const calls: Array<Promise<unknown>> = []
      const kinds: Array<"eventInFlight" | "createInFlight"> = []
      if (batch !== undefined) {
        kinds.push("createInFlight")
        calls.push(Promise.all(batch.map(async (one) => {
          await create(one)
          one.eventDelays.forEach((delay, index) => queued.push({ id: one.id, n: index + 1, from: round + delay }))
        })))
        submitted++
      }
      // Events due by this round, in the order of their n for each instance (waits take the oldest first).
      const due = queued.filter((event) => event.from <= round)
      for (const event of due) queued.splice(queued.indexOf(event), 1)
      if (due.length > 0) {
        kinds.push("eventInFlight")
        const byInstance = new Map<string, Array<{ id: string; n: number }>>()
        for (const event of due) byInstance.set(event.id, [...(byInstance.get(event.id) ?? []), event])
        calls.push(Promise.all([...byInstance.values()].map(async (events) => {
          for (const event of events.sort((a, b) => a.n - b.n)) await send(event)
        })))
      }
      const roll = random()
      if (roll < 0.45 || (batch === undefined && queued.length === 0 && figures.resets < MIN_RESETS)) {
        if (figures.resets < RESETS) await resetCounted(calls, kinds)
      } else if (roll < 0.7) await Promise.race([kick(), sleep(10 + Math.floor(random() * 40))])
      else await sleep(20 + Math.floor(random() * 120))
      await Promise.all(calls)
      if (random() < 0.3) await audit(`round ${round}`)
    }
    // A premise: a step's callback cut short by a reset. When none of the rounds' resets landed in one, the
    // driver resets while it sees the `hold` step running.
    for (let tries = 0; tries < 8 && figures.resetsWhile.stepRunning === 0; tries++) {
      const seen = await stub.audit().catch(() => undefined)
      if (seen === undefined || seen.unfinished === 0) break
      void kick()
      for (let poll = 0; poll < 40 && ((await stub.running().catch(() => 0)) === 0); poll++) await sleep(10)
      await resetCounted([], [])
    }
    await Promise.all([...kicks])

    // Settle: no more resets; wait (bounded) for the last instances and the alarm.
    let drained = false
    for (const drainBy = Date.now() + DRAIN_MS;;) {
      const seen = await retried("audit while draining", () => stub.audit())
      if (seen === undefined) break
      if (seen.unfinished === 0 && seen.alarm === null) {
        drained = true
        break
      }
      if (Date.now() > drainBy) {
        await audit("when the drain's budget ran out")
        verdict.harness(`not drained within the driver's ${DRAIN_MS} ms: ${JSON.stringify(seen)}`)
        break
      }
      if (seen.pending > 0 && random() < 0.3) await Promise.race([kick(), sleep(300)])
      await sleep(50)
    }
    await Promise.all([...kicks])
    await audit("at the end")

    // The invariants, from what is stored.
    const rows = new Map((await stub.rows()).map((row) => [row.key, row]))
    const steps = await stub.steps()
    const events = await stub.events()
    const effects = await stub.effects()
    const timers = await stub.timers()
    figures.stepEffects = effects.length
    figures.platformAlarmDeliveries = (await stub.deliveriesAround(0)).filter((delivery) => delivery.info !== "null").length

    const stepsOf = (key: string) => steps.filter((step) => step.instance === key).sort((a, b) => a.seq - b.seq)
    const effectsOf = (key: string, step: string) => effects.filter((effect) => effect.wf === key && effect.step === step)
    /** A `do` step: each attempt ran at most once, the stored result is its last attempt's effect, nothing ran after. */
    const checkDo = (key: string, name: string, stored: StepResult | undefined, attempt: number) => {
      const ran = effectsOf(key, name)
      const numbers = ran.map((effect) => effect.attempt)
      if (new Set(numbers).size !== numbers.length) verdict.violation(`${key} ${name}: an attempt ran twice: ${numbers}`)
      if (numbers.some((n) => n > attempt)) verdict.violation(`${key} ${name}: ran attempts ${numbers}, stored ${attempt}`)
      const last = ran.find((effect) => effect.attempt === attempt)
      if (stored === undefined || last === undefined || stored.effect !== last.seq || stored.attempt !== attempt) {
        verdict.violation(`${key} ${name}: stored result ${JSON.stringify(stored)} at attempt ${attempt}, effects ${JSON.stringify(ran)}`)
      }
      if (attempt > 1) figures.retriedSteps++
      // An attempt before the last, run in an instance a reset killed, and not the planned failure of a flaky s1.
      const planned = (effect: { readonly attempt: number }) => name === "s1" && effect.attempt === 1 && plan.some((one) => key === `mixed/${one.id}` && one.params.flaky)
      figures.stepAttemptsCutByResets += ran.filter((effect) => effect.attempt < attempt && killed.has(effect.object) && !planned(effect)).length
      return ran
    }

    for (const one of plan) {
      const key = `mixed/${one.id}`
      const row = rows.get(key)
      if (row === undefined) {
        if (answered.has(one.id)) verdict.violation(`${key} lost: no row`)
        continue
      }
      if (row.attempt > WF.runMaxAttempts) verdict.violation(`${key}: run attempt ${row.attempt} > ${WF.runMaxAttempts}`)
      if (row.status !== "complete") {
        if (drained || row.status === "failed" || row.status === "terminated") {
          verdict.violation(`${key}: ended ${row.status} (${row.last_error_name}: ${row.last_error})`)
        }
        continue
      }
      const { kidMs, waits } = one.params
      const expectedNames = ["s1", "nap", "s2", ...Array.from({ length: waits }, (_, n) => `e${n}`), ...(kidMs === null ? [] : ["kid"]), "hold"]
      const stored = stepsOf(key)
      const shape = stored.map((step) => `${step.seq}:${step.name}:${step.status}`)
      const wanted = expectedNames.map((name, index) => `${index + 1}:${name}:completed`)
      if (shape.join() !== wanted.join()) verdict.violation(`${key}: steps ${shape.join()}, expected ${wanted.join()}`)
      const at = (name: string) => stored.find((step) => step.name === name)
      const output = Json.decode(row.output!) as Output
      const result = (name: string) => {
        const step = at(name)
        return step?.result === null || step?.result === undefined ? undefined : Json.decode(step.result) as StepResult
      }
      checkDo(key, "s1", result("s1"), at("s1")?.attempt ?? 0)
      if (one.params.flaky && (at("s1")?.attempt ?? 0) < 2) verdict.violation(`${key}: flaky s1 completed at attempt ${at("s1")?.attempt}`)
      const s2Runs = checkDo(key, "s2", result("s2"), at("s2")?.attempt ?? 0)
      checkDo(key, "hold", result("hold"), at("hold")?.attempt ?? 0)
      if (JSON.stringify([output.s1, output.s2, output.s3]) !== JSON.stringify([result("s1"), result("s2"), result("hold")])) {
        verdict.violation(`${key}: output ${JSON.stringify(output)} differs from its stored steps`)
      }
      // No sleep ended early: its end, and every run of the step after it, at or after its wake time.
      const nap = at("nap")
      if (nap === undefined || nap.wake_at === null || nap.ended_at === null || nap.ended_at < nap.wake_at) {
        verdict.violation(`${key}: nap ${JSON.stringify(nap)} ended before its wake time`)
      } else {
        if (nap.wake_at !== nap.started_at + one.params.sleepMs) verdict.violation(`${key}: nap wakes at ${nap.wake_at}, started ${nap.started_at}`)
        for (const run of s2Runs) if (run.at < nap.wake_at) verdict.violation(`${key}: s2 ran at ${run.at}, before the nap's wake ${nap.wake_at}`)
      }
      // Events: each consumed once, by the wait at its position, in the order sent.
      const mine = events.filter((event) => event.instance === key)
      const sentOrder = mine.map((event) => Json.decode(event.payload) as { n: number })
      if (mine.length !== waits) verdict.violation(`${key}: ${mine.length} events stored, ${waits} sent`)
      if (JSON.stringify(output.events) !== JSON.stringify(sentOrder)) {
        verdict.violation(`${key}: waits got ${JSON.stringify(output.events)}, events sent ${JSON.stringify(sentOrder)}`)
      }
      mine.forEach((event, index) => {
        const wait = at(`e${index}`)
        if (event.consumed_seq === null || wait === undefined || event.consumed_seq !== wait.seq) {
          verdict.violation(`${key}: event ${event.id} consumed by ${event.consumed_seq}, wait e${index} at ${wait?.seq}`)
        } else if (wait.result === null || JSON.stringify((Json.decode(wait.result) as { payload: unknown }).payload) !== JSON.stringify(sentOrder[index])) {
          verdict.violation(`${key}: wait e${index} stored ${wait.result}, event ${event.payload}`)
        }
        if (event.sent_at < (at("s2")?.ended_at ?? Infinity) && index === 0) figures.eventsBeforeTheirWait++
      })
      const consumers = mine.map((event) => event.consumed_seq)
      if (new Set(consumers).size !== consumers.length) verdict.violation(`${key}: one wait consumed two events: ${consumers}`)
      // The child: complete, its output handed to the parent, its sleep not early.
      if (kidMs === null) {
        if (output.kid !== null) verdict.violation(`${key}: a kid output without a child`)
      } else {
        const kidId = `${one.id}-${expectedNames.indexOf("kid") + 1}`
        const kid = rows.get(`kid/${kidId}`)
        if (kid?.status !== "complete" || kid.parent !== key) verdict.violation(`${key}: child kid/${kidId} is ${JSON.stringify(kid)}`)
        if (output.kid !== `kid ${kidId}`) verdict.violation(`${key}: kid output ${output.kid}, expected "kid ${kidId}"`)
        const kidSteps = stepsOf(`kid/${kidId}`)
        const kidNap = kidSteps.find((step) => step.name === "kid nap")
        if (kidNap?.ended_at === null || kidNap?.wake_at === null || kidNap === undefined || kidNap.ended_at! < kidNap.wake_at!) {
          verdict.violation(`kid/${kidId}: nap ${JSON.stringify(kidNap)} ended before its wake time`)
        }
        const work = kidSteps.find((step) => step.name === "work")
        checkDo(`kid/${kidId}`, "work", work?.result ? Json.decode(work.result) as StepResult : undefined, work?.attempt ?? 0)
      }
    }
    for (const key of rows.keys()) {
      const known = plan.some((one) => key === `mixed/${one.id}` || key.startsWith(`kid/${one.id}-`))
      if (!known) verdict.violation(`an unknown instance ${key}`)
    }
    const orphans = events.filter((event) => !rows.has(event.instance))
    if (orphans.length > 0) verdict.violation(`events of no instance: ${JSON.stringify(orphans)}`)
    const ranNoStep = effects.filter((effect) => !rows.has(effect.wf))
    if (ranNoStep.length > 0) verdict.violation(`effects of no instance: ${JSON.stringify(ranNoStep)}`)
    if (drained && timers.length > 0) verdict.violation(`timers left once drained: ${JSON.stringify(timers)}`)

    if (figures.resets < MIN_RESETS) verdict.harness(`premise not reached: only ${figures.resets} resets (wanted ${MIN_RESETS})`)
    if (figures.resetsWhile.sleeping === 0) verdict.harness("premise not reached: no reset while an instance slept")
    if (figures.stepAttemptsCutByResets === 0) verdict.harness("premise not reached: no step's attempt was cut short by a reset")
  } finally {
    figures.elapsedMs = Date.now() - started
    figures.violations = verdict.violations.length
    figures.harnessProblems = verdict.harnessProblems.length
    console.log(`workflows eviction chaos: ${JSON.stringify(figures)}`)
  }
  Verdict.settle(`workflows eviction chaos (seed ${seed})`, verdict, 50)
})
