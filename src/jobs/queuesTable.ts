/**
 * The owner of `durability_job_queues`: a queue's stored settings (its pause flag, the rate limit
 * `setRateLimit` put over its definition's, a batched queue's open wait for more jobs). Every statement on the table is here; the jobs' claims
 * read the pause flag through `NOT_PAUSED`.
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import { QUEUES } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** A pending job of a paused queue waits (durably): it is not due, does not wake the object, cannot be claimed. */
export const NOT_PAUSED = `queue NOT IN (SELECT queue FROM ${QUEUES} WHERE paused = 1)`

/** The queue's pause flag (`paused`), in a row when one is stored. */
export const readPaused = (storage: StorageService, queue: string): Rows =>
  storage.exec(`SELECT paused FROM ${QUEUES} WHERE queue = ?`, [queue])

export const setPaused = (storage: StorageService, queue: string, paused: boolean): Rows =>
  storage.exec(
    `INSERT INTO ${QUEUES} (queue, paused) VALUES (?, ?) ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused`,
    [queue, paused ? 1 : 0]
  )

/** Stores the queue's rate limit override (`rateLimit`: its JSON, `null` for none). */
export const setRateLimit = (storage: StorageService, queue: string, rateLimit: string): Rows =>
  storage.exec(
    `INSERT INTO ${QUEUES} (queue, paused, rate_limit) VALUES (?, 0, ?)
       ON CONFLICT (queue) DO UPDATE SET rate_limit = excluded.rate_limit`,
    [queue, rateLimit]
  )

/** Every queue's stored settings (`queue`, `paused`, `rate_limit`). */
export const all = (storage: StorageService): Rows => storage.exec(`SELECT queue, paused, rate_limit FROM ${QUEUES}`)

/** The end of the batched queue's open wait (`batch_until`), in a row when one is stored. */
export const readBatchWait = (storage: StorageService, queue: string): Rows =>
  storage.exec(`SELECT batch_until FROM ${QUEUES} WHERE queue = ? AND batch_until IS NOT NULL`, [queue])

/** Stores the end of the batched queue's wait (`null`: none open). */
export const setBatchWait = (storage: StorageService, queue: string, until: number | null): Rows =>
  storage.exec(
    `INSERT INTO ${QUEUES} (queue, paused, batch_until) VALUES (?, 0, ?)
       ON CONFLICT (queue) DO UPDATE SET batch_until = excluded.batch_until`,
    [queue, until]
  )
