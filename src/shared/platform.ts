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
  readonly sql: SqlStorageLike
  transactionSync<T>(closure: () => T): T
  getAlarm(): Promise<number | null>
  setAlarm(scheduledTime: number | Date): Promise<void>
  deleteAlarm(): Promise<void>
}

/** What a capability needs from `DurableObjectState`: storage, and optionally the rest. */
export interface DurabilityContext {
  readonly storage: DurableObjectStorageLike
  waitUntil?(promise: Promise<unknown>): void
  blockConcurrencyWhile?<T>(callback: () => Promise<T>): Promise<T>
  readonly id?: { toString(): string; readonly name?: string | undefined }
}

/**
 * The platform's alarm invocation info (`alarm(info)`). Mirrors the current workers types, which carry
 * `scheduledTime` (the time the alarm was set for); older workers types lack it, hence optional.
 */
export interface AlarmInvocationInfo {
  readonly isRetry: boolean
  readonly retryCount: number
  readonly scheduledTime?: number | undefined
}
