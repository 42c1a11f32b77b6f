/**
 * `durability/routing`: route pushes to Durable Objects. `DurabilityRouting` is an object's load
 * telemetry inside it (a `RoutingLoad`) and, through `DurabilityRouting.client(…)`, the client that
 * picks one shard per push and calls it once, learning each shard's load from its answers.
 * `RoutingClient` is that client over any transport (`invoke(address, input)`). The Effect API is
 * `RoutingClient` and `RoutingLoad` in `durability/effect`.
 * @module durability/routing
 */
export { DurabilityRouting } from "./facade/DurabilityRouting.js"
export type { DurabilityRoutingConfig, RoutingInvoker, RoutingSession } from "./facade/DurabilityRouting.js"
export { RoutingClient, RoutingError } from "./facade/RoutingClient.js"
export type { LocationHint, RoutingAddress, RoutingClientConfig, RoutingTarget, Sharding } from "./facade/RoutingClient.js"
export { hashedSharding } from "./facade/hashedSharding.js"
export type { HashedShardingOptions } from "./facade/hashedSharding.js"
export type { EnqueueResult, LoadSnapshot, ProcessingLoad } from "./routing/RoutingLoad.js"
