/**
 * The inspector over the retained log: the overview's window and counts, and the log's view — each
 * consumer's cursor with its lag, the cold segments indexed, the leases held; `PurgeBefore` is refused
 * (the log's retention is `trim`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Log from "../../../src/log/Log.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { failureOf, valueOf } from "./support.js"

describe("inspector: log", () => {
  it.scoped("shows the window, consumers with their lag, cold segments and held leases", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const segments = new Map<string, Array<Log.LogRecord<number>>>()
      const log = yield* object.run(Log.make<number>({
        retention: { maxRecords: 3 },
        cold: {
          write: (segment) =>
            Effect.sync(() => {
              segments.set(`s-${segment.firstOffset}`, segment.records)
              return `s-${segment.firstOffset}`
            }),
          read: (locator) => Effect.sync(() => segments.get(locator))
        },
        leases: { leaseDuration: 10_000 }
      }))
      yield* object.run(log.append([1, 2, 3, 4, 5].map((body) => ({ body }))))
      yield* TestClock.adjust(5)
      expect(yield* object.run(log.trim)).toBe(2)
      yield* object.run(log.commit("fast", 5))
      yield* object.run(log.commit("slow", 1))
      const lease = (yield* object.run(log.lease("workers", 2)))!

      const overview = yield* valueOf(object, { _tag: "Overview" })
      expect(overview.scheduler.capabilities).toEqual(["log"])
      expect(overview.log).toEqual({ oldestOffset: 0, hotOffset: 2, nextOffset: 5, bytes: 3 * 26, consumers: 2, segments: 1, leasesHeld: 1 })

      const view = yield* valueOf(object, { _tag: "RetainedLog" })
      expect(view).toEqual({
        oldestOffset: 0,
        hotOffset: 2,
        nextOffset: 5,
        bytes: 78,
        consumers: [
          { consumer: "fast", offset: 5, lag: 0, committedAt: 5 },
          { consumer: "slow", offset: 1, lag: 4, committedAt: 5 }
        ],
        segments: { count: 1, bytes: 52, first: [{ firstOffset: 0, lastOffset: 1, locator: "s-0", bytes: 52, flushedAt: 5 }] },
        leases: [{ consumer: "workers", batchId: lease.batchId, firstOffset: 0, lastOffset: 1, state: "active", attempt: 1, expiresAt: 10_005 }]
      })
      expect(yield* failureOf(object, { _tag: "PurgeBefore", capability: "log", before: 10 })).toMatchObject({ _tag: "BadRequest" })
    }))
})
