import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import * as Slot from "../../src/engine/slot.js"

const settle = Effect.gen(function*() {
  for (let turn = 0; turn < 20; turn++) yield* Effect.yieldNow()
})

/** Forks a waiter that records its key once it holds a permit, and keeps the permit. */
const waiter = (slot: Slot.RankedSlot, key: string, rank: Slot.Rank, order: Array<string>) =>
  Effect.fork(Effect.tap(slot.acquire(rank, key), () => Effect.sync(() => order.push(key))))

describe("Slot (a group's ranked permits)", () => {
  it.effect("serves waiters by rank, equal ranks first come, never more than its capacity", () =>
    Effect.gen(function*() {
      const slot = Slot.make(1)
      const held = yield* slot.acquire([0], "held")
      expect(Option.isNone(yield* slot.tryAcquire)).toBe(true)
      const order: Array<string> = []
      const fibers = new Map([
        ["low-a", yield* waiter(slot, "low-a", [0, 1], order)],
        ["high", yield* waiter(slot, "high", [-5, 2], order)],
        ["low-b", yield* waiter(slot, "low-b", [0, 3], order)],
        ["mid", yield* waiter(slot, "mid", [-1, 4], order)]
      ])
      yield* settle
      expect(order).toEqual([])
      let permit = held
      for (let step = 0; step < fibers.size; step++) {
        yield* permit.release
        yield* settle
        expect(order).toHaveLength(step + 1)
        permit = yield* Fiber.join(fibers.get(order[step]!)!)
        expect(yield* slot.available).toBe(0)
      }
      expect(order).toEqual(["high", "mid", "low-a", "low-b"])
      yield* permit.release
      expect(yield* slot.available).toBe(1)
    }))

  it.effect("rerank moves a waiting key to its new place; an unknown key is left alone", () =>
    Effect.gen(function*() {
      const slot = Slot.make(1)
      const held = yield* slot.acquire([], "held")
      const order: Array<string> = []
      const first = yield* waiter(slot, "first", [0, 1], order)
      const raised = yield* waiter(slot, "raised", [0, 2], order)
      yield* settle
      expect(slot.rerank("raised", [-20, 2])).toBe(true)
      expect(slot.rerank("not-waiting", [-30, 0])).toBe(false)
      yield* held.release
      const next = yield* Fiber.join(raised)
      expect(order).toEqual(["raised"])
      yield* next.release
      yield* (yield* Fiber.join(first)).release
      expect(order).toEqual(["raised", "first"])
    }))

  it.effect("an interrupted waiter leaves the queue; a permit handed to it at that moment passes on", () =>
    Effect.gen(function*() {
      const slot = Slot.make(1)
      const held = yield* slot.acquire([], "held")
      const order: Array<string> = []
      const gone = yield* waiter(slot, "gone", [0], order)
      const next = yield* waiter(slot, "next", [1], order)
      yield* settle
      yield* Fiber.interrupt(gone)
      yield* held.release
      const permit = yield* Fiber.join(next)
      expect(order).toEqual(["next"])
      yield* permit.release
      expect(yield* slot.available).toBe(1)
    }))
})
