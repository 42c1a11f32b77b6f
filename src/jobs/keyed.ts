/**
 * A queue's concurrency by key (`concurrency: { key, limit }`): at most `limit` jobs with one key run
 * (inline) or are leased (external) at once.
 *
 * The key is computed from the payload at `add` and stored (`concurrency_key`), so it survives evictions.
 * What counts as running is decided in the claim's (or the lease's) transaction:
 * - inline, the jobs of the key whose handlers run in this isolate (`KeyState`): after an eviction none does,
 *   and their rows are simply due again;
 * - external, the jobs of the key with a lease out, read from their rows (durable).
 *
 * A job whose key is full is not claimed (its attempt is not counted): it is marked `waiting_key` and moved
 * to when it should look again, the time the key's first running job's attempt (or lease) ends. Its key's
 * next end makes the first such job due at once (`release`), so the mark is the fast path and the time is
 * the guarantee: a lost release (an eviction between an end and its release) delays a job, never loses it.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Background from "../engine/Background.js"
import { Admission, type Execution, type TableHandle } from "../engine/DurableTable.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import type { AnyCodec } from "../shared/codec.js"
import { InvalidInputError, type StorageError } from "../shared/Errors.js"
import * as Json from "../shared/json.js"
import * as Validate from "../shared/validate.js"
import * as JobsTable from "./jobsTable.js"
import type * as Options from "./options.js"

/** What of the jobs' state this module uses (a part of `core.ts`'s `Core`, which imports this module). */
interface Core {
  readonly storage: StorageService
  readonly handle: TableHandle
  readonly background: Background.Background
  readonly rounds?: Rounds | undefined
}

/**
 * The rounds of an object with keys: each key's jobs take successive rounds (`turn`), and start order goes
 * round by round, so a key with many jobs waiting takes turns with the others instead of going first. `floor`
 * is the latest round started: a new job starts no sooner (a key that was idle does not jump ahead with rounds
 * it did not use), and a job without a key takes it, behind the jobs of earlier rounds. Read lazily: after an
 * eviction, from the last round a job without a key took, so their order never goes back.
 */
export interface Rounds {
  floor: number | undefined
}

export const makeRounds = (): Rounds => ({ floor: undefined })

/** The round a job added now starts at the soonest, in an object with keys (undefined elsewhere). */
export const floorOf = (core: Core): Effect.Effect<number | undefined, StorageError> => {
  const rounds = core.rounds
  if (rounds === undefined) return Effect.succeed(undefined)
  if (rounds.floor !== undefined) return Effect.succeed(rounds.floor)
  return Effect.map(JobsTable.lastKeylessRound(core.storage), (last) => {
    rounds.floor = Math.max(rounds.floor ?? 0, last)
    return rounds.floor
  })
}

/** A job of round `turn` started (or was leased): later jobs start no sooner than its round. */
export const started = (core: Core, turn: unknown): void => {
  const rounds = core.rounds
  if (rounds !== undefined && typeof turn === "number" && turn > (rounds.floor ?? 0)) rounds.floor = turn
}

interface QueueRuntime {
  readonly name: string
  readonly options: Options.Resolved
  readonly definition: { readonly payload: AnyCodec }
  readonly keys?: KeyState | undefined
}

/** What this isolate knows of a keyed queue: its jobs running here, by key, with when each attempt ends at the latest. */
export interface KeyState {
  readonly running: Map<string, Map<string, number>>
  /** The queue's attempt timeout: a running job's attempt ends by then (its handler is aborted). */
  readonly attemptTimeoutMs: number
}

export const makeState = (attemptTimeoutMs: number): KeyState => ({ running: new Map(), attemptTimeoutMs })

/**
 * A job that waits for its key looks again no sooner than this after the check: an attempt past its
 * timeout whose handler ignores the abort still holds its key, and would otherwise be looked at in a loop.
 */
export const MIN_RECHECK_MS = 1_000

/** The job's key from its payload (at `add`), checked; null for a queue without a concurrency by key. */
export const keyOf = (queue: QueueRuntime, payload: unknown, prefix: string): Effect.Effect<string | null, InvalidInputError> => {
  const keyed = queue.options.keyed
  if (keyed === undefined) return Effect.succeed(null)
  const field = `${prefix}payload`
  let key: unknown
  try {
    key = keyed.key(payload)
  } catch (error) {
    return Effect.fail(invalidPayload(field, `concurrency.key of queue "${queue.name}" threw: ${String(error)}`))
  }
  const problem = Validate.keyProblem("the concurrency key", key)
  return problem === undefined
    ? Effect.succeed(key as string)
    : Effect.fail(invalidPayload(field, `concurrency.key of queue "${queue.name}" returned no key: ${problem}`))
}

const invalidPayload = (field: string, message: string) => new InvalidInputError({ field, kind: "type", message })

/**
 * The key of a job added again from its stored payload (a dead letter's redrive): its key as `add` computes
 * it, or null (not limited by key) when the queue's key function no longer takes it.
 */
export const storedKeyOf = (queue: QueueRuntime, payload: string): Effect.Effect<string | null> => {
  if (queue.options.keyed === undefined) return Effect.succeed(null)
  return queue.definition.payload.decode(Json.decode(payload)).pipe(
    Effect.flatMap((decoded) => keyOf(queue, decoded, "")),
    Effect.orElseSucceed(() => null)
  )
}

const keyOfRow = (row: Row): string | undefined => typeof row.concurrency_key === "string" ? row.concurrency_key : undefined

/**
 * An inline job's admission, in its claim's transaction: it runs when fewer than `limit` jobs of its key
 * run here (it then counts as running until its handler ends: `ended`), or it waits for the first of them
 * to end. `core.handle.executing` drops a job whose claim did not follow its admission.
 */
export const admit = (core: Core, queue: QueueRuntime, state: KeyState, row: Row) => (now: number) =>
  Effect.gen(function*() {
    const concurrencyKey = keyOfRow(row)
    const limit = queue.options.keyed?.limit
    if (concurrencyKey === undefined || limit === undefined) return Admission.Run()
    const self = String(row.key)
    let running = state.running.get(concurrencyKey)
    if (running === undefined) state.running.set(concurrencyKey, running = new Map())
    for (const key of running.keys()) if (key !== self && !core.handle.executing(key)) running.delete(key)
    running.delete(self)
    if (running.size >= limit) {
      yield* JobsTable.waitForKey(core.storage, self, String(row.generation_id))
      return Admission.Defer({ at: Math.max(now + MIN_RECHECK_MS, Math.min(...running.values())) })
    }
    // The claim follows in this transaction. Should it not match (the job is past its attempts: exhausted), the
    // job stops executing at once, and the next admission of its key drops it (above).
    if (Number(row.waiting_key) === 1) yield* JobsTable.keyAdmitted(core.storage, self)
    running.set(self, now + state.attemptTimeoutMs)
    started(core, row.turn)
    return Admission.Run()
  })

/**
 * The jobs' table with keys given back: the run of a job of a queue with a concurrency by key gives its key
 * back once its handler ended (`ended`). The table as it is when no queue has one.
 */
export const givingKeysBack = <T extends { readonly run: (execution: Execution) => Effect.Effect<string, unknown> }>(
  core: Core & { readonly queues: ReadonlyMap<string, QueueRuntime> },
  table: T
): T => {
  if (![...core.queues.values()].some((queue) => queue.keys !== undefined)) return table
  const run = table.run
  return Object.assign(table, {
    run: (execution: Execution): Effect.Effect<string, unknown> => {
      const queue = core.queues.get(String(execution.row.queue))
      if (queue?.keys === undefined) return run(execution)
      let returned: Effect.Effect<string, unknown>
      try {
        returned = run(execution)
      } catch (defect) {
        returned = Effect.die(defect)
      }
      // A plain handler's value (an Exit) becomes an effect here: its key is given back before it settles.
      return Effect.ensuring(returned, ended(core, queue, queue.keys, execution))
    }
  })
}

/** The job admitted for its key did not start after all (its rate limit deferred it): it no longer counts. */
export const forget = (state: KeyState, row: Row): void => {
  const concurrencyKey = keyOfRow(row)
  if (concurrencyKey !== undefined) state.running.get(concurrencyKey)?.delete(String(row.key))
}

/**
 * The handler of an inline job of a keyed queue ended (whatever its outcome): its key has room again, so
 * the first job waiting for it is due now. Its own transaction, after the handler ended: a job of the key
 * may start while this one settles, never while its handler runs.
 */
export const ended = (core: Core, queue: QueueRuntime, state: KeyState, execution: Execution): Effect.Effect<void> =>
  Effect.suspend(() => {
    const concurrencyKey = keyOfRow(execution.row)
    if (concurrencyKey === undefined) return Effect.void
    const running = state.running.get(concurrencyKey)
    if (running?.delete(execution.key) !== true) return Effect.void
    if (running.size === 0) state.running.delete(concurrencyKey)
    return release(core, queue, concurrencyKey)
  })

/** The first job of `queue` waiting for `concurrencyKey` is due now and starts if it can. */
export const release = (core: Core, queue: QueueRuntime, concurrencyKey: string): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    core.handle.writePending(
      JobsTable.freeKey(core.storage, queue.name, concurrencyKey, now),
      (rows) => rows.map((row) => ({ key: String(row.key), at: now, start: true }))
    )).pipe(
      Effect.asVoid,
      // The waiting job looks again at its own time: a failed release delays it, never loses it.
      Effect.catchAll((error: StorageError) =>
        core.background.report("durability.jobs.key_release_failed", { queue: queue.name, error: error.message }))
    )

/**
 * A transport job's key, in its dispatch's transaction: `undefined` when its key has room for one more lease;
 * otherwise the job waits for one of the key's leases to end (the first to end is when it looks again).
 */
export const transportWait = (core: Core, queue: QueueRuntime, row: Row, now: number): Effect.Effect<Admission | undefined, StorageError> =>
  Effect.gen(function*() {
    const concurrencyKey = keyOfRow(row)
    const limit = queue.options.keyed?.limit
    if (concurrencyKey === undefined || limit === undefined) return undefined
    const [out] = yield* JobsTable.leasedOfKey(core.storage, queue.name, concurrencyKey)
    if (Number(out?.n ?? 0) < limit) {
      started(core, row.turn)
      return undefined
    }
    yield* JobsTable.waitForKey(core.storage, String(row.key), String(row.generation_id))
    return Admission.Defer({ at: Math.max(now + 1, Number(out?.soonest ?? now + 1)) })
  })

/** The room each key of `queue` has for more leases now, read once per `lease` call (the call takes from it). */
export const leaseRoom = (core: Core, queue: QueueRuntime): Effect.Effect<((row: Row) => boolean) | undefined, StorageError> => {
  const limit = queue.options.keyed?.limit
  if (limit === undefined) return Effect.succeed(undefined)
  return Effect.map(JobsTable.leasedByKey(core.storage, queue.name), (rows) => {
    const out = new Map(rows.map((row) => [String(row.concurrency_key), Number(row.n)]))
    return (row) => {
      const concurrencyKey = keyOfRow(row)
      if (concurrencyKey === undefined) return true
      const n = out.get(concurrencyKey) ?? 0
      if (n >= limit) return false
      out.set(concurrencyKey, n + 1)
      return true
    }
  })
}
