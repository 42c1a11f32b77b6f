/**
 * The routing client's rules (Effect face), on TestClock and a fixed `Random`: one shard per push and
 * one call, no retry; a rejection returned as it is; a transport failure propagated with nothing
 * recorded; observations as deep copies, stale ones dropped, at most 1024, a newer-or-equal snapshot
 * replacing; the built-in selection's preferences and its widen/narrow rules.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Random from "effect/Random"
import * as TestClock from "effect/TestClock"
import * as RoutingClient from "../../../src/routing/RoutingClient.js"
import type { EnqueueResult, LoadSnapshot } from "../../../src/routing/RoutingLoad.js"

interface Load {
  readonly pending?: number
  readonly inFlight?: number
  readonly average?: number | null
  readonly outboundInFlight?: number
}

const snapshot = (observedAt: number, load: Load = {}): LoadSnapshot => ({
  observedAt,
  windowMs: 60_000,
  inbound: { inFlight: load.inFlight ?? 0, completed: 0, averageProcessingMs: load.average ?? null },
  outbound: { inFlight: load.outboundInFlight ?? 0, completed: 0, averageProcessingMs: load.average ?? null, pendingDeliveries: load.pending ?? 0 }
})

const accepted = <A>(value: A, load: LoadSnapshot): EnqueueResult<A> => ({ success: true, value, load })

/** An `invoke` that records its calls and answers from `answer` (at the current TestClock time). */
const recorder = <Input>(answer: (address: RoutingClient.RoutingAddress, input: Input, now: number) => EnqueueResult<string>) => {
  const calls: Array<readonly [RoutingClient.RoutingAddress, Input]> = []
  const invoke = (address: RoutingClient.RoutingAddress, input: Input) =>
    Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) =>
      Effect.sync(() => {
        calls.push([address, input])
        return answer(address, input, now)
      }))
  return { calls, invoke }
}

const fixed = (...values: [number, ...Array<number>]) => Effect.withRandom(Random.fixed(values))

describe("RoutingClient: one push, one shard, one call", () => {
  it.effect("routes the whole input once, with the caller's context and a location hint", () =>
    Effect.gen(function*() {
      const input = [{ id: "a" }, { id: "b" }]
      const context = { tenant: "acme" }
      const seen: Array<unknown> = []
      const { calls, invoke } = recorder<typeof input>((_, __, now) => accepted("ok", snapshot(now)))
      const client = yield* RoutingClient.make({
        invoke,
        sharding: (i, c, observations) => {
          seen.push([i, c, observations])
          return { shard: "tenant-acme", locationHint: "weur" as const }
        }
      })
      const result = yield* client.push(input, context)
      expect(result.success).toBe(true)
      expect(seen).toEqual([[input, context, new Map()]])
      expect(calls).toEqual([[{ shard: "tenant-acme", locationHint: "weur" }, input]])
      expect(calls[0]![1]).toBe(input)
    }))

  it.effect("a string target is the shard; no hint is passed when none is given", () =>
    Effect.gen(function*() {
      const { calls, invoke } = recorder<string>((_, __, now) => accepted("ok", snapshot(now)))
      const client = yield* RoutingClient.make({ invoke, sharding: () => "plain" })
      yield* client.push("x")
      expect(calls).toEqual([[{ shard: "plain" }, "x"]])
      expect(Object.keys(calls[0]![0])).toEqual(["shard"])
    }))

  it.effect("a sharding answering no shard fails with RoutingError and calls nothing", () =>
    Effect.gen(function*() {
      const { calls, invoke } = recorder<string>((_, __, now) => accepted("ok", snapshot(now)))
      for (const target of ["", { shard: "" }, { shard: 3 }, null, undefined, {}]) {
        const client = yield* RoutingClient.make({ invoke, sharding: () => target as RoutingClient.RoutingTarget })
        const error = yield* Effect.flip(client.push("x"))
        expect(error).toBeInstanceOf(RoutingClient.RoutingError)
        expect(error.message).toBe("Sharding must return a non-empty shard key or { shard, locationHint }")
        expect(yield* client.observations()).toEqual(new Map())
      }
      const hinted = yield* RoutingClient.make({ invoke, sharding: () => ({ shard: "s", locationHint: 7 as never }) })
      expect((yield* Effect.flip(hinted.push("x"))).message).toBe("locationHint must be a string, got 7")
      expect(calls).toEqual([])
    }))

  it.effect("a sharding may answer an Effect; its failure fails the push before any call", () =>
    Effect.gen(function*() {
      const { calls, invoke } = recorder<string>((_, __, now) => accepted("ok", snapshot(now)))
      const ok = yield* RoutingClient.make({ invoke, sharding: (input: string) => Effect.succeed(`by-${input}`) })
      yield* ok.push("k")
      expect(calls.map(([address]) => address.shard)).toEqual(["by-k"])
      const failing = yield* RoutingClient.make({ invoke, sharding: () => Effect.fail("no route" as const) })
      expect(yield* Effect.flip(failing.push("k"))).toBe("no route")
      expect(calls).toHaveLength(1)
    }))

  it.effect("a rejection is returned as it is, with its load recorded; no retry, no reroute", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const response: EnqueueResult<string> = { success: false, error: { name: "Rejected", message: "full" }, load: snapshot(100_000, { pending: 500 }) }
      let calls = 0
      const client = yield* RoutingClient.make({ invoke: () => Effect.sync(() => (calls += 1, response)), sharding: () => "same" })
      expect(yield* client.push("batch")).toBe(response)
      expect(calls).toBe(1)
      expect((yield* client.observations()).get("same")).toEqual(response.load)
    }))

  it.effect("a transport failure propagates after one call, recording nothing", () =>
    Effect.gen(function*() {
      let calls = 0
      const lost = new Error("connection lost")
      const client = yield* RoutingClient.make({
        invoke: () => Effect.suspend(() => (calls += 1, Effect.fail(lost)))
      })
      const error = yield* Effect.flip(client.push("batch").pipe(fixed(0)))
      // The same error (Effect.fn's span rides on a proxy of it).
      expect(Cause.originalError(error)).toBe(lost)
      expect(calls).toBe(1)
      expect((yield* client.observations()).size).toBe(0)
      expect(yield* client.width()).toBe(1)
    }))

  it.effect("an answer without a load is a RoutingError, not an acceptance", () =>
    Effect.gen(function*() {
      const client = yield* RoutingClient.make({
        invoke: () => Effect.succeed({ success: true, value: 1 } as unknown as EnqueueResult<number>),
        sharding: () => "s"
      })
      const error = yield* Effect.flip(client.push("x"))
      expect(error._tag).toBe("RoutingError")
      expect(error.message).toMatch(/^invoke must answer an EnqueueResult with its load/)
      expect((yield* client.observations()).size).toBe(0)
    }))
})

describe("RoutingClient: observations", () => {
  it.effect("are deep copies: changing one, or the answer, changes nothing in the client", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const load = snapshot(100_000, { pending: 12, average: 125 })
      const response = accepted(1, load)
      const seen: Array<ReadonlyMap<string, LoadSnapshot>> = []
      const client = yield* RoutingClient.make({
        invoke: () => Effect.succeed(response),
        sharding: (_: string, __, observations) => (seen.push(observations), "hot")
      })
      yield* client.push("first")
      const copy = (yield* client.observations()).get("hot")!
      copy.outbound.pendingDeliveries = 999
      response.load.inbound.inFlight = 50
      yield* client.push("second")
      expect(seen[1]).toEqual(new Map([["hot", snapshot(100_000, { pending: 12, average: 125 })]]))
      ;(seen[1] as Map<string, LoadSnapshot>).get("hot")!.outbound.pendingDeliveries = 1
      expect((yield* client.observations()).get("hot")!.outbound.pendingDeliveries).toBe(12)
    }))

  it.effect("a snapshot is dropped once its window has passed (at windowMs, not before)", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const client = yield* RoutingClient.make({ invoke: (_, __: string) => Effect.succeed(accepted(1, snapshot(100_000))), sharding: () => "a" })
      yield* client.push("x")
      yield* TestClock.setTime(159_999)
      expect([...(yield* client.observations()).keys()]).toEqual(["a"])
      yield* TestClock.setTime(160_000)
      expect((yield* client.observations()).size).toBe(0)
    }))

  it.effect("an older snapshot never replaces a newer one; an equal or newer one does, and moves to the end", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const answers: Array<readonly [string, LoadSnapshot]> = [
        ["a", snapshot(100_000, { pending: 1 })],
        ["b", snapshot(100_000, { pending: 2 })],
        ["a", snapshot(99_000, { pending: 3 })], // overtaken on the way back: ignored
        ["a", snapshot(100_000, { pending: 4 })] // as new: replaces, now the newest recorded
      ]
      let next = 0
      const client = yield* RoutingClient.make({
        invoke: () => Effect.sync(() => accepted(1, answers[next++]![1])),
        sharding: () => answers[next]![0]
      })
      yield* client.push("1")
      yield* client.push("2")
      yield* client.push("3")
      expect((yield* client.observations()).get("a")!.outbound.pendingDeliveries).toBe(1)
      expect([...(yield* client.observations()).keys()]).toEqual(["a", "b"])
      yield* client.push("4")
      expect([...(yield* client.observations())].map(([shard, load]) => [shard, load.outbound.pendingDeliveries])).toEqual([["b", 2], ["a", 4]])
    }))

  it.effect("at most 1024 are kept: the oldest recorded goes first", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const client = yield* RoutingClient.make({
        invoke: (_, __: number) => Effect.succeed(accepted(1, snapshot(100_000))),
        sharding: (input: number) => `t-${input}`
      })
      for (let i = 0; i < 1_025; i++) yield* client.push(i)
      const keys = [...(yield* client.observations()).keys()]
      expect(keys).toHaveLength(RoutingClient.MAX_OBSERVATIONS)
      expect(keys[0]).toBe("t-1")
      expect(keys.at(-1)).toBe("t-1024")
      // Recording t-1 again makes it the newest; the next new shard evicts t-2.
      yield* client.push(1)
      yield* client.push(2_000)
      const after = [...(yield* client.observations()).keys()]
      expect(after).not.toContain("t-2")
      expect(after.slice(-2)).toEqual(["t-1", "t-2000"])
    }))
})

describe("RoutingClient: the built-in selection", () => {
  it("prefers a name never seen (the first when both are), then the lower backlog, then the lower pressure, then the first", () => {
    const seen = new Map([
      ["low", snapshot(0, { pending: 1 })],
      ["high", snapshot(0, { pending: 5 })],
      ["busy", snapshot(0, { pending: 1, inFlight: 2, average: 10 })],
      ["busyOut", snapshot(0, { pending: 1, outboundInFlight: 1, average: 30 })],
      ["calm", snapshot(0, { pending: 1 })]
    ])
    expect(RoutingClient.choose("new1", "new2", seen)).toBe("new1")
    expect(RoutingClient.choose("low", "new", seen)).toBe("new")
    expect(RoutingClient.choose("new", "low", seen)).toBe("new")
    expect(RoutingClient.choose("high", "low", seen)).toBe("low")
    expect(RoutingClient.choose("low", "high", seen)).toBe("low")
    // Equal backlogs: pressure = in flight × average, both directions.
    expect(RoutingClient.choose("busy", "calm", seen)).toBe("calm")
    expect(RoutingClient.choose("busyOut", "busy", seen)).toBe("busy")
    expect(RoutingClient.choose("calm", "low", seen)).toBe("calm")
    expect(RoutingClient.choose("low", "calm", seen)).toBe("low")
  })

  it.effect("draws two names from Random among the width", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const { calls, invoke } = recorder<string>((_, __, now) => accepted("ok", snapshot(now, { pending: 101 })))
      const client = yield* RoutingClient.make({ invoke, softBacklogLimit: 100 })
      yield* client.push("first").pipe(fixed(0.99))
      expect(yield* client.width()).toBe(2)
      // shard-0 is seen; 0.2 draws shard-0, 0.7 draws shard-1, never seen: chosen.
      yield* client.push("second").pipe(fixed(0.2, 0.7))
      expect(calls.map(([address]) => address.shard)).toEqual(["shard-0", "shard-1"])
    }))

  it.effect("widens by one when a fresh answer reports a backlog above the limit, at most once a second", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      let pending = 101
      const { invoke } = recorder<string>((_, __, now) => accepted("ok", snapshot(now, { pending })))
      const client = yield* RoutingClient.make({ invoke, softBacklogLimit: 100 })
      yield* client.push("a").pipe(fixed(0))
      expect(yield* client.width()).toBe(2)
      yield* TestClock.adjust(999)
      yield* client.push("b").pipe(fixed(0))
      expect(yield* client.width()).toBe(2)
      yield* TestClock.adjust(1)
      yield* client.push("c").pipe(fixed(0))
      expect(yield* client.width()).toBe(3)
      // At the limit is not above it.
      pending = 100
      yield* TestClock.adjust(5_000)
      yield* client.push("d").pipe(fixed(0))
      expect(yield* client.width()).toBe(3)
    }))

  it.effect("narrows by one only after a calm window since the last resize, never below 1", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      let load: Load = { pending: 101 }
      const { invoke } = recorder<string>((_, __, now) => accepted("ok", snapshot(now, load)))
      const client = yield* RoutingClient.make({ invoke, softBacklogLimit: 100 })
      yield* client.push("a").pipe(fixed(0))
      yield* TestClock.adjust(1_000)
      yield* client.push("b").pipe(fixed(0))
      expect(yield* client.width()).toBe(3)
      // Calm, but the window since the last resize has not passed.
      load = { pending: 0 }
      yield* TestClock.adjust(59_999)
      yield* client.push("c").pipe(fixed(0))
      expect(yield* client.width()).toBe(3)
      // A full window, but not calm: backlog at a quarter of the limit, or calls in flight.
      yield* TestClock.adjust(1)
      for (const busy of [{ pending: 25 }, { inFlight: 1 }, { outboundInFlight: 1 }]) {
        load = busy
        yield* client.push("d").pipe(fixed(0))
        expect(yield* client.width()).toBe(3)
      }
      load = { pending: 24 }
      yield* client.push("e").pipe(fixed(0))
      expect(yield* client.width()).toBe(2)
      // The next narrowing waits another window.
      load = { pending: 0 }
      yield* TestClock.adjust(59_999)
      yield* client.push("f").pipe(fixed(0))
      expect(yield* client.width()).toBe(2)
      yield* TestClock.adjust(1)
      yield* client.push("g").pipe(fixed(0))
      expect(yield* client.width()).toBe(1)
      yield* TestClock.adjust(120_000)
      yield* client.push("h").pipe(fixed(0))
      expect(yield* client.width()).toBe(1)
    }))

  it.effect("a stale answer neither widens nor narrows", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const client = yield* RoutingClient.make({
        invoke: (_, __: string) => Effect.succeed(accepted("ok", snapshot(40_000, { pending: 10_000 }))),
        softBacklogLimit: 100
      })
      yield* client.push("a").pipe(fixed(0))
      expect(yield* client.width()).toBe(1)
      expect((yield* client.observations()).size).toBe(0)
    }))

  it.effect("a custom sharding never resizes", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const client = yield* RoutingClient.make({
        invoke: (_, __: string) => Effect.succeed(accepted("ok", snapshot(100_000, { pending: 10_000 }))),
        sharding: () => "mine",
        softBacklogLimit: 100
      })
      yield* client.push("a")
      expect(yield* client.width()).toBe(1)
    }))
})

describe("RoutingClient: options", () => {
  it.effect("a wrong option is an InvalidInputError naming it", () =>
    Effect.gen(function*() {
      const invoke = () => Effect.succeed(accepted(1, snapshot(0)))
      for (const softBacklogLimit of [0, -1, 1.5, Number.NaN, 2 ** 53, "10"]) {
        const error = yield* Effect.flip(RoutingClient.make({ invoke, softBacklogLimit: softBacklogLimit as number }))
        expect(error).toMatchObject({ _tag: "InvalidInputError", field: "softBacklogLimit", kind: "range" })
      }
      expect(yield* Effect.flip(RoutingClient.make({ invoke: "x" as never }))).toMatchObject({ field: "invoke", kind: "type" })
      expect(yield* Effect.flip(RoutingClient.make({ invoke, sharding: 3 as never }))).toMatchObject({ field: "sharding", kind: "type" })
      const client = yield* RoutingClient.make({ invoke, softBacklogLimit: 1 })
      expect(yield* client.width()).toBe(1)
    }))

  it.effect("layer provides a client under the caller's tag", () => {
    class Orders extends Context.Tag("test/Orders")<Orders, RoutingClient.RoutingClient<string, number>>() {}
    return Effect.gen(function*() {
      const orders = yield* Orders
      const result = yield* orders.push("o-1")
      expect(result).toMatchObject({ success: true, value: 7 })
    }).pipe(
      Effect.provide(RoutingClient.layer(Orders, { invoke: () => Effect.succeed(accepted(7, snapshot(0))), sharding: () => "orders" })),
      Effect.either,
      Effect.map((either) => expect(Either.isRight(either)).toBe(true))
    )
  })
})

describe("RoutingClient.hashed", () => {
  it.effect("a stable-key sharding: the same key, the same shard, whatever the load; no resize", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const sharding = yield* RoutingClient.hashed({ shards: 16, key: (input: { readonly user: string }) => input.user, name: "jobs" })
      const { calls, invoke } = recorder<{ readonly user: string }>((_, __, now) => accepted("ok", snapshot(now, { pending: 10_000 })))
      const client = yield* RoutingClient.make({ invoke, sharding, softBacklogLimit: 1 })
      for (const user of ["job-42", "job-42", "a", "job-42"]) yield* client.push({ user })
      // FNV-1a 32-bit: "job-42" → 0xd5178945, 5 of 16; "a" → 0xe40c292c, 12 of 16.
      expect(calls.map(([address]) => address.shard)).toEqual(["jobs:5", "jobs:5", "jobs:12", "jobs:5"])
      expect(yield* client.width()).toBe(1)
    }))

  it.effect("a wrong option is an InvalidInputError naming it; a key that is no string fails the push with RoutingError", () =>
    Effect.gen(function*() {
      const key = (input: string) => input
      expect(yield* Effect.flip(RoutingClient.hashed({ shards: 0, key }))).toMatchObject({ field: "shards", kind: "range" })
      expect(yield* Effect.flip(RoutingClient.hashed({ shards: 2, key: 1 as never }))).toMatchObject({ field: "key", kind: "type" })
      expect(yield* Effect.flip(RoutingClient.hashed({ shards: 2, key, name: "" }))).toMatchObject({ field: "name", kind: "type" })
      expect(yield* Effect.flip(RoutingClient.hashed({ shards: 2, key, locationHint: 1 as never }))).toMatchObject({ field: "locationHint" })
      const hinted = yield* RoutingClient.hashed({ shards: 3, key, name: "t", locationHint: "apac" })
      const { calls, invoke } = recorder<string>((_, __, now) => accepted("ok", snapshot(now)))
      const client = yield* RoutingClient.make({ invoke, sharding: hinted })
      yield* client.push("a")
      expect(calls).toEqual([[{ shard: "t:1", locationHint: "apac" }, "a"]])
      const untyped = recorder<{ readonly id?: string }>((_, __, now) => accepted("ok", snapshot(now)))
      const broken = yield* RoutingClient.make({
        invoke: untyped.invoke,
        sharding: yield* RoutingClient.hashed({ shards: 2, key: (input: { readonly id?: string }) => input.id as string })
      })
      const error = yield* Effect.flip(broken.push({}))
      expect(error).toMatchObject({ _tag: "RoutingError", message: "key(input) must return a string, got undefined" })
      expect(untyped.calls).toEqual([])
    }))
})
