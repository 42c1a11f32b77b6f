import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jobs from "../../../src/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"

describe("Jobs smoke", () => {
  it.effect("adds, runs, completes", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<unknown> = []
      const jobs = yield* object.run(Jobs.make({
        email: Jobs.queue({
          handler: (job: Jobs.JobContext<{ to: string }>) =>
            Effect.gen(function*() {
              seen.push(job.payload)
              yield* Jobs.progress(40)
              yield* Jobs.log("rendered")
              return { messageId: "m1" }
            })
        })
      }))
      const added = yield* object.run(jobs.email.add({ payload: { to: "a@b" } }))
      yield* TestClock.adjust(0)
      expect(seen).toEqual([{ to: "a@b" }])
      const info = yield* object.run(jobs.email.get(added.id))
      expect(info).toMatchObject({ state: "completed", result: { messageId: "m1" }, progress: 40, attempt: 1 })
      const logs = yield* object.run(jobs.email.logs(added.id))
      expect(logs.items.map((l) => l.message)).toEqual(["rendered"])
    }))
})
