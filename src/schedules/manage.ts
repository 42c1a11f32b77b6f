/**
 * A schedule's state changes other than its spec: removing it, pausing and resuming it, and
 * asking for one run now.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { checked, type Parts } from "./read.js"
import * as SchedulesTable from "./schedulesTable.js"
import * as Slots from "./slots.js"

export const remove = (parts: Parts, name: string, key: string) =>
  Effect.gen(function*() {
    const { handle, storage } = parts
    const target = yield* checked(parts, name, key)
    const deleted = yield* handle.write(
      Effect.zipLeft(SchedulesTable.remove(storage, target.id), handle.timers.cancel(target.id))
    )
    if (deleted.length === 0) return false
    yield* handle.abort((id) => id === target.id, new Error(`The schedule "${name}" (key "${target.key}") was removed`))
    return true
  }).pipe(Effect.withSpan("Schedules.remove"))

export const pause = (parts: Parts, name: string, key: string) =>
  Effect.gen(function*() {
    const target = yield* checked(parts, name, key)
    const now = yield* Clock.currentTimeMillis
    // A paused schedule's slot timer goes (it stays for a manual run asked).
    const updated = yield* parts.handle.write(
      Effect.tap(
        SchedulesTable.pause(parts.storage, target.id),
        (rows) => rows.length === 0 ? Effect.void : Slots.update(parts.runs, parts.handle.timers, target.id, now)
      )
    )
    return updated.length > 0
  }).pipe(Effect.withSpan("Schedules.pause"))

export const resume = (parts: Parts, name: string, key: string) =>
  Effect.gen(function*() {
    const target = yield* checked(parts, name, key)
    const now = yield* Clock.currentTimeMillis
    const made = yield* parts.handle.writePending(
      Effect.flatMap(
        SchedulesTable.resume(parts.storage, target.id),
        (rows) =>
          rows.length === 0
            ? Effect.succeed(undefined)
            : Slots.update(parts.runs, parts.handle.timers, target.id, now)
      ),
      (pending) => pending
    )
    return made !== undefined
  }).pipe(Effect.withSpan("Schedules.resume"))

export const trigger = (parts: Parts, name: string, key: string) =>
  Effect.gen(function*() {
    const target = yield* checked(parts, name, key)
    const now = yield* Clock.currentTimeMillis
    const made = yield* parts.handle.writePending(
      Effect.flatMap(
        SchedulesTable.trigger(parts.storage, target.id, now),
        // Not running: the manual run starts now (its timer, if no permit is free).
        (rows) => rows.length === 0 ? Effect.succeed(undefined) : Slots.update(parts.runs, parts.handle.timers, target.id, now)
      ),
      (pending) => pending
    )
    return made !== undefined
  }).pipe(Effect.withSpan("Schedules.trigger"))
