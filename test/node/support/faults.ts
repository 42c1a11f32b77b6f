/**
 * Fault injection at the storage boundary: a `MemoryStorage` whose statements
 * or alarm writes fail on demand. Synchronous, like the real storage calls, so
 * TestClock keeps seeing every fiber.
 */
import type { MemoryStorage } from "../../../src/testing/MemoryStorage.js"

export interface Faults {
  /** Fail every statement this returns true for. */
  sql?: ((query: string) => boolean) | undefined
  /** Fail every `setAlarm` while true. */
  setAlarm?: boolean | undefined
}

export const withFaults = (inner: MemoryStorage, faults: Faults): MemoryStorage => ({
  get alarmAt() {
    return inner.alarmAt
  },
  get statements() {
    return inner.statements
  },
  takeAlarm: () => inner.takeAlarm(),
  snapshot: () => inner.snapshot(),
  sql: {
    exec: (query: string, ...bindings: Array<unknown>) => {
      if (faults.sql?.(query) === true) throw new Error("injected SQL failure")
      return inner.sql.exec(query, ...bindings)
    }
  },
  transactionSync: (closure) => inner.transactionSync(closure),
  getAlarm: () => inner.getAlarm(),
  setAlarm: (at) =>
    faults.setAlarm === true ? Promise.reject(new Error("injected setAlarm failure")) : inner.setAlarm(at),
  deleteAlarm: () => inner.deleteAlarm()
})
