/**
 * A `Background` that records instead of logging: every report and every
 * promise handed to `waitUntil`, so tests can assert on them.
 * @packageDocumentation
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Background from "../engine/Background.js"

/** A `Background` for tests, and what it recorded. */
export interface TestBackground {
  /** Provides the recording `Background`. */
  readonly layer: Layer.Layer<Background.Background>
  /** Reports so far, oldest first. */
  readonly reports: Effect.Effect<ReadonlyArray<Background.Report>>
  /** How many promises were handed to `waitUntil`. */
  readonly waited: Effect.Effect<number>
}

/** Makes a recording `Background`. */
export const make: Effect.Effect<TestBackground> = Effect.sync(() => {
  const reports: Array<Background.Report> = []
  let waited = 0
  const service = Background.make({
    waitUntil: () => void waited++,
    report: (report) => void reports.push(report)
  })
  return {
    layer: Layer.succeed(Background.Background, service),
    reports: Effect.sync(() => [...reports]),
    waited: Effect.sync(() => waited)
  }
})
