/**
 * Eviction chaos for external workers inside workerd: real SQLite storage, real alarms, real timers.
 *
 * A `LeasesChaosObject` (objects/LeasesChaosObject.ts, public promise API) holds two external queues
 * (`loose`: 5 attempts, 3 expired leases survived; `tight`: 3 attempts, 1 survived, 6 leases out at
 * most and 2 per key, a concurrency by key), with leases of 1 s. Simulated workers (async loops here, one RPC per call as a worker
 * elsewhere would make) lease jobs and, as a seeded PRNG draws: finish honestly (an effect written to
 * the `EffectLedger` under the job's `idempotencyKey`, then `complete`); work long with heartbeats;
 * die (stop without settling, a new worker takes their place); finish late, after their lease ended
 * (fenced: refused); deliver twice (complete twice, or fail after completing); fail (retryable or
 * not); keep their token and replay it much later (a zombie: complete, fail or heartbeat after the
 * job was leased again). A call cut by a reset is sent again (another duplicate). Meanwhile the PRNG
 * resets the object (`state.abort()`); after each reset an audit of the stored state: every lease
 * out has the platform alarm by max(its end, now + `alarmMinDelayMs`) for its reclaim; no final job
 * holds a lease; no token behind its attempts; `tight` within its concurrency and its limit by key.
 *
 * At the end all workers stop, the leases they held expire and are reclaimed, a final honest worker
 * drains both queues. From the object's own history (each lease with its token, each write asked with
 * its token and outcome), its job rows and events, and the ledger:
 * - **0 jobs lost**: every job added ends completed, or failed with an error its history explains;
 *   each lease is accounted for (tokens = settles accepted + expiries, attempt = token);
 * - **0 completed twice**: one accepted completion per job, its stored result from that completion's
 *   token (the job's last), one `completed` event, the result's effect the ledger's one for its key;
 * - **0 writes accepted from a stale token**: every accepted heartbeat, complete and fail used a token
 *   no later lease had replaced when it was asked, before its lease's end (as heartbeats extended
 *   it) and before that token settled the job.
 *
 * A run reports three things apart (test/shared/Verdict.ts): invariant violations (the proofs above,
 * the audits), the only failures called so; harness problems (a call of the driver unanswered through
 * its retries, a premise of the run not reached, the drain's budget spent while the alarm still covered
 * the leases), which fail the run as a "harness" failure; and the figures, printed. The premises are
 * part of the scenario, not a race with the clock: the resets go on, past CHAOS_MS if need be, until at
 * least MIN_RESETS were done and one of them cut a call.
 *
 * The seed is printed with the figures; a failure message starts with it. Replay one with
 * `VITE_DURABILITY_LEASES_CHAOS_SEED=<seed>` (the pool passes only `VITE_` variables into workerd;
 * `DURABILITY_LEASES_CHAOS_SEED` is read too, once the config's `envPrefix` lets it through), or by
 * setting LEASES_CHAOS_SEED below. That fixes the PRNG's draws, not workerd's real timing, nor the
 * order in which concurrent workers draw: a replay follows the same plan, not the same interleaving.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { it } from "vitest"
import * as Verdict from "../shared/Verdict.js"
import type { EffectLedger } from "./objects/EffectLedger.js"
import {
  LEASES_CHAOS,
  type LeasesChaosAudit,
  type LeasesChaosLease,
  type LeasesChaosObject,
  type LeasesChaosOp,
  type LeasesChaosQueue,
  type LeasesChaosResult,
  type WriteOutcome
} from "./objects/LeasesChaosObject.js"
import { alarmCoverage, DRIVER_CALL, patiently } from "./support/chaos.js"
import { sleep } from "./support/lab.js"
import { prng } from "../shared/prng.js"

/** Replay a run by putting its seed here (or in DURABILITY_LEASES_CHAOS_SEED). */
const LEASES_CHAOS_SEED: number | undefined = undefined

const JOBS = { loose: 60, tight: 40 } as const
const WORKERS = 5
/** Resets at most, and at least: the chaos phase goes on past CHAOS_MS until MIN_RESETS were done, however slow the machine. */
const RESETS = 24
const MIN_RESETS = 8
/** The chaos phase: workers and resets, at least this long. A run takes about 10 s on a quiet machine. */
const CHAOS_MS = 8_000
/**
 * The drain after it, bounded: the leases the workers held end within leaseMs (1 s) and are reclaimed
 * by an alarm alarmMinDelayMs (1 s) later; the final worker then completes what is left in a few
 * round trips, about 2 s on a quiet machine. Spent while the alarm still covers the leases, it is a
 * harness problem; leases out with no alarm to reclaim them are a violation whatever the time.
 */
const DRAIN_MS = 20_000
const RESET_REASON = "reset by the leases chaos test"
const QUEUES: ReadonlyArray<LeasesChaosQueue> = ["loose", "tight"]

/**
 * The seed from the environment. Inside workerd the pool passes on only what Vite's `envPrefix` lets
 * through (`VITE_` by default) as `import.meta.env`: `VITE_DURABILITY_LEASES_CHAOS_SEED` works as is;
 * `DURABILITY_LEASES_CHAOS_SEED` once the config's `envPrefix` includes `DURABILITY_`.
 */
const seedFromEnv = (): number | undefined => {
  const values = (import.meta as { readonly env?: Record<string, string | undefined> }).env ?? {}
  const name = ["DURABILITY_LEASES_CHAOS_SEED", "VITE_DURABILITY_LEASES_CHAOS_SEED"].find((key) => (values[key] ?? "") !== "")
  if (name === undefined) return undefined
  const seed = Number(values[name])
  if (!Number.isSafeInteger(seed)) throw new Error(`${name} must be an integer, got ${values[name]}`)
  return seed >>> 0
}


/** What a worker does with one lease. */
type Fate = "honest" | "heartbeats" | "die" | "late" | "double" | "failRetry" | "failFinal"

const FATES: ReadonlyArray<readonly [Fate, number]> = [
  ["honest", 0.42],
  ["heartbeats", 0.1],
  ["die", 0.1],
  ["late", 0.12],
  ["double", 0.1],
  ["failRetry", 0.12],
  ["failFinal", 0.04]
]

it("eviction chaos with external workers: deaths, late and duplicate deliveries, resets; none lost, none doubled, no stale write accepted", {
  timeout: 60_000
}, async () => {
  const seed = LEASES_CHAOS_SEED ?? seedFromEnv() ?? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) >>> 0
  const random = prng(seed)
  const between = (low: number, high: number) => low + Math.floor(random() * (high - low))
  const fate = (): Fate => {
    let roll = random()
    for (const [name, weight] of FATES) {
      if (roll < weight) return name
      roll -= weight
    }
    return "honest"
  }
  const started = Date.now()
  const chaosEnd = started + CHAOS_MS
  const verdict = Verdict.make()
  /** An error the object answered with that is only the reset's abort reaching the library: a cut call, not a finding. */
  const byReset = (error: string) => error.includes(RESET_REASON)

  const objectId = env.LEASES_CHAOS_OBJECT.newUniqueId()
  let stub: DurableObjectStub<LeasesChaosObject> = env.LEASES_CHAOS_OBJECT.get(objectId)
  const ledger: DurableObjectStub<EffectLedger> = env.EFFECT_LEDGER.get(env.EFFECT_LEDGER.idFromName(objectId.toString()))

  const figures = {
    seed,
    jobs: JOBS.loose + JOBS.tight,
    tightMostPerKey: 0,
    workers: 0,
    deaths: 0,
    leases: 0,
    leaseRepliesLost: 0,
    heartbeats: 0,
    completes: 0,
    fails: 0,
    writesAccepted: 0,
    staleWritesRefused: 0,
    writesCutByResets: 0,
    lateWrites: 0,
    duplicateDeliveries: 0,
    zombieWrites: 0,
    rpcErrors: 0,
    resets: 0,
    audits: 0,
    auditsDuringAlarmDelivery: 0,
    reclaims: 0,
    drainLeases: 0,
    completed: 0,
    failed: {} as Record<string, number>,
    ledgerEffects: 0,
    ledgerDeduplicated: 0,
    elapsedMs: 0,
    violations: 0,
    harnessProblems: 0
  }

  /** Calls the object; a call a reset cut throws: the next one gets a fresh stub. */
  const rpc = async <A>(send: (target: DurableObjectStub<LeasesChaosObject>) => Promise<A>): Promise<A | undefined> => {
    try {
      return await send(stub)
    } catch {
      figures.rpcErrors++
      stub = env.LEASES_CHAOS_OBJECT.get(objectId)
      return undefined
    }
  }

  const reset = async () => {
    await runInDurableObject(stub, (_instance: LeasesChaosObject, state) => {
      state.abort(RESET_REASON)
    }).then(
      () => verdict.harness("reset: state.abort() did not throw, the object was not reset"),
      () => undefined
    )
    stub = env.LEASES_CHAOS_OBJECT.get(objectId)
    figures.resets++
  }

  /** A job an audit found wrong, reported once (with the first audit that saw it). */
  const reported = new Set<string>()
  const once = (what: string, key: string, message: string) => {
    if (reported.has(`${what} ${key}`)) return
    reported.add(`${what} ${key}`)
    verdict.violation(message)
  }

  /** The invariants every stored state keeps, crash states included. */
  const audit = async (when: string) => {
    let first = true
    const coverage = await alarmCoverage({
      look: async () => {
        const seen: LeasesChaosAudit | undefined = await rpc((target) => target.audit())
        if (seen === undefined) return undefined // reset under us
        if (first) {
          first = false
          figures.audits++
          for (const key of seen.finalHolding) once("final holding", key, `${when}: ${key} is final but still holds a lease or worker`)
          for (const key of seen.tokenBehind) once("token behind", key, `${when}: ${key} has a token below its attempts`)
          const cap = LEASES_CHAOS.queues.tight.concurrency
          if (seen.tightLeased > cap) verdict.violation(`${when}: ${seen.tightLeased} leases out in tight (concurrency ${cap})`)
          const perKey = LEASES_CHAOS.queues.tight.keyLimit
          figures.tightMostPerKey = Math.max(figures.tightMostPerKey, seen.tightMostPerKey)
          if (seen.tightMostPerKey > perKey) verdict.violation(`${when}: ${seen.tightMostPerKey} leases out for one key in tight (limit ${perKey})`)
        } else figures.auditsDuringAlarmDelivery++
        const latest = seen.leased === 0 || seen.earliestLeaseEnd === null
          ? null
          : Math.max(seen.earliestLeaseEnd, seen.now + LEASES_CHAOS.alarmMinDelayMs)
        return { now: seen.now, instance: seen.instance, alarm: seen.alarm, latest }
      },
      deliveries: (since) => stub.deliveriesAround(since)
    })
    if (coverage._tag === "violation") verdict.violation(`${when}: lease(s) out without a wake-up to reclaim them: ${coverage.message}`)
    if (coverage._tag === "harness") verdict.harness(`${when}: ${coverage.message}`)
  }

  /** A slow answer now and then: resets land between a commit and its reply. */
  const slow = () => (random() < 0.35 ? between(1, 40) : 0)

  const apply = (lease: LeasesChaosLease) =>
    ledger.apply({ source: `${lease.queue}/${lease.id}`, key: lease.idempotencyKey, attempt: lease.attempt })

  /** A write sent until it is answered (a reset cuts it: sent again, a duplicate delivery if the first landed). */
  const deliver = async (send: (target: DurableObjectStub<LeasesChaosObject>) => Promise<WriteOutcome>): Promise<WriteOutcome | undefined> => {
    for (let tries = 0; tries < 3; tries++) {
      if (tries > 0) figures.duplicateDeliveries++
      const outcome = await rpc(send)
      if (outcome !== undefined) return outcome
      await sleep(between(5, 30))
    }
    return undefined
  }

  const complete = (lease: LeasesChaosLease, worker: string) =>
    Promise.resolve(apply(lease)).then((applied) =>
      deliver((target) =>
        target.complete(lease.queue, lease.id, lease.token, worker, { token: lease.token, worker, effect: applied.effect } satisfies LeasesChaosResult, slow())
      )
    )

  const fail = (lease: LeasesChaosLease, worker: string, retryable: boolean) =>
    deliver((target) =>
      target.fail(
        lease.queue,
        lease.id,
        lease.token,
        worker,
        retryable
          ? { name: "TransientError", message: `token ${lease.token}: try again` }
          : { name: "PermanentError", message: `token ${lease.token}: cannot succeed` },
        retryable,
        slow()
      )
    )

  /** Old leases kept by workers, replayed later by anyone (after the job was leased again, mostly). */
  const zombies: Array<LeasesChaosLease> = []
  let stopped = false
  const loops = new Set<Promise<void>>()

  /** One lease's work; false when the worker died on it. */
  const work = async (lease: LeasesChaosLease, worker: string): Promise<boolean> => {
    if (random() < 0.25) zombies.push(lease)
    // A worker's death is a premise of the run, so it is part of the scenario: on a slow machine the chaos
    // workers may get few leases (the drain takes the rest), so the first lease they work on dies, whatever
    // its drawn fate (still drawn, so the seed's sequence is the same).
    const drawn = fate()
    const chosen: Fate = figures.deaths === 0 ? "die" : drawn
    switch (chosen) {
      case "die":
        figures.deaths++
        return false
      case "honest":
        await sleep(between(0, 250))
        await complete(lease, worker)
        return true
      case "heartbeats": {
        const until = Date.now() + between(1_200, 2_400)
        while (Date.now() < until) {
          await sleep(between(250, 400))
          const beat = await deliver((target) => target.heartbeat(lease.queue, lease.id, lease.token, worker, LEASES_CHAOS.leaseMs, slow()))
          // Lost the lease (a beat cut too long, or the job reclaimed): stop, as a consumer's abort signal would.
          if (beat?.outcome === "stale") return true
        }
        await complete(lease, worker)
        return true
      }
      case "late": {
        // Past the lease's end: fenced, whether the scheduler reclaimed it yet or not.
        await sleep(Math.max(0, lease.leaseUntil - Date.now()) + between(20, 400))
        figures.lateWrites++
        if (random() < 0.7) await complete(lease, worker)
        else await fail(lease, worker, random() < 0.5)
        return true
      }
      case "double": {
        await sleep(between(0, 150))
        await complete(lease, worker)
        figures.duplicateDeliveries++
        if (random() < 0.6) await complete(lease, worker)
        else await fail(lease, worker, true)
        return true
      }
      case "failRetry":
      case "failFinal":
        await sleep(between(0, 200))
        await fail(lease, worker, chosen === "failRetry")
        return true
    }
  }

  const zombie = async (worker: string) => {
    const lease = zombies[Math.floor(random() * zombies.length)]
    if (lease === undefined) return
    figures.zombieWrites++
    const roll = random()
    if (roll < 0.5) await complete(lease, worker)
    else if (roll < 0.75) await fail(lease, worker, random() < 0.5)
    else await deliver((target) => target.heartbeat(lease.queue, lease.id, lease.token, worker, LEASES_CHAOS.leaseMs, slow()))
  }

  const spawn = () => {
    const worker = `w${++figures.workers}`
    const loop = (async () => {
      while (!stopped) {
        if (zombies.length > 0 && random() < 0.15) await zombie(worker)
        const queue = QUEUES[Math.floor(random() * QUEUES.length)]!
        const answer = await rpc((target) => target.lease(queue, between(1, 4), worker, slow()))
        if (answer === undefined || answer.error !== null) {
          if (answer !== undefined && answer.error !== null) {
            if (byReset(answer.error)) figures.rpcErrors++
            else verdict.violation(`lease ${queue} by ${worker}: the engine threw ${answer.error}`)
          }
          await sleep(between(10, 40))
          continue
        }
        if (answer.leases.length === 0) {
          await sleep(between(20, 80))
          continue
        }
        const alive = await Promise.all(answer.leases.map((lease) => work(lease, worker)))
        if (alive.includes(false)) {
          // Dead: its other leases are settled or abandoned; a new worker starts after a while.
          await sleep(between(50, 300))
          if (!stopped) spawn()
          return
        }
      }
    })().finally(() => loops.delete(loop))
    loops.add(loop)
  }

  /** Jobs whose add the object answered: only they can be lost (a batch the driver gave up on may never have landed). */
  const added = new Set<string>()

  try {
    // Jobs added by id, in batches: a batch a reset cut is sent again (its ids deduplicate).
    for (const queue of QUEUES) {
      const ids = Array.from({ length: JOBS[queue] }, (_, n) => `${queue}-${n}`)
      for (let at = 0; at < ids.length; at += 20) {
        const batch = ids.slice(at, at + 20)
        const answer = await patiently(`add ${queue} ${batch[0]}…`, DRIVER_CALL, async () => {
          const result = await stub.add(queue, batch)
          // The engine's error is an answer; the reset's abort reaching it is a cut call, sent again.
          if (result.error !== null && byReset(result.error)) throw new Error(result.error)
          return result
        }, () => {
          figures.rpcErrors++
          stub = env.LEASES_CHAOS_OBJECT.get(objectId)
        })
        if (!answer.ok) verdict.harness(answer.problem)
        else if (answer.value.error !== null) verdict.violation(`add ${queue}: the engine threw ${answer.value.error}`)
        else for (const id of batch) added.add(`${queue}/${id}`)
      }
    }

    for (let n = 0; n < WORKERS; n++) spawn()
    // Resets at random moments while the workers run, for CHAOS_MS; and on, however long it takes,
    // until the premises are met: MIN_RESETS resets, one of which cut a call (at most RESETS in all).
    const owed = () => figures.resets < MIN_RESETS || (figures.rpcErrors === 0 && figures.resets < RESETS)
    while (owed() || (Date.now() < chaosEnd - 300 && figures.resets < RESETS)) {
      await sleep(between(80, 450))
      await reset()
      await audit(`after reset #${figures.resets}`)
    }
    while (Date.now() < chaosEnd) await sleep(50)
    stopped = true
    while (loops.size > 0) await Promise.all([...loops])

    // Every lease the workers held ends (no heartbeats now) and is reclaimed at its end by the scheduler.
    const drainEnd = Date.now() + DRAIN_MS
    let drained = false
    for (;;) {
      const seen = await rpc((target) => target.audit())
      if (seen !== undefined && seen.leased === 0) break
      if (Date.now() > drainEnd) {
        // Leases out with no alarm to reclaim them: the audit says so (a violation); with one, the budget's end is the driver's.
        await audit("when the drain's budget ran out")
        verdict.harness(`leases not reclaimed within the driver's ${DRAIN_MS} ms: ${JSON.stringify(seen)}`)
        break
      }
      await sleep(100)
    }
    await audit("after the workers stopped")

    // A final honest worker drains both queues (jobs retried after a failure wait their delay first).
    for (;;) {
      let leased = 0
      for (const queue of QUEUES) {
        const answer = await rpc((target) => target.lease(queue, 20, "drain"))
        if (answer === undefined || answer.error !== null) continue
        leased += answer.leases.length
        figures.drainLeases += answer.leases.length
        await Promise.all(answer.leases.map((lease) => complete(lease, "drain")))
      }
      if (leased > 0) continue
      const seen = await rpc((target) => target.audit())
      if (seen !== undefined && seen.unfinished === 0) {
        drained = true
        break
      }
      if (Date.now() > drainEnd) {
        await audit("when the drain's budget ran out")
        verdict.harness(`not drained within the driver's ${DRAIN_MS} ms: ${JSON.stringify(seen)}`)
        break
      }
      await sleep(50)
    }
    await audit("at the end")

    // The proofs, from what is stored.
    const state = await stub.state()
    const effects = await ledger.effects()
    const deliveries = await ledger.deliveries()
    figures.ledgerEffects = effects.length
    figures.ledgerDeduplicated = deliveries.filter((delivery) => delivery.outcome === "deduplicated").length
    const writes = state.ops.filter((op) => op.op !== "lease")
    figures.leases = state.ops.length - writes.length
    figures.heartbeats = writes.filter((op) => op.op === "heartbeat").length
    figures.completes = writes.filter((op) => op.op === "complete").length
    figures.fails = writes.filter((op) => op.op === "fail").length
    figures.writesAccepted = writes.filter((op) => op.outcome === "accepted").length
    figures.staleWritesRefused = writes.filter((op) => op.outcome === "stale").length
    figures.writesCutByResets = writes.filter((op) => op.outcome === "pending").length
    for (const op of writes.filter((write) => write.outcome === "error")) {
      if (byReset(op.detail ?? "")) figures.writesCutByResets++
      else verdict.violation(`write ${JSON.stringify(op)}: the engine threw`)
    }

    const opsOf = new Map<string, Array<LeasesChaosOp>>()
    for (const op of state.ops) {
      const key = `${op.queue}/${op.id}`
      opsOf.set(key, [...(opsOf.get(key) ?? []), op])
    }
    const effectByKey = new Map(effects.map((effect) => [effect.key, effect.seq]))
    const completedEvents = new Map<string, number>()
    const failedEvents = new Map<string, number>()
    for (const event of state.events) {
      const counter = event.type === "completed" ? completedEvents : event.type === "failed" ? failedEvents : undefined
      counter?.set(`${event.queue}/${event.id}`, (counter.get(`${event.queue}/${event.id}`) ?? 0) + 1)
    }
    const rows = new Map(state.jobs.map((row) => [row.key, row]))

    // 0 jobs lost: every job added is there, final, and its end explained by its history.
    for (const key of added) if (!rows.has(key)) verdict.violation(`${key} lost: no row`)
    if (state.jobs.length > figures.jobs || (added.size === figures.jobs && state.jobs.length !== figures.jobs)) {
      verdict.violation(`${state.jobs.length} job rows, ${figures.jobs} added`)
    }
    for (const row of state.jobs) {
      const label = `${row.key} (token ${row.lease_token}, attempt ${row.attempt}, stalled ${row.stalled})`
      const limits = LEASES_CHAOS.queues[row.queue]
      const ops = opsOf.get(row.key) ?? []
      const leases = ops.filter((op) => op.op === "lease")
      const settles = ops.filter((op) => op.op === "complete" || op.op === "fail")
      const accepted = settles.filter((op) => op.outcome === "accepted")
      // Cut by a reset: no outcome recorded, or the reset's abort as the outcome.
      const cut = settles.filter((op) => op.outcome === "pending" || (op.outcome === "error" && byReset(op.detail ?? "")))
      figures.reclaims += row.stalled
      figures.leaseRepliesLost += row.lease_token - new Set(leases.map((lease) => lease.token)).size
      if (row.status !== "completed" && row.status !== "failed") {
        // Not drained: the drain's harness problem (and the audit, should the alarm not cover it) says so.
        if (drained) verdict.violation(`${label}: still ${row.status}`)
        continue
      }
      if (row.leased_until !== null || row.worker_id !== null) {
        verdict.violation(`${label}: ${row.status} and still leased (leased_until ${row.leased_until}, worker ${row.worker_id}, finished ${row.finished_at})`)
      }
      if (row.finished_at === null) verdict.violation(`${label}: ${row.status} without finished_at`)
      if (row.attempt !== row.lease_token) verdict.violation(`${label}: attempts and leases differ`)
      if (row.attempt > limits.maxAttempts) verdict.violation(`${label}: beyond ${limits.maxAttempts} attempts`)
      // Each lease ended once: settled by its holder, or expired and reclaimed.
      if (accepted.length + row.stalled > row.lease_token || accepted.length + cut.length + row.stalled < row.lease_token) {
        verdict.violation(`${label}: ${accepted.length} settles accepted (${cut.length} cut) and ${row.stalled} expiries for ${row.lease_token} leases`)
      }
      const tokens = leases.map((lease) => lease.token)
      if (tokens.some((token) => token < 1 || token > row.lease_token) || new Set(tokens).size !== tokens.length) {
        verdict.violation(`${label}: leases with tokens ${tokens}`)
      }
      // The settle that ended the job used its last token.
      const last = accepted.filter((op) => op.token === row.lease_token)
      if (row.status === "completed") {
        figures.completed++
        const result = JSON.parse(row.result ?? "null") as { readonly value?: LeasesChaosResult } | null
        const completions = accepted.filter((op) => op.op === "complete")
        const maybe = cut.filter((op) => op.op === "complete" && op.token === result?.value?.token)
        if (completions.length > 1) verdict.violation(`${label}: completed ${completions.length} times: ${JSON.stringify(completions)}`)
        const completion = completions[0] ?? maybe[0]
        if (completion === undefined) verdict.violation(`${label}: completed, but no completion was asked with token ${result?.value?.token}`)
        else if (completion.token !== result?.value?.token || completion.token !== row.lease_token) {
          verdict.violation(`${label}: result ${row.result} is not from the accepted completion with token ${completion.token}`)
        }
        if ((completedEvents.get(row.key) ?? 0) > 1) verdict.violation(`${label}: ${completedEvents.get(row.key)} completed events`)
        const lease = leases.find((op) => op.token === result?.value?.token)
        const keyOfRun = result?.value === undefined ? undefined : effects.find((effect) => effect.seq === result.value!.effect)?.key
        if (keyOfRun === undefined || keyOfRun === null || effectByKey.get(keyOfRun) !== result?.value?.effect || !keyOfRun.startsWith("durability-job:")) {
          verdict.violation(`${label}: result effect ${result?.value?.effect} is not the ledger's one for its key`)
        }
        if (lease === undefined && result?.value?.worker !== "drain") verdict.violation(`${label}: completed with token ${result?.value?.token}, never leased`)
      } else {
        const name = row.last_error_name ?? "Error"
        figures.failed[name] = (figures.failed[name] ?? 0) + 1
        const failedBy = (error: string) => last.some((op) => op.op === "fail" && op.detail === error) ||
          (last.length === 0 && cut.some((op) => op.op === "fail" && op.token === row.lease_token && op.detail === error))
        const explained = name === "JobStalledError"
          ? row.stalled > limits.maxStalled && last.length === 0
          // `retryable: false` ends the job with the worker's error (stored as `NonRetryableError` before issue 15's change).
          : name === "PermanentError" || name === "NonRetryableError"
          ? failedBy("PermanentError (not retryable)")
          : name === "TransientError"
          ? row.attempt === limits.maxAttempts && failedBy("TransientError")
          : name === "DurableAttemptsExhaustedError"
          // Its last lease expired; past maxStalled too, the attempts' end is the error the engine gives.
          ? row.attempt === limits.maxAttempts && last.length === 0 && row.stalled >= 1
          : false
        if ((failedEvents.get(row.key) ?? 0) > 1) verdict.violation(`${label}: ${failedEvents.get(row.key)} failed events`)
        if (!explained) verdict.violation(`${label}: failed with ${name} (${row.last_error}); settles with its last token ${JSON.stringify(last)}`)
      }
    }

    // 0 writes accepted from a stale token: each accepted write was asked while its token held the job.
    for (const [key, ops] of opsOf) {
      for (const write of ops) {
        if (write.op === "lease" || write.outcome !== "accepted") continue
        const label = `${key}: ${write.op} #${write.seq} by ${write.worker} with token ${write.token} at ${write.at}`
        const lease = ops.find((op) => op.op === "lease" && op.token === write.token)
        if (lease === undefined) {
          if (write.worker !== "drain") verdict.violation(`${label}: accepted, but no lease gave that token`)
          continue
        }
        const newer = ops.find((op) => op.op === "lease" && op.token > write.token && op.seq < write.seq)
        if (newer !== undefined) verdict.violation(`${label}: accepted after lease #${newer.seq} gave token ${newer.token}`)
        // The lease's end as heartbeats of the same token moved it (a beat cut by a reset may have moved it too).
        let end = lease.lease_until ?? 0
        for (const beat of ops) {
          if (beat.op !== "heartbeat" || beat.token !== write.token || beat.seq >= write.seq) continue
          if (beat.outcome === "accepted") end = Math.max(end, beat.lease_until ?? 0)
          else if (beat.outcome === "pending") end = Math.max(end, beat.at + Number(beat.detail))
        }
        if (write.at > end) verdict.violation(`${label}: accepted after its lease ended at ${end}`)
        const settled = ops.find((op) =>
          (op.op === "complete" || op.op === "fail") && op.outcome === "accepted" && op.token === write.token && op.seq < write.seq
        )
        if (settled !== undefined) verdict.violation(`${label}: accepted after #${settled.seq} (${settled.op}) settled that token`)
      }
    }
    const perKey = new Map<string | null, number>()
    for (const effect of effects) perKey.set(effect.key, (perKey.get(effect.key) ?? 0) + 1)
    for (const [key, count] of perKey) if (key === null || count > 1) verdict.violation(`ledger key ${key}: ${count} effects`)

    // The premises of what the run is meant to exercise: unmet, the run proves less (a harness problem).
    if (figures.resets < MIN_RESETS) verdict.harness(`premise not reached: only ${figures.resets} resets (wanted ${MIN_RESETS})`)
    if (figures.staleWritesRefused === 0) verdict.harness("premise not reached: no stale write was refused")
    if (figures.reclaims === 0) verdict.harness("premise not reached: no lease expired and was reclaimed")
    if (figures.deaths === 0) verdict.harness("premise not reached: no worker died")
    if (figures.rpcErrors === 0) verdict.harness("premise not reached: no call was cut by a reset")
    if (figures.completed === 0) verdict.harness("premise not reached: no job completed")
  } finally {
    stopped = true
    figures.elapsedMs = Date.now() - started
    figures.violations = verdict.violations.length
    figures.harnessProblems = verdict.harnessProblems.length
    console.log(`leases eviction chaos: ${JSON.stringify(figures)}`)
  }
  Verdict.settle(`leases eviction chaos (seed ${seed})`, verdict, 50)
})
