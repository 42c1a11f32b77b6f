/**
 * The promise face of the routing client (`RoutingClient` in `durability/effect`): the same selection,
 * observations and resize, with `Date.now()` for time and `Math.random()` for the built-in draws.
 * @packageDocumentation
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Random from "effect/Random"
import { InvalidInputError } from "../shared/Errors.js"
import * as Client from "../routing/RoutingClient.js"
import type { EnqueueResult, LoadSnapshot } from "../routing/RoutingLoad.js"

export type { LocationHint, RoutingAddress, RoutingTarget } from "../routing/RoutingClient.js"

/** A sharding function answered no shard, or a routed call was misused; nothing was called. */
export class RoutingError extends Error {
  /** Always `"RoutingError"` (kept across Workers RPC). */
  override readonly name = "RoutingError"
}

/**
 * Chooses the shard of one push: from the input, the caller's context (never stored or sent) and the
 * latest load seen per shard (a copy: changing it changes nothing in the client).
 */
export type Sharding<Input, Context = unknown> = (
  input: Input,
  context: Context | undefined,
  observations: ReadonlyMap<string, LoadSnapshot>
) => Client.RoutingTarget | Promise<Client.RoutingTarget>

/** A routing client's configuration. */
export interface RoutingClientConfig<Input, Value, Context = unknown> {
  /** Calls the chosen shard once; what it resolves to is returned as it is, a rejection rejects the push. */
  invoke(address: Client.RoutingAddress, input: Input): Promise<EnqueueResult<Value>>
  /** Your choice of shard; without it, the built-in adaptive selection over `shard-<n>`. */
  sharding?: Sharding<Input, Context> | undefined
  /** The stored backlog above which the built-in selection widens: 1000 by default (a positive safe integer). */
  softBacklogLimit?: number | undefined
}

/** What `invoke` or `sharding` threw, carried through the Effect client untouched. */
class Thrown {
  constructor(readonly error: unknown) {}
}

/** `Math.random()` as Effect's `Random`, read at each draw (so a test's spy on it is seen). */
const mathRandom: Random.Random = {
  [Random.RandomTypeId]: Random.RandomTypeId,
  next: Effect.sync(() => Math.random()),
  nextBoolean: Effect.sync(() => Math.random() < 0.5),
  nextInt: Effect.sync(() => Math.floor(Math.random() * Number.MAX_SAFE_INTEGER)),
  nextRange: (min, max) => Effect.sync(() => min + Math.random() * (max - min)),
  nextIntBetween: (min, max) => Effect.sync(() => Math.floor(min + Math.random() * (max - min))),
  shuffle: (elements) =>
    Effect.sync(() => {
      const items = Array.from(elements)
      for (let i = items.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1))
        ;[items[i], items[j]] = [items[j]!, items[i]!]
      }
      return Chunk.fromIterable(items)
    })
}

/** The error as the promise face throws it. */
export const thrownOf = (cause: Cause.Cause<unknown>): unknown => {
  const error = Cause.squash(cause)
  if (error instanceof Thrown) return error.error
  if (error instanceof Client.RoutingError) return new RoutingError(error.message)
  if (error instanceof InvalidInputError) return error.kind === "range" ? new RangeError(error.message) : new TypeError(error.message)
  return error
}

/**
 * Routes each push to one shard and calls it once. A rejection (`success: false`) is returned as it
 * is, with the shard's load; a rejected `invoke` rejects the push and records nothing. Nothing is
 * retried or rerouted: the caller decides.
 */
export class RoutingClient<Input, Value, Context = unknown> {
  readonly #client: Client.RoutingClient<Input, Value, Context, Thrown>

  constructor(config: RoutingClientConfig<Input, Value, Context>) {
    if (typeof config !== "object" || config === null) throw new TypeError("RoutingClient needs a config object")
    const { invoke, sharding } = config
    const made = Effect.runSyncExit(Client.make<Input, Value, Context, Thrown, never, Thrown>({
      invoke: typeof invoke === "function"
        ? (address, input) => Effect.tryPromise({ try: () => invoke(address, input), catch: (error) => new Thrown(error) })
        : invoke,
      sharding: typeof sharding === "function"
        ? (input, context, observations) =>
          Effect.tryPromise({ try: async () => sharding(input, context, observations), catch: (error) => new Thrown(error) })
        : sharding,
      softBacklogLimit: config.softBacklogLimit
    }))
    if (Exit.isFailure(made)) throw thrownOf(made.cause)
    this.#client = made.value
  }

  /** The latest load per shard, younger than its window: copies, in the order they were recorded. */
  observations(): Map<string, LoadSnapshot> {
    return Effect.runSync(this.#client.observations())
  }

  /**
   * Routes `input` whole to one shard and calls it once: the shard's answer, a `RoutingError` when the
   * sharding answers no shard, or what `invoke` rejected with.
   */
  push(input: Input, context?: Context): Promise<EnqueueResult<Value>> {
    return Effect.runPromiseExit(Effect.withRandom(this.#client.push(input, context), mathRandom)).then((exit) => {
      if (Exit.isSuccess(exit)) return exit.value
      throw thrownOf(exit.cause)
    })
  }
}
