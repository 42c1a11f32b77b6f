/**
 * In-memory signals for callers waiting on a record to settle (job handles).
 * One signal per (key, generation); a newer generation resolves and replaces
 * the older one. Lost on eviction by design: a waiter re-reads storage.
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
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

/**
 * Waits (at most `timeoutMs`) for the record under `key` at `generation` to settle: subscribes, then
 * asks `pending` again, so a settle between the caller's read and the subscription is not missed.
 */
export const awaitSettle = <E>(
  watchers: Watchers,
  key: string,
  generation: string,
  pending: Effect.Effect<boolean, E>,
  timeoutMs: number
): Effect.Effect<void, E> =>
  Effect.gen(function*() {
    const signal = yield* watchers.signal(key, generation)
    if (!(yield* pending)) return
    yield* Effect.timeoutTo(Deferred.await(signal), {
      duration: Duration.millis(timeoutMs),
      onSuccess: () => undefined,
      onTimeout: () => undefined
    })
  })
