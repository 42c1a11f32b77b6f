/**
 * Plain handlers (the promise face's): functions that return a value or a promise of one. Called
 * directly, a plain value needs no fiber and no promise turn; only a promise is awaited, in an Effect.
 * @internal
 */
import * as Effect from "effect/Effect"

/** Whether `value` may be a promise; a `then` getter that throws makes it one (the promise rejects). */
export const maybeThenable = (value: unknown): boolean => {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return false
  try {
    return typeof (value as { then?: unknown }).then === "function"
  } catch {
    return true
  }
}

/**
 * Ends when `returned` settles (uninterruptible: a promise cannot be stopped, so its fiber ends with
 * it, and an abort-ignoring handler keeps its key until then).
 */
export const awaitReturned = <A>(returned: A | PromiseLike<A>): Effect.Effect<Awaited<A>, unknown> =>
  Effect.uninterruptible(
    Effect.async<Awaited<A>, unknown>((resume) => {
      Promise.resolve(returned).then(
        (value) => resume(Effect.succeed(value as Awaited<A>)),
        (error: unknown) => resume(Effect.fail(error))
      )
    })
  )

/** Turns a promise-returning handler into an Effect that ends only when the promise settles. */
export const fromPromise = <A>(run: () => A | PromiseLike<A>): Effect.Effect<Awaited<A>, unknown> =>
  Effect.suspend(() => {
    let returned: A | PromiseLike<A>
    try {
      returned = run()
    } catch (error) {
      return Effect.fail(error)
    }
    // A plain value needs no promise turn.
    return maybeThenable(returned) ? awaitReturned(returned) : Effect.succeed(returned as Awaited<A>)
  })

/** Where the promise face leaves a definition's plain handler, beside its Effect one (not in the public types). */
const PLAIN_HANDLER: unique symbol = Symbol.for("durability/internal/plainHandler")

/** `definition` with `plain` as its plain handler: the capability may call it directly instead of its Effect handler. */
export const withPlain = <D extends object, F extends (...args: never) => unknown>(definition: D, plain: F): D =>
  Object.assign(definition, { [PLAIN_HANDLER]: plain })

/** The plain handler `withPlain` left on `definition`, if any. */
export const plainOf = <F extends (...args: never) => unknown>(definition: object): F | undefined =>
  (definition as { readonly [PLAIN_HANDLER]?: F })[PLAIN_HANDLER]
