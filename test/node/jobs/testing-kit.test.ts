/**
 * "Testing your jobs" (docs/testing.md): a user's test of a job queue with `durability/testing`, under
 * TestClock, through the public entry points only. Keep this file and that page's example alike.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema, TestClock } from "effect"
import { DurabilityJobs, type DurableJob } from "durability"
import { Jobs } from "durability/effect"
import { TestDurability, TestObjectState } from "durability/testing"

class Mailer extends Context.Tag("app/Mailer")<Mailer, {
  readonly send: (to: string, idempotencyKey: string) => Effect.Effect<string, Error>
}>() {}

// A fake provider: refuses every "bounce" address, records the others.
const fakeMailer = (sent: Array<string>) =>
  Layer.succeed(Mailer, {
    send: (to) =>
      Effect.suspend(() => {
        if (to.startsWith("bounce")) return Effect.fail(new Error(`550 ${to} unavailable`))
        sent.push(to)
        return Effect.succeed(`msg-${sent.length}`)
      })
  })

const queues = {
  email: Jobs.queue({
    payload: Schema.Struct({ tenant: Schema.String, to: Schema.String }),
    groupRateLimit: { key: (payload) => payload.tenant, capacity: 2, refillPerSecond: 1 },
    retries: { maxAttempts: 3, delay: (attempt) => attempt * 1_000 },
    deadLetter: true,
    handler: (job) =>
      Effect.gen(function*() {
        yield* Jobs.log(`attempt ${job.attempt} to ${job.payload.to}`)
        const mailer = yield* Mailer
        return yield* mailer.send(job.payload.to, job.idempotencyKey)
      })
  })
}

describe("email queue", () => {
  it.scoped("holds a tenant to its rate limit, retries, dead-letters a bounce", () =>
    Effect.gen(function*() {
      const sent: Array<string> = []
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Effect.provide(Jobs.make(queues), fakeMailer(sent)))
      yield* object.run(jobs.email.addBulk(["ann", "bob", "cat", "bounce-dan"].map((name) => ({
        id: name,
        payload: { tenant: "acme", to: `${name}@example.com` }
      }))))

      yield* TestClock.adjust(0) // the tenant's bucket holds 2 tokens: two start at once
      expect(sent).toEqual(["ann@example.com", "bob@example.com"])
      // The next token is 1 s away: the others wait for it (no polling), as `delayed`.
      expect(yield* object.run(jobs.email.get("cat"))).toMatchObject({ state: "delayed", runAt: 1_000 })

      yield* TestClock.adjust("1 second") // one token: cat
      expect(sent).toHaveLength(3)
      yield* TestClock.adjust("4 seconds") // bounce-dan: attempts at 2 s, 3 s and 5 s, all refused
      expect(yield* object.run(jobs.email.get("bounce-dan"))).toMatchObject({ state: "failed", attempt: 3 })
      expect((yield* object.run(jobs.email.deadLetters.list())).items)
        .toMatchObject([{ id: "bounce-dan", attempts: 3, error: { message: "550 bounce-dan@example.com unavailable" } }])
      expect((yield* object.run(jobs.email.logs("bounce-dan"))).items.map((line) => line.at))
        .toEqual([2_000, 3_000, 5_000])
      expect(yield* object.run(jobs.email.counts)).toMatchObject({ completed: 3, failed: 1, waiting: 0, delayed: 0 })
    }))
})

describe("email queue, promise face", () => {
  it("DurabilityJobs on a TestObjectState: its clock moves with advance", async () => {
    const state = await TestObjectState.make()
    const jobs = new DurabilityJobs({
      context: state.context,
      queues: {
        email: {
          retries: { maxAttempts: 3, delay: () => 60_000 },
          handler: async (job: DurableJob<{ readonly to: string }>) => {
            if (job.attempt === 1) throw new Error("provider busy")
            return `sent to ${job.payload.to}`
          }
        }
      }
    })
    await jobs.email.add({ id: "welcome", payload: { to: "ann@example.com" } })
    await state.advance(0)
    expect(await jobs.email.get("welcome")).toMatchObject({ state: "delayed", attempt: 1, runAt: 60_000 })
    await state.advance("1 minute")
    expect(await jobs.email.get("welcome")).toMatchObject({ state: "completed", attempt: 2, result: "sent to ann@example.com" })
  })
})
