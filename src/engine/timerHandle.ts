/**
 * A table's timers as its handle, its `settled` work and its timers' `fire` get them: one value per
 * table, whose `set` covers the timer with the alarm and the early timer as a pending record is.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { TimerHandle } from "./DurableTable.js"
import type { Run } from "./engine.js"
import type { Participant } from "./participant.js"
import { cancel, get, set, setBy, TABLE } from "./timers.js"

const handles = new WeakMap<Participant<any>, TimerHandle>()

export const handleOf = (run: Run): TimerHandle => {
  const known = handles.get(run.participant)
  if (known !== undefined) return known
  const { engine, participant } = run
  const owner = participant.table.kind
  const handle: TimerHandle = {
    set: (key, at, data) =>
      Effect.zipRight(
        set(engine.storage, owner, key, at, data ?? null),
        // Covered as a pending record is: the alarm in this transaction, the early timer at once (a fire
        // for a transaction that then failed finds nothing due).
        Effect.zipRight(engine.upkeep.cover(at), engine.alarms.coverTimer(at))
      ),
    setBy: (key, at) =>
      Effect.zipRight(setBy(engine.storage, owner, key, at), Effect.zipRight(engine.upkeep.cover(at), engine.alarms.coverTimer(at))),
    cancel: (key) => cancel(engine.storage, owner, key),
    get: (key) =>
      Effect.map(get(engine.storage, owner, key), (timer) =>
        timer === undefined ? undefined : { key: timer.key, at: timer.at, data: timer.data }),
    count: Effect.map(engine.storage.exec(`SELECT COUNT(*) AS n FROM ${TABLE} WHERE owner = ?`, [owner]), ([row]) => Number(row?.n ?? 0))
  }
  handles.set(participant, handle)
  return handle
}
