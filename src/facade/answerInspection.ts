/**
 * `answerInspection(scheduler, request)`: an object's answer to an inspector (`durability/inspector`).
 * A function of its own, not a method of `DurabilityScheduler`, so a worker whose objects are never
 * inspected does not bundle the inspection protocol and its answering (about 4 KiB gzip of the quick
 * start's worker).
 */
import * as Effect from "effect/Effect"
import type { Answer } from "../inspection/protocol.js"
import * as Inspector from "../inspector/InspectorService.js"
import { type DurabilityScheduler, internals } from "./DurabilityScheduler.js"

/**
 * `answerInspection`'s options: `redact` rewrites stored payloads, results, progress, log lines and error
 * messages before they leave the object (see `RedactionTarget`).
 */
export type AnswerInspectionOptions = Inspector.InspectorOptions

/**
 * Answers an inspector's request about the object `scheduler` belongs to: delegate your object's
 * `inspect(request)` RPC method here (`return answerInspection(this.scheduler, request)`). Resolves
 * with `{ ok: true, value }` or `{ ok: false, failure }`, never rejects (a rejected RPC loses its
 * error's fields). Expose it only behind the inspector's handler, which checks who may ask.
 */
export const answerInspection = (
  scheduler: DurabilityScheduler,
  request: unknown,
  options: AnswerInspectionOptions = {}
): Promise<Answer> =>
  internals(scheduler).runtime.run(Effect.flatMap(Inspector.makeWith(options), (inspector) => inspector.answer(request))).catch(
    (): Answer => ({ ok: false, failure: { _tag: "Unavailable", message: "The object could not start (its storage failed); try again" } })
  )
