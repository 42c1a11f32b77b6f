/**
 * Routing pushes to Durable Objects: each `push` picks **one** shard and calls it **once** through the
 * `invoke` you give (any RPC method, any transport). Nothing is retried or rerouted: a rejection
 * (`success: false`) is returned as it is, and a transport failure fails the push with nothing
 * recorded, because the work may or may not have been stored. The caller decides what to do next.
 *
 * Every answer carries the shard's load (`EnqueueResult.load`, see `RoutingLoad`); the client keeps the
 * latest one per shard (at most 1024, none older than its window) and shows them to a custom
 * `sharding` as deep copies. Without `sharding`, the built-in selection draws two names `shard-<n>`
 * among the current width (power of two choices) and prefers one it has never seen, then the lower
 * stored backlog, then the lower in-flight pressure; the width grows by one when a shard reports a
 * backlog above `softBacklogLimit` (at most once a second) and shrinks by one after a calm window.
 * The observations live in this client's memory only: routing is best effort per isolate, not a global
 * autoscaler.
 *
 * Time comes from `Clock` and the selection's draws from `Random`, so tests drive both.
 *
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { RoutingClient } from "durability/effect"
 *
 * const program = Effect.gen(function*() {
 *   const client = yield* RoutingClient.make({
 *     invoke: (address, order: { id: string }) =>
 *       Effect.promise(() => env.ORDERS.getByName(address.shard).enqueue(order))
 *   })
 *   return yield* client.push({ id: "o-1" })
 * })
 * ```
 * @packageDocumentation
 */
import * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import { InvalidInputError } from "../shared/Errors.js"
import { shown } from "../shared/validate.js"
import type { EnqueueResult, LoadSnapshot } from "./RoutingLoad.js"
import { RoutingError } from "./RoutingError.js"
import { adaptiveShard, addressOf, choose, hashedSettings, hashedTarget, isObject, isStale, type HashedOptions, type RoutingAddress, type RoutingTarget } from "./selection.js"

export { RoutingError }
export type { HashedOptions, LocationHint, RoutingAddress, RoutingTarget } from "./selection.js"
export { choose }

export type { EnqueueResult, LoadSnapshot }

/**
 * Chooses the shard of one push from the input, the caller's context (local to the caller: never stored
 * or sent) and the latest load seen per shard (a deep copy the function may keep or change freely).
 */
export type Sharding<Input, Context = unknown, E = never, R = never> = (
  input: Input,
  context: Context | undefined,
  observations: ReadonlyMap<string, LoadSnapshot>
) => RoutingTarget | Effect.Effect<RoutingTarget, E, R>

/** How a client routes and calls. */
export interface Options<Input, Value, Context = unknown, E = never, R = never, SE = never, SR = never> {
  /** Calls the chosen shard once; its answer is returned as it is, its failure fails the push. */
  readonly invoke: (address: RoutingAddress, input: Input) => Effect.Effect<EnqueueResult<Value>, E, R>
  /** Your choice of shard; without it, the built-in adaptive selection (`shard-<n>`). */
  readonly sharding?: Sharding<Input, Context, SE, SR> | undefined
  /** The stored backlog (`outbound.pendingDeliveries`) above which the built-in selection widens: 1000 by default. */
  readonly softBacklogLimit?: number | undefined
}

/** A routing client: see the module's description. */
export interface RoutingClient<Input, Value, Context = unknown, E = never, R = never> {
  /**
   * Routes `input` whole to one shard and calls it once: the shard's answer (accepted or rejected, with
   * its load), `RoutingError` when the sharding answers no shard, or `invoke`'s failure (nothing recorded).
   */
  readonly push: (input: Input, context?: Context) => Effect.Effect<EnqueueResult<Value>, E | RoutingError, R>
  /** The latest load per shard, younger than its window, as deep copies in the order they were recorded. */
  readonly observations: () => Effect.Effect<Map<string, LoadSnapshot>>
  /** How many names (`shard-0` … `shard-<width − 1>`) the built-in selection draws from now. */
  readonly width: () => Effect.Effect<number>
}

/** The default `softBacklogLimit`. */
export const DEFAULT_SOFT_BACKLOG_LIMIT = 1_000
/** How many shards' observations a client keeps; the oldest recorded goes first. */
export const MAX_OBSERVATIONS = 1_024
/** The least time between two widenings of the built-in selection. */
export const WIDEN_INTERVAL_MS = 1_000

const isSnapshot = (value: unknown): value is LoadSnapshot =>
  isObject(value) && typeof value.observedAt === "number" && typeof value.windowMs === "number" &&
  isObject(value.inbound) && isObject(value.outbound) && typeof value.outbound.pendingDeliveries === "number"

const checkLimit = (value: unknown): number | InvalidInputError => {
  if (value === undefined) return DEFAULT_SOFT_BACKLOG_LIMIT
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 1) return value
  return new InvalidInputError({
    field: "softBacklogLimit",
    kind: "range",
    message: `softBacklogLimit must be a positive safe integer, got ${shown(value)}`
  })
}

/**
 * A client; `InvalidInputError` (field `softBacklogLimit`, `invoke` or `sharding`) when an option is
 * wrong. Its observations and width live in the client: make one per isolate and keep it.
 */
export const make = <Input, Value, Context = unknown, E = never, R = never, SE = never, SR = never>(
  options: Options<Input, Value, Context, E, R, SE, SR>
): Effect.Effect<RoutingClient<Input, Value, Context, E | SE, R | SR>, InvalidInputError> =>
  Effect.suspend(() => {
    if (!isObject(options) || typeof options.invoke !== "function") {
      return Effect.fail(new InvalidInputError({ field: "invoke", kind: "type", message: "invoke must be a function" }))
    }
    if (options.sharding !== undefined && typeof options.sharding !== "function") {
      return Effect.fail(
        new InvalidInputError({ field: "sharding", kind: "type", message: `sharding must be a function, got ${shown(options.sharding)}` })
      )
    }
    const limit = checkLimit(options.softBacklogLimit)
    if (limit instanceof InvalidInputError) return Effect.fail(limit)
    return Effect.succeed(unsafeMake(options, limit))
  })

const unsafeMake = <Input, Value, Context, E, R, SE, SR>(
  options: Options<Input, Value, Context, E, R, SE, SR>,
  limit: number
): RoutingClient<Input, Value, Context, E | SE, R | SR> => {
  const { invoke, sharding } = options
  // Insertion order is recording order: the first key is the oldest, evicted past MAX_OBSERVATIONS.
  const observed = new Map<string, LoadSnapshot>()
  let width = 1
  // Never resized yet: the first backlog report may widen at once.
  let lastResize = Number.NEGATIVE_INFINITY

  const current = (now: number): Map<string, LoadSnapshot> => {
    for (const [shard, load] of observed) if (isStale(load, now)) observed.delete(shard)
    return new Map([...observed].map(([shard, load]) => [shard, structuredClone(load)]))
  }

  const record = (shard: string, load: LoadSnapshot) => {
    const prior = observed.get(shard)
    // An answer that overtook a newer one on the way back is older news: keep the newer.
    if (prior !== undefined && load.observedAt < prior.observedAt) return
    observed.delete(shard)
    observed.set(shard, structuredClone(load))
    if (observed.size > MAX_OBSERVATIONS) observed.delete(observed.keys().next().value!)
  }

  const resize = (load: LoadSnapshot, now: number) => {
    if (isStale(load, now)) return
    if (load.outbound.pendingDeliveries > limit && now - lastResize >= WIDEN_INTERVAL_MS) {
      width += 1
      lastResize = now
      return
    }
    const calm = load.outbound.pendingDeliveries < limit / 4 && load.inbound.inFlight === 0 && load.outbound.inFlight === 0
    if (width > 1 && calm && now - lastResize >= load.windowMs) {
      width -= 1
      lastResize = now
    }
  }

  const select = (observations: ReadonlyMap<string, LoadSnapshot>) =>
    Effect.map(Effect.all([Random.next, Random.next]), ([a, b]) =>
      choose(adaptiveShard(Math.floor(a * width)), adaptiveShard(Math.floor(b * width)), observations))

  const target = (input: Input, context: Context | undefined, observations: ReadonlyMap<string, LoadSnapshot>) => {
    if (sharding === undefined) return select(observations)
    const chosen = sharding(input, context, observations)
    return Effect.isEffect(chosen) ? chosen : Effect.succeed(chosen)
  }

  const push = Effect.fn("RoutingClient.push")(function*(input: Input, context?: Context) {
    const observations = current(yield* Clock.currentTimeMillis)
    const address = addressOf(yield* target(input, context, observations))
    if (address instanceof RoutingError) return yield* address
    const response = yield* invoke(address, input)
    if (!isObject(response) || !isSnapshot(response.load)) {
      return yield* new RoutingError({ message: `invoke must answer an EnqueueResult with its load, got ${shown(response)}` })
    }
    const now = yield* Clock.currentTimeMillis
    record(address.shard, response.load)
    if (sharding === undefined) resize(response.load, now)
    return response
  })

  return {
    push,
    observations: () => Effect.map(Clock.currentTimeMillis, current),
    width: () => Effect.sync(() => width)
  }
}

/**
 * A client as a layer under your own tag (a client is generic in its input and value, so the tag is
 * yours): `class Orders extends Context.Tag("Orders")<Orders, RoutingClient.RoutingClient<Order, string>>() {}`.
 */
export const layer = <Id, Input, Value, Context = unknown, E = never, R = never, SE = never, SR = never>(
  tag: Context.Tag<Id, RoutingClient<Input, Value, Context, E | SE, R | SR>>,
  options: Options<Input, Value, Context, E, R, SE, SR>
): Layer.Layer<Id, InvalidInputError> => Layer.effect(tag, make(options))

// ---------------------------------------------------------------------------------------------
// The hashed preset

/**
 * The stable-key preset: every input with the same key goes to the same shard (affinity, and order
 * among one key's pushes when they are made one after another), whatever the load. The same hash and
 * names as `JobsRouter` (`name: "jobs"`, the same `shards`) address the same objects.
 */
export const hashed = <Input>(options: HashedOptions<Input>): Effect.Effect<Sharding<Input, unknown, RoutingError>, InvalidInputError> =>
  Effect.suspend(() => {
    const settings = hashedSettings(options)
    if (settings instanceof InvalidInputError) return Effect.fail(settings)
    return Effect.succeed((input: Input) => {
      const target = hashedTarget(settings, input)
      return target instanceof RoutingError ? Effect.fail(target) : Effect.succeed(target)
    })
  })
