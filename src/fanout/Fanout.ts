/**
 * `Fanout`: a durable fan-out queue on the object's engine. A batch of messages is accepted in one
 * transaction; each message fixes its recipients (static target ids) then, and each (message, target)
 * pair is delivered, retried and dead-lettered on its own. A target's pass takes one permit of the shared
 * pool, claims at most `maxBatchSize` due deliveries (never-attempted ones first, each group in enqueue
 * order) in one transaction, and hands them to the target's consumer in one call, whose messages carry
 * their own settlement (`ack`, `retry`, `deadLetter`).
 *
 * Acceptance, not completion: `enqueue` succeeds once the batch and its obligations are stored.
 * @packageDocumentation
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scheduler from "../engine/Scheduler.js"
import type { InvalidOptionError, MigrationError, ParticipantConflictError, StorageError } from "../shared/Errors.js"
import type { RoutingLoad } from "../routing/RoutingLoad.js"
import * as StepMemo from "../steps/memo.js"
import * as Core from "./core.js"
import { CAPABILITY, migrations } from "./schema.js"
import type { FanoutOptions, Service } from "./types.js"

export { FanoutEnqueueError, FanoutSettlementError, FanoutTimeoutError } from "./errors.js"

export type {
  ConsumerTarget,
  FanoutEnqueueOptions,
  FanoutInput,
  FanoutMessage,
  FanoutOptions,
  FanoutTargetPolicy,
  Service,
  StorageTarget,
  Target
} from "./types.js"

/** The object's fanout (of unknown bodies: type it where you read it). */
export class Fanout extends Context.Tag("durability/Fanout")<Fanout, Service<unknown>>() {}

/** Fanout's table migrations, in order. */
export const fanoutMigrations = migrations

/** Applies (default: latest) or reverts (`null`: all) fanout's migrations. */
export const migrate = (target?: string | null) => StepMemo.migrate(CAPABILITY, migrations, target)

/**
 * Attaches a fanout to the object's scheduler (migrating its tables first) and returns its service. Its
 * load counters are the `RoutingLoad` service's.
 */
export const make: <Body>(
  options: FanoutOptions<Body>
) => Effect.Effect<
  Service<Body>,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Services | RoutingLoad
> = Core.make

/** The fanout as a layer (bodies unknown), with the object's `RoutingLoad`. */
export const layer = <Body>(
  options: FanoutOptions<Body>
): Layer.Layer<
  Fanout,
  InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
  Scheduler.Services | RoutingLoad
> =>
  Layer.effect(
    Fanout,
    // Bodies are unknown behind the tag: the service is widened as its reader will narrow it.
    Core.make(options) as unknown as Effect.Effect<
      Service<unknown>,
      InvalidOptionError | ParticipantConflictError | MigrationError | StorageError,
      Scheduler.Services | RoutingLoad
    >
  )
