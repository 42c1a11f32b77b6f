/**
 * What one execution costs the engine, counted, not timed: Effect steps the runtime evaluates, fibers started
 * and SQL statements, for a one-call operation, the batch API and J1-shaped jobs, each run to completion. A
 * supervisor with op supervision counts the steps and fibers of the call and of everything it forks (eager
 * starts, settles, the starts they make); the object's storage counts the statements.
 *
 * The budgets are today's figures (203 steps, 2 fibers and 3 statements for a one-call operation; 3.05
 * statements per operation or job in a batch): a change that makes an execution cost more fails here. Issue 28
 * (the batch-first core) is to lower them; lower the budgets with it. Steps and fibers are budgeted for the
 * one-call shape only: in a batch, records past the free permits start from the engine's own timer fiber,
 * which the call's supervisor does not see, so their steps would be undercounted.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, RuntimeFlags, RuntimeFlagsPatch, Supervisor, TestClock } from "effect"
import type * as Context from "effect/Context"
import type * as Fiber from "effect/Fiber"
import type * as Option from "effect/Option"
import { Jobs, Operations } from "durability/effect"
import { MemoryStorage, TestDurability } from "durability/testing"

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
  const ops = yield* object.run(Operations.make({ noop: Operations.operation({ handler: () => Effect.void }) }))
  const jobs = yield* object.run(Jobs.make({ work: Jobs.queue({ concurrency: 10, handler: () => Effect.void }) }))
  // Warm: the first calls pay the capabilities' first reads.
  yield* object.run(ops.register("noop", { id: "warm", payload: null }))
  yield* object.run(jobs.work.add({ id: "warm", payload: null }))
  yield* TestClock.adjust(0)
  return { storage, object, ops, jobs }
})

describe("execution budget", () => {
  it.scoped("a one-call operation", () =>
    Effect.gen(function*() {
      const { object, ops, storage } = yield* setup
      const n = 20
      const costs: Array<Cost> = []
      for (let i = 0; i < n; i++) costs.push(yield* measure(object, storage, 1, ops.register("noop", { id: `op-${i}`, payload: null })))
      const page = yield* object.run(ops.list("noop", { status: "completed", limit: 100 }))
      assert.strictEqual(page.items.length, n + 1)
      const mean = (pick: (cost: Cost) => number) => costs.reduce((sum, cost) => sum + pick(cost), 0) / n
      within({ steps: mean((c) => c.steps), fibers: mean((c) => c.fibers), statements: mean((c) => c.statements) }, {
        steps: 205,
        fibers: 2,
        statements: 3
      })
    }))

  it.scoped("the batch API: 100 operations in one call", () =>
    Effect.gen(function*() {
      const { object, ops, storage } = yield* setup
      const n = 100
      const cost = yield* measure(object, storage, n, ops.registerMany("noop", Array.from({ length: n }, (_, i) => ({ id: `b-${i}`, payload: null }))))
      const page = yield* object.run(ops.list("noop", { status: "completed", limit: 1000 }))
      assert.strictEqual(page.items.length, n + 1)
      within(cost, { statements: 3.05 })
    }))

  it.scoped("J1-shaped jobs: a bulk of 100, concurrency 10", () =>
    Effect.gen(function*() {
      const { jobs, object, storage } = yield* setup
      const n = 100
      const cost = yield* measure(object, storage, n, jobs.work.addBulk(Array.from({ length: n }, (_, i) => ({ id: `j-${i}`, payload: null }))))
      const counts = yield* object.run(jobs.work.counts)
      assert.strictEqual(counts.completed, n + 1)
      within(cost, { statements: 3.05 })
    }))
})
