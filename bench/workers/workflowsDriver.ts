/**
 * The workflow benchmarks' shared part (W1–W4): what an implementation offers the driver (create
 * instances, read their statuses, send one an event), and the `fetch` handler that runs a scenario
 * against it inside workerd and answers its figures as JSON. The peer (Cloudflare Workflows, local,
 * bench/workers/workflowsPeer.ts) and the library (`DurabilityWorkflows` in one object,
 * bench/workers/workflows.ts) run the same scenario code; only their `WorkflowsTarget` differs.
 *
 * Every workflow records its own times with `Date.now()` inside workerd (which advances across I/O:
 * each step is I/O) and returns them as its output; the driver records the times of its own calls.
 * All of them are read in the same workerd process, so they share one clock.
 */

import type { Counts } from "./counting.js"

/** The three workflows every implementation defines (same names, same bodies). */
export type Kind = "ten" | "sleeper" | "waiter"

export interface CreateItem {
  readonly id: string
  readonly params: Record<string, unknown>
}

/** An instance's status as the driver sees it: the implementation's, normalised by its adapter. */
export interface InstanceStatus {
  readonly id: string
  readonly status: string
  readonly output: unknown
  readonly error: unknown
  /**
   * True once the instance is parked on `step.waitForEvent` (the waiter's step "armed" has run). Cloudflare's
   * status says "waiting" there; local Workflows never does (it stays "running"), so its adapter reads the step
   * output instead.
   */
  readonly armed: boolean
}

/** What an implementation offers the driver. */
export interface WorkflowsTarget {
  /**
   * Creates the instances. `background`: W4's sleepers, which the driver never reads again (an implementation that
   * keeps a handle per instance for the driver's sake must not keep these: W4 measures the library's heap).
   */
  create(kind: Kind, items: ReadonlyArray<CreateItem>, options?: { readonly background?: boolean }): Promise<void>
  statuses(kind: Kind, ids: ReadonlyArray<string>): Promise<ReadonlyArray<InstanceStatus>>
  sendEvent(kind: Kind, id: string, event: { readonly type: string; readonly payload: unknown }): Promise<void>
  /** The SQL statements the implementation ran, where it can count them (the library's object; not the peer's engines). */
  counts?(): Promise<Counts>
  /** Clears those counts. */
  reset?(): Promise<void>
}

/** Outputs of the three workflows. */
export interface TenOutput {
  readonly doneAt: number
}
export interface SleeperOutput {
  /** The step "start" (durable: the same on any replay), just before the sleep. */
  readonly startedAt: number
  /** `Date.now()` in the body right before `step.sleep` (a replaying engine evaluates it again). */
  readonly sleepAt: number
  readonly wokeAt: number
  readonly ms: number
}
export interface WaiterOutput {
  readonly armedAt: number
  readonly resumedAt: number
  readonly payload: unknown
}

/** The waiter's event type. */
export const EVENT_TYPE = "go"
/** W4's background sleepers: an hour, none wakes during a run. */
export const LONG_SLEEP_MS = 3_600_000

interface Params {
  readonly prefix: string
  readonly name?: string
  readonly n?: number
  readonly batch?: number
  readonly pollChunk?: number
  readonly pollEveryMs?: number
  readonly timeoutMs?: number
  readonly minMs?: number
  readonly maxMs?: number
  readonly settleMs?: number
  readonly spacingMs?: number
  readonly start?: number
  readonly count?: number
  readonly probes?: number
  readonly probeMs?: number
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const FINAL = new Set(["complete", "errored", "terminated"])

const idsOf = (prefix: string, n: number, from = 0) => Array.from({ length: n }, (_, i) => `${prefix}-${from + i}`)

const createAll = async (
  target: WorkflowsTarget,
  kind: Kind,
  items: ReadonlyArray<CreateItem>,
  batch: number,
  options?: { readonly background?: boolean }
) => {
  for (let i = 0; i < items.length; i += batch) await target.create(kind, items.slice(i, i + batch), options)
}

/**
 * Polls until every instance satisfies `done` (or the timeout): `pollChunk` ids per call, the remaining ones in
 * order, a pause of `pollEveryMs` when a call found none done. One call is in flight at a time, so polling takes
 * little from the instances it watches (locally, one peer status read is three engine calls, each reading the
 * instance's whole log). Answers each instance's last status and when the driver first saw it done.
 */
const waitAll = async (
  target: WorkflowsTarget,
  kind: Kind,
  ids: ReadonlyArray<string>,
  done: (status: InstanceStatus) => boolean,
  p: Params
) => {
  const chunk = p.pollChunk ?? 10
  const everyMs = p.pollEveryMs ?? 100
  const deadline = Date.now() + (p.timeoutMs ?? 300_000)
  const seen = new Map<string, { readonly status: InstanceStatus; readonly at: number }>()
  let remaining = [...ids]
  let polls = 0
  while (remaining.length > 0 && Date.now() < deadline) {
    const asked = remaining.slice(0, chunk)
    const statuses = await target.statuses(kind, asked)
    polls += asked.length
    const at = Date.now()
    let found = 0
    for (const status of statuses) {
      if (done(status)) {
        seen.set(status.id, { status, at })
        found++
      }
    }
    if (found > 0) remaining = remaining.filter((id) => !seen.has(id))
    else await sleep(everyMs)
  }
  const last = remaining.length === 0 ? null : await target.statuses(kind, remaining.slice(0, 5))
  return { seen, missing: remaining.length, polls, stuck: last }
}

const failures = (seen: ReadonlyMap<string, { readonly status: InstanceStatus }>) =>
  [...seen.values()].filter(({ status }) => status.status !== "complete").slice(0, 5).map(({ status }) => status)

const scenarios: Record<string, (target: WorkflowsTarget, p: Params) => Promise<unknown>> = {
  /** W1: `n` instances of ten trivial steps, created in batches; until all complete. */
  async w1(target, p) {
    const n = p.n ?? 1_000
    const ids = idsOf(p.prefix, n)
    await target.reset?.()
    const t0 = Date.now()
    await createAll(target, "ten", ids.map((id) => ({ id, params: {} })), p.batch ?? 100)
    const createdAt = Date.now()
    const { seen, missing, polls, stuck } = await waitAll(target, "ten", ids, (s) => FINAL.has(s.status), p)
    const outputs = [...seen.values()].filter(({ status }) => status.status === "complete").map(({ status }) => status.output as TenOutput)
    const doneAts = outputs.map((o) => o.doneAt)
    const seenAts = [...seen.values()].map(({ at }) => at)
    const counts = await target.counts?.()
    return {
      n,
      steps: 10,
      completed: outputs.length,
      missing,
      failed: failures(seen),
      stuck,
      createMs: createdAt - t0,
      // The last workflow's own return, from the first create call (the headline: no polling cadence in it).
      lastDoneMs: doneAts.length === 0 ? null : Math.max(...doneAts) - t0,
      firstDoneMs: doneAts.length === 0 ? null : Math.min(...doneAts) - t0,
      // When the driver saw the last one complete (polling's cadence included).
      lastSeenMs: seenAts.length === 0 ? null : Math.max(...seenAts) - t0,
      polls,
      counts: counts ?? null
    }
  },

  /**
   * W2: `n` sleepers, sleeps spread evenly over [minMs, maxMs]; their own start, sleep call and wake times. Nothing
   * polls them until the longest sleep is over (+ 200 ms): the wake-ups are measured on an otherwise idle workerd.
   */
  async w2(target, p) {
    const n = p.n ?? 100
    const minMs = p.minMs ?? 200
    const maxMs = p.maxMs ?? 1_000
    const ids = idsOf(p.prefix, n)
    const items = ids.map((id, i) => ({ id, params: { ms: Math.round(minMs + (n === 1 ? 0 : (i * (maxMs - minMs)) / (n - 1))) } }))
    const t0 = Date.now()
    await createAll(target, "sleeper", items, p.batch ?? 100)
    const createMs = Date.now() - t0
    await sleep(Math.max(0, t0 + maxMs + 200 - Date.now()))
    const { seen, missing, stuck } = await waitAll(target, "sleeper", ids, (s) => FINAL.has(s.status), p)
    const samples = [...seen.values()].filter(({ status }) => status.status === "complete").map(({ status }) => status.output as SleeperOutput)
    return { n, minMs, maxMs, createMs, missing, failed: failures(seen), stuck, samples }
  },

  /**
   * W3: `n` waiters, each parked on `waitForEvent("wait", { type: "go" })` (after its step "armed"); once all
   * are, and `settleMs` more, one event each, one after another `spacingMs` apart: the time from the
   * driver's `sendEvent` call to the workflow's own resume.
   */
  async w3(target, p) {
    const n = p.n ?? 100
    const ids = idsOf(p.prefix, n)
    const t0 = Date.now()
    await createAll(target, "waiter", ids.map((id) => ({ id, params: {} })), p.batch ?? 100)
    const createMs = Date.now() - t0
    const parked = await waitAll(target, "waiter", ids, (s) => s.armed || s.status === "waiting" || FINAL.has(s.status), p)
    const armedMs = Date.now() - t0
    await sleep(p.settleMs ?? 200)
    const sends: Array<{ readonly id: string; readonly sentAt: number; readonly ackAt: number }> = []
    for (const id of ids) {
      if (!parked.seen.has(id)) continue
      const sentAt = Date.now()
      await target.sendEvent("waiter", id, { type: EVENT_TYPE, payload: { sentAt } })
      sends.push({ id, sentAt, ackAt: Date.now() })
      await sleep(p.spacingMs ?? 20)
    }
    const { seen, missing, stuck } = await waitAll(target, "waiter", ids, (s) => FINAL.has(s.status), p)
    const samples = sends.flatMap(({ id, sentAt, ackAt }) => {
      const status = seen.get(id)?.status
      if (status?.status !== "complete") return []
      const output = status.output as WaiterOutput
      return [{ sentAt, ackAt, armedAt: output.armedAt, resumedAt: output.resumedAt }]
    })
    return { n, createMs, armedMs, notParked: parked.missing, missing, failed: failures(seen), stuck, samples }
  },

  /** W4 (library): `count` sleepers of an hour from `start`, in batches; answers when they were all created. */
  async w4seed(target, p) {
    const count = p.count ?? 1_000
    const ids = idsOf(p.prefix, count, p.start ?? 0)
    const t0 = Date.now()
    await createAll(target, "sleeper", ids.map((id) => ({ id, params: { ms: LONG_SLEEP_MS } })), p.batch ?? 1_000, {
      background: true
    })
    return { count, ms: Date.now() - t0 }
  },

  /**
   * W4 (library): one wake-up among the sleepers already there: `probes` sleepers of `probeMs`, one after
   * another. Each is left alone until `probeMs` + 50 ms have passed (no polling while it sleeps), then polled
   * until complete: its lateness (its own times), and the statements the object ran for all the probes.
   */
  async w4probe(target, p) {
    const probes = p.probes ?? 20
    const probeMs = p.probeMs ?? 200
    const samples: Array<SleeperOutput & { readonly createMs: number; readonly seenMs: number }> = []
    await target.reset?.()
    for (let i = 0; i < probes; i++) {
      const id = `${p.prefix}-${i}`
      const t0 = Date.now()
      await target.create("sleeper", [{ id, params: { ms: probeMs } }])
      const createMs = Date.now() - t0
      await sleep(probeMs + 50)
      const { seen } = await waitAll(target, "sleeper", [id], (s) => FINAL.has(s.status), { ...p, pollEveryMs: p.pollEveryMs ?? 5 })
      const one = seen.get(id)
      if (one === undefined || one.status.status !== "complete") throw new Error(`w4probe ${id}: ${JSON.stringify(one?.status ?? "not complete")}`)
      samples.push({ ...(one.status.output as SleeperOutput), createMs, seenMs: one.at - t0 })
    }
    const counts = await target.counts?.()
    const statements = counts === undefined ? null : Object.values(counts.statements).reduce((sum, c) => sum + c.n, 0)
    return { probes, probeMs, samples, statementsPerProbe: statements === null ? null : statements / probes }
  }
}

export type TargetOf = (env: any, params: { readonly name?: string }) => WorkflowsTarget

/** The worker's `fetch`: `POST /<scenario>` with JSON params, answers JSON (`{ error }` with status 500 on a throw). */
export const makeWorkflowsDriver = (targetOf: TargetOf) => ({
  async fetch(request: Request, env: unknown): Promise<Response> {
    const scenario = scenarios[new URL(request.url).pathname.slice(1)]
    if (scenario === undefined) return new Response("unknown scenario", { status: 404 })
    const params = (await request.json()) as Params
    try {
      return Response.json(await scenario(targetOf(env, params), params))
    } catch (error) {
      const message = error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : String(error)
      return Response.json({ error: message }, { status: 500 })
    }
  }
})
