/**
 * `durability`: durable background work for Cloudflare Durable Objects, as
 * promise-style classes. The Effect API lives in `durability/effect`.
 */
export { DurabilityScheduler } from "./facade/DurabilityScheduler.js"
export type {
  AlarmInvocationInfo,
  AlarmRetryInfo,
  DurabilityContext,
  DurabilitySchedulerConfig,
  DurabilitySchedulerOptions
} from "./facade/DurabilityScheduler.js"
export {
  DurableAttemptsExhaustedError,
  DurableAttemptTimeoutError,
  DurableRetryPolicyError,
  NonRetryableError
} from "./facade/errors.js"
export type { LifecycleEvent, LifecycleHook } from "./Lifecycle.js"
export type { SerializedError } from "./Errors.js"
