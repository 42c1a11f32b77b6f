/**
 * The stable-key preset of the promise face: `RoutingClient.hashed` of the Effect face, checked at once.
 * @packageDocumentation
 */
import { InvalidInputError } from "../shared/Errors.js"
import type * as Client from "../routing/RoutingClient.js"
import { RoutingError as EffectRoutingError } from "../routing/RoutingError.js"
import { hashedSettings, hashedTarget } from "../routing/selection.js"
import { RoutingError } from "./RoutingClient.js"

/** A hashed preset's options: `shards`, `key(input)`, and optionally the objects' `name` and a `locationHint`. */
export type HashedShardingOptions<Input> = Client.HashedOptions<Input>

/**
 * A `sharding` that sends every input to the shard of `key(input)`: FNV-1a 32-bit of its UTF-8 bytes
 * mod `shards`, named `${name}:${index}` (`name` is `"shard"` by default). The same as the jobs router's
 * routing: with `name: "jobs"` and the router's `shards`, a key goes to the object the router uses.
 * A `TypeError` or `RangeError` naming the option when one is wrong; a push whose `key` returns no
 * string fails with a `RoutingError`.
 */
export const hashedSharding = <Input>(options: HashedShardingOptions<Input>): (input: Input) => Client.RoutingTarget => {
  const settings = hashedSettings(options)
  if (settings instanceof InvalidInputError) throw settings.kind === "range" ? new RangeError(settings.message) : new TypeError(settings.message)
  return (input) => {
    const target = hashedTarget(settings, input)
    if (target instanceof EffectRoutingError) throw new RoutingError(target.message)
    return target
  }
}
