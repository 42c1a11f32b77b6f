import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option } from "effect"
import * as PermitSemaphore from "../../src/engine/PermitSemaphore.js"

// Forked fibers start on the next scheduler turn; yield until the queue holds
// `n` waiters so the enqueue order is the fork order.
const untilWaiting = (semaphore: PermitSemaphore.PermitSemaphore, n: number) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 1000; turn++) {
      if ((yield* semaphore.waiting) === n) return
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage(`never reached ${n} waiters`)
  })

const settle = Effect.gen(function*() {
  for (let turn = 0; turn < 20; turn++) yield* Effect.yieldNow()
})

const counts = (semaphore: PermitSemaphore.PermitSemaphore) =>
  Effect.all({ available: semaphore.available, waiting: semaphore.waiting })

describe("PermitSemaphore", () => {
  it.effect("never hands out more than its capacity", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(2)
      expect(semaphore.capacity).toBe(2)
      const first = yield* semaphore.acquire
      yield* semaphore.acquire
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 0 })
      expect(Option.isNone(yield* semaphore.tryAcquire)).toBe(true)

      const third = yield* Effect.fork(semaphore.acquire)
      yield* untilWaiting(semaphore, 1)
      yield* settle
      expect(yield* Fiber.poll(third)).toEqual(Option.none())

      yield* first.release
      yield* Fiber.join(third)
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 0 })
    }))

  it.effect("tryAcquire takes a free permit and returns none when full", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(1)
      const permit = yield* semaphore.tryAcquire
      expect(Option.isSome(permit)).toBe(true)
      expect(yield* semaphore.available).toBe(0)
      expect(Option.isNone(yield* semaphore.tryAcquire)).toBe(true)
      if (Option.isSome(permit)) yield* permit.value.release
      expect(yield* semaphore.available).toBe(1)
    }))

  it.effect("a release while a waiter is queued goes to the waiter, never to a newcomer", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(1)
      const order: Array<string> = []
      const held = yield* semaphore.acquire
      const waiter = yield* Effect.fork(
        semaphore.acquire.pipe(Effect.tap(() => order.push("waiter")))
      )
      yield* untilWaiting(semaphore, 1)

      // Same synchronous step: release, then a newcomer tries at once.
      yield* held.release
      expect(Option.isNone(yield* semaphore.tryAcquire)).toBe(true)
      expect(yield* semaphore.available).toBe(0)
      const newcomer = yield* Effect.fork(
        semaphore.acquire.pipe(Effect.tap(() => order.push("newcomer")))
      )

      const permit = yield* Fiber.join(waiter)
      yield* untilWaiting(semaphore, 1)
      yield* settle
      expect(order).toEqual(["waiter"])
      expect(yield* Fiber.poll(newcomer)).toEqual(Option.none())

      yield* permit.release
      const last = yield* Fiber.join(newcomer)
      expect(order).toEqual(["waiter", "newcomer"])
      yield* last.release
      expect(yield* counts(semaphore)).toEqual({ available: 1, waiting: 0 })
    }))

  it.effect("serves five waiters in exactly the order they queued", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(1)
      const order: Array<string> = []
      const held = yield* semaphore.acquire
      const names = ["A", "B", "C", "D", "E"]
      const fibers: Array<Fiber.RuntimeFiber<void>> = []
      for (const [index, name] of names.entries()) {
        fibers.push(
          yield* Effect.fork(
            Effect.gen(function*() {
              const permit = yield* semaphore.acquire
              order.push(name)
              yield* Effect.yieldNow()
              yield* permit.release
            })
          )
        )
        yield* untilWaiting(semaphore, index + 1)
      }
      expect(yield* semaphore.waiting).toBe(5)

      yield* held.release
      yield* Fiber.joinAll(fibers)
      expect(order).toEqual(names)
      expect(yield* counts(semaphore)).toEqual({ available: 1, waiting: 0 })
    }))

  it.effect("a second release of the same permit does nothing", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(2)
      const permit = yield* semaphore.acquire
      yield* permit.release
      yield* permit.release
      expect(yield* semaphore.available).toBe(2)

      // With waiters queued, a double release must not hand out a second permit.
      const held = yield* semaphore.acquire
      yield* semaphore.acquire
      const first = yield* Effect.fork(semaphore.acquire)
      yield* untilWaiting(semaphore, 1)
      yield* Effect.fork(semaphore.acquire)
      yield* untilWaiting(semaphore, 2)
      yield* held.release
      yield* held.release
      yield* Fiber.join(first)
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 1 })
    }))

  it.effect("an interrupted waiter leaves the queue and the next waiter gets the permit", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(1)
      const held = yield* semaphore.acquire
      const first = yield* Effect.fork(semaphore.acquire)
      yield* untilWaiting(semaphore, 1)
      const second = yield* Effect.fork(semaphore.acquire)
      yield* untilWaiting(semaphore, 2)

      const exit = yield* Fiber.interrupt(first)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 1 })

      yield* held.release
      const permit = yield* Fiber.join(second)
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 0 })
      yield* permit.release
      expect(yield* counts(semaphore)).toEqual({ available: 1, waiting: 0 })
    }))

  describe("a permit handed to a waiter interrupted at the same moment is not leaked", () => {
    const scenario = (race: (held: PermitSemaphore.Permit, first: Fiber.RuntimeFiber<unknown>) => Effect.Effect<void>) =>
      Effect.gen(function*() {
        const semaphore = yield* PermitSemaphore.make(1)
        const held = yield* semaphore.acquire
        const first = yield* Effect.fork(semaphore.acquire)
        yield* untilWaiting(semaphore, 1)
        const second = yield* Effect.fork(semaphore.acquire)
        yield* untilWaiting(semaphore, 2)

        yield* race(held, first)
        const exit = yield* Fiber.await(first)
        expect(Exit.isInterrupted(exit)).toBe(true)

        // The interrupted waiter's cleanup passed the permit on; a leak would leave `second` queued.
        yield* settle
        expect(yield* semaphore.waiting).toBe(0)
        const permit = yield* Fiber.join(second)
        yield* permit.release
        expect(yield* counts(semaphore)).toEqual({ available: 1, waiting: 0 })
      })

    // `interruptAsFork` only posts the signal to the fiber's inbox, so both the
    // hand-off and the interruption are pending when the waiter next runs.
    const interruptNow = (fiber: Fiber.RuntimeFiber<unknown>) =>
      Effect.fiberIdWith((id) => Fiber.interruptAsFork(fiber, id))

    it.effect("release, then interrupt", () =>
      scenario((held, first) =>
        Effect.gen(function*() {
          yield* held.release
          yield* interruptNow(first)
        })
      ))

    it.effect("interrupt, then release before the waiter runs its cleanup", () =>
      scenario((held, first) =>
        Effect.gen(function*() {
          yield* interruptNow(first)
          yield* held.release
        })
      ))
  })

  it.effect("reports available and waiting as permits move", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(3)
      expect(yield* counts(semaphore)).toEqual({ available: 3, waiting: 0 })
      const a = yield* semaphore.acquire
      const b = yield* semaphore.acquire
      expect(yield* counts(semaphore)).toEqual({ available: 1, waiting: 0 })
      const c = yield* semaphore.acquire
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 0 })
      const w1 = yield* Effect.fork(semaphore.acquire)
      yield* untilWaiting(semaphore, 1)
      const w2 = yield* Effect.fork(semaphore.acquire)
      yield* untilWaiting(semaphore, 2)
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 2 })

      yield* a.release
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 1 })
      yield* b.release
      expect(yield* counts(semaphore)).toEqual({ available: 0, waiting: 0 })
      yield* c.release
      expect(yield* counts(semaphore)).toEqual({ available: 1, waiting: 0 })
      for (const fiber of [w1, w2]) yield* (yield* Fiber.join(fiber)).release
      expect(yield* counts(semaphore)).toEqual({ available: 3, waiting: 0 })
    }))

  it.effect("is provided by its layer", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.PermitSemaphore
      expect(semaphore.capacity).toBe(4)
      expect(yield* semaphore.available).toBe(4)
    }).pipe(Effect.provide(PermitSemaphore.layerCapacity(4))))

  it.effect("200 fibers through 3 permits: at most 3 held, all finish", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(3)
      let held = 0
      let maxHeld = 0
      let finished = 0
      yield* Effect.forEach(
        Array.from({ length: 200 }, (_, index) => index),
        (index) =>
          Effect.acquireUseRelease(
            semaphore.acquire,
            () =>
              Effect.gen(function*() {
                held++
                maxHeld = Math.max(maxHeld, held)
                for (let turn = 0; turn < index % 4; turn++) yield* Effect.yieldNow()
                held--
                finished++
              }),
            (permit) => permit.release
          ),
        { concurrency: "unbounded", discard: true }
      )
      expect(maxHeld).toBe(3)
      expect(finished).toBe(200)
      expect(yield* counts(semaphore)).toEqual({ available: 3, waiting: 0 })
    }))

  it.effect("200 fibers through 3 permits with every fifth one interrupted: no permit lost", () =>
    Effect.gen(function*() {
      const semaphore = yield* PermitSemaphore.make(3)
      let held = 0
      let maxHeld = 0
      // Counted in a finalizer, so a holder interrupted mid-use still gives its count back.
      const hold = (turns: number) =>
        Effect.acquireUseRelease(
          Effect.sync(() => {
            held++
            maxHeld = Math.max(maxHeld, held)
          }),
          () => Effect.repeatN(Effect.yieldNow(), turns),
          () => Effect.sync(() => held--)
        )
      const fibers: Array<Fiber.RuntimeFiber<void>> = []
      for (let index = 0; index < 200; index++) {
        fibers.push(
          yield* Effect.fork(
            Effect.acquireUseRelease(
              // The wait stays interruptible inside acquireUseRelease's uninterruptible acquire.
              Effect.interruptible(semaphore.acquire),
              () => hold(index % 3),
              (permit) => permit.release
            )
          )
        )
      }
      yield* Effect.yieldNow()
      yield* Effect.forEach(
        fibers.filter((_, index) => index % 5 === 4),
        (fiber) => Fiber.interruptFork(fiber),
        { discard: true }
      )
      const exits = yield* Effect.forEach(fibers, Fiber.await)
      const interrupted = exits.filter(Exit.isInterrupted).length
      expect(exits.filter(Exit.isSuccess).length + interrupted).toBe(200)
      expect(interrupted).toBeGreaterThan(0)
      expect(maxHeld).toBe(3)
      expect(held).toBe(0)
      expect(yield* counts(semaphore)).toEqual({ available: 3, waiting: 0 })
    }))
})
