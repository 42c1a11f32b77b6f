/**
 * Canceling a pending call (it fails with `DurableCanceledError` and is never retried), and running a
 * failed one again.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { DurableCanceledError } from "../shared/Errors.js"
import * as Validate from "../shared/validate.js"
import * as CallsTable from "./callsTable.js"
import { checkOperation, type Parts, readRow } from "./read.js"

export const cancel = Effect.fn("Operations.cancel")(function*(parts: Parts, operation: string, id: string) {
  const { handle, storage } = parts
  yield* checkOperation(parts, operation)
  yield* Validate.key("id", id)
  const row = yield* readRow(parts, operation, id)
  if (Option.isNone(row) || row.value.status !== "pending") return false
  const generation = String(row.value.generation_id)
  const error = new DurableCanceledError({ message: `Durable operation "${operation}" (id "${id}") was canceled` })
  const now = yield* Clock.currentTimeMillis
  const [canceled] = yield* handle.write(
    CallsTable.cancel(storage, id, generation, { name: error._tag, message: error.message }, now)
  )
  if (canceled === undefined) return false
  // The handler may still run; its settle no longer matches a pending row.
  yield* handle.abort((key) => key === id, error)
  yield* handle.emit((timestamp) => ({
    type: "terminal",
    entityKind: "operation",
    operation,
    id,
    generation,
    timestamp,
    attempt: Number(canceled.attempt),
    reason: "canceled",
    error: { name: error._tag, message: error.message }
  }))
  return true
})

export const retry = Effect.fn("Operations.retry")(function*(parts: Parts, operation: string, id: string) {
  const { handle, storage } = parts
  yield* checkOperation(parts, operation)
  yield* Validate.key("id", id)
  const now = yield* Clock.currentTimeMillis
  const generation = crypto.randomUUID()
  const rows = yield* handle.writePending(
    CallsTable.retry(storage, operation, id, generation, now),
    (rows) => rows.length === 0 ? [] : [{ key: id, at: now, start: true }]
  )
  if (rows.length === 0) {
    // Not failed, or not there: an id of another operation says so.
    yield* readRow(parts, operation, id)
    return false
  }
  yield* handle.emit((timestamp) => ({
    type: "registered",
    entityKind: "operation",
    operation,
    id,
    generation,
    timestamp,
    attempt: 0
  }), now)
  return true
})
