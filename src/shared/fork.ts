/**
 * Forks long-lived work (timers, passes, executions) into a scope, always
 * interruptible. The callers are often finalizers (`ensuring`), which run
 * uninterruptibly, and a fork inherits that: an uninterruptible execution would
 * make every timeout race wait out its losing sleep and ignore eviction.
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
export const detached = <A, E>(
  effect: Effect.Effect<A, E>,
  scope: Scope.Scope
): Effect.Effect<Fiber.RuntimeFiber<A, E>> => Effect.forkIn(Effect.interruptible(effect), scope)

/**
 * A promise that resolves (never rejects) once `fiber` has ended, for
 * `waitUntil`. Same as `Effect.runPromise(Fiber.await(fiber))` without running
 * a fiber of its own.
 */
export const settled = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Promise<void> =>
  new Promise((resolve) => fiber.addObserver(() => resolve()))
