import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { vi } from "vitest"
import * as Background from "../../src/Background.js"

describe("Background.layerDurableObject", () => {
  it.effect("reports a failure as one console.error of an object (Workers Logs indexes its fields)", () =>
    Effect.gen(function*() {
      const logged: Array<ReadonlyArray<unknown>> = []
      const spy = vi.spyOn(console, "error").mockImplementation((...args: Array<unknown>) => void logged.push(args))
      try {
        const background = yield* Effect.provide(Background.Background, Background.layerDurableObject({}))
        yield* background.report("durability.alarm.failed", { error: { name: "Error", message: "disk" }, retryInMs: 1000 })
      } finally {
        spy.mockRestore()
      }
      expect(logged).toEqual([[
        { level: "ERROR", event: "durability.alarm.failed", error: { name: "Error", message: "disk" }, retryInMs: 1000 }
      ]])
    }))

  it.effect("hands background promises to ctx.waitUntil and reports their rejection", () =>
    Effect.gen(function*() {
      const waited: Array<Promise<unknown>> = []
      const logged: Array<unknown> = []
      const spy = vi.spyOn(console, "error").mockImplementation((entry: unknown) => void logged.push(entry))
      try {
        const background = yield* Effect.provide(
          Background.Background,
          Background.layerDurableObject({ waitUntil: (promise) => void waited.push(promise) })
        )
        yield* background.waitUntil(Promise.reject(new TypeError("lost")))
        expect(waited).toHaveLength(1)
        yield* Effect.promise(() => waited[0]!)
      } finally {
        spy.mockRestore()
      }
      expect(logged).toEqual([
        { level: "ERROR", event: "durability.background_execution.failed", error: { name: "TypeError", message: "lost" } }
      ])
    }))
})
