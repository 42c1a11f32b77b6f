/**
 * Load telemetry of one object, for routing: how many calls are in flight and how long the calls
 * that finished in the last minute took, per direction (`inbound`: calls that hand work to this
 * object; `outbound`: deliveries this object makes). It is advisory and in memory, per isolate:
 * an eviction forgets it. The backlog is never taken from it: a snapshot is given the count of
 * work still stored (`pendingDeliveries`), so a caller compares shards on durable state.
 *
 * The fanout and the retained log return a snapshot with every enqueue (`EnqueueResult`), and a
 * routing client keeps the latest one per shard to choose where the next push goes.
 *
 * ```ts
 * import { Effect } from "effect"
 * import { RoutingLoad } from "durability/effect"
 *
 * const program = Effect.gen(function*() {
 *   const load = yield* RoutingLoad.make
 *   const done = yield* load.begin("inbound")
 *   // … accept the work …
 *   yield* done
 *   return yield* load.snapshot(3) // 3 deliveries still stored
 * })
 * ```
 * @packageDocumentation
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { SerializedError } from "../shared/StoredMessage.js"

export type { SerializedError }

/** Which way a counted call goes: work handed to this object, or a delivery this object makes. */
export type Direction = "inbound" | "outbound"

/** The calls of one direction over the window. */
export interface ProcessingLoad {
  /** Calls begun and not finished yet, however old. */
  inFlight: number
  /** Calls finished within the window. */
  completed: number
  /** The mean duration of the calls finished within the window, or `null` when none did. */
  averageProcessingMs: number | null
}

/** An object's load at one instant: plain data, safe to send over RPC and to keep. */
export interface LoadSnapshot {
  /** When it was taken (epoch milliseconds). */
  observedAt: number
  /** How far back `completed` and `averageProcessingMs` look: one minute. */
  windowMs: number
  /** Calls handing work to this object (enqueues, appends). */
  inbound: ProcessingLoad
  /** Outbound calls, and the work still stored that this object must deliver. */
  outbound: ProcessingLoad & { pendingDeliveries: number }
}

/**
 * What an enqueue answers: accepted with its value, or definitely rejected with its error (nothing
 * was stored), and in both cases the object's load. Uncertainty (storage or transport failed) is
 * never an answer: it is thrown or failed, because the work may have been stored.
 */
export type EnqueueResult<T, E = SerializedError> =
  | { success: true; value: T; load: LoadSnapshot }
  | { success: false; error: E; load: LoadSnapshot }

/** The window a snapshot summarizes. */
export const WINDOW_MS = 60_000

const BUCKET_MS = 1_000
const BUCKETS = WINDOW_MS / BUCKET_MS

/** One direction's counters: a ring of one-second buckets, each remembering which second it holds. */
class Ring {
  inFlight = 0
  private readonly seconds = new Array<number>(BUCKETS).fill(-1)
  private readonly counts = new Array<number>(BUCKETS).fill(0)
  private readonly totals = new Array<number>(BUCKETS).fill(0)

  add(finishedAt: number, durationMs: number): void {
    const second = Math.floor(finishedAt / BUCKET_MS)
    const slot = second % BUCKETS
    if (this.seconds[slot] !== second) {
      this.seconds[slot] = second
      this.counts[slot] = 0
      this.totals[slot] = 0
    }
    this.counts[slot]! += 1
    this.totals[slot]! += durationMs
  }

  summary(now: number): ProcessingLoad {
    const current = Math.floor(now / BUCKET_MS)
    let completed = 0
    let total = 0
    for (let slot = 0; slot < BUCKETS; slot++) {
      const second = this.seconds[slot]!
      // A bucket counts while its second lies in (now − window, now]: older ones are stale.
      if (second > current - BUCKETS && second <= current) {
        completed += this.counts[slot]!
        total += this.totals[slot]!
      }
    }
    return { inFlight: this.inFlight, completed, averageProcessingMs: completed === 0 ? null : total / completed }
  }
}

/**
 * The counters themselves, driven by times given to them: the Effect service reads `Clock`, the
 * promise class `Date.now()`. Not exported from the package.
 */
export class LoadWindow {
  private readonly rings: Record<Direction, Ring> = { inbound: new Ring(), outbound: new Ring() }

  /** Counts a call begun at `startedAt`; the returned function ends it once, at the time it is given. */
  begin(direction: Direction, startedAt: number): (finishedAt: number) => void {
    const ring = this.rings[direction]
    ring.inFlight += 1
    let finished = false
    return (finishedAt) => {
      if (finished) return
      finished = true
      ring.inFlight -= 1
      ring.add(finishedAt, Math.max(0, finishedAt - startedAt))
    }
  }

  /** The counters at `now`, with the stored work still to deliver. */
  snapshot(pendingDeliveries: number, now: number): LoadSnapshot {
    return {
      observedAt: now,
      windowMs: WINDOW_MS,
      inbound: this.rings.inbound.summary(now),
      outbound: { ...this.rings.outbound.summary(now), pendingDeliveries }
    }
  }
}

/** The service: count calls and take snapshots, on the Effect `Clock`. */
export interface Service {
  /** Counts a call as in flight; the returned effect ends it (only its first run counts). */
  readonly begin: (direction: Direction) => Effect.Effect<Effect.Effect<void>>
  /** The load now, with the given count of stored work still to deliver. */
  readonly snapshot: (pendingDeliveries: number) => Effect.Effect<LoadSnapshot>
  /** Runs `effect` counted as one call of `direction`, ended however it exits. */
  readonly measure: <A, E, R>(direction: Direction, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** The object's load telemetry, shared by the capabilities that report load. */
export class RoutingLoad extends Context.Tag("durability/RoutingLoad")<RoutingLoad, Service>() {}

/** A service over an existing window (the promise class and its Effect service share one). */
export const fromWindow = (window: LoadWindow): Service => {
  const begin = (direction: Direction) =>
    Effect.map(Clock.currentTimeMillis, (startedAt) => {
      const end = window.begin(direction, startedAt)
      return Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => end(now)))
    })
  return {
    begin,
    snapshot: (pendingDeliveries) => Effect.map(Clock.currentTimeMillis, (now) => window.snapshot(pendingDeliveries, now)),
    measure: (direction, effect) => Effect.acquireUseRelease(begin(direction), () => effect, (end) => end)
  }
}

/** A fresh, empty telemetry service. */
export const make: Effect.Effect<Service> = Effect.sync(() => fromWindow(new LoadWindow()))

/** Provides a fresh `RoutingLoad` for the object. */
export const layer: Layer.Layer<RoutingLoad> = Layer.effect(RoutingLoad, make)

/** A snapshot of nothing: no call counted, no stored work (for answers made before any telemetry). */
export const emptySnapshot = (now: number): LoadSnapshot => new LoadWindow().snapshot(0, now)
