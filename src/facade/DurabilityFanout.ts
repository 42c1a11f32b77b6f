/**
 * `DurabilityFanout`: a durable fan-out queue for promise-style code, over the `Fanout` Effect module.
 * A batch is accepted in one transaction; each (message, target) pair is then delivered and retried on
 * its own, in batches per target, with the settlement on each message (`ack`, `retry`, `deadLetter`).
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"
import type { LifecycleHook } from "../engine/Lifecycle.js"
import * as FanoutCore from "../fanout/core.js"
import * as Fanout from "../fanout/Fanout.js"
import * as Load from "../routing/RoutingLoad.js"
import type { AlarmInvocationInfo, DurabilityContext } from "../shared/platform.js"
import type { MessageWrite, StoredMessage } from "../shared/StoredMessage.js"
import { attach, fromPromise, migrateWith, type MigrationResult, type SchedulerAttachment } from "./attachment.js"
import type { DurabilityScheduler } from "./DurabilityScheduler.js"
import { fromCause } from "./errors.js"
import type { DurabilityMethodOptions } from "./helper.js"
import type { ObjectRuntime } from "./objectRuntime.js"
import { RoutingLoad, serviceOf } from "./RoutingLoad.js"

export { FanoutEnqueueError, FanoutSettlementError, FanoutTimeoutError } from "./errors.js"

/** One message to enqueue: its body, and optionally its id (default a random UUID) and deduplication key (default the id). */
export interface FanoutInput<Body> {
  /** The message's id, handed to consumers; default a random UUID. */
  id?: string
  /** The message itself: any JSON value (or undefined). */
  body: Body
  /** Identical work under a live key is skipped; different work under it rejects the batch. Default: the id. */
  deduplicationKey?: string
}

/** Options of one enqueue. */
export interface FanoutEnqueueOptions {
  /** The recipients (distinct configured target ids); default every configured target. Redrive names one. */
  targets?: readonly string[]
}

/**
 * One delivery as a consumer receives it. The settlement calls are functions on the object, so the
 * messages can be handed over Workers RPC (each call comes back as a stub).
 */
export interface DurabilityFanoutMessage<Body> {
  /** The message's id. */
  id: string
  /** Stable for one registration and target across attempts. */
  deliveryId: string
  /** The target this delivery is for. */
  target: string
  /** The message as enqueued. */
  body: Body
  /** 1-based. */
  attempt: number
  /** When the message was accepted (epoch milliseconds). */
  enqueuedAt: number
  /** Done: the delivery is deleted. Rejects with `FanoutSettlementError` when settled already or late. */
  ack(): Promise<void>
  /** Eligible again after `delayMs` (default: the retry policy), dead-lettered once its attempts are spent. */
  retry(delayMs?: number): Promise<void>
  /** Straight to the DLQ (dropped without one), never to the consumer again. */
  deadLetter(): Promise<void>
}

/** A consumer target: called once per batch. */
export interface FanoutConsumerTarget<Body> extends DurabilityMethodOptions {
  /** Called with each batch; settle each message (or set `ackOnReturn`). A throw fails the unsettled ones. */
  deliver(messages: DurabilityFanoutMessage<Body>[]): unknown
  /** Ack what the consumer leaves unsettled when it returns (a throw or a timeout acks nothing). */
  ackOnReturn?: boolean
  /** A consumer target has no `storage`. */
  storage?: undefined
}

/** A storage target: one `StoredMessage` per message, acked once written. */
export interface FanoutStorageTarget<Body> extends DurabilityMethodOptions {
  /** Writes one message; resolve once it is stored (key it by `id`, refuse to overwrite). */
  storage: MessageWrite<Body>
  /** A storage target has no `deliver`. */
  deliver?: undefined
}

/** A static fanout target: a consumer or a storage write, with its own retries and timeout if given. */
export type FanoutTarget<Body> = FanoutConsumerTarget<Body> | FanoutStorageTarget<Body>

/** What `new DurabilityFanout(config)` takes. */
export type DurabilityFanoutConfig<Body> = SchedulerAttachment & DurabilityMethodOptions & {
  /** The static targets, by id (at least one). */
  targets: Record<string, FanoutTarget<Body>>
  /** Load counters to share (e.g. with a `DurabilityLog`); default a private one. */
  routing?: RoutingLoad
  /** Where dead letters go; without it they are dropped (still reported by the `terminal` event). */
  dlq?: MessageWrite<Body>
  /** Deliveries per target pass (default 10). */
  maxBatchSize?: number
  /** First deliveries wait for the next multiple of this many milliseconds (default 0: at once). */
  batchDelayMs?: number
  /** Told each `fanout_delivery` lifecycle event after it committed. */
  onLifecycleEvent?: LifecycleHook
  /**
   * Accepted for the reference's configs: SQLite is the only backend here, so `"kv"` is refused with a
   * `TypeError` before anything is written.
   */
  storageBackend?: "sqlite" | "kv"
}

export type { EnqueueResult, LoadSnapshot, ProcessingLoad } from "../routing/RoutingLoad.js"
export type { MessageWrite, StoredMessage }

/** Fanout's table migrations, in order. */
export const durabilityFanoutMigrations = Fanout.fanoutMigrations

const settleWith = (runtime: Runtime.Runtime<never>, effect: Effect.Effect<void, unknown>): Promise<void> =>
  Runtime.runPromiseExit(runtime)(effect).then((exit) => {
    if (Exit.isFailure(exit)) throw fromCause(exit.cause)
  })

const plainMessage = <Body>(message: Fanout.FanoutMessage<Body>, runtime: Runtime.Runtime<never>): DurabilityFanoutMessage<Body> => ({
  id: message.id,
  deliveryId: message.deliveryId,
  target: message.target,
  body: message.body,
  attempt: message.attempt,
  enqueuedAt: message.enqueuedAt,
  ack: () => settleWith(runtime, message.ack()),
  retry: (delayMs?: number) => settleWith(runtime, message.retry(delayMs)),
  deadLetter: () => settleWith(runtime, message.deadLetter())
})

const write = <Body>(fn: MessageWrite<Body>) => (message: StoredMessage<Body>) => Effect.asVoid(fromPromise(() => fn(message)))

/** A promise target as the Effect module's. */
const targetOf = <Body>(id: string, target: FanoutTarget<Body>): Fanout.Target<Body> => {
  if (typeof target !== "object" || target === null) throw new TypeError(`Invalid fanout target "${id}"`)
  const policy = {
    ...(target.attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs: target.attemptTimeoutMs }),
    ...(target.retries === undefined ? {} : { retries: target.retries })
  }
  if (typeof target.deliver === "function" && target.storage === undefined) {
    const deliver = target.deliver.bind(target)
    return {
      ...policy,
      ...(target.ackOnReturn === undefined ? {} : { ackOnReturn: target.ackOnReturn }),
      deliver: (messages) =>
        Effect.flatMap(Effect.runtime<never>(), (runtime) => fromPromise(() => deliver(messages.map((message) => plainMessage(message, runtime)))))
    }
  }
  if (typeof target.storage === "function" && target.deliver === undefined) return { ...policy, storage: write(target.storage) }
  throw new TypeError(`Invalid fanout target "${id}"`)
}

/**
 * A durable fan-out queue: `enqueue` accepts a batch atomically (acceptance, not completion); each
 * target gets every message it was enqueued for, independently, at least once.
 */
export class DurabilityFanout<Body = unknown> {
  readonly #scheduler: DurabilityScheduler
  readonly #runtime: ObjectRuntime
  readonly #service: Fanout.Service<Body>

  constructor(config: DurabilityFanoutConfig<Body>) {
    if (typeof config !== "object" || config === null) throw new TypeError("DurabilityFanout needs a config object")
    const targets = config.targets as unknown
    if (typeof targets !== "object" || targets === null || Object.keys(targets).length === 0) {
      throw new TypeError("Fanout requires at least one static target")
    }
    const converted: Record<string, Fanout.Target<Body>> = {}
    for (const [id, target] of Object.entries(config.targets)) {
      if (id === "") throw new TypeError(`Invalid fanout target "${id}"`)
      converted[id] = targetOf(id, target)
    }
    const routing = config.routing ?? new RoutingLoad()
    const load = serviceOf(routing)
    const { runtime, scheduler } = attach(config)
    this.#scheduler = scheduler
    this.#runtime = runtime
    const options: Fanout.FanoutOptions<Body> = {
      targets: converted,
      ...(config.attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs: config.attemptTimeoutMs }),
      ...(config.retries === undefined ? {} : { retries: config.retries }),
      ...(config.dlq === undefined ? {} : { dlq: typeof config.dlq === "function" ? write(config.dlq) : config.dlq }),
      ...(config.maxBatchSize === undefined ? {} : { maxBatchSize: config.maxBatchSize }),
      ...(config.batchDelayMs === undefined ? {} : { batchDelayMs: config.batchDelayMs }),
      ...(config.onLifecycleEvent === undefined ? {} : { onLifecycleEvent: config.onLifecycleEvent })
    }
    // With `{ context }` the reference builds a scheduler per instance: a later fanout over the same object
    // takes over from an earlier one (as after a restart). A shared `{ scheduler }` takes one fanout.
    this.#service = runtime.runSync(Effect.provideService(FanoutCore.make(options, config.scheduler === undefined), Load.RoutingLoad, load))
  }

  /**
   * Accepts one message or a batch in one transaction. Resolves `{ success: true, value: ids, load }` once
   * stored, `{ success: false, error, load }` when definitely rejected (nothing stored); rejects when the
   * outcome is uncertain (a storage failure).
   */
  enqueue(
    messages: FanoutInput<Body> | FanoutInput<Body>[],
    options?: FanoutEnqueueOptions
  ): Promise<Load.EnqueueResult<string[]>> {
    return this.#runtime.run(this.#service.enqueueResult(messages, options))
  }

  /** The load now: calls in flight and finished in the last minute, and the deliveries still stored. */
  load(): Promise<Load.LoadSnapshot> {
    return this.#runtime.run(this.#service.load)
  }

  /** Delegate the object's `alarm(info)` here (or to the shared scheduler). */
  alarm(info?: AlarmInvocationInfo): Promise<void> {
    return this.#scheduler.alarm(info)
  }

  /** Applies (default: latest) or reverts (`null`: all) fanout's migrations. */
  static migrate(context: DurabilityContext, target?: string | null): MigrationResult {
    return migrateWith(context, Fanout.migrate, target)
  }
}
