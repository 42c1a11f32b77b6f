/**
 * Structural views of the Cloudflare runtime objects the library touches.
 * Declared here instead of using the ambient workers types so the engine also
 * type-checks (and runs) in plain Node, where tests use in-memory backends.
 * @internal
 */

export type SqlValue = ArrayBuffer | string | number | null

export interface SqlCursorLike {
  toArray(): Array<Record<string, SqlValue>>
  readonly rowsWritten?: number
}

export interface SqlStorageLike {
  exec(query: string, ...bindings: Array<any>): SqlCursorLike
}

export interface DurableObjectStorageLike {
  /** The storage's SQLite database. */
  readonly sql: SqlStorageLike
  /**
   * Runs `closure` in one transaction: every SQL write and alarm change in it commits together or not at all.
   */
  transactionSync<T>(closure: () => T): T
  /** The object's alarm time (epoch milliseconds), or null when none is set. */
  getAlarm(): Promise<number | null>
  /** Sets the object's one alarm, replacing any earlier one. */
  setAlarm(scheduledTime: number | Date): Promise<void>
  /** Deletes the object's alarm. */
  deleteAlarm(): Promise<void>
}

/** What a capability needs from `DurableObjectState`: storage, and optionally the rest. */
export interface DurabilityContext {
  /** The object's storage; the library needs its SQLite API (a class with SQLite storage). */
  readonly storage: DurableObjectStorageLike
  /** Keeps the isolate alive until the promise settles, for work that outlives a call. */
  waitUntil?(promise: Promise<unknown>): void
  /** Runs `callback` while the object takes no other event (the library warms up inside it when it can). */
  blockConcurrencyWhile?<T>(callback: () => Promise<T>): Promise<T>
  /**
   * The object's id (`toString()`: its hex form; `name`: the name it was got by, if any), for diagnostics
   * and the inspector.
   */
  readonly id?: { toString(): string; readonly name?: string | undefined }
}

/**
 * The platform's alarm invocation info (`alarm(info)`). Mirrors the current workers types, which carry
 * `scheduledTime` (the time the alarm was set for); older workers types lack it, hence optional.
 */
export interface AlarmInvocationInfo {
  /** Whether this invocation is a retry of a failed alarm. */
  readonly isRetry: boolean
  /** How many times this alarm has been retried. */
  readonly retryCount: number
  /** The time the alarm was set for (epoch milliseconds), when the platform says. */
  readonly scheduledTime?: number | undefined
}

/** The object's id (`ctx.id`) as text, or undefined when the context has none it can read (a test double). */
export const objectIdOf = (context: DurabilityContext): string | undefined => {
  try {
    return context.id?.toString()
  } catch {
    return undefined
  }
}
