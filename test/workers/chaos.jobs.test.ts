/**
 * Eviction chaos for the job queues inside workerd: real SQLite storage, real alarms, real timers.
 *
 * A `JobsChaosObject` (objects/JobsChaosObject.ts, public promise API) gets plain jobs with mixed
 * outcomes (succeed, fail once, fail for good, hold after their effect, fail on every attempt),
 * some delayed or prioritized; adds with dedup keys (drop while unfinished, throttle by ttl,
 * replace while not started); flows of two levels whose children fail with `onFailure` fail or
 * ignore; a rate-limited queue (a queue bucket and one per tenant) that is paused for a while; a
 * queue with a concurrency by tenant (one at a time per tenant, two in all); a queue with retention by count, holding
 * some flow parents too; a batched queue (`batch: { size: 3, waitMs: 300 }`, a `batchHandler` answering one outcome
 * per job, its jobs of mixed outcomes, some delayed, some canceled); and cancels of jobs in any state. One add, flow
 * or cancel per RPC, as separate requests would. While they drain, through the engine's timers, real platform
 * alarms and `runDurableObjectAlarm`, a seeded PRNG resets the object (`state.abort()`) at random
 * moments: in adds, in alarm passes, in handlers. Each reset is followed by an audit of the stored
 * state: a due job is covered by the platform alarm (batched jobs held in an open batch wait
 * included: the wait moves them to its end, which the alarm must cover as any due time), no parent waits without
 * an unfinished child (its counter equals them), no dedup key has two unfinished holders, retention bound held.
 *
 * At the end, from the object's tables (jobs, its own handler-call log with each call's claim
 * time, events, adds, cancels, pauses) and the `EffectLedger`: no job lost or unknown; every job
 * final, and its end explained by its behaviour, the cancels asked and the resets that cut its
 * attempts; none completed twice (one completing call, one ledger effect per idempotencyKey, at
 * most one `completed` event); no two handlers of a job at once; a parent ran only after every
 * child finished and none of its `fail` children failed, and was never left waiting; the jobs of
 * one dedup key never unfinished together, one throttled job per ttl; no start of the paused queue
 * while paused; over every window t of the rate-limited queue's claims, started ≤ capacity +
 * refill × t for the queue's bucket and each tenant's, across every reset; no two handlers of one tenant of the
 * keyed queue at once, nor more than its total. Batched jobs are held to the same per-job checks (the object logs
 * each job of a batch call as a call of its own, with the batch call's seq), and each batch handler call (logged
 * with its jobs' ids) took at most `size` jobs, each once, all claimed before it started, exactly the jobs logged
 * with it, in its instance.
 *
 * A run reports three things apart (test/shared/Verdict.ts): invariant violations, the only failures
 * called so; harness problems (a call of the driver unanswered through its retries, a premise of the run
 * not reached, the drain's budget spent while the alarm still covered the work), which fail the run as a
 * "harness" failure; and the figures, printed. The premises are part of the scenario, not a race with the
 * clock: every add is sent whatever the time; the rounds go on until at least MIN_RESETS resets were done;
 * when no reset happened to cut a handler, the driver resets while it sees one running.
 *
 * The seed is printed with the figures; a failure message starts with it. Set CHAOS_SEED below to
 * replay one (the PRNG's choices; workerd timing is real).
 */
import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test"
import { it } from "vitest"
import * as Verdict from "../shared/Verdict.js"
import type { EffectLedger } from "./objects/EffectLedger.js"
import {
  JOBS_CHAOS,
  type JobBehaviour,
  type JobRow,
  type JobsChaosAddSpec,
  type JobsChaosAudit,
  type JobsChaosCall,
  type JobsChaosObject,
  type JobsChaosQueue
} from "./objects/JobsChaosObject.js"
import { alarmCoverage, DRIVER_CALL, patiently } from "./support/chaos.js"
import { sleep } from "./support/lab.js"
import { prng } from "../shared/prng.js"

/** Replay a failing run by putting its seed here. */
const CHAOS_SEED: number | undefined = undefined

const WORK_JOBS = 88
const DEDUP_ADDS = 30
const LIMITED_JOBS = 60
const KEPT_JOBS = 30
const KEYED_JOBS = 30
const FLOWS = 12
const CANCELS = 10
/** Jobs of the batched queue, and cancels aimed at them (besides the random cancels, which may hit them too). */
const BATCHED_JOBS = 24
const BATCHED_CANCELS = 4
const BATCH = 16
/** Resets at most, and at least: the rounds go on until MIN_RESETS were done, however slow the machine. */
const RESETS = 30
const MIN_RESETS = 10
/**
 * Once every add is sent, more rounds (and resets) while the work drains, for this long from the start
 * at most; the MIN_RESETS are done whatever the time. A run takes about 10 s on a quiet machine.
 */
const CHAOS_MS = 15_000
/**
 * The drain after the rounds, bounded: the work left then is a backlog of jobs due within seconds
 * (retries 40 ms apart, delays under 3 s, 60 rate-limited jobs at 8 a second), under 5 s on a quiet
 * machine. Spent while the alarm still covers the work, it is a harness problem; work the alarm does
 * not cover is a violation whatever the time. CHAOS_MS, the CUT_TRIES and this stay well inside the
 * test's 60 s, so the verdict, not vitest's timeout, ends a slow run.
 */
const DRAIN_MS = 20_000
/** Resets the driver makes while it sees a handler running, when none of the rounds' resets cut one. */
const CUT_TRIES = 8
const TTL_MS = 1_500
const DEDUP_KEYS = [
  { key: "drop-a", mode: "drop" },
  { key: "drop-b", mode: "drop" },
  { key: "ttl-a", mode: "ttl" },
  { key: "replace-a", mode: "replace" }
] as const


interface FlowSpec {
  readonly queue: JobsChaosQueue
  readonly id: string
  readonly payload: { readonly behaviour: JobBehaviour }
  readonly onFailure?: "fail" | "ignore"
  readonly delayMs?: number
  readonly children?: ReadonlyArray<FlowSpec>
}

type Step =
  | { readonly _tag: "add"; readonly spec: JobsChaosAddSpec }
  | { readonly _tag: "flow"; readonly root: FlowSpec }
  | { readonly _tag: "cancel"; readonly queue: JobsChaosQueue; readonly id: string }

const canSucceed = (behaviour: JobBehaviour) => behaviour === "ok" || behaviour === "flaky" || behaviour === "slow"

it("eviction chaos: jobs, flows, dedup, rate limits and batches survive random resets, none lost, none doubled", {
  timeout: 60_000
}, async () => {
  const seed = CHAOS_SEED ?? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) >>> 0
  const random = prng(seed)
  const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!
  const started = Date.now()
  const chaosBy = started + CHAOS_MS

  const objectId = env.JOBS_CHAOS_OBJECT.newUniqueId()
  let stub: DurableObjectStub<JobsChaosObject> = env.JOBS_CHAOS_OBJECT.get(objectId)
  const ledger: DurableObjectStub<EffectLedger> = env.EFFECT_LEDGER.get(env.EFFECT_LEDGER.idFromName(objectId.toString()))

  const verdict = Verdict.make()
  const killed = new Set<string>()
  const figures = {
    seed,
    jobs: 0,
    flows: FLOWS,
    flowJobs: 0,
    dedupAdds: DEDUP_ADDS,
    deduplicated: 0,
    cancelsAsked: 0,
    cancelsAccepted: 0,
    resets: 0,
    resetsDuringAdds: 0,
    resetsDuringAlarmRuns: 0,
    resubmitted: 0,
    runAlarmCalls: 0,
    alarmRetriesEmulated: 0,
    audits: 0,
    auditsDuringAlarmDelivery: 0,
    platformAlarmDeliveries: 0,
    calls: 0,
    callsCutByResets: 0,
    keyedCalls: 0,
    keyedMostAtOnce: 0,
    batchCalls: 0,
    batchSizes: {} as Record<string, number>,
    batchCallsCut: 0,
    batchedEnds: {} as Record<string, number>,
    auditsInBatchWait: 0,
    completed: 0,
    failed: {} as Record<string, number>,
    canceled: 0,
    retentionRemoved: 0,
    rateLimitedStarts: 0,
    fullestWindow: 0,
    pausedMs: 0,
    ledgerEffects: 0,
    deduplicatedDeliveries: 0,
    elapsedMs: 0,
    violations: 0,
    harnessProblems: 0
  }

  const reset = async () => {
    let victim: string | undefined
    await runInDurableObject(stub, (instance: JobsChaosObject, state) => {
      victim = instance.instance
      state.abort("reset by the jobs chaos test")
    }).then(
      () => verdict.harness("reset: state.abort() did not throw, the object was not reset"),
      () => undefined
    )
    if (victim !== undefined) killed.add(victim)
    stub = env.JOBS_CHAOS_OBJECT.get(objectId)
    figures.resets++
  }

  /** The invariants every stored state keeps, crash states included. */
  const audit = async (when: string) => {
    let first = true
    const coverage = await alarmCoverage({
      look: async () => {
        let seen: JobsChaosAudit
        try {
          seen = await stub.audit()
        } catch {
          return undefined // reset under us
        }
        if (first) {
          first = false
          figures.audits++
          for (const parent of seen.stuckParents) {
            verdict.violation(`${when}: parent ${parent.key} waits for ${parent.children_pending} children, ${parent.unfinished} unfinished`)
          }
          for (const holder of seen.doubleHolders) verdict.violation(`${when}: dedup key ${holder.dedup_key} held by ${holder.holders} unfinished jobs`)
          if (seen.kept.completed > JOBS_CHAOS.kept.completed || seen.kept.failed > JOBS_CHAOS.kept.failed) {
            verdict.violation(`${when}: kept holds ${seen.kept.completed} completed, ${seen.kept.failed} failed`)
          }
          // Jobs held in an open batch wait are pending at its end: the coverage below includes them.
          if (seen.batchWait.held > 0) figures.auditsInBatchWait++
        } else figures.auditsDuringAlarmDelivery++
        const latest = seen.pending === 0 || seen.earliest === null ? null : Math.max(seen.earliest, seen.now + JOBS_CHAOS.alarmMinDelayMs)
        return { now: seen.now, instance: seen.instance, alarm: seen.alarm, latest }
      },
      deliveries: (since) => stub.deliveriesAround(since),
      kicks: { inFlight: kicks, begun: () => figures.runAlarmCalls }
    })
    if (coverage._tag === "violation") verdict.violation(`${when}: due job(s) without a wake-up: ${coverage.message}`)
    if (coverage._tag === "harness") verdict.harness(`${when}: ${coverage.message}`)
  }

  /** Runs the alarm now (not awaited: resets land in it); a run cut by a reset gets its alarm back, as on the platform. */
  const kicks = new Set<Promise<void>>()
  const kick = () => {
    figures.runAlarmCalls++
    const target = stub
    const running: Promise<void> = target.alarmAt().then(async (at) => {
      try {
        await runDurableObjectAlarm(target)
      } catch {
        if (at === null) return
        const restored = await env.JOBS_CHAOS_OBJECT.get(objectId).restoreAlarm(at).catch(() => false)
        if (restored) figures.alarmRetriesEmulated++
      }
    }, () => undefined).finally(() => kicks.delete(running))
    kicks.add(running)
    return running
  }

  const maybeReset = async (during: "adds" | "drain") => {
    if (figures.resets >= RESETS) return
    if (random() < 0.5) void kick()
    await sleep(Math.floor(random() * 60))
    const cut = [...kicks]
    if (cut.length > 0) figures.resetsDuringAlarmRuns++
    await reset()
    if (during === "adds") figures.resetsDuringAdds++
    await Promise.all(cut)
    await audit(`after reset #${figures.resets}`)
  }

  /**
   * Sends until it goes through (DRIVER_CALL): every call here is idempotent (ids given; cancel and
   * pause twice are harmless). Undefined, and a harness problem, when the driver's patience ran out.
   */
  const retried = async <A>(label: string, send: () => Promise<A>): Promise<A | undefined> => {
    const answer = await patiently(label, DRIVER_CALL, send, () => {
      figures.resubmitted++
      stub = env.JOBS_CHAOS_OBJECT.get(objectId)
    })
    if (answer.ok) return answer.value
    verdict.harness(answer.problem)
    return undefined
  }

  // What the run adds: every job has an id, so resubmitting after a reset is safe.
  const behaviours: ReadonlyArray<JobBehaviour> = ["ok", "ok", "ok", "flaky", "doomed", "slow", "exhaust"]
  const steps: Array<Step> = []
  for (let n = 0; n < WORK_JOBS; n++) {
    steps.push({
      _tag: "add",
      spec: {
        queue: "work",
        id: `w-${n}`,
        payload: { behaviour: behaviours[n % behaviours.length]! },
        ...(random() < 0.2 ? { delayMs: 300 + Math.floor(random() * 2_500) } : {}),
        ...(random() < 0.3 ? { priority: pick([-1, 1, 5]) } : {})
      }
    })
  }
  for (let n = 0; n < DEDUP_ADDS; n++) {
    const { key, mode } = DEDUP_KEYS[n % DEDUP_KEYS.length]!
    steps.push({
      _tag: "add",
      spec: {
        queue: "work",
        id: `d-${n}`,
        payload: { behaviour: pick(["ok", "ok", "slow", "flaky"] as const) },
        dedup: mode === "ttl" ? { key, ttlMs: TTL_MS } : mode === "replace" ? { key, mode: "replace" } : { key },
        ...(mode === "replace" ? { delayMs: 400 } : {})
      }
    })
  }
  for (let n = 0; n < LIMITED_JOBS; n++) {
    steps.push({
      _tag: "add",
      spec: {
        queue: "limited",
        id: `l-${n}`,
        payload: { behaviour: pick(["ok", "ok", "ok", "flaky", "slow"] as const), tenant: pick(["a", "a", "a", "b", "b", "c"]) }
      }
    })
  }
  for (let n = 0; n < KEYED_JOBS; n++) {
    steps.push({
      _tag: "add",
      spec: {
        queue: "keyed",
        id: `q-${n}`,
        payload: { behaviour: pick(["ok", "ok", "slow", "slow", "flaky", "doomed"] as const), tenant: pick(["a", "a", "a", "b", "c"]) }
      }
    })
  }
  for (let n = 0; n < BATCHED_JOBS; n++) {
    steps.push({
      _tag: "add",
      spec: {
        queue: "batched",
        id: `b-${n}`,
        payload: { behaviour: pick(["ok", "ok", "ok", "flaky", "flaky", "doomed", "slow", "exhaust"] as const) },
        ...(random() < 0.15 ? { delayMs: 200 + Math.floor(random() * 1_300) } : {}),
        // Most ahead of the backlog: started one permit at a time behind it, a batch is mostly a call of one job.
        ...(random() < 0.7 ? { priority: 10 } : {})
      }
    })
  }
  for (let n = 0; n < KEPT_JOBS; n++) {
    steps.push({ _tag: "add", spec: { queue: "kept", id: `k-${n}`, payload: { behaviour: pick(["ok", "ok", "flaky", "doomed"] as const) } } })
  }
  const leaf = (id: string): FlowSpec => ({
    queue: "work",
    id,
    payload: { behaviour: pick(["ok", "ok", "flaky", "doomed", "slow", "exhaust"] as const) },
    onFailure: pick(["fail", "ignore"] as const),
    ...(random() < 0.2 ? { delayMs: 200 + Math.floor(random() * 800) } : {})
  })
  for (let n = 0; n < FLOWS; n++) {
    const children: Array<FlowSpec> = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, k) => leaf(`f-${n}-c${k}`))
    if (random() < 0.5) {
      children.push({
        queue: "parent",
        id: `f-${n}-m`,
        payload: { behaviour: pick(["ok", "flaky"] as const) },
        onFailure: pick(["fail", "ignore"] as const),
        children: Array.from({ length: 1 + Math.floor(random() * 2) }, (_, k) => leaf(`f-${n}-m-c${k}`))
      })
    }
    // Every third root in `kept`: retention of a queue whose jobs also fail through a child.
    const queue = n % 3 === 0 ? "kept" : "parent"
    steps.push({ _tag: "flow", root: { queue, id: `f-${n}`, payload: { behaviour: pick(["ok", "flaky"] as const) }, children } })
  }
  // Shuffled, so adds, flows and dedup keys interleave; cancels go after what they target.
  for (let i = steps.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[steps[i], steps[j]] = [steps[j]!, steps[i]!]
  }
  for (let n = 0; n < CANCELS; n++) {
    const at = Math.floor(steps.length * (0.2 + 0.8 * random()))
    const earlier = steps.slice(0, at).filter((step) => step._tag !== "cancel" && !(step._tag === "add" && step.spec.queue === "kept"))
    const target = pick(earlier)
    const chosen = target._tag === "add"
      ? { queue: target.spec.queue, id: target.spec.id }
      : target._tag === "flow"
      ? pick([{ queue: target.root.queue, id: target.root.id }, ...(target.root.children ?? []).map((child) => ({ queue: child.queue, id: child.id }))])
      : undefined
    if (chosen !== undefined) steps.splice(at, 0, { _tag: "cancel", ...chosen })
  }
  for (let n = 0; n < BATCHED_CANCELS; n++) {
    const at = Math.floor(steps.length * (0.3 + 0.7 * random()))
    const earlier = steps.slice(0, at).filter((step) => step._tag === "add" && step.spec.queue === "batched")
    if (earlier.length === 0) continue
    // One of the latest added: likely still waiting (in a batch wait, or due behind the backlog) as the cancel lands.
    const target = pick(earlier.slice(-2))
    if (target._tag === "add") steps.splice(at, 0, { _tag: "cancel", queue: "batched", id: target.spec.id })
  }
  figures.cancelsAsked = steps.filter((step) => step._tag === "cancel").length
  const flowNodes: Array<FlowSpec & { readonly parent?: string }> = []
  const collect = (node: FlowSpec, parent: string | undefined) => {
    flowNodes.push({ ...node, ...(parent === undefined ? {} : { parent }) })
    for (const child of node.children ?? []) collect(child, `${node.queue}/${node.id}`)
  }
  for (const step of steps) if (step._tag === "flow") collect(step.root, undefined)
  figures.flowJobs = flowNodes.length
  const batches = Array.from({ length: Math.ceil(steps.length / BATCH) }, (_, n) => steps.slice(n * BATCH, (n + 1) * BATCH))
  const pauseAt = Math.floor(batches.length * 0.3)
  const resumeAt = pauseAt + 3

  /** The steps the object answered: only their jobs can be lost (one the driver gave up on may never have landed). */
  const answered = new Set<Step>()
  const send = async (step: Step): Promise<void> => {
    const answer = step._tag === "add"
      ? await retried(`add ${step.spec.id}`, () => stub.add([step.spec]))
      : step._tag === "flow"
      ? await retried(`flow ${step.root.id}`, () => stub.flow(step.root))
      : await retried(`cancel ${step.id}`, () => stub.cancel(step.queue, step.id))
    if (answer !== undefined) answered.add(step)
  }

  try {
    // Adds and draining overlap; resets land in adds, alarm passes and handlers. Every batch is sent,
    // however long it takes; then rounds go on while the work drains, until at least MIN_RESETS were done.
    let submitted = 0
    for (let round = 0; ; round++) {
      const batch = batches[submitted]
      if (batch === undefined && figures.resets >= MIN_RESETS) {
        if (figures.resets >= RESETS || Date.now() > chaosBy) break
        const { unfinished } = await stub.audit().catch(() => ({ unfinished: 1 }))
        if (unfinished === 0) break
      }
      if (submitted === pauseAt && batch !== undefined) await retried("pause limited", () => stub.pause("limited"))
      if (submitted === resumeAt && batch !== undefined) await retried("resume limited", () => stub.resume("limited"))
      const sending = batch === undefined ? Promise.resolve() : Promise.all(batch.map(send))
      const roll = random()
      // Past the adds, a round short of the least resets always resets.
      if (roll < 0.45 || (batch === undefined && figures.resets < MIN_RESETS)) await maybeReset(batch === undefined ? "drain" : "adds")
      else if (roll < 0.75) await Promise.race([kick(), sleep(10 + Math.floor(random() * 50))])
      else await sleep(20 + Math.floor(random() * 100))
      await sending
      if (batch !== undefined) submitted++
      if (random() < 0.3) await audit(`round ${round}`)
    }
    // A premise: a handler call cut short by a reset. When no reset of the rounds landed in one, the
    // driver resets while it sees one running (started by the alarm it runs now).
    // (A count it cannot read is taken as some: the premise check at the end reads the stored calls.)
    const noneCut = async () => (await stub.callsCut().catch(() => 1)) === 0
    for (let tries = 0; tries < CUT_TRIES && (await noneCut()); tries++) {
      void kick()
      for (let poll = 0; poll < 40 && ((await stub.running().catch(() => 0)) === 0); poll++) await sleep(10)
      const cut = [...kicks]
      await reset()
      await Promise.all(cut)
      await audit(`after reset #${figures.resets}, made to cut a handler`)
    }
    // Whatever a reset cut, the queue runs again (a resume twice is harmless).
    if (await retried("isPaused", () => stub.isPaused("limited"))) await retried("resume limited", () => stub.resume("limited"))
    await Promise.all([...kicks])

    // Settle: no more resets; wait (bounded) for the last jobs, handlers and the alarm.
    let drained = false
    for (const drainBy = Date.now() + DRAIN_MS;;) {
      const seen = await retried("audit while draining", () => stub.audit())
      const running = await retried("running while draining", () => stub.running())
      if (seen === undefined || running === undefined) break
      if (seen.unfinished === 0 && running === 0 && seen.alarm === null) {
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
      if (seen.pending > 0) await Promise.race([kick(), sleep(300)])
      await sleep(50)
    }
    await Promise.all([...kicks])
    await audit("at the end")

    // The invariants, from what is stored.
    const state = await stub.state()
    const effects = await ledger.effects()
    const deliveries = await ledger.deliveries()
    const rows = new Map<string, JobRow>(state.jobs.map((row) => [row.key, row]))
    figures.jobs = state.jobs.length
    figures.calls = state.calls.length
    figures.callsCutByResets = state.calls.filter((call) => call.ended_at === null).length
    figures.platformAlarmDeliveries = state.deliveries.filter((delivery) => delivery.info !== "null").length
    figures.ledgerEffects = effects.length
    figures.deduplicatedDeliveries = deliveries.filter((delivery) => delivery.outcome === "deduplicated").length
    figures.deduplicated = state.adds.filter((add) => add.deduplicated === 1).length
    figures.cancelsAccepted = state.cancels.filter((cancel) => cancel.accepted === 1).length

    const callsOf = new Map<string, Array<JobsChaosCall>>()
    for (const call of state.calls) {
      const key = `${call.queue}/${call.id}`
      callsOf.set(key, [...(callsOf.get(key) ?? []), call])
    }
    const cut = (call: JobsChaosCall | undefined) => call === undefined || call.ended_at === null || killed.has(call.instance)
    const effectByKey = new Map<string, number>()
    for (const effect of effects) {
      if (effect.key === null || effectByKey.has(effect.key)) verdict.violation(`ledger effect ${JSON.stringify(effect)} unkeyed or doubled`)
      else effectByKey.set(effect.key, effect.seq)
    }
    const cancelAsked = new Set(state.cancels.filter((cancel) => cancel.accepted !== 0).map((cancel) => `${cancel.queue}/${cancel.id}`))
    const cancelAccepted = new Set(state.cancels.filter((cancel) => cancel.accepted === 1).map((cancel) => `${cancel.queue}/${cancel.id}`))

    // None lost, none unknown.
    const expected = new Map<string, JobBehaviour>()
    const dedupSpecs = new Map<string, JobsChaosAddSpec>()
    for (const step of steps) {
      if (step._tag !== "add") continue
      const key = `${step.spec.queue}/${step.spec.id}`
      if (step.spec.dedup === undefined) expected.set(key, step.spec.payload.behaviour)
      else dedupSpecs.set(key, step.spec)
    }
    for (const node of flowNodes) expected.set(`${node.queue}/${node.id}`, node.payload.behaviour)
    /** The jobs of steps the driver gave up on (a harness problem already): they may never have been added. */
    const unanswered = new Set<string>()
    const keysOf = (node: FlowSpec): ReadonlyArray<string> => [`${node.queue}/${node.id}`, ...(node.children ?? []).flatMap(keysOf)]
    for (const step of steps) {
      if (answered.has(step)) continue
      if (step._tag === "add") unanswered.add(`${step.spec.queue}/${step.spec.id}`)
      if (step._tag === "flow") for (const key of keysOf(step.root)) unanswered.add(key)
    }
    /** Jobs retention deleted (after they ended). */
    const retained = new Set<string>()
    for (const [key, behaviour] of expected) {
      if (rows.has(key)) continue
      // Retention deletes finished jobs only: completed, failed for good, out of attempts (resets cut
      // them), or failed by a child (a `fail` child that did not complete).
      const calls = callsOf.get(key) ?? []
      const childFailed = state.jobs.some((child) =>
        child.parent_key === key && child.on_failure === "fail" && (child.status === "failed" || child.status === "canceled")
      )
      const ended = childFailed || calls.some((call) =>
        call.outcome === "completed" || call.error === "NonRetryableError" || call.attempt === JOBS_CHAOS.maxAttempts
      )
      if (key.startsWith("kept/") && ended) {
        figures.retentionRemoved++
        retained.add(key)
      } else if (!unanswered.has(key)) {
        verdict.violation(`${key} (${behaviour}) lost: no row${key.startsWith("kept/") ? `, calls ${JSON.stringify(calls)}` : ""}`)
      }
    }
    for (const [key, spec] of dedupSpecs) {
      if (rows.has(key)) expected.set(key, spec.payload.behaviour)
      else if (!unanswered.has(key) && !state.adds.some((add) => `${add.queue}/${add.id}` === key && add.deduplicated === 1)) {
        verdict.violation(`${key}: neither added nor deduplicated`)
      }
    }
    for (const key of rows.keys()) if (!expected.has(key)) verdict.violation(`an unknown job ${key}`)

    // Every job final, its end explained; none completed twice.
    const childrenOf = new Map<string, Array<JobRow>>()
    for (const row of state.jobs) {
      if (row.parent_key !== null) childrenOf.set(row.parent_key, [...(childrenOf.get(row.parent_key) ?? []), row])
    }
    const failedAbove = (row: JobRow): boolean => {
      // A parent retention deleted had ended; a completed one leaves no child unstarted.
      if (row.parent_key !== null && retained.has(row.parent_key)) return true
      const parent = row.parent_key === null ? undefined : rows.get(row.parent_key)
      return parent !== undefined && (parent.status === "failed" || parent.status === "canceled" || failedAbove(parent))
    }
    for (const row of state.jobs) {
      // As stored: a `replace` dedup add may have given the job another payload.
      const behaviour = (JSON.parse(row.payload) as { readonly value?: { readonly behaviour?: JobBehaviour } }).value?.behaviour
      const label = `${row.key} (${behaviour})`
      const calls = (callsOf.get(row.key) ?? []).filter((call) => call.idempotency_key.endsWith(row.generation_id))
      const last = calls.find((call) => call.attempt === row.attempt)
      const children = childrenOf.get(row.key) ?? []
      const failChildFailed = children.some((child) => child.on_failure === "fail" && child.status !== "completed")
      if (row.attempt > JOBS_CHAOS.maxAttempts) verdict.violation(`${label}: attempt ${row.attempt} > ${JOBS_CHAOS.maxAttempts}`)
      const numbers = calls.map((call) => call.attempt)
      if (new Set(numbers).size !== numbers.length) verdict.violation(`${label}: an attempt number ran twice: ${numbers}`)
      if (numbers.some((number) => number < 1 || number > row.attempt)) verdict.violation(`${label}: ran attempts ${numbers}, stored ${row.attempt}`)
      if (row.status === "pending" || row.status === "waiting_children") {
        // Not drained: the drain's harness problem (and the audit, should the alarm not cover it) says so.
        if (drained) verdict.violation(`${label}: still ${row.status} at attempt ${row.attempt}`)
        continue
      }
      if (row.finished_at === null) verdict.violation(`${label}: ${row.status} without finished_at`)
      const idempotencyKey = calls[0]?.idempotency_key
      if (row.status === "completed") {
        figures.completed++
        const result = (JSON.parse(row.result ?? "null") as { readonly value?: { readonly attempt?: number; readonly effect?: number } } | null)
          ?.value
        if (behaviour === undefined || !canSucceed(behaviour)) verdict.violation(`${label}: completed, but it cannot succeed`)
        if (cancelAccepted.has(row.key)) verdict.violation(`${label}: completed after its cancel was accepted`)
        if (failChildFailed) verdict.violation(`${label}: completed although a child with onFailure fail did not`)
        if (last?.outcome !== "completed" || result?.attempt !== row.attempt) {
          verdict.violation(`${label}: completed at attempt ${row.attempt}, whose call is ${JSON.stringify(last)}, result ${row.result}`)
        }
        if (idempotencyKey === undefined || effectByKey.get(idempotencyKey) !== result?.effect) {
          verdict.violation(`${label}: result effect ${result?.effect}, ledger ${idempotencyKey === undefined ? "-" : effectByKey.get(idempotencyKey)}`)
        }
      } else if (row.status === "canceled") {
        figures.canceled++
        if (!cancelAsked.has(row.key) && !(failedAbove(row) && row.attempt === 0)) {
          verdict.violation(`${label}: canceled at attempt ${row.attempt} without a cancel or a failed ancestor`)
        }
      } else {
        const name = row.last_error_name ?? "Error"
        figures.failed[name] = (figures.failed[name] ?? 0) + 1
        if (cancelAccepted.has(row.key)) verdict.violation(`${label}: failed (${name}) after its cancel was accepted`)
        const ranFor = last === undefined ? 0 : (last.ended_at ?? Number.POSITIVE_INFINITY) - last.started_at
        const explained = name === "ChildJobFailedError"
          ? failChildFailed && row.attempt === 0 && calls.length === 0
          : name === "NonRetryableError"
          ? behaviour === "doomed" && last?.error === "NonRetryableError"
          : name === "TransientError"
          ? row.attempt === JOBS_CHAOS.maxAttempts && last?.error === "TransientError"
          : name === "DurableAttemptsExhaustedError"
          ? row.attempt === JOBS_CHAOS.maxAttempts && cut(last)
          : name === "DurableAttemptTimeoutError"
          ? row.attempt === JOBS_CHAOS.maxAttempts && ranFor >= JOBS_CHAOS.attemptTimeoutMs - 5
          : false
        if (!explained) verdict.violation(`${label}: failed with ${name} at attempt ${row.attempt}; last call ${JSON.stringify(last)}`)
      }
      // Never two handlers of one job at once (a reset ends every call of its instance).
      const sorted = [...(callsOf.get(row.key) ?? [])].sort((a, b) => a.started_at - b.started_at)
      for (let i = 1; i < sorted.length; i++) {
        const before = sorted[i - 1]!
        const after = sorted[i]!
        if (before.instance === after.instance && (before.ended_at === null || before.ended_at > after.started_at)) {
          verdict.violation(`${label}: calls ${before.seq} and ${after.seq} ran at once`)
        }
      }
      // Flows: a parent ran only once every child finished, with none of its `fail` children failed.
      for (const call of callsOf.get(row.key) ?? []) {
        if (call.note !== null) verdict.violation(`${label}: ran with ${call.note}`)
        const late = children.filter((child) => child.finished_at === null || child.finished_at > call.claimed_at)
        if (late.length > 0) verdict.violation(`${label}: claimed at ${call.claimed_at} before its children ${late.map((c) => c.id)} finished`)
      }
    }
    const completions = new Map<string, number>()
    for (const event of state.events) {
      if (event.type === "completed") completions.set(`${event.queue}/${event.id}`, (completions.get(`${event.queue}/${event.id}`) ?? 0) + 1)
    }
    for (const [key, count] of completions) if (count > 1) verdict.violation(`${key}: ${count} completed events`)
    const applied = new Map<string, number>()
    for (const delivery of deliveries) {
      if (delivery.outcome === "applied" && delivery.key !== null) applied.set(delivery.key, (applied.get(delivery.key) ?? 0) + 1)
    }
    for (const [key, count] of applied) if (count > 1) verdict.violation(`${key}: applied ${count} times`)
    const knownKeys = new Set(state.calls.map((call) => call.idempotency_key))
    for (const key of effectByKey.keys()) if (!knownKeys.has(key)) verdict.violation(`an effect with an unknown key ${key}`)

    // Dedup: the jobs of one key never unfinished together; a throttled key takes one job per ttl.
    for (const { key: dedupKey, mode } of DEDUP_KEYS) {
      const holders = [...dedupSpecs.values()]
        .filter((spec) => spec.dedup?.key === dedupKey)
        .flatMap((spec) => rows.get(`work/${spec.id}`) ?? [])
        .sort((a, b) => a.created_at - b.created_at)
      for (let i = 1; i < holders.length; i++) {
        const before = holders[i - 1]!
        const after = holders[i]!
        if (mode === "ttl" ? after.created_at < before.created_at + TTL_MS : after.created_at < (before.finished_at ?? Infinity)) {
          verdict.violation(`dedup ${dedupKey}: ${after.id} added at ${after.created_at} while ${before.id} (added ${before.created_at}, finished ${before.finished_at}) held it`)
        }
      }
    }

    // No start of the paused queue while it was paused.
    for (const pause of state.pauses) {
      const end = pause.resume_at ?? Number.POSITIVE_INFINITY
      figures.pausedMs += (pause.resume_at ?? Date.now()) - pause.paused_at
      for (const call of state.calls) {
        if (call.queue === pause.queue && call.claimed_at > pause.paused_at && call.claimed_at < end) {
          verdict.violation(`${call.queue}/${call.id} claimed at ${call.claimed_at}, its queue paused from ${pause.paused_at} to ${pause.resume_at}`)
        }
      }
    }

    // Rate limits: over every window of claims, started ≤ capacity + refill × t, resets included.
    const claims = state.calls.filter((call) => call.queue === "limited")
    figures.rateLimitedStarts = claims.length
    if (claims.some((call) => call.claimed_at < 0)) verdict.violation("a limited call found no claim time on its row")
    const windows = (label: string, times: ReadonlyArray<number>, limit: { readonly capacity: number; readonly refillPerSecond: number }) => {
      const sorted = [...times].sort((a, b) => a - b)
      for (let i = 0; i < sorted.length; i++) {
        for (let j = i; j < sorted.length; j++) {
          const bound = limit.capacity + (limit.refillPerSecond * (sorted[j]! - sorted[i]!)) / 1_000
          figures.fullestWindow = Math.max(figures.fullestWindow, Number(((j - i + 1) / bound).toFixed(3)))
          if (j - i + 1 > bound + 1e-6) {
            verdict.violation(`${label}: ${j - i + 1} claims in [${sorted[i]}, ${sorted[j]}], bound ${bound.toFixed(2)}`)
          }
        }
      }
    }
    windows("limited queue bucket", claims.map((call) => call.claimed_at), JOBS_CHAOS.rateLimit)
    for (const tenant of ["a", "b", "c"]) {
      windows(`limited tenant ${tenant}`, claims.filter((call) => call.tenant === tenant).map((call) => call.claimed_at), JOBS_CHAOS.groupRateLimit)
    }

    // Concurrency by key: within an instance (a reset ends every call of the one before), the calls of one tenant
    // never overlap, and at most the queue's total overlap; a call cut by a reset lasted until its instance ended.
    // Calls are recorded as they start (`seq` is start order: the clock has millisecond ties); one that starts in
    // the millisecond another ended counts as after it.
    const keyedCalls = state.calls.filter((call) => call.queue === "keyed")
    figures.keyedCalls = keyedCalls.length
    for (const call of keyedCalls) {
      const end = call.ended_at ?? Number.POSITIVE_INFINITY
      const during = keyedCalls.filter((other) => other.instance === call.instance && other.seq > call.seq && other.started_at < end)
      const sameTenant = during.filter((other) => other.tenant === call.tenant)
      if (sameTenant.length > 0) {
        verdict.violation(`keyed tenant ${call.tenant}: ${sameTenant.map((other) => other.id).join()} started while ${call.id}#${call.attempt} ran`)
      }
      const overlapping = 1 + keyedCalls.filter((other) =>
        other.instance === call.instance && other.seq < call.seq && other.started_at <= call.started_at &&
        (other.ended_at ?? Number.POSITIVE_INFINITY) > call.started_at
      ).length
      figures.keyedMostAtOnce = Math.max(figures.keyedMostAtOnce, overlapping)
      if (overlapping > JOBS_CHAOS.keyedTotal) verdict.violation(`keyed: ${overlapping} calls at once as ${call.id} started (total ${JOBS_CHAOS.keyedTotal})`)
    }

    // Batching: every handler call took at most `size` jobs, each once, claimed before the call started, exactly
    // the jobs logged with it, in its instance; a batched job ran only within a batch call.
    const batchCalls = new Map(state.batchCalls.map((call) => [call.seq, call]))
    figures.batchCalls = state.batchCalls.length
    figures.batchCallsCut = state.batchCalls.filter((call) => call.ended_at === null).length
    for (const call of state.batchCalls) {
      const ids = JSON.parse(call.ids) as ReadonlyArray<string>
      figures.batchSizes[ids.length] = (figures.batchSizes[ids.length] ?? 0) + 1
      if (ids.length < 1 || ids.length > JOBS_CHAOS.batch.size) {
        verdict.violation(`batch call ${call.seq}: ${ids.length} jobs (size ${JOBS_CHAOS.batch.size}): ${ids}`)
      }
      if (new Set(ids).size !== ids.length) verdict.violation(`batch call ${call.seq}: a job twice: ${ids}`)
      const members = state.calls.filter((one) => one.batch_seq === call.seq)
      if (members.map((one) => one.id).join() !== ids.join()) {
        verdict.violation(`batch call ${call.seq} took ${ids}, logged ${members.map((one) => one.id)}`)
      }
      for (const member of members) {
        if (member.instance !== call.instance) verdict.violation(`batch call ${call.seq}: ${member.id} logged in another instance`)
        if (member.claimed_at < 0 || member.claimed_at > call.started_at) {
          verdict.violation(`batch call ${call.seq} started at ${call.started_at}, ${member.id}#${member.attempt} claimed at ${member.claimed_at}`)
        }
      }
    }
    for (const row of state.jobs) {
      if (row.queue === "batched") figures.batchedEnds[row.status] = (figures.batchedEnds[row.status] ?? 0) + 1
    }
    for (const call of state.calls) {
      if ((call.queue === "batched") !== (call.batch_seq !== null && batchCalls.has(call.batch_seq))) {
        verdict.violation(`${call.queue}/${call.id}#${call.attempt}: batch call ${call.batch_seq}`)
      }
    }

    // The premises of what the run is meant to exercise: unmet, the run proves less (a harness problem).
    if (figures.resets < MIN_RESETS) verdict.harness(`premise not reached: only ${figures.resets} resets (wanted ${MIN_RESETS})`)
    if (figures.callsCutByResets === 0) verdict.harness("premise not reached: no handler call was cut short by a reset")
    if (state.pauses.length === 0) verdict.harness("premise not reached: the limited queue was never paused")
    if (!state.batchCalls.some((call) => (JSON.parse(call.ids) as ReadonlyArray<string>).length > 1)) {
      verdict.harness("premise not reached: no batch call took more than one job")
    }
    if (figures.auditsInBatchWait === 0) verdict.harness("premise not reached: no audit saw a batched job held in an open batch wait")
  } finally {
    figures.elapsedMs = Date.now() - started
    figures.violations = verdict.violations.length
    figures.harnessProblems = verdict.harnessProblems.length
    console.log(`jobs eviction chaos: ${JSON.stringify(figures)}`)
  }
  Verdict.settle(`jobs eviction chaos (seed ${seed})`, verdict, 50)
})
