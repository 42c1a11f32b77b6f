/**
 * Registering calls: each checked and encoded before any storage access, then all of a batch
 * written in one transaction with the alarm reconciliation (the handler never runs before it commits).
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { InvalidInputError } from "../shared/Errors.js"
import type { PendingRecord } from "../engine/DurableTable.js"
import * as Codec from "../shared/codec.js"
import * as Json from "../shared/json.js"
import * as Time from "../shared/duration.js"
import * as Validate from "../shared/validate.js"
import * as CallsTable from "./callsTable.js"
import { checkOperation, duplicate, type Parts } from "./read.js"
import type { RegisterCall, Registration } from "./types.js"

// When a registered call is due: now, `runAt`, or now + `delayMs`.
const dueTime = (call: RegisterCall<unknown>, now: number, fieldOf: (name: string) => string) =>
  Effect.gen(function*() {
    if (call.runAt !== undefined && call.delayMs !== undefined) {
      return yield* new InvalidInputError({
        field: fieldOf("runAt"),
        kind: "type",
        message: "runAt and delayMs cannot both be given"
      })
    }
    if (call.runAt !== undefined) return yield* Validate.timestamp(fieldOf("runAt"), call.runAt)
    if (call.delayMs === undefined) return now
    const delay = yield* Time.milliseconds(fieldOf("delayMs"), call.delayMs)
    if (!Number.isSafeInteger(now + delay)) {
      return yield* new InvalidInputError({
        field: fieldOf("delayMs"),
        kind: "range",
        message: `delayMs ${delay} from now is not a safe integer timestamp`
      })
    }
    return now + delay
  })

// Untraced: this is the hot path, and a span (with its captured call site) costs more than the write (bench B1).
/**
 * A call checked and encoded, before any storage access (a bad one leaves storage unchanged).
 * `path` places it in a batch (`calls[3]`): its fields are then named `calls[3].id`, ….
 */
const prepare = Effect.fnUntraced(function*(parts: Parts, operation: string, call: RegisterCall<unknown>, now: number, path?: string) {
  const fieldOf = (name: string) => path === undefined ? name : `${path}.${name}`
  const field = path ?? "call"
  if (typeof call !== "object" || call === null) {
    return yield* new InvalidInputError({
      field,
      kind: "type",
      message: `${field} must be { id, payload }, got ${Validate.shown(call)}`
    })
  }
  const id = yield* Validate.newKey(fieldOf("id"), call.id)
  const payloadField = fieldOf("payload")
  const encoded = yield* Effect.mapError(
    parts.definitionOf(operation)!.payload.encode(call.payload as never),
    (error) =>
      new InvalidInputError({ field: payloadField, kind: "type", message: Codec.describeParseError(payloadField, error) })
  )
  const payload = yield* Validate.json(payloadField, encoded)
  const at = yield* dueTime(call, now, fieldOf)
  return { id, payload, at, generation: crypto.randomUUID() }
})
type Prepared = Effect.Effect.Success<ReturnType<typeof prepare>>

const insert = (parts: Parts, operation: string, call: Prepared, now: number) =>
  Effect.gen(function*() {
    const rows = yield* CallsTable.insert(parts.storage, { ...call, operation, createdAt: now })
    if (rows.length > 0) return "created" as const
    const winner = yield* CallsTable.operationOf(parts.storage, call.id)
    if (winner === undefined) return "existing" as const
    if (winner.operation !== operation) return yield* duplicate(call.id, String(winner.operation), operation)
    return Json.same(String(winner.payload), call.payload) ? "existing" as const : "conflicting" as const
  })

// The caller learns it from the result; the log tells whoever reads the object's logs, who may not be that caller.
const logConflict = (operation: string, id: string) =>
  Effect.logWarning(
    `Durable call "${id}" of operation "${operation}" is registered already with another payload: ` +
      "the new payload was ignored (an id runs once; use a new id, or retry/purge the old call)"
  ).pipe(Effect.annotateLogs({ event: "durability.operation.conflicting", operation, id }))

/** Writes the calls in one transaction (all or none), then starts what a free permit can take. */
const write = (parts: Parts, operation: string, calls: ReadonlyArray<Prepared>, now: number) =>
  Effect.gen(function*() {
    const statuses = yield* parts.handle.writePending(
      Effect.forEach(calls, (call) => insert(parts, operation, call, now)),
      (written) => {
        const records: Array<PendingRecord> = []
        written.forEach((status, index) => {
          const call = calls[index]!
          if (status === "created") records.push({ key: call.id, at: call.at, start: call.at <= now })
        })
        return records
      },
      { oneStatementAt: calls.length === 1 ? calls[0]!.at : undefined }
    )
    const registrations: Array<Registration> = []
    for (const [index, status] of statuses.entries()) {
      const call = calls[index]!
      registrations.push({ id: call.id, status })
      if (status === "conflicting") yield* logConflict(operation, call.id)
      if (status !== "created") continue
      yield* parts.handle.emit((timestamp) => ({
        type: "registered",
        entityKind: "operation",
        operation,
        id: call.id,
        generation: call.generation,
        timestamp,
        attempt: 0
      }), now, false)
    }
    return registrations
  })

export const register = Effect.fnUntraced(function*(parts: Parts, operation: string, call: RegisterCall<unknown>) {
  yield* checkOperation(parts, operation)
  const now = yield* Clock.currentTimeMillis
  const [registration] = yield* write(parts, operation, [yield* prepare(parts, operation, call, now)], now)
  return registration!
})

export const registerMany = Effect.fn("Operations.registerMany")(function*(
  parts: Parts,
  operation: string,
  calls: Iterable<RegisterCall<unknown>>
) {
  yield* checkOperation(parts, operation)
  if (typeof calls !== "object" || calls === null || typeof (calls as Iterable<unknown>)[Symbol.iterator] !== "function") {
    return yield* new InvalidInputError({
      field: "calls",
      kind: "type",
      message: `calls must be an array (or iterable) of { id, payload }, got ${Validate.shown(calls)}`
    })
  }
  const now = yield* Clock.currentTimeMillis
  const prepared: Array<Prepared> = []
  let index = 0
  for (const call of calls) prepared.push(yield* prepare(parts, operation, call, now, `calls[${index++}]`))
  return prepared.length === 0 ? [] : yield* write(parts, operation, prepared, now)
})
