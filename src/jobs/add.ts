/**
 * Adding jobs: every argument checked before storage is touched (a rejected call changes nothing),
 * then one transaction per call (`add`, `addBulk`, a whole `flow`) that inserts the rows, keeps
 * the dedup keys (their primary key makes a second insert of a live key impossible) and reconciles
 * the wake-up.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { PendingRecord } from "../engine/DurableTable.js"
import { InvalidInputError, type StorageError } from "../shared/Errors.js"
import type { Row } from "../engine/StorageService.js"
import { describeParseError } from "../shared/codec.js"
import * as Time from "../shared/duration.js"
import * as Json from "../shared/json.js"
import * as Validate from "../shared/validate.js"
import { type Core, invalidInput, type QueueRuntime, readJob, tell, utf8Bytes } from "./core.js"
import * as Flow from "./flow.js"
import * as JobsTable from "./jobsTable.js"
import * as Keyed from "./keyed.js"
import { isObject } from "./options.js"
import * as Rows from "./rows.js"
import type { AddResult, FlowResult, JobEventDraft } from "./types.js"

/** What `Json.encode` adds around a defined value: `{"kind":"value","value":` and `}`. */
const STORED_ENVELOPE_BYTES = Json.encode(null).length - "null".length

/** Nodes of one flow, at most: a flow is one transaction. */
export const MAX_FLOW_JOBS = 1_000

const invalid = invalidInput

export interface Prepared {
  readonly queue: QueueRuntime
  readonly id: string
  /** The caller gave the id (it may exist already). */
  readonly given: boolean
  readonly key: string
  readonly payload: string
  readonly at: number
  readonly priority: number
  readonly group: string | null
  /** Its key under the queue's concurrency by key (computed here, stored with the job). */
  readonly concurrencyKey: string | null
  readonly dedup: { readonly key: string; readonly ttlMs: number | undefined; readonly replace: boolean } | undefined
  /** The event key whose arrival cancels the job (`jobs.event`). */
  readonly cancelOn: string | undefined
}

export const queueOf = (core: Core, name: unknown, field = "queue"): Effect.Effect<QueueRuntime, InvalidInputError> => {
  const queue = typeof name === "string" ? core.queues.get(name) : undefined
  return queue === undefined
    ? Effect.fail(invalid(field, "type", `Unknown queue ${Validate.shown(name)}`))
    : Effect.succeed(queue)
}

export const priorityOf = (field: string, value: unknown): Effect.Effect<number, InvalidInputError> =>
  value === undefined
    ? Effect.succeed(0)
    : typeof value === "number" && Number.isSafeInteger(value)
    ? Effect.succeed(value)
    : Effect.fail(invalid(field, "range", `${field} must be a safe integer, got ${Validate.shown(value)}`))

/** When the job is due: `delayMs` from now, or `runAt`, or now. */
const dueAt = (prefix: string, options: Record<string, unknown>, now: number): Effect.Effect<number, InvalidInputError> =>
  Effect.gen(function*() {
    if (options.delayMs !== undefined && options.runAt !== undefined) {
      return yield* invalid(`${prefix}delayMs`, "type", `${prefix}delayMs and ${prefix}runAt cannot both be given`)
    }
    if (options.runAt !== undefined) return yield* Validate.timestamp(`${prefix}runAt`, options.runAt)
    if (options.delayMs === undefined) return now
    const delay = yield* Time.milliseconds(`${prefix}delayMs`, options.delayMs)
    if (!Number.isSafeInteger(now + delay)) {
      return yield* invalid(`${prefix}delayMs`, "range", `${prefix}delayMs puts the job past the largest safe time`)
    }
    return now + delay
  })

/** Checks one job's options for `queue`; `prefix` names its fields (`jobs[3].`). */
export const prepare = (
  queue: QueueRuntime,
  options: unknown,
  now: number,
  prefix: string,
  allowDedup: boolean
): Effect.Effect<Prepared, InvalidInputError> =>
  Effect.gen(function*() {
    if (!isObject(options)) {
      return yield* invalid(prefix.replace(/\.$/, "") || "options", "type", `${prefix || "options "}must be an object, got ${Validate.shown(options)}`)
    }
    const given = options.id !== undefined
    const id = given ? yield* Validate.newKey(`${prefix}id`, options.id) : crypto.randomUUID()
    const encoded = yield* Effect.mapError(
      queue.definition.payload.encode(options.payload as never),
      (error) => invalid(`${prefix}payload`, "type", describeParseError(`${prefix}payload`, error))
    )
    const payload = yield* Validate.json(`${prefix}payload`, encoded)
    const limit = queue.options.maxPayloadBytes
    if (payload.length * 3 > limit) {
      // The limit is on the payload's own JSON (what would travel as a Queues message), not on the
      // envelope it is stored in (`{"kind":"value","value":…}`, ASCII).
      const bytes = encoded === undefined ? 0 : utf8Bytes(payload) - STORED_ENVELOPE_BYTES
      if (bytes > limit) {
        return yield* invalid(
          `${prefix}payload`,
          "range",
          `${prefix}payload is ${bytes} bytes as JSON; queue "${queue.name}" takes at most ${limit} (maxPayloadBytes)`
        )
      }
    }
    const at = yield* dueAt(prefix, options, now)
    const priority = yield* priorityOf(`${prefix}priority`, options.priority)
    const group = yield* groupOf(queue, options.payload, prefix)
    const concurrencyKey = yield* Keyed.keyOf(queue, options.payload, prefix)
    let dedup: Prepared["dedup"]
    if (options.dedup !== undefined) {
      if (!allowDedup) return yield* invalid(`${prefix}dedup`, "type", `${prefix}dedup is not taken by flows`)
      const given = options.dedup
      if (!isObject(given)) return yield* invalid(`${prefix}dedup`, "type", `${prefix}dedup must be an object { key, ttlMs?, mode? }`)
      const key = yield* Validate.key(`${prefix}dedup.key`, given.key)
      const ttlMs = given.ttlMs === undefined ? undefined : yield* Time.milliseconds(`${prefix}dedup.ttlMs`, given.ttlMs)
      if (given.mode !== undefined && given.mode !== "drop" && given.mode !== "replace") {
        return yield* invalid(`${prefix}dedup.mode`, "type", `${prefix}dedup.mode must be "drop" or "replace", got ${Validate.shown(given.mode)}`)
      }
      dedup = { key, ttlMs, replace: given.mode === "replace" }
    }
    const cancelOn = options.cancelOn === undefined ? undefined : yield* Validate.key(`${prefix}cancelOn`, options.cancelOn)
    return { queue, id, given, key: Flow.keyOf(queue.name, id), payload, at, priority, group, concurrencyKey, dedup, cancelOn }
  })

/** The job's rate-limit group, from the queue's `groupRateLimit.key(payload)`. */
const groupOf = (queue: QueueRuntime, payload: unknown, prefix: string): Effect.Effect<string | null, InvalidInputError> => {
  const limit = queue.options.groupRateLimit
  if (limit === undefined) return Effect.succeed(null)
  let group: unknown
  try {
    group = limit.key(payload as never)
  } catch (error) {
    return Effect.fail(invalid(`${prefix}payload`, "type", `groupRateLimit.key of queue "${queue.name}" threw: ${String(error)}`))
  }
  const problem = Validate.keyProblem("the group key", group)
  return problem === undefined
    ? Effect.succeed(group as string)
    : Effect.fail(invalid(`${prefix}payload`, "type", `groupRateLimit.key of queue "${queue.name}" returned no group: ${problem}`))
}

const insert = (
  core: Core,
  job: Prepared,
  now: number,
  flow?: { readonly parentKey: string | null; readonly onFailure: string; readonly children: number }
): Effect.Effect<boolean, StorageError> => {
  const inserted = Effect.flatMap(Keyed.floorOf(core), (floor) =>
    JobsTable.insert(core.storage, {
    key: job.key,
    queue: job.queue.name,
    id: job.id,
    generation: crypto.randomUUID(),
    status: flow !== undefined && flow.children > 0 ? "waiting_children" : "pending",
    at: job.at,
    priority: job.priority,
    seq: core.seq.next++,
    payload: job.payload,
    group: job.group,
    concurrencyKey: job.concurrencyKey,
    parentKey: flow?.parentKey ?? null,
    onFailure: flow?.onFailure ?? "fail",
    children: flow?.children ?? 0,
    createdAt: now,
    floor
  }))
  const cancelOn = job.cancelOn
  // Its own statement, only for jobs that have one: a plain insert stays one statement.
  return cancelOn === undefined
    ? inserted
    : Effect.tap(inserted, (made) => made ? JobsTable.setCancelOn(core.storage, job.key, cancelOn) : Effect.void)
}

interface Added {
  readonly result: AddResult
  readonly pending?: PendingRecord | undefined
  readonly event: JobEventDraft
}

const existing = (core: Core, job: Prepared, row: Row, now: number): Added => ({
  result: { id: job.id, state: Rows.stateOf(row, now, core.handle.executing(job.key)), deduplicated: true },
  event: { type: "deduplicated", queue: job.queue.name, id: job.id, existingId: job.id, replaced: false }
})

/** One job's writes, inside the call's transaction. */
const addOne = (core: Core, job: Prepared, now: number): Effect.Effect<Added, StorageError> =>
  Effect.gen(function*() {
    const { storage } = core
    const queue = job.queue.name
    if (job.dedup !== undefined) {
      if (job.given) {
        const row = yield* readJob(core, job.key)
        if (row !== undefined) return existing(core, job, row, now)
      }
      const taken = yield* JobsTable.dedupHolder(storage, queue, job.dedup.key)
      if (taken !== undefined) {
        const holderId = String(taken.job_id)
        const holderKey = Flow.keyOf(queue, holderId)
        const holder = yield* readJob(core, holderKey)
        const unfinished = holder !== undefined && (holder.status === "pending" || holder.status === "waiting_children")
        const live = taken.expires_at === null ? unfinished : now < Number(taken.expires_at)
        if (live) {
          const replaceable = job.dedup.replace && holder !== undefined && holder.status === "pending" &&
            Number(holder.attempt) === 0 && !core.handle.executing(holderKey)
          if (replaceable) {
            yield* JobsTable.replace(storage, holderKey, job)
            yield* JobsTable.setCancelOn(storage, holderKey, job.cancelOn ?? null)
          }
          return {
            result: {
              id: holderId,
              state: holder === undefined
                ? "removed"
                : replaceable
                ? (job.at > now ? "delayed" : "waiting")
                : Rows.stateOf(holder, now, core.handle.executing(holderKey)),
              deduplicated: true
            },
            ...(replaceable ? { pending: { key: holderKey, at: job.at, start: job.at <= now } } : {}),
            event: {
              type: "deduplicated",
              queue,
              id: job.id,
              existingId: holderId,
              replaced: replaceable,
              dedupKey: job.dedup.key
            }
          }
        }
      }
      yield* JobsTable.keepDedup(storage, queue, job.dedup.key, job.id, job.dedup.ttlMs === undefined ? null : now + job.dedup.ttlMs)
    }
    if (!(yield* insert(core, job, now))) {
      const row = yield* readJob(core, job.key)
      if (row !== undefined) return existing(core, job, row, now)
    }
    const state = job.at > now ? "delayed" : "waiting"
    return {
      result: { id: job.id, state, deduplicated: false },
      pending: { key: job.key, at: job.at, start: job.at <= now },
      event: { type: "added", queue, id: job.id, state }
    }
  })

/** Adds the jobs in one transaction (one statement, and no transaction, for a single plain job the alarm covers). */
export const addAll = (core: Core, jobs: ReadonlyArray<Prepared>, now: number): Effect.Effect<ReadonlyArray<AddResult>, StorageError> =>
  Effect.gen(function*() {
    const single = jobs.length === 1 && jobs[0]!.dedup === undefined && jobs[0]!.cancelOn === undefined ? jobs[0]! : undefined
    const added = yield* core.handle.writePending(
      Effect.forEach(jobs, (job) => addOne(core, job, now)),
      (all) => all.flatMap((one) => one.pending === undefined ? [] : [one.pending]),
      single === undefined ? undefined : { oneStatementAt: single.at }
    )
    yield* tell(core, added.map((one) => one.event))
    return added.map((one) => one.result)
  })

interface PreparedNode {
  readonly job: Prepared
  readonly onFailure: "fail" | "ignore"
  readonly children: ReadonlyArray<PreparedNode>
}

/** Checks a flow's whole tree before anything is written. */
export const prepareFlow = (
  core: Core,
  node: unknown,
  now: number,
  prefix = "",
  counter = { nodes: 0 }
): Effect.Effect<PreparedNode, InvalidInputError> =>
  Effect.gen(function*() {
    if (++counter.nodes > MAX_FLOW_JOBS) {
      return yield* invalid("children", "range", `A flow holds at most ${MAX_FLOW_JOBS} jobs`)
    }
    if (!isObject(node)) return yield* invalid(prefix.replace(/\.$/, "") || "flow", "type", `${prefix || "flow "}must be an object`)
    const queue = yield* queueOf(core, node.queue, `${prefix}queue`)
    const job = yield* prepare(queue, node, now, prefix, false)
    if (node.onFailure !== undefined && node.onFailure !== "fail" && node.onFailure !== "ignore") {
      return yield* invalid(`${prefix}onFailure`, "type", `${prefix}onFailure must be "fail" or "ignore", got ${Validate.shown(node.onFailure)}`)
    }
    const children: Array<PreparedNode> = []
    if (node.children !== undefined) {
      if (!Array.isArray(node.children)) return yield* invalid(`${prefix}children`, "type", `${prefix}children must be an array`)
      let index = 0
      for (const child of node.children as ReadonlyArray<unknown>) {
        children.push(yield* prepareFlow(core, child, now, `${prefix}children[${index++}].`, counter))
      }
    }
    return { job, onFailure: node.onFailure === "ignore" ? "ignore" : "fail", children }
  })

/** Inserts a checked flow in one transaction: parents wait for their children, leaves are pending. */
export const addFlow = (core: Core, root: PreparedNode, now: number): Effect.Effect<FlowResult, InvalidInputError | StorageError> =>
  Effect.gen(function*() {
    const events: Array<JobEventDraft> = []
    const write = (node: PreparedNode, parentKey: string | null, path: string): Effect.Effect<FlowResult, InvalidInputError | StorageError> =>
      Effect.gen(function*() {
        const { job } = node
        const inserted = yield* insert(core, job, now, { parentKey, onFailure: node.onFailure, children: node.children.length })
        // The whole flow rolls back: a flow is new work, never a merge into existing jobs.
        if (!inserted) return yield* invalid(`${path}id`, "type", `Job "${job.id}" of queue "${job.queue.name}" exists already`)
        const children: Array<FlowResult> = []
        let index = 0
        for (const child of node.children) children.push(yield* write(child, job.key, `${path}children[${index++}].`))
        events.push({
          type: "added",
          queue: job.queue.name,
          id: job.id,
          state: node.children.length > 0 ? "waiting-children" : job.at > now ? "delayed" : "waiting",
          ...(parentKey === null ? {} : { parentId: parentKey.slice(parentKey.indexOf("/") + 1) })
        })
        return { queue: job.queue.name, id: job.id, children }
      })
    const leaves: Array<PendingRecord> = []
    const collect = (node: PreparedNode) => {
      if (node.children.length === 0) leaves.push({ key: node.job.key, at: node.job.at, start: node.job.at <= now })
      node.children.forEach(collect)
    }
    collect(root)
    const result = yield* core.handle.writePending(write(root, null, ""), () => leaves)
    yield* tell(core, events)
    return result
  })

