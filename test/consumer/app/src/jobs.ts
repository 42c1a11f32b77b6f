/**
 * The Effect face, free of any Workers import so plain Node tests can load it: one operation with
 * Schema payload and result, one named alarm, and the application service they need.
 */
import { Context, Effect, Schema } from "effect"
import { Errors, NamedAlarms, Operations } from "durability/effect"

export class Renderer extends Context.Tag("app/Renderer")<Renderer, {
  readonly render: (imageId: string, width: number) => Effect.Effect<string, Error>
  readonly sweep: (now: number) => Effect.Effect<number>
}>() {}

export const operations = {
  resize: Operations.operation({
    payload: Schema.Struct({ imageId: Schema.NonEmptyString, width: Schema.Int.pipe(Schema.between(16, 4096)) }),
    result: Schema.Struct({ key: Schema.String }),
    retries: { maxAttempts: 4, delay: (attempt) => attempt * 1_000 },
    handler: (call) =>
      Effect.gen(function*() {
        if (call.payload.imageId.startsWith("gone-")) {
          return yield* new Errors.NonRetryableError({ message: `${call.payload.imageId} was deleted` })
        }
        const renderer = yield* Renderer
        const key = yield* renderer.render(call.payload.imageId, call.payload.width)
        return { key }
      })
  })
}

export const alarms = {
  sweep: NamedAlarms.alarm({
    handler: (info) => Effect.flatMap(Renderer, (renderer) => renderer.sweep(info.scheduledTime))
  })
}

/** Both capabilities, made on whatever scheduler the environment provides (workerd or the test object). */
export const makeJobs = Effect.all({ ops: Operations.make(operations), alarms: NamedAlarms.make(alarms) })
