/**
 * The named alarms' calls: schedule a name (replacing its pending occurrence), read one or all
 * stored occurrences, cancel one.
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Codec from "../shared/codec.js"
import * as Json from "../shared/json.js"
import * as ListQuery from "../engine/listQuery.js"
import { DurableCanceledError, InvalidInputError } from "../shared/Errors.js"
import type * as Capability from "../engine/capability.js"
import type { Row } from "../engine/StorageService.js"
import * as Validate from "../shared/validate.js"
import * as AlarmsTable from "./alarmsTable.js"
import { IDEMPOTENCY_PREFIX } from "./schema.js"
import type { AlarmListOptions, AnyAlarmDefinition, NamedAlarmState } from "./types.js"

/** What the calls read and write through: the capability as attached. */
export type Parts = Capability.Capability<AnyAlarmDefinition>

const checkName = (parts: Parts, name: unknown) =>
  typeof name === "string" && parts.definitionOf(name) !== undefined
    ? Effect.succeed(name)
    : Effect.fail(
      new InvalidInputError({ field: "name", kind: "type", message: `Unknown named alarm ${Validate.shown(name)}` })
    )

/** The occurrence stored in `row`, which is `name`'s. */
const stateOf = <Name extends string>(row: Row, name: Name): NamedAlarmState<Name> => ({
  name,
  status: row.status === "failed" ? "failed" : "pending",
  scheduledTime: Number(row.scheduled_at),
  nextAttemptAt: Number(row.next_attempt_at),
  attempt: Number(row.attempt),
  lastError: row.last_error === null
    ? null
    : { name: row.last_error_name === null ? "Error" : String(row.last_error_name), message: String(row.last_error) },
  idempotencyKey: `${IDEMPOTENCY_PREFIX}${String(row.generation_id)}`,
  createdAt: Number(row.created_at),
  payload: payloadOf(row)
})

/** The payload stored with an occurrence, or undefined. */
export const payloadOf = (row: Row): unknown =>
  row.payload === null || row.payload === undefined ? undefined : Json.decode(String(row.payload))

/** How many occurrences a `list` page has when `limit` is not given. */
export const DEFAULT_LIST_LIMIT = 100
/** The largest `limit` a `list` page may ask for. */
export const MAX_LIST_LIMIT = 1_000
const STATUSES: ReadonlyArray<NamedAlarmState["status"]> = ["pending", "failed"]

export const get = Effect.fn("NamedAlarms.get")(function*<Name extends string>(parts: Parts, name: Name) {
  yield* checkName(parts, name)
  const row = yield* AlarmsTable.read(parts.storage, name)
  return Option.map(Option.fromNullable(row), (found) => stateOf(found, name))
})

/** The stored occurrences, soonest first, a page at a time. */
export const list = Effect.fn("NamedAlarms.list")(function*(parts: Parts, options: AlarmListOptions = {}) {
  const query = yield* ListQuery.parse(options, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, STATUSES)
  const rows = yield* AlarmsTable.soonest(parts.storage, query.statuses, query.after, query.limit + 1)
  return ListQuery.page(
    rows,
    query.limit,
    (row) => stateOf(row, String(row.name)),
    (last) => ListQuery.cursor(Number(last.next_attempt_at), String(last.name))
  )
})

export const cancel = Effect.fn("NamedAlarms.cancel")(function*(parts: Parts, name: string) {
  const { handle, storage, watchers } = parts
  yield* checkName(parts, name)
  const [row] = yield* handle.write(AlarmsTable.remove(storage, name))
  if (row === undefined) return false
  const error = new DurableCanceledError({ message: `Durable alarm "${name}" was canceled` })
  yield* handle.abort((key) => key === name, error)
  if (row.status !== "pending") {
    // No event settles it (its waiters learn from the event otherwise).
    watchers.notify(name)
    return true
  }
  yield* handle.emit((timestamp) => ({
    type: "terminal",
    entityKind: "named_alarm",
    alarm: name,
    id: name,
    generation: String(row.generation_id),
    timestamp,
    attempt: Number(row.attempt),
    reason: "canceled",
    error: { name: error._tag, message: error.message }
  }))
  return true
})

// Untraced: this is the hot path, and a span (with its captured call site) costs more than the write (bench B1).
export const schedule = Effect.fnUntraced(function*(parts: Parts, name: string, scheduledTime: number | Date, payload?: unknown) {
  const { handle, storage } = parts
  yield* checkName(parts, name)
  const at = yield* Validate.timestamp("scheduledTime", scheduledTime)
  const codec = parts.definitionOf(name)?.payload
  const encoded = payload === undefined || codec === undefined ? payload : yield* Effect.mapError(
    codec.encode(payload as never),
    (error) => new InvalidInputError({ field: "payload", kind: "type", message: Codec.describeParseError("payload", error) })
  )
  const stored = encoded === undefined ? null : yield* Validate.json("payload", encoded)
  const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const generation = crypto.randomUUID()
  yield* handle.writePending(AlarmsTable.schedule(storage, name, generation, at, now, stored), () => ({ key: name, at }))
  yield* handle.emit((timestamp) => ({
    type: "scheduled",
    entityKind: "named_alarm",
    alarm: name,
    id: name,
    generation,
    timestamp,
    attempt: 0,
    scheduledTime: at
  }), undefined, false)
})
