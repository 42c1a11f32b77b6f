/**
 * Where the library's diagnostics go: Effect's `Logger`, with structured
 * annotations. In a Durable Object, `layer` (part of `Scheduler.layerDurableObject`)
 * writes each entry to the Workers console as one object (`{ level, message, event, ... }`),
 * whose fields Workers Logs indexes; tests can collect entries instead.
 *
 * By default the engine logs what nobody else would see: a record failing for
 * good (its last attempt, a `NonRetryableError`, its attempts exhausted) and
 * every attempt that timed out. `logLifecycle` is a ready `onLifecycleEvent`
 * hook for users who want every event.
 * @packageDocumentation
 */
import * as Cause from "effect/Cause"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
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

/** Where entries go, one object each (`{ level, message, event, ... }`). */
export type Sink = (entry: Readonly<Record<string, unknown>>) => void

/** The Workers console, at the console method of the entry's level (`level` as `toRecord` writes it). */
export const consoleSink: Sink = (entry) => {
  switch (entry["level"]) {
    case "FATAL":
    case "ERROR":
      return console.error(entry)
    case "WARN":
      return console.warn(entry)
    case "DEBUG":
    case "TRACE":
      return console.debug(entry)
    default:
      return console.log(entry)
  }
}

/** A logger that hands each entry to `sink` as one object. */
export const toSink = (sink: Sink): Logger.Logger<unknown, void> =>
  Logger.make((options) => {
    try {
      sink(toRecord(options))
    } catch {
      // A broken sink must not turn a log line into a failure.
    }
  })

/** Replaces Effect's default (text) logger with one writing to `sink` (default: the console). */
export const layer = (sink: Sink = consoleSink): Layer.Layer<never> =>
  Logger.replace(Logger.defaultLogger, toSink(sink))

/** An `onLifecycleEvent` hook that logs every event as one object (`{ event: "durability.lifecycle", ... }`). */
export const logLifecycle: Lifecycle.LifecycleHook = (event) => {
  console.log({ event: "durability.lifecycle", ...event })
}
