/**
 * The envelope a capability hands to a write function (`MessageWrite`) when a message leaves the
 * object for storage: a fanout storage target, or a dead letter. The library only writes it; reading
 * it back (to audit, or to redrive) is the application's.
 *
 * Key what you store by `id` and refuse to overwrite (R2: `onlyIf: { etagDoesNotMatch: "*" }`): a write
 * is retried until it reports success, so the same entry can arrive more than once, with a later
 * `attempts` and `storedAt`.
 * @packageDocumentation
 */
import type { SerializedError } from "./Errors.js"

/** An error as it crosses a boundary (RPC, a result envelope, a dead letter): its name and message. */
export type { SerializedError }

/** Why a message was dead-lettered: it used its attempts, or its consumer said so. */
export type FailureReason = "exhausted" | "explicit"

/** A message as written to storage. */
export interface StoredMessage<Body = unknown> {
  /** Unique to the message's registration and target, the same across attempts: the key to store it under. */
  readonly id: string
  /** The message's id, as given at enqueue. */
  readonly messageId: string
  /** The target it was for. */
  readonly target: string
  /** The message's body, as enqueued. */
  readonly body: Body
  /** When the message was accepted (epoch milliseconds). */
  readonly enqueuedAt: number
  /** When this write was made; for a dead letter, when it was first dead-lettered. */
  readonly storedAt: number
  /** The delivery's attempt count when written. */
  readonly attempts: number
  /** Present on dead letters only: why, and the last failure (`null` when there was none, as for an explicit dead letter). */
  readonly failure?: { readonly reason: FailureReason; readonly error: SerializedError | null }
}

/** Where messages go: resolve once the message is stored; a rejection makes the library retry it. */
export type MessageWrite<Body = unknown> = (message: StoredMessage<Body>) => Promise<void>
