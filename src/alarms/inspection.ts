/**
 * The named alarms' inspection source: pending and failed counts, pages of occurrences (in the
 * order they were scheduled, keyset `<createdAt>:<name>`), cancel and purge through the
 * capability's own calls.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { InvalidInputError, StorageError } from "../shared/Errors.js"
import type { StorageService } from "../engine/StorageService.js"
import * as ListQuery from "../engine/listQuery.js"
import { BadRequest, NotFound } from "../inspection/errors.js"
import * as Limits from "../inspection/limits.js"
import type * as P from "../inspection/protocol.js"
import type { Source, SourceError } from "../inspection/source.js"
import * as Text from "../inspection/text.js"
import * as AlarmsTable from "./alarmsTable.js"

export interface Calls {
  readonly cancel: (name: string) => Effect.Effect<boolean, InvalidInputError | StorageError>
  readonly purgeBefore: (before: number) => Effect.Effect<number, InvalidInputError | StorageError>
}

export const source = (storage: StorageService, calls: Calls): Source => {
  // Capped counts (`COUNT_CAP`) from the status index: bounded whatever the table holds.
  const overview = Effect.gen(function*() {
    const { failed, pending } = yield* AlarmsTable.cappedCounts(storage)
    return { alarms: { pending, failed } }
  })

  const page = (request: P.AlarmsQuery) =>
    Effect.gen(function*() {
      const { after, limit } = yield* ListQuery.parse({ cursor: request.cursor, limit: request.limit }, Limits.DEFAULT_PAGE, Limits.MAX_PAGE, [])
      const rows = yield* AlarmsTable.page(
        storage,
        `name, status, scheduled_at, next_attempt_at, attempt, last_error_name, ${Text.messageOf("last_error")}, created_at`,
        after,
        limit + 1
      )
      return ListQuery.page(rows, limit, (row): P.AlarmItem => {
        const error = Text.errorOf(row.last_error_name, row.last_error)
        return {
          name: String(row.name),
          status: row.status === "failed" ? "failed" : "pending",
          scheduledTime: Number(row.scheduled_at),
          nextAttemptAt: Number(row.next_attempt_at),
          attempt: Number(row.attempt),
          ...(error === undefined ? {} : { error }),
          createdAt: Number(row.created_at)
        }
      }, (last) => ListQuery.cursor(Number(last.created_at), String(last.name)))
    })

  const cancel = (request: P.CancelAlarm) =>
    Effect.gen(function*() {
      if (!(yield* AlarmsTable.exists(storage, request.name))) {
        return yield* new NotFound({ message: `No alarm ${JSON.stringify(request.name)} is scheduled in this object` })
      }
      return { changed: (yield* calls.cancel(request.name)) ? 1 : 0 }
    })

  const answer = (request: P.Request): Effect.Effect<unknown, SourceError> => {
    switch (request._tag) {
      case "Alarms":
        return page(request)
      case "CancelAlarm":
        return cancel(request)
      case "PurgeBefore":
        return Effect.map(calls.purgeBefore(request.before), (changed) => ({ changed }))
      default:
        return Effect.fail(new BadRequest({ message: `The alarms capability does not answer ${request._tag}` }))
    }
  }

  return { capability: "alarms", overview, answer }
}
