/**
 * The engine's registry of inspection sources and its summary: what this instance knows in memory
 * (the physical alarm as last read or written, the early timer, the permits, the keys executing
 * here), read without I/O so an overview costs the same whatever the object holds.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Engine } from "../engine/engine.js"
import { type Capability, MAX_RUNNING_LISTED } from "./protocol.js"
import type { Inspection, Source } from "./source.js"

/** A participant's kind as the inspector names it (a helper table, e.g. the jobs' outbox, keeps its own). */
const capabilityOf = (kind: string): string => kind === "namedAlarms" ? "alarms" : kind

export const make = (engine: Engine): Inspection => {
  const sources: Array<Source> = []
  return {
    register: (source) =>
      Effect.sync(() => {
        const at = sources.findIndex((known) => known.capability === source.capability)
        if (at >= 0) sources[at] = source
        else sources.push(source)
      }),
    sources: Effect.sync(() => [...sources]),
    summary: Effect.gen(function*() {
      const running: Array<{ capability: string; key: string }> = []
      let runningCount = 0
      for (const participant of engine.participants) {
        runningCount += participant.active.size
        for (const key of participant.active.keys()) {
          if (running.length >= MAX_RUNNING_LISTED) break
          running.push({ capability: capabilityOf(participant.table.kind), key })
        }
      }
      return {
        objectId: engine.config.objectId ?? null,
        physicalAlarm: (yield* engine.storage.alarm) ?? null,
        earlyTimer: yield* engine.alarms.timerAt,
        permits: {
          capacity: engine.permits.capacity,
          available: yield* engine.permits.available,
          waiting: yield* engine.permits.waiting
        },
        runningCount,
        running,
        capabilities: sources.map((source): Capability => source.capability),
        now: yield* Clock.currentTimeMillis
      }
    })
  }
}
