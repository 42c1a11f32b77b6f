/**
 * Durable steps: the first successful result of a named step inside a handler is stored in one
 * memo table shared by the capabilities (keyed by capability, record key, generation and step
 * name) and returned on every later attempt of that record instead of running the step again.
 *
 * The memos of a record go in the same statement that ends it: triggers on the capability's table
 * delete them when its row is deleted (purge, remove, retention), when its status becomes terminal,
 * and when its generation is replaced (a record run again from scratch). So no path of the engine or
 * of a capability has to remember them. A memo is written only while its record still exists with
 * that generation and is pending: a handler that outlived its record leaves nothing behind.
 *
 * The memo table's statements and schema are its owner's (`memoTable.ts`, re-exported here); this
 * module runs the steps over them, and ends the table (`migrate` drops it with the last revert).
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import { DurableStepError, type MigrationError, type StorageError } from "../shared/Errors.js"
import * as Migrations from "../engine/Migrations.js"
import type { StorageService } from "../engine/StorageService.js"
import * as Codec from "../shared/codec.js"
import * as Json from "../shared/json.js"
import * as Validate from "../shared/validate.js"
import * as MemoTable from "./memoTable.js"

export { MEMO_TABLE, memoSchema, type MemoTarget, type Records } from "./memoTable.js"

/**
 * `Migrations.migrate` as the library's capabilities call it: the memo table they share goes with
 * the history when the last recorded migration is reverted. Every capability migrates through it,
 * with steps or not, since any of them may be the last one reverted.
 */
export const migrate = (
  capability: string,
  migrations: ReadonlyArray<Migrations.Migration>,
  target?: string | null
): Effect.Effect<Migrations.MigrationResult, MigrationError | StorageError, StorageService> =>
  Migrations.migrate(capability, migrations, target, { sharedTables: [MemoTable.MEMO_TABLE] })

/** A durable step's options. */
export interface StepOptions<A, I> {
  /** Stores the step's result in this schema's encoded form (which must be JSON), decodes it on replay. */
  readonly result?: Schema.Schema<A, I> | undefined
}

/** One attempt's steps: `step` runs a named step once per record (per generation), and replays it after. */
export interface StepRunner {
  /**
   * The stored result of step `name` of this record, or `effect`'s result, stored before it is
   * returned. A failure is not stored. Fails with `DurableStepError` when the name (or an option) is
   * invalid or already used in this attempt, or the result cannot be stored (or no longer decodes).
   */
  readonly step: <A, E, R, I = A>(
    name: string,
    effect: Effect.Effect<A, E, R>,
    options?: StepOptions<A, I>
  ) => Effect.Effect<A, E | DurableStepError | StorageError, R>
}

/** True for a step's own failure (either face): terminal, as retrying would hit it again or re-run a side effect. */
export const isStepFailure = (error: unknown): boolean =>
  error instanceof DurableStepError ||
  (error instanceof Error && error.name === "DurableStepError")

const stepError = (
  step: string,
  reason: DurableStepError["reason"],
  message: string,
  cause?: unknown
) => new DurableStepError({ step, reason, message, ...(cause === undefined ? {} : { cause }) })

/** One attempt's step runner (it holds the set of names used in this attempt). */
export const runner = (
  storage: StorageService,
  o: MemoTable.Records & { readonly key: string; readonly generation: string }
): StepRunner => {
  // Names of the steps that succeeded or are running in this attempt. A failed step frees its name:
  // nothing was stored under it, so running it again (`Effect.retry`, a fallback) replays nothing wrong.
  let used: Set<string> | undefined
  const step = <A, E, R, I>(
    name: string,
    effect: Effect.Effect<A, E, R>,
    options?: StepOptions<A, I>
  ): Effect.Effect<A, E | DurableStepError | StorageError, R> =>
    Effect.suspend(() => {
      const problem = Validate.keyProblem("A step name", name)
      if (problem !== undefined) return Effect.fail(stepError(Validate.shown(name), "invalid", problem))
      const schema = (options as StepOptions<A, I> | null | undefined)?.result
      if (schema !== undefined && !Schema.isSchema(schema)) {
        return Effect.fail(
          stepError(name, "invalid", `options.result of step "${name}" must be a Schema, got ${Validate.shown(schema)}`)
        )
      }
      used ??= new Set()
      if (used.has(name)) {
        return Effect.fail(stepError(
          name,
          "duplicate",
          `Step "${name}" is used twice in one attempt: step names must be unique within a handler's run`
        ))
      }
      used.add(name)
      return Effect.onExit(
        run(name, effect, Codec.fromSchema(schema)),
        (exit) => Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => used?.delete(name))
      )
    })

  const run = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>, codec: Codec.Codec<A>) =>
    Effect.gen(function*() {
      const [memo] = yield* MemoTable.read(storage, o, o.key, o.generation, name)
      if (memo !== undefined) {
        const stored = yield* Effect.try({
          try: () => Json.decode(String(memo.value)),
          catch: (cause) => stepError(name, "undecodable", `The stored result of step "${name}" is not JSON`, cause)
        })
        return yield* Effect.mapError(codec.decode(stored), (cause) =>
          stepError(
            name,
            "undecodable",
            `The stored result of step "${name}" does not decode with its result schema: ${
              Codec.describeParseError("result", cause)
            }`,
            cause
          ))
      }
      const value = yield* effect
      const text = yield* Effect.mapError(Json.encodeStored(codec, value, "result"), (failure) =>
        failure._tag === "Schema"
          ? stepError(
            name,
            "unstorable",
            `The result of step "${name}" does not match its result schema: ${Codec.describeParseError("result", failure.cause)}`,
            failure.cause
          )
          : failure._tag === "NotJson"
          ? stepError(
            name,
            "unstorable",
            `The result of step "${name}" is not JSON-serializable: ${failure.reason} ` +
              "(give the step a result schema that encodes it to JSON)"
          )
          : stepError(name, "unstorable", `The result of step "${name}" ${Json.tooLarge(failure.bytes)}`))
      const now = yield* Clock.currentTimeMillis
      yield* MemoTable.write(storage, o, { key: o.key, generation: o.generation, name, value: text, createdAt: now }).pipe(
        Effect.catchIf((error) => error.message.includes("SQLITE_TOOBIG"), (error) =>
          Effect.fail(
            stepError(name, "unstorable", `The result of step "${name}" does not fit in a stored row: ${error.message}`, error)
          ))
      )
      return value
    })

  return { step: step as StepRunner["step"] }
}
