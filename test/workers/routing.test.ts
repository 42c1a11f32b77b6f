/**
 * Routing in workerd: `DurabilityRouting.client` over real `RoutingObject`s (real SQLite, real RPC).
 * One push is one call to one object, got by the sharding's name with its location hint; the answer
 * comes back as the object made it, with its load (calls counted by the object's `DurabilityRouting`,
 * backlog counted from its rows); a refusal is not retried; a failed call records nothing; the
 * namespace is found by export name in the worker's `exports`; and the built-in selection moves to new
 * shards while the objects report a backlog above the limit.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { afterEach, describe, expect, it, vi } from "vitest"
import { DurabilityRouting, type LocationHint, RoutingError } from "../../src/routing.js"
import type { RoutedBatch, RoutingObject } from "./objects/RoutingObject.js"
import { waitFor } from "./support/lab.js"

afterEach(() => {
  vi.restoreAllMocks()
})

/** The real namespace, recording each `getByName` (name and options) on the way. */
const recordingNamespace = () => {
  const asked: Array<readonly [string, { locationHint?: LocationHint } | undefined]> = []
  const namespace = {
    getByName: (name: string, options?: { locationHint?: LocationHint }) => {
      asked.push([name, options])
      return env.ROUTING_OBJECT.getByName(name, options)
    }
  } as unknown as DurableObjectNamespace<RoutingObject>
  return { asked, namespace: () => namespace }
}

const stub = (name: string) => env.ROUTING_OBJECT.getByName(name)
const idOf = (name: string) => env.ROUTING_OBJECT.idFromName(name).toString()

describe("DurabilityRouting.client in workerd", () => {
  it("one push, one call to the sharding's object with its location hint; the answer carries that object's load", async () => {
    const tenant = crypto.randomUUID()
    const { asked, namespace } = recordingNamespace()
    const routing = DurabilityRouting.client({
      target: (await import("./objects/RoutingObject.js")).RoutingObject,
      namespace,
      invoke: (shard, batch: RoutedBatch) => shard.enqueue(batch),
      sharding: (_batch, context: { readonly tenant: string } | undefined) => ({ shard: `tenant-${context?.tenant}`, locationHint: "weur" as const })
    })
    const result = await routing.push({ items: ["a", "b"] }, { tenant })
    expect(result).toMatchObject({
      success: true,
      value: { id: idOf(`tenant-${tenant}`), stored: 2 },
      load: { inbound: { inFlight: 0, completed: 1 }, outbound: { inFlight: 0, completed: 0, pendingDeliveries: 2 } }
    })
    expect(asked).toEqual([[`tenant-${tenant}`, { locationHint: "weur" }]])
    expect(await stub(`tenant-${tenant}`).items()).toEqual(["a", "b"])
    expect(routing.observations().get(`tenant-${tenant}`)).toEqual(result.load)
    // The object counts from its rows: after a drain, nothing is pending.
    expect(await stub(`tenant-${tenant}`).drain()).toBe(2)
    expect(await stub(`tenant-${tenant}`).load()).toMatchObject({ outbound: { completed: 1, pendingDeliveries: 0 } })
  })

  it("a refusal comes back as the object made it, once: no retry, no other shard", async () => {
    const name = `refuse-${crypto.randomUUID()}`
    const { asked, namespace } = recordingNamespace()
    const routing = DurabilityRouting.client({
      target: (await import("./objects/RoutingObject.js")).RoutingObject,
      namespace,
      invoke: (shard, batch: RoutedBatch) => shard.enqueue(batch),
      sharding: () => name
    })
    const result = await routing.push({ items: ["x"], refuse: true })
    expect(result).toMatchObject({
      success: false,
      error: { name: "Refused", message: "this batch asked to be refused" },
      load: { inbound: { completed: 1 }, outbound: { pendingDeliveries: 0 } }
    })
    expect(asked).toEqual([[name, undefined]])
    expect(await stub(name).items()).toEqual([])
    expect((await stub(name).load()).inbound.completed).toBe(1)
  })

  it("a failed call rejects the push with the object's error and records nothing", async () => {
    const name = `broken-${crypto.randomUUID()}`
    const routing = DurabilityRouting.client({
      target: (await import("./objects/RoutingObject.js")).RoutingObject,
      namespace: () => env.ROUTING_OBJECT,
      invoke: (shard, batch: RoutedBatch) => shard.enqueue(batch),
      sharding: () => name
    })
    await expect(routing.push({ items: null as unknown as Array<string> })).rejects.toThrow("items must be an array")
    expect(routing.observations().size).toBe(0)
    expect(await stub(name).items()).toEqual([])
    // workerd counts an RPC method's rejection as the instance's uncaught exception and keeps its SQLite file
    // open past the test, which the pool's storage isolation refuses (workers-sdk#11031): reset it.
    await expect(runInDurableObject(stub(name), (_instance, state) => state.abort("the scenario ended"))).rejects.toThrow()
  })

  it("exportName: the namespace is the worker's export of that name (cloudflare:workers exports)", async () => {
    const { RoutingObject } = await import("./objects/RoutingObject.js")
    const name = `exported-${crypto.randomUUID()}`
    const routing = DurabilityRouting.client({
      target: RoutingObject,
      exportName: "RoutingObject",
      invoke: (shard, batch: RoutedBatch) => shard.enqueue(batch),
      sharding: () => name
    })
    expect(await routing.push({ items: ["by-export"] })).toMatchObject({ success: true, value: { id: idOf(name), stored: 1 } })
    expect(await stub(name).items()).toEqual(["by-export"])

    for (const exportName of ["NoSuchExport"]) {
      const wrong = DurabilityRouting.client({ target: RoutingObject, exportName, invoke: (shard, batch: RoutedBatch) => shard.enqueue(batch), sharding: () => name })
      const error = await wrong.push({ items: ["never"] }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(RoutingError)
      expect((error as Error).message).toBe(`Export "${exportName}" is not a Durable Object namespace`)
    }
    const none = DurabilityRouting.client({ target: RoutingObject, invoke: (shard, batch: RoutedBatch) => shard.enqueue(batch), sharding: () => name })
    await expect(none.push({ items: ["never"] })).rejects.toBeInstanceOf(RoutingError)
    expect(await stub(name).items()).toEqual(["by-export"])
  })

  it("the built-in selection stays on one shard under the limit and moves to new shards while backlogs exceed it", async () => {
    const { RoutingObject } = await import("./objects/RoutingObject.js")
    // Both draws of every push take the highest name of the current width: the newest shard.
    vi.spyOn(Math, "random").mockReturnValue(0.99)
    const client = (softBacklogLimit: number) =>
      DurabilityRouting.client({ target: RoutingObject, namespace: () => env.ROUTING_OBJECT, invoke: (shard, batch: RoutedBatch) => shard.enqueue(batch), softBacklogLimit })
    const calm = client(1_000)
    for (const item of ["c1", "c2", "c3"]) expect(await calm.push({ items: [item] })).toMatchObject({ value: { id: idOf("shard-0") } })
    expect([...calm.observations().keys()]).toEqual(["shard-0"])

    // shard-0 already holds 3 > 2: the first answer widens to 2 at once, so the next push opens shard-1.
    const pressed = client(2)
    expect(await pressed.push({ items: ["p1"] })).toMatchObject({ value: { id: idOf("shard-0") }, load: { outbound: { pendingDeliveries: 4 } } })
    expect(await pressed.push({ items: ["p2", "p3", "p4"] })).toMatchObject({ value: { id: idOf("shard-1") }, load: { outbound: { pendingDeliveries: 3 } } })
    // Widening again needs a second since the last: push until a push lands on a third shard.
    let n = 0
    const landed = await waitFor(
      async () => (await pressed.push({ items: [`q${n++}`, "q", "q"] })).success ? pressed.observations() : new Map(),
      (seen) => seen.has("shard-2"),
      undefined,
      100
    )
    expect([...landed.keys()].sort()).toEqual(["shard-0", "shard-1", "shard-2"])
    expect(await stub("shard-0").items()).toEqual(["c1", "c2", "c3", "p1"])
    expect((await stub("shard-1").items()).slice(0, 3)).toEqual(["p2", "p3", "p4"])
    expect((await stub("shard-2").items()).length).toBeGreaterThanOrEqual(3)
    // Each observation is that shard's own backlog, from its rows.
    for (const [shard, load] of landed) expect(load.outbound.pendingDeliveries).toBe((await stub(shard).items()).length)
  })
})
