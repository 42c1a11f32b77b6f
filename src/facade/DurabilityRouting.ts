/**
 * `DurabilityRouting`: inside a Durable Object, the object's load telemetry (a `RoutingLoad` to give
 * a fanout or a log as `routing`); outside, `DurabilityRouting.client(…)` routes pushes to the
 * objects of an application class.
 * @packageDocumentation
 */
import type { EnqueueResult } from "../routing/RoutingLoad.js"
import { RoutingLoad } from "./RoutingLoad.js"
import type { Sharding } from "./RoutingClient.js"
import { checkClientConfig, namespaceClient, type RoutingInvoker, type RoutingSession, sessionOf } from "./routingSession.js"

export type { RoutingInvoker, RoutingSession }

/** How `DurabilityRouting.client` finds and calls the target's objects. */
export interface DurabilityRoutingConfig<Target extends Rpc.DurableObjectBranded, Input, Value, Context = unknown> {
  /** The application's Durable Object class (exported from the worker's main module). */
  target: { prototype: Target }
  /**
   * The name `target` is exported under: its namespace is the worker's export of that name
   * (`exports` of `cloudflare:workers`), looked up at each push. Not needed with `namespace`.
   */
  exportName?: string | undefined
  /** The namespace to use instead (a binding, or another worker's): called at each push. */
  namespace?: (() => DurableObjectNamespace<Target>) | undefined
  /** Calls the method of your choice on the shard's stub, once; its answer is returned as it is. */
  invoke(stub: DurableObjectStub<Target>, input: Input): Promise<EnqueueResult<Value>>
  /** Your choice of shard; without it, the built-in adaptive selection over `shard-<n>`. */
  sharding?: Sharding<Input, Context> | undefined
  /** The stored backlog above which the built-in selection widens: 1000 by default. */
  softBacklogLimit?: number | undefined
}

// Loaded only when a push looks a namespace up by export name: code that passes `namespace` (Node
// tests, other runtimes) never loads the Workers-only module.
const workerExports = async (): Promise<unknown> => (await import("cloudflare:workers")).exports

/**
 * Inside an object: its load telemetry (see `RoutingLoad`), to hand to the capabilities that report load.
 * Outside: `DurabilityRouting.client(config)` routes each push to one object of `target`.
 */
export class DurabilityRouting extends RoutingLoad {
  /**
   * A routing client over the objects of `config.target`: each push picks one shard (by `sharding`,
   * else adaptively), gets its stub (`getByName(shard, { locationHint })`) and calls `invoke` once.
   * A `TypeError` naming the field when the config is wrong.
   */
  static client<Target extends Rpc.DurableObjectBranded, Input, Value, Context = unknown>(
    config: DurabilityRoutingConfig<Target, Input, Value, Context>
  ): RoutingSession<Input, Value, Context> {
    checkClientConfig(config)
    return sessionOf(namespaceClient<DurableObjectStub<Target>, Input, Value, Context>(config, workerExports))
  }
}
