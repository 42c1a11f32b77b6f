/**
 * The promise face of routing: `RoutingClient` (time from `Date.now()`, pinned with fake timers; the
 * built-in draws from `Math.random()`), the session `DurabilityRouting.client` returns (a context merged
 * over each push's, the transforms hook), the namespace of a push (given, or the worker's export by
 * name, loaded only then), the config checks, and the hashed preset, which routes a key to the object
 * the jobs router uses for it.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { vi } from "vitest"
import { RoutingLoad } from "../../../src/facade/RoutingLoad.js"
import { RoutingClient, RoutingError } from "../../../src/facade/RoutingClient.js"
import { hashedSharding } from "../../../src/facade/hashedSharding.js"
import { checkClientConfig, namespaceClient, resolveNamespace, sessionOf } from "../../../src/facade/routingSession.js"
import * as JobsRouter from "../../../src/jobs/JobsRouter.js"
import { fnv1a32 } from "../../../src/shared/sharding.js"
import type { LocationHint, RoutingAddress } from "../../../src/routing/RoutingClient.js"
import type { EnqueueResult, LoadSnapshot } from "../../../src/routing/RoutingLoad.js"

afterEach(() => {
  vi.useRealTimers()
  vi.restoreAllMocks()
})

const accepted = <A>(value: A, backlog = 0): EnqueueResult<A> => ({ success: true, value, load: new RoutingLoad().snapshot(backlog) })

describe("RoutingClient (promise)", () => {
  it("routes once to the sharding's target, with the caller's context; the answer is returned as it is", async () => {
    const input = [{ id: "a" }]
    const context = { tenant: "acme", local: () => "never sent" }
    const sharding = vi.fn((_input: typeof input, _context: typeof context | undefined, _seen: ReadonlyMap<string, unknown>) => ({
      shard: "tenant-acme",
      locationHint: "weur" as const
    }))
    const answer = accepted("ok")
    const invoke = vi.fn(async (_address: RoutingAddress, _input: typeof input) => answer)
    const client = new RoutingClient({ sharding, invoke })
    expect(await client.push(input, context)).toBe(answer)
    expect(sharding).toHaveBeenCalledExactlyOnceWith(input, context, new Map())
    expect(invoke).toHaveBeenCalledExactlyOnceWith({ shard: "tenant-acme", locationHint: "weur" }, input)
  })

  it("a rejected answer comes back with its load, recorded; one call", async () => {
    const response: EnqueueResult<string> = { success: false, error: { name: "Rejected", message: "full" }, load: new RoutingLoad().snapshot(500) }
    const invoke = vi.fn(async () => response)
    const client = new RoutingClient({ sharding: () => "same", invoke })
    expect(await client.push("batch")).toBe(response)
    expect(invoke).toHaveBeenCalledTimes(1)
    expect(client.observations().get("same")).toEqual(response.load)
  })

  it("a rejected or throwing invoke rejects the push with the same error and records nothing", async () => {
    const lost = new Error("connection lost")
    for (const invoke of [vi.fn(async () => Promise.reject(lost)), vi.fn(() => { throw lost })]) {
      const client = new RoutingClient<string, string>({ invoke })
      await expect(client.push("batch")).rejects.toBe(lost)
      expect(invoke).toHaveBeenCalledTimes(1)
      expect(client.observations().size).toBe(0)
    }
  })

  it("a sharding's throw or rejection rejects the push as it is, before any call", async () => {
    const invoke = vi.fn(async () => accepted(1))
    const wrong = new Error("no tenant")
    for (const sharding of [() => { throw wrong }, async () => Promise.reject(wrong)]) {
      await expect(new RoutingClient<string, number>({ invoke, sharding }).push("x")).rejects.toBe(wrong)
    }
    expect(invoke).not.toHaveBeenCalled()
  })

  it("no shard from the sharding is a RoutingError", async () => {
    const invoke = vi.fn(async () => accepted(1))
    const client = new RoutingClient<string, number>({ invoke, sharding: () => ({ shard: "" }) })
    const error = await client.push("x").catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RoutingError)
    expect(error).toMatchObject({ name: "RoutingError", message: "Sharding must return a non-empty shard key or { shard, locationHint }" })
    expect(invoke).not.toHaveBeenCalled()
  })

  it("widens under backlog from Math.random draws, and forgets observations after their window", async () => {
    vi.useFakeTimers()
    vi.setSystemTime(100_000)
    vi.spyOn(Math, "random").mockReturnValue(0.99)
    const invoke = vi.fn(async (_address: RoutingAddress, _input: string) => accepted("ok", 101))
    const client = new RoutingClient({ invoke, softBacklogLimit: 100 })
    await client.push("first")
    await client.push("second")
    expect(invoke.mock.calls.map(([address]) => address.shard)).toEqual(["shard-0", "shard-1"])
    expect([...client.observations().keys()]).toEqual(["shard-0", "shard-1"])
    vi.advanceTimersByTime(60_000)
    expect(client.observations().size).toBe(0)
  })

  it("a custom sharding sees copies of the observed timings", async () => {
    vi.useFakeTimers()
    vi.setSystemTime(100_000)
    const load = new RoutingLoad()
    const finish = load.begin("outbound")
    vi.advanceTimersByTime(125)
    finish()
    const snapshot = load.snapshot(12)
    // The sharding changes what it is shown: the client's own copy must not move.
    const sharding = vi.fn((_input: string, _context: unknown, seen: ReadonlyMap<string, LoadSnapshot>) => {
      const hot = seen.get("hot")
      if (hot !== undefined) hot.outbound.pendingDeliveries = -1
      return "hot"
    })
    const client = new RoutingClient({ sharding, invoke: async () => ({ success: true as const, value: 1, load: snapshot }) })
    await client.push("first")
    const seen = client.observations().get("hot")!
    expect(seen.outbound).toMatchObject({ completed: 1, averageProcessingMs: 125, pendingDeliveries: 12 })
    seen.outbound.pendingDeliveries = 999
    await client.push("second")
    expect(client.observations().get("hot")).toEqual(snapshot)
  })

  it("a wrong config is a TypeError or RangeError naming the field", () => {
    const invoke = async () => accepted(1)
    expect(() => new RoutingClient({ invoke, softBacklogLimit: 0 })).toThrow(new RangeError("softBacklogLimit must be a positive safe integer, got 0"))
    expect(() => new RoutingClient({ invoke, softBacklogLimit: 2.5 })).toThrow(RangeError)
    expect(() => new RoutingClient({ invoke: undefined as never })).toThrow(new TypeError("invoke must be a function"))
    expect(() => new RoutingClient({ invoke, sharding: "x" as never })).toThrow(new TypeError('sharding must be a function, got "x"'))
    expect(() => new RoutingClient(null as never)).toThrow(TypeError)
  })
})

/** A namespace that hands out stubs recording what they were asked, by name. */
const fakeNamespace = () => {
  const asked: Array<readonly [string, { locationHint?: LocationHint } | undefined]> = []
  return {
    asked,
    namespace: {
      getByName: (name: string, options?: { locationHint?: LocationHint }) => {
        asked.push([name, options])
        return { name, enqueue: async (input: string) => accepted(`${name}:${input}`) }
      }
    }
  }
}

describe("DurabilityRouting.client's parts", () => {
  it("the stub of the chosen shard, got with its location hint (none when not given)", async () => {
    const { asked, namespace } = fakeNamespace()
    const loadExports = vi.fn(async () => ({}))
    const client = namespaceClient<{ enqueue(input: string): Promise<EnqueueResult<string>> }, string, string, unknown>(
      { namespace: () => namespace, invoke: (stub, input) => stub.enqueue(input), sharding: (input) => input === "eu" ? { shard: "a", locationHint: "weur" } : "b" },
      loadExports
    )
    expect(await client.push("eu")).toMatchObject({ success: true, value: "a:eu" })
    expect(await client.push("other")).toMatchObject({ success: true, value: "b:other" })
    expect(asked).toEqual([["a", { locationHint: "weur" }], ["b", undefined]])
    // A namespace given: the worker's exports are never loaded.
    expect(loadExports).not.toHaveBeenCalled()
  })

  it("without namespace: the export named exportName, looked up at each push", async () => {
    const { namespace } = fakeNamespace()
    const loadExports = vi.fn(async () => ({ Orders: namespace, NotOne: { getByName: 3 } }))
    expect(await resolveNamespace({ exportName: "Orders" }, loadExports)).toBe(namespace)
    expect(await resolveNamespace({ exportName: "Orders" }, loadExports)).toBe(namespace)
    expect(loadExports).toHaveBeenCalledTimes(2)
    await expect(resolveNamespace({ exportName: "NotOne" }, loadExports)).rejects.toThrow(new RoutingError('Export "NotOne" is not a Durable Object namespace'))
    await expect(resolveNamespace({ exportName: "Missing" }, loadExports)).rejects.toThrow('Export "Missing" is not a Durable Object namespace')
    await expect(resolveNamespace({}, loadExports)).rejects.toBeInstanceOf(RoutingError)
    await expect(resolveNamespace({}, loadExports)).rejects.toThrow(/exportName .* or an explicit namespace/)
    // Outside workerd the module cannot load: a RoutingError that says to give namespace().
    const outside = await resolveNamespace({ exportName: "Orders" }, () => Promise.reject(new Error("no cloudflare:workers"))).catch((e: unknown) => e)
    expect(outside).toBeInstanceOf(RoutingError)
    expect((outside as Error).message).toMatch(/give namespace\(\) instead/)
  })

  it("a push whose namespace cannot be resolved rejects, calls nothing and records nothing", async () => {
    const invoke = vi.fn(async () => accepted(1))
    const client = namespaceClient({ exportName: "Missing", invoke, sharding: () => "s" }, async () => ({}))
    await expect(client.push("x")).rejects.toBeInstanceOf(RoutingError)
    expect(invoke).not.toHaveBeenCalled()
    expect(client.observations().size).toBe(0)
  })

  it("withContext merges its context over each push's; setContext is the transforms hook", async () => {
    const sharding = vi.fn((_input: string, context: { tenant?: string; region?: string } | undefined) => context?.tenant ?? "none")
    const client = new RoutingClient({ sharding, invoke: async (address: RoutingAddress) => accepted(address.shard) })
    const session = sessionOf(client)
    expect(await session.push("x")).toMatchObject({ value: "none" })
    const acme = session.withContext({ tenant: "acme" })
    expect(await acme.push("x", { tenant: "other", region: "eu" })).toMatchObject({ value: "acme" })
    expect(sharding).toHaveBeenLastCalledWith("x", { tenant: "acme", region: "eu" }, new Map([["none", expect.anything()]]))
    expect(await acme.withContext({ region: "us" }).push("y")).toMatchObject({ value: "acme" })
    expect(sharding).toHaveBeenLastCalledWith("y", { tenant: "acme", region: "us" }, expect.any(Map))
    await expect(acme.push("x", "not an object" as never)).rejects.toThrow(
      new TypeError("Routing context must be an object when combined with transform context")
    )
    expect(() => session.withContext(null as never)).toThrow(TypeError)
    const hook = session.setContext({ tenant: "hooked" })
    expect(await hook.invoke("push", ["z", { region: "eu" }])).toMatchObject({ value: "hooked" })
    await expect(hook.invoke("send", ["z"])).rejects.toThrow(new RoutingError('Unknown routing method "send"'))
    await expect(hook.invoke("push", ["z", [1]])).rejects.toBeInstanceOf(TypeError)
    expect(session.observations().get("hooked")).toBeDefined()
  })

  it("the config is checked before anything runs: a TypeError naming the field", () => {
    class Target {}
    const invoke = async () => accepted(1)
    expect(() => checkClientConfig({ target: Target, exportName: "Target", invoke })).not.toThrow()
    expect(() => checkClientConfig(undefined)).toThrow(TypeError)
    expect(() => checkClientConfig({ exportName: "T", invoke })).toThrow(/^target must be the Durable Object class/)
    expect(() => checkClientConfig({ target: Target, exportName: "", invoke })).toThrow(/^exportName must be a non-empty string/)
    expect(() => checkClientConfig({ target: Target, namespace: {}, invoke })).toThrow(/^namespace must be a function/)
    expect(() => checkClientConfig({ target: Target, exportName: "T" })).toThrow(/^invoke must be a function/)
    expect(() => checkClientConfig({ target: Target, exportName: "T", invoke, sharding: 1 })).toThrow(/^sharding must be a function/)
  })
})

describe("the hashed preset", () => {
  it.effect("routes a key to the object the jobs router uses for it", () =>
    Effect.gen(function*() {
      const namespace = { idFromName: (name: string) => name, get: () => ({}) }
      for (const shards of [1, 3, 16, 70]) {
        const router = yield* JobsRouter.make({ namespace, shards })
        const sharding = hashedSharding<{ readonly key: string }>({ shards, key: (input) => input.key, name: "jobs" })
        for (let i = 0; i < 200; i++) {
          const key = `job-${i}`
          expect(sharding({ key })).toBe(router.objects.names[router.shardOf(key)])
        }
      }
    }))

  it("names shards `${name}:${index}` (\"shard\" by default), FNV-1a of the key, with the hint when given", () => {
    expect(hashedSharding({ shards: 16, key: (input: string) => input })("job-42")).toBe(`shard:${fnv1a32("job-42") % 16}`)
    expect(hashedSharding({ shards: 16, key: (input: string) => input })("job-42")).toBe("shard:5")
    expect(hashedSharding({ shards: 3, key: (input: string) => input, name: "t", locationHint: "apac" })("a")).toEqual({ shard: "t:1", locationHint: "apac" })
  })

  it("a wrong option throws at once naming it; a key that is not a string fails the push with RoutingError", async () => {
    const key = (input: string) => input
    expect(() => hashedSharding({ shards: 0, key })).toThrow(new RangeError("shards must be a positive safe integer, got 0"))
    expect(() => hashedSharding({ shards: 1.5, key })).toThrow(RangeError)
    expect(() => hashedSharding({ shards: 2, key: "id" as never })).toThrow(new TypeError('key must be a function, got "id"'))
    expect(() => hashedSharding({ shards: 2, key, name: "" })).toThrow(/^name must be a non-empty string/)
    expect(() => hashedSharding({ shards: 2, key, locationHint: 5 as never })).toThrow(/^locationHint must be a string/)
    const invoke = vi.fn(async () => accepted(1))
    const client = new RoutingClient({ invoke, sharding: hashedSharding({ shards: 2, key: (input: { id?: string }) => input.id as string }) })
    await expect(client.push({})).rejects.toThrow(new RoutingError("key(input) must return a string, got undefined"))
    expect(invoke).not.toHaveBeenCalled()
  })
})
