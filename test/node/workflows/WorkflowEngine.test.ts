import { Activity, DurableClock, DurableDeferred, Workflow, WorkflowEngine } from "@effect/workflow"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Schema, TestClock } from "effect"
import { InvalidInputError, InvalidOptionError } from "../../../src/shared/Errors.js"
import * as Scheduler from "../../../src/engine/Scheduler.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import * as DurableWorkflowEngine from "../../../src/workflows/WorkflowEngine.js"
import { WorkflowNotRegisteredError } from "../../../src/workflows/engine/errors.js"
import { fresh, instance, rows, until } from "./support.js"

const Greet = Workflow.make({
  name: "Greet",
  payload: { name: Schema.String },
  success: Schema.String,
  idempotencyKey: ({ name }) => name
})

describe("WorkflowEngine (durable)", () => {
  it.scoped("execute runs a workflow to completion and poll reads its result", () =>
    Effect.gen(function*() {
      const object = yield* fresh(Greet.toLayer(({ name }) => Effect.succeed(`hello ${name}`)))
      const value = yield* object.run(Greet.execute({ name: "ada" }))
      assert.strictEqual(value, "hello ada")
      const id = yield* Greet.executionId({ name: "ada" })
      assert.deepStrictEqual(yield* object.run(Greet.poll(id)), new Workflow.Complete({ exit: Exit.succeed("hello ada") }))
      const [row] = yield* rows(object.storage, "SELECT status, suspended FROM durability_effect_workflow_executions")
      assert.deepStrictEqual(row, { status: "completed", suspended: 0 })
    }))
})

const Gate = DurableDeferred.make("gate", { success: Schema.String })

describe("WorkflowEngine (durable): suspension", () => {
  it.scoped("an activity's result is stored once and replayed after an eviction", () =>
    Effect.gen(function*() {
      let activityRuns = 0
      let bodyRuns = 0
      const Once = Workflow.make({ name: "Once", payload: {}, success: Schema.String, idempotencyKey: () => "one" })
      const layer = Once.toLayer(() =>
        Effect.gen(function*() {
          bodyRuns++
          const n = yield* Activity.make({
            name: "count",
            success: Schema.Number,
            execute: Effect.sync(() => ++activityRuns)
          })
          const signal = yield* DurableDeferred.await(Gate)
          return `${n}:${signal}`
        })
      )
      const storage = yield* MemoryStorage.make
      const first = yield* instance(storage, layer)
      const id = yield* first.run(Once.execute(undefined, { discard: true }))
      yield* until(Effect.map(first.run(Once.poll(id)), (result) => result?._tag === "Suspended"))
      assert.strictEqual(activityRuns, 1)
      // Suspended: no run holds anything in memory; the object is evicted.
      yield* first.evict
      const second = yield* instance(storage, layer)
      const token = DurableDeferred.tokenFromExecutionId(Gate, { workflow: Once, executionId: id })
      yield* second.run(DurableDeferred.succeed(Gate, { token, value: "go" }))
      yield* until(Effect.map(second.run(Once.poll(id)), (result) => result?._tag === "Complete"))
      assert.deepStrictEqual(yield* second.run(Once.poll(id)), new Workflow.Complete({ exit: Exit.succeed("1:go") }))
      assert.strictEqual(activityRuns, 1)
      assert.strictEqual(bodyRuns, 2)
      const journal = yield* rows(storage, "SELECT name, attempt FROM durability_effect_workflow_activities")
      assert.deepStrictEqual(journal, [{ name: "count", attempt: 1 }])
      yield* second.evict
    }))

  it.scoped("an activity is retried as @effect/workflow's Activity.retry says, each attempt journaled", () =>
    Effect.gen(function*() {
      let calls = 0
      const Flaky = Workflow.make({ name: "Flaky", payload: {}, success: Schema.Number, idempotencyKey: () => "one" })
      const object = yield* fresh(Flaky.toLayer(() =>
        Activity.make({
          name: "flaky",
          success: Schema.Number,
          error: Schema.String,
          execute: Effect.flatMap(Activity.CurrentAttempt, (attempt) => {
            calls++
            return attempt < 3 ? Effect.fail(`attempt ${attempt} failed`) : Effect.succeed(attempt)
          })
        }).pipe(Activity.retry({ times: 5 }), Effect.orDie)
      ))
      assert.strictEqual(yield* object.run(Flaky.execute(undefined)), 3)
      assert.strictEqual(calls, 3)
      const journal = yield* rows(object.storage, "SELECT attempt FROM durability_effect_workflow_activities ORDER BY attempt")
      assert.deepStrictEqual(journal.map((row) => row.attempt), [1, 2, 3])
      yield* object.evict
    }))

  it.scoped("DurableClock.sleep for days is a durable timer: TestClock.adjust wakes it, nothing waits in memory", () =>
    Effect.gen(function*() {
      const Nap = Workflow.make({ name: "Nap", payload: {}, idempotencyKey: () => "one" })
      const object = yield* fresh(Nap.toLayer(() => DurableClock.sleep({ name: "nap", duration: "3 days" })))
      const id = yield* object.run(Nap.execute(undefined, { discard: true }))
      yield* until(Effect.map(object.run(Nap.poll(id)), (result) => result?._tag === "Suspended"))
      const [timer] = yield* rows(object.storage, "SELECT owner, at FROM durability_timers")
      assert.strictEqual(timer?.owner, "effectWorkflows")
      assert.strictEqual(timer?.at, 3 * 24 * 60 * 60 * 1000)
      assert.isNotNull(object.storage.alarmAt)
      // Suspended: no execution running here, every permit free.
      const summary = yield* object.object.run(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.summary(10)))
      assert.strictEqual(summary.runningCount, 0)
      assert.strictEqual(summary.permits.available, summary.permits.capacity)
      yield* TestClock.adjust("3 days")
      yield* until(Effect.map(object.run(Nap.poll(id)), (result) => result?._tag === "Complete"))
      assert.deepStrictEqual(yield* object.run(Nap.poll(id)), new Workflow.Complete({ exit: Exit.void }))
      assert.deepStrictEqual(yield* rows(object.storage, "SELECT * FROM durability_timers"), [])
      yield* object.evict
    }))

  it.scoped("a sleeping execution is woken by the alarm of a fresh instance after an eviction", () =>
    Effect.gen(function*() {
      let runs = 0
      const Nap = Workflow.make({ name: "Nap", payload: {}, success: Schema.Number, idempotencyKey: () => "one" })
      const layer = Nap.toLayer(() =>
        Effect.suspend(() => {
          runs++
          return Effect.as(DurableClock.sleep({ name: "nap", duration: "2 days" }), runs)
        })
      )
      const storage = yield* MemoryStorage.make
      const first = yield* instance(storage, layer)
      const id = yield* first.run(Nap.execute(undefined, { discard: true }))
      yield* until(Effect.map(first.run(Nap.poll(id)), (result) => result?._tag === "Suspended"))
      yield* first.evict
      const second = yield* instance(storage, layer)
      yield* TestClock.adjust("2 days")
      yield* until(Effect.map(second.run(Nap.poll(id)), (result) => result?._tag === "Complete"))
      assert.deepStrictEqual(yield* second.run(Nap.poll(id)), new Workflow.Complete({ exit: Exit.succeed(2) }))
      yield* second.evict
    }))

  it.scoped("a DurableDeferred is completed by token from outside the workflow", () =>
    Effect.gen(function*() {
      const Wait = Workflow.make({ name: "Wait", payload: {}, success: Schema.String, idempotencyKey: () => "one" })
      const object = yield* fresh(Wait.toLayer(() => DurableDeferred.await(Gate)))
      const id = yield* object.run(Wait.execute(undefined, { discard: true }))
      yield* until(Effect.map(object.run(Wait.poll(id)), (result) => result?._tag === "Suspended"))
      const token = DurableDeferred.tokenFromExecutionId(Gate, { workflow: Wait, executionId: id })
      yield* object.run(DurableDeferred.succeed(Gate, { token, value: "from outside" }))
      assert.strictEqual(yield* object.run(Wait.execute(undefined)), "from outside")
      // Done once: a second completion changes nothing.
      yield* object.run(DurableDeferred.succeed(Gate, { token, value: "again" }))
      const journal = yield* rows(object.storage, "SELECT exit FROM durability_effect_workflow_deferreds")
      assert.strictEqual(journal.length, 1)
      yield* object.evict
    }))

  it.scoped("interrupt ends a suspended execution as interrupted and runs its compensation", () =>
    Effect.gen(function*() {
      const compensated: Array<string> = []
      const Stop = Workflow.make({ name: "Stop", payload: {}, idempotencyKey: () => "one" })
      const object = yield* fresh(Stop.toLayer(() =>
        Effect.gen(function*() {
          yield* Activity.make({ name: "reserve", success: Schema.String, execute: Effect.succeed("seat") }).pipe(
            Stop.withCompensation((seat) => Effect.sync(() => compensated.push(seat)))
          )
          yield* DurableDeferred.await(Gate)
        })
      ))
      const id = yield* object.run(Stop.execute(undefined, { discard: true }))
      yield* until(Effect.map(object.run(Stop.poll(id)), (result) => result?._tag === "Suspended"))
      yield* object.run(Stop.interrupt(id))
      yield* until(Effect.map(object.run(Stop.poll(id)), (result) => result?._tag === "Complete"))
      const result = yield* object.run(Stop.poll(id))
      assert(result?._tag === "Complete" && Exit.isInterrupted(result.exit))
      assert.deepStrictEqual(compensated, ["seat"])
      yield* object.evict
    }))

  it.scoped("resume runs a suspended execution again", () =>
    Effect.gen(function*() {
      let ready = false
      let runs = 0
      const Later = Workflow.make({ name: "Later", payload: {}, success: Schema.Number, idempotencyKey: () => "one" })
      const object = yield* fresh(Later.toLayer(() =>
        Effect.gen(function*() {
          runs++
          if (!ready) return yield* Workflow.suspend(yield* WorkflowEngine.WorkflowInstance)
          return runs
        })
      ))
      const id = yield* object.run(Later.execute(undefined, { discard: true }))
      yield* until(Effect.map(object.run(Later.poll(id)), (result) => result?._tag === "Suspended"))
      ready = true
      yield* object.run(Later.resume(id))
      yield* until(Effect.map(object.run(Later.poll(id)), (result) => result?._tag === "Complete"))
      assert.deepStrictEqual(yield* object.run(Later.poll(id)), new Workflow.Complete({ exit: Exit.succeed(2) }))
      yield* object.evict
    }))

  it.scoped("discard returns the execution id at once; the run completes on its own", () =>
    Effect.gen(function*() {
      const object = yield* fresh(Greet.toLayer(({ name }) => Effect.as(Effect.sleep("1 second"), `late ${name}`)))
      const id = yield* object.run(Greet.execute({ name: "bo" }, { discard: true }))
      assert.strictEqual(id, yield* Greet.executionId({ name: "bo" }))
      assert.isUndefined(yield* object.run(Greet.poll(id)))
      yield* TestClock.adjust("1 second")
      yield* until(Effect.map(object.run(Greet.poll(id)), (result) => result?._tag === "Complete"))
      assert.deepStrictEqual(yield* object.run(Greet.poll(id)), new Workflow.Complete({ exit: Exit.succeed("late bo") }))
      yield* object.evict
    }))

  it.scoped("a workflow executes a child: the parent suspends while the child sleeps and resumes at its end", () =>
    Effect.gen(function*() {
      const Child = Workflow.make({ name: "Child", payload: { n: Schema.Number }, success: Schema.Number, idempotencyKey: ({ n }) => String(n) })
      const Parent = Workflow.make({ name: "Parent", payload: {}, success: Schema.Number, idempotencyKey: () => "one" })
      const layer = Layer.mergeAll(
        Child.toLayer(({ n }) => Effect.as(DurableClock.sleep({ name: "child", duration: "1 hour" }), n * 2)),
        Parent.toLayer(() => Effect.map(Child.execute({ n: 21 }), (n) => n))
      )
      const object = yield* fresh(layer)
      const id = yield* object.run(Parent.execute(undefined, { discard: true }))
      yield* until(Effect.map(object.run(Parent.poll(id)), (result) => result?._tag === "Suspended"))
      const childId = yield* Child.executionId({ n: 21 })
      assert.strictEqual((yield* object.run(Child.poll(childId)))?._tag, "Suspended")
      yield* TestClock.adjust("1 hour")
      yield* until(Effect.map(object.run(Parent.poll(id)), (result) => result?._tag === "Complete"))
      assert.deepStrictEqual(yield* object.run(Parent.poll(id)), new Workflow.Complete({ exit: Exit.succeed(42) }))
      const parents = yield* rows(object.storage, "SELECT parent FROM durability_effect_workflow_executions WHERE execution_id = ?", childId)
      assert.deepStrictEqual(parents, [{ parent: id }])
      yield* object.evict
    }))
})

describe("WorkflowEngine (durable): bad input", () => {
  it.scoped("bad options fail make with a typed error, before any write", () =>
    Effect.gen(function*() {
      const storage = yield* MemoryStorage.make
      const object = yield* Effect.orDie(TestDurability.make({ storage }))
      const error = yield* object.run(
        Effect.flip(DurableWorkflowEngine.make({ retries: { maxAttempts: 0 } }) as Effect.Effect<unknown, unknown, never>)
      )
      assert.instanceOf(error, InvalidOptionError)
      assert.deepStrictEqual(
        yield* rows(storage, "SELECT name FROM sqlite_master WHERE name LIKE 'durability_effect_workflow%'"),
        []
      )
    }))

  it.scoped("executing an unregistered workflow, or under a bad id, is refused and writes nothing", () =>
    Effect.gen(function*() {
      const object = yield* fresh(Layer.empty)
      const unregistered = yield* object.run(Effect.exit(Greet.execute({ name: "x" }, { discard: true })))
      assert(Exit.isFailure(unregistered))
      assert.instanceOf(Cause.squash(unregistered.cause), WorkflowNotRegisteredError)
      const registered = yield* fresh(Greet.toLayer(({ name }) => Effect.succeed(name)))
      const badId = yield* registered.run(
        Effect.exit(Effect.flatMap(WorkflowEngine.WorkflowEngine, (engine) =>
          engine.execute(Greet, { executionId: "", payload: { name: "x" }, discard: true })))
      )
      assert(Exit.isFailure(badId))
      assert.instanceOf(Cause.squash(badId.cause), InvalidInputError)
      assert.deepStrictEqual(yield* rows(object.storage, "SELECT * FROM durability_effect_workflow_executions"), [])
      assert.deepStrictEqual(yield* rows(registered.storage, "SELECT * FROM durability_effect_workflow_executions"), [])
    }))
})

describe("WorkflowEngine (durable): a wake-up during a run", () => {
  it.scoped("a deferred done while the workflow runs other work preempts the run, which replays and sees it", () =>
    Effect.gen(function*() {
      let runs = 0
      let slowDone = false
      const Race = Workflow.make({ name: "Race", payload: {}, success: Schema.String, idempotencyKey: () => "one" })
      const object = yield* fresh(Race.toLayer(() =>
        Effect.suspend(() => {
          runs++
          return DurableDeferred.raceAll({
            name: "race",
            success: Schema.String,
            error: Schema.Never,
            effects: [
              DurableDeferred.await(Gate),
              Activity.make({
                name: "slow",
                success: Schema.String,
                execute: Effect.as(Effect.sleep("1 hour"), "slow").pipe(Effect.tap(() => Effect.sync(() => slowDone = true)))
              })
            ]
          })
        })
      ))
      const id = yield* object.run(Race.execute(undefined, { discard: true }))
      yield* until(Effect.sync(() => runs === 1))
      const token = DurableDeferred.tokenFromExecutionId(Gate, { workflow: Race, executionId: id })
      yield* object.run(DurableDeferred.succeed(Gate, { token, value: "signal" }))
      yield* until(Effect.map(object.run(Race.poll(id)), (result) => result?._tag === "Complete"))
      assert.deepStrictEqual(yield* object.run(Race.poll(id)), new Workflow.Complete({ exit: Exit.succeed("signal") }))
      assert.isFalse(slowDone)
      assert.isAtLeast(runs, 2)
      yield* object.evict
    }))
})

describe("WorkflowEngine (durable): a child inside an activity", () => {
  it.scoped("a child's end during the parent's run (its activity still cleaning up) is not slept through", () =>
    Effect.gen(function*() {
      const release = yield* Effect.makeLatch()
      let cleaning = false
      let parentRuns = 0
      const Child = Workflow.make({ name: "Kid", payload: {}, success: Schema.String, idempotencyKey: () => "kid" })
      const Parent = Workflow.make({ name: "Mom", payload: {}, success: Schema.String, idempotencyKey: () => "mom" })
      const object = yield* fresh(Layer.mergeAll(
        Child.toLayer(() => DurableDeferred.await(Gate)),
        Parent.toLayer(() =>
          Effect.suspend(() => {
            parentRuns++
            return Activity.make({
              name: "child",
              success: Schema.String,
              execute: Child.execute(undefined).pipe(
                Effect.ensuring(Effect.zipRight(Effect.sync(() => cleaning = true), release.await))
              )
            })
          })
        )
      ))
      const id = yield* object.run(Parent.execute(undefined, { discard: true }))
      // The child suspends; the activity is stopped and holds in its cleanup: the parent's run is not over.
      yield* until(Effect.sync(() => cleaning))
      const childId = yield* Child.executionId({})
      const token = DurableDeferred.tokenFromExecutionId(Gate, { workflow: Child, executionId: childId })
      yield* object.run(DurableDeferred.succeed(Gate, { token, value: "done" }))
      yield* until(Effect.map(object.run(Child.poll(childId)), (result) => result?._tag === "Complete"))
      // The child's end woke the parent while its run was still going: that run's suspension runs it again.
      yield* release.open
      yield* until(Effect.map(object.run(Parent.poll(id)), (result) => result?._tag === "Complete"))
      assert.deepStrictEqual(yield* object.run(Parent.poll(id)), new Workflow.Complete({ exit: Exit.succeed("done") }))
      assert.strictEqual(parentRuns, 2)
      yield* object.evict
    }))
})

describe("WorkflowEngine (durable): a stored payload that no longer decodes", () => {
  it.scoped("fails the execution for good (no retries): poll reads it as a defect", () =>
    Effect.gen(function*() {
      const Before = Workflow.make({ name: "Shape", payload: { name: Schema.String }, idempotencyKey: ({ name }) => name })
      const After = Workflow.make({ name: "Shape", payload: { count: Schema.Number }, idempotencyKey: () => "x" })
      const storage = yield* MemoryStorage.make
      const first = yield* instance(storage, Before.toLayer(() => DurableDeferred.await(Gate)))
      const id = yield* first.run(Before.execute({ name: "x" }, { discard: true }))
      yield* until(Effect.map(first.run(Before.poll(id)), (result) => result?._tag === "Suspended"))
      yield* first.evict
      // Deployed again with another payload schema under the same name.
      const second = yield* instance(storage, After.toLayer(() => Effect.void))
      const token = DurableDeferred.tokenFromExecutionId(Gate, { workflow: After, executionId: id })
      yield* second.run(DurableDeferred.succeed(Gate, { token, value: "go" }))
      yield* until(Effect.map(second.run(After.poll(id)), (result) => result?._tag === "Complete"))
      const result = yield* second.run(After.poll(id))
      assert(result?._tag === "Complete" && Exit.isFailure(result.exit) && Cause.isDie(result.exit.cause))
      const [row] = yield* rows(storage, "SELECT status, attempt FROM durability_effect_workflow_executions")
      assert.deepStrictEqual(row, { status: "failed", attempt: 1 })
      yield* second.evict
    }))
})

describe("WorkflowEngine (durable): retention", () => {
  it.scoped("purgeBefore deletes ended executions and their journal, keeps running ones, and refuses a bad time", () =>
    Effect.gen(function*() {
      const Step = Workflow.make({ name: "Step", payload: { n: Schema.Number }, success: Schema.Number, idempotencyKey: ({ n }) => String(n) })
      const Held = DurableDeferred.make("held", { success: Schema.String })
      const object = yield* fresh(Step.toLayer(({ n }) =>
        Effect.gen(function*() {
          const doubled = yield* Activity.make({ name: "double", success: Schema.Number, execute: Effect.succeed(n * 2) })
          if (n === 2) yield* DurableDeferred.await(Held)
          return doubled
        })
      ))
      assert.strictEqual(yield* object.run(Step.execute({ n: 1 })), 2)
      const running = yield* object.run(Step.execute({ n: 2 }, { discard: true }))
      yield* until(Effect.map(object.run(Step.poll(running)), (result) => result?._tag === "Suspended"))
      const before = yield* rows(object.storage, "SELECT execution_id FROM durability_effect_workflow_executions ORDER BY execution_id")
      const refused = yield* Effect.flip(object.object.run(DurableWorkflowEngine.purgeBefore(Number.NaN)))
      assert.instanceOf(refused, InvalidInputError)
      assert.deepStrictEqual(yield* rows(object.storage, "SELECT execution_id FROM durability_effect_workflow_executions ORDER BY execution_id"), before)
      yield* TestClock.adjust(1)
      const now = yield* object.run(Effect.clockWith((clock) => clock.currentTimeMillis))
      assert.strictEqual(yield* object.object.run(DurableWorkflowEngine.purgeBefore(now)), 1)
      assert.deepStrictEqual(
        yield* rows(object.storage, "SELECT execution_id, status FROM durability_effect_workflow_executions"),
        [{ execution_id: running, status: "pending" }]
      )
      assert.deepStrictEqual(
        yield* rows(object.storage, "SELECT DISTINCT execution_id FROM durability_effect_workflow_activities"),
        [{ execution_id: running }]
      )
      yield* object.evict
    }))
})
