/**
 * A queue's own concurrency, inside the scheduler's shared permits (`alarmConcurrency`): a queue
 * never runs more than its limit, and a full queue holds no permit another queue could use.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as PermitSemaphore from "../../../src/engine/PermitSemaphore.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { gates, type TestObject } from "./support.js"

/** Two queues whose handlers wait for their gate, counting how many of each run at once. */
const setup = (object: TestObject) =>
  Effect.gen(function*() {
    const held = gates()
    const running = { limited: 0, free: 0 }
    const most = { limited: 0, free: 0 }
    const started: Array<string> = []
    const handler = (queue: "limited" | "free") => (job: Jobs.JobContext<null>) =>
      Effect.gen(function*() {
        running[queue]++
        most[queue] = Math.max(most[queue], running[queue])
        started.push(job.id)
        yield* held.wait(job.id).pipe(Effect.ensuring(Effect.sync(() => running[queue]--)))
      })
    const jobs = yield* object.run(Jobs.make({
      limited: Jobs.queue({ concurrency: 2, handler: handler("limited") }),
      free: Jobs.queue({ handler: handler("free") })
    }))
    return { jobs, held, running, most, started }
  })

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, payload: null }))

describe("queue concurrency", () => {
  it.scoped("a queue of concurrency 2 never runs 3 at once; another queue takes the permits it leaves", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 4 } })
      const { held, jobs, most, running, started } = yield* setup(object)
      const permits = yield* object.run(PermitSemaphore.PermitSemaphore)
      yield* object.run(jobs.limited.addBulk(ids("L", 6)))
      yield* TestClock.adjust(0)
      expect(running).toEqual({ limited: 2, free: 0 })
      // The full queue holds two permits, not four.
      expect(yield* permits.available).toBe(2)
      yield* object.run(jobs.free.addBulk(ids("F", 3)))
      yield* TestClock.adjust(0)
      expect(running).toEqual({ limited: 2, free: 2 })
      expect(yield* permits.available).toBe(0)
      expect(yield* object.run(jobs.limited.counts)).toMatchObject({ active: 2, waiting: 4 })
      expect(yield* object.run(jobs.free.counts)).toMatchObject({ active: 2, waiting: 1 })

      // The permits are FIFO across queues: F2 asked for one before L2 had its slot, so L0's permit goes to F2.
      yield* held.open("L0")
      yield* TestClock.adjust(0)
      expect(running).toEqual({ limited: 1, free: 3 })
      expect(started).toEqual(["L0", "L1", "F0", "F1", "F2"])
      // The next permit goes to L2, which holds its slot and waits for nothing else.
      yield* held.open("F0")
      yield* TestClock.adjust(0)
      expect(running).toEqual({ limited: 2, free: 2 })
      expect(started).toEqual(["L0", "L1", "F0", "F1", "F2", "L2"])
      for (const id of ["L1", "L2", "L3", "L4", "L5", "F1", "F2"]) {
        yield* held.open(id)
        yield* TestClock.adjust(0)
        expect(running.limited).toBeLessThanOrEqual(2)
        expect(running.limited + running.free).toBeLessThanOrEqual(4)
      }
      expect(most).toEqual({ limited: 2, free: 3 })
      expect(running).toEqual({ limited: 0, free: 0 })
      expect(started).toHaveLength(9)
      expect(yield* object.run(jobs.limited.counts)).toMatchObject({ completed: 6 })
    }))

  it.scoped("in an alarm pass, a full queue waiting for its slot does not hold up another queue", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 4 } })
      const { jobs, most, running, started } = yield* setup(object)
      // Both become due in the same alarm pass, the limited queue's first in start order.
      yield* object.run(jobs.limited.addBulk(ids("L", 5).map((job) => ({ ...job, delayMs: 60_000 }))))
      yield* object.run(jobs.free.addBulk(ids("F", 3).map((job) => ({ ...job, delayMs: 60_000 }))))
      expect(object.storage.alarmAt).toBe(60_000)
      yield* TestClock.adjust(59_999)
      expect(running).toEqual({ limited: 0, free: 0 })
      yield* TestClock.adjust(1)
      expect(running).toEqual({ limited: 2, free: 2 })
      expect(started).toEqual(["L0", "L1", "F0", "F1"])
      expect(most.limited).toBe(2)
    }))
})
