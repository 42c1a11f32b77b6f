import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Operations from "../../src/Operations.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

describe("Operations smoke", () => {
  it.effect("registers, runs eagerly, completes, dedups", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const ops = yield* object.run(Operations.make({
        charge: Operations.operation({
          handler: (call: Operations.DurableCall<{ readonly cents: number }>) =>
            Effect.sync(() => {
              calls.push(`${call.id}#${call.attempt}`)
              return { charged: call.payload.cents }
            })
        })
      }))
      yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 500 } }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("charge", "inv-1"))).toEqual({
        status: "completed",
        result: { charged: 500 }
      })
      yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 999 } }))
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["inv-1#1"])
      expect(object.storage.alarmAt).toBeNull()
    }))
})
