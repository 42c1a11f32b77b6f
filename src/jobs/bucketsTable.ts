/**
 * The owner of `durability_job_buckets`: the token buckets of the queues' rate limits (a queue's own,
 * key `""`, and its groups', key `g:<group>`), as `bucket.ts` computes them.
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import { BUCKETS } from "./schema.js"

type Rows = Effect.Effect<ReadonlyArray<Row>, StorageError>

/** The stored state (`group_key`, `tokens`, `updated_at`) of the queue's buckets among `keys`. */
export const readSome = (storage: StorageService, queue: string, keys: ReadonlyArray<string>): Rows =>
  storage.exec(
    `SELECT group_key, tokens, updated_at FROM ${BUCKETS} WHERE queue = ? AND group_key IN (${keys.map(() => "?").join(", ")})`,
    [queue, ...keys]
  )

/** The stored state of every bucket of the queue. */
export const readAll = (storage: StorageService, queue: string): Rows =>
  storage.exec(`SELECT group_key, tokens, updated_at FROM ${BUCKETS} WHERE queue = ?`, [queue])

export const store = (storage: StorageService, queue: string, key: string, tokens: number, updatedAt: number): Rows =>
  storage.exec(
    `INSERT INTO ${BUCKETS} (queue, group_key, tokens, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (queue, group_key) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`,
    [queue, key, tokens, updatedAt]
  )
