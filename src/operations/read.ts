/**
 * Reading the operations' calls: one call's state (now, or once it settled) and pages of an
 * operation's calls. `R` is the result type of the operation asked about.
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Time from "../shared/duration.js"
import { DuplicateDurableCallError, InvalidInputError } from "../shared/Errors.js"
import type * as Capability from "../engine/capability.js"
import * as Json from "../shared/json.js"
import * as ListQuery from "../engine/listQuery.js"
import * as Validate from "../shared/validate.js"
import * as Watchers from "../engine/watchers.js"
import type { Row } from "../engine/StorageService.js"
import * as CallsTable from "./callsTable.js"
import type { AnyOperationDefinition, ListOptions, OperationStatus, WaitOptions } from "./types.js"

/** What the calls read and write through: the capability as attached. */
export type Parts = Capability.Capability<AnyOperationDefinition>

/** Calls per page when `list` names no `limit`. */
export const DEFAULT_LIST_LIMIT = 100
/** The most calls one page may ask for. */
export const MAX_LIST_LIMIT = 1_000

const STATUSES: ReadonlyArray<OperationStatus> = ["pending", "completed", "failed"]

export const duplicate = (id: string, existing: string, requested: string) =>
  new DuplicateDurableCallError({
    id,
    existing,
    requested,
    message: `Durable call "${id}" already belongs to operation "${existing}", not "${requested}"`
  })

export const checkOperation = (parts: Parts, operation: string) =>
  parts.definitionOf(operation) === undefined
    ? Effect.fail(
      new InvalidInputError({ field: "operation", kind: "type", message: `Unknown operation "${operation}"` })
    )
    : Effect.void

/** The call stored under `id`, which must belong to `operation`. */
export const readRow = (parts: Parts, operation: string, id: string) =>
  Effect.gen(function*() {
    const row = yield* CallsTable.read(parts.storage, id)
    if (row !== undefined && row.operation !== operation) {
      return yield* duplicate(id, String(row.operation), operation)
    }
    return Option.fromNullable(row)
  })

const toResult = <R>(parts: Parts, operation: string, row: Option.Option<Row>) =>
  Option.isNone(row) ? Effect.succeed({ status: "not_found" } as const) : stateOf<R>(parts, operation, row.value)

const errorOf = (stored: Row) => ({
  name: stored.last_error_name === null ? "Error" : String(stored.last_error_name),
  message: stored.last_error === null ? "Durable operation failed" : String(stored.last_error)
})

const stateOf = <R>(parts: Parts, operation: string, stored: Row) =>
  Effect.gen(function*() {
    switch (stored.status) {
      case "pending":
        return {
          status: "pending",
          attempt: Number(stored.attempt),
          nextAttemptAt: Number(stored.next_attempt_at),
          lastError: stored.last_error === null ? null : String(stored.last_error),
          error: stored.last_error === null ? null : errorOf(stored)
        } as const
      case "failed":
        return {
          status: "failed",
          attempt: Number(stored.attempt),
          error: errorOf(stored)
        } as const
      default: {
        const definition = parts.definitionOf(operation)!
        const result = yield* Effect.orDie(definition.result.decode(Json.decode(String(stored.result))))
        // Decoded by the operation's own result codec: its result type, which TS cannot tie to a name known at run time.
        return { status: "completed", result: result as R } as const
      }
    }
  })

export const getResult = <R>(parts: Parts, operation: string, id: string) =>
  Effect.gen(function*() {
    yield* checkOperation(parts, operation)
    yield* Validate.key("id", id)
    return yield* toResult<R>(parts, operation, yield* readRow(parts, operation, id))
  })

/** How long to wait: `{ timeoutMs }` (as everywhere else), or the time alone. */
export type WaitFor = Time.CallDuration | WaitOptions

/** Waits up to `timeoutMs` for the call to settle, then returns its latest state. */
export const wait = <R>(parts: Parts, operation: string, id: string, waitFor: WaitFor) =>
  Effect.gen(function*() {
    yield* checkOperation(parts, operation)
    yield* Validate.key("id", id)
    const timeoutMs = typeof waitFor === "object" && waitFor !== null && "timeoutMs" in waitFor ? waitFor.timeoutMs : waitFor
    const limit = yield* Time.milliseconds("timeoutMs", timeoutMs)
    const row = yield* readRow(parts, operation, id)
    if (Option.isNone(row) || row.value.status !== "pending" || limit === 0) return yield* toResult<R>(parts, operation, row)
    const pending = Effect.map(
      readRow(parts, operation, id),
      (again) => Option.isSome(again) && again.value.status === "pending"
    )
    yield* Watchers.awaitSettle(parts.watchers, id, String(row.value.generation_id), pending, limit)
    return yield* toResult<R>(parts, operation, yield* readRow(parts, operation, id))
  })

/** The operation's calls in registration order, a page at a time. */
export const list = Effect.fn("Operations.list")(function*<R>(parts: Parts, operation: string, options: ListOptions = {}) {
  yield* checkOperation(parts, operation)
  const query = yield* ListQuery.parse(options, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, STATUSES)
  const rows = yield* CallsTable.pageOf(parts.storage, operation, query.statuses, query.after, query.limit + 1)
  const page = rows.slice(0, query.limit)
  const items = yield* Effect.forEach(page, (row) =>
    Effect.map(stateOf<R>(parts, operation, row), (state) => ({
      ...state,
      id: String(row.id),
      createdAt: Number(row.created_at)
    })))
  const last = page[page.length - 1]
  return rows.length > query.limit && last !== undefined
    ? { items, cursor: ListQuery.cursor(Number(last.created_at), String(last.id)) }
    : { items }
})
