/**
 * The operations' inspection source: counts by status, pages of calls across operations (in the
 * order they were registered, keyset `<createdAt>:<id>` as `Operations.list`), cancel and purge
 * through the capability's own calls.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { DuplicateDurableCallError, InvalidInputError, StorageError } from "../shared/Errors.js"
import type { StorageService } from "../engine/StorageService.js"
import * as ListQuery from "../engine/listQuery.js"
import { BadRequest, NotFound } from "../inspection/errors.js"
import * as Limits from "../inspection/limits.js"
import type * as P from "../inspection/protocol.js"
import type { Source, SourceError } from "../inspection/source.js"
import * as Text from "../inspection/text.js"
import * as CallsTable from "./callsTable.js"

const STATUSES: ReadonlyArray<P.OperationStatus> = ["pending", "completed", "failed"]

export interface Calls {
  readonly cancel: (operation: string, id: string) => Effect.Effect<boolean, InvalidInputError | DuplicateDurableCallError | StorageError>
  readonly purgeBefore: (before: number) => Effect.Effect<number, InvalidInputError | StorageError>
}

export const source = (storage: StorageService, calls: Calls): Source => {
  // Capped counts (`COUNT_CAP`) from the status index: bounded whatever the table holds.
  const overview = Effect.gen(function*() {
    const counts = { pending: 0, completed: 0, failed: 0 }
    for (const status of STATUSES) counts[status] = yield* CallsTable.cappedCount(storage, status)
    return { operations: { counts } }
  })

  const page = (request: P.OperationsQuery) =>
    Effect.gen(function*() {
      const { after, limit } = yield* ListQuery.parse({ cursor: request.cursor, limit: request.limit }, Limits.DEFAULT_PAGE, Limits.MAX_PAGE, [])
      const rows = yield* CallsTable.page(
        storage,
        `id, operation, status, attempt, next_attempt_at, created_at, last_error_name, ${Text.messageOf("last_error")},
           ${Text.headOf("payload", Limits.LIST_JSON_CHARS)}, ${Text.headOf("result", Limits.LIST_JSON_CHARS)}`,
        request.status,
        after,
        limit + 1
      )
      return ListQuery.page(rows, limit, (row): P.OperationItem => {
        const status = row.status as P.OperationStatus
        const error = Text.errorOf(row.last_error_name, row.last_error)
        return {
          id: String(row.id),
          operation: String(row.operation),
          status,
          attempt: Number(row.attempt),
          nextAttemptAt: status === "pending" ? Number(row.next_attempt_at) : null,
          createdAt: Number(row.created_at),
          payload: Text.jsonOf(row, "payload", Limits.LIST_JSON_CHARS),
          ...(status === "completed" ? { result: Text.jsonOf(row, "result", Limits.LIST_JSON_CHARS) } : {}),
          ...(error === undefined ? {} : { error })
        }
      }, (last) => ListQuery.cursor(Number(last.created_at), String(last.id)))
    })

  const cancel = (request: P.CancelOperation) =>
    Effect.gen(function*() {
      const row = yield* CallsTable.operationOf(storage, request.id)
      if (row === undefined || row.operation !== request.operation) {
        return yield* new NotFound({ message: `No call ${JSON.stringify(request.id)} of operation ${JSON.stringify(request.operation)}` })
      }
      return { changed: (yield* calls.cancel(request.operation, request.id)) ? 1 : 0 }
    })

  const answer = (request: P.Request): Effect.Effect<unknown, SourceError> => {
    switch (request._tag) {
      case "Operations":
        return page(request)
      case "CancelOperation":
        // Both ids exist (checked above): a duplicate cannot arise, it is a refusal like any other.
        return Effect.catchTag(cancel(request), "DuplicateDurableCallError", (error) => Effect.fail(new BadRequest({ message: error.message })))
      case "PurgeBefore":
        return Effect.map(calls.purgeBefore(request.before), (changed) => ({ changed }))
      default:
        return Effect.fail(new BadRequest({ message: `The operations capability does not answer ${request._tag}` }))
    }
  }

  return { capability: "operations", overview, answer }
}
