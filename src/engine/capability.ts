/**
 * The skeleton every capability (operations, named alarms, and those to come) is built on: its
 * handler definitions checked and turned into attempt policies, its migrations applied when they
 * are not current, its table attached to the scheduler, settlement watchers, and purge.
 * @internal
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { AttemptLimits, AttemptPolicy, DurableTable, TableHandle } from "./DurableTable.js"
import { InvalidOptionError, type InvalidInputError, type MigrationError, type ParticipantConflictError, type StorageError } from "../shared/Errors.js"
import * as Lifecycle from "./Lifecycle.js"
import * as Migrations from "./Migrations.js"
import * as Scheduler from "./Scheduler.js"
import { type Row, StorageService } from "./StorageService.js"
import * as Policy from "./policy.js"
import * as Validate from "../shared/validate.js"
import * as Watchers from "./watchers.js"

/**
 * Runs a handler with the services its capability was made with. Providing a context costs a
 * fiber-ref update per attempt; when the fiber already runs with exactly that context (the usual
 * case: one runtime per object) it is skipped.
 */
export const provideCaptured = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  context: Context.Context<R>
): Effect.Effect<A, E> =>
  Effect.contextWithEffect((current: Context.Context<never>) =>
    (current as Context.Context<unknown>) === context
      ? (effect as Effect.Effect<A, E>)
      : Effect.provide(effect, context)
  )

/** Passes every event to the settlement watchers, then to the user's hook. */
const observe = (watchers: Watchers.Watchers, hook: Lifecycle.LifecycleHook | undefined): Lifecycle.LifecycleHook => {
  const observer: Lifecycle.LifecycleHook = (event) => {
    const settles = event.type === "terminal" ||
      (event.type === "attempt_settled" && event.outcome !== "retry_scheduled")
    if (settles && "id" in event) watchers.notify(event.id)
    return hook?.(event)
  }
  // With no hook of the user's (or one that hears only settles), only settles are listened for: the other
  // events need not be built.
  return !Lifecycle.hears(hook) ? Lifecycle.settlesOnly(observer) : observer
}

/**
 * Handler names that would shadow a member of the helper (or make it a thenable, which `await`
 * would try to unwrap). `DurabilityAlarms` also has `get(name)`, `cancel(name)` and `list()`.
 */
const RESERVED: Readonly<Record<string, ReadonlySet<string>>> = (() => {
  const base = ["constructor", "alarm", "purgeBefore", "__proto__", "prototype", "then"]
  return {
    Durability: new Set(base),
    DurabilityAlarms: new Set([...base, "get", "cancel", "list"]),
    DurabilityJobs: new Set([...base, "flow", "queues", "event", "bulk"]),
    DurabilitySchedules: new Set([...base, "enqueue"]),
    DurabilityWorkflows: new Set(base)
  }
})()

/** What is wrong with a handler map, if anything: `reserved` marks a name the helper reserves. */
export interface HandlerMapProblem {
  readonly error: InvalidOptionError
  readonly reserved: boolean
}

/**
 * The one check of a handler map, for the Effect definitions and the promise helpers alike: an
 * object keyed by strings (a symbol-keyed handler could never be called), valid names that shadow
 * nothing of `owner`, and a function for each (`handlerOf` reads it from the entry).
 */
export const handlerMapProblem = (
  owner: string,
  handlers: unknown,
  handlerOf: (entry: unknown) => unknown,
  field = "handlers"
): HandlerMapProblem | undefined => {
  const problem = (at: string, message: string, reserved = false): HandlerMapProblem => ({
    error: new InvalidOptionError({ field: at, kind: "type", message }),
    reserved
  })
  if (typeof handlers !== "object" || handlers === null || Array.isArray(handlers)) {
    return problem(field, `${field} must be an object`)
  }
  if (Object.getOwnPropertySymbols(handlers).length > 0) {
    return problem(field, `${field} must be keyed by strings (a symbol-keyed handler could never be called)`)
  }
  for (const [name, entry] of Object.entries(handlers)) {
    const badName = Validate.newKeyProblem("name", name)
    if (badName !== undefined) {
      return problem(field, `The ${field === "handlers" ? "handler" : "queue"} name ${JSON.stringify(name.slice(0, 40))} is invalid: ${badName}`)
    }
    if (RESERVED[owner]?.has(name) === true) return problem(`${field}.${name}`, `"${name}" is reserved by ${owner}`, true)
    if (typeof handlerOf(entry) !== "function") return problem(`${field}.${name}`, `${field}.${name}${field === "handlers" ? "" : ".handler"} must be a function`)
  }
  return undefined
}

const attemptPolicy = (
  resolved: Policy.Resolved,
  timeoutError: (timeoutMs: number) => unknown,
  isTerminal: ((error: unknown) => boolean) | undefined
): AttemptPolicy => ({
  maxAttempts: resolved.maxAttempts,
  schedule: resolved.schedule,
  attemptTimeoutMs: resolved.attemptTimeoutMs,
  timeoutError,
  isTerminal
})

/** The definition registered under `name`, never one inherited from `Object.prototype`. */
export const ownDefinition = <D>(definitions: Readonly<Record<string, D>>, name: string): D | undefined =>
  Object.prototype.hasOwnProperty.call(definitions, name) ? definitions[name] : undefined

export interface CapabilityOptions extends Policy.ExecutionOptions {
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/** How a capability differs from the others. */
export interface Spec<D extends Policy.ExecutionOptions & { readonly handler: unknown }, A> {
  /** Its migrations' capability name and its participant kind, e.g. "operations". */
  readonly kind: string
  /** The promise helper, named in messages: "Durability". */
  readonly owner: string
  /** The Effect module, named in spans: "Operations". */
  readonly module: string
  readonly table: string
  readonly keyColumn: string
  /** The column that names a row's definition (its policy and attempt limit come from it). */
  readonly nameColumn: string
  readonly entityKind: string
  /** The options field of the definitions, in messages (default "methods"; job queues: "queues"). */
  readonly definitionsField?: string | undefined
  readonly migrations: ReadonlyArray<Migrations.Migration>
  readonly definitions: Readonly<Record<string, D>>
  readonly options: CapabilityOptions
  readonly timeoutError: (name: string) => (timeoutMs: number) => unknown
  readonly isTerminal: (name: string) => ((error: unknown) => boolean) | undefined
  /** Further checks of the definitions, before anything touches storage. */
  readonly check?: ((definitions: Readonly<Record<string, D>>) => InvalidOptionError | undefined) | undefined
  /** Purge: whether a deleted key can run a new record at once (see `TableHandle.abort`). */
  readonly releaseKeysOnPurge: boolean
  readonly purgeReason: () => Error
  /** How its records run, complete and read. */
  readonly participant: (parts: {
    readonly storage: StorageService
    readonly definitionOf: (name: string) => D | undefined
  }) => Pick<DurableTable<A>, "run" | "complete" | "describe" | "entity"> & Partial<
    Pick<DurableTable<A>, "completesInOneStatement" | "completeMany" | "dispatch" | "holds" | "admission" | "settled" | "timers" | "leases">
  >
}

export interface Capability<D> {
  readonly storage: StorageService
  readonly handle: TableHandle
  readonly watchers: Watchers.Watchers
  readonly definitionOf: (name: string) => D | undefined
  /** Deletes every record created before `before` (strict); returns how many. */
  readonly purgeBefore: (before: number | Date) => Effect.Effect<number, InvalidInputError | StorageError>
}

export const make = <D extends Policy.ExecutionOptions & { readonly handler: unknown }, A>(
  spec: Spec<D, A>
): Effect.Effect<
  Capability<D>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Scheduler | StorageService
> =>
  Effect.gen(function*() {
    const field = spec.definitionsField ?? "methods"
    const problem = handlerMapProblem(
      spec.owner,
      spec.definitions,
      (entry) => (entry as { handler?: unknown } | null)?.handler,
      field === "methods" ? "handlers" : field
    )
    if (problem !== undefined) return yield* problem.error
    const base = yield* Policy.resolve("", spec.options, Policy.defaults)
    const hook = (spec.options as { readonly onLifecycleEvent?: unknown } | undefined)?.onLifecycleEvent
    if (hook !== undefined && typeof hook !== "function") {
      return yield* new InvalidOptionError({
        field: "onLifecycleEvent",
        kind: "type",
        message: `onLifecycleEvent must be a function, got ${Validate.shown(hook)}`
      })
    }
    const policies = new Map<string, AttemptPolicy>()
    for (const [name, definition] of Object.entries(spec.definitions)) {
      const resolved = yield* Policy.resolve(`${field}.${name}.`, definition, base)
      policies.set(name, attemptPolicy(resolved, spec.timeoutError(name), spec.isTerminal(name)))
    }
    const checked = spec.check?.(spec.definitions)
    if (checked !== undefined) return yield* checked
    // The policy of a stored row whose name has no definition any more (it fails as non-retryable).
    const fallback = (name: string) => attemptPolicy(base, spec.timeoutError(name), spec.isTerminal(name))
    const limits: AttemptLimits = {
      column: spec.nameColumn,
      byValue: new Map([...policies].map(([name, policy]) => [name, policy.maxAttempts])),
      otherwise: base.maxAttempts
    }

    const storage = yield* StorageService
    if (!(yield* Migrations.isCurrent(spec.kind, spec.migrations))) yield* Migrations.migrate(spec.kind, spec.migrations)
    const watchers = Watchers.make()
    const definitionOf = (name: string) => ownDefinition(spec.definitions, name)
    const nameOf = (row: Row) => String(row[spec.nameColumn])
    const handle = yield* (yield* Scheduler.Scheduler).attach<A>({
      kind: spec.kind,
      table: spec.table,
      keyColumn: spec.keyColumn,
      policy: (row) => policies.get(nameOf(row)) ?? fallback(nameOf(row)),
      attemptLimits: limits,
      ...spec.participant({ storage, definitionOf }),
      onEvent: observe(watchers, spec.options.onLifecycleEvent)
    })

    // Deletes first, then aborts the executions of the deleted records in this isolate (best effort:
    // abort is cooperative).
    const purgeBefore = (before: number | Date) =>
      Effect.gen(function*() {
        const cutoff = yield* Validate.timestamp("timestamp", before)
        const deleted = yield* handle.write(
          storage.exec(`DELETE FROM ${spec.table} WHERE created_at < ? RETURNING ${spec.keyColumn} AS key`, [cutoff])
        )
        const keys = new Set(deleted.map((row) => String(row.key)))
        yield* handle.abort((key) => keys.has(key), spec.purgeReason(), { release: spec.releaseKeysOnPurge })
        for (const key of keys) watchers.notify(key)
        yield* handle.emit((timestamp) => ({
          type: "purged",
          entityKind: spec.entityKind,
          timestamp,
          before: cutoff,
          count: deleted.length
        }))
        return deleted.length
      }).pipe(Effect.withSpan(`${spec.module}.purgeBefore`))

    return { storage, handle, watchers, definitionOf, purgeBefore }
  })
