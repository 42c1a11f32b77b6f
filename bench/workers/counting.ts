/**
 * Counts every SQL statement (by text) and the rows it wrote, plus alarm writes, by wrapping
 * `ctx.storage` of a benchmark object. Used the same way by the library, the peer and the floor,
 * so B2's counts are comparable. `rowsWritten` is workerd's own count (index rows included).
 */
export interface StatementCount {
  n: number
  rowsWritten: number
}

export interface Counts {
  statements: Record<string, StatementCount>
  setAlarm: number
  deleteAlarm: number
  getAlarm: number
  transactions: number
}

const normalize = (query: string): string => query.replace(/\s+/g, " ").trim()

export class Counter {
  private statements = new Map<string, StatementCount>()
  private last: { cursor: { rowsWritten?: number }; entry: StatementCount } | undefined
  setAlarm = 0
  deleteAlarm = 0
  getAlarm = 0
  transactions = 0

  /** Called after a statement ran; its rows-written count is read once the next statement starts. */
  record(query: string, cursor: { rowsWritten?: number }): void {
    this.flush()
    let entry = this.statements.get(query)
    if (entry === undefined) {
      entry = { n: 0, rowsWritten: 0 }
      this.statements.set(query, entry)
    }
    entry.n++
    this.last = { cursor, entry }
  }

  private flush(): void {
    if (this.last === undefined) return
    try {
      this.last.entry.rowsWritten += this.last.cursor.rowsWritten ?? 0
    } catch {
      // a cursor that can no longer be read wrote nothing we can see
    }
    this.last = undefined
  }

  reset(): void {
    this.flush()
    this.statements = new Map()
    this.setAlarm = this.deleteAlarm = this.getAlarm = this.transactions = 0
  }

  snapshot(): Counts {
    this.flush()
    const statements: Record<string, StatementCount> = {}
    for (const [query, entry] of this.statements) {
      const key = normalize(query)
      const sum = (statements[key] ??= { n: 0, rowsWritten: 0 })
      sum.n += entry.n
      sum.rowsWritten += entry.rowsWritten
    }
    return {
      statements,
      setAlarm: this.setAlarm,
      deleteAlarm: this.deleteAlarm,
      getAlarm: this.getAlarm,
      transactions: this.transactions
    }
  }
}

/** Calls methods on the real object (workerd's API objects check their receiver). */
const forward = (target: any, property: PropertyKey): unknown => {
  const value = target[property]
  return typeof value === "function" ? value.bind(target) : value
}

/** `ctx.storage` with counted `sql.exec`, `transactionSync` and alarm calls. */
export const countingStorage = (storage: DurableObjectStorage, counter: Counter): DurableObjectStorage => {
  const realSql = storage.sql
  const sql = new Proxy(realSql, {
    get(target, property) {
      if (property === "exec") {
        return (query: string, ...bindings: Array<unknown>) => {
          const cursor = target.exec(query, ...(bindings as Array<SqlStorageValue>))
          counter.record(query, cursor)
          return cursor
        }
      }
      return forward(target, property)
    }
  })
  return new Proxy(storage, {
    get(target, property) {
      switch (property) {
        case "sql":
          return sql
        case "transactionSync":
          return <T>(closure: () => T): T => {
            counter.transactions++
            return target.transactionSync(closure)
          }
        case "setAlarm":
          return (at: number | Date, options?: DurableObjectSetAlarmOptions) => {
            counter.setAlarm++
            return target.setAlarm(at, options)
          }
        case "deleteAlarm":
          return (options?: DurableObjectSetAlarmOptions) => {
            counter.deleteAlarm++
            return target.deleteAlarm(options)
          }
        case "getAlarm":
          return (options?: DurableObjectGetAlarmOptions) => {
            counter.getAlarm++
            return target.getAlarm(options)
          }
        default:
          return forward(target, property)
      }
    }
  })
}

/** `ctx` whose `storage` is counted; everything else is the real state. */
export const countingContext = (ctx: DurableObjectState, counter: Counter): DurableObjectState => {
  const storage = countingStorage(ctx.storage, counter)
  return new Proxy(ctx, {
    get(target, property) {
      if (property === "storage") return storage
      return forward(target, property)
    }
  })
}
