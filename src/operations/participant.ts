/**
 * The operations' part in the engine: what the capability skeleton is given (names, policies'
 * errors, purge) and how a call runs, completes and is described.
 * @internal
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Runtime from "effect/Runtime"
import type { Execution } from "../engine/DurableTable.js"
import { DurableAttemptTimeoutError, DurableResultSerializationError, NonRetryableError } from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import * as Json from "../shared/json.js"
import * as Plain from "../shared/plain.js"
import * as StepMemo from "../steps/memo.js"
import * as Steps from "../steps/Steps.js"
import type { StorageService } from "../engine/StorageService.js"
import * as CallsTable from "./callsTable.js"
import { CAPABILITY, migrations, TABLE } from "./schema.js"
import type { AnyOperationDefinition, DurableCall } from "./types.js"

const timeoutError = (operation: string) => (timeoutMs: number) =>
  new DurableAttemptTimeoutError({
    message: `Durable operation "${operation}" timed out after ${timeoutMs}ms`,
    timeoutMs
  })

const isSerializationFailure = (error: unknown): error is DurableResultSerializationError =>
  error instanceof DurableResultSerializationError

/** The error of a result that cannot be stored: terminal, so the side effect is not run again. */
const unstorable = (operation: string, detail: string, cause?: unknown) =>
  new DurableResultSerializationError({
    message: `The result of operation "${operation}" ${detail}`,
    ...(cause === undefined ? {} : { cause })
  })

/** How the capability skeleton makes the operations' table (`R`: the handlers' requirements, from `context`). */
export const spec = <R>(
  definitions: Readonly<Record<string, AnyOperationDefinition>>,
  options: Capability.CapabilityOptions,
  context: Context.Context<R>
): Capability.Spec<AnyOperationDefinition, string> => ({
  kind: CAPABILITY,
  owner: "Durability",
  module: "Operations",
  table: TABLE,
  keyColumn: "id",
  nameColumn: "operation",
  entityKind: "operation",
  migrations,
  definitions,
  options,
  timeoutError,
  // A result that cannot be stored must not re-run its side effect; nor must a step's.
  isTerminal: () => (error) => isSerializationFailure(error) || StepMemo.isStepFailure(error),
  releaseKeysOnPurge: true,
  purgeReason: () => new Error("Durable operation was purged"),
  participant: ({ definitionOf, storage }) => ({
    run: run(definitionOf, storage, context),
    complete: (execution, text, settledAt) =>
      CallsTable.complete(storage, execution, text, settledAt).pipe(
        Effect.map((updated) => updated.length > 0),
        // Payload and result together over the row limit: retrying cannot help (terminal, not re-run).
        Effect.catchIf((error) => error.message.includes("SQLITE_TOOBIG"), (error) =>
          Effect.fail(
            unstorable(String(execution.row.operation), `does not fit in a stored row with its payload: ${error.message}`, error)
          ))
      ),
    entity: (row) => ({
      entityKind: "operation",
      operation: String(row.operation),
      id: String(row.id),
      generation: String(row.generation_id)
    }),
    completesInOneStatement: true,
    completeMany: (completed) => CallsTable.completeMany(storage, completed),
    describe: (row) => `operation "${String(row.operation)}" (id "${String(row.id)}")`
  })
})

/** Why a result cannot be stored, as the operation's terminal error. */
const unstorableResult = (operation: string, failure: Json.Unstorable) => {
  const { cause, detail } = Json.unstorableDetail(failure)
  return unstorable(operation, detail, cause)
}

/** The promise face's handler, called directly: the call, its attempt's step runner and the engine's runtime. */
export type PlainHandler = (call: DurableCall<unknown>, steps: () => Steps.StepRunner, runtime: Runtime.Runtime<never>) => unknown

/** The attempt's step runner, made when the handler first asks for it. */
const stepsOf = (storage: StorageService, execution: Execution) => () =>
  StepMemo.runner(storage, {
    capability: CAPABILITY,
    current: CallsTable.IS_CURRENT,
    key: execution.key,
    generation: execution.generation
  })

/** A plain result's stored JSON, or why it cannot be stored. */
const storedResult = (operation: string, value: unknown): Exit.Exit<string, DurableResultSerializationError> =>
  Json.storedExit(value, "result", (failure) => unstorableResult(operation, failure))

/** One attempt of a call: succeeds with the result's stored JSON, encoded once and its size checked before `complete`. */
const run = <R>(
  definitionOf: (name: string) => AnyOperationDefinition | undefined,
  storage: StorageService,
  context: Context.Context<R>
) =>
(execution: Execution): Effect.Effect<string, unknown> => {
  const operation = String(execution.row.operation)
  const definition = definitionOf(operation)
  if (definition === undefined) {
    return Exit.fail(new NonRetryableError({ message: `No handler registered for operation "${operation}"` }))
  }
  const plain = Plain.plainOf<PlainHandler>(definition)
  // No schema either way: the plain handler is called here, and a plain value settles without a fiber.
  if (plain !== undefined && definition.payload.identity === true && definition.result.identity === true) {
    let returned: unknown
    try {
      returned = plain(callOf(execution, operation, Json.decode(String(execution.row.payload))), stepsOf(storage, execution), execution.runtime)
    } catch (error) {
      return Exit.fail(error)
    }
    return Plain.maybeThenable(returned)
      ? Effect.flatMap(Plain.awaitReturned(returned), (value) => storedResult(operation, value))
      : storedResult(operation, returned)
  }
  return Effect.gen(function*() {
    // The payload was valid when registered; if it no longer decodes, retrying cannot help.
    const payload = yield* Effect.mapError(
      definition.payload.decode(Json.decode(String(execution.row.payload))),
      (cause) => new NonRetryableError({ message: `The stored payload of operation "${operation}" does not decode`, cause })
    )
    const result = yield* Capability.provideCaptured(
      Effect.provideService(
        definition.handler(callOf(execution, operation, payload) as never) as Effect.Effect<unknown, unknown, R | Steps.CurrentCall>,
        Steps.CurrentCall,
        stepsOf(storage, execution)()
      ),
      context
    )
    // Over the row limit the completing write would fail, and the attempt (with its side effect)
    // would run again; `complete` also maps the storage's own refusal of payload + result.
    return yield* Effect.mapError(Json.encodeStored(definition.result, result, "result"), (failure) => unstorableResult(operation, failure))
  })
}

const callOf = (execution: Execution, operation: string, payload: unknown): DurableCall<unknown> => ({
  id: execution.key,
  operation,
  payload,
  attempt: execution.attempt,
  signal: execution.signal
})
