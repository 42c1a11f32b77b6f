/**
 * Sharding job queues across Durable Objects: the router that runs in any Worker code, the wire
 * shape of one call to a shard, and the pure parts (hash, partition, the fan-in merge and its
 * cursor), kept apart so the node tests pin them.
 *
 * The router never holds state a deploy could lose: a key's shard is a pure function of the key and
 * the shard count (FNV-1a 32-bit of its UTF-8 bytes, mod N), and a listing's whole position is in its
 * cursor.
 * @internal
 */
import { keyProblem, shown } from "../shared/validate.js"
import { type AddResult, type FlowResult, JOB_STATES, type JobInfo, type JobPage, type JobState } from "./types.js"
// The router is the promise face's: its times are milliseconds (`Types.AddOptions<P, number>`), plain data
// for a call to a shard.
import type * as Types from "./types.js"
import * as Protocol from "./JobsProtocol.js"
import type { ShardPage } from "./JobsProtocol.js"

// ---------------------------------------------------------------------------------------------
// Hash and partition

const encoder = new TextEncoder()

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`: the documented routing hash (never change it). */
export const fnv1a32 = (text: string): number => {
  let hash = 0x811c9dc5
  for (const byte of encoder.encode(text)) {
    hash ^= byte
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash >>> 0
}

/** The shard (0-based) of a routing key among `shards`. */
export const shardOf = (key: string, shards: number): number => fnv1a32(key) % shards

/** Indexes of `items` grouped by shard, each group in the caller's order. */
export const partition = (shardOfItem: ReadonlyArray<number>): Map<number, Array<number>> => {
  const groups = new Map<number, Array<number>>()
  for (const [index, shard] of shardOfItem.entries()) {
    const group = groups.get(shard)
    if (group === undefined) groups.set(shard, [index])
    else group.push(index)
  }
  return groups
}

// ---------------------------------------------------------------------------------------------
// The fan-in merge of list pages

export type { PageItem, ShardPage } from "./JobsProtocol.js"

/** Where a listing is in one shard: `""` not started, a shard cursor, or `null` read to its end. */
export type Position = string | null

/**
 * Merges shards' pages (a shard read to its end has `undefined`) into one page of at most `limit`,
 * by `createdAt`, then shard index; each shard's own order is kept (only its head is ever taken), so
 * the pages of a listing are one k-way merge cut in pieces: none skips or repeats an item.
 */
export const merge = <T extends { readonly createdAt: number }>(
  positions: ReadonlyArray<Position>,
  pages: ReadonlyArray<ShardPage<T> | undefined>,
  limit: number
): { readonly items: Array<T>; readonly positions: Array<Position> } => {
  const taken = pages.map(() => 0)
  const items: Array<T> = []
  while (items.length < limit) {
    let best = -1
    let blocked = false
    for (const [shard, page] of pages.entries()) {
      if (page === undefined) continue
      const head = page.items[taken[shard]!]
      if (head === undefined) {
        // Its next items are unknown and could sort first: the page ends here.
        if (page.more) blocked = true
        continue
      }
      if (best === -1 || head.info.createdAt < pages[best]!.items[taken[best]!]!.info.createdAt) best = shard
    }
    if (blocked || best === -1) break
    items.push(pages[best]!.items[taken[best]!]!.info)
    taken[best]! += 1
  }
  const next = pages.map((page, shard): Position => {
    if (page === undefined) return null
    const count = taken[shard]!
    if (count === 0) return page.items.length === 0 && !page.more ? null : positions[shard]!
    if (count === page.items.length && !page.more) return null
    return page.items[count - 1]!.after ?? null
  })
  return { items, positions: next }
}

const CURSOR_VERSION = 1

const toBase64Url = (text: string) => btoa(String.fromCharCode(...encoder.encode(text))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")

const fromBase64Url = (text: string) => {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"))
  return new TextDecoder().decode(Uint8Array.from(binary, (char) => char.charCodeAt(0)))
}

/** The opaque composite cursor: every shard's position, and the shard count it was made for. */
export const encodeCursor = (positions: ReadonlyArray<Position>): string =>
  toBase64Url(JSON.stringify({ v: CURSOR_VERSION, p: positions }))

export const decodeCursor = (cursor: unknown, shards: number): Array<Position> => {
  const bad = () => new TypeError(`cursor must be a cursor returned by this router's list, got ${shown(cursor)}`)
  if (typeof cursor !== "string" || cursor.length === 0 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad()
  let parsed: unknown
  try {
    parsed = JSON.parse(fromBase64Url(cursor))
  } catch {
    throw bad()
  }
  const { p, v } = (typeof parsed === "object" && parsed !== null ? parsed : {}) as { readonly v?: unknown; readonly p?: unknown }
  if (v !== CURSOR_VERSION || !Array.isArray(p) || !p.every((position) => position === null || typeof position === "string")) {
    throw bad()
  }
  if (p.length !== shards) {
    throw new RangeError(`cursor was made for ${p.length} shards; this router has ${shards} (a listing cannot span a resharding)`)
  }
  return p as Array<Position>
}

// ---------------------------------------------------------------------------------------------
// The wire: one call to a shard (the jobs protocol's; see `JobsProtocol`)

export const CALL_VERSION = Protocol.VERSION

export type { PageCall } from "./JobsProtocol.js"
export type { LeaseCall } from "./JobsProtocol.js"

/** One call the router makes to a shard (structured-clone data, decoded by `JobsProtocol.decodeCall` on arrival). */
export type ShardCall =
  & { readonly v: number }
  & (
    | { readonly op: "add"; readonly queue: string; readonly job: Types.AddOptions<unknown, number> }
    | { readonly op: "addBulk"; readonly queue: string; readonly jobs: ReadonlyArray<Types.AddOptions<unknown, number>> }
    | { readonly op: "get"; readonly queue: string; readonly id: string }
    | { readonly op: "page"; readonly queue: string; readonly page: Protocol.PageCall }
    | { readonly op: "counts" | "pause" | "resume"; readonly queue: string }
    | { readonly op: "flow"; readonly root: Types.FlowNode<number> }
    | Protocol.LeaseCall
  )

/** The call as sent by a router or a consumer, or a TypeError (RangeError) naming what is wrong. */
const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const parseCall = (call: unknown, queues: ReadonlySet<string>): Protocol.Versioned<Protocol.Call> => Protocol.decodeCall(call, queues)

// ---------------------------------------------------------------------------------------------
// The router

export const DEFAULT_PAGE = 100
export const MAX_PAGE = Protocol.MAX_PAGE
export const MAX_SHARDS = 10_000
export const DEFAULT_NAME = "jobs"
export const DEFAULT_METHOD = "jobsCall"

/** What `key` is given: the job as added (its id already chosen) and its queue. */
export interface RouteKeyInput {
  /** The job's queue. */
  readonly queue: string
  /** The job's id (given, or generated by the router). */
  readonly id: string
  /** The job's payload. */
  readonly payload: unknown
  /** The job's dedup options, if any (a dedup key is a good routing key: duplicates meet on one shard). */
  readonly dedup?: Types.DedupOptions<number> | undefined
}

/** The part of a Durable Object namespace the router uses (any `DurableObjectNamespace` fits). */
export interface ShardNamespace {
  /** The object's id for a name (`DurableObjectNamespace.idFromName`). */
  idFromName(name: string): unknown
  /** The object's stub for an id (`DurableObjectNamespace.get`). */
  get(id: never): unknown
}

export interface RouterOptions {
  readonly namespace: ShardNamespace
  /** How many objects the queues are split over; changing it moves keys (see docs/workers-and-queues.md, "Sharding job queues"). */
  readonly shards: number
  /** The routing key of a job (default: its id). Jobs with the same key always land on the same shard. */
  readonly key?: ((job: RouteKeyInput) => string) | undefined
  /** Shard `i` is the object named `${name}:${i}` (default `"jobs"`). */
  readonly name?: string | undefined
  /** The method of the object that hands a call to `DurabilityJobs.serve` (default `"jobsCall"`). */
  readonly method?: string | undefined
}

/** A queue's jobs by state summed over the shards, and whether it is paused. */
export type RoutedCounts = Record<JobState, number> & {
  /** True only when the queue is paused on every shard. */
  readonly paused: boolean
}

/** One queue across the shards. */
export interface RoutedQueue<P, R> {
  /** Routes to the shard of `key(job)`; a job without `id` gets one here first, so its route is known. */
  add(options: Types.AddOptions<P, number>): Promise<AddResult>
  /** One call per shard (each shard's jobs all or none; shards are not one transaction); results in your order. */
  addBulk(jobs: ReadonlyArray<Types.AddOptions<P, number>>): Promise<ReadonlyArray<AddResult>>
  /**
   * From the shard of `options.key` when given, else of the id (default routing); with a custom `key`
   * and no `options.key`, every shard is asked (the lowest shard holding it answers).
   */
  get(id: string, options?: { readonly key?: string | undefined }): Promise<JobInfo<P, R> | undefined>
  /** All shards' jobs merged by `createdAt` (then shard), with a composite cursor. */
  list(options?: { readonly states?: ReadonlyArray<JobState> | undefined; readonly limit?: number | undefined; readonly cursor?: string | undefined }): Promise<JobPage<P, R>>
  counts(): Promise<RoutedCounts>
  pause(): Promise<void>
  resume(): Promise<void>
}

type Stub = Record<string, (call: ShardCall) => Promise<unknown>>

const withId = (options: Types.AddOptions<unknown, number>, field: string): Types.AddOptions<unknown, number> => {
  if (!isObject(options)) throw new TypeError(`${field} must be an object`)
  if (options.id === undefined) return { ...options, id: crypto.randomUUID() }
  const problem = keyProblem(`${field === "options" ? "" : `${field}.`}id`, options.id)
  if (problem !== undefined) throw new TypeError(problem)
  return options
}

/** A shard's error about `jobs[k]` of its part, renamed to the caller's index. */
const renumbered = (error: unknown, indexes: ReadonlyArray<number>): unknown => {
  if (!(error instanceof Error)) return error
  const match = /^jobs\[(\d+)\]/.exec(error.message)
  const original = match === null ? undefined : indexes[Number(match[1])]
  if (original === undefined) return error
  const message = error.message.replace(/^jobs\[\d+\]/, `jobs[${original}]`)
  const renamed = error instanceof RangeError ? new RangeError(message) : error instanceof TypeError ? new TypeError(message) : new Error(message)
  if (renamed.constructor === Error) renamed.name = error.name
  return renamed
}

const checkStates = (states: unknown) => {
  if (states !== undefined && (!Array.isArray(states) || states.length === 0 || states.some((state) => !JOB_STATES.includes(state)))) {
    throw new TypeError(`states must be a non-empty array of ${JOB_STATES.join(", ")}`)
  }
}

export class Router {
  readonly shards: number
  readonly #namespace: ShardNamespace
  readonly #key: ((job: RouteKeyInput) => string) | undefined
  readonly #name: string
  readonly #method: string
  readonly #stubs = new Map<number, Stub>()

  constructor(options: RouterOptions) {
    if (!isObject(options)) throw new TypeError("DurabilityJobs.router needs an options object")
    const namespace = options.namespace as unknown as Record<string, unknown> | undefined
    if (!isObject(namespace) || typeof namespace.idFromName !== "function" || typeof namespace.get !== "function") {
      throw new TypeError("namespace must be a Durable Object namespace (with idFromName and get)")
    }
    if (typeof options.shards !== "number" || !Number.isSafeInteger(options.shards) || options.shards < 1 || options.shards > MAX_SHARDS) {
      throw new RangeError(`shards must be an integer from 1 to ${MAX_SHARDS}, got ${shown(options.shards)}`)
    }
    if (options.key !== undefined && typeof options.key !== "function") throw new TypeError(`key must be a function, got ${shown(options.key)}`)
    for (const field of ["name", "method"] as const) {
      const value = options[field]
      if (value !== undefined && (typeof value !== "string" || value.length === 0)) {
        throw new TypeError(`${field} must be a non-empty string, got ${shown(value)}`)
      }
    }
    this.shards = options.shards
    this.#namespace = options.namespace
    this.#key = options.key
    this.#name = options.name ?? DEFAULT_NAME
    this.#method = options.method ?? DEFAULT_METHOD
  }

  /** The shard of a routing key. */
  shardOf(key: string): number {
    if (typeof key !== "string") throw new TypeError(`key must be a string, got ${shown(key)}`)
    return shardOf(key, this.shards)
  }

  /** The object's name of shard `index`. */
  nameOf(index: number): string {
    return `${this.#name}:${index}`
  }

  call(shard: number, call: ShardCall): Promise<unknown> {
    let stub = this.#stubs.get(shard)
    if (stub === undefined) {
      const namespace = this.#namespace as unknown as { idFromName(name: string): unknown; get(id: unknown): Stub }
      stub = namespace.get(namespace.idFromName(this.nameOf(shard)))
      this.#stubs.set(shard, stub)
    }
    const method = stub[this.#method]
    if (typeof method !== "function") return Promise.reject(new TypeError(`The shard object has no method ${JSON.stringify(this.#method)}`))
    return stub[this.#method]!(call)
  }

  all<A>(call: ShardCall): Promise<Array<A>> {
    return Promise.all(Array.from({ length: this.shards }, (_, shard) => this.call(shard, call) as Promise<A>))
  }

  /** The shard of a job as added (its id chosen). */
  route(queue: string, job: { readonly id: string; readonly payload: unknown; readonly dedup?: Types.DedupOptions<number> | undefined }): number {
    if (this.#key === undefined) return shardOf(job.id, this.shards)
    const key = this.#key({ queue, id: job.id, payload: job.payload, ...(job.dedup === undefined ? {} : { dedup: job.dedup }) })
    if (typeof key !== "string") throw new TypeError(`key(job) must return a string, got ${shown(key)}`)
    return shardOf(key, this.shards)
  }

  flow(root: Types.FlowNode<number>): Promise<FlowResult> {
    try {
      if (!isObject(root)) throw new TypeError("root must be an object")
      if (typeof root.queue !== "string") throw new TypeError(`queue must be a string, got ${shown(root.queue)}`)
      const withRootId = withId(root as Types.AddOptions<unknown, number>, "options") as Types.FlowNode<number> & { readonly id: string }
      const shard = this.route(root.queue, { id: withRootId.id, payload: root.payload })
      return this.call(shard, { v: CALL_VERSION, op: "flow", root: withRootId }) as Promise<FlowResult>
    } catch (error) {
      return Promise.reject(error)
    }
  }

  queue(name: string): RoutedQueue<unknown, unknown> {
    if (typeof name !== "string" || name.length === 0) throw new TypeError(`queue must be a non-empty string, got ${shown(name)}`)
    const queue = name
    const router = this
    const attempt = <A>(body: () => Promise<A>): Promise<A> => {
      try {
        return body()
      } catch (error) {
        return Promise.reject(error)
      }
    }
    return {
      add: (options) =>
        attempt(() => {
          const job = withId(options, "options")
          return router.call(router.route(queue, job as Types.AddOptions<unknown, number> & { id: string }), { v: CALL_VERSION, op: "add", queue, job }) as Promise<AddResult>
        }),
      addBulk: (jobs) =>
        attempt(async () => {
          if (!Array.isArray(jobs)) throw new TypeError("jobs must be an array")
          const prepared = jobs.map((job, index) => withId(job, `jobs[${index}]`) as Types.AddOptions<unknown, number> & { id: string })
          const groups = partition(prepared.map((job) => router.route(queue, job)))
          const results: Array<AddResult> = new Array(prepared.length)
          // Every shard's call is waited for, so nothing is in flight when this rejects.
          const settled = await Promise.allSettled([...groups].map(async ([shard, indexes]) => {
            try {
              const part = await router.call(shard, { v: CALL_VERSION, op: "addBulk", queue, jobs: indexes.map((index) => prepared[index]!) })
              for (const [position, result] of (part as ReadonlyArray<AddResult>).entries()) results[indexes[position]!] = result
            } catch (error) {
              throw renumbered(error, indexes)
            }
          }))
          const failed = settled.find((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected")
          if (failed !== undefined) throw failed.reason
          return results
        }),
      get: (id, options) =>
        attempt(async () => {
          const problem = keyProblem("id", id)
          if (problem !== undefined) throw new TypeError(problem)
          if (options !== undefined && !isObject(options)) throw new TypeError("options must be an object")
          const key = options?.key
          if (key !== undefined && typeof key !== "string") throw new TypeError(`options.key must be a string, got ${shown(key)}`)
          const call: ShardCall = { v: CALL_VERSION, op: "get", queue, id }
          if (key !== undefined || router.#key === undefined) {
            return router.call(shardOf(key ?? id, router.shards), call) as Promise<JobInfo | undefined>
          }
          const found = await router.all<JobInfo | undefined>(call)
          return found.find((info) => info !== undefined)
        }),
      list: (options = {}) =>
        attempt(async () => {
          if (!isObject(options)) throw new TypeError("options must be an object")
          const limit = options.limit ?? DEFAULT_PAGE
          if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE) {
            throw new RangeError(`limit must be an integer from 1 to ${MAX_PAGE}, got ${shown(limit)}`)
          }
          checkStates(options.states)
          const positions: Array<Position> = options.cursor === undefined
            ? Array.from({ length: router.shards }, () => "")
            : decodeCursor(options.cursor, router.shards)
          const pages = await Promise.all(positions.map((position, shard) =>
            position === null ? undefined : router.call(shard, {
              v: CALL_VERSION,
              op: "page",
              queue,
              page: {
                limit,
                ...(options.states === undefined ? {} : { states: options.states }),
                ...(position === "" ? {} : { cursor: position })
              }
            }) as Promise<ShardPage<JobInfo>>
          ))
          const merged = merge(positions, pages, limit)
          return merged.positions.every((position) => position === null)
            ? { items: merged.items }
            : { items: merged.items, cursor: encodeCursor(merged.positions) }
        }),
      counts: () =>
        attempt(async () => {
          const all = await router.all<{ readonly counts: Record<JobState, number>; readonly paused: boolean }>({ v: CALL_VERSION, op: "counts", queue })
          const sum = Object.fromEntries(JOB_STATES.map((state) => [state, 0])) as Record<JobState, number>
          for (const { counts } of all) for (const state of JOB_STATES) sum[state] += counts[state]
          return { ...sum, paused: all.every((shard) => shard.paused) }
        }),
      pause: () => attempt(async () => void (await router.all({ v: CALL_VERSION, op: "pause", queue }))),
      resume: () => attempt(async () => void (await router.all({ v: CALL_VERSION, op: "resume", queue })))
    }
  }
}
