/**
 * The promise face's consistent forms beside the reference's (`DurabilityOperations`, `register`,
 * `wait(id, { timeoutMs })`, `retry`), the Effect face on the same scheduler (`scheduler.runtime`),
 * and `reviveError`; on `TestObjectState`, so the object's clock is the test's.
 */
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import { describe, expect, it } from "vitest"
import {
  Durability,
  DurabilityOperations,
  DurabilityScheduler,
  type DurableCall,
  DuplicateDurableCallError,
  DurableCanceledError,
  reviveError
} from "durability"
import { NamedAlarms, Operations, Scheduler } from "durability/effect"
import { TestObjectState } from "durability/testing"

describe("DurabilityOperations", () => {
  it("is Durability; register says what it did, the call itself resolves with nothing (the reference's)", async () => {
    expect(DurabilityOperations).toBe(Durability)
    const state = await TestObjectState.make()
    const scheduler = new DurabilityScheduler({ context: state.context })
    const ops = new DurabilityOperations({ scheduler, handlers: { send: (call: DurableCall<string>) => call.payload } })
    expect(await ops.send({ id: "a", payload: "x" })).toBeUndefined()
    expect(await ops.send.register({ id: "a", payload: "x" })).toEqual({ id: "a", status: "existing" })
    expect(await ops.send.register({ id: "a", payload: "y" })).toEqual({ id: "a", status: "conflicting" })
    expect(await ops.send.registerMany([{ id: "b", payload: "b" }, { id: "a", payload: "x" }])).toEqual([
      { id: "b", status: "created" },
      { id: "a", status: "existing" }
    ])
    expect(await ops.send.many([{ id: "c", payload: "c" }])).toBeUndefined()
    await state.advance(0)
    expect(await ops.send.wait("a", { timeoutMs: 0 })).toEqual({ status: "completed", result: "x" })
    expect(await ops.send.job("c").wait({ timeoutMs: 0 })).toEqual({ status: "completed", result: "c" })
  })

  it("retry(id) runs a failed call again once its cause is fixed", async () => {
    const state = await TestObjectState.make({ startTime: 5_000 })
    const scheduler = new DurabilityScheduler({ context: state.context })
    let fixed = false
    const ops = new DurabilityOperations({
      scheduler,
      retries: { maxAttempts: 1 },
      handlers: {
        resize: (call: DurableCall<number>) => {
          if (!fixed) throw new Error("no such table: images")
          return call.payload
        }
      }
    })
    await ops.resize({ id: "r", payload: 640 })
    await state.advance(0)
    expect(await ops.resize.getResult("r")).toEqual({ status: "failed", attempt: 1, error: { name: "Error", message: "no such table: images" } })
    fixed = true
    expect(await ops.resize.retry("r")).toBe(true)
    await state.advance(0)
    expect(await ops.resize.wait("r", { timeoutMs: 0 })).toEqual({ status: "completed", result: 640 })
    expect(await ops.resize.retry("r")).toBe(false)
    await expect(ops.resize.retry("")).rejects.toThrow(TypeError)
  })
})

class Ledger extends Context.Tag("test/Ledger")<Ledger, { readonly lines: Array<string> }>() {}

describe("scheduler.runtime(layer): the Effect face on the promise face's scheduler", () => {
  it("runs Effect helpers with the layer's services on the object's clock, and rejects with named errors", async () => {
    const state = await TestObjectState.make({ startTime: 1_000 })
    const scheduler = new DurabilityScheduler({ context: state.context, alarmMinDelayMs: 1_000 })
    const lines: Array<string> = []
    const promiseOps = new Durability({ scheduler, handlers: { send: (call: DurableCall<null>) => void lines.push(`send ${call.id}`) } })
    const runtime = scheduler.runtime(Layer.succeed(Ledger, { lines }))
    const alarms = await runtime.runPromise(NamedAlarms.make({
      nightly: NamedAlarms.alarm({
        handler: (info) => Effect.flatMap(Ledger, (ledger) => Effect.sync(() => ledger.lines.push(`nightly ${info.scheduledTime}`)))
      })
    }))
    await runtime.runPromise(alarms.schedule("nightly", 61_000))
    await promiseOps.send({ id: "s", payload: null })
    await state.advance("1 minute")
    expect(lines).toEqual(["send s", "nightly 61000"])

    // A second helper of one capability conflicts whichever face made it.
    await expect(runtime.runPromise(Operations.make({ other: Operations.operation({ handler: () => Effect.void }) })))
      .rejects.toThrow(/already/)
    // Bad input: a RangeError or TypeError, as on the promise face; never a FiberFailure.
    const bad = await runtime.runPromise(alarms.schedule("nightly", Number.NaN)).then(
      () => new Error("scheduled"),
      (error: unknown) => error as Error
    )
    expect(bad).toBeInstanceOf(Error)
    expect(["TypeError", "RangeError"]).toContain(bad.name)
    expect(bad.message).not.toContain("FiberFailure")
    await runtime.dispose()
  })

  it("scheduler.layer gives the same engine to a ManagedRuntime of the user's own", async () => {
    const state = await TestObjectState.make()
    const scheduler = new DurabilityScheduler({ context: state.context })
    const own = ManagedRuntime.make(scheduler.layer)
    // The very engine of the object, not a second one: the same Scheduler service as the object's own runtime.
    expect(await own.runPromise(Scheduler.Scheduler)).toBe(await scheduler.runtime().runPromise(Scheduler.Scheduler))
    const ops = await own.runPromise(Operations.make({ ping: Operations.operation({ handler: () => Effect.succeed("pong") }) }))
    // The promise face sees the same engine: its own operations helper now conflicts with the Effect one.
    expect(() => new Durability({ scheduler, handlers: { x: () => 1 } })).toThrow()
    expect(await own.runPromise(ops.ping.register({ id: "p", payload: null }))).toEqual({ id: "p", status: "created" })
    await own.dispose()
  })
})

describe("reviveError", () => {
  it("restores a library error spelled by RPC or wrapped in a FiberFailure; leaves anything else as it is", async () => {
    const overRpc = new Error(`DurableCanceledError: Durable operation "send" (id "a") was canceled`)
    const revived = reviveError(overRpc)
    expect(revived).toBeInstanceOf(DurableCanceledError)
    expect(revived.message).toBe(`Durable operation "send" (id "a") was canceled`)
    expect(revived.cause).toBe(overRpc)

    const state = await TestObjectState.make()
    const scheduler = new DurabilityScheduler({ context: state.context })
    const own = ManagedRuntime.make(scheduler.layer)
    const ops = await own.runPromise(Operations.make({
      a: Operations.operation({ handler: () => Effect.void }),
      b: Operations.operation({ handler: () => Effect.void })
    }))
    await own.runPromise(ops.a.register({ id: "x", payload: null }))
    const fiberFailure = await own.runPromise(ops.b.register({ id: "x", payload: null })).catch((error: unknown) => error)
    expect(String(fiberFailure)).toContain("FiberFailure")
    expect(reviveError(fiberFailure)).toBeInstanceOf(DuplicateDurableCallError)
    const spelledFiberFailure = new Error("(FiberFailure) InvalidInputError: id must be a non-empty string")
    expect(reviveError(spelledFiberFailure)).toMatchObject({ name: "InvalidInputError", message: "id must be a non-empty string" })

    const plain = new Error("SomethingElse: not ours")
    expect(reviveError(plain)).toBe(plain)
    const typeError = new TypeError("id must be a string")
    expect(reviveError(typeError)).toBe(typeError)
    expect(reviveError("toString: x")).toBe("toString: x")
    expect(reviveError(new Error("toString: x"))).toMatchObject({ name: "Error", message: "toString: x" })
    await own.dispose()
  })
})
