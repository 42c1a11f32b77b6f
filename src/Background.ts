/**
 * Where work that outlives a call goes, and where failures nobody awaits are
 * reported. In a Durable Object that is `ctx.waitUntil` and one `console.error`
 * of an object per failure (`{ event: "durability.alarm.failed", … }`), whose
 * fields Workers Logs indexes.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { SerializedError } from "./Errors.js"
import * as Logging from "./Logging.js"

export interface Report {
  readonly event: string
  readonly details: Readonly<Record<string, unknown>>
}

export interface Background {
  /** Keeps the object alive until `promise` settles. Its rejection is reported, never thrown. */
  readonly waitUntil: (promise: Promise<unknown>) => Effect.Effect<void>
  /** Reports a failure that no caller will see. Never fails. */
  readonly report: (event: string, details: Readonly<Record<string, unknown>>) => Effect.Effect<void>
}

export const Background: Context.Tag<Background, Background> = Context.GenericTag<Background>(
  "durability/Background"
)

/** The compact `{ name, message }` of any thrown value; never throws, even on hostile getters. */
export const serializeError = (error: unknown): SerializedError => {
  try {
    if (typeof error === "object" && error !== null) {
      const { name, message, _tag } = error as { name?: unknown; message?: unknown; _tag?: unknown }
      return {
        name: typeof name === "string" && name !== "Error" ? name : typeof _tag === "string" ? _tag : "Error",
        message: typeof message === "string" ? message : safeString(error)
      }
    }
    return { name: "Error", message: safeString(error) }
  } catch {
    return { name: "Error", message: "Unserializable error" }
  }
}

const safeString = (value: unknown): string => {
  try {
    return String(value)
  } catch {
    return "Unserializable error"
  }
}

export interface Sink {
  readonly waitUntil?: ((promise: Promise<unknown>) => void) | undefined
  readonly report: (report: Report) => void
}

/** Builds the service over plain callbacks. */
export const make = (sink: Sink): Background => {
  const report: Background["report"] = (event, details) =>
    Effect.sync(() => {
      try {
        sink.report({ event, details })
      } catch {
        // A broken sink must not turn a report into a new failure.
      }
    })
  return Background.of({
    report,
    waitUntil: (promise) =>
      Effect.sync(() => {
        const guarded = promise.then(
          () => undefined,
          (error) => Effect.runSync(report("durability.background_execution.failed", { error: serializeError(error) }))
        )
        try {
          sink.waitUntil?.(guarded)
        } catch (error) {
          Effect.runSync(report("durability.background_execution.failed", { error: serializeError(error) }))
        }
      })
  })
}

/**
 * `ctx.waitUntil` (when the context has it), and reports as `ERROR` entries to `sink` (default: one
 * object per report on the console; Workers Logs indexes an object's fields).
 */
export const layerDurableObject = (
  ctx: { waitUntil?(promise: Promise<unknown>): void },
  sink: Logging.Sink = Logging.consoleSink
): Layer.Layer<Background> =>
  Layer.succeed(
    Background,
    make({
      waitUntil: ctx.waitUntil === undefined ? undefined : (promise) => ctx.waitUntil!(promise),
      report: (report) => sink({ level: "ERROR", event: report.event, ...report.details })
    })
  )
