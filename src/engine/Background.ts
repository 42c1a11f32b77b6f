/**
 * Where work that outlives a call goes (in a Durable Object, `ctx.waitUntil`), and how failures
 * nobody awaits are reported: one `ERROR` entry through Effect's `Logger`, annotated with the
 * event and its fields (`Scheduler.layerDurableObject` writes each entry to the Workers console
 * as one object, whose fields Workers Logs indexes). The test kit's `TestBackground` records them.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type { SerializedError } from "../shared/Errors.js"

/** A failure nobody awaits, as reported: the event's name and its fields. */
export interface Report {
  /** The event's name, e.g. `durability.lifecycle_hook.failed`. */
  readonly event: string
  /** The event's fields: what and which record it was about, and the error. */
  readonly details: Readonly<Record<string, unknown>>
}

/**
 * The service that keeps the object alive for work that outlives a call and reports failures nobody awaits.
 */
export interface Background {
  /** Keeps the object alive until `promise` settles. Its rejection is reported, never thrown. */
  readonly waitUntil: (promise: Promise<unknown>) => Effect.Effect<void>
  /** Reports a failure that no caller will see. Never fails. */
  readonly report: (event: string, details: Readonly<Record<string, unknown>>) => Effect.Effect<void>
}

/**
 * The `Background` service's tag: provide it with `layerDurableObject` (or the test kit's `TestBackground`).
 */
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

/** What a `Background` is made of: the platform's `waitUntil`, and where reports go. */
export interface Sink {
  /**
   * Keeps the isolate alive until the promise settles (a Durable Object's `ctx.waitUntil`); default: nothing.
   */
  readonly waitUntil?: ((promise: Promise<unknown>) => void) | undefined
  /** Where reports go; by default, Effect's logger of the fiber that reports (see `logReport`). */
  readonly report?: ((report: Report) => void) | undefined
}

/** A report as a log entry: `ERROR`, message = the event, the details as annotations. */
export const logReport = (event: string, details: Readonly<Record<string, unknown>>): Effect.Effect<void> =>
  Effect.annotateLogs(Effect.logError(event), { event, ...details })

/** Builds the service over plain callbacks. */
export const make = (sink: Sink): Background => {
  const record = sink.report
  const report: Background["report"] = record === undefined ? logReport : (event, details) =>
    Effect.sync(() => {
      try {
        record({ event, details })
      } catch {
        // A broken sink must not turn a report into a new failure.
      }
    })
  return Background.of({
    report,
    // A rejection settles after this fiber moved on: it is reported with the logger in force here.
    waitUntil: (promise) =>
      Effect.flatMap(Effect.runtime<never>(), (runtime) =>
        Effect.sync(() => {
          const failed = (error: unknown) =>
            Runtime.runSync(runtime, report("durability.background_execution.failed", { error: serializeError(error) }))
          const guarded = promise.then(() => undefined, failed)
          try {
            sink.waitUntil?.(guarded)
          } catch (error) {
            failed(error)
          }
        }))
  })
}

/**
 * Hands `promise` to `waitUntil`; its rejection runs `onRejected` (a report) with the logger in
 * force where this was called, not Effect's default one.
 */
export const waitUntilOr = (
  background: Background,
  promise: PromiseLike<unknown>,
  onRejected: (error: unknown) => Effect.Effect<void>
): Effect.Effect<void> =>
  Effect.flatMap(Effect.runtime<never>(), (runtime) =>
    background.waitUntil(
      Promise.resolve(promise).then(() => undefined, (error) => Runtime.runSync(runtime, onRejected(error)))
    ))

/** `ctx.waitUntil` (when the context has it); reports through Effect's logger. */
export const layerDurableObject = (ctx: { waitUntil?(promise: Promise<unknown>): void }): Layer.Layer<Background> =>
  Layer.succeed(
    Background,
    make({ waitUntil: ctx.waitUntil === undefined ? undefined : (promise) => ctx.waitUntil!(promise) })
  )
