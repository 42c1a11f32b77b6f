/**
 * The chaos objects' record of their `alarm(info)` deliveries, start and end, in a table of their own
 * (`seq`, `at`, `ended_at`, `instance`, `info`): the lost-wake-up audit reads a null alarm as a loss only
 * when no delivery is in flight (the platform reports no alarm while it delivers one).
 */
import type { AlarmInvocationInfo } from "../../../src/index.js"

/** Records one delivery in `table` around `deliver`; one a reset cuts keeps `ended_at` null. */
export const recordDelivery = async (
  sql: SqlStorage,
  table: string,
  instance: string,
  info: AlarmInvocationInfo | undefined,
  deliver: () => Promise<void>
): Promise<void> => {
  const { seq } = sql.exec<{ seq: number }>(
    `INSERT INTO ${table} (at, instance, info) VALUES (?, ?, ?) RETURNING seq`,
    Date.now(),
    instance,
    JSON.stringify(info ?? null)
  ).one()
  try {
    await deliver()
  } finally {
    sql.exec(`UPDATE ${table} SET ended_at = ? WHERE seq = ?`, Date.now(), seq)
  }
}

/** The deliveries still running (or cut by a reset), or begun or ended at or after `at`. */
export const deliveriesAround = <Delivery>(sql: SqlStorage, table: string, at: number): ReadonlyArray<Delivery> =>
  sql.exec(`SELECT * FROM ${table} WHERE ended_at IS NULL OR ended_at >= ? OR at >= ? ORDER BY seq`, at, at)
    .toArray() as unknown as ReadonlyArray<Delivery>
