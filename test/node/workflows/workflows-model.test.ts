/**
 * Model test of durable workflows (issue 27, reliability), on the promise face under the test kit's
 * clock (TestObjectState: memory SQLite, TestClock, the platform alarm delivered as the clock reaches it).
 *
 * A seeded PRNG draws a history for one object: create instances of `mixed` (step "s1", flaky for some:
 * a durable retry delay; a sleep; step "s2"; 0–2 waits for events of type "go"; maybe a child `kid`; step
 * "hold", whose callback holds until the driver opens its gate) and of `waiter` (one wait with a timeout);
 * send events (to `mixed` all it waits for, one at a time; to `waiter` maybe one, at any time); advance
 * the clock; restart the object (TestObjectState.restart: handlers, timers and memory gone, storage and
 * alarm kept; callbacks still holding are left behind, and their gates may open later); pause and resume;
 * terminate; open the gates of the held steps.
 *
 * A model knows every instance created, its params, the events sent to it and whether it was
 * terminated. (A pause and resume at once wakes a suspended instance early: its run must suspend again on
 * what is not due.) Checked after every operation, from storage: no lost wake-up (whatever is due, a record to
 * run or a workflow timer, has the platform alarm by max(due, now + alarmMinDelayMs)); a suspended
 * instance that waits on time has its timer (a paused one none); attempts within bounds; no effect of a
 * step begun while its instance was paused. At the end (every pause resumed, every gate opened, every
 * event sent, time run out): every instance ended as the model says (terminated, or complete with the
 * output its params and events imply; a `waiter` timed out only when no event was sent before its
 * deadline); steps at their positions, one row each; every `do` step's callback ran once per attempt
 * (no attempt number twice), its stored result is its last attempt's effect, nothing ran after it; each
 * event consumed exactly once by the wait at its position, in the order sent; no sleep ended before its
 * wake time by the object's clock (its end, and every run of the step after it); the object idle.
 *
 * Seeds are fixed (SEEDS); DURABILITY_WORKFLOWS_MODEL_SEED runs that seed alone (to replay a failure),
 * DURABILITY_WORKFLOWS_MODEL_STEPS changes the history length.
 */
import { describe, expect, it } from "vitest"
import {
  DurabilityScheduler,
  DurabilityWorkflows,
  type WorkflowEvent,
  type WorkflowStep
} from "durability"
import { TestObjectState } from "durability/testing"
import * as Json from "../../../src/shared/json.js"
import * as Verdict from "../../shared/Verdict.js"
import { prng } from "../../shared/prng.js"

/** Each seed takes about 3 s (mostly the clock moves: the test kit lets handlers' promises run around each). */
const SEEDS = [1, 7, 42, 31_337]
const ONLY = process.env.DURABILITY_WORKFLOWS_MODEL_SEED
const STEPS = Number(process.env.DURABILITY_WORKFLOWS_MODEL_STEPS ?? 150)

const MIN_DELAY_MS = 1_000
const RUN_MAX_ATTEMPTS = 1_000
const RETRY = { limit: 500, delay: 1_000, backoff: "constant" as const }
const WAITER_TIMEOUT_MS = 30_000
const ADVANCES = [0, 1, 100, 1_000, 5_000, 30_000, 120_000]


interface MixedParams {
  readonly sleepMs: number
  readonly waits: number
  readonly kidMs: number | null
  readonly flaky: boolean
}

interface Effect {
  readonly seq: number
  readonly key: string
  readonly step: string
  readonly attempt: number
  /** The object's life (0, 1, … one per restart) the callback ran in. */
  readonly life: number
  /** The object's clock when it began. */
  readonly at: number
  /** Whether its instance's row was paused when it began. */
  readonly paused: boolean
}

interface StepResult {
  readonly step: string
  readonly attempt: number
  readonly effect: number
}

interface Known {
  readonly key: string
  readonly workflow: "mixed" | "waiter"
  readonly id: string
  readonly params: MixedParams | { readonly timeoutMs: number }
  /** Events sent and stored (payload n), in order. */
  readonly sent: Array<number>
  terminated: boolean
  paused: boolean
}

type Row = Record<string, unknown>

const runSeed = async (seed: number) => {
  const random = prng(seed)
  const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!
  const verdict = Verdict.make()
  const figures = {
    seed,
    operations: 0,
    instances: 0,
    children: 0,
    events: 0,
    restarts: 0,
    restartsWhileHeld: 0,
    pauses: 0,
    blips: 0,
    terminates: 0,
    advancedMs: 0,
    effects: 0,
    timedOut: 0,
    refusedEvents: 0,
    endedMeanwhile: 0,
    drainRounds: 0,
    elapsedMs: 0
  }
  const startedAt = Date.now()

  let state = await TestObjectState.make({ startTime: 1_000_000 })
  let life = 0
  const effects: Array<Effect> = []
  const gates: Array<() => void> = []
  const rows = (sql: string, ...bindings: Array<unknown>): Array<Row> =>
    state.storage.sql.exec(sql, ...(bindings as Array<never>)).toArray() as Array<Row>

  const effect = (key: string, step: string, attempt: number): StepResult => {
    const [row] = rows("SELECT paused FROM durability_workflows WHERE key = ?", key)
    const seq = effects.length + 1
    effects.push({ seq, key, step, attempt, life, at: state.now(), paused: Number(row?.paused ?? 0) === 1 })
    return { step, attempt, effect: seq }
  }

  const build = () => {
    const scheduler = new DurabilityScheduler({ context: state.context, alarmMinDelayMs: MIN_DELAY_MS, log: () => undefined })
    return new DurabilityWorkflows({
      scheduler,
      retries: { maxAttempts: RUN_MAX_ATTEMPTS, delay: () => 10 },
      workflows: {
        mixed: async (event: WorkflowEvent<MixedParams>, step: WorkflowStep) => {
          const key = `mixed/${event.instanceId}`
          const params = event.payload
          const s1 = await step.do("s1", { retries: RETRY }, ({ attempt }) => {
            const done = effect(key, "s1", attempt)
            if (params.flaky && attempt === 1) throw new Error("s1 fails on attempt 1")
            return done
          })
          await step.sleep("nap", params.sleepMs)
          const s2 = await step.do("s2", { retries: RETRY }, ({ attempt }) => effect(key, "s2", attempt))
          const events: Array<unknown> = []
          for (let n = 0; n < params.waits; n++) {
            events.push((await step.waitForEvent(`e${n}`, { type: "go", timeout: "30 days" })).payload)
          }
          const kid = params.kidMs === null ? null : await step.child<string>("kid", "kid", { params: { ms: params.kidMs } })
          const s3 = await step.do("hold", { retries: RETRY }, async ({ attempt }) => {
            const done = effect(key, "hold", attempt)
            await new Promise<void>((resolve) => gates.push(resolve))
            return done
          })
          return { s1, s2, events, kid, s3 }
        },
        kid: async (event: WorkflowEvent<{ readonly ms: number }>, step: WorkflowStep) => {
          await step.do("work", { retries: RETRY }, ({ attempt }) => effect(`kid/${event.instanceId}`, "work", attempt))
          await step.sleep("kid nap", event.payload.ms)
          return `kid ${event.instanceId}`
        },
        waiter: async (event: WorkflowEvent<{ readonly timeoutMs: number }>, step: WorkflowStep) => {
          try {
            return { got: (await step.waitForEvent("wait", { type: "go", timeout: event.payload.timeoutMs })).payload }
          } catch (error) {
            return { timedOut: (error as Error).name }
          }
        }
      }
    })
  }
  let workflows = build()
  const known: Array<Known> = []

  /** Invariants of every stored state. */
  const audit = (when: string) => {
    const now = state.now()
    const [due] = rows("SELECT MIN(next_attempt_at) AS at FROM durability_workflows WHERE status = 'pending' AND paused = 0")
    const [timer] = rows("SELECT MIN(at) AS at FROM durability_timers WHERE owner = 'workflows'")
    const times = [due?.at, timer?.at].filter((at): at is number => typeof at === "number")
    if (times.length > 0) {
      const latest = Math.max(Math.min(...times), now + MIN_DELAY_MS)
      const alarm = state.storage.alarmAt
      if (alarm === null || alarm > latest) verdict.violation(`${when}: due by ${latest} (now ${now}), the alarm is ${alarm}`)
    }
    for (const row of rows(
      `SELECT w.key, w.paused, w.wake_at, t.at FROM durability_workflows w
       LEFT JOIN durability_timers t ON t.owner = 'workflows' AND t.key = w.key WHERE w.status = 'suspended'`
    )) {
      if (Number(row.paused) === 1 && row.at !== null) verdict.violation(`${when}: ${row.key} paused with a timer at ${row.at}`)
      if (Number(row.paused) === 0 && row.wake_at !== null && (row.at === null || Number(row.at) > Number(row.wake_at))) {
        verdict.violation(`${when}: ${row.key} waits until ${row.wake_at}, its timer is ${row.at}`)
      }
    }
    for (const row of rows("SELECT key, attempt FROM durability_workflows WHERE attempt > ?", RUN_MAX_ATTEMPTS)) {
      verdict.violation(`${when}: ${row.key} at run attempt ${row.attempt}`)
    }
  }

  const live = () => known.filter((one) => !one.terminated && rows("SELECT status FROM durability_workflows WHERE key = ?", one.key)
    .some((row) => row.status === "pending" || row.status === "suspended"))

  const send = async (one: Known) => {
    const n = one.sent.length + 1
    const before = rows("SELECT status FROM durability_workflows WHERE key = ?", one.key)[0]?.status
    try {
      await (await workflows[one.workflow].get(one.id)).sendEvent({ type: "go", payload: { n } })
      one.sent.push(n)
      figures.events++
    } catch (error) {
      const name = (error as Error).name
      const after = rows("SELECT status FROM durability_workflows WHERE key = ?", one.key)[0]?.status
      figures.refusedEvents++
      // Refused only once the instance ended (a `mixed` one only when terminated: it waits for every event).
      if (name !== "WorkflowFinishedError" || after === "pending" || after === "suspended" || (one.workflow === "mixed" && !one.terminated)) {
        verdict.violation(`event ${n} to ${one.key} (${before} → ${after}) refused: ${name}: ${(error as Error).message}`)
      }
    }
  }

  type Handle = Awaited<ReturnType<(typeof workflows)["mixed"]["get"]>>
  /**
   * Pauses, resumes or terminates an instance that was live when picked. A run still executing may end it
   * meanwhile (a pause lets the running step finish, and the handler may return after it): the call is then
   * refused with WorkflowFinishedError, which is right only if the instance was not asleep, paused, when picked.
   */
  const control = async (one: Known, what: string, action: (handle: Handle) => Promise<unknown>): Promise<boolean> => {
    const [before] = rows("SELECT status, paused FROM durability_workflows WHERE key = ?", one.key)
    try {
      await action(await workflows[one.workflow].get(one.id) as Handle)
      return true
    } catch (error) {
      const [after] = rows("SELECT status FROM durability_workflows WHERE key = ?", one.key)
      const asleepPaused = before?.status === "suspended" && Number(before.paused) === 1
      if ((error as Error).name !== "WorkflowFinishedError" || after?.status === "pending" || after?.status === "suspended" || asleepPaused) {
        verdict.violation(`${what} ${one.key} (${JSON.stringify(before)} → ${after?.status}) refused: ${(error as Error).name}: ${(error as Error).message}`)
      }
      figures.endedMeanwhile++
      return false
    }
  }

  const operations: ReadonlyArray<readonly [number, () => Promise<void>]> = [
    [22, async () => {
      const n = known.length
      if (random() < 0.75) {
        const waits = Math.floor(random() * 3)
        const params: MixedParams = {
          sleepMs: pick([0, 50, 1_000, 20_000, 3_600_000]),
          waits,
          kidMs: random() < 0.35 ? pick([10, 5_000, 60_000]) : null,
          flaky: random() < 0.3
        }
        const id = `m-${n}`
        await workflows.mixed.create({ id, params })
        known.push({ key: `mixed/${id}`, workflow: "mixed", id, params, sent: [], terminated: false, paused: false })
        // Some events go at once, before the wait is reached.
        if (waits > 0 && random() < 0.3) await send(known[known.length - 1]!)
      } else {
        const id = `w-${n}`
        await workflows.waiter.create({ id, params: { timeoutMs: WAITER_TIMEOUT_MS } })
        known.push({ key: `waiter/${id}`, workflow: "waiter", id, params: { timeoutMs: WAITER_TIMEOUT_MS }, sent: [], terminated: false, paused: false })
      }
      figures.instances++
    }],
    [20, async () => {
      const candidates = live().filter((one) =>
        one.workflow === "mixed" ? one.sent.length < (one.params as MixedParams).waits : one.sent.length === 0
      )
      if (candidates.length > 0) await send(pick(candidates))
    }],
    [26, async () => {
      const ms = pick(ADVANCES)
      figures.advancedMs += ms
      await state.advance(ms)
    }],
    [8, async () => {
      const before = life
      if (gates.length > 0) figures.restartsWhileHeld++
      state = await state.restart()
      life = before + 1
      workflows = build()
      figures.restarts++
      // The new instance starts its work (the alarm, or the early timer) as the clock moves.
      await state.advance(0)
    }],
    [8, async () => {
      const candidates = live().filter((one) => !one.paused)
      if (candidates.length === 0) return
      const one = pick(candidates)
      if (await control(one, "pause", (handle) => handle.pause())) {
        one.paused = true
        figures.pauses++
      }
    }],
    [10, async () => {
      // A pause asked during the last step lets it finish: the instance may have completed meanwhile.
      const candidates = live().filter((one) => one.paused)
      if (candidates.length === 0) return
      const one = pick(candidates)
      await control(one, "resume", (handle) => handle.resume())
      one.paused = false
    }],
    [6, async () => {
      // Pause and resume at once: a resume wakes a suspended instance whatever it waits for, and its run
      // must suspend again on what is not due yet (a sleep, a retry's delay, a wait).
      const candidates = live().filter((one) => !one.paused)
      if (candidates.length === 0) return
      const one = pick(candidates)
      if (await control(one, "pause and resume", async (handle) => (await handle.pause(), await handle.resume()))) figures.blips++
    }],
    [3, async () => {
      const candidates = live()
      if (candidates.length === 0) return
      const one = pick(candidates)
      if (await control(one, "terminate", (handle) => handle.terminate())) {
        one.terminated = true
        figures.terminates++
      }
    }],
    [9, async () => {
      for (const open of gates.splice(0)) open()
      await state.advance(0)
    }]
  ]
  const total = operations.reduce((sum, [weight]) => sum + weight, 0)

  for (let n = 0; n < STEPS; n++) {
    let roll = random() * total
    const [, operation] = operations.find(([weight]) => (roll -= weight) < 0) ?? operations[0]!
    await operation()
    figures.operations++
    audit(`after operation ${n}`)
  }

  // The end: every pause resumed, every event sent, every gate opened, time run out.
  for (const one of known.filter((one) => one.paused && !one.terminated)) {
    const status = rows("SELECT status FROM durability_workflows WHERE key = ?", one.key)[0]?.status
    if (status === "pending" || status === "suspended") await (await workflows[one.workflow].get(one.id)).resume()
    one.paused = false
  }
  for (let round = 0; round < 200; round++) {
    for (const one of live()) {
      if (one.workflow === "mixed") while (one.sent.length < (one.params as MixedParams).waits) await send(one)
    }
    for (const open of gates.splice(0)) open()
    await state.advance(round < 20 ? 1_000 : 3_600_000)
    audit(`draining, round ${round}`)
    figures.drainRounds = round + 1
    const [left] = rows("SELECT COUNT(*) AS n FROM durability_workflows WHERE status IN ('pending', 'suspended')")
    if (Number(left?.n) === 0 && gates.length === 0) break
  }
  const unfinished = rows("SELECT key, status, paused, waiting FROM durability_workflows WHERE status IN ('pending', 'suspended')")
  if (unfinished.length > 0) verdict.violation(`not finished after the drain: ${JSON.stringify(unfinished)}`)
  if (rows("SELECT 1 FROM durability_timers").length > 0) verdict.violation(`timers left: ${JSON.stringify(rows("SELECT * FROM durability_timers"))}`)
  if (state.storage.alarmAt !== null) verdict.violation(`an alarm left at ${state.storage.alarmAt}`)

  // The end state against the model.
  const instances = new Map(rows("SELECT * FROM durability_workflows").map((row) => [String(row.key), row]))
  const steps = rows("SELECT * FROM durability_workflow_steps ORDER BY instance, seq")
  const events = rows("SELECT * FROM durability_workflow_events ORDER BY id")
  const stepsOf = (key: string) => steps.filter((step) => step.instance === key)
  const resultOf = (step: Row | undefined) => (step?.result === null || step?.result === undefined ? undefined : Json.decode(String(step.result)))
  figures.effects = effects.length
  figures.children = [...instances.keys()].filter((key) => key.startsWith("kid/")).length

  for (const one of effects) if (one.paused) verdict.violation(`${one.key} ${one.step} attempt ${one.attempt} began while its instance was paused`)

  const checkDo = (key: string, name: string, step: Row | undefined) => {
    const ran = effects.filter((one) => one.key === key && one.step === name)
    const numbers = ran.map((one) => one.attempt)
    if (new Set(numbers).size !== numbers.length) verdict.violation(`${key} ${name}: an attempt ran twice: ${numbers}`)
    if (step === undefined) return ran
    const attempt = Number(step.attempt)
    if (numbers.some((n) => n > attempt)) verdict.violation(`${key} ${name}: ran attempts ${numbers}, stored ${attempt}`)
    if (step.status === "completed") {
      const stored = resultOf(step) as StepResult | undefined
      const last = ran.find((one) => one.attempt === attempt)
      if (stored === undefined || last === undefined || stored.effect !== last.seq || stored.attempt !== attempt) {
        verdict.violation(`${key} ${name}: stored ${JSON.stringify(stored)} at attempt ${attempt}, effects ${JSON.stringify(ran)}`)
      }
    }
    return ran
  }
  const checkSleep = (key: string, step: Row | undefined) => {
    if (step === undefined || step.status !== "completed") return
    if (step.wake_at === null || step.ended_at === null || Number(step.ended_at) < Number(step.wake_at)) {
      verdict.violation(`${key} ${step.name}: ended at ${step.ended_at}, before its wake time ${step.wake_at}`)
    }
  }
  const checkEvents = (key: string, sent: ReadonlyArray<number>, waitNames: ReadonlyArray<string>) => {
    const mine = events.filter((event) => event.instance === key)
    const payloads = mine.map((event) => (Json.decode(String(event.payload)) as { n: number }).n)
    if (JSON.stringify(payloads) !== JSON.stringify(sent)) verdict.violation(`${key}: events stored ${payloads}, sent ${sent}`)
    const consumers = mine.map((event) => event.consumed_seq).filter((seq) => seq !== null)
    if (new Set(consumers).size !== consumers.length) verdict.violation(`${key}: one wait consumed two events: ${consumers}`)
    waitNames.forEach((name, index) => {
      const wait = stepsOf(key).find((step) => step.name === name)
      if (wait?.status !== "completed") return
      const event = mine[index]
      const got = resultOf(wait) as { payload: { n: number } } | undefined
      if (event === undefined || event.consumed_seq !== wait.seq || got?.payload.n !== payloads[index]) {
        verdict.violation(`${key}: wait ${name} (step ${wait.seq}) got ${JSON.stringify(got)}, event ${JSON.stringify(event)}`)
      }
    })
    // A consumed event names a completed wait of its instance.
    for (const event of mine) {
      if (event.consumed_seq === null) continue
      const wait = stepsOf(key).find((step) => step.seq === event.consumed_seq)
      if (wait?.kind !== "event" || wait.status !== "completed") verdict.violation(`${key}: event ${event.id} consumed by ${JSON.stringify(wait)}`)
    }
  }

  for (const one of known) {
    const row = instances.get(one.key)
    if (row === undefined) {
      verdict.violation(`${one.key} lost`)
      continue
    }
    const mySteps = stepsOf(one.key)
    if (mySteps.some((step, index) => Number(step.seq) !== index + 1)) verdict.violation(`${one.key}: step positions ${mySteps.map((s) => s.seq)}`)
    if (one.terminated) {
      if (row.status !== "terminated") verdict.violation(`${one.key}: terminated by the driver, stored ${row.status}`)
    } else if (row.status !== "complete") {
      verdict.violation(`${one.key}: ended ${row.status} (${row.last_error_name}: ${row.last_error})`)
    }
    if (one.workflow === "mixed") {
      const params = one.params as MixedParams
      const names = ["s1", "nap", "s2", ...Array.from({ length: params.waits }, (_, n) => `e${n}`), ...(params.kidMs === null ? [] : ["kid"]), "hold"]
      const shape = mySteps.map((step) => String(step.name))
      if (shape.some((name, index) => names[index] !== name)) verdict.violation(`${one.key}: steps ${shape}, expected a prefix of ${names}`)
      const at = (name: string) => mySteps.find((step) => step.name === name)
      checkDo(one.key, "s1", at("s1"))
      const s2Runs = checkDo(one.key, "s2", at("s2"))
      checkDo(one.key, "hold", at("hold"))
      checkSleep(one.key, at("nap"))
      const napWake = at("nap")?.wake_at
      for (const run of s2Runs) {
        if (napWake === null || napWake === undefined || run.at < Number(napWake)) verdict.violation(`${one.key}: s2 ran at ${run.at}, the nap wakes at ${napWake}`)
      }
      checkEvents(one.key, one.sent, names.filter((name) => /^e\d$/.test(name)))
      if (row.status === "complete") {
        if (shape.join() !== names.join()) verdict.violation(`${one.key}: complete with steps ${shape}, expected ${names}`)
        const output = Json.decode(String(row.output)) as { s1: unknown; s2: unknown; events: Array<{ n: number }>; kid: string | null; s3: unknown }
        const kidId = `${one.id}-${names.indexOf("kid") + 1}`
        const expected = {
          s1: resultOf(at("s1")),
          s2: resultOf(at("s2")),
          events: one.sent.map((n) => ({ n })),
          kid: params.kidMs === null ? null : `kid ${kidId}`,
          s3: resultOf(at("hold"))
        }
        if (JSON.stringify(output) !== JSON.stringify(expected)) verdict.violation(`${one.key}: output ${JSON.stringify(output)}, expected ${JSON.stringify(expected)}`)
        if (params.flaky && Number(at("s1")?.attempt) < 2) verdict.violation(`${one.key}: flaky s1 completed at attempt ${at("s1")?.attempt}`)
      }
      const kidKey = `kid/${one.id}-${names.indexOf("kid") + 1}`
      const kid = instances.get(kidKey)
      if (kid !== undefined) {
        // A child runs to its end whatever its parent became.
        if (kid.status !== "complete") verdict.violation(`${kidKey}: ended ${kid.status}`)
        const kidSteps = stepsOf(kidKey)
        checkDo(kidKey, "work", kidSteps.find((step) => step.name === "work"))
        checkSleep(kidKey, kidSteps.find((step) => step.name === "kid nap"))
      } else if (at("kid") !== undefined) verdict.violation(`${one.key}: its child ${kidKey} is missing`)
    } else {
      checkEvents(one.key, one.sent, ["wait"])
      const wait = mySteps.find((step) => step.name === "wait")
      if (row.status === "complete") {
        const output = Json.decode(String(row.output)) as { got?: { n: number }; timedOut?: string }
        const sentAt = events.filter((event) => event.instance === one.key).map((event) => Number(event.sent_at))
        if (output.timedOut !== undefined) {
          figures.timedOut++
          if (output.timedOut !== "WorkflowTimeoutError") verdict.violation(`${one.key}: timed out with ${output.timedOut}`)
          // Timed out only when no event came before its deadline, and not before the deadline.
          if (wait === undefined || sentAt.some((at) => at < Number(wait.wake_at))) verdict.violation(`${one.key}: timed out with an event sent before ${wait?.wake_at}: ${sentAt}`)
          checkSleep(one.key, wait === undefined ? undefined : { ...wait, status: "completed" })
        } else if (output.got?.n !== 1 || one.sent.length === 0) {
          verdict.violation(`${one.key}: output ${JSON.stringify(output)}, sent ${one.sent}`)
        }
      }
    }
  }
  for (const key of instances.keys()) {
    if (!known.some((one) => one.key === key) && !key.startsWith("kid/")) verdict.violation(`an unknown instance ${key}`)
  }
  figures.elapsedMs = Date.now() - startedAt
  return { verdict, figures }
}

describe("workflows model", () => {
  it("seeded histories keep every invariant: outputs, steps once per position, events once, no early wake-up, no lost wake-up", {
    // A deadline, not a premise: about 13 s on a quiet 2-core machine; only a hang should reach it.
    timeout: 120_000
  }, async () => {
    const seeds = ONLY === undefined ? SEEDS : [Number(ONLY)]
    const all: Array<Record<string, unknown>> = []
    const verdict = Verdict.make()
    for (const seed of seeds) {
      const run = await runSeed(seed)
      all.push(run.figures)
      if (process.env.DURABILITY_WORKFLOWS_MODEL_VERBOSE !== undefined) console.log(JSON.stringify(run.figures))
      for (const message of run.verdict.violations) verdict.violation(`seed ${seed}: ${message}`)
      for (const message of run.verdict.harnessProblems) verdict.harness(`seed ${seed}: ${message}`)
    }
    const sum = (field: string) => all.reduce((total, figures) => total + Number(figures[field] ?? 0), 0)
    console.log(`workflows model: ${JSON.stringify({
      seeds: seeds.length,
      operations: sum("operations"),
      instances: sum("instances"),
      children: sum("children"),
      events: sum("events"),
      refusedEvents: sum("refusedEvents"),
      restarts: sum("restarts"),
      restartsWhileHeld: sum("restartsWhileHeld"),
      pauses: sum("pauses"),
      pauseResumeBlips: sum("blips"),
      terminates: sum("terminates"),
      effects: sum("effects"),
      timedOut: sum("timedOut"),
      violations: verdict.violations.length
    })}`)
    expect(Verdict.failure("workflows model", verdict, 30)?.message).toBeUndefined()
  })
})
