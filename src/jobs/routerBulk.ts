/**
 * A router's bulk run across shards: what each shard is sent (the filter as plain data, times in
 * milliseconds) and the composite cursor that carries every shard's own bulk cursor, so a run's whole
 * position is in the caller's hands, as a listing's is.
 *
 * The cursor also carries a fingerprint of the run (action and filter): a cursor given with another
 * action or filter is refused by the router before any call, instead of by each shard after one.
 * @internal
 */
import { shown } from "../shared/validate.js"
import type { BulkAction, BulkResult, Checked, JobFilter } from "./bulk.js"
import { cursorFields, fnv1a32, type Position, toBase64Url } from "./router.js"

const CURSOR_VERSION = 1

/** The filter as a shard is sent it: the fields given, times as epoch / duration milliseconds. */
export const wireFilter = (filter: JobFilter<number>, checked: Checked): JobFilter<number> => ({
  ...(filter.queue === undefined ? { allQueues: true } : { queue: filter.queue }),
  ...(filter.states === undefined ? {} : { states: [...filter.states] }),
  ...(checked.idPrefix === undefined ? {} : { idPrefix: checked.idPrefix }),
  ...(checked.createdBefore === undefined ? {} : { createdBefore: checked.createdBefore }),
  ...(checked.olderThanMs === undefined ? {} : { olderThanMs: checked.olderThanMs })
})

/** The run's fingerprint: what its cursor was made for. */
export const runOf = (action: BulkAction, filter: JobFilter<number>): number => fnv1a32(JSON.stringify([action, filter]))

/** The composite cursor: each shard's bulk cursor (`""` not started, `null` done), and the run's fingerprint. */
export const encodeCursor = (positions: ReadonlyArray<Position>, run: number): string =>
  toBase64Url(JSON.stringify({ v: CURSOR_VERSION, r: run, p: positions }))

/** The shards' positions of `cursor`, or a TypeError (RangeError for another shard count) naming `options.cursor`. */
export const decodeCursor = (cursor: unknown, shards: number, run: number): Array<Position> => {
  const bad = () => new TypeError(`options.cursor must be a cursor this router's bulk returned for the same action and filter, got ${shown(cursor)}`)
  const { p, r, v } = cursorFields(cursor, bad)
  if (v !== CURSOR_VERSION || r !== run) throw bad()
  if (p.length !== shards) {
    throw new RangeError(`options.cursor must be made for this router's ${shards} shards, it was made for ${p.length} (a run cannot span a resharding)`)
  }
  return p
}

/**
 * The shards' answers (`undefined`: a shard already done; `"failed"`: its call failed) summed, with the
 * positions to go on from (a failed shard's unchanged: its chunk is asked again).
 */
export const sum = (
  positions: ReadonlyArray<Position>,
  answers: ReadonlyArray<BulkResult | undefined | "failed">
): { readonly result: Omit<BulkResult, "cursor">; readonly positions: Array<Position> } => {
  let matched = 0
  let affected = 0
  let examined = 0
  const next = positions.map((position, shard): Position => {
    const answer = answers[shard]
    if (position === null || answer === undefined) return null
    if (answer === "failed") return position
    matched += answer.matched
    affected += answer.affected
    examined += answer.examined
    // A shard that is not done always answers its cursor; without one there is nowhere to go on from.
    return answer.done || answer.cursor === undefined ? null : answer.cursor
  })
  return { result: { matched, affected, examined, done: next.every((position) => position === null) }, positions: next }
}
