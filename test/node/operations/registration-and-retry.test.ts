/**
 * What a registration tells its caller (created, existing, conflicting), re-running a failed call
 * by id, and the operations' calls as one property per operation, on one simulated object
 * (TestDurability, TestClock): rows, results and logs are what is asserted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { NonRetryableError } from "../../../src/shared/Errors.js"
import * as Operations from "../../../src/operations/Operations.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"

type Call<P = unknown> = Operations.DurableCall<P>

const rowOf = (object: TestDurability.TestObject, id: string) =>
  Effect.sync(() => object.storage.sql.exec("SELECT * FROM durability_calls WHERE id = ?", id).toArray()[0])

describe("registration results", () => {
  it.scoped("created, existing (same payload, key order aside) and conflicting (ignored, logged once)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const runs: Array<string> = []
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({
          handler: (call: Call<{ readonly to: string; readonly cc?: string }>) => Effect.sync(() => runs.push(`${call.id} ${call.payload.to}`))
        })
      }))
      expect(yield* object.run(ops.send.register({ id: "a", payload: { to: "x", cc: "y" } }))).toEqual({ id: "a", status: "created" })
      expect(yield* object.run(ops.send.register({ id: "a", payload: { cc: "y", to: "x" } }))).toEqual({ id: "a", status: "existing" })
      expect(yield* object.run(ops.register("send", { id: "a", payload: { to: "z" } }))).toEqual({ id: "a", status: "conflicting" })
      yield* TestClock.adjust(0)
      expect(runs).toEqual(["a x"])
      expect(JSON.parse(String((yield* rowOf(object, "a"))!.payload))).toEqual({ kind: "value", value: { to: "x", cc: "y" } })
      const logs = yield* object.logs
      expect(logs.filter((line) => line.event === "durability.operation.conflicting")).toEqual([
        expect.objectContaining({
          level: "WARN",
          operation: "send",
          id: "a",
          message: 'Durable call "a" of operation "send" is registered already with another payload: the new payload ' +
            "was ignored (an id runs once; use a new id, or retry/purge the old call)"
        })
      ])
      // A batch answers per call, in order; the conflicting one writes nothing, the new one is written.
      expect(yield* object.run(ops.send.registerMany([
        { id: "b", payload: { to: "b" } },
        { id: "a", payload: { to: "other" } },
        { id: "a", payload: { to: "x", cc: "y" } }
      ]))).toEqual([
        { id: "b", status: "created" },
        { id: "a", status: "conflicting" },
        { id: "a", status: "existing" }
      ])
      yield* TestClock.adjust(0)
      expect(runs).toEqual(["a x", "b b"])
    }))
})

describe("retry(id)", () => {
  it.scoped("a call failed for good runs again with a new generation, attempts from one, and completes", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let fixed = false
      const attempts: Array<string> = []
      const ops = yield* object.run(Operations.make({
        resize: Operations.operation({
          retries: { maxAttempts: 2, delay: () => 1_000 },
          handler: (call: Call<null>) =>
            Effect.suspend(() => {
              attempts.push(`${call.id}#${call.attempt}`)
              return fixed ? Effect.succeed("done") : Effect.fail(new Error("no such table: images"))
            })
        })
      }))
      yield* object.run(ops.resize.register({ id: "r", payload: null }))
      yield* TestClock.adjust(1_000)
      expect(yield* object.run(ops.resize.getResult("r"))).toEqual({
        status: "failed",
        attempt: 2,
        error: { name: "Error", message: "no such table: images" }
      })
      const before = String((yield* rowOf(object, "r"))!.generation_id)
      // Its cause fixed, the same id runs again: registering it again would not (it exists).
      fixed = true
      expect(yield* object.run(ops.resize.register({ id: "r", payload: null }))).toEqual({ id: "r", status: "existing" })
      expect(yield* object.run(ops.resize.retry("r"))).toBe(true)
      const row = yield* rowOf(object, "r")
      expect(row).toMatchObject({ status: "pending", attempt: 0, last_error: null, last_error_name: null })
      expect(String(row!.generation_id)).not.toBe(before)
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.resize.wait("r", { timeoutMs: Duration.seconds(1) }))).toEqual({ status: "completed", result: "done" })
      expect(attempts).toEqual(["r#1", "r#2", "r#1"])
      // Only a failed call: completed, pending and absent ones are left as they are.
      expect(yield* object.run(ops.resize.retry("r"))).toBe(false)
      expect(yield* object.run(ops.retry("resize", "missing"))).toBe(false)
      expect(yield* rowOf(object, "missing")).toBeUndefined()
    }))

  it.scoped("a canceled call can be retried; an id of another operation is a DuplicateDurableCallError", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({ handler: () => Effect.succeed("sent") }),
        fail: Operations.operation({ handler: () => Effect.fail(new NonRetryableError({ message: "no" })) })
      }))
      yield* object.run(ops.send.register({ id: "later", payload: null, delayMs: Duration.minutes(1) }))
      expect(yield* object.run(ops.send.cancel("later"))).toBe(true)
      expect(yield* object.run(ops.send.getResult("later"))).toMatchObject({ status: "failed", error: { name: "DurableCanceledError" } })
      expect(yield* object.run(ops.send.retry("later"))).toBe(true)
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.send.getResult("later"))).toEqual({ status: "completed", result: "sent" })
      const error = yield* Effect.flip(object.run(ops.fail.retry("later")))
      expect(error).toMatchObject({ _tag: "DuplicateDurableCallError", id: "later", existing: "send", requested: "fail" })
      const bad = yield* Effect.flip(object.run(ops.send.retry("")))
      expect(bad).toMatchObject({ _tag: "InvalidInputError", field: "id" })
    }))
})

describe("one property per operation", () => {
  it.scoped("is the by-name calls; wait takes { timeoutMs } (or the time alone); a reserved name is refused before any write", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        send: Operations.operation({ handler: (call: Call<number>) => Effect.succeed(call.payload * 2) })
      }))
      yield* object.run(ops.send.register({ id: "n", payload: 21 }))
      expect(yield* object.run(ops.send.wait("n", { timeoutMs: 0 }))).toMatchObject({ status: "pending" })
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.wait("send", "n", { timeoutMs: 10 }))).toEqual({ status: "completed", result: 42 })
      expect(yield* object.run(ops.wait("send", "n", 10))).toEqual({ status: "completed", result: 42 })
      expect(yield* object.run(ops.send.list())).toMatchObject({ items: [{ id: "n", status: "completed", result: 42 }] })

      const fresh = yield* TestDurability.make()
      for (const name of Operations.RESERVED_NAMES) {
        const error = yield* Effect.flip(fresh.run(Operations.make({ [name]: Operations.operation({ handler: () => Effect.void }) })))
        expect(error).toMatchObject({ _tag: "InvalidOptionError", field: `handlers.${name}`, kind: "type" })
        expect(error.message).toContain(`"${name}" is reserved by Operations`)
      }
      expect(fresh.storage.statements).toEqual([])
    }))
})
