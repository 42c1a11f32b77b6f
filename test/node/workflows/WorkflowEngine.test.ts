import { Activity, DurableClock, DurableDeferred, Workflow } from "@effect/workflow"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema, TestClock } from "effect"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import { fresh, instance, rows, until } from "./support.js"

const Greet = Workflow.make({
  name: "Greet",
  payload: { name: Schema.String },
  success: Schema.String,
  idempotencyKey: ({ name }) => name
})

describe("WorkflowEngine (durable)", () => {
  it.effect("execute runs a workflow to completion and poll reads its result", () =>
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
