/**
 * What the workflow engine stores as text: a workflow's payload and result (through the workflow's
 * schemas) and the journal's exits (already encoded by `@effect/workflow`, so only their shape is
 * kept: values as JSON, defects as `{ name, message }`).
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import * as Workflow from "@effect/workflow/Workflow"

/** An exit whose values are already encoded: as stored in the journal. */
const EncodedExit = Schema.Exit({ success: Schema.Unknown, failure: Schema.Unknown, defect: Schema.Defect })
const EncodedExitJson = Schema.parseJson(EncodedExit)

/** A journal exit as stored text; a defect when it cannot be (a value JSON cannot hold). */
export const exitText = (exit: Exit.Exit<unknown, unknown>): Effect.Effect<string> =>
  Effect.orDie(Schema.encode(EncodedExitJson)(exit))

/** A journal exit from its stored text. */
export const exitOf = (text: string): Effect.Effect<Exit.Exit<unknown, unknown>> =>
  Effect.orDie(Schema.decode(EncodedExitJson)(text))

const resultSchema = (workflow: Workflow.Any) =>
  Schema.parseJson(Workflow.Result({ success: workflow.successSchema, error: workflow.errorSchema })) as unknown as Schema.Schema<
    Workflow.Result<unknown, unknown>,
    string
  >

/** A workflow's result as stored text. */
export const resultText = (workflow: Workflow.Any, result: Workflow.Result<unknown, unknown>) =>
  Schema.encode(resultSchema(workflow))(result)

/** A workflow's result from its stored text. */
export const resultOf = (workflow: Workflow.Any, text: string) => Schema.decode(resultSchema(workflow))(text)

const payloadSchema = (workflow: Workflow.Any) =>
  Schema.parseJson(workflow.payloadSchema as unknown as Schema.Schema<object, unknown>) as Schema.Schema<object, string>

/** A workflow's payload as stored text. */
export const payloadText = (workflow: Workflow.Any, payload: object) => Schema.encode(payloadSchema(workflow))(payload)

/** A workflow's payload from its stored text. */
export const payloadOf = (workflow: Workflow.Any, text: string) => Schema.decode(payloadSchema(workflow))(text)
