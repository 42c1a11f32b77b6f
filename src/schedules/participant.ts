/**
 * The schedules' part in the engine: what the capability skeleton is given (names, policies'
 * errors, purge), how a run runs and is fenced, which run a slot starts (its timer's fire) and where
 * the schedule goes once a run ended (its settled work).
 * @internal
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { Execution } from "../engine/DurableTable.js"
import { DurableAttemptTimeoutError, InvalidOptionError, NonRetryableError } from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as TimerSupport from "../engine/timerSupport.js"
import type * as Slot from "../engine/slot.js"
import type { StorageService } from "../engine/StorageService.js"
import * as StepMemo from "../steps/memo.js"
import * as Steps from "../steps/Steps.js"
import * as Rows from "./rows.js"
import * as Runs from "./runs.js"
import * as Slots from "./slots.js"
import * as ScheduleSchema from "./schema.js"
import * as SchedulesTable from "./schedulesTable.js"
import type { AnyScheduleDefinition, ScheduleRun } from "./types.js"

/** The capability's name on the scheduler (and in its migrations' history). */
export const CAPABILITY = "schedules"

const TABLE = ScheduleSchema.TABLE
const { migrations } = ScheduleSchema

/**
 * How the capability skeleton makes the schedules' table (`R`: the handlers' requirements, from
 * `context`): runs take at most `slot`'s permits, and read timings through `timingOf`.
 */
export const spec = <R>(
  definitions: Readonly<Record<string, AnyScheduleDefinition>>,
  options: Capability.CapabilityOptions,
  context: Context.Context<R>,
  slot: Slot.RankedSlot,
  timingOf: Rows.Timings
): Capability.Spec<AnyScheduleDefinition, void> => {
  const parts = (storage: StorageService): Runs.Parts => ({ storage, timingOf, newGeneration: () => crypto.randomUUID() })
  return {
    kind: CAPABILITY,
    owner: "DurabilitySchedules",
    module: "Schedules",
    table: TABLE,
    keyColumn: "key",
    nameColumn: "schedule",
    entityKind: "schedule",
    migrations,
    definitions,
    options,
    timeoutError: (name) => (timeoutMs) =>
      new DurableAttemptTimeoutError({ message: `A run of schedule "${name}" timed out after ${timeoutMs}ms`, timeoutMs }),
    // A step that cannot be stored would fail (or re-run its side effect) on every retry.
    isTerminal: () => StepMemo.isStepFailure,
    check: (definitions) => {
      const slashed = Object.keys(definitions).find((name) => name.includes("/"))
      return slashed === undefined ? undefined : new InvalidOptionError({
        field: `methods.${slashed}`,
        kind: "type",
        message: `A schedule name cannot contain "/": ${JSON.stringify(slashed)}`
      })
    },
    // One run per schedule at a time: a re-created schedule waits for a removed one's run to end.
    releaseKeysOnPurge: false,
    purgeReason: () => new Error("The schedule was purged"),
    // A schedule waiting for its next run is a timer: the engine's support for timers comes with the schedules.
    participant: ({ definitionOf, storage }) => TimerSupport.withTimers({
      run: run(definitionOf, storage, context),
      // The run's end is written by `settled` (the schedule moves on); this only fences it.
      complete: (execution) => SchedulesTable.isCurrentAttempt(storage, execution),
      // The schedule goes on: its next slot's timer, or its next run at once when that slot passed already.
      // Usually its next slot is later: its timer, from what `advance` wrote (no read). A slot that passed
      // already (catching up) starts its run at once, as `Slots.update` decides from the row.
      settled: (row, settlement, timers) =>
        Effect.flatMap(Runs.advance(parts(storage), row, settlement), (next) => {
          if (next === undefined || next.at === null || !next.waits) return Effect.succeed({ pending: [] })
          if (next.at > settlement.at) return Effect.as(timers.set(String(row.key), next.at), { pending: [] })
          return Effect.map(Slots.update(parts(storage), timers, String(row.key), settlement.at), (pending) => ({ pending }))
        }),
      // A schedule waiting for its next run is a slot timer; only a run in progress is a record to claim.
      timers: { fire: (timer, now, timers) => Slots.fire(parts(storage), timers, timer.key, now) },
      dispatch: { startedColumn: "started_at", slotOf: () => slot },
      holds: { where: SchedulesTable.CLAIMABLE },
      describe: (row) => `schedule "${String(row.schedule)}" (key "${String(row.schedule_key)}")`,
      entity: (row) => ({
        entityKind: "schedule",
        schedule: String(row.schedule),
        key: String(row.schedule_key),
        id: String(row.key),
        generation: String(row.generation_id)
      })
    })
  }
}

/** One attempt of a run: its handler, with the run's steps. */
const run = <R>(
  definitionOf: (name: string) => AnyScheduleDefinition | undefined,
  storage: StorageService,
  context: Context.Context<R>
) =>
(execution: Execution) =>
  Effect.gen(function*() {
    const { row } = execution
    const name = String(row.schedule)
    const definition = definitionOf(name)
    if (definition === undefined) {
      return yield* new NonRetryableError({ message: `No schedule handler registered for "${name}"` })
    }
    const payload = yield* Effect.mapError(
      definition.payload.decode(Rows.storedPayload(row)),
      (cause) => new NonRetryableError({ message: `The stored payload of schedule "${name}" does not decode`, cause })
    )
    const slotAt = Number(row.run_slot)
    const manual = Number(row.run_manual) === 1
    const key = String(row.schedule_key)
    const run: ScheduleRun<unknown> = {
      schedule: name,
      key,
      payload,
      scheduledTime: slotAt,
      manual,
      runNumber: Number(row.run_number),
      attempt: execution.attempt,
      signal: execution.signal,
      idempotencyKey: Rows.idempotencyKey(name, key, slotAt, manual)
    }
    // The run's steps are memos of this generation: the next run gets a new one (and none of them).
    const steps = StepMemo.runner(storage, {
      capability: CAPABILITY,
      current: SchedulesTable.IS_CURRENT,
      key: execution.key,
      generation: execution.generation
    })
    yield* Capability.provideCaptured(
      Effect.provideService(
        definition.handler(run as never) as Effect.Effect<unknown, unknown, R | Steps.CurrentCall>,
        Steps.CurrentCall,
        steps
      ),
      context
    )
  })
