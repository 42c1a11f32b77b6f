/**
 * Fault injection at the storage boundary: a `MemoryStorage` whose statements
 * or alarm writes fail on demand. Synchronous, like the real storage calls, so
 * TestClock keeps seeing every fiber.
 */
import { intercept, type MemoryStorage } from "../../../src/testing/MemoryStorage.js"

export interface Faults {
  /** Fail every statement this returns true for. */
  sql?: ((query: string) => boolean) | undefined
  /** Fail every `setAlarm` while true. */
  setAlarm?: boolean | undefined
}

export const withFaults = (inner: MemoryStorage, faults: Faults): MemoryStorage =>
  intercept(inner, {
    exec: (query, bindings) => {
      if (faults.sql?.(query) === true) throw new Error("injected SQL failure")
      return inner.sql.exec(query, ...bindings)
    },
    setAlarm: (at) =>
      faults.setAlarm === true ? Promise.reject(new Error("injected setAlarm failure")) : inner.setAlarm(at)
  })
