/**
 * The retained log's inspection source: its window and stored bytes, each consumer's cursor with
 * its lag, the cold segments indexed and the leases held. Read-only: the log has no records to
 * purge (its retention is `trim`).
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { StorageService } from "../engine/StorageService.js"
import { BadRequest } from "../inspection/errors.js"
import * as Limits from "../inspection/limits.js"
import type * as P from "../inspection/protocol.js"
import type { Source, SourceError } from "../inspection/source.js"
import * as Leases from "./leasesTable.js"
import * as Records from "./recordsTable.js"

/** `leases`: whether this log was made with leases (their tables exist only then). */
export const source = (storage: StorageService, leases: boolean): Source => {
  const window = Effect.map(Records.edges(storage), (edges) => {
    const hotOffset = edges.lowestHot ?? edges.nextOffset
    return {
      oldestOffset: edges.lowestCold === undefined ? hotOffset : Math.min(edges.lowestCold, hotOffset),
      hotOffset,
      nextOffset: edges.nextOffset,
      bytes: edges.totalBytes
    }
  })

  const overview = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const counts = yield* Records.cappedCounts(storage, Limits.COUNT_CAP)
    const leasesHeld = leases ? yield* Leases.heldTotal(storage, now, Limits.COUNT_CAP) : 0
    return { log: { ...(yield* window), ...counts, leasesHeld } }
  })

  const view = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const bounds = yield* window
    const cursors = yield* Records.firstCursors(storage, Limits.MAX_PAGE)
    const totals = yield* Records.segmentTotals(storage)
    const held = leases ? yield* Leases.held(storage, now, Limits.MAX_PAGE) : []
    const answer: P.RetainedLogView = {
      ...bounds,
      consumers: cursors.map((cursor) => ({ ...cursor, lag: Math.max(0, bounds.nextOffset - cursor.offset) })),
      segments: { ...totals, first: [...(yield* Records.segments(storage, Limits.MAX_PAGE))] },
      leases: held.map((lease) => ({
        consumer: lease.consumer,
        batchId: lease.batchId,
        firstOffset: lease.firstOffset,
        lastOffset: lease.lastOffset,
        state: lease.state === "pending" ? "pending" : "active",
        attempt: lease.attempt,
        expiresAt: lease.expiresAt
      }))
    }
    return answer
  })

  const answer = (request: P.Request): Effect.Effect<unknown, SourceError> => {
    switch (request._tag) {
      case "RetainedLog":
        return view
      case "PurgeBefore":
        return Effect.fail(new BadRequest({ message: "The log does not purge by creation time: its retention is trim()" }))
      default:
        return Effect.fail(new BadRequest({ message: `The log does not answer ${request._tag}` }))
    }
  }

  return { capability: "log", overview, answer }
}
