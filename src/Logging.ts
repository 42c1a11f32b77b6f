/**
 * Where the library's diagnostics go: Effect's `Logger`, with structured
 * annotations. In a Durable Object, `layerConsole` writes each entry to the
 * Workers console as one object (`{ level, message, event, ... }`), whose
 * fields Workers Logs indexes; tests can collect entries instead.
 *
 * By default the engine logs what nobody else would see: a record failing for
 * good (its last attempt, a `NonRetryableError`, its attempts exhausted) and
 * every attempt that timed out. `logLifecycle` is a ready `onLifecycleEvent`
 * hook for users who want every event.
 */
import * as Cause from "effect/Cause"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import type * as LogLevel from "effect/LogLevel"
import type * as Lifecycle from "./Lifecycle.js"

/** One log entry as an object: its level, its message, its annotations (and the cause, if any). */
export const toRecord = (options: Logger.Logger.Options<unknown>): Record<string, unknown> => {
  const message = Array.isArray(options.message) && options.message.length === 1
    ? options.message[0]
    : options.message
  const record: Record<string, unknown> = { level: options.logLevel.label, message }
  for (const [key, value] of HashMap.toEntries(options.annotations)) record[key] = value
  if (!Cause.isEmpty(options.cause)) record["cause"] = Cause.pretty(options.cause)
  return record
}

const byLevel = (level: LogLevel.LogLevel): (record: Record<string, unknown>) => void => {
  switch (level._tag) {
    case "Fatal":
    case "Error":
      return (record) => console.error(record)
    case "Warning":
      return (record) => console.warn(record)
    case "Debug":
    case "Trace":
      return (record) => console.debug(record)
    default:
      return (record) => console.log(record)
  }
}

/** Writes each entry to the console as one object, at the console method of its level. */
export const consoleLogger: Logger.Logger<unknown, void> = Logger.make((options) => {
  byLevel(options.logLevel)(toRecord(options))
})

/** Replaces Effect's default (text) logger with `consoleLogger`. Part of `Scheduler.layerDurableObject`. */
export const layerConsole: Layer.Layer<never> = Logger.replace(Logger.defaultLogger, consoleLogger)

/** An `onLifecycleEvent` hook that logs every event as one object (`{ event: "durability.lifecycle", ... }`). */
export const logLifecycle: Lifecycle.LifecycleHook = (event) => {
  console.log({ event: "durability.lifecycle", ...event })
}
