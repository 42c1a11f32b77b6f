/**
 * Fanout's public types (re-exported by `Fanout`).
 * @internal
 */
import type * as Effect from "effect/Effect"
import type * as Lifecycle from "../engine/Lifecycle.js"
import type * as Policy from "../engine/policy.js"
import type { InvalidInputError, StorageError } from "../shared/Errors.js"
import type { StoredMessage } from "../shared/StoredMessage.js"
import type { EnqueueResult, LoadSnapshot } from "../routing/RoutingLoad.js"
import type { FanoutEnqueueError, FanoutSettlementError } from "./errors.js"

/** One message to enqueue. */
export interface FanoutInput<Body> {
  /** The message's id, handed to consumers; default a random UUID. */
  readonly id?: string | undefined
  /** The message itself: any JSON value (or undefined). */
  readonly body: Body
  /**
   * While a message under this key has deliveries left, an identical entry (same id, body and targets) is
   * skipped and a different one rejects the whole batch. Default: the id.
   */
  readonly deduplicationKey?: string | undefined
}

/** Options of one enqueue. */
export interface FanoutEnqueueOptions {
  /** The recipients (distinct configured target ids); default every configured target. */
  readonly targets?: ReadonlyArray<string> | undefined
}

/** One delivery as its consumer receives it, with its settlement. */
export interface FanoutMessage<Body> {
  /** The message's id. */
  readonly id: string
  /** Stable for one registration and target across attempts: the key of anything stored for it. */
  readonly deliveryId: string
  /** The target this delivery is for. */
  readonly target: string
  /** The message as enqueued. */
  readonly body: Body
  /** 1-based, already durably counted. */
  readonly attempt: number
  /** When the message was accepted (epoch milliseconds). */
  readonly enqueuedAt: number
  /** Done: the delivery is deleted. */
  readonly ack: () => Effect.Effect<void, FanoutSettlementError | StorageError>
  /** Again after `delayMs` (default: the retry policy's delay), or dead-lettered when its attempts are spent. */
  readonly retry: (delayMs?: number) => Effect.Effect<void, FanoutSettlementError | InvalidInputError | StorageError>
  /** To the dead-letter queue (dropped when there is none), never to the consumer again. */
  readonly deadLetter: () => Effect.Effect<void, FanoutSettlementError | StorageError>
}

/** A target's retries and timeout (over the fanout's own). */
export type FanoutTargetPolicy = Policy.ExecutionOptions

/**
 * A consumer target: one call per batch. With `ackOnReturn`, what it leaves unsettled when it returns is
 * acked (one transaction); otherwise unsettled messages are retried.
 */
export interface ConsumerTarget<Body> extends FanoutTargetPolicy {
  /** Called with each batch; settle each message (or set `ackOnReturn`). A failure fails the unsettled ones. */
  readonly deliver: (messages: ReadonlyArray<FanoutMessage<Body>>) => Effect.Effect<unknown, unknown>
  /** Ack what the consumer leaves unsettled when it succeeds (a failure or a timeout acks nothing). */
  readonly ackOnReturn?: boolean | undefined
  /** A consumer target has no `storage`. */
  readonly storage?: undefined
}

/** A storage target: one `StoredMessage` written per message, acked once written. */
export interface StorageTarget<Body> extends FanoutTargetPolicy {
  /** Writes one message; succeed once it is stored (key it by `id`, refuse to overwrite). */
  readonly storage: (message: StoredMessage<Body>) => Effect.Effect<void, unknown>
  /** A storage target has no `deliver`. */
  readonly deliver?: undefined
}

/** Where messages go: a consumer or a storage write. */
export type Target<Body> = ConsumerTarget<Body> | StorageTarget<Body>

/** What `Fanout.make` takes. */
export interface FanoutOptions<Body> extends Policy.ExecutionOptions {
  /** The static targets, by id (at least one). */
  readonly targets: Readonly<Record<string, Target<Body>>>
  /** Where dead letters are written; without it they are dropped (and still reported by `terminal`). */
  readonly dlq?: ((message: StoredMessage<Body>) => Effect.Effect<void, unknown>) | undefined
  /** Deliveries per target pass (default 10). */
  readonly maxBatchSize?: number | undefined
  /** First deliveries wait for the next multiple of this many milliseconds, so nearby ones share a batch (default 0). */
  readonly batchDelayMs?: number | undefined
  /** Told each `fanout_delivery` lifecycle event after it committed. */
  readonly onLifecycleEvent?: Lifecycle.LifecycleHook | undefined
}

/** The fanout of one object. */
export interface Service<Body> {
  /**
   * Accepts the messages (one transaction): their ids in input order, duplicates included. Fails with
   * `FanoutEnqueueError` when definitely rejected (nothing stored), with `StorageError` when uncertain.
   */
  readonly enqueue: (
    messages: FanoutInput<Body> | ReadonlyArray<FanoutInput<Body>>,
    options?: FanoutEnqueueOptions
  ) => Effect.Effect<ReadonlyArray<string>, FanoutEnqueueError | StorageError>
  /** `enqueue` counted as an inbound call and answered with the load: a rejection is a value, uncertainty a failure. */
  readonly enqueueResult: (
    messages: FanoutInput<Body> | ReadonlyArray<FanoutInput<Body>>,
    options?: FanoutEnqueueOptions
  ) => Effect.Effect<EnqueueResult<Array<string>>, StorageError>
  /** The load, with the deliveries still stored (both phases) as `pendingDeliveries`. */
  readonly load: Effect.Effect<LoadSnapshot, StorageError>
}

