/**
 * Batched queues (`batch: { size, waitMs }`): each job stays a record of the engine with its own
 * claim, attempt, timeout, cancel and settle; what is batched is the handler's call. A job of a
 * batched queue, once claimed, joins the batch forming for its queue in this isolate and awaits its
 * own outcome; the batch's handler is called once with the jobs started together (those the same
 * pass or drain starts), or as soon as `size` joined.
 *
 * `waitMs` is durable: when fewer than `size` jobs are due, the first one opens a wait (its end stored
 * with the queue, `batch_until`) and the due jobs are moved to its end, so the engine's timer (or the
 * alarm, after an eviction) starts them together then; enough jobs waiting end it at once.
 * @internal
 */
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Runtime from "effect/Runtime"
import { Admission } from "../engine/DurableTable.js"
import type { StorageError } from "../shared/Errors.js"
import type { StorageService } from "../engine/StorageService.js"
import * as JobsTable from "./jobsTable.js"
import * as QueuesTable from "./queuesTable.js"
import type { JobContext } from "./types.js"

/** One job of a batch: its view, and its outcome (the result's stored JSON, or its failure). */
interface Member {
  readonly job: JobContext<unknown>
  readonly done: Deferred.Deferred<string, unknown>
  /** Its execution ended before the batch did (cancel, timeout, eviction): nothing waits for it any more. */
  gone: boolean
}

/** A batch of one queue: forming until it is called, then running. */
interface Batch {
  readonly members: Array<Member>
  /** The handler's call, once started. */
  running: Fiber.RuntimeFiber<void> | undefined
}

/**
 * Calls the queue's handler with the jobs: each job's outcome (its result's stored JSON, or its failure),
 * in the jobs' order; a failure of the call fails every job.
 */
export type Call = (jobs: ReadonlyArray<JobContext<unknown>>) => Effect.Effect<ReadonlyArray<Exit.Exit<string, unknown>>, unknown>

/** The batch forming for each queue in this isolate (by the queue's runtime, so a new instance starts with none). */
const forming = new WeakMap<object, Batch>()

/** Scheduler turns a forming batch waits, at most, for more jobs started in the same pass. */
const MAX_TURNS = 64

/**
 * For a claimed job of a batched queue: joins the batch forming for `queue` and ends with the job's own
 * outcome. `call` runs the batch (in `runtime`, the engine's: not a child of any one job's execution).
 */
export const join = (
  queue: object,
  size: number,
  job: JobContext<unknown>,
  call: Call,
  runtime: Runtime.Runtime<never>
): Effect.Effect<string, unknown> =>
  Effect.suspend(() => {
    const member: Member = { job, done: Deferred.unsafeMake(FiberId.none), gone: false }
    let batch = forming.get(queue)
    const opens = batch === undefined
    if (batch === undefined) {
      batch = { members: [], running: undefined }
      forming.set(queue, batch)
    }
    batch.members.push(member)
    const joined = batch
    if (joined.members.length >= size) start(queue, joined, call, runtime)
    // The one who opened it starts it once the jobs started with it have joined, in a fiber of its own: a
    // cancel of the opener must not leave the others waiting.
    else if (opens) Runtime.runFork(runtime)(Effect.interruptible(Effect.zipRight(gather(joined), Effect.sync(() => start(queue, joined, call, runtime)))))
    // A job whose execution ended first (timeout, cancel, eviction) keeps it until the call really ended, as a
    // handler that ignores its abort does: its retry never overlaps the call still working on it.
    return Effect.onInterrupt(Deferred.await(member.done), () =>
      Effect.suspend(() => {
        leave(joined, member)
        return joined.running === undefined ? Effect.void : Fiber.await(joined.running)
      }))
  })

/**
 * Waits while jobs keep joining: the pass or drain that starts them runs on between scheduler turns, so a
 * turn in which none joined means it moved on (or waits for a permit: what joined runs now).
 */
const gather = (batch: Batch): Effect.Effect<void> => {
  const turn = (seen: number, turns: number): Effect.Effect<void> =>
    Effect.flatMap(Effect.yieldNow(), () =>
      batch.running !== undefined || batch.members.length === seen || turns >= MAX_TURNS
        ? Effect.void
        : turn(batch.members.length, turns + 1))
  return Effect.suspend(() => turn(batch.members.length, 0))
}

/** Calls the handler with the batch's jobs still waiting, once; each job gets its own outcome. */
const start = (queue: object, batch: Batch, call: Call, runtime: Runtime.Runtime<never>): void => {
  if (batch.running !== undefined) return
  if (forming.get(queue) === batch) forming.delete(queue)
  const members = batch.members.filter((member) => !member.gone)
  batch.members.length = 0
  batch.members.push(...members)
  if (members.length === 0) return
  const settle = (exit: Exit.Exit<ReadonlyArray<Exit.Exit<string, unknown>>, unknown>) =>
    Effect.sync(() => {
      members.forEach((member, index) => {
        Deferred.unsafeDone(member.done, Exit.isSuccess(exit) ? exit.value[index]! : Exit.failCause(exit.cause))
      })
    })
  // Interruptible whatever the region the engine's runtime was captured in (an execution's is not): the call is
  // interrupted once none of its jobs waits, and its outcome is handed out whatever it is.
  batch.running = Runtime.runFork(runtime)(
    Effect.interruptible(
      Effect.uninterruptibleMask((restore) => Effect.flatMap(Effect.exit(restore(call(members.map((member) => member.job)))), settle))
    )
  )
}

/**
 * A member whose execution ended first: out of a forming batch; the call of a running one is interrupted
 * once none of its jobs waits any more (its jobs' signals were aborted with their executions).
 */
const leave = (batch: Batch, member: Member): void => {
  member.gone = true
  if (batch.running === undefined) {
    const at = batch.members.indexOf(member)
    if (at >= 0) batch.members.splice(at, 1)
    return
  }
  if (batch.members.every((other) => other.gone)) batch.running.unsafeInterruptAsFork(FiberId.none)
}

/**
 * The failure of every job of a batch whose handler did not return one `Exit` per job, in order: retried under
 * the queue's policy, as a failure of the whole call is.
 */
export class JobBatchOutcomesError extends Data.TaggedError("JobBatchOutcomesError")<{ readonly message: string }> {}

/** Why a batch handler's answer is not one `Exit` per job, or undefined. */
export const outcomesProblem = (queue: string, outcomes: unknown, jobs: number): string | undefined => {
  if (!Array.isArray(outcomes)) return `The batch handler of queue "${queue}" must return one Exit per job (an array), got ${typeof outcomes}`
  if (outcomes.length !== jobs) {
    return `The batch handler of queue "${queue}" returned ${outcomes.length} outcomes for ${jobs} jobs`
  }
  const bad = outcomes.findIndex((outcome) => !Exit.isExit(outcome))
  return bad < 0 ? undefined : `The batch handler of queue "${queue}" returned a value that is not an Exit for job ${bad}`
}

/**
 * In the claim's transaction of a job of a batched queue with a `waitMs`: run it, or have it wait for
 * more (see the module). `executing`: the queue's jobs running here now (not waiting any more).
 */
export const admit = (
  storage: StorageService,
  queue: string,
  batch: { readonly size: number; readonly waitMs: number },
  executing: ReadonlyArray<string>,
  self: string
) =>
(now: number): Effect.Effect<Admission, StorageError> =>
  Effect.gen(function*() {
    const [stored] = yield* QueuesTable.readBatchWait(storage, queue)
    const until = stored === undefined ? undefined : Number(stored.batch_until)
    const running = new Set(executing)
    running.delete(self)
    const due = yield* JobsTable.batchable(storage, queue, now, until ?? now, batch.size + running.size)
    // This job among them: it is due, not executing.
    const waiting = due.filter((row) => !running.has(String(row.key))).length
    if (until !== undefined && until <= now) {
      // The wait is over: its jobs run (in batches, as permits free up); it closes with the last of them.
      if (waiting <= 1) yield* QueuesTable.setBatchWait(storage, queue, null)
      return Admission.Run()
    }
    if (waiting >= batch.size) {
      // Enough wait: they all start now, together. Closed but kept, so the next ones of this start run too.
      yield* QueuesTable.setBatchWait(storage, queue, now)
      if (until === undefined) return Admission.Run()
      yield* JobsTable.releaseHeld(storage, queue, until, now)
      return Admission.Defer({ at: now })
    }
    if (until !== undefined) return Admission.Defer({ at: until })
    const end = now + batch.waitMs
    yield* QueuesTable.setBatchWait(storage, queue, end)
    yield* JobsTable.holdUntil(storage, queue, end, undefined, [...running].slice(0, MAX_EXCLUDED))
    return Admission.Defer({ at: end })
  })

/** Keys a statement may list (a Durable Object statement takes at most 100 bindings). */
const MAX_EXCLUDED = 64
