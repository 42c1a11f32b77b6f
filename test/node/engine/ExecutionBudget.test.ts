/**
 * What one execution costs the engine, counted, not timed: Effect steps the runtime evaluates, fibers started
 * and SQL statements, for a one-call operation (an Effect handler, and a plain one as the promise face gives),
 * the batch API and J1-shaped jobs, each run to completion. A supervisor with op supervision counts the steps
 * and fibers of the call and of everything it forks (the drain of its eager starts, the starts their settles
 * make); the object's storage counts the statements.
 *
 * The budgets are the figures of the batch-first core (issue 28): a change that makes an execution cost more
 * fails here. A one-call operation with an Effect handler: 217 steps, 2 fibers (the drain, the handler's),
 * 3 statements; with a plain handler, called directly: 147 steps, 1 fiber (the drain), 3 statements. A batch
 * runs in that one drain, its records claimed as many to a statement as hold permits (here ten; at most 20)
 * and their successes settled as many to a statement: 1.2 statements per operation or job (the insert, a
 * tenth of a claim and of a settle), an Effect handler's own fiber, and for plain handlers two fibers per
 * hundred (the drain, the upkeep once idle), where there used to be 3.05 statements and two fibers per
 * execution.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, RuntimeFlags, RuntimeFlagsPatch, Supervisor, TestClock } from "effect"
import type * as Context from "effect/Context"
import type * as Fiber from "effect/Fiber"
import type * as Option from "effect/Option"
import { Jobs, Operations } from "durability/effect"
import { MemoryStorage, TestDurability } from "durability/testing"
import * as Plain from "../../../src/shared/plain.js"

class Counting extends Supervisor.AbstractSupervisor<void> {
  steps = 0
  fibers = 0
  get value() {
    return Effect.void
  }
  override onStart<A, E, R>(
    _context: Context.Context<R>,
    _effect: Effect.Effect<A, E, R>,
    _parent: Option.Option<Fiber.RuntimeFiber<unknown, unknown>>,
    _fiber: Fiber.RuntimeFiber<A, E>
  ) {
    this.fibers++
  }
  override onEffect<A, E>(_fiber: Fiber.RuntimeFiber<A, E>, _effect: Effect.Effect<unknown, unknown, unknown>) {
    this.steps++
  }
}

interface Cost {
  readonly steps: number
  readonly fibers: number
  readonly statements: number
}

/** Runs `call` counted, then lets what it started run to the end (no time passes); the cost per execution. */
const measure = <A, E>(
  object: TestDurability.TestObject,
  storage: MemoryStorage.MemoryStorage,
  executions: number,
  call: Effect.Effect<A, E, never>
) =>
  Effect.gen(function*() {
    const supervisor = new Counting()
    const before = storage.statements.length
    yield* object.run(Effect.supervised(call, supervisor).pipe(
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
    ))
    yield* TestClock.adjust(0)
    return {
      steps: supervisor.steps / executions,
      fibers: supervisor.fibers / executions,
      statements: (storage.statements.length - before) / executions
    } satisfies Cost
  })

const within = (cost: Cost, budget: Partial<Cost>) => {
  if (budget.steps !== undefined) assert.isAtMost(cost.steps, budget.steps, `Effect steps per execution: ${cost.steps}`)
  if (budget.fibers !== undefined) assert.isAtMost(cost.fibers, budget.fibers, `fibers per execution: ${cost.fibers}`)
  assert.isAtMost(cost.statements, budget.statements ?? 0, `statements per execution: ${cost.statements}`)
}

const setup = Effect.gen(function*() {
  const storage = yield* MemoryStorage.make
  const object = yield* TestDurability.make({ storage, scheduler: { alarmConcurrency: 10 } })
  const ops = yield* object.run(Operations.make({
    noop: Operations.operation({ handler: () => Effect.void }),
    // The promise face's shape: a plain function beside the Effect handler, called directly.
    plain: Plain.withPlain(Operations.operation({ handler: () => Effect.void }), () => null)
  }))
  const jobs = yield* object.run(Jobs.make({ work: Jobs.queue({ concurrency: 10, handler: () => Effect.void }) }))
  // Warm: the first calls pay the capabilities' first reads.
  yield* object.run(ops.register("noop", { id: "warm", payload: null }))
  yield* object.run(ops.register("plain", { id: "warm-plain", payload: null }))
  yield* object.run(jobs.work.add({ id: "warm", payload: null }))
  yield* TestClock.adjust(0)
  return { storage, object, ops, jobs }
})

/** The mean cost of `n` one-call registrations of `operation`, each run to completion. */
const oneCall = (operation: "noop" | "plain", n: number) =>
  Effect.gen(function*() {
    const { object, ops, storage } = yield* setup
    const costs: Array<Cost> = []
    for (let i = 0; i < n; i++) costs.push(yield* measure(object, storage, 1, ops.register(operation, { id: `op-${i}`, payload: null })))
    const page = yield* object.run(ops.list(operation, { status: "completed", limit: 100 }))
    assert.strictEqual(page.items.length, n + 1)
    const mean = (pick: (cost: Cost) => number) => costs.reduce((sum, cost) => sum + pick(cost), 0) / n
    return { steps: mean((c) => c.steps), fibers: mean((c) => c.fibers), statements: mean((c) => c.statements) }
  })

describe("execution budget", () => {
  it.scoped("a one-call operation, Effect handler", () =>
    Effect.map(oneCall("noop", 20), (cost) => within(cost, { steps: 217, fibers: 2, statements: 3 })))

  it.scoped("a one-call operation, plain handler (the promise face): no fiber of its own", () =>
    Effect.map(oneCall("plain", 20), (cost) => within(cost, { steps: 147, fibers: 1, statements: 3 })))

  it.scoped("the batch API: 100 operations in one call", () =>
    Effect.gen(function*() {
      const { object, ops, storage } = yield* setup
      const n = 100
      const cost = yield* measure(object, storage, n, ops.registerMany("noop", Array.from({ length: n }, (_, i) => ({ id: `b-${i}`, payload: null }))))
      const page = yield* object.run(ops.list("noop", { status: "completed", limit: 1000 }))
      assert.strictEqual(page.items.length, n + 1)
      // One drain runs the hundred: each handler's fiber and the drain's, not two per execution.
      within(cost, { fibers: 1.02, statements: 1.2 })
    }))

  it.scoped("the batch API with a plain handler: two fibers for the hundred (the drain, the upkeep once idle)", () =>
    Effect.gen(function*() {
      const { object, ops, storage } = yield* setup
      const n = 100
      const cost = yield* measure(object, storage, n, ops.registerMany("plain", Array.from({ length: n }, (_, i) => ({ id: `b-${i}`, payload: null }))))
      const page = yield* object.run(ops.list("plain", { status: "completed", limit: 1000 }))
      assert.strictEqual(page.items.length, n + 1)
      within(cost, { fibers: 0.02, statements: 1.2 })
    }))

  it.scoped("J1-shaped jobs: a bulk of 100, concurrency 10", () =>
    Effect.gen(function*() {
      const { jobs, object, storage } = yield* setup
      const n = 100
      const cost = yield* measure(object, storage, n, jobs.work.addBulk(Array.from({ length: n }, (_, i) => ({ id: `j-${i}`, payload: null }))))
      const counts = yield* object.run(jobs.work.counts)
      assert.strictEqual(counts.completed, n + 1)
      // Those past the queue's ten slots run in the same drain once its executions freed them, ten to a group:
      // no pass, no due scan.
      within(cost, { fibers: 1.02, statements: 1.2 })
    }))
})
