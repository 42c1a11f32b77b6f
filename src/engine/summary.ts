/**
 * The engine as this instance knows it in memory: the physical alarm as last read or written, the
 * early timer, the permits, the keys executing here. Read without I/O, so asking costs the same
 * whatever the object holds (the inspector's overview shows it).
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Engine } from "./engine.js"

/**
 * The engine as this instance knows it in memory, read without I/O: what the inspector's overview shows of
 * the scheduler.
 */
export interface EngineSummary {
  /** The scheduler's `objectId` option (null: not given). */
  readonly objectId: string | null
  /** The physical alarm as this instance knows it (null: none set). */
  readonly physicalAlarm: number | null
  /** The in-memory early timer (null: not armed). */
  readonly earlyTimer: number | null
  /** The shared permits: how many in all, free now, and executions waiting for one. */
  readonly permits: { readonly capacity: number; readonly available: number; readonly waiting: number }
  /** Executions in this isolate now: the exact count, and the first of them (up to the asked bound). */
  readonly runningCount: number
  /** `kind` is the attached table's (`DurableTable.kind`), in attach order. */
  readonly running: ReadonlyArray<{ readonly kind: string; readonly key: string }>
  /** The clock when read (epoch milliseconds). */
  readonly now: number
}

export const make = (engine: Engine) => (runningListed: number): Effect.Effect<EngineSummary> =>
  Effect.gen(function*() {
    const running: Array<{ kind: string; key: string }> = []
    let runningCount = 0
    for (const participant of engine.participants) {
      runningCount += participant.active.size
      for (const key of participant.active.keys()) {
        if (running.length >= runningListed) break
        running.push({ kind: participant.table.kind, key })
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
      now: yield* Clock.currentTimeMillis
    }
  })
