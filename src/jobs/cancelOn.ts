/**
 * `cancelOn`: a job names an event key, and `event(key)` cancels every unfinished job naming it, with
 * `cancel`'s semantics, in one transaction: the match (one statement over the partial index on
 * `cancel_on`), the cancels and their flows' consequences commit together with whatever else the
 * caller's transaction writes (`Scheduler.transaction`). An executing job's signal is aborted only once
 * that commit happened.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { InvalidInputError, StorageError } from "../shared/Errors.js"
import type { Row } from "../engine/StorageService.js"
import * as Validate from "../shared/validate.js"
import type { Core } from "./core.js"
import * as Flow from "./flow.js"
import * as JobsTable from "./jobsTable.js"
import { abortRunning, writeChanges } from "./manage.js"

/** The reason an event's cancels carry (the job's `cancel_reason`, the `canceled` event's `reason`). */
export const reasonOf = (key: string): string => `event "${key}"`

/** Cancels the unfinished jobs whose `cancelOn` is `key`; returns how many. */
export const event = (core: Core, key: unknown): Effect.Effect<number, InvalidInputError | StorageError> =>
  Effect.gen(function*() {
    const name = yield* Validate.key("key", key)
    const reason = reasonOf(name)
    const running: Array<Row> = []
    const now = yield* Clock.currentTimeMillis
    const canceled = yield* writeChanges(core, (out) =>
      Effect.gen(function*() {
        let count = 0
        for (const match of yield* JobsTable.cancelOnMatches(core.storage, name)) {
          const jobKey = String(match.key)
          if (core.handle.executing(jobKey)) {
            // As `cancel`: asked durably now, ended as canceled when its handler returns.
            yield* JobsTable.requestCancel(core.storage, jobKey, reason)
            running.push(match)
            count++
            continue
          }
          // A match a parent's cancel above already ended is not counted twice.
          const [row] = yield* JobsTable.cancel(core.storage, jobKey, reason, now)
          if (row === undefined) continue
          yield* Flow.canceled(core.flow, out, row, reason, now, true)
          count++
        }
        return count
      }))
    for (const row of running) yield* core.storage.afterCommit(abortRunning(core, row, reason))
    return canceled
  })
