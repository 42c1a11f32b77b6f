/**
 * Fault injection at the storage boundary: a `MemoryStorage` that counts every
 * SQL statement and every alarm write (`setAlarm` / `deleteAlarm`) and fails the
 * ones chosen, by number ("the 7th statement") or as "the next one".
 *
 * Everything is synchronous, like the real storage calls, so `TestClock` keeps
 * seeing every fiber. A fault surfaces the way workerd surfaces a storage error:
 * - a statement throws from `sql.exec` before it runs (nothing of it is written);
 * - an alarm write returns a rejected promise and leaves the alarm as it was,
 *   inside `transactionSync` too (like `MemoryStorage.setAlarm(NaN)`): there the
 *   transaction still commits its SQL, and the failure is only seen afterwards.
 *   With `alarmFaults: "throw"` it throws instead, rolling the transaction back.
 *
 * ```ts
 * const storage = FaultyStorage.make(yield* MemoryStorage.make)
 * const object = yield* TestDurability.make({ storage })
 * storage.failCall("sql", 12)       // the 12th statement since `make` fails
 * storage.failNext("alarm")         // so does the next alarm write
 * ```
 * @packageDocumentation
 */
import { intercept, type MemoryStorage } from "./MemoryStorage.js"

/** Which calls a fault can hit: SQL statements (`exec`) or alarm writes (`setAlarm`, `deleteAlarm`). */
export type FaultKind = "sql" | "alarm"

/** A fault that fired: which call of which kind, and what it was about. */
export interface InjectedFault {
  /** The kind of call that failed. */
  readonly kind: FaultKind
  /** 1-based number of the call among the calls of its kind. */
  readonly call: number
  /** The statement, or `setAlarm(<time>)` / `deleteAlarm()`. */
  readonly target: string
}

/**
 * A `MemoryStorage` that fails chosen calls on purpose, to test what a storage failure at that point does.
 */
export interface FaultyStorage extends MemoryStorage {
  /** The wrapped storage: reads through it are neither counted nor failed (for assertions). */
  readonly inner: MemoryStorage
  /** How many calls of `kind` were made through this wrapper so far (failed ones included). */
  readonly calls: (kind: FaultKind) => number
  /** Fails the call of `kind` with this 1-based number (counted since `make`). */
  readonly failCall: (kind: FaultKind, call: number) => void
  /** Fails the next call of `kind`. */
  readonly failNext: (kind: FaultKind) => void
  /** Forgets every planned fault that has not fired yet. */
  readonly clear: () => void
  /** Planned faults that have not fired yet. */
  readonly armed: () => number
  /** Every fault injected so far, oldest first. */
  readonly injected: ReadonlyArray<InjectedFault>
}

/** What an injected fault throws (or rejects with), so a test can tell it from a real failure. */
export class InjectedFaultError extends Error {
  /** Always `"InjectedFaultError"`. */
  override readonly name = "InjectedFaultError"
}

/** `make`'s options. */
export interface FaultyStorageOptions {
  /** How a failed alarm write surfaces: a rejected promise (default) or a synchronous throw. */
  readonly alarmFaults?: "reject" | "throw" | undefined
}

/** Wraps a `MemoryStorage` so chosen SQL statements or alarm writes fail. */
export const make = (inner: MemoryStorage, options: FaultyStorageOptions = {}): FaultyStorage => {
  const counts: Record<FaultKind, number> = { sql: 0, alarm: 0 }
  const planned: Record<FaultKind, Set<number>> = { sql: new Set(), alarm: new Set() }
  const injected: Array<InjectedFault> = []

  /** Counts the call; returns the error to raise when it is one of the planned faults. */
  const hit = (kind: FaultKind, target: string): InjectedFaultError | undefined => {
    const call = ++counts[kind]
    if (!planned[kind].delete(call)) return undefined
    injected.push({ kind, call, target })
    return new InjectedFaultError(`injected ${kind} failure (call ${call}: ${target})`)
  }

  const alarmWrite = (target: string, write: () => Promise<void>): Promise<void> => {
    const fault = hit("alarm", target)
    if (fault === undefined) return write()
    if (options.alarmFaults === "throw") throw fault
    return Promise.reject(fault)
  }

  const wrapped = intercept(inner, {
    exec: (query, bindings) => {
      const fault = hit("sql", query)
      if (fault !== undefined) throw fault
      return inner.sql.exec(query, ...bindings)
    },
    setAlarm: (at) =>
      alarmWrite(`setAlarm(${String(at instanceof Date ? at.getTime() : at)})`, () => inner.setAlarm(at)),
    deleteAlarm: () => alarmWrite("deleteAlarm()", () => inner.deleteAlarm())
  })
  // Assigned onto the wrapper, not spread: `alarmAt` and `statements` must stay live getters.
  return Object.assign(wrapped, {
    inner,
    calls: (kind: FaultKind) => counts[kind],
    failCall: (kind: FaultKind, call: number) => void planned[kind].add(call),
    failNext: (kind: FaultKind) => void planned[kind].add(counts[kind] + 1),
    clear: () => {
      planned.sql.clear()
      planned.alarm.clear()
    },
    armed: () => planned.sql.size + planned.alarm.size,
    injected
  } satisfies Omit<FaultyStorage, keyof MemoryStorage>)
}
