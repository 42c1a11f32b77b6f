/**
 * The named alarms' part in the engine: what the capability skeleton is given (names, policies'
 * errors, checks, purge) and how an occurrence runs, completes and is described.
 * @internal
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { Execution } from "../engine/DurableTable.js"
import { DurableAlarmTimeoutError, InvalidOptionError, NonRetryableError } from "../shared/Errors.js"
import * as Capability from "../engine/capability.js"
import type { StorageService } from "../engine/StorageService.js"
import * as Validate from "../shared/validate.js"
import * as AlarmsTable from "./alarmsTable.js"
import { payloadOf } from "./calls.js"
import { CAPABILITY, IDEMPOTENCY_PREFIX, migrations, TABLE } from "./schema.js"
import type { AnyAlarmDefinition } from "./types.js"

const isAlarmTimeout = (error: unknown) => error instanceof DurableAlarmTimeoutError

/** How the capability skeleton makes the named alarms' table (`R`: the handlers' requirements, from `context`). */
export const spec = <R>(
  definitions: Readonly<Record<string, AnyAlarmDefinition>>,
  options: Capability.CapabilityOptions,
  context: Context.Context<R>
): Capability.Spec<AnyAlarmDefinition, unknown> => {
  const definitionOfName = (name: string) => Capability.ownDefinition(definitions, name)
  return {
    kind: CAPABILITY,
    owner: "DurabilityAlarms",
    module: "NamedAlarms",
    table: TABLE,
    keyColumn: "name",
    nameColumn: "name",
    entityKind: "named_alarm",
    migrations,
    definitions,
    options,
    timeoutError: (name) => (timeoutMs) =>
      new DurableAlarmTimeoutError({ message: `Durable alarm "${name}" timed out after ${timeoutMs}ms`, timeoutMs }),
    // A timeout's outcome is unknown, so it is final unless the alarm opted into retrying it.
    isTerminal: (name) => definitionOfName(name)?.retryTimeouts === true ? undefined : isAlarmTimeout,
    check: (definitions) => {
      for (const [name, definition] of Object.entries(definitions)) {
        if (definition.retryTimeouts !== undefined && typeof definition.retryTimeouts !== "boolean") {
          return new InvalidOptionError({
            field: `methods.${name}.retryTimeouts`,
            kind: "type",
            message: `methods.${name}.retryTimeouts must be a boolean, got ${Validate.shown(definition.retryTimeouts)}`
          })
        }
      }
      return undefined
    },
    // One handler per name at a time: a new occurrence waits for a purged one that ignores its abort.
    releaseKeysOnPurge: false,
    purgeReason: () => new Error("Durable alarm was purged"),
    participant: ({ definitionOf, storage }) => ({
      run: run(definitionOf, context),
      complete: complete(storage),
      completesInOneStatement: true,
      describe: (row) => `named alarm "${String(row.name)}"`,
      entity: (row) => ({
        entityKind: "named_alarm",
        alarm: String(row.name),
        id: String(row.name),
        generation: String(row.generation_id)
      })
    })
  }
}

/** One attempt of an occurrence: its handler, with what it is called with. */
const run = <R>(definitionOf: (name: string) => AnyAlarmDefinition | undefined, context: Context.Context<R>) =>
(execution: Execution) =>
  Effect.suspend(() => {
    const name = execution.key
    const definition = definitionOf(name)
    if (definition === undefined) {
      return Effect.fail(new NonRetryableError({ message: `No named alarm handler registered for "${name}"` }))
    }
    const stored = payloadOf(execution.row)
    const codec = definition.payload
    // Checked when it was scheduled; one that no longer decodes (the schema changed) cannot be retried into shape.
    const decoded = stored === undefined || codec === undefined ? Effect.succeed(stored) : Effect.mapError(
      codec.decode(stored),
      (cause) => new NonRetryableError({ message: `The stored payload of named alarm "${name}" does not decode`, cause })
    )
    return Effect.flatMap(decoded, (payload) =>
      Capability.provideCaptured(
        definition.handler({
          name,
          payload,
          scheduledTime: Number(execution.row.scheduled_at),
          attempt: execution.attempt,
          isRetry: execution.attempt > 1,
          retryCount: execution.attempt - 1,
          idempotencyKey: `${IDEMPOTENCY_PREFIX}${execution.generation}`,
          signal: execution.signal,
          platform: execution.platform
        }) as Effect.Effect<unknown, unknown, R>,
        context
      ))
  })

// Success deletes only the occurrence that ran, never its replacement.
const complete = (storage: StorageService) => (execution: Execution) =>
  Effect.map(AlarmsTable.complete(storage, execution), (rows) => rows.length > 0)
