/**
 * A test as a user of the package writes it: only the public entry points
 * (`durability/effect`, `durability/testing`), an Effect handler that needs the
 * application's own service, retries driven by `TestClock`, and an eviction.
 * Nothing here waits in real time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, TestClock } from "effect"
import { Operations } from "durability/effect"
import { TestDurability } from "durability/testing"

// --- The application under test -------------------------------------------

class GatewayError extends Error {
  override readonly name = "GatewayError"
}

/** The application's payment gateway, a service its handlers need. */
class PaymentGateway extends Context.Tag("app/PaymentGateway")<PaymentGateway, {
  readonly charge: (cents: number, idempotencyKey: string) => Effect.Effect<{ readonly receipt: string }, GatewayError>
}>() {}

const charge = Operations.operation({
  retries: { maxAttempts: 5, delay: (attempt) => attempt * 1_000 },
  handler: (call: Operations.DurableCall<{ readonly cents: number }>) =>
    Effect.flatMap(PaymentGateway, (gateway) => gateway.charge(call.payload.cents, call.id))
})

const definitions = { charge }

// --- Test doubles -----------------------------------------------------------

/** A gateway that answers with the scripted outcomes, in order, and records every request. */
const scriptedGateway = (script: Array<"fail" | "ok" | "hang">) => {
  const requests: Array<string> = []
  const layer = Layer.succeed(PaymentGateway, {
    charge: (cents, idempotencyKey) =>
      Effect.suspend(() => {
        requests.push(`${idempotencyKey}:${cents}`)
        const next = script.shift() ?? "ok"
        return next === "fail"
          ? Effect.fail(new GatewayError("gateway unavailable"))
          : next === "hang"
          ? Effect.never
          : Effect.succeed({ receipt: `rcpt-${idempotencyKey}` })
      })
  })
  return { layer, requests }
}

describe("charging through durability (user kit)", () => {
  it.scoped("retries on the persisted schedule and completes once", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const gateway = scriptedGateway(["fail", "fail", "ok"])
      const ops = yield* object.run(Operations.make(definitions).pipe(Effect.provide(gateway.layer)))

      yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 500 } }))
      yield* TestClock.adjust(0)
      // The first attempt ran at once and failed; the retry is persisted 1 s later.
      expect(yield* object.run(ops.getResult("charge", "inv-1"))).toEqual({
        status: "pending",
        attempt: 1,
        nextAttemptAt: 1_000,
        lastError: "gateway unavailable",
        error: { name: "GatewayError", message: "gateway unavailable" }
      })

      const waiter = yield* Effect.fork(object.run(ops.wait("charge", "inv-1", 60_000)))
      yield* TestClock.adjust(1_000)
      expect(yield* object.run(ops.getResult("charge", "inv-1"))).toMatchObject({
        status: "pending",
        attempt: 2,
        nextAttemptAt: 3_000
      })
      yield* TestClock.adjust(2_000)
      expect(yield* Fiber.join(waiter)).toEqual({ status: "completed", result: { receipt: "rcpt-inv-1" } })
      expect(gateway.requests).toEqual(["inv-1:500", "inv-1:500", "inv-1:500"])

      // Registering the same id again is a no-op: the customer is charged once.
      yield* object.run(ops.register("charge", { id: "inv-1", payload: { cents: 500 } }))
      yield* TestClock.adjust(60_000)
      expect(gateway.requests).toHaveLength(3)
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("resumes the interrupted charge after the object is evicted", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      // The first request never answers: the isolate is evicted while it is in flight.
      const gateway = scriptedGateway(["hang", "ok"])
      const ops = yield* object.run(Operations.make(definitions).pipe(Effect.provide(gateway.layer)))
      yield* object.run(ops.register("charge", { id: "inv-2", payload: { cents: 700 } }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(ops.getResult("charge", "inv-2"))).toMatchObject({ status: "pending", attempt: 1 })
      expect(object.storage.alarmAt).toBe(15_000)

      // Eviction: memory is gone, storage and the alarm stay. The new instance makes its capabilities again.
      const next = yield* object.restart
      const resumed = yield* next.run(Operations.make(definitions).pipe(Effect.provide(gateway.layer)))
      expect(yield* next.fireAlarm()).toBe(true)

      expect(yield* next.run(resumed.getResult("charge", "inv-2"))).toEqual({
        status: "completed",
        result: { receipt: "rcpt-inv-2" }
      })
      expect(gateway.requests).toEqual(["inv-2:700", "inv-2:700"])
      expect(next.storage.alarmAt).toBeNull()
    }))
})
