/**
 * A token bucket with continuous refill, as a decision: given the stored state and the time, may a
 * job start (and the state after taking its token), or when will a token be there. Storing the
 * state and moving jobs is the caller's.
 * @internal
 */
import type { RateLimit } from "./options.js"

export interface State {
  readonly tokens: number
  readonly updatedAt: number
}

export type Decision =
  | { readonly take: true; readonly after: State }
  | { readonly take: false; readonly readyAt: number }

/** Float slack: a refill computed as 0.9999999 of a token is a token. */
const EPSILON = 1e-9

/** The tokens in the bucket at `now`; a bucket never stored is full. */
export const level = (limit: RateLimit, state: State | undefined, now: number): number =>
  state === undefined
    ? limit.capacity
    : Math.min(limit.capacity, state.tokens + (Math.max(0, now - state.updatedAt) * limit.refillPerSecond) / 1000)

export const decide = (limit: RateLimit, state: State | undefined, now: number): Decision => {
  const tokens = level(limit, state, now)
  if (tokens >= 1 - EPSILON) return { take: true, after: { tokens: Math.max(0, tokens - 1), updatedAt: now } }
  // The first millisecond at which the missing part of a token has refilled.
  return { take: false, readyAt: now + Math.max(1, Math.ceil(((1 - tokens) * 1000) / limit.refillPerSecond)) }
}
