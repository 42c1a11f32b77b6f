/**
 * A job's states as `get`, `list({ states })` and `counts()` report them, against the stored rows:
 * waiting, delayed, active (executing here now), waiting-children, completed, failed, canceled.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { NonRetryableError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { gates, jobRow, type TestObject } from "./support.js"

const makeQueues = (object: TestObject, held: ReturnType<typeof gates>) =>
  object.run(Jobs.make({
    work: Jobs.queue({
      concurrency: 1,
      handler: (job: Jobs.JobContext<string>) =>
        job.id.startsWith("hold")
          ? Effect.as(held.wait(job.id), "held")
          : job.id.startsWith("fail")
          ? Effect.fail(new NonRetryableError({ message: "no" }))
          : Effect.succeed(`done ${job.payload}`)
    })
  }))

describe("job states", () => {
  it.scoped("every state through get, list({ states }) and counts(), matching the stored status", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const held = gates()
      const jobs = yield* makeQueues(object, held)
      const add = (id: string, extra: Partial<Jobs.AddOptions<string>> = {}) =>
        object.run(jobs.work.add({ id, payload: id, ...extra }))

      expect(yield* add("done")).toEqual({ id: "done", state: "waiting", deduplicated: false })
      yield* TestClock.adjust(0)
      yield* add("fail")
      yield* TestClock.adjust(0)
      yield* add("hold")
      yield* TestClock.adjust(0)
      // The queue's one slot is taken: these wait.
      yield* add("wait")
      expect(yield* add("later", { delayMs: 60_000 })).toEqual({ id: "later", state: "delayed", deduplicated: false })
      yield* add("cancel")
      expect(yield* object.run(jobs.work.cancel("cancel", "not needed"))).toBe(true)
      yield* object.run(jobs.flow({ queue: "work", id: "parent", payload: "p", children: [{ queue: "work", id: "child", payload: "c" }] }))
      yield* TestClock.adjust(0)

      const expected: Record<string, Jobs.JobState> = {
        done: "completed",
        fail: "failed",
        hold: "active",
        wait: "waiting",
        later: "delayed",
        cancel: "canceled",
        parent: "waiting-children",
        child: "waiting"
      }
      const stored: Record<Jobs.JobState, string> = {
        waiting: "pending",
        delayed: "pending",
        active: "pending",
        "waiting-children": "waiting_children",
        completed: "completed",
        failed: "failed",
        canceled: "canceled"
      }
      for (const [id, state] of Object.entries(expected)) {
        expect((yield* object.run(jobs.work.get(id)))?.state, id).toBe(state)
        expect((yield* jobRow(object, "work", id))?.status, id).toBe(stored[state])
      }
      expect(yield* object.run(jobs.work.get("hold"))).toMatchObject({ attempt: 1, startedAt: 0 })
      expect(yield* object.run(jobs.work.get("done"))).toMatchObject({
        id: "done",
        queue: "work",
        payload: "done",
        result: "done done",
        attempt: 1,
        priority: 0,
        progress: 0,
        createdAt: 0,
        runAt: 0,
        startedAt: 0,
        finishedAt: 0
      })
      expect(yield* object.run(jobs.work.get("fail"))).toMatchObject({ error: { name: "NonRetryableError", message: "no" } })
      expect(yield* object.run(jobs.work.get("later"))).toMatchObject({ runAt: 60_000 })
      expect(yield* object.run(jobs.work.get("parent"))).toMatchObject({ children: [{ queue: "work", id: "child", state: "waiting" }] })
      expect(yield* object.run(jobs.work.get("child"))).toMatchObject({ parentId: "parent", parentQueue: "work" })
      expect(yield* object.run(jobs.work.get("missing"))).toBeUndefined()

      expect(yield* object.run(jobs.work.counts)).toEqual({
        waiting: 2,
        delayed: 1,
        active: 1,
        "waiting-children": 1,
        completed: 1,
        failed: 1,
        canceled: 1
      })
      const ids = (states: ReadonlyArray<Jobs.JobState>) =>
        Effect.map(object.run(jobs.work.list({ states })), (page) => page.items.map((item) => item.id))
      expect(yield* ids(["waiting"])).toEqual(["wait", "child"])
      expect(yield* ids(["active"])).toEqual(["hold"])
      expect(yield* ids(["delayed", "waiting-children"])).toEqual(["later", "parent"])
      expect(yield* ids(["completed", "failed", "canceled"])).toEqual(["done", "fail", "cancel"])
      expect((yield* object.run(jobs.work.list())).items.map((item) => item.id)).toEqual(Object.keys(expected))

      // Time alone moves a delayed job to waiting.
      yield* held.open("hold")
      yield* object.run(jobs.work.pause)
      yield* TestClock.adjust(60_000)
      expect((yield* object.run(jobs.work.get("later")))?.state).toBe("waiting")
      expect(yield* object.run(jobs.work.counts)).toMatchObject({ waiting: 3, delayed: 0, active: 0, completed: 2 })
    }))

  it.scoped("list pages by cursor: every job once, in the order added, while jobs are added and finish between pages", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* makeQueues(object, gates())
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.addBulk(Array.from({ length: 23 }, (_, i) => ({ id: `j${i}`, payload: `${i}` }))))

      const seen: Array<string> = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = yield* object.run(jobs.work.list({ states: ["waiting"], limit: 5, ...(cursor === undefined ? {} : { cursor }) }))
        seen.push(...page.items.map((item) => item.id))
        cursor = page.cursor
        pages++
        if (pages === 2) {
          // A job added meanwhile comes last; one canceled before its page is left out; one already seen stays seen.
          yield* object.run(jobs.work.add({ id: "late", payload: "late" }))
          yield* object.run(jobs.work.cancel("j20"))
          yield* object.run(jobs.work.cancel("j0"))
        }
      } while (cursor !== undefined)
      const expected = [...Array.from({ length: 23 }, (_, i) => `j${i}`).filter((id) => id !== "j20"), "late"]
      expect(seen).toEqual(expected)
      expect(pages).toBe(5)

      const all = yield* object.run(jobs.work.list({ limit: 1_000 }))
      expect(all.items).toHaveLength(24)
      expect(all.cursor).toBeUndefined()
      const bad = yield* Effect.flip(object.run(jobs.work.list({ cursor: "nope" })))
      expect(bad).toMatchObject({ _tag: "InvalidInputError", field: "cursor" })
      expect(yield* Effect.flip(object.run(jobs.work.list({ limit: 0 })))).toMatchObject({ field: "limit" })
      expect(yield* Effect.flip(object.run(jobs.work.list({ states: ["running" as Jobs.JobState] })))).toMatchObject({ field: "states" })
    }))

  it.scoped("wait returns the job once it finished, or as it is when timeoutMs passed", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const held = gates()
      const jobs = yield* makeQueues(object, held)
      yield* object.run(jobs.work.add({ id: "hold", payload: "h" }))
      yield* object.run(jobs.work.add({ id: "later", payload: "l", delayMs: 5_000 }))
      const waiting = yield* Effect.fork(object.run(jobs.work.wait("hold", { timeoutMs: 60_000 })))
      const timedOut = yield* Effect.fork(object.run(jobs.work.wait("later", { timeoutMs: 1_000 })))
      yield* TestClock.adjust(1_000)
      expect(yield* Fiber.join(timedOut)).toMatchObject({ id: "later", state: "delayed" })
      expect(waiting.unsafePoll()).toBeNull()
      yield* held.open("hold")
      yield* TestClock.adjust(0)
      expect(yield* Fiber.join(waiting)).toMatchObject({ id: "hold", state: "completed", result: "held", finishedAt: 1_000 })
      expect(yield* object.run(jobs.work.wait("missing", { timeoutMs: 1_000 }))).toBeUndefined()
    }))

  it.scoped("a parent's get lists its children with their states as they change (outside any job)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const held = gates()
      const jobs = yield* makeQueues(object, held)
      yield* object.run(jobs.flow({
        queue: "work",
        id: "report",
        payload: "r",
        children: [
          { queue: "work", id: "hold-page", payload: "1" },
          { queue: "work", id: "fail-page", payload: "2" },
          { queue: "work", id: "later-page", payload: "3", delayMs: 5_000 }
        ]
      }))
      yield* TestClock.adjust(0)
      const childrenOf = Effect.map(object.run(jobs.work.get("report")), (info) => info?.children)
      expect(yield* childrenOf).toEqual([
        { queue: "work", id: "hold-page", state: "active" },
        { queue: "work", id: "fail-page", state: "waiting" },
        { queue: "work", id: "later-page", state: "delayed" }
      ])
      yield* held.open("hold-page")
      yield* TestClock.adjust(0)
      expect(yield* childrenOf).toEqual([
        { queue: "work", id: "hold-page", state: "completed" },
        { queue: "work", id: "fail-page", state: "failed" },
        // The failed child failed its parent, whose children not yet run were canceled with it.
        { queue: "work", id: "later-page", state: "canceled" }
      ])
      expect(yield* object.run(jobs.work.get("report"))).toMatchObject({ state: "failed" })
    }))
})
