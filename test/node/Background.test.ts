import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Background from "../../src/engine/Background.js"
import * as Logging from "../../src/engine/Logging.js"

/** The Durable Object background over `ctx`, with Effect's logger collecting entries as objects. */
const collecting = (ctx: { waitUntil?(promise: Promise<unknown>): void }) => {
  const logged: Array<Readonly<Record<string, unknown>>> = []
  const layer = Layer.merge(Background.layerDurableObject(ctx), Logging.layer((entry) => void logged.push(entry)))
  return { logged, layer }
}

describe("Background.layerDurableObject", () => {
  it.effect("reports a failure as one ERROR entry of Effect's logger, its fields as annotations", () =>
    Effect.gen(function*() {
      const { layer, logged } = collecting({})
      yield* Effect.provide(
        Effect.flatMap(Background.Background, (background) =>
          background.report("durability.alarm.failed", { error: { name: "Error", message: "disk" }, retryInMs: 1000 })),
        layer
      )
      expect(logged).toEqual([{
        level: "ERROR",
        message: "durability.alarm.failed",
        event: "durability.alarm.failed",
        error: { name: "Error", message: "disk" },
        retryInMs: 1000
      }])
    }))

  it.effect("hands background promises to ctx.waitUntil and reports their later rejection through the same logger", () =>
    Effect.gen(function*() {
      const waited: Array<Promise<unknown>> = []
      const { layer, logged } = collecting({ waitUntil: (promise) => void waited.push(promise) })
      yield* Effect.provide(
        Effect.flatMap(Background.Background, (background) => background.waitUntil(Promise.reject(new TypeError("lost")))),
        layer
      )
      expect(waited).toHaveLength(1)
      yield* Effect.promise(() => waited[0]!)
      expect(logged).toEqual([{
        level: "ERROR",
        message: "durability.background_execution.failed",
        event: "durability.background_execution.failed",
        error: { name: "TypeError", message: "lost" }
      }])
    }))
})
