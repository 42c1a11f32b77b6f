/** A user's test of their own handlers with durability/testing: no workerd, no real waiting. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { TestDurability } from "durability/testing"
import { makeJobs, Renderer } from "../src/jobs.js"

const flakyRenderer = (failures: number) => {
  const calls: Array<string> = []
  let left = failures
  const layer = Layer.succeed(Renderer, {
    render: (imageId, width) =>
      Effect.suspend(() => {
        calls.push(`${imageId}@${width}`)
        return left-- > 0 ? Effect.fail(new Error("renderer busy")) : Effect.succeed(`${imageId}/w${width}.webp`)
      }),
    sweep: () => Effect.succeed(0)
  })
  return { layer, calls }
}

describe("resize", () => {
  it.scoped("retries on the stored schedule and completes once", () =>
    Effect.gen(function*() {
      const renderer = flakyRenderer(1)
      const object = yield* TestDurability.make()
      const { ops } = yield* object.run(Effect.provide(makeJobs, renderer.layer))

      yield* object.run(ops.register("resize", { id: "cat:256", payload: { imageId: "cat", width: 256 } }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("resize", "cat:256")))
        .toMatchObject({ status: "pending", attempt: 1, lastError: "renderer busy" })

      yield* TestClock.adjust("1 second")
      expect(yield* object.run(ops.getResult("resize", "cat:256")))
        .toEqual({ status: "completed", result: { key: "cat/w256.webp" } })
      expect(renderer.calls).toEqual(["cat@256", "cat@256"])
    }))

  it.scoped("a bad payload is refused before anything is stored", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { ops } = yield* object.run(Effect.provide(makeJobs, flakyRenderer(0).layer))
      const error = yield* Effect.flip(
        object.run(ops.register("resize", { id: "tiny", payload: { imageId: "cat", width: 2 } }))
      )
      expect(error._tag).toBe("InvalidInputError")
      expect(yield* object.run(ops.getResult("resize", "tiny"))).toEqual({ status: "not_found" })
    }))

  it.scoped("the named alarm runs through the physical alarm after an eviction", () =>
    Effect.gen(function*() {
      const sweeps: Array<number> = []
      const layer = Layer.succeed(Renderer, {
        render: () => Effect.succeed("unused"),
        sweep: (now) => Effect.sync(() => sweeps.push(now))
      })
      const object = yield* TestDurability.make()
      const { alarms } = yield* object.run(Effect.provide(makeJobs, layer))
      yield* object.run(alarms.schedule("sweep", 60_000))

      const next = yield* object.restart
      yield* next.run(Effect.provide(makeJobs, layer))
      // Far beyond alarmMinDelayMs: no timer covers it, the platform delivers the physical alarm at its time.
      yield* TestClock.adjust("59 seconds")
      expect(sweeps).toEqual([])
      yield* TestClock.adjust("1 second")
      expect(sweeps).toEqual([60_000])
      expect(yield* next.deliveries).toEqual([{ at: 60_000, info: { isRetry: false, retryCount: 0 }, failed: false }])
      expect(yield* next.fireAlarm()).toBe(false)
    }))
})
