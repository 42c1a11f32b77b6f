/**
 * The schedules' inspection source: active, paused and ended counts, pages of schedules (keyset on
 * the row key `<schedule>/<key>`, the table's primary key), and trigger, pause, resume and purge
 * through the capability's own calls. A schedule's `key` in the protocol is that row key: it names
 * one schedule across the object's handlers, so actions take it alone.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { InvalidInputError, StorageError } from "../shared/Errors.js"
import type { StorageService } from "../engine/StorageService.js"
import * as Rows from "./rows.js"
import * as SchedulesTable from "./schedulesTable.js"
import { BadRequest, NotFound } from "../inspection/errors.js"
import * as ListQuery from "../engine/listQuery.js"
import * as P from "../inspection/protocol.js"
import type { Source, SourceError } from "../inspection/source.js"
import * as Text from "../inspection/text.js"

/** One handler's calls the actions use. */
export interface HandleCalls {
  readonly trigger: (key: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly pause: (key: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly resume: (key: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
}

// What `Rows.infoOf` reads, with the payload's bounded head instead of all of it.
const COLUMNS = `key, schedule, schedule_key, status, paused, timing, slot_at, run_slot, manual_at, run_manual, run_number,
  attempt, next_attempt_at, last_error_name, ${Text.messageOf("last_error")}, last_slot, last_manual, last_run_number,
  last_outcome, last_settled_at, last_run_error_name, ${Text.messageOf("last_run_error")}, run_count, missed_count,
  start_at, end_at, run_limit, catch_up, overlap, grace_ms, created_at, updated_at, ${Text.headOf("payload", P.LIST_JSON_CHARS)}`

const errorView = (error: { readonly name: string; readonly message: string } | null) =>
  error === null ? null : { name: error.name.slice(0, 200), message: error.message.slice(0, P.MESSAGE_CHARS) }

export const source = (
  storage: StorageService,
  handles: ReadonlyMap<string, HandleCalls>,
  purgeBefore: (before: number) => Effect.Effect<number, InvalidInputError | StorageError>
): Source => {
  // Capped counts (`COUNT_CAP`): bounded whatever the table holds.
  const overview = Effect.gen(function*() {
    const { active, ended, paused } = yield* SchedulesTable.cappedCounts(storage)
    return { schedules: { active, paused, ended } }
  })

  const page = (request: P.SchedulesQuery) =>
    Effect.gen(function*() {
      const limit = request.limit ?? P.DEFAULT_PAGE
      const rows = yield* SchedulesTable.page(storage, COLUMNS, request.cursor, limit + 1)
      return ListQuery.page(rows, limit, (row): P.ScheduleItem => {
        const info = Rows.infoOf(row, null)
        return {
          key: String(row.key),
          schedule: info.schedule,
          description: info.description,
          status: info.status,
          nextRunAt: info.nextRunAt,
          currentRun: info.currentRun === null ? null : {
            scheduledTime: info.currentRun.scheduledTime,
            manual: info.currentRun.manual,
            runNumber: info.currentRun.runNumber,
            attempt: info.currentRun.attempt,
            nextAttemptAt: info.currentRun.nextAttemptAt,
            error: errorView(info.currentRun.lastError)
          },
          lastRun: info.lastRun === null ? null : {
            scheduledTime: info.lastRun.scheduledTime,
            manual: info.lastRun.manual,
            runNumber: info.lastRun.runNumber,
            outcome: info.lastRun.outcome,
            settledAt: info.lastRun.settledAt,
            error: errorView(info.lastRun.error)
          },
          runCount: info.runCount,
          missedCount: info.missedCount,
          payload: Text.jsonOf(row, "payload", P.LIST_JSON_CHARS),
          createdAt: info.createdAt
        }
      }, (last) => String(last.key))
    })

  /** A call on one existing schedule, named by its row key. */
  const onSchedule = (key: string, call: (calls: HandleCalls, key: string) => Effect.Effect<boolean, InvalidInputError | StorageError>) =>
    Effect.gen(function*() {
      const separator = key.indexOf("/")
      const name = separator < 0 ? key : key.slice(0, separator)
      const calls = handles.get(name)
      if (separator < 0 || calls === undefined) {
        return yield* new NotFound({
          message: `No schedule ${JSON.stringify(key)} in this object: a schedule is named "<schedule>/<key>" (schedules: ${[...handles.keys()].join(", ") || "none"})`
        })
      }
      if (!(yield* SchedulesTable.exists(storage, key))) return yield* new NotFound({ message: `No schedule ${JSON.stringify(key)} in this object` })
      return { changed: (yield* call(calls, key.slice(separator + 1))) ? 1 : 0 }
    })

  const answer = (request: P.Request): Effect.Effect<unknown, SourceError> => {
    switch (request._tag) {
      case "Schedules":
        return page(request)
      case "TriggerSchedule":
        return onSchedule(request.key, (calls, key) => calls.trigger(key))
      case "PauseSchedule":
        return onSchedule(request.key, (calls, key) => calls.pause(key))
      case "ResumeSchedule":
        return onSchedule(request.key, (calls, key) => calls.resume(key))
      case "PurgeBefore":
        return Effect.map(purgeBefore(request.before), (changed) => ({ changed }))
      default:
        return Effect.fail(new BadRequest({ message: `The schedules capability does not answer ${request._tag}` }))
    }
  }

  return { capability: "schedules", overview, answer }
}
