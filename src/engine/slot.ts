/**
 * A group's own limit inside the shared permits (e.g. a job queue's concurrency): `capacity`
 * permits whose waiters are served by rank, not by arrival, so records that came due while the
 * group was full still start in the table's start order (a higher priority first). Equal ranks are
 * served first come, first served. A released permit is handed to the best waiter in the same
 * synchronous step, so a newcomer never takes it from a waiter (the rule `PermitSemaphore` keeps).
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import type { Slot } from "./DurableTable.js"
import type { Permit } from "./PermitSemaphore.js"

/** Smaller starts first; compared element by element. */
export type Rank = ReadonlyArray<number>

/** A slot whose waiters can be ranked again (a record's priority changed while it waited). */
export interface RankedSlot extends Slot {
  /** Moves `key`'s waiter (if it waits) to its new rank; returns whether it waited. */
  readonly rerank: (key: string, rank: Rank) => boolean
}

export const compare = (a: Rank, b: Rank): number => {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const difference = a[i]! - b[i]!
    if (difference !== 0) return difference
  }
  return a.length - b.length
}

interface Waiter {
  readonly key: string
  readonly rank: Rank
  readonly done: Deferred.Deferred<Permit>
}

export const make = (capacity: number): RankedSlot => {
  let free = capacity
  // Sorted by rank; a newcomer goes after every waiter of an equal rank.
  const waiters: Array<Waiter> = []

  const grant = (): Permit => {
    let held = true
    return {
      release: Effect.sync(() => {
        if (!held) return
        held = false
        const next = waiters.shift()
        if (next === undefined) free++
        else Deferred.unsafeDone(next.done, Exit.succeed(grant()))
      })
    }
  }

  const takeFree = (): Permit | undefined => {
    if (free === 0 || waiters.length > 0) return undefined
    free--
    return grant()
  }

  const enqueue = (waiter: Waiter) => {
    let at = waiters.length
    while (at > 0 && compare(waiters[at - 1]!.rank, waiter.rank) > 0) at--
    waiters.splice(at, 0, waiter)
  }

  const acquire = (rank: Rank, key: string): Effect.Effect<Permit> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        const permit = takeFree()
        if (permit !== undefined) return Effect.succeed(permit)
        const waiter: Waiter = { key, rank, done: Deferred.unsafeMake<Permit>(FiberId.none) }
        enqueue(waiter)
        return restore(Deferred.await(waiter.done)).pipe(
          Effect.onInterrupt(() => {
            const index = waiters.findIndex((waiting) => waiting.done === waiter.done)
            if (index >= 0) {
              waiters.splice(index, 1)
              return Effect.void
            }
            // Handed a permit as it was interrupted: pass it on rather than drop it.
            return Effect.flatMap(Deferred.await(waiter.done), (handed) => handed.release)
          })
        )
      })
    )

  const rerank = (key: string, rank: Rank): boolean => {
    const index = waiters.findIndex((waiter) => waiter.key === key)
    if (index < 0) return false
    const [waiter] = waiters.splice(index, 1)
    enqueue({ ...waiter!, rank })
    return true
  }

  return {
    capacity,
    tryAcquire: Effect.sync(() => Option.fromNullable(takeFree())),
    acquire,
    available: Effect.sync(() => free),
    rerank
  }
}
