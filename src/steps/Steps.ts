/**
 * Durable steps inside operation and job handlers: `Steps.step(name, effect)` runs `effect` once per
 * call and stores its first successful result; every later attempt of that call (a retry after a
 * later failure, a run after an eviction) gets the stored result back without running `effect`.
 *
 * A step's failure is not stored: the attempt fails as usual, and the next attempt runs the step
 * again. Step names are unique within one attempt. Results are stored as JSON (or in the encoded
 * form of the step's `result` schema), with the same size limit as a handler's result. The memos
 * of a call are deleted in the transaction that completes it, fails it for good or deletes it, and
 * when the call is run again from scratch (a new generation).
 *
 * `Operations.step` and `Jobs.step` are this function. The handlers of operations and job queues
 * get `CurrentCall` for each attempt; it is not part of their requirements.
 * @packageDocumentation
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import type { DurableStepError, StorageError } from "../shared/Errors.js"
import type { IsJson } from "../shared/jsonType.js"
import type { StepOptions, StepRunner } from "./memo.js"

export type { StepOptions, StepRunner } from "./memo.js"

/** The attempt a handler runs in, as its steps see it. Provided by operations and job queues. */
export class CurrentCall extends Context.Tag("durability/Steps/CurrentCall")<CurrentCall, StepRunner>() {}

/** Without a schema, the step's result itself is stored: a compile error unless it is JSON. */
export type JsonResult<A> = IsJson<A> extends true ? unknown
  : { readonly "a step's result must be JSON (no Date, Map, Set, BigInt, function or Error): give options.result, a Schema that encodes it": never }

/** With a schema, its encoded form is stored: a compile error unless that is JSON. */
export type JsonEncoded<I> = IsJson<I> extends true ? unknown
  : { readonly "the encoded form of a step's result schema must be JSON": never }

/**
 * Runs `effect` as the step `name` of the current call, or returns the result stored by an earlier
 * attempt of the call. Fails with `DurableStepError` (terminal once it ends the handler) when the
 * name is invalid or used twice in one attempt, or the result cannot be stored.
 */
export const step: {
  <A, I, E, R>(
    name: string,
    effect: Effect.Effect<A, E, R>,
    options: { readonly result: Schema.Schema<A, I> } & JsonEncoded<NoInfer<I>>
  ): Effect.Effect<A, E | DurableStepError | StorageError, R | CurrentCall>
  <A, E, R>(
    name: string,
    effect: Effect.Effect<A, E, R> & JsonResult<NoInfer<A>>,
    options?: { readonly result?: undefined }
  ): Effect.Effect<A, E | DurableStepError | StorageError, R | CurrentCall>
} = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>, options?: StepOptions<A, unknown>) =>
  Effect.flatMap(CurrentCall, (current) => current.step(name, effect, options))
