/**
 * The pure rules of routing both faces share: a sharding's answer as an address, the built-in
 * selection's choice between two drawn names, staleness, and the hashed preset's checks and targets.
 * @internal
 */
import { InvalidInputError } from "../shared/Errors.js"
import { shardName, shardOf } from "../shared/sharding.js"
import { shown } from "../shared/validate.js"
import { RoutingError } from "./RoutingError.js"
import type { LoadSnapshot } from "./RoutingLoad.js"

/** Where a new Durable Object may be placed (Cloudflare's `DurableObjectLocationHint`). */
export type LocationHint = "wnam" | "enam" | "sam" | "weur" | "eeur" | "apac" | "oc" | "afr" | "me"

/** The shard one push goes to: its object's name, and where to place the object if it does not exist yet. */
export interface RoutingAddress {
  /** The shard's object name. */
  readonly shard: string
  /** Only where a new object is created; an existing object stays where it is. */
  readonly locationHint?: LocationHint
}

/** What a sharding function answers: a shard name, or a name with a location hint. */
export type RoutingTarget = string | { readonly shard: string; readonly locationHint?: LocationHint | undefined }

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

const NO_SHARD = "Sharding must return a non-empty shard key or { shard, locationHint }"

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

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
export const isStale = (load: LoadSnapshot, now: number) => now - load.observedAt >= load.windowMs

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

