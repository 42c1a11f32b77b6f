/**
 * Finding a schedule by handler and key, and reading schedules: one, or a handler's pages.
 * `P` is the payload type of the handler asked about.
 * @internal
 */
import * as Effect from "effect/Effect"
import { InvalidInputError } from "../shared/Errors.js"
import type * as Capability from "../engine/capability.js"
import * as ListQuery from "../engine/listQuery.js"
import * as Validate from "../shared/validate.js"
import type { Row } from "../engine/StorageService.js"
import * as Rows from "./rows.js"
import type * as Runs from "./runs.js"
import * as SchedulesTable from "./schedulesTable.js"
import type { AnyScheduleDefinition, SchedulePage } from "./types.js"

/** What the calls read and write through: the capability as attached, and the timings' cache. */
export interface Parts extends Capability.Capability<AnyScheduleDefinition> {
  readonly timingOf: Rows.Timings
  /** What a run's start writes with (`Runs.pick`, through `Slots.update`). */
  readonly runs: Runs.Parts
}

/** Schedules per page when `list` names no `limit`. */
export const DEFAULT_LIST_LIMIT = 100
/** The most schedules one page may ask for. */
export const MAX_LIST_LIMIT = 1_000

export const invalidInput = (field: string, message: string) => new InvalidInputError({ field, kind: "type", message })

const rowKey = (name: string, key: string) => `${name}/${key}`

/**
 * The schedule `key` of handler `name`: its definition, its checked key and its row's key. `validate`:
 * `Validate.newKey` where the schedule may be created (`upsert`), which also refuses "." and "..".
 */
export const checked = (parts: Parts, name: string, key: unknown, validate = Validate.key) =>
  Effect.gen(function*() {
    const definition = parts.definitionOf(name)
    if (definition === undefined) return yield* invalidInput("schedule", `Unknown schedule ${Validate.shown(name)}`)
    const valid = yield* validate("key", key)
    return { definition, key: valid, id: rowKey(name, valid) }
  })

export const readRow = (parts: Parts, id: string) => SchedulesTable.read(parts.storage, id)

const infoOf = <P>(definition: AnyScheduleDefinition, row: Row) =>
  Effect.map(
    Effect.orElseSucceed(definition.payload.decode(Rows.storedPayload(row)), () => Rows.storedPayload(row)),
    // Decoded by the handler's own payload codec (as stored if it no longer decodes): typed as the
    // handler's payload, which TS cannot tie to a name known at run time.
    (payload) => Rows.infoOf(row, payload) as Rows.ScheduleInfo<P>
  )

export const get = <P>(parts: Parts, name: string, key: string) =>
  Effect.gen(function*() {
    const target = yield* checked(parts, name, key)
    const row = yield* readRow(parts, target.id)
    return row === undefined ? undefined : yield* infoOf<P>(target.definition, row)
  }).pipe(Effect.withSpan("Schedules.get"))

/** Handler `name`'s schedules, oldest first, a page at a time. */
export const list = <P>(
  parts: Parts,
  name: string,
  given: { readonly limit?: number | undefined; readonly cursor?: string | undefined } = {}
) =>
  Effect.gen(function*() {
    const definition = parts.definitionOf(name)!
    const query = yield* ListQuery.parse(given, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, [])
    const rows = yield* SchedulesTable.pageOf(parts.storage, name, query.after, query.limit + 1)
    const page = rows.slice(0, query.limit)
    const items = yield* Effect.forEach(page, (row) => infoOf<P>(definition, row))
    const last = page[page.length - 1]
    const result: SchedulePage<P> = rows.length > query.limit && last !== undefined
      ? { items, cursor: ListQuery.cursor(Number(last.created_at), String(last.key)) }
      : { items }
    return result
  }).pipe(Effect.withSpan("Schedules.list"))
