/**
 * A one-shot result fibers can wait for: what a `Deferred` does for the engine's per-attempt
 * signals, without building an Effect object per instance (the hot path makes two per attempt).
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"

export class Outcome<A, E = never> {
  private exit: Exit.Exit<A, E> | undefined
  private waiters: Array<(exit: Exit.Exit<A, E>) => void> = []

  get isDone(): boolean {
    return this.exit !== undefined
  }

  /** Settles it (the first call wins) and wakes every waiter. */
  done(exit: Exit.Exit<A, E>): void {
    if (this.exit !== undefined) return
    this.exit = exit
    const waiters = this.waiters
    this.waiters = []
    for (const wake of waiters) wake(exit)
  }

  succeed(value: A): void {
    this.done(Exit.succeed(value))
  }

  /** Waits for the result; interrupting the wait leaves the outcome alone. */
  readonly await: Effect.Effect<A, E> = Effect.suspend(() =>
    this.exit ?? Effect.async<A, E>((resume) => {
      const wake = (exit: Exit.Exit<A, E>) => resume(exit)
      this.waiters.push(wake)
      return Effect.sync(() => {
        this.waiters = this.waiters.filter((waiter) => waiter !== wake)
      })
    })
  )
}
