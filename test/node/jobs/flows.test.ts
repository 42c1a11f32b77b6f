/**
 * Flows: a tree of jobs across queues inserted in one transaction; a parent runs once every child
 * finished; a child's terminal failure fails its parent (`onFailure: "fail"`, cancelling siblings
 * that have not started) or is shown to it (`"ignore"`). The parent is released in the child's
 * settle transaction: never twice, never stuck.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { NonRetryableError } from "../../../src/shared/Errors.js"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { dump, gates, jobRow, recorder, rows, type TestObject } from "./support.js"

interface Step {
  readonly fail?: boolean
  readonly hold?: boolean
}

const setup = (object: TestObject, options: { readonly leafConcurrency?: number } = {}) =>
  Effect.gen(function*() {
    const calls: Array<string> = []
    const values: Record<string, Readonly<Record<string, Jobs.ChildValue>>> = {}
    const held = gates()
    const events = recorder()
    const handler = (job: Jobs.JobContext<Step>) =>
      Effect.gen(function*() {
        calls.push(job.id)
        values[job.id] = yield* job.childrenValues
        if (job.payload.hold === true) yield* held.wait(job.id)
        if (job.payload.fail === true) return yield* new NonRetryableError({ message: `${job.id} broke` })
        return `${job.id} ok`
      })
    const jobs = yield* object.run(Jobs.make({
      root: Jobs.queue({ handler }),
      mid: Jobs.queue({ handler }),
      leaf: Jobs.queue({ handler, ...(options.leafConcurrency === undefined ? {} : { concurrency: options.leafConcurrency }) })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, calls, values, held, events }
  })

const statusOf = (object: TestObject) =>
  Effect.map(rows(object, "SELECT id, status FROM durability_jobs ORDER BY seq"), (all) =>
    Object.fromEntries(all.map((row) => [String(row.id), String(row.status)])))

describe("flow insertion", () => {
  it.scoped("a bad node anywhere in the tree fails the whole flow with a typed error naming the field; nothing is written", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.leaf.add({ id: "taken", payload: {}, delayMs: 60_000 }))
      const before = yield* dump(object)
      const tree = (bad: Partial<Jobs.FlowNode>): Jobs.FlowNode => ({
        queue: "root",
        id: "r",
        payload: {},
        children: [
          { queue: "mid", id: "m0", payload: {} },
          { queue: "mid", id: "m1", payload: {}, children: [{ queue: "leaf", id: "l0", payload: {} }, { queue: "leaf", id: "l1", payload: {}, ...bad }] }
        ]
      })
      const cases: ReadonlyArray<readonly [Partial<Jobs.FlowNode>, string]> = [
        [{ priority: 1.5 }, "children[1].children[1].priority"],
        [{ queue: "nope" }, "children[1].children[1].queue"],
        [{ delayMs: -1 }, "children[1].children[1].delayMs"],
        [{ id: "" }, "children[1].children[1].id"],
        [{ onFailure: "retry" as "fail" }, "children[1].children[1].onFailure"],
        [{ payload: { big: "x".repeat(140_000) } }, "children[1].children[1].payload"],
        [{ children: "none" as unknown as [] }, "children[1].children[1].children"],
        // Only known when writing: the transaction rolls back the nodes written before it.
        [{ id: "taken" }, "children[1].children[1].id"]
      ]
      for (const [bad, field] of cases) {
        const error = yield* Effect.flip(object.run(jobs.flow(tree(bad))))
        expect(error, field).toMatchObject({ _tag: "InvalidInputError", field })
        expect(yield* dump(object), field).toEqual(before)
      }
      const dedup = yield* Effect.flip(object.run(jobs.flow({ queue: "root", payload: {}, dedup: { key: "k" } } as Jobs.FlowNode)))
      expect(dedup).toMatchObject({ _tag: "InvalidInputError", field: "dedup" })
      expect(yield* dump(object)).toEqual(before)
    }))

  it.scoped("a multi-level flow across queues: leaves first, each parent once all its children finished", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, events, held, jobs, values } = yield* setup(object)
      const result = yield* object.run(jobs.flow({
        queue: "root",
        id: "r",
        payload: {},
        children: [
          { queue: "mid", id: "m0", payload: {}, children: [{ queue: "leaf", id: "l0", payload: { hold: true } }, { queue: "leaf", id: "l1", payload: {} }] },
          { queue: "leaf", id: "l2", payload: { hold: true } }
        ]
      }))
      expect(result).toEqual({
        queue: "root",
        id: "r",
        children: [
          { queue: "mid", id: "m0", children: [{ queue: "leaf", id: "l0", children: [] }, { queue: "leaf", id: "l1", children: [] }] },
          { queue: "leaf", id: "l2", children: [] }
        ]
      })
      expect(events.of("added").map((event) => [event.id, event.state, event.parentId])).toEqual([
        ["l0", "waiting", "m0"],
        ["l1", "waiting", "m0"],
        ["m0", "waiting-children", "r"],
        ["l2", "waiting", "r"],
        ["r", "waiting-children", undefined]
      ])
      expect(yield* rows(object, "SELECT id, status, children_pending, parent_key FROM durability_jobs ORDER BY seq")).toEqual([
        { id: "r", status: "waiting_children", children_pending: 2, parent_key: null },
        { id: "m0", status: "waiting_children", children_pending: 2, parent_key: "root/r" },
        { id: "l0", status: "pending", children_pending: 0, parent_key: "mid/m0" },
        { id: "l1", status: "pending", children_pending: 0, parent_key: "mid/m0" },
        { id: "l2", status: "pending", children_pending: 0, parent_key: "root/r" }
      ])
      yield* TestClock.adjust(0)
      expect(calls.sort()).toEqual(["l0", "l1", "l2"])
      expect((yield* jobRow(object, "mid", "m0"))?.children_pending).toBe(1)
      yield* held.open("l0")
      yield* TestClock.adjust(0)
      expect(calls).toContain("m0")
      expect(values.m0).toEqual({
        l0: { queue: "leaf", state: "completed", result: "l0 ok" },
        l1: { queue: "leaf", state: "completed", result: "l1 ok" }
      })
      expect(calls).not.toContain("r")
      expect(yield* jobRow(object, "root", "r")).toMatchObject({ status: "waiting_children", children_pending: 1 })
      expect((yield* object.run(jobs.root.get("r")))?.state).toBe("waiting-children")
      yield* held.open("l2")
      yield* TestClock.adjust(0)
      expect(calls.filter((id) => id === "r")).toEqual(["r"])
      expect(values.r).toEqual({
        m0: { queue: "mid", state: "completed", result: "m0 ok" },
        l2: { queue: "leaf", state: "completed", result: "l2 ok" }
      })
      expect(yield* object.run(jobs.root.get("r"))).toMatchObject({ state: "completed", result: "r ok", children: [{ queue: "mid", id: "m0" }, { queue: "leaf", id: "l2" }] })
    }))

  it.scoped("twenty children finishing in the same tick release their parent once", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ scheduler: { alarmConcurrency: 25 } })
      const { calls, held, jobs } = yield* setup(object)
      const children = Array.from({ length: 20 }, (_, i) => ({ queue: "leaf", id: `c${i}`, payload: { hold: true } }))
      yield* object.run(jobs.flow({ queue: "root", id: "r", payload: {}, children }))
      yield* TestClock.adjust(0)
      expect(calls).toHaveLength(20)
      yield* Effect.forEach(children, (child) => held.open(child.id))
      yield* TestClock.adjust(0)
      yield* TestClock.adjust(60_000)
      expect(calls.filter((id) => id === "r")).toEqual(["r"])
      expect(yield* jobRow(object, "root", "r")).toMatchObject({ status: "completed", children_pending: 0, attempt: 1 })
    }))

  it.scoped("a child that retries keeps its parent waiting until it completes", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls: Array<string> = []
      const jobs = yield* object.run(Jobs.make({
        root: Jobs.queue({ handler: (job: Jobs.JobContext<null>) => Effect.sync(() => calls.push(job.id)) }),
        leaf: Jobs.queue({
          retries: { maxAttempts: 3, delay: () => 1_000 },
          handler: (job: Jobs.JobContext<null>) =>
            Effect.suspend(() => {
              calls.push(`${job.id}#${job.attempt}`)
              return job.attempt < 3 ? Effect.fail(new Error("flaky")) : Effect.void
            })
        })
      }))
      yield* object.run(jobs.flow({ queue: "root", id: "r", payload: null, children: [{ queue: "leaf", id: "c", payload: null }] }))
      yield* TestClock.adjust(1_500)
      expect(calls).toEqual(["c#1", "c#2"])
      expect((yield* jobRow(object, "root", "r"))?.status).toBe("waiting_children")
      yield* TestClock.adjust(1_000)
      expect(calls).toEqual(["c#1", "c#2", "c#3", "r"])
    }))
})

describe("flow failures", () => {
  it.scoped("onFailure fail: the parent fails with ChildJobFailedError; siblings not started are canceled with their subtrees", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, events, held, jobs } = yield* setup(object, { leafConcurrency: 1 })
      yield* object.run(jobs.flow({
        queue: "root",
        id: "r",
        payload: {},
        children: [
          { queue: "leaf", id: "running", payload: { hold: true } },
          { queue: "leaf", id: "broken", payload: { fail: true } },
          { queue: "leaf", id: "waiting", payload: {} },
          { queue: "mid", id: "subtree", payload: {}, children: [{ queue: "leaf", id: "deep", payload: {} }] }
        ]
      }))
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["running"])
      // The leaf queue runs one at a time: "broken" runs once "running" is done, and its failure decides the parent.
      yield* held.open("running")
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["running", "broken"])
      expect(yield* statusOf(object)).toEqual({
        r: "failed",
        running: "completed",
        broken: "failed",
        waiting: "canceled",
        subtree: "canceled",
        deep: "canceled"
      })
      const root = yield* object.run(jobs.root.get("r"))
      expect(root).toMatchObject({ state: "failed", error: { name: "ChildJobFailedError" } })
      expect(root?.error?.message).toContain(`Child job "broken" of queue "leaf" failed: NonRetryableError: broken broke`)
      expect(events.of("failed").map((event) => [event.id, event.error.name])).toEqual([
        ["broken", "NonRetryableError"],
        ["r", "ChildJobFailedError"]
      ])
      expect(events.of("canceled").map((event) => [event.id, event.reason])).toEqual([
        ["waiting", "its parent failed"],
        ["subtree", "its parent failed"],
        ["deep", "its parent failed"]
      ])
      yield* TestClock.adjust(60_000)
      expect(calls).toEqual(["running", "broken"])
    }))

  it.scoped("a sibling already running keeps its run; its end finds the parent decided", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, held, jobs } = yield* setup(object)
      yield* object.run(jobs.flow({
        queue: "root",
        id: "r",
        payload: {},
        children: [{ queue: "leaf", id: "slow", payload: { hold: true } }, { queue: "leaf", id: "broken", payload: { fail: true } }]
      }))
      yield* TestClock.adjust(0)
      expect(yield* statusOf(object)).toEqual({ r: "failed", slow: "pending", broken: "failed" })
      yield* held.open("slow")
      yield* TestClock.adjust(0)
      expect(yield* statusOf(object)).toEqual({ r: "failed", slow: "completed", broken: "failed" })
      expect(calls).not.toContain("r")
      expect((yield* jobRow(object, "root", "r"))?.finished_at).toBe(0)
    }))

  it.scoped("onFailure ignore: the parent runs and sees the failure in childrenValues()", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, jobs, values } = yield* setup(object)
      yield* object.run(jobs.flow({
        queue: "root",
        id: "r",
        payload: {},
        children: [
          { queue: "leaf", id: "ok", payload: {} },
          { queue: "leaf", id: "broken", payload: { fail: true }, onFailure: "ignore" }
        ]
      }))
      yield* TestClock.adjust(0)
      expect(calls).toContain("r")
      expect(values.r).toEqual({
        ok: { queue: "leaf", state: "completed", result: "ok ok" },
        broken: { queue: "leaf", state: "failed", error: { name: "NonRetryableError", message: "broken broke" } }
      })
      expect((yield* object.run(jobs.root.get("r")))?.state).toBe("completed")
    }))

  it.scoped("failures at each level: a grandchild fails its child, which fails the root", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, events, jobs } = yield* setup(object)
      yield* object.run(jobs.flow({
        queue: "root",
        id: "r",
        payload: {},
        children: [
          { queue: "mid", id: "m", payload: {}, children: [{ queue: "leaf", id: "g", payload: { fail: true } }] },
          { queue: "mid", id: "other", payload: {}, delayMs: 60_000 }
        ]
      }))
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["g"])
      expect(yield* statusOf(object)).toEqual({ r: "failed", m: "failed", g: "failed", other: "canceled" })
      expect((yield* object.run(jobs.mid.get("m")))?.error).toMatchObject({ name: "ChildJobFailedError", message: expect.stringContaining(`"g"`) })
      expect((yield* object.run(jobs.root.get("r")))?.error).toMatchObject({ name: "ChildJobFailedError", message: expect.stringContaining(`"m"`) })
      expect(events.of("failed").map((event) => event.id)).toEqual(["g", "m", "r"])
      yield* TestClock.adjust(120_000)
      expect(calls).toEqual(["g"])
    }))

  it.scoped("a mid-level failure with ignore lets the root run; the root's own failure is its own", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, jobs, values } = yield* setup(object)
      yield* object.run(jobs.flow({
        queue: "root",
        id: "r",
        payload: { fail: true },
        children: [{ queue: "mid", id: "m", payload: {}, onFailure: "ignore", children: [{ queue: "leaf", id: "g", payload: { fail: true } }] }]
      }))
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["g", "r"])
      expect(values.r?.m).toMatchObject({ state: "failed", error: { name: "ChildJobFailedError" } })
      expect((yield* object.run(jobs.root.get("r")))?.error).toEqual({ name: "NonRetryableError", message: "r broke" })
    }))

  it.scoped("never stuck: a removed or canceled child ends its parent's wait", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { calls, jobs, values } = yield* setup(object)
      yield* object.run(jobs.flow({ queue: "root", id: "a", payload: {}, children: [{ queue: "leaf", id: "a1", payload: {}, delayMs: 60_000 }] }))
      yield* object.run(jobs.flow({
        queue: "root",
        id: "b",
        payload: {},
        children: [{ queue: "leaf", id: "b1", payload: {}, delayMs: 60_000, onFailure: "ignore" }]
      }))
      expect(yield* object.run(jobs.leaf.remove("a1"))).toBe(true)
      expect(yield* object.run(jobs.root.get("a"))).toMatchObject({ state: "failed", error: { name: "ChildJobFailedError" } })
      expect(yield* object.run(jobs.leaf.cancel("b1", "no longer needed"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(calls).toEqual(["b"])
      expect(values.b).toEqual({
        b1: { queue: "leaf", state: "canceled" }
      })
      // Removing the root removes its children (nothing left to run).
      expect(yield* object.run(jobs.root.remove("b"))).toBe(true)
      expect(yield* rows(object, "SELECT id FROM durability_jobs")).toEqual([{ id: "a" }])
    }))
})
