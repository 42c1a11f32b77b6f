/**
 * In-memory signals for callers waiting on a record to settle (job handles).
 * One signal per (key, generation); a newer generation resolves and replaces
 * the older one. Lost on eviction by design: a waiter re-reads storage.
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
export interface Watchers {
  /** The signal for `key` at `generation` (created on first use). */
  readonly signal: (key: string, generation: string) => Effect.Effect<Deferred.Deferred<void>>
  /** Resolves the signal of `key` (any generation). */
  readonly notify: (key: string) => void
}

export const make = (): Watchers => {
  const signals = new Map<string, { readonly generation: string; readonly done: Deferred.Deferred<void> }>()
  const resolve = (done: Deferred.Deferred<void>) => Deferred.unsafeDone(done, Effect.void)
  return {
    signal: (key, generation) =>
      Effect.sync(() => {
        const current = signals.get(key)
        if (current !== undefined && current.generation === generation) return current.done
        if (current !== undefined) resolve(current.done)
        const done = Deferred.unsafeMake<void>(FiberId.none)
        signals.set(key, { generation, done })
        return done
      }),
    notify: (key) => {
      const current = signals.get(key)
      if (current === undefined) return
      signals.delete(key)
      resolve(current.done)
    }
  }
}
