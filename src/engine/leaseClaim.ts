/**
 * A lease's claim (see `DurableTable.Leases`): the claim every record takes (its attempt counted,
 * within its attempts), and the lease's timer (owner `<kind>.lease`, the record's key) holding the
 * claim it belongs to.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Run } from "./engine.js"
import type { LeaseState } from "./DurableTable.js"
import type { Row, SqlValue } from "./StorageService.js"
import * as Timers from "./timers.js"

/** The claim a lease timer belongs to: a timer of an earlier claim of the record is stale. */
export interface Claim {
  readonly generation: string
  readonly attempt: number
}

export const claimOf = (data: string | null): Claim | undefined => {
  try {
    const parsed = JSON.parse(data ?? "null") as Partial<Claim> | null
    return typeof parsed?.generation === "string" && typeof parsed.attempt === "number"
      ? { generation: parsed.generation, attempt: parsed.attempt }
      : undefined
  } catch {
    return undefined
  }
}

export const holds = (row: Row | undefined, claim: Claim | undefined): row is Row =>
  row !== undefined && claim !== undefined && row.status === "pending" && String(row.generation_id) === claim.generation &&
  Number(row.attempt) === claim.attempt

/** Inside a transaction: the lease's claim, with the table's lease state, and its timer (see `TableHandle.lease`). */
export const claim = (
  run: Run,
  key: string,
  until: number,
  now: number,
  state?: LeaseState | undefined
): Effect.Effect<Row | undefined, StorageError> =>
  Effect.gen(function*() {
    const { engine, participant } = run
    const { storage } = engine
    const stamped = participant.table.dispatch?.startedColumn !== undefined
    const set = state?.bindings ?? []
    const at = (rest: ReadonlyArray<SqlValue>) => stamped ? [now, ...set, key, now, ...rest] : [...set, key, now, ...rest]
    let claimed: Row | undefined
    if (participant.claimLease !== undefined) {
      ;[claimed] = yield* storage.exec(participant.sql.lease(participant.claimLease.limit, state?.columns), at(participant.claimLease.bindings))
    } else {
      const [row] = yield* storage.exec(participant.sql.read, [key])
      if (row === undefined) return undefined
      ;[claimed] = yield* storage.exec(participant.sql.lease("?", state?.columns), at([participant.table.policy(row).maxAttempts]))
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

