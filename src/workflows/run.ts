/**
 * One run of a workflow instance: its handler replayed from the start over its stored steps. A step
 * stored as completed returns its result; the first step not done yet does its work; a step that must
 * wait (a sleep, a retry's delay, an event, a child) suspends the run: its promise never settles, the
 * steps in flight finish, and the run ends as `Suspend` with the earliest time and the things it waits
 * for. The engine stores that end; the instance then holds no permit, no fiber and no memory.
 *
 * Positions are call order, as the reference's: a step asked at a position that stores another name or
 * kind fails the instance with `WorkflowReplayError` naming both.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"
import type { Execution, PendingRecord, TableHandle } from "../engine/DurableTable.js"
import { serializeError } from "../engine/Background.js"
import * as RetryPolicy from "../engine/RetryPolicy.js"
import type { StorageService } from "../engine/StorageService.js"
import { WorkflowChildError, WorkflowReplayError, WorkflowTimeoutError } from "../shared/Errors.js"
import * as Json from "../shared/json.js"
import * as EventsTable from "./eventsTable.js"
import * as InstancesTable from "./instancesTable.js"
import * as Limits from "./limits.js"
import * as StepsTable from "./stepsTable.js"
import type { WorkflowEvent, WorkflowReceivedEvent, WorkflowStep, WorkflowStepConfig, WorkflowStepContext } from "./types.js"

/** A workflow's handler as the capability runs it. */
export type Handler = (event: WorkflowEvent<unknown>, step: WorkflowStep) => unknown

/** A failure of the handler's own: it ends the instance as errored, never retried as a run. */
export class HandlerFailure extends Error {
  constructor(readonly error: unknown) {
    const { message, name } = serializeError(error)
    super(message)
    this.name = name
  }
}

/** A step-level failure rebuilt from storage: its name and message as stored. */
const rebuilt = (name: string | null, message: string | null): Error => {
  const error = new Error(message ?? "")
  error.name = name ?? "Error"
  return error
}

const DEFAULTS = { limit: 5, delay: 10_000, backoff: "exponential" as const, timeout: 10 * 60_000 }
/** A `waitForEvent` without a timeout waits 24 hours (Cloudflare's default). */
const DEFAULT_EVENT_TIMEOUT_MS = 24 * 60 * 60_000

interface ResolvedConfig {
  readonly attempts: number
  readonly delay: number
  readonly backoff: "constant" | "linear" | "exponential"
  readonly timeout: number
}

/** A `step.do` config, resolved; a bad one is a `RangeError` of the step (the handler may catch it). */
const resolveConfig = (config: WorkflowStepConfig | undefined): ResolvedConfig | string => {
  if (config === undefined) return { attempts: DEFAULTS.limit + 1, delay: DEFAULTS.delay, backoff: DEFAULTS.backoff, timeout: DEFAULTS.timeout }
  if (typeof config !== "object" || config === null) return "a step's config must be an object"
  const retries = config.retries
  const limit = retries?.limit ?? DEFAULTS.limit
  if (!Number.isSafeInteger(limit) || limit < 0 || limit > Limits.MAX_STEPS) {
    return `retries.limit must be an integer from 0 to ${Limits.MAX_STEPS}, got ${String(limit)}`
  }
  const delay = retries?.delay === undefined ? DEFAULTS.delay : Limits.durationMillis("retries.delay", retries.delay)
  if (typeof delay === "string") return delay
  const backoff = retries?.backoff ?? DEFAULTS.backoff
  if (backoff !== "constant" && backoff !== "linear" && backoff !== "exponential") {
    return `retries.backoff must be "constant", "linear" or "exponential", got ${String(backoff)}`
  }
  const timeout = config.timeout === undefined ? DEFAULTS.timeout : Limits.durationMillis("timeout", config.timeout)
  if (typeof timeout === "string") return timeout
  if (timeout === 0) return "timeout must be more than 0"
  return { attempts: limit + 1, delay, backoff, timeout }
}

/** The delay after failed attempt `attempt` (1-based). */
const delayAfter = (config: ResolvedConfig, attempt: number): number =>
  Math.min(
    Limits.MAX_DURATION_MS,
    config.backoff === "constant"
      ? config.delay
      : config.backoff === "linear"
      ? config.delay * attempt
      : config.delay * 2 ** (attempt - 1)
  )

/** What a run can do besides its own rows: read and create instances (children), and pause. */
export interface RunParts {
  readonly storage: StorageService
  readonly handle: () => TableHandle
  /** Creates a child instance in the caller's transaction; returns its key and whether it was created. */
  readonly createChild: (
    workflow: string,
    id: string,
    params: unknown,
    parent: string,
    now: number
  ) => Effect.Effect<{ readonly key: string; readonly pending: ReadonlyArray<PendingRecord> }, unknown>
  /** Whether a pause of the instance was asked while it runs here. */
  readonly pausing: (key: string) => boolean
  /** The error a handler sees for one of the library's (the promise face's classes). */
  readonly present: (error: unknown) => unknown
}

const never = <A>(): Promise<A> => new Promise<A>(() => undefined)

/** Runs one execution of an instance; succeeds with how it ended, fails with a `HandlerFailure` or a replay error. */
export const run = (parts: RunParts, handler: Handler, execution: Execution) =>
  Effect.gen(function*() {
    const { storage } = parts
    const runtime = yield* Effect.runtime<never>()
    const runPromise = Runtime.runPromise(runtime)
    const now = () => Runtime.runSync(runtime)(Clock.currentTimeMillis)
    const row = execution.row
    const key = execution.key
    const fence: StepsTable.Fence = { key, generation: execution.generation }
    yield* InstancesTable.markStarted(storage, execution, now())
    const stored = new Map<number, StepsTable.Step>()
    for (const step of yield* StepsTable.all(storage, key)) stored.set(step.seq, step)

    let position = 0
    let inFlight = 0
    let suspending = false
    let stale = false
    let failure: unknown = undefined
    const wakes: Array<number> = []
    const waiting = new Set<string>()
    let idle: () => void = () => undefined
    const settledIdle = new Promise<void>((resolve) => {
      idle = resolve
    })
    const checkIdle = () => {
      if ((suspending || failure !== undefined || stale) && inFlight === 0) idle()
    }
    /** The run will suspend: `at` is when (if) it must wake, `what` what else it waits for. */
    const awaits = (at: number | null, what: string | undefined) => {
      suspending = true
      if (at !== null) wakes.push(at)
      if (what !== undefined) waiting.add(what)
    }
    const suspend = <A>(at: number | null, what?: string): Promise<A> => {
      awaits(at, what)
      checkIdle()
      return never<A>()
    }
    // Thrown inside a tracked step to end it without settling its promise (a wait, a fenced write).
    const STOP = new Error("stopped")
    const write = async (step: StepsTable.Step): Promise<void> => {
      if (!(await runPromise(StepsTable.put(storage, fence, step)))) {
        // Terminated or restarted meanwhile: this run's work is fenced off; it ends as soon as it can.
        stale = true
        throw STOP
      }
    }
    /** Inside a tracked step: records the wait and stops the step there. */
    const halt = (at: number | null, what?: string): never => {
      awaits(at, what)
      throw STOP
    }
    const drainers: Array<() => void> = []
    const drained = (): Promise<void> => inFlight === 0 ? Promise.resolve() : new Promise((resolve) => drainers.push(resolve))
    const track = async <A>(body: () => Promise<A>): Promise<A> => {
      inFlight++
      let outcome: { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: unknown }
      try {
        outcome = { ok: true, value: await body() }
      } catch (error) {
        outcome = { ok: false, error }
      } finally {
        inFlight--
        if (inFlight === 0) drainers.splice(0).forEach((resolve) => resolve())
        checkIdle()
      }
      if (outcome.ok) return outcome.value
      if (outcome.error === STOP) return never<A>()
      throw outcome.error
    }
    const stopped = () => suspending || failure !== undefined || stale || execution.signal.aborted

    /** The next position, checked against what is stored there; `undefined` when the run must not go on. */
    const take = (name: unknown, kind: StepsTable.Kind): { readonly seq: number; readonly step: StepsTable.Step | undefined } | Error | undefined => {
      if (stopped()) return undefined
      const problem = Limits.stepNameProblem(name)
      if (problem !== undefined) return new TypeError(problem)
      const seq = ++position
      const step = stored.get(seq)
      if (step !== undefined && (step.name !== name || step.kind !== kind)) {
        const storedAs = `${step.kind} "${step.name}"`
        const asked = `${kind} "${String(name)}"`
        failure ??= new WorkflowReplayError({
          message: `Workflow replay diverged at step ${seq}: the instance stored ${storedAs} there, the handler asked for ${asked}`,
          position: seq,
          stored: storedAs,
          asked
        })
        checkIdle()
        return undefined
      }
      if (step === undefined && seq > Limits.MAX_STEPS) {
        return new RangeError(`A workflow instance takes at most ${Limits.MAX_STEPS} steps`)
      }
      return { seq, step }
    }
    // New work waits while a pause is asked: the instance is suspended as paused, and resumed from here.
    const pausedNow = () => parts.pausing(key)

    const doStep = (name: string, configOrCallback: unknown, maybeCallback?: unknown): Promise<unknown> => {
      const callback = (typeof configOrCallback === "function" ? configOrCallback : maybeCallback) as
        | ((context: WorkflowStepContext) => unknown)
        | undefined
      const config = typeof configOrCallback === "function" ? undefined : configOrCallback as WorkflowStepConfig | undefined
      const taken = take(name, "do")
      if (taken === undefined) return never()
      if (taken instanceof Error) return Promise.reject(taken)
      if (typeof callback !== "function") return Promise.reject(new TypeError(`step.do "${name}" needs a callback`))
      const resolved = resolveConfig(config)
      if (typeof resolved === "string") return Promise.reject(new RangeError(`step.do "${name}": ${resolved}`))
      const { seq, step } = taken
      if (step?.status === "completed") return Promise.resolve(Json.decode(step.result ?? "null"))
      if (step?.status === "failed") return Promise.reject(rebuilt(step.errorName, step.errorMessage))
      if (step?.status === "retrying" && step.wakeAt !== null && step.wakeAt > now()) return suspend(step.wakeAt)
      if (pausedNow()) return suspend(null)
      return track(async () => {
        const startedAt = step?.startedAt ?? now()
        const attempt = (step?.attempt ?? 0) + 1
        if (attempt > resolved.attempts) {
          // Its last attempt was cut short (the object was reset): it counts as failed.
          const error = rebuilt("WorkflowStepError", `Step "${name}" used its ${resolved.attempts} attempts (the last one did not end)`)
          await write({ ...base(seq, name, "do", startedAt), status: "failed", attempt: attempt - 1, errorName: error.name, errorMessage: error.message, endedAt: now() })
          throw error
        }
        await write({ ...base(seq, name, "do", startedAt), status: "running", attempt })
        if (pausedNow()) {
          // Paused while the attempt was being recorded: it has not begun, so it does not; its record is put back.
          if (step === undefined) await runPromise(StepsTable.remove(storage, fence, seq))
          else await write(step)
          return halt(null)
        }
        const outcome = await attemptOnce(callback, attempt, resolved.timeout, name)
        if (execution.signal.aborted) throw STOP
        let thrown: unknown
        let unstorable = false
        if (outcome._tag === "Success") {
          const stored = Limits.encoded(`The result of step "${name}"`, outcome.value)
          if ("text" in stored) {
            await write({ ...base(seq, name, "do", startedAt), status: "completed", attempt, result: stored.text, endedAt: now() })
            // The stored form is what every replay returns: hand back the same now.
            return Json.decode(stored.text)
          }
          // Retrying would run the side effect again for a result that still could not be stored.
          thrown = new TypeError(stored.problem)
          unstorable = true
        } else {
          thrown = outcome.error
        }
        const error = serializeError(thrown)
        if (unstorable || RetryPolicy.isNonRetryable(thrown) || attempt >= resolved.attempts) {
          await write({ ...base(seq, name, "do", startedAt), status: "failed", attempt, errorName: error.name, errorMessage: error.message, endedAt: now() })
          throw thrown
        }
        const wakeAt = now() + delayAfter(resolved, attempt)
        await write({ ...base(seq, name, "do", startedAt), status: "retrying", attempt, errorName: error.name, errorMessage: error.message, wakeAt })
        return halt(wakeAt)
      })
    }

    type Attempted = { readonly _tag: "Success"; readonly value: unknown } | { readonly _tag: "Failure"; readonly error: unknown }
    const attemptOnce = (
      callback: (context: WorkflowStepContext) => unknown,
      attempt: number,
      timeoutMs: number,
      name: string
    ): Promise<Attempted> => {
      const controller = new AbortController()
      const onAbort = () => controller.abort(execution.signal.reason)
      if (execution.signal.aborted) onAbort()
      else execution.signal.addEventListener("abort", onAbort, { once: true })
      const work = (async () => callback({ signal: controller.signal, attempt }))()
      // The attempt's time is the object's clock (TestClock in tests): a fiber sleeping on it.
      const timer = Runtime.runFork(runtime)(Effect.sleep(timeoutMs))
      const timedOut = new Promise<void>((resolve) => timer.addObserver((exit) => Exit.isSuccess(exit) && resolve()))
      return Promise.race([
        work.then((value): Attempted => ({ _tag: "Success", value }), (error: unknown): Attempted => ({ _tag: "Failure", error })),
        timedOut.then((): Attempted => {
          const error = rebuilt("WorkflowStepTimeoutError", `Workflow step "${name}" timed out after ${timeoutMs}ms`)
          controller.abort(error)
          return { _tag: "Failure", error }
        })
      ]).finally(() => {
        execution.signal.removeEventListener("abort", onAbort)
        Runtime.runFork(runtime)(Fiber.interrupt(timer))
      })
    }

    const sleepStep = (name: string, until: (at: number) => number | Error): Promise<void> => {
      const taken = take(name, "sleep")
      if (taken === undefined) return never()
      if (taken instanceof Error) return Promise.reject(taken)
      const { seq, step } = taken
      if (step?.status === "completed") return Promise.resolve()
      const at = now()
      if (step !== undefined) {
        if (step.wakeAt !== null && step.wakeAt > at) return suspend(step.wakeAt)
        return track(() => write({ ...step, status: "completed", endedAt: at }))
      }
      const wakeAt = until(at)
      if (wakeAt instanceof Error) return Promise.reject(wakeAt)
      if (pausedNow()) return suspend(null)
      if (wakeAt <= at) return track(() => write({ ...base(seq, name, "sleep", at), status: "completed", wakeAt, endedAt: at }))
      return track(async () => {
        await write({ ...base(seq, name, "sleep", at), status: "waiting", wakeAt })
        return halt(wakeAt)
      })
    }

    const waitStep = (name: string, options: { readonly type: string; readonly timeout?: unknown }): Promise<WorkflowReceivedEvent> => {
      const taken = take(name, "event")
      if (taken === undefined) return never()
      if (taken instanceof Error) return Promise.reject(taken)
      const { seq, step } = taken
      const type = options?.type
      if (step?.status === "completed") return Promise.resolve(received(step.result))
      if (step?.status === "failed") return Promise.reject(parts.present(timeoutError(name, String(type))))
      const typeProblem = Limits.eventTypeProblem("options.type", type)
      if (typeProblem !== undefined) return Promise.reject(new TypeError(`step.waitForEvent "${name}": ${typeProblem}`))
      const timeout = options.timeout === undefined ? DEFAULT_EVENT_TIMEOUT_MS : Limits.durationMillis("options.timeout", options.timeout)
      if (typeof timeout === "string") return Promise.reject(new RangeError(`step.waitForEvent "${name}": ${timeout}`))
      if (step === undefined && pausedNow()) return suspend(null)
      return track(async () => {
        const at = now()
        const startedAt = step?.startedAt ?? at
        const wakeAt = step?.wakeAt ?? at + timeout
        const taken = await runPromise(storage.transaction(Effect.gen(function*() {
          const event = yield* EventsTable.oldestUnconsumed(storage, key, type)
          if (event !== undefined) {
            const result = Json.encode({ type, payload: Json.decode(String(event.payload)), timestamp: Number(event.sent_at) })
            const put = yield* StepsTable.put(storage, fence, { ...base(seq, name, "event", startedAt), status: "completed", result, wakeAt, endedAt: at })
            if (put) yield* EventsTable.consume(storage, Number(event.id), seq)
            return put ? { _tag: "Received" as const, result } : { _tag: "Stale" as const }
          }
          if (wakeAt <= at) {
            const put = yield* StepsTable.put(storage, fence, {
              ...base(seq, name, "event", startedAt),
              status: "failed",
              wakeAt,
              errorName: "WorkflowTimeoutError",
              errorMessage: timeoutError(name, type).message,
              endedAt: at
            })
            return put ? { _tag: "TimedOut" as const } : { _tag: "Stale" as const }
          }
          if (step === undefined) {
            const put = yield* StepsTable.put(storage, fence, { ...base(seq, name, "event", startedAt), status: "waiting", wakeAt })
            if (!put) return { _tag: "Stale" as const }
          }
          return { _tag: "Wait" as const }
        })))
        switch (taken._tag) {
          case "Received":
            return received(taken.result)
          case "TimedOut":
            throw parts.present(timeoutError(name, type))
          case "Stale":
            stale = true
            throw STOP
          case "Wait":
            return halt(wakeAt, `event:${type}`)
        }
      })
    }

    const childStep = (name: string, workflow: string, options: { readonly id?: unknown; readonly params?: unknown } | undefined): Promise<unknown> => {
      const taken = take(name, "child")
      if (taken === undefined) return never()
      if (taken instanceof Error) return Promise.reject(taken)
      const { seq, step } = taken
      if (step?.status === "completed") return Promise.resolve(Json.decode(step.result ?? "null"))
      if (step?.status === "failed") return Promise.reject(parts.present(childError(step)))
      if (step === undefined && pausedNow()) return suspend(null)
      const parentId = String(row.instance_id)
      const childId = options?.id ?? `${parentId}-${seq}`
      return track(async () => {
        const at = now()
        let childKey = step?.result === undefined || step.result === null ? undefined : String(Json.decode(step.result))
        if (childKey === undefined) {
          const made = await runPromise(parts.handle().writePending(
            Effect.gen(function*() {
              const child = yield* parts.createChild(workflow, childId as string, options?.params, key, at)
              const put = yield* StepsTable.put(storage, fence, {
                ...base(seq, name, "child", at),
                status: "waiting",
                result: Json.encode(child.key)
              })
              return put ? child : undefined
            }),
            (child) => child?.pending ?? []
          ).pipe(Effect.either))
          if (made._tag === "Left") throw parts.present(made.left)
          if (made.right === undefined) {
            stale = true
            throw STOP
          }
          childKey = made.right.key
        }
        const child = await runPromise(InstancesTable.read(storage, childKey))
        const startedAt = step?.startedAt ?? at
        if (child?.status === "complete") {
          await write({ ...base(seq, name, "child", startedAt), status: "completed", result: String(child.output), endedAt: at })
          return Json.decode(String(child.output))
        }
        if (child === undefined || child.status === "failed" || child.status === "terminated") {
          const ended = {
            ...base(seq, name, "child", startedAt),
            status: "failed" as const,
            result: Json.encode(childKey),
            errorName: child === undefined ? "WorkflowNotFoundError" : String(child.last_error_name ?? "Error"),
            errorMessage: child === undefined ? "The child instance was deleted" : String(child.last_error ?? ""),
            endedAt: at
          }
          await write(ended)
          throw parts.present(childError({ ...ended, status: child === undefined ? "deleted" : String(child.status) }))
        }
        return halt(null, `child:${childKey}`)
      })
    }

    const step: WorkflowStep = {
      do: doStep as WorkflowStep["do"],
      sleep: (name, duration) => sleepStep(name, (at) => {
        const millis = Limits.durationMillis("duration", duration)
        return typeof millis === "string" ? new RangeError(`step.sleep "${name}": ${millis}`) : at + millis
      }),
      sleepUntil: (name, time) => sleepStep(name, () => {
        const at = time instanceof Date ? time.getTime() : time
        return typeof at === "number" && Number.isSafeInteger(at) && at >= 0
          ? at
          : new RangeError(`step.sleepUntil "${name}": time must be a Date or epoch milliseconds, got ${String(time)}`)
      }),
      waitForEvent: waitStep as WorkflowStep["waitForEvent"],
      child: childStep as WorkflowStep["child"]
    }

    const event: WorkflowEvent<unknown> = {
      payload: Json.decode(String(row.params)) as Readonly<unknown>,
      timestamp: new Date(Number(row.created_at)),
      instanceId: String(row.instance_id)
    }
    const aborted = new Promise<void>((resolve) => {
      if (execution.signal.aborted) resolve()
      else execution.signal.addEventListener("abort", () => resolve(), { once: true })
    })
    const handled = yield* Effect.promise(() =>
      Promise.race([
        (async () => handler(event, step))().then(
          (value) => ({ _tag: "Returned" as const, value }),
          (error: unknown) => ({ _tag: "Threw" as const, error })
        ),
        settledIdle.then(() => ({ _tag: "Idle" as const })),
        aborted.then(() => ({ _tag: "Aborted" as const }))
      ])
    )
    // Steps still in flight finish (their results stored) before the run ends: a side effect never outlives it.
    if (handled._tag !== "Aborted") yield* Effect.promise(drained)
    if (failure !== undefined) return yield* Effect.fail(failure)
    if (stale || handled._tag === "Aborted") return yield* Effect.fail(execution.signal.reason ?? new Error("The run was stopped"))
    if (handled._tag === "Threw") return yield* Effect.fail(new HandlerFailure(handled.error))
    if (handled._tag === "Returned") {
      const output = Limits.encoded("The workflow's output", handled.value)
      if ("problem" in output) return yield* Effect.fail(new HandlerFailure(new TypeError(output.problem)))
      return { _tag: "Complete", output: output.text } as InstancesTable.RunEnd
    }
    return {
      _tag: "Suspend",
      at: wakes.length === 0 ? null : Math.min(...wakes),
      waiting: [...waiting]
    } as InstancesTable.RunEnd
  })

const base = (seq: number, name: string, kind: StepsTable.Kind, startedAt: number): StepsTable.Step => ({
  seq,
  name,
  kind,
  status: "running",
  attempt: 0,
  result: null,
  errorName: null,
  errorMessage: null,
  wakeAt: null,
  startedAt,
  endedAt: null
})

const received = (result: string | null): WorkflowReceivedEvent => {
  const stored = Json.decode(result ?? "null") as { type: string; payload: unknown; timestamp: number }
  return { type: stored.type, payload: stored.payload, timestamp: new Date(stored.timestamp) }
}

const timeoutError = (name: string, type: string) =>
  new WorkflowTimeoutError({ message: `waitForEvent "${name}" timed out waiting for an event of type "${type}"`, step: name, type })

const childError = (step: Omit<StepsTable.Step, "status"> & { readonly status: string }) => {
  const key = step.result === null ? "" : String(Json.decode(step.result))
  const slash = key.indexOf("/")
  return new WorkflowChildError({
    message: `The child workflow ${key} ended without output (${step.errorName ?? "Error"}: ${step.errorMessage ?? ""})`,
    workflow: key.slice(0, slash),
    id: key.slice(slash + 1),
    status: step.status,
    cause: { name: step.errorName ?? "Error", message: step.errorMessage ?? "" }
  })
}
