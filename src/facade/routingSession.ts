/**
 * The parts of `DurabilityRouting.client` that need no Workers types: the namespace of a push (the
 * one given, or the class's export looked up in the worker's `exports`), and the session over a
 * routing client (a context merged over the caller's, and the `setContext` hook a transforms stub
 * drives). Structural, so Node tests run them with fake namespaces.
 * @internal
 */
import type { LoadSnapshot } from "../routing/RoutingLoad.js"
import type { EnqueueResult } from "../routing/RoutingLoad.js"
import type { LocationHint } from "../routing/RoutingClient.js"
import { shown } from "../shared/validate.js"
import { RoutingClient, RoutingError, type RoutingClientConfig } from "./RoutingClient.js"

/** What routing needs of a Durable Object namespace: a stub by name, placed by a hint when new. */
export interface NamespaceLike<Stub> {
  getByName(name: string, options?: { locationHint?: LocationHint }): Stub
}

/** Where a client finds its namespace. */
export interface NamespaceSource<Stub> {
  readonly exportName?: string | undefined
  readonly namespace?: (() => NamespaceLike<Stub>) | undefined
}

/** The worker's `exports` (`cloudflare:workers`), loaded only when a namespace is looked up by name. */
export type LoadExports = () => Promise<unknown>

/**
 * The namespace of one push: `namespace()` when given, else the worker's export named `exportName`,
 * which must be a Durable Object namespace. Resolved at each push: a missing export fails that push
 * only (`RoutingError`), and nothing is called.
 */
export const resolveNamespace = async <Stub>(source: NamespaceSource<Stub>, loadExports: LoadExports): Promise<NamespaceLike<Stub>> => {
  const given = source.namespace?.()
  if (given !== undefined && given !== null) return given
  if (source.exportName === undefined) {
    throw new RoutingError("Give exportName (the target class's export name) or an explicit namespace to resolve the routing target")
  }
  let exported: unknown
  try {
    const module = await loadExports()
    exported = typeof module === "object" && module !== null ? Reflect.get(module, source.exportName) : undefined
  } catch (error) {
    throw new RoutingError(
      `Export "${source.exportName}" cannot be looked up outside the Workers runtime (${String(error)}): give namespace() instead`
    )
  }
  if ((typeof exported !== "object" && typeof exported !== "function") || exported === null || typeof Reflect.get(exported, "getByName") !== "function") {
    throw new RoutingError(`Export "${source.exportName}" is not a Durable Object namespace`)
  }
  return exported as NamespaceLike<Stub>
}

/** The checks `DurabilityRouting.client` makes before anything runs: a `TypeError` naming the field. */
export const checkClientConfig = (config: unknown): void => {
  if (typeof config !== "object" || config === null) throw new TypeError("DurabilityRouting.client needs a config object")
  const { target, exportName, namespace, invoke, sharding } = config as Record<string, unknown>
  if (typeof target !== "function") throw new TypeError(`target must be the Durable Object class, got ${shown(target)}`)
  if (exportName !== undefined && (typeof exportName !== "string" || exportName.length === 0)) {
    throw new TypeError(`exportName must be a non-empty string, got ${shown(exportName)}`)
  }
  if (namespace !== undefined && typeof namespace !== "function") throw new TypeError(`namespace must be a function, got ${shown(namespace)}`)
  if (typeof invoke !== "function") throw new TypeError(`invoke must be a function, got ${shown(invoke)}`)
  if (sharding !== undefined && typeof sharding !== "function") throw new TypeError(`sharding must be a function, got ${shown(sharding)}`)
}

/**
 * A routed client of `DurabilityRouting.client`: push to one shard, read the observations, and give
 * a context for every push (`withContext`). `setContext` is the hook a `@durability/transforms`
 * stub drives, for applications that keep using that package.
 */
export interface RoutingSession<Input, Value, Context = unknown> {
  /** Routes `input` whole to one shard and calls it once (see `RoutingClient.push`). */
  push(input: Input, context?: Context): Promise<EnqueueResult<Value>>
  /** The latest load seen per shard (copies). */
  observations(): Map<string, LoadSnapshot>
  /** The same client, with `context` shallow-merged over the context of each push. */
  withContext(context: Partial<Context>): RoutingSession<Input, Value, Context>
  /**
   * The transforms hook: `invoke("push", [input, context?])` pushes with `context` merged over the
   * positional one (which must then be an object); any other method is a `RoutingError`.
   */
  setContext(context: Record<string, unknown>): RoutingInvoker

}

/** What `setContext` returns: the method call a transforms stub makes. */
export interface RoutingInvoker {
  /** Calls `method` (only `"push"`) with `args` (`[input, context?]`). */
  invoke(method: string, args: ReadonlyArray<unknown>): Promise<unknown>
}

const merged = <Context>(positional: unknown, over: object): Context => {
  if (positional !== undefined && (positional === null || typeof positional !== "object" || Array.isArray(positional))) {
    throw new TypeError("Routing context must be an object when combined with transform context")
  }
  return { ...(positional as object | undefined), ...over } as Context
}

/** The session over `client`, every push's context merged under `over` (none at first). */
export const sessionOf = <Input, Value, Context>(
  client: RoutingClient<Input, Value, Context>,
  over?: object
): RoutingSession<Input, Value, Context> => ({
  push: (input, context) => {
    if (over === undefined) return client.push(input, context)
    try {
      return client.push(input, merged<Context>(context, over))
    } catch (error) {
      return Promise.reject(error)
    }
  },
  observations: () => client.observations(),
  withContext: (context) => {
    if (typeof context !== "object" || context === null || Array.isArray(context)) {
      throw new TypeError(`context must be an object, got ${shown(context)}`)
    }
    return sessionOf(client, { ...over, ...context })
  },
  setContext: (context) => ({
    invoke: async (method, args) => {
      if (method !== "push") throw new RoutingError(`Unknown routing method "${method}"`)
      return client.push(args[0] as Input, merged<Context>(args[1], { ...over, ...context }))
    }
  })
})

/** A routing client whose `invoke` gets the stub of the shard's object from the resolved namespace. */
export const namespaceClient = <Stub, Input, Value, Context>(
  config: NamespaceSource<Stub> & {
    invoke(stub: Stub, input: Input): Promise<EnqueueResult<Value>>
    sharding?: RoutingClientConfig<Input, Value, Context>["sharding"]
    softBacklogLimit?: number | undefined
  },
  loadExports: LoadExports
): RoutingClient<Input, Value, Context> =>
  new RoutingClient<Input, Value, Context>({
    invoke: async (address, input) => {
      const namespace = await resolveNamespace(config, loadExports)
      const stub = namespace.getByName(address.shard, address.locationHint === undefined ? undefined : { locationHint: address.locationHint })
      return config.invoke(stub, input)
    },
    sharding: config.sharding,
    softBacklogLimit: config.softBacklogLimit
  })
