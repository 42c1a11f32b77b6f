/**
 * The default backoff as plain functions: the engine's default retry delay (`RetryPolicy`), and
 * `durability/utils` for promise-style `retries.delay` callbacks. Pure and unvalidated, like `Math`
 * helpers.
 */

/** `min(initialDelayMs × 2^(attempt−1), maxDelayMs)`: 1 s, 2 s, 4 s … capped at 5 min by default. */
export const exponential = (attempt: number, initialDelayMs = 1_000, maxDelayMs = 300_000): number =>
  Math.min(initialDelayMs * 2 ** (attempt - 1), maxDelayMs)

/** Equal jitter: uniform in [delay/2, delay), so retries spread out but never collapse to zero. */
export const jitter = (delayMs: number, random: () => number = Math.random): number =>
  delayMs / 2 + random() * (delayMs / 2)
