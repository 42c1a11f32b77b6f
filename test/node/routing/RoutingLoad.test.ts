/**
 * An object's load telemetry on both faces: a finish counts once, averages are over the calls
 * finished within the last minute (60 one-second buckets, each dropped when its second leaves the
 * window), and a call still in flight is counted however long it runs. The Effect service reads
 * TestClock; the promise class reads `Date.now()`, pinned with fake timers (its own service, through
 * `serviceOf`, runs under TestClock too).
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { vi } from "vitest"
import { RoutingLoad as PromiseLoad, serviceOf } from "../../../src/facade/RoutingLoad.js"
import * as RoutingLoad from "../../../src/routing/RoutingLoad.js"

const idle = { inFlight: 0, completed: 0, averageProcessingMs: null }

describe("RoutingLoad (Effect)", () => {
  it.effect("an empty load: nothing in flight, no samples, the backlog as given", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const load = yield* RoutingLoad.make
      expect(yield* load.snapshot(7)).toEqual({
        observedAt: 100_000,
        windowMs: 60_000,
        inbound: idle,
        outbound: { ...idle, pendingDeliveries: 7 }
      })
      expect(RoutingLoad.emptySnapshot(5)).toEqual({ observedAt: 5, windowMs: 60_000, inbound: idle, outbound: { ...idle, pendingDeliveries: 0 } })
    }))

  it.effect("a finish counts once; the average is over the finished calls only", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const load = yield* RoutingLoad.make
      const first = yield* load.begin("inbound")
      yield* TestClock.adjust(10)
      const second = yield* load.begin("inbound")
      yield* TestClock.adjust(20)
      yield* first
      yield* first
      expect((yield* load.snapshot(0)).inbound).toEqual({ inFlight: 1, completed: 1, averageProcessingMs: 30 })
      yield* TestClock.adjust(20)
      yield* second
      const snapshot = yield* load.snapshot(3)
      expect(snapshot.inbound).toEqual({ inFlight: 0, completed: 2, averageProcessingMs: 35 })
      // The directions are apart: nothing outbound was counted.
      expect(snapshot.outbound).toEqual({ ...idle, pendingDeliveries: 3 })
    }))

  it.effect("each one-second bucket leaves the window when its second is 60 s old", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const load = yield* RoutingLoad.make
      // One call finishing in each of the seconds 100, 101 and 130.
      for (const at of [100_000, 101_500, 130_200]) {
        yield* TestClock.setTime(at - 100)
        const end = yield* load.begin("outbound")
        yield* TestClock.setTime(at)
        yield* end
      }
      yield* TestClock.setTime(159_999)
      expect((yield* load.snapshot(0)).outbound.completed).toBe(3)
      yield* TestClock.setTime(160_000)
      expect((yield* load.snapshot(0)).outbound.completed).toBe(2)
      yield* TestClock.setTime(161_000)
      expect((yield* load.snapshot(0)).outbound.completed).toBe(1)
      yield* TestClock.setTime(190_000)
      expect((yield* load.snapshot(0)).outbound).toEqual({ ...idle, pendingDeliveries: 0 })
    }))

  it.effect("a bucket reused 60 s later starts empty (the ring never mixes two minutes)", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const load = yield* RoutingLoad.make
      yield* load.measure("inbound", TestClock.adjust(40))
      yield* TestClock.setTime(160_000) // second 160 uses second 100's slot
      yield* load.measure("inbound", TestClock.adjust(10))
      expect((yield* load.snapshot(0)).inbound).toEqual({ inFlight: 0, completed: 1, averageProcessingMs: 10 })
    }))

  it.effect("a call in flight is counted across the whole window, and its full duration when it ends", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(100_000)
      const load = yield* RoutingLoad.make
      yield* (yield* load.begin("outbound"))
      const long = yield* load.begin("outbound")
      yield* TestClock.adjust(60_000)
      expect((yield* load.snapshot(2)).outbound).toEqual({ inFlight: 1, completed: 0, averageProcessingMs: null, pendingDeliveries: 2 })
      yield* long
      expect((yield* load.snapshot(1)).outbound).toEqual({ inFlight: 0, completed: 1, averageProcessingMs: 60_000, pendingDeliveries: 1 })
    }))

  it.effect("measure ends the call however the effect exits", () =>
    Effect.gen(function*() {
      const load = yield* RoutingLoad.make
      const failed = yield* Effect.either(load.measure("inbound", Effect.zipRight(TestClock.adjust(5), Effect.fail("no"))))
      expect(failed._tag).toBe("Left")
      expect((yield* load.snapshot(0)).inbound).toEqual({ inFlight: 0, completed: 1, averageProcessingMs: 5 })
    }))

  it.effect("the layer gives one shared load to the object's capabilities", () =>
    Effect.gen(function*() {
      const a = yield* RoutingLoad.RoutingLoad
      const b = yield* RoutingLoad.RoutingLoad
      yield* a.begin("inbound")
      expect((yield* b.snapshot(0)).inbound.inFlight).toBe(1)
    }).pipe(Effect.provide(RoutingLoad.layer)))
})

describe("RoutingLoad (promise class)", () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it("counts on Date.now(): finish is idempotent, averages over finished calls", () => {
    vi.useFakeTimers()
    vi.setSystemTime(100_000)
    const load = new PromiseLoad()
    expect(load.snapshot(3).inbound).toEqual(idle)
    const first = load.begin("inbound")
    vi.advanceTimersByTime(10)
    const second = load.begin("inbound")
    vi.advanceTimersByTime(20)
    first()
    first()
    expect(load.snapshot(3).inbound).toEqual({ inFlight: 1, completed: 1, averageProcessingMs: 30 })
    vi.advanceTimersByTime(20)
    second()
    expect(load.snapshot(3)).toEqual({
      observedAt: 100_050,
      windowMs: 60_000,
      inbound: { inFlight: 0, completed: 2, averageProcessingMs: 35 },
      outbound: { ...idle, pendingDeliveries: 3 }
    })
  })

  it("expires finished calls after the window but keeps the one still in flight", () => {
    vi.useFakeTimers()
    vi.setSystemTime(100_000)
    const load = new PromiseLoad()
    load.begin("outbound")()
    const finish = load.begin("outbound")
    vi.advanceTimersByTime(60_000)
    expect(load.snapshot(2).outbound).toEqual({ inFlight: 1, completed: 0, averageProcessingMs: null, pendingDeliveries: 2 })
    finish()
    expect(load.snapshot(1).outbound).toEqual({ inFlight: 0, completed: 1, averageProcessingMs: 60_000, pendingDeliveries: 1 })
    expect(new PromiseLoad().snapshot(1).outbound.averageProcessingMs).toBeNull()
  })

  it.effect("its Effect service (serviceOf) shares the same counters, on the Effect clock", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(200_000)
      const load = new PromiseLoad()
      const service = serviceOf(load)
      const end = yield* service.begin("inbound")
      expect(load.snapshot(0).inbound.inFlight).toBe(1)
      yield* TestClock.adjust(25)
      yield* end
      expect((yield* service.snapshot(4))).toEqual({
        observedAt: 200_025,
        windowMs: 60_000,
        inbound: { inFlight: 0, completed: 1, averageProcessingMs: 25 },
        outbound: { ...idle, pendingDeliveries: 4 }
      })
      expect(load.snapshot(0).inbound.inFlight).toBe(0)
    }))

  it("serviceOf refuses anything but a RoutingLoad", () => {
    expect(() => serviceOf({} as PromiseLoad)).toThrow(new TypeError("routing must be a RoutingLoad"))
  })
})
