/**
 * Fanout's inspection source, read-only: the deliveries still stored per target in the overview, and
 * pages of them (target, message, phase, attempt, next attempt, last error), soonest due first.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageService } from "../engine/StorageService.js"
import * as ListQuery from "../engine/listQuery.js"
import { BadRequest } from "../inspection/errors.js"
import * as Limits from "../inspection/limits.js"
import type * as P from "../inspection/protocol.js"
import type { Source, SourceError } from "../inspection/source.js"
import * as Text from "../inspection/text.js"
import * as Table from "./deliveriesTable.js"

export const source = (storage: StorageService): Source => {
  const overview = Effect.map(Table.countsByTarget(storage, Limits.COUNT_CAP), (rows) => ({
    fanout: { targets: rows.map((row) => ({ target: String(row.target), pending: Number(row.n) })) }
  }))

  const page = (request: P.FanoutDeliveriesQuery) =>
    Effect.gen(function*() {
      const { after, limit } = yield* ListQuery.parse({ cursor: request.cursor, limit: request.limit }, Limits.DEFAULT_PAGE, Limits.MAX_PAGE, [])
      const rows = yield* Table.page(storage, { target: request.target, after, limit: limit + 1, messageChars: Limits.MESSAGE_CHARS })
      return ListQuery.page(rows, limit, (row): P.FanoutDeliveryItem => {
        const error = Text.errorOf(row.last_error_name, row.last_error)
        return {
          messageId: String(row.message_id),
          target: String(row.target_id),
          phase: row.phase === "dead_letter" ? "dead_letter" : "delivery",
          attempt: Number(row.attempt),
          nextAttemptAt: Number(row.next_attempt_at),
          ...(error === undefined ? {} : { error })
        }
      }, (last) => ListQuery.cursor(Number(last.next_attempt_at), String(last.id)))
    })

  const answer = (request: P.Request): Effect.Effect<unknown, SourceError> =>
    request._tag === "FanoutDeliveries"
      ? page(request)
      : Effect.fail(new BadRequest({ message: `The fanout capability does not answer ${request._tag}` }))

  return { capability: "fanout", overview, answer }
}
