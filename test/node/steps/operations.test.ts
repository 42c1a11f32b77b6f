/**
 * Durable steps in operation handlers (Effect face, `Operations.step`) on one simulated object
 * under TestClock: a stored step is replayed, not re-run, after a later failure and after an
 * eviction; a failed step is not stored; the memos go with the call's end, purge and cancel; names
 * are unique within one attempt; results are JSON or a schema's encoding, with clear errors.
 * Assertions read the memo table and count the real runs of each step's side effect.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Schema, TestClock } from "effect"
import { DurableStepError, NonRetryableError } from "../../../src/shared/Errors.js"
import * as Operations from "../../../src/operations/Operations.js"
import type * as Scheduler from "../../../src/engine/Scheduler.js"
import type { StorageService } from "../../../src/engine/StorageService.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { memoNames, memos, sideEffects, type TestObject } from "./support.js"

type Call<P = null> = Operations.DurableCall<P>

const rowOf = (object: TestObject, id: string) =>
  Effect.sync(() => object.storage.sql.exec("SELECT * FROM durability_calls WHERE id = ?", id).toArray()[0])

const RETRIES = { maxAttempts: 3, delay: () => 1_000 }

describe("a stored step is replayed, not re-run", () => {
  it.scoped("on the retry after a later failure: the stored result comes back and the side effect ran once", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const effects = sideEffects()
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({
          retries: RETRIES,
          handler: (call: Call) =>
            Effect.gen(function*() {
              const charge = yield* Operations.step("charge", effects.run("charge", { chargeId: `ch-${call.attempt}` }))
              if (call.attempt === 1) return yield* Effect.fail(new Error("the mail server is down"))
              const mail = yield* Operations.step("email", effects.run("email", `mailed on attempt ${call.attempt}`))
              return { charge, mail }
            })
        })
      }))
      yield* object.run(ops.register("pay", { id: "inv-1", payload: null }))
      yield* TestClock.adjust(0)
      expect(effects.runs).toEqual({ charge: 1 })
      expect(yield* rowOf(object, "inv-1")).toMatchObject({ status: "pending", attempt: 1 })
      expect(yield* memos(object)).toMatchObject([
        { capability: "operations", record_key: "inv-1", name: "charge", value: JSON.stringify({ kind: "value", value: { chargeId: "ch-1" } }) }
      ])

      yield* TestClock.adjust(1_000)
      // The same step name in a later attempt is no duplicate: it replays.
      expect(effects.runs).toEqual({ charge: 1, email: 1 })
      expect(yield* object.run(ops.getResult("pay", "inv-1"))).toEqual({
        status: "completed",
        result: { charge: { chargeId: "ch-1" }, mail: "mailed on attempt 2" }
      })
      // Deleted with the completing write.
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("after an eviction mid-handler: the next instance's attempt gets the step stored before it", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const effects = sideEffects()
      const definitions = (instance: string) => ({
        ship: Operations.operation({
          handler: (call: Call<{ readonly sku: string }>) =>
            Effect.gen(function*() {
              const label = yield* Operations.step("label", effects.run("label", `label from ${instance}`))
              // The first instance never gets past here: it is evicted.
              if (instance === "first") yield* Effect.never
              const sent = yield* Operations.step("send", effects.run("send", `${call.payload.sku} sent`))
              return { label, sent, attempt: call.attempt }
            })
        })
      })
      const before = yield* first.run(Operations.make(definitions("first")))
      yield* first.run(before.register("ship", { id: "order-7", payload: { sku: "A-1" } }))
      yield* TestClock.adjust(0)
      expect(yield* memoNames(first)).toEqual(["order-7:label=\"label from first\""])

      const second = yield* first.restart
      const after = yield* second.run(Operations.make(definitions("second")))
      expect(yield* second.fireAlarm()).toBe(true)
      expect(effects.runs).toEqual({ label: 1, send: 1 })
      expect(yield* second.run(after.getResult("ship", "order-7"))).toEqual({
        status: "completed",
        result: { label: "label from first", sent: "A-1 sent", attempt: 2 }
      })
      expect(yield* memos(second)).toEqual([])
    }))
})

describe("a failed step", () => {
  it.scoped("is not stored: the attempt fails as usual and the next attempt runs the step again", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let runs = 0
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({
          retries: RETRIES,
          handler: (call: Call) =>
            Operations.step(
              "charge",
              Effect.suspend(() => ++runs === 1 ? Effect.fail(new Error("card declined")) : Effect.succeed(`ch-${call.attempt}`))
            )
        })
      }))
      yield* object.run(ops.register("pay", { id: "inv-2", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* rowOf(object, "inv-2")).toMatchObject({ status: "pending", attempt: 1, last_error: "card declined" })
      expect(yield* memos(object)).toEqual([])
      yield* TestClock.adjust(1_000)
      expect(runs).toBe(2)
      expect(yield* object.run(ops.getResult("pay", "inv-2"))).toEqual({ status: "completed", result: "ch-2" })
    }))

  it.scoped("frees its name: retried in the same attempt (Effect.retry), it runs until it succeeds and is stored once", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      let runs = 0
      const gate = yield* Deferred.make<void>()
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({
          handler: (_: Call) =>
            Effect.gen(function*() {
              const charge = yield* Operations.step(
                "charge",
                Effect.suspend(() => ++runs < 3 ? Effect.fail(new Error(`try ${runs}`)) : Effect.succeed(runs))
              ).pipe(Effect.retry({ times: 5 }))
              yield* Deferred.await(gate)
              return charge
            })
        })
      }))
      yield* object.run(ops.register("pay", { id: "inv-3", payload: null }))
      yield* TestClock.adjust(0)
      expect(runs).toBe(3)
      expect(yield* memoNames(object)).toEqual(["inv-3:charge=3"])
      yield* Deferred.succeed(gate, undefined)
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("pay", "inv-3"))).toEqual({ status: "completed", result: 3 })
    }))
})

describe("the memos of a call are deleted", () => {
  /** An operation whose handler stores step "a" and then waits on `gate` (then fails for good when `fail`). */
  const held = (object: TestObject, options: { readonly fail?: boolean; readonly stubborn?: boolean } = {}) =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const effects = sideEffects()
      const ops = yield* object.run(Operations.make({
        work: Operations.operation({
          handler: (_: Call) => {
            const body = Effect.gen(function*() {
              yield* Operations.step("a", effects.run("a", "A"))
              yield* Deferred.await(gate)
              // A step after the record is gone (purged, canceled) stores nothing.
              yield* Operations.step("b", effects.run("b", "B"))
              if (options.fail === true) return yield* new NonRetryableError({ message: "gave up" })
              return "done"
            })
            return options.stubborn === true ? Effect.uninterruptible(body) : body
          }
        })
      }))
      yield* object.run(ops.register("work", { id: "w", payload: null }))
      yield* TestClock.adjust(0)
      expect(yield* memoNames(object)).toEqual(["w:a=\"A\""])
      return { ops, effects, open: Deferred.succeed(gate, undefined) }
    })

  it.scoped("when the call fails for good", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { ops, open } = yield* held(object, { fail: true })
      yield* open
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("work", "w"))).toMatchObject({ status: "failed", error: { name: "NonRetryableError" } })
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("when the call is purged; its handler, still running, stores no step after that", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { effects, open, ops } = yield* held(object, { stubborn: true })
      yield* TestClock.adjust(5)
      expect(yield* object.run(ops.purgeBefore(1))).toBe(1)
      expect(yield* memos(object)).toEqual([])
      yield* open
      yield* TestClock.adjust(0)
      // The step ran (the handler ignored its abort), but its result had no record to belong to.
      expect(effects.runs).toEqual({ a: 1, b: 1 })
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("when the call is canceled; its handler, still running, stores no step after that", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { effects, open, ops } = yield* held(object, { stubborn: true })
      expect(yield* object.run(ops.cancel("work", "w"))).toBe(true)
      expect(yield* memos(object)).toEqual([])
      yield* open
      yield* TestClock.adjust(0)
      expect(effects.runs).toEqual({ a: 1, b: 1 })
      expect(yield* memos(object)).toEqual([])
      expect(yield* object.run(ops.getResult("work", "w"))).toMatchObject({ status: "failed", error: { name: "DurableCanceledError" } })
    }))

  it.scoped("when the call's row gets another generation (a record re-armed in place): only the old generation's", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      yield* held(object)
      const sql = object.storage.sql
      sql.exec("INSERT INTO durability_steps VALUES ('operations', 'w', 'g-next', 'a', '{\"kind\":\"value\",\"value\":1}', 0)")
      sql.exec("UPDATE durability_calls SET generation_id = 'g-next' WHERE id = 'w'")
      expect((yield* memos(object)).map((row) => `${row.generation}:${row.name}`)).toEqual(["g-next:a"])
      // An update that keeps the generation changes nothing.
      sql.exec("UPDATE durability_calls SET generation_id = 'g-next', last_error = 'x' WHERE id = 'w'")
      expect(yield* memos(object)).toHaveLength(1)
    }))
})

describe("step names", () => {
  it.scoped("a name used twice in one attempt fails with DurableStepError naming the step, terminal; the second never runs", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const effects = sideEffects()
      const errors: Array<unknown> = []
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({
          retries: RETRIES,
          handler: (_: Call) =>
            Effect.gen(function*() {
              yield* Operations.step("charge", effects.run("first", 1))
              return yield* Operations.step("charge", effects.run("second", 2)).pipe(Effect.tapError((error) => Effect.sync(() => errors.push(error))))
            })
        })
      }))
      yield* object.run(ops.register("pay", { id: "dup", payload: null }))
      yield* TestClock.adjust(0)
      expect(errors).toHaveLength(1)
      expect(errors[0]).toBeInstanceOf(DurableStepError)
      expect(errors[0]).toMatchObject({ step: "charge", reason: "duplicate" })
      expect(effects.runs).toEqual({ first: 1 })
      expect(yield* rowOf(object, "dup")).toMatchObject({
        status: "failed",
        attempt: 1,
        last_error_name: "DurableStepError",
        last_error: "Step \"charge\" is used twice in one attempt: step names must be unique within a handler's run"
      })
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("an invalid name fails with DurableStepError before the step runs", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const effects = sideEffects()
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({ handler: (_: Call) => Operations.step("", effects.run("unnamed", 1)) })
      }))
      yield* object.run(ops.register("pay", { id: "bad-name", payload: null }))
      yield* TestClock.adjust(0)
      expect(effects.runs).toEqual({})
      expect(yield* object.run(ops.getResult("pay", "bad-name"))).toEqual({
        status: "failed",
        attempt: 1,
        error: { name: "DurableStepError", message: "A step name must be a non-empty string of at most 512 characters, got \"\"" }
      })
    }))
})

describe("step results", () => {
  it.scoped("a result that is not JSON: a compile error, and at run time a terminal DurableStepError; the side effect ran once", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const effects = sideEffects()
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({
          retries: RETRIES,
          handler: (_: Call) =>
            Effect.asVoid(
              // @ts-expect-error -- a Date is not JSON: the step needs a result schema
              Operations.step("when", effects.run("when", { at: new Date(0) }))
            )
        })
      }))
      yield* object.run(ops.register("pay", { id: "date", payload: null }))
      yield* TestClock.adjust(5_000)
      expect(effects.runs).toEqual({ when: 1 })
      expect(yield* object.run(ops.getResult("pay", "date"))).toEqual({
        status: "failed",
        attempt: 1,
        error: {
          name: "DurableStepError",
          message: "The result of step \"when\" is not JSON-serializable: result.at is a Date (give the step a result schema that encodes it to JSON)"
        }
      })
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("a result over the row limit: a terminal DurableStepError with its size", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({ handler: (_: Call) => Operations.step("big", Effect.succeed("x".repeat(2 * 1024 * 1024))) })
      }))
      yield* object.run(ops.register("pay", { id: "big", payload: null }))
      yield* TestClock.adjust(0)
      const result = yield* object.run(ops.getResult("pay", "big"))
      expect(result).toMatchObject({ status: "failed", attempt: 1, error: { name: "DurableStepError" } })
      expect(result.status === "failed" ? result.error.message : "").toMatch(
        /^The result of step "big" is 20971\d\d bytes as JSON; a stored row is limited to 2097152 bytes$/
      )
      expect(yield* memos(object)).toEqual([])
    }))

  it.scoped("a result schema: its encoded form is stored and decoded on replay (a Date through Schema.Date)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const effects = sideEffects()
      const seen: Array<unknown> = []
      const ops = yield* object.run(Operations.make({
        pay: Operations.operation({
          retries: RETRIES,
          handler: (call: Call) =>
            Effect.gen(function*() {
              const at = yield* Operations.step("at", effects.run("at", new Date(1_234_567)), { result: Schema.Date })
              seen.push(at)
              if (call.attempt === 1) return yield* Effect.fail(new Error("later failure"))
              return at.toISOString()
            })
        })
      }))
      yield* object.run(ops.register("pay", { id: "dated", payload: null }))
      yield* TestClock.adjust(0)
      expect((yield* memos(object)).map((row) => row.value)).toEqual([
        JSON.stringify({ kind: "value", value: "1970-01-01T00:20:34.567Z" })
      ])
      yield* TestClock.adjust(1_000)
      expect(effects.runs).toEqual({ at: 1 })
      expect(seen).toHaveLength(2)
      expect(seen[1]).toBeInstanceOf(Date)
      expect(seen[1]).toEqual(new Date(1_234_567))
      expect(yield* object.run(ops.getResult("pay", "dated"))).toEqual({ status: "completed", result: "1970-01-01T00:20:34.567Z" })
    }))

  it.scoped("a stored result its (changed) schema no longer decodes: a terminal DurableStepError, the step not re-run", () =>
    Effect.gen(function*() {
      const first = yield* TestDurability.make()
      const effects = sideEffects()
      const before = yield* first.run(Operations.make({
        pay: Operations.operation({
          handler: (_: Call) => Effect.zipRight(Operations.step("amount", effects.run("amount", 42)), Effect.never)
        })
      }))
      yield* first.run(before.register("pay", { id: "changed", payload: null }))
      yield* TestClock.adjust(0)
      const second = yield* first.restart
      const after = yield* second.run(Operations.make({
        pay: Operations.operation({
          handler: (_: Call) => Operations.step("amount", effects.run("amount", "42"), { result: Schema.String })
        })
      }))
      expect(yield* second.fireAlarm()).toBe(true)
      expect(effects.runs).toEqual({ amount: 1 })
      expect(yield* second.run(after.getResult("pay", "changed"))).toMatchObject({
        status: "failed",
        attempt: 2,
        error: { name: "DurableStepError", message: "The stored result of step \"amount\" does not decode with its result schema: result: Expected string, actual 42" }
      })
    }))
})

describe("types", () => {
  it("a handler's steps are not a requirement of Operations.make", () => {
    const made: Effect.Effect<unknown, unknown, Scheduler.Scheduler | StorageService> = Operations.make({
      pay: Operations.operation({ handler: (_: Call) => Operations.step("charge", Effect.succeed(1)) })
    })
    expect(Effect.isEffect(made)).toBe(true)
  })
})
