/**
 * "." and ".." are refused as the key of anything new (an operation id, a job id, a schedule key, a
 * handler or queue name): a URL path cannot hold them (its dot segments are removed, `%2e` too), so no
 * inspector route could reach the record. Nothing is written; other keys with dots are fine.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Jobs from "../../src/jobs/Jobs.js"
import * as Operations from "../../src/operations/Operations.js"
import * as Schedules from "../../src/schedules/Schedules.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

describe("dot keys", () => {
  it.scoped("are refused where keys are created, with nothing written", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({ send: Operations.operation({ handler: () => Effect.void }) }))
      const jobs = yield* object.run(Jobs.make({ work: Jobs.queue({ handler: () => Effect.void }) }))
      const schedules = yield* object.run(Schedules.make({ tick: Schedules.schedule({ handler: () => Effect.void }) }))
      const before = object.storage.statements.length
      for (const key of [".", ".."]) {
        expect(yield* Effect.flip(object.run(ops.send.register({ id: key, payload: null })))).toMatchObject({
          _tag: "InvalidInputError",
          field: "id",
          message: 'id cannot be "." or "..": a URL cannot address them (the inspector could not reach it)'
        })
        expect(yield* Effect.flip(object.run(jobs.work.add({ id: key, payload: null })))).toMatchObject({ _tag: "InvalidInputError", field: "id" })
        expect(yield* Effect.flip(object.run(schedules.tick.upsert(key, { everyMs: 3_600_000 })))).toMatchObject({ _tag: "InvalidInputError", field: "key" })
      }
      expect(object.storage.statements.length).toBe(before)
      // Dots inside a key are not dot segments.
      expect(yield* object.run(ops.send.register({ id: "v1.2", payload: null }))).toEqual({ id: "v1.2", status: "created" })
      expect(yield* object.run(jobs.work.add({ id: "...", payload: null }))).toMatchObject({ id: "...", deduplicated: false })
    }))

  it.scoped("are refused as handler and queue names", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const error = yield* Effect.flip(object.run(Operations.make({ "..": Operations.operation({ handler: () => Effect.void }) })))
      expect(error).toMatchObject({ _tag: "InvalidOptionError", message: expect.stringContaining('cannot be "." or ".."') })
      const queues = yield* Effect.flip(object.run(Jobs.make({ ".": Jobs.queue({ handler: () => Effect.void }) })))
      expect(queues).toMatchObject({ _tag: "InvalidOptionError", message: expect.stringContaining('cannot be "." or ".."') })
      expect(object.storage.statements).toEqual([])
    }))
})
