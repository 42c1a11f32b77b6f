/**
 * The inspector over fanout (read-only): the deliveries still stored per target in the overview, and
 * their pages (all targets or one), soonest due first, walked by cursor, with phase, attempt, next attempt
 * and the last error; fanout answers nothing else (a purge of it is a bad request).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { Fanout } from "durability/effect"
import * as Load from "../../../src/routing/RoutingLoad.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { failureOf, valueOf, walk } from "./support.js"

describe("inspector: fanout", () => {
  it.scoped("counts per target, pages of pending deliveries by cursor, read-only", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const fanout = yield* object.run(Effect.provide(
        Fanout.make<string>({
          retries: { maxAttempts: 3, delay: () => 1_000 },
          targets: {
            fast: { deliver: (messages) => Effect.forEach(messages, (m) => m.ack()) },
            failing: { deliver: () => Effect.fail(new Error("downstream is down")) }
          }
        }),
        Load.layer
      ))
      for (let i = 0; i < 5; i++) {
        yield* object.run(fanout.enqueue({ id: `m${i}`, body: String(i) }))
        yield* TestClock.adjust(1)
      }
      const overview = yield* valueOf(object, { _tag: "Overview" })
      expect(overview.scheduler.capabilities).toEqual(["fanout"])
      expect(overview.fanout).toEqual({ targets: [{ target: "failing", pending: 5 }] })
      const all = yield* walk(object, { _tag: "FanoutDeliveries", limit: 2 })
      expect(all.pages).toBe(3)
      expect(all.items.map((item) => item.messageId)).toEqual(["m0", "m1", "m2", "m3", "m4"])
      expect(all.items[0]).toEqual({
        messageId: "m0",
        target: "failing",
        phase: "delivery",
        attempt: 1,
        nextAttemptAt: 1_000,
        error: { name: "Error", message: "downstream is down" }
      })
      expect((yield* walk(object, { _tag: "FanoutDeliveries", target: "fast" })).items).toEqual([])
      expect(yield* failureOf(object, { _tag: "PurgeBefore", capability: "fanout", before: 10 })).toMatchObject({ _tag: "BadRequest" })
      expect(yield* failureOf(object, { _tag: "FanoutDeliveries", limit: 0 })).toMatchObject({ _tag: "BadRequest" })
    }))
})
