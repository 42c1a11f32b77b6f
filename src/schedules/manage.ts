/**
 * A schedule's state changes other than its spec: removing it, pausing and resuming it, and
 * asking for one run now.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { checked, type Parts } from "./read.js"
import * as Slots from "./slots.js"
import { TABLE } from "./schema.js"

export const remove = (parts: Parts, name: string, key: string) =>
  Effect.gen(function*() {
    const { handle, storage } = parts
    const target = yield* checked(parts, name, key)
    const deleted = yield* handle.write(
      Effect.zipLeft(storage.exec(`DELETE FROM ${TABLE} WHERE key = ? RETURNING key`, [target.id]), handle.timers.cancel(target.id))
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
        parts.storage.exec(`UPDATE ${TABLE} SET paused = 1 WHERE key = ? AND paused = 0 RETURNING key`, [target.id]),
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
        parts.storage.exec(`UPDATE ${TABLE} SET paused = 0 WHERE key = ? AND paused = 1 RETURNING key`, [target.id]),
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
    // A request made while a manual run is active asks for another; one not started yet is the same run.
    const made = yield* parts.handle.writePending(
      Effect.flatMap(
        parts.storage.exec(
          `UPDATE ${TABLE} SET
             manual_at = CASE WHEN manual_at IS NULL OR (run_manual = 1 AND manual_at = run_slot) THEN ? ELSE manual_at END,
             next_attempt_at = CASE WHEN run_slot IS NOT NULL THEN next_attempt_at
               WHEN status = 'ended' THEN ? ELSE MIN(next_attempt_at, ?) END,
             status = 'pending'
           WHERE key = ? RETURNING key`,
          [now, now, now, target.id]
        ),
        // Not running: the manual run starts now (its timer, if no permit is free).
        (rows) => rows.length === 0 ? Effect.succeed(undefined) : Slots.update(parts.runs, parts.handle.timers, target.id, now)
      ),
      (pending) => pending
    )
    return made !== undefined
  }).pipe(Effect.withSpan("Schedules.trigger"))
