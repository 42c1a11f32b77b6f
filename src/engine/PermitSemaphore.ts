/**
 * The `alarmConcurrency` permits shared by every participant of one Durable
 * Object's scheduler.
 *
 * `Effect.makeSemaphore` is not used: it wakes waiters and lets them race for
 * the freed permits, so a newcomer can barge in ahead of a queued waiter and
 * the order of waiters is not kept. Here a released permit is handed directly
 * to the oldest waiter in the same synchronous step that releases it: the free
 * count only grows when nobody is waiting, so there is no moment at which a
 * permit meant for a waiter can be taken by someone else.
 *
 * The state lives in memory, so it dies with the isolate; it bounds work in
 * flight, it does not survive eviction.
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { SchedulerConfig } from "./SchedulerConfig.js"
export interface Permit {
  /** Returns the permit; idempotent: a second release does nothing. A released permit is handed directly to the oldest waiter, otherwise returned to the pool. */
  readonly release: Effect.Effect<void>
}

export interface PermitSemaphore {
  readonly capacity: number
  /** Non-blocking: a permit only if one is free right now AND nobody is waiting (a newcomer never barges a waiter). */
  readonly tryAcquire: Effect.Effect<Option.Option<Permit>>
  /** Waits strictly FIFO. Interrupting a waiter removes it from the queue; if a permit was handed to it at the same moment, that permit passes on to the next waiter (never leaked). */
  readonly acquire: Effect.Effect<Permit>
  /** Free permits now. */
  readonly available: Effect.Effect<number>
  /** Fibers waiting now. */
  readonly waiting: Effect.Effect<number>
}

export const PermitSemaphore: Context.Tag<PermitSemaphore, PermitSemaphore> = Context.GenericTag<PermitSemaphore>(
  "durability/PermitSemaphore"
)

/** `permits` is not validated here: the caller checks the option and reports it in its own terms. */
export const make = (permits: number): Effect.Effect<PermitSemaphore> =>
  Effect.sync(() => {
    let free = permits
    // A Set keeps insertion order and removes an interrupted waiter in O(1).
    const waiters = new Set<Deferred.Deferred<Permit>>()

    const grant = (): Permit => {
      // Per permit, so releasing a stale copy twice cannot free a permit someone else now holds.
      let held = true
      return {
        release: Effect.sync(() => {
          if (!held) return
          held = false
          const next = waiters.values().next()
          if (next.done) {
            free++
            return
          }
          // Dequeued before completion: a waiter still in the set has, by definition, no permit.
          waiters.delete(next.value)
          Deferred.unsafeDone(next.value, Exit.succeed(grant()))
        })
      }
    }

    // Hand-off keeps `free > 0` only while the queue is empty; the `waiters` check states the rule anyway.
    const takeFree = (): Permit | undefined => {
      if (free === 0 || waiters.size > 0) return undefined
      free--
      return grant()
    }

    const acquire: Effect.Effect<Permit> = Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        const permit = takeFree()
        if (permit !== undefined) return Effect.succeed(permit)
        const waiter = Deferred.unsafeMake<Permit>(FiberId.none)
        waiters.add(waiter)
        return restore(Deferred.await(waiter)).pipe(
          Effect.onInterrupt(() => {
            if (waiters.delete(waiter)) return Effect.void
            // Not queued any more, so a release completed the deferred just as we were
            // interrupted: pass that permit on instead of dropping it.
            return Effect.flatMap(Deferred.await(waiter), (handed) => handed.release)
          })
        )
      })
    )

    return PermitSemaphore.of({
      capacity: permits,
      tryAcquire: Effect.sync(() => Option.fromNullable(takeFree())),
      acquire,
      available: Effect.sync(() => free),
      waiting: Effect.sync(() => waiters.size)
    })
  })

/** `permits` permits. */
export const layerCapacity = (permits: number): Layer.Layer<PermitSemaphore> => Layer.effect(PermitSemaphore, make(permits))

/** The engine's permits: `alarmConcurrency` of them. */
export const layer: Layer.Layer<PermitSemaphore, never, SchedulerConfig> = Layer.effect(
  PermitSemaphore,
  Effect.flatMap(SchedulerConfig, (config) => make(config.alarmConcurrency))
)
