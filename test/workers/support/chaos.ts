/**
 * The driver's side of the eviction chaos tests (chaos.test.ts, chaos.jobs.test.ts,
 * chaos.leases.test.ts): its patience with its own calls, and the lost-wake-up audit's reading of a
 * null alarm. Both tell what the driver could not do (a harness problem) from what the engine did
 * wrong (a violation); see test/shared/Verdict.ts.
 */
import { sleep } from "./lab.js"

/** What the driver allows one of its own calls before it gives up on it. */
export interface Patience {
  /** From the first try: a call still unanswered (or failing) after this long is a harness problem. */
  readonly withinMs: number
  /** Between tries: a reset makes the object unreachable for a moment. */
  readonly pauseMs: number
}

/**
 * A reset makes the object unreachable until workerd starts it again on the next call, a matter of
 * milliseconds (hundreds with two CPU hogs beside the suite). Ten seconds of tries is far beyond that:
 * a call still unanswered then is the harness's problem (workerd stalled, the driver wrong), not a
 * finding about the engine. Set `withinMs` to 1 to see a harness failure.
 */
export const DRIVER_CALL: Patience = { withinMs: 10_000, pauseMs: 10 }

export type Answer<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly problem: string }

/**
 * Sends a call of the driver until it is answered: each try is raced against what is left of
 * `withinMs` (a try that hangs counts as failed), a failed try is sent again after `pauseMs`, with
 * `onRetry` first (to take a fresh stub). Every call sent this way must be idempotent: a try a reset
 * cut may have committed. Once `withinMs` is spent, answers the harness problem's text.
 */
export const patiently = async <A>(
  label: string,
  patience: Patience,
  send: () => Promise<A>,
  onRetry: () => void = () => undefined
): Promise<Answer<A>> => {
  const started = Date.now()
  let last: unknown = undefined
  for (let tries = 1;; tries++) {
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), Math.max(0, started + patience.withinMs - Date.now()))
    })
    try {
      const answer = await Promise.race([send().then((value) => ({ value })), timeout])
      if (answer !== "timeout") return { ok: true, value: answer.value }
      last = "no answer"
    } catch (error) {
      last = error
    } finally {
      clearTimeout(timer)
    }
    if (Date.now() - started >= patience.withinMs) {
      return { ok: false, problem: `${label}: not answered within the driver's ${patience.withinMs} ms (${tries} tries, last: ${String(last)})` }
    }
    onRetry()
    await sleep(patience.pauseMs)
  }
}

/** An `alarm(info)` delivery as a chaos object records it (`info` is "null" for `runDurableObjectAlarm`). */
export interface Delivery {
  readonly seq: number
  readonly at: number
  /** When `alarm()` returned; null while it runs, and for ever when a reset cut it. */
  readonly ended_at: number | null
  readonly instance: string
  readonly info: string
}

/** One look at a chaos object: its clock, its live instance, the alarm, and by when the alarm must fire. */
export interface AlarmLook {
  readonly now: number
  readonly instance: string
  readonly alarm: number | null
  /** max(the earliest due, now + alarmMinDelayMs); null when nothing is due. */
  readonly latest: number | null
}

export interface AlarmWatch {
  /** Looks at the object; undefined when a reset cut the look (nothing to say). */
  readonly look: () => Promise<AlarmLook | undefined>
  /** The object's deliveries still running, or begun or ended at or after `since`. */
  readonly deliveries: (since: number) => Promise<ReadonlyArray<Delivery>>
  /** The driver's own `runDurableObjectAlarm` calls in flight, and how many it began so far. */
  readonly kicks?: { readonly inFlight: ReadonlySet<Promise<unknown>>; readonly begun: () => number }
}

/**
 * How long the audit waits for an alarm delivery to begin once `getAlarm()` read null: the platform
 * calls `alarm()` as soon as it takes the alarm, after starting the object if a reset evicted it (a
 * few ms; hundreds under load). A wake-up really lost stays lost, so this only sets how long such a
 * loss takes to show, and how slow workerd may be before the audit mistakes a delivery for a loss.
 */
const DELIVERY_START_MS = 3_000
/** How long the audit waits for a delivery in flight to end before it looks again (a pass runs its batch, handlers included). */
const DELIVERY_END_MS = 15_000
/** Looks at most: each after the delivery seen in flight ended, when the next may already be running. */
const LOOKS = 5
const POLL_MS = 25

export type Coverage =
  | { readonly _tag: "covered" | "cut" }
  | { readonly _tag: "violation" | "harness"; readonly message: string }

/**
 * The lost-wake-up invariant: whatever is due has the platform alarm by `latest`. `getAlarm()` reads
 * null while an alarm is delivered (from the moment the platform takes it until the pass re-arms it,
 * its first step) and while the driver's `runDurableObjectAlarm` runs (it deletes the alarm first),
 * so a null alarm is a loss only when no delivery is in flight: on a null alarm the audit waits for
 * the delivery in flight to end (or for one to begin, within DELIVERY_START_MS) and looks again. A
 * violation: an alarm later than `latest`, or none with no delivery in flight. A harness problem: a
 * delivery in flight at every look.
 */
export const alarmCoverage = async (watch: AlarmWatch): Promise<Coverage> => {
  for (let looks = 1; looks <= LOOKS; looks++) {
    const kicksBefore = watch.kicks?.begun() ?? 0
    const kicking = (watch.kicks?.inFlight.size ?? 0) > 0
    const seen = await watch.look()
    if (seen === undefined) return { _tag: "cut" }
    if (seen.latest === null || (seen.alarm !== null && seen.alarm <= seen.latest)) return { _tag: "covered" }
    if (seen.alarm !== null) return { _tag: "violation", message: `the alarm is ${seen.alarm}, later than ${seen.latest} (now ${seen.now})` }
    // The driver's own runDurableObjectAlarm overlapped the look: look again once it ended.
    if (kicking || (watch.kicks?.begun() ?? 0) !== kicksBefore || (watch.kicks?.inFlight.size ?? 0) > 0) {
      await Promise.all([...(watch.kicks?.inFlight ?? [])])
      continue
    }
    const inFlight = async () => {
      const all = await watch.deliveries(seen.now - POLL_MS).catch(() => [])
      // Only the live instance runs deliveries: a reset instance's never end.
      return all.filter((delivery) =>
        delivery.at >= seen.now - POLL_MS || (delivery.instance === seen.instance && (delivery.ended_at ?? Infinity) >= seen.now - POLL_MS)
      )
    }
    let found = await inFlight()
    for (const startBy = Date.now() + DELIVERY_START_MS; found.length === 0 && Date.now() < startBy;) {
      await sleep(POLL_MS)
      found = await inFlight()
    }
    if (found.length === 0) {
      return {
        _tag: "violation",
        message: `no alarm (now ${seen.now}, due by ${seen.latest}) and no delivery in flight for ${DELIVERY_START_MS} ms`
      }
    }
    const seqs = new Set(found.map((delivery) => delivery.seq))
    for (const endBy = Date.now() + DELIVERY_END_MS; Date.now() < endBy;) {
      const running = (await inFlight()).filter((delivery) => seqs.has(delivery.seq) && delivery.ended_at === null)
      if (running.length === 0) break
      await sleep(POLL_MS)
    }
  }
  return { _tag: "harness", message: `could not audit the alarm: a delivery was in flight at each of ${LOOKS} looks` }
}
