/**
 * `RetryPolicy` as `durability/effect` shows it: the retry options a user gives (`fromDelay`, any
 * `Schedule`, the defaults) and what counts as non-retryable. How the engine steps a policy
 * (`decide`) stays internal.
 * @packageDocumentation
 */
export {
  DEFAULT_ATTEMPT_TIMEOUT_MS,
  DEFAULT_MAX_ATTEMPTS,
  defaultSchedule,
  fromDelay,
  isNonRetryable,
  type RetryPolicy,
  type RetrySchedule
} from "../engine/RetryPolicy.js"
