/**
 * Bulk operations by filter: cancel, remove, retry, promote or redrive the jobs of one queue (or of
 * every queue) that match states, an id prefix and an age, one bounded chunk per call.
 *
 * A call is one transaction over at most `limit` jobs (default 100, at most 500) found among at most
 * `MAX_EXAMINED` rows read, and answers a cursor to go on from: the caller loops, so the object serves
 * its other calls between chunks and no transaction grows with the filter. A run (its first call and
 * the ones given its cursors) covers the jobs that existed when it began: jobs added since, and dead
 * letters of later failures, are left alone, so a run ends even while jobs keep coming.
 *
 * Each job changes exactly as the call on its id changes it: the same statements (`Manage.*In`), the
 * same events, flows and retention counts, the alarm reconciled; a running job's signal is aborted
 * once the chunk committed.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { PendingRecord } from "../engine/DurableTable.js"
import type { Row } from "../engine/StorageService.js"
import { MAX_BULK_LIMIT as LIMIT } from "../inspection/limits.js"
import * as Time from "../shared/duration.js"
import { InvalidInputError, type StorageError } from "../shared/Errors.js"
import * as Validate from "../shared/validate.js"
import type { Core } from "./core.js"
import * as DeadLettersTable from "./deadLettersTable.js"
import * as Flow from "./flow.js"
import * as JobsTable from "./jobsTable.js"
import * as Manage from "./manage.js"
import { fnv1a32 } from "./router.js"
import * as Rows from "./rows.js"
import { JOB_STATES, type JobState } from "./types.js"

/** What a bulk call does to each job it finds (`redrive`: to each dead letter). */
export type BulkAction = "cancel" | "remove" | "retry" | "promote" | "redrive"

/** Every bulk action. */
export const BULK_ACTIONS: ReadonlyArray<BulkAction> = ["cancel", "remove", "retry", "promote", "redrive"]

/**
 * Which jobs a bulk call acts on: those of `queue` (or of every queue, `allQueues: true`) matching every
 * field given. `Time`: a Duration or milliseconds on the Effect face, milliseconds on the promise face.
 */
export interface JobFilter<Time = Time.CallDuration> {
  /** The queue whose jobs it acts on; give this or `allQueues`. */
  readonly queue?: string | undefined
  /** `true`: the jobs of every queue (instead of `queue`). */
  readonly allQueues?: boolean | undefined
  /**
   * Only jobs in these states (default: every state the action applies to). cancel: waiting, delayed, active,
   * waiting-children; remove: all but active; retry: failed, canceled; promote: delayed. Not for `redrive`.
   */
  readonly states?: ReadonlyArray<JobState> | undefined
  /** Only jobs whose id starts with this. */
  readonly idPrefix?: string | undefined
  /** Only jobs created before this time (strict; epoch milliseconds or a Date). Not for `redrive`. */
  readonly createdBefore?: number | Date | undefined
  /** Only jobs created at least this long ago (a dead letter: moved to the list at least this long ago). */
  readonly olderThanMs?: Time | undefined
}

/** One bulk call's options: where to go on from, and how many jobs at most. */
export interface BulkOptions {
  /** The `cursor` of the previous call of the same run (same action and filter), to go on from there. */
  readonly cursor?: string | undefined
  /** Jobs changed at most in this call, one transaction (default 100, at most 500). */
  readonly limit?: number | undefined
  /** `cancel`: the reason kept with each job canceled (at most 1 000 characters are kept). */
  readonly reason?: string | undefined
}

/** What a bulk call did: its chunk's counts, and whether the run is over. */
export interface BulkResult {
  /** Jobs found matching the filter in this chunk. */
  readonly matched: number
  /** Jobs changed (a job that changed meanwhile, or is running here for `remove`, is matched but not changed). */
  readonly affected: number
  /** Rows read to find them (at most 1 000 a call, whatever the queue holds). */
  readonly examined: number
  /** True when nothing is left to examine: the run is over. */
  readonly done: boolean
  /** Present while the run is not over: pass it back (with the same action and filter) for the next chunk. */
  readonly cursor?: string
}

/** Default jobs per call. */
export const DEFAULT_BULK_LIMIT = 100
/** Most jobs per call (one transaction). */
export const MAX_BULK_LIMIT = LIMIT
/** Rows a call reads at most to find its jobs: a rare match among many answers a short chunk and a cursor. */
export const MAX_EXAMINED = 1_000

/** The states each action applies to, as the call on one id does (remove leaves running jobs alone). */
const APPLIES: Readonly<Record<Exclude<BulkAction, "redrive">, ReadonlyArray<JobState>>> = {
  cancel: ["waiting", "delayed", "active", "waiting-children"],
  remove: ["waiting", "delayed", "waiting-children", "completed", "failed", "canceled"],
  retry: ["failed", "canceled"],
  promote: ["delayed"]
}

const FILTER_FIELDS = new Set(["queue", "allQueues", "states", "idPrefix", "createdBefore", "olderThanMs"])
const OPTION_FIELDS = new Set(["cursor", "limit", "reason"])

const invalid = (field: string, kind: "range" | "type", message: string) => new InvalidInputError({ field, kind, message })

/** A filter and options, checked. */
export interface Checked {
  readonly action: BulkAction
  readonly queues: ReadonlyArray<string>
  readonly states: ReadonlyArray<JobState>
  readonly idPrefix: string | undefined
  readonly createdBefore: number | undefined
  readonly olderThanMs: number | undefined
  readonly limit: number
  readonly reason: string
  readonly cursor: unknown
}

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The action, filter and options, checked (`InvalidInputError` naming the field). `names`: the object's
 * queues; undefined where they are not known (a router, whose shards check the name again).
 */
export const checkInput = (
  names: ReadonlyArray<string> | undefined,
  action: unknown,
  filter: unknown,
  options: unknown
): Effect.Effect<Checked, InvalidInputError> =>
  Effect.gen(function*() {
    if (typeof action !== "string" || !BULK_ACTIONS.includes(action as BulkAction)) {
      return yield* invalid("action", "type", `action must be one of ${BULK_ACTIONS.join(", ")}, got ${Validate.shown(action)}`)
    }
    const act = action as BulkAction
    if (!isObject(filter)) return yield* invalid("filter", "type", "filter must be an object { queue | allQueues, states?, idPrefix?, createdBefore?, olderThanMs? }")
    // A misspelt field would widen the filter to every job: refused, not ignored.
    for (const field of Object.keys(filter)) {
      if (!FILTER_FIELDS.has(field)) return yield* invalid(`filter.${field}`, "type", `filter.${field} is not a filter field (${[...FILTER_FIELDS].join(", ")})`)
    }
    const { allQueues, createdBefore, idPrefix, olderThanMs, queue, states } = filter
    if (allQueues !== undefined && allQueues !== true) {
      return yield* invalid("filter.allQueues", "type", `filter.allQueues must be true when given, got ${Validate.shown(allQueues)}`)
    }
    if ((queue === undefined) === (allQueues === undefined)) {
      return yield* invalid("filter.queue", "type", "give filter.queue (a queue's name) or filter.allQueues: true, not both")
    }
    if (queue !== undefined && (typeof queue !== "string" || (names === undefined ? queue.length === 0 : !names.includes(queue)))) {
      return yield* invalid(
        "filter.queue",
        "type",
        names === undefined
          ? `filter.queue must be a queue's name, got ${Validate.shown(queue)}`
          : `filter.queue must name a queue of this object (${names.join(", ") || "none"}), got ${Validate.shown(queue)}`
      )
    }
    const applies = act === "redrive" ? [] : APPLIES[act]
    let chosen = applies
    if (states !== undefined) {
      if (act === "redrive") return yield* invalid("filter.states", "type", "filter.states is not for redrive: dead letters have no state")
      if (!Array.isArray(states) || states.length === 0 || states.some((state) => !JOB_STATES.includes(state as JobState))) {
        return yield* invalid("filter.states", "type", `filter.states must be a non-empty array of ${JOB_STATES.join(", ")}`)
      }
      const wrong = (states as ReadonlyArray<JobState>).find((state) => !applies.includes(state))
      if (wrong !== undefined) {
        return yield* invalid("filter.states", "range", `filter.states: ${act} applies to ${applies.join(", ")}, not to ${wrong}`)
      }
      chosen = applies.filter((state) => (states as ReadonlyArray<JobState>).includes(state))
    }
    if (idPrefix !== undefined) {
      if (typeof idPrefix !== "string" || idPrefix.length === 0 || idPrefix.length > Validate.MAX_KEY_LENGTH) {
        return yield* invalid("filter.idPrefix", "type", `filter.idPrefix must be a string of 1 to ${Validate.MAX_KEY_LENGTH} characters, got ${Validate.shown(idPrefix)}`)
      }
    }
    if (createdBefore !== undefined && act === "redrive") {
      return yield* invalid("filter.createdBefore", "type", "filter.createdBefore is not for redrive: a dead letter keeps when it failed (use olderThanMs)")
    }
    const before = createdBefore === undefined ? undefined : yield* Validate.timestamp("filter.createdBefore", createdBefore)
    const older = olderThanMs === undefined ? undefined : yield* Time.milliseconds("filter.olderThanMs", olderThanMs)
    const given = options === undefined ? {} : options
    if (!isObject(given)) return yield* invalid("options", "type", "options must be an object { cursor?, limit?, reason? }")
    for (const field of Object.keys(given)) {
      if (!OPTION_FIELDS.has(field)) return yield* invalid(`options.${field}`, "type", `options.${field} is not an option (${[...OPTION_FIELDS].join(", ")})`)
    }
    const limit = given.limit ?? DEFAULT_BULK_LIMIT
    if (!(typeof limit === "number" && Number.isSafeInteger(limit) && limit >= 1 && limit <= MAX_BULK_LIMIT)) {
      return yield* invalid("options.limit", "range", `options.limit must be an integer from 1 to ${MAX_BULK_LIMIT}, got ${Validate.shown(limit)}`)
    }
    const reason = given.reason ?? ""
    if (typeof reason !== "string") return yield* invalid("options.reason", "type", `options.reason must be a string, got ${Validate.shown(reason)}`)
    if (given.cursor !== undefined && typeof given.cursor !== "string") {
      return yield* invalid("options.cursor", "type", `options.cursor must be a cursor a previous call returned, got ${Validate.shown(given.cursor)}`)
    }
    return {
      action: act,
      queues: queue === undefined ? [...(names ?? [])] : [queue as string],
      states: chosen,
      idPrefix: idPrefix as string | undefined,
      createdBefore: before,
      olderThanMs: older,
      limit,
      reason: reason.slice(0, 1_000),
      cursor: given.cursor === undefined ? undefined : parseCursor(given.cursor as string)
    }
  })

const parseCursor = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

/**
 * What a cursor's positions mean (the action, the queues and states walked): a cursor given with another
 * action or filter would walk other segments, so it is refused instead.
 */
const runOf = (checked: Checked): number => fnv1a32(JSON.stringify([checked.action, checked.queues, checked.states]))

const badCursor = () =>
  invalid("options.cursor", "type", "options.cursor must be a cursor a previous call of this run returned (same action and filter)")

const isCount = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value) && value >= 0

/** Where a jobs run is: its segment (a queue and a stored status), the last insertion order read there, and the run's bound. */
interface JobsCursor {
  readonly segment: number
  readonly after: number
  readonly upTo: number
}

/** Where a redrive run is: its queue, the last dead letter read there (keyset), and the run's bound in time. */
interface LettersCursor {
  readonly segment: number
  readonly after: { readonly at: number; readonly id: string } | undefined
  readonly upTo: number
}

/** One chunk: the run's next jobs (or dead letters), changed in one transaction. */
export const bulk = (core: Core, action: unknown, filter: unknown, options?: unknown): Effect.Effect<BulkResult, InvalidInputError | StorageError> =>
  Effect.flatMap(checkInput([...core.queues.keys()], action, filter, options), (checked) => checked.action === "redrive" ? redriveChunk(core, checked) : jobsChunk(core, checked))

const jobsChunk = (core: Core, checked: Checked): Effect.Effect<BulkResult, InvalidInputError | StorageError> =>
  Effect.gen(function*() {
    const statuses = [...new Set(checked.states.map((state) => JobsTable.STATUS_OF[state]))]
    const segments = checked.queues.flatMap((queue) => statuses.map((status) => ({ queue, status })))
    const raw = checked.cursor
    let position: JobsCursor
    if (raw === undefined) {
      position = { segment: 0, after: 0, upTo: core.seq.next - 1 }
    } else {
      const ok = Array.isArray(raw) && raw.length === 5 && raw[0] === "j" && raw[4] === runOf(checked) && isCount(raw[1]) &&
        raw[1] <= segments.length && isCount(raw[2]) && isCount(raw[3])
      if (!ok) return yield* badCursor()
      position = { segment: raw[1], after: raw[2], upTo: raw[3] }
    }
    const now = yield* Clock.currentTimeMillis
    const createdBy = Math.min(
      checked.createdBefore === undefined ? Number.MAX_SAFE_INTEGER : checked.createdBefore - 1,
      checked.olderThanMs === undefined ? Number.MAX_SAFE_INTEGER : now - checked.olderThanMs
    )
    const matches = (row: Row) =>
      (checked.idPrefix === undefined || String(row.id).startsWith(checked.idPrefix)) &&
      Number(row.created_at) <= createdBy &&
      checked.states.includes(Rows.stateOf(row, now, core.handle.executing(String(row.key))))
    const running: Array<Row> = []
    const removed: Array<Row> = []
    const touched = new Set<string>()
    let { after, segment } = position
    let examined = 0
    let matched = 0
    const affected = yield* Manage.writeChanges(core, (out) =>
      Effect.gen(function*() {
        let changed = 0
        while (segment < segments.length && matched < checked.limit && examined < MAX_EXAMINED) {
          const { queue, status } = segments[segment]!
          const take = MAX_EXAMINED - examined
          const rows = yield* JobsTable.bulkWindow(core.storage, { queue, status, after, upTo: position.upTo, take })
          let read = 0
          for (const row of rows) {
            examined++
            read++
            after = Number(row.seq)
            if (!matches(row)) continue
            matched++
            if (yield* changeOne(core, checked, out, row, now, { running, removed })) {
              changed++
              touched.add(queue)
            }
            if (matched === checked.limit) break
          }
          // The segment is read to its end when the window came back short and every row of it was read.
          if (rows.length < take && read === rows.length) {
            segment++
            after = 0
          }
        }
        return changed
      }))
    // Inside a caller's transaction, memory acts once the chunk committed.
    for (const row of running) yield* core.storage.afterCommit(Manage.abortRunning(core, row, checked.reason))
    if (removed.length > 0) yield* Manage.abortRemoved(core, removed, "Job removed (bulk)")
    if (checked.action === "remove" || checked.action === "retry") for (const queue of touched) Manage.forgetCounts(core, queue)
    const done = segment >= segments.length
    return done
      ? { matched, affected, examined, done }
      : { matched, affected, examined, done, cursor: JSON.stringify(["j", segment, after, position.upTo, runOf(checked)]) }
  })

/** One matched job changed as the call on its id changes it; whether it was. */
const changeOne = (
  core: Core,
  checked: Checked,
  out: Flow.Changes,
  row: Row,
  now: number,
  after: { readonly running: Array<Row>; readonly removed: Array<Row> }
): Effect.Effect<boolean, StorageError> => {
  const key = String(row.key)
  const id = String(row.id)
  const queue = key.slice(0, key.length - id.length - 1)
  switch (checked.action) {
    case "cancel":
      if (core.handle.executing(key)) {
        // Its end becomes `canceled`: the abort follows the commit (`cancel` on one id does the same).
        return Effect.as(Effect.tap(JobsTable.requestCancel(core.storage, key, checked.reason), () => after.running.push(row)), true)
      }
      return Manage.cancelIn(core, out, key, checked.reason, now)
    case "remove":
      return Effect.map(Manage.removeIn(core, out, queue, id, now), (gone) => {
        after.removed.push(...gone)
        return gone.length > 0
      })
    case "retry":
      return Effect.map(Manage.retryIn(core, queue, id, now), (rows) => pending(out, rows, key, now))
    default:
      return Effect.map(JobsTable.promote(core.storage, key, now), (rows) => pending(out, rows, key, now))
  }
}

const pending = (out: Flow.Changes, rows: ReadonlyArray<Row>, key: string, now: number): boolean => {
  if (rows.length === 0) return false
  out.pending.push({ key, at: now, start: true } satisfies PendingRecord)
  return true
}

const redriveChunk = (core: Core, checked: Checked): Effect.Effect<BulkResult, InvalidInputError | StorageError> =>
  Effect.gen(function*() {
    const queues = checked.queues
    const now = yield* Clock.currentTimeMillis
    const raw = checked.cursor
    let position: LettersCursor
    if (raw === undefined) {
      position = { segment: 0, after: undefined, upTo: now }
    } else {
      const keyset = Array.isArray(raw) && raw.length === 6 && raw[0] === "d" && raw[5] === runOf(checked) && isCount(raw[1]) &&
        raw[1] <= queues.length && isCount(raw[4]) && ((raw[2] === null && raw[3] === null) || (isCount(raw[2]) && typeof raw[3] === "string"))
      if (!keyset) return yield* badCursor()
      position = { segment: raw[1], after: raw[2] === null ? undefined : { at: raw[2], id: raw[3] }, upTo: raw[4] }
    }
    const failedBy = Math.min(position.upTo, checked.olderThanMs === undefined ? Number.MAX_SAFE_INTEGER : now - checked.olderThanMs)
    let { after, segment } = position
    let examined = 0
    let matched = 0
    const touched = new Set<string>()
    const affected = yield* Manage.writeChanges(core, (out) =>
      Effect.gen(function*() {
        let changed = 0
        while (segment < queues.length && matched < checked.limit && examined < MAX_EXAMINED) {
          const queue = queues[segment]!
          const take = MAX_EXAMINED - examined
          const rows = yield* DeadLettersTable.bulkWindow(core.storage, queue, after, position.upTo, take)
          let read = 0
          for (const row of rows) {
            examined++
            read++
            after = { at: Number(row.failed_at), id: String(row.id) }
            if (Number(row.failed_at) > failedBy || (checked.idPrefix !== undefined && !String(row.id).startsWith(checked.idPrefix))) continue
            matched++
            const [letter] = yield* DeadLettersTable.read(core.storage, queue, String(row.id))
            if (letter !== undefined) {
              yield* Manage.redriveIn(core, queue, letter, now, out.pending)
              changed++
              touched.add(queue)
            }
            if (matched === checked.limit) break
          }
          if (rows.length < take && read === rows.length) {
            segment++
            after = undefined
          }
        }
        return changed
      }))
    for (const queue of touched) Manage.forgetCounts(core, queue)
    const done = segment >= queues.length
    return done
      ? { matched, affected, examined, done }
      : {
        matched,
        affected,
        examined,
        done,
        cursor: JSON.stringify(["d", segment, after?.at ?? null, after?.id ?? null, position.upTo, runOf(checked)])
      }
  })

