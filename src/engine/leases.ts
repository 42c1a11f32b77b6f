/**
 * Leasing (see `DurableTable.Leases`): a record claimed for work done elsewhere. The lease's claim is
 * the claim every record takes (its attempt counted, within its attempts); its end is a durable timer
 * of the engine's (owner `<kind>.lease`, the record's key), so an expired lease is decided once,
 * durably, whether or not the object was evicted meanwhile.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import * as Attempt from "./attempt.js"
import type { PendingRecord } from "./DurableTable.js"
import type { Run } from "./engine.js"
import type { Row } from "./StorageService.js"
import * as Timers from "./timers.js"

/** The claim a lease timer belongs to: a timer of an earlier claim of the record is stale. */
interface Claim {
  readonly generation: string
  readonly attempt: number
}

const claimOf = (data: string | null): Claim | undefined => {
  try {
    const parsed = JSON.parse(data ?? "null") as Partial<Claim> | null
    return typeof parsed?.generation === "string" && typeof parsed.attempt === "number"
      ? { generation: parsed.generation, attempt: parsed.attempt }
      : undefined
  } catch {
    return undefined
  }
}

const holds = (row: Row | undefined, claim: Claim | undefined): row is Row =>
  row !== undefined && claim !== undefined && row.status === "pending" && String(row.generation_id) === claim.generation &&
  Number(row.attempt) === claim.attempt

/** Inside a transaction: the lease's claim and its timer (see `TableHandle.lease`). */
export const claim = (run: Run, key: string, until: number, now: number): Effect.Effect<Row | undefined, StorageError> =>
  Effect.gen(function*() {
    const { engine, participant } = run
    const { storage } = engine
    const stamped = participant.table.dispatch?.startedColumn !== undefined
    const at = (rest: ReadonlyArray<string | number>) => stamped ? [now, key, now, ...rest] : [key, now, ...rest]
    let claimed: Row | undefined
    if (participant.claimLease !== undefined) {
      ;[claimed] = yield* storage.exec(participant.claimLease.sql, at(participant.claimLease.bindings as ReadonlyArray<string | number>))
    } else {
      const [row] = yield* storage.exec(participant.sql.read, [key])
      if (row === undefined) return undefined
      ;[claimed] = yield* storage.exec(participant.sql.lease("?"), at([participant.table.policy(row).maxAttempts]))
    }
    if (claimed === undefined) return undefined
    yield* timed(run, claimed, until, Timers.set)
    return claimed
  })

/** Inside a transaction: the lease timer of `row`'s current claim, at `until`, unless it has one. */
export const resume = (run: Run, row: Row, until: number): Effect.Effect<void, StorageError> =>
  timed(run, row, until, Timers.setIfAbsent)

const timed = (
  run: Run,
  row: Row,
  until: number,
  write: (...args: Parameters<typeof Timers.set>) => Effect.Effect<unknown, StorageError>
): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const { engine, participant } = run
    const data = JSON.stringify({ generation: String(row.generation_id), attempt: Number(row.attempt) } satisfies Claim)
    yield* write(engine.storage, Timers.leaseOwner(participant.table.kind), String(row[participant.table.keyColumn]), until, data)
    yield* engine.upkeep.cover(until)
    yield* engine.alarms.coverTimer(until)
  })

/** The lease timer is gone (another pass, or the worker's settle, took it first): nothing to do. */
class Gone {}

/** Takes the timer, or fails with `Gone`: the guard of what only one of the timer's takers may do. */
const taken = (run: Run, timer: Timers.Stored) =>
  Effect.flatMap(Timers.take(run.engine.storage, timer), (took) => took ? Effect.void : Effect.fail(new Gone()))

/**
 * A lease timer came due: what the table decides from the record as stored now. A timer of an
 * earlier claim (the record settled, was removed or leased again) is only taken.
 */
export const expire = (run: Run, timer: Timers.Stored, now: number): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    const { engine, participant } = run
    const leases = participant.table.leases
    if (leases === undefined) return
    const { storage } = engine
    let pending: ReadonlyArray<PendingRecord> = []
    const settle = yield* storage.transaction(Effect.gen(function*() {
      const [row] = yield* storage.exec(participant.sql.read, [timer.key])
      if (!holds(row, claimOf(timer.data))) {
        yield* Timers.take(storage, timer)
        return undefined
      }
      const expiry = leases.expired(row, now)
      switch (expiry._tag) {
        case "Extended": {
          if (yield* Timers.take(storage, timer)) {
            yield* Timers.set(storage, timer.owner, timer.key, expiry.at, timer.data)
            yield* engine.upkeep.cover(expiry.at)
          }
          return undefined
        }
        case "Released": {
          if (!(yield* Timers.take(storage, timer))) return undefined
          pending = yield* expiry.write
          if (pending.length > 0) yield* engine.upkeep.cover(Math.min(...pending.map((record) => record.at)))
          return undefined
        }
        // Settled in a transaction of their own, which takes the timer first: the timer stays until then.
        default:
          return { row, expiry }
      }
    }))
    yield* Attempt.startPending(run, pending)
    if (settle === undefined) return
    const guard = Effect.zipRight(taken(run, timer), settle.expiry.write)
    const ending = settle.expiry._tag === "Failed"
      ? Attempt.settleExternal(run, settle.row, { _tag: "Failure", error: settle.expiry.error, terminal: true }, guard)
      : Attempt.exhaustGuarded(run, settle.row, guard)
    yield* Effect.catchIf(ending, (error): error is Gone => error instanceof Gone, () => Effect.void)
  })
