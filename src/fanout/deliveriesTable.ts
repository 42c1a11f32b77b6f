/**
 * Every statement on fanout's tables: acceptance, the due listing, the batch claim, settlement and
 * the manifest's refcount. Each change of a delivery is compare-and-set on (generation, attempt), so a
 * stale execution never touches a later attempt or a new registration under the same key.
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StorageError } from "../shared/Errors.js"
import type { Row, StorageService } from "../engine/StorageService.js"
import { DELIVERIES, MESSAGES, SEQ, TARGETS } from "./schema.js"

/** A delivery as a pass reads it: its row, with its message's id, payload and acceptance time. */
const SELECT_DUE_COLUMNS = `SELECT d.*, m.id AS message_id, m.payload AS payload, m.created_at AS enqueued_at,
  m.generation_id AS message_generation`
export const SELECT_DUE = `${SELECT_DUE_COLUMNS}
  FROM ${DELIVERIES} d LEFT JOIN ${MESSAGES} m ON m.key = d.message_key`
/**
 * First deliveries walk the (target, attempt, phase, seq) index in seq order and stop at the limit. Left to
 * itself, SQLite picks the due-time index instead and sorts every due row of the target to keep ten: a
 * backlog of 5 000 made each pass cost a millisecond (bench F1). Never-attempted rows that are not due yet are
 * rare (a claim makes a row attempted), so the walk hardly skips any.
 */
export const FIRST_DUE = `${SELECT_DUE_COLUMNS}
  FROM ${DELIVERIES} d INDEXED BY durability_fanout_deliveries_first_idx LEFT JOIN ${MESSAGES} m ON m.key = d.message_key
  WHERE d.target_id = ? AND d.attempt = 0 AND d.phase = 'delivery' AND d.next_attempt_at <= ? ORDER BY d.seq LIMIT ?`

/** The manifest under a deduplication key (what a new entry under it is compared with). */
export const readManifest = (storage: StorageService, key: string) =>
  Effect.map(storage.exec(`SELECT id, payload, targets FROM ${MESSAGES} WHERE key = ?`, [key]), (rows) => rows[0])

/** The last `seq` given (0 before the first). */
export const readSeq = (storage: StorageService) =>
  Effect.map(storage.exec(`SELECT seq FROM ${SEQ} WHERE one = 1`), (rows) => rows[0] === undefined ? 0 : Number(rows[0].seq))

export const writeSeq = (storage: StorageService, seq: number) =>
  storage.exec(`INSERT INTO ${SEQ} (one, seq) VALUES (1, ?) ON CONFLICT (one) DO UPDATE SET seq = excluded.seq`, [seq])

/** A new message: its manifest, and one delivery per target (`targets`, a JSON array), in two statements. */
export const insertMessage = (
  storage: StorageService,
  message: {
    readonly key: string
    readonly id: string
    readonly payload: string
    readonly targets: string
    readonly count: number
    readonly seq: number
    readonly createdAt: number
    readonly generation: string
    readonly due: number
  }
): Effect.Effect<void, StorageError> =>
  Effect.zipRight(
    storage.exec(
      `INSERT INTO ${MESSAGES} (key, id, payload, targets, remaining, seq, created_at, generation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      [message.key, message.id, message.payload, message.targets, message.count, message.seq, message.createdAt, message.generation]
    ),
    storage.exec(
      `INSERT INTO ${DELIVERIES} (id, message_key, target_id, seq, phase, attempt, next_attempt_at, created_at, generation_id)
       SELECT json_array(?, value), ?, value, ?, 'delivery', 0, ?, ?, ? FROM json_each(?)`,
      [message.key, message.key, message.seq, message.due, message.createdAt, message.generation, message.targets]
    )
  )

/**
 * The targets' engine records (a JSON array) made pending by `due`: a pending one keeps its claim and the
 * earlier of its times; an idle one starts again at attempt 0.
 */
export const wakeTargets = (storage: StorageService, targets: string, due: number, now: number, generation: string) =>
  storage.exec(
    `INSERT INTO ${TARGETS} (target, generation_id, status, attempt, next_attempt_at, created_at)
     SELECT value, ?, 'pending', 0, ?, ? FROM json_each(?) WHERE true
     ON CONFLICT (target) DO UPDATE SET
       next_attempt_at = CASE WHEN status = 'pending' THEN MIN(next_attempt_at, excluded.next_attempt_at) ELSE excluded.next_attempt_at END,
       attempt = CASE WHEN status = 'pending' THEN attempt ELSE 0 END,
       status = 'pending'`,
    [generation, due, now, targets]
  )

/** Due deliveries of `target`, at most `limit`: never-attempted ones first, then the rest, each by `seq`. */
export const due = (storage: StorageService, target: string, now: number, limit: number) =>
  Effect.gen(function*() {
    const first = yield* storage.exec(
      FIRST_DUE,
      [target, now, limit]
    )
    if (first.length >= limit) return first
    const rest = yield* storage.exec(
      `${SELECT_DUE} WHERE d.target_id = ? AND (d.attempt > 0 OR d.phase = 'dead_letter') AND d.next_attempt_at <= ? ORDER BY d.seq LIMIT ?`,
      [target, now, limit - first.length]
    )
    return [...first, ...rest]
  })

/** Moves one delivery to `at`. */
export const postponeOne = (storage: StorageService, id: string, at: number) =>
  storage.exec(`UPDATE ${DELIVERIES} SET next_attempt_at = ? WHERE id = ?`, [at, id])

/** Moves `target`'s due deliveries to `at` (a target no longer configured); returns how many. */
export const postpone = (storage: StorageService, target: string, now: number, at: number) =>
  Effect.map(
    storage.exec(`UPDATE ${DELIVERIES} SET next_attempt_at = ? WHERE target_id = ? AND next_attempt_at <= ? RETURNING id`, [at, target, now]),
    (rows) => rows.length
  )

/** Claims per statement: three bindings each, under a statement's 100. */
const CLAIM_CHUNK = 30

/**
 * Claims deliveries as `claim` does each, a statement per `CLAIM_CHUNK` of them (in the caller's
 * transaction): the rows that matched, as claimed, in the given order.
 */
export const claimMany = (storage: StorageService, rows: ReadonlyArray<Row>, deadline: number) =>
  Effect.gen(function*() {
    const claimed = new Map<string, number>()
    for (let at = 0; at < rows.length; at += CLAIM_CHUNK) {
      const chunk = rows.slice(at, at + CLAIM_CHUNK)
      const matched = yield* storage.exec(
        `UPDATE ${DELIVERIES} SET attempt = ${DELIVERIES}.attempt + 1, next_attempt_at = ?
         FROM (SELECT column1 AS id, column2 AS generation, column3 AS attempt FROM (VALUES ${chunk.map(() => "(?, ?, ?)").join(", ")})) AS v
         WHERE ${DELIVERIES}.id = v.id AND ${DELIVERIES}.generation_id = v.generation AND ${DELIVERIES}.attempt = v.attempt
           AND ${DELIVERIES}.phase = 'delivery'
         RETURNING ${DELIVERIES}.id AS id, ${DELIVERIES}.attempt AS attempt`,
        [deadline, ...chunk.flatMap((row) => [row.id as string, row.generation_id as string, Number(row.attempt)])]
      )
      for (const row of matched) claimed.set(String(row.id), Number(row.attempt))
    }
    return rows.flatMap((row) => {
      const attempt = claimed.get(String(row.id))
      return attempt === undefined ? [] : [{ ...row, attempt, next_attempt_at: deadline }]
    })
  })

/** One settled delivery off its manifest: `remaining` down by one, the manifest gone at zero (its key free again). */
const release = (storage: StorageService, messageKey: string, generation: string) =>
  Effect.flatMap(
    storage.exec(`UPDATE ${MESSAGES} SET remaining = remaining - 1 WHERE key = ? AND generation_id = ? RETURNING remaining`, [messageKey, generation]),
    // The last delivery's release deletes it: the others pay one statement.
    (rows) =>
      rows[0] !== undefined && Number(rows[0].remaining) <= 0
        ? storage.exec(`DELETE FROM ${MESSAGES} WHERE key = ? AND generation_id = ?`, [messageKey, generation])
        : Effect.succeed([])
  )

/** Which claim a settlement is for. */
export interface Claim {
  readonly id: string
  readonly messageKey: string
  readonly generation: string
  readonly attempt: number
}

/** Deletes the delivery under `claim` (in `phase`) and releases its manifest; returns whether it matched. In a transaction. */
export const remove = (storage: StorageService, claim: Claim, phase: "delivery" | "dead_letter" | "any") =>
  Effect.flatMap(
    storage.exec(
      `DELETE FROM ${DELIVERIES} WHERE id = ? AND generation_id = ? AND attempt = ?${phase === "any" ? "" : " AND phase = ?"} RETURNING id`,
      phase === "any" ? [claim.id, claim.generation, claim.attempt] : [claim.id, claim.generation, claim.attempt, phase]
    ),
    (rows) => rows.length === 0 ? Effect.succeed(false) : Effect.as(release(storage, claim.messageKey, claim.generation), true)
  )

/** Several claims deleted at once (`ackOnReturn`), one statement each; returns the ids that matched. In a transaction. */
export const removeAll = (storage: StorageService, claims: ReadonlyArray<Claim>) =>
  Effect.map(
    Effect.forEach(claims, (claim) => Effect.map(remove(storage, claim, "delivery"), (matched) => matched ? claim.id : undefined)),
    (ids) => ids.filter((id): id is string => id !== undefined)
  )

/** The delivery's next attempt at `at`, with the failure that led to it; returns whether it matched. */
export const reschedule = (storage: StorageService, claim: Claim, at: number, error: { readonly name: string; readonly message: string }) =>
  Effect.map(
    storage.exec(
      `UPDATE ${DELIVERIES} SET next_attempt_at = ?, last_error = ?, last_error_name = ? WHERE id = ? AND generation_id = ? AND attempt = ? AND phase = 'delivery' RETURNING id`,
      [at, error.message, error.name, claim.id, claim.generation, claim.attempt]
    ),
    (rows) => rows.length > 0
  )

/**
 * The durable intent of a dead letter: the delivery is never handed to its consumer again, only its write
 * to the DLQ is retried (at `retryAt`). A failure given replaces the stored last error.
 */
export const markDeadLetter = (
  storage: StorageService,
  claim: Claim,
  reason: "explicit" | "exhausted",
  now: number,
  retryAt: number,
  error: { readonly name: string; readonly message: string } | undefined
) =>
  Effect.map(
    storage.exec(
      `UPDATE ${DELIVERIES} SET phase = 'dead_letter', dead_lettered_at = COALESCE(dead_lettered_at, ?), dead_letter_reason = COALESCE(dead_letter_reason, ?),
        next_attempt_at = ?, last_error = COALESCE(?, last_error), last_error_name = COALESCE(?, last_error_name)
        WHERE id = ? AND generation_id = ? AND attempt = ? RETURNING *`,
      [now, reason, retryAt, error?.message ?? null, error?.name ?? null, claim.id, claim.generation, claim.attempt]
    ),
    (rows) => rows[0]
  )

/** A dead letter whose write failed waits until `at` for the next one. */
export const retryDeadLetter = (storage: StorageService, claim: Claim, at: number) =>
  storage.exec(
    `UPDATE ${DELIVERIES} SET next_attempt_at = ? WHERE id = ? AND generation_id = ? AND attempt = ? AND phase = 'dead_letter'`,
    [at, claim.id, claim.generation, claim.attempt]
  )

/** The delivery as stored now (a settlement whose outcome is unknown is looked up again). */
export const read = (storage: StorageService, id: string) =>
  Effect.map(storage.exec(`SELECT * FROM ${DELIVERIES} WHERE id = ?`, [id]), (rows) => rows[0])

/** Deliveries stored (both phases): the load's `pendingDeliveries`. */
export const count = (storage: StorageService) =>
  Effect.map(storage.exec(`SELECT COUNT(*) AS n FROM ${DELIVERIES}`), (rows) => Number(rows[0]?.n ?? 0))

/** The earliest time a delivery of `target` is due, or undefined when it has none. */
export const earliest = (storage: StorageService, target: string) =>
  Effect.map(
    storage.exec(`SELECT MIN(next_attempt_at) AS at FROM ${DELIVERIES} WHERE target_id = ?`, [target]),
    (rows) => rows[0]?.at === null || rows[0]?.at === undefined ? undefined : Number(rows[0].at)
  )

/**
 * A target's pass ended: its engine record waits for its earliest delivery, or goes idle when it has none
 * (compare-and-set on the pass's claim). Returns the record's time when it stays pending, null when idle,
 * undefined when the claim did not match.
 */
export const endPass = (storage: StorageService, target: string, generation: string, attempt: number) =>
  Effect.gen(function*() {
    const at = yield* earliest(storage, target)
    const rows = yield* storage.exec(
      `UPDATE ${TARGETS} SET status = CASE WHEN ? IS NULL THEN 'idle' ELSE status END, attempt = 0,
        next_attempt_at = COALESCE(?, next_attempt_at)
        WHERE target = ? AND generation_id = ? AND status = 'pending' AND attempt = ? RETURNING target`,
      [at ?? null, at ?? null, target, generation, attempt]
    )
    return rows.length === 0 ? undefined : at ?? null
  })

/** The targets that have deliveries stored, each with how many (stopping at `cap`), for the inspector. */
export const countsByTarget = (storage: StorageService, cap: number) =>
  storage.exec(
    `SELECT t.target AS target, (SELECT COUNT(*) FROM (SELECT 1 FROM ${DELIVERIES} d WHERE d.target_id = t.target LIMIT ?)) AS n
     FROM ${TARGETS} t WHERE t.status = 'pending' ORDER BY t.target LIMIT 100`,
    [cap]
  )

/**
 * A page of stored deliveries (of one target, or all), soonest due first, keyset after (`at`, `id`): `limit`
 * rows, with the message's id and the error's message cut to `messageChars`.
 */
export const page = (
  storage: StorageService,
  options: { readonly target: string | undefined; readonly after: { readonly at: number; readonly key: string } | undefined; readonly limit: number; readonly messageChars: number }
) => {
  const where: Array<string> = []
  const bindings: Array<string | number> = [options.messageChars]
  if (options.target !== undefined) {
    where.push("d.target_id = ?")
    bindings.push(options.target)
  }
  if (options.after !== undefined) {
    where.push("(d.next_attempt_at > ? OR (d.next_attempt_at = ? AND d.id > ?))")
    bindings.push(options.after.at, options.after.at, options.after.key)
  }
  bindings.push(options.limit)
  return storage.exec(
    `SELECT d.id, d.target_id, d.phase, d.attempt, d.next_attempt_at, d.last_error_name, substr(d.last_error, 1, ?) AS last_error,
       COALESCE(m.id, d.message_key) AS message_id
     FROM ${DELIVERIES} d LEFT JOIN ${MESSAGES} m ON m.key = d.message_key
     ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`} ORDER BY d.next_attempt_at, d.id LIMIT ?`,
    bindings
  )
}

/** The target's engine record's time while it is pending (what a pass's end made it), for the engine to cover. */
export const pendingTarget = (storage: StorageService, target: string) =>
  storage.exec(`SELECT next_attempt_at FROM ${TARGETS} WHERE target = ? AND status = 'pending'`, [target])
