/**
 * `durability/utils`: the default backoff as plain functions, for promise-style
 * `retries.delay` callbacks. Pure and unvalidated, like `Math` helpers.
 * @module durability/utils
 */
export { exponential, jitter } from "./shared/backoff.js"
