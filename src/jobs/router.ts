/**
 * Sharding job queues across Durable Objects: the pure parts of the router (`JobsRouter`): hash,
 * partition, the fan-in merge and its cursor, and the shape of one call to a shard, kept apart so
 * the node tests pin them.
 *
 * The router never holds state a deploy could lose: a key's shard is a pure function of the key and
 * the shard count (FNV-1a 32-bit of its UTF-8 bytes, mod N), and a listing's whole position is in its
 * cursor.
 * @internal
 */
import { shown } from "../shared/validate.js"
// The router is the promise face's: its times are milliseconds (`Types.AddOptions<P, number>`), plain data
// for a call to a shard.
import type * as Types from "./types.js"
import * as Protocol from "./JobsProtocol.js"
import type { ShardPage } from "./JobsProtocol.js"

// ---------------------------------------------------------------------------------------------
// Hash and partition

// The hash lives in shared/sharding.ts: the routing client's hashed preset uses the same one.
export { fnv1a32, shardOf } from "../shared/sharding.js"

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

const encoder = new TextEncoder()

/** `text` (UTF-8) as base64url without padding: a cursor safe in a URL. */
export const toBase64Url = (text: string) => {
  const bytes = encoder.encode(text)
  // In slices: a cursor over thousands of shards is too many bytes for one call's arguments.
  let binary = ""
  for (let at = 0; at < bytes.length; at += 8_192) binary += String.fromCharCode(...bytes.subarray(at, at + 8_192))
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
}

/** The text of a base64url string (`toBase64Url`'s inverse); throws on one that is not. */
const fromBase64Url = (text: string) => {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"))
  return new TextDecoder().decode(Uint8Array.from(binary, (char) => char.charCodeAt(0)))
}

/** The opaque composite cursor: every shard's position, and the shard count it was made for. */
export const encodeCursor = (positions: ReadonlyArray<Position>): string =>
  toBase64Url(JSON.stringify({ v: CURSOR_VERSION, p: positions }))

/**
 * The fields of a composite cursor (base64url JSON of an object) whose positions are one per shard, or
 * `bad()`: the parse that the listing's and the bulk run's cursors share.
 */
export const cursorFields = (cursor: unknown, bad: () => Error): { readonly v?: unknown; readonly r?: unknown; readonly p: Array<Position> } => {
  if (typeof cursor !== "string" || cursor.length === 0 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad()
  let parsed: unknown
  try {
    parsed = JSON.parse(fromBase64Url(cursor))
  } catch {
    throw bad()
  }
  const fields = (typeof parsed === "object" && parsed !== null ? parsed : {}) as { readonly v?: unknown; readonly r?: unknown; readonly p?: unknown }
  const { p } = fields
  if (!Array.isArray(p) || !p.every((position) => position === null || typeof position === "string")) throw bad()
  return { ...fields, p: p as Array<Position> }
}

export const decodeCursor = (cursor: unknown, shards: number): Array<Position> => {
  const bad = () => new TypeError(`cursor must be a cursor returned by this router's list, got ${shown(cursor)}`)
  const { p, v } = cursorFields(cursor, bad)
  if (v !== CURSOR_VERSION) throw bad()
  if (p.length !== shards) {
    throw new RangeError(`cursor was made for ${p.length} shards; this router has ${shards} (a listing cannot span a resharding)`)
  }
  return p
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
    | { readonly op: "event"; readonly key: string }
    | { readonly op: "bulk"; readonly action: string; readonly filter: Readonly<Record<string, unknown>>; readonly options?: Readonly<Record<string, unknown>> }
    | Protocol.LeaseCall
  )

/** The call as sent by a router or a consumer, or a TypeError (RangeError) naming what is wrong. */
export const parseCall = (call: unknown, queues: ReadonlySet<string>): Protocol.Versioned<Protocol.Call> => Protocol.decodeCall(call, queues)
