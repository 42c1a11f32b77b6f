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
 * import { Effect } from "effect"
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
import * as Schema from "effect/Schema"
import { InvalidInputError } from "../shared/Errors.js"
import { shardName, shardOf } from "../shared/sharding.js"
import { shown } from "../shared/validate.js"
import type { EnqueueResult, LoadSnapshot } from "./RoutingLoad.js"

export type { EnqueueResult, LoadSnapshot }

/** Where a new Durable Object may be placed (Cloudflare's `DurableObjectLocationHint`). */
export type LocationHint = "wnam" | "enam" | "sam" | "weur" | "eeur" | "apac" | "oc" | "afr" | "me"

/** The shard one push goes to: its object's name, and where to place the object if it does not exist yet. */
export interface RoutingAddress {
  readonly shard: string
  /** Only where a new object is created; an existing object stays where it is. */
  readonly locationHint?: LocationHint
}

/** What a sharding function answers: a shard name, or a name with a location hint. */
export type RoutingTarget = string | { readonly shard: string; readonly locationHint?: LocationHint | undefined }

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

/** A sharding function answered no shard: not a non-empty string, nor `{ shard, locationHint? }` with one. */
export class RoutingError extends /* @__PURE__ */ Schema.TaggedError<RoutingError>("durability/RoutingError")("RoutingError", {
  message: Schema.String
}) {}

/** The default `softBacklogLimit`. */
export const DEFAULT_SOFT_BACKLOG_LIMIT = 1_000
/** How many shards' observations a client keeps; the oldest recorded goes first. */
export const MAX_OBSERVATIONS = 1_024
/** The least time between two widenings of the built-in selection. */
export const WIDEN_INTERVAL_MS = 1_000

const NO_SHARD = "Sharding must return a non-empty shard key or { shard, locationHint }"

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

/** The address of a sharding's answer, or why it is none. */
export const addressOf = (target: unknown): RoutingAddress | RoutingError => {
  const shard = typeof target === "string" ? target : isObject(target) ? target.shard : undefined
  if (typeof shard !== "string" || shard.length === 0) return new RoutingError({ message: NO_SHARD })
  const hint = isObject(target) ? target.locationHint : undefined
  if (hint === undefined) return { shard }
  if (typeof hint !== "string") return new RoutingError({ message: `locationHint must be a string, got ${shown(hint)}` })
  return { shard, locationHint: hint as LocationHint }
}

/** A snapshot whose window has passed is no evidence of the shard's load now. */
const isStale = (load: LoadSnapshot, now: number) => now - load.observedAt >= load.windowMs

const isSnapshot = (value: unknown): value is LoadSnapshot =>
  isObject(value) && typeof value.observedAt === "number" && typeof value.windowMs === "number" &&
  isObject(value.inbound) && isObject(value.outbound) && typeof value.outbound.pendingDeliveries === "number"

/** Who is busier: the time the calls in flight are expected to take, both directions (no samples count as 0). */
const pressure = (load: LoadSnapshot) =>
  load.inbound.inFlight * (load.inbound.averageProcessingMs ?? 0) +
  load.outbound.inFlight * (load.outbound.averageProcessingMs ?? 0)

/**
 * The better of two drawn names: one never seen first (it may be new capacity), then the lower stored
 * backlog, then the lower pressure; the first drawn on a tie. Backlog and timing are compared apart:
 * a backlog counts stored deliveries, timing describes calls, and no honest drain time mixes them.
 */
export const choose = (first: string, second: string, observations: ReadonlyMap<string, LoadSnapshot>): string => {
  const a = observations.get(first)
  const b = observations.get(second)
  if (a === undefined) return first
  if (b === undefined) return second
  if (a.outbound.pendingDeliveries !== b.outbound.pendingDeliveries) {
    return a.outbound.pendingDeliveries < b.outbound.pendingDeliveries ? first : second
  }
  return pressure(a) <= pressure(b) ? first : second
}

/** The built-in selection's name of shard `index`. */
export const adaptiveShard = (index: number): string => `shard-${index}`

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

/** A stable-key sharding: the shard of `key(input)`, FNV-1a 32-bit of its UTF-8 bytes mod `shards`. */
export interface HashedOptions<Input> {
  /** How many shards; a key's shard never changes while this does not. */
  readonly shards: number
  /** The key whose shard the input goes to. */
  readonly key: (input: Input) => string
  /** The shards' object names are `${name}:${index}`: `"shard"` by default; `"jobs"` addresses `JobsRouter`'s defaults. */
  readonly name?: string | undefined
  /** Where new shards' objects are placed. */
  readonly locationHint?: LocationHint | undefined
}

/** A hashed preset's options, checked, with the default name. */
export interface HashedSettings<Input> {
  readonly shards: number
  readonly key: (input: Input) => string
  readonly name: string
  readonly locationHint: LocationHint | undefined
}

/** The checked options of a hashed preset, or the first wrong one. */
export const hashedSettings = <Input>(options: HashedOptions<Input>): HashedSettings<Input> | InvalidInputError => {
  if (!isObject(options)) return new InvalidInputError({ field: "options", kind: "type", message: "hashed needs an options object" })
  const { shards, key, name, locationHint } = options
  if (typeof shards !== "number" || !Number.isSafeInteger(shards) || shards < 1) {
    return new InvalidInputError({ field: "shards", kind: "range", message: `shards must be a positive safe integer, got ${shown(shards)}` })
  }
  if (typeof key !== "function") return new InvalidInputError({ field: "key", kind: "type", message: `key must be a function, got ${shown(key)}` })
  if (name !== undefined && (typeof name !== "string" || name.length === 0)) {
    return new InvalidInputError({ field: "name", kind: "type", message: `name must be a non-empty string, got ${shown(name)}` })
  }
  if (locationHint !== undefined && typeof locationHint !== "string") {
    return new InvalidInputError({ field: "locationHint", kind: "type", message: `locationHint must be a string, got ${shown(locationHint)}` })
  }
  return { shards, key, name: name ?? "shard", locationHint }
}

/** The target of `input` under checked hashed settings, or `RoutingError` when the key is not a string. */
export const hashedTarget = <Input>(settings: HashedSettings<Input>, input: Input): RoutingTarget | RoutingError => {
  const key: unknown = settings.key(input)
  if (typeof key !== "string") return new RoutingError({ message: `key(input) must return a string, got ${shown(key)}` })
  const shard = shardName(settings.name, shardOf(key, settings.shards))
  return settings.locationHint === undefined ? shard : { shard, locationHint: settings.locationHint }
}

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
