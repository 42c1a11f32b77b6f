/**
 * The retained log as a benchmark target (L1): `DurabilityLog` (the library) beside a raw-SQL floor
 * doing the same by hand (one table, an INTEGER PRIMARY KEY offset, a unique dedup key), both over a
 * counted `ctx.storage` (counting.ts). Each `/append` call appends `count` records one `append` at a
 * time (a producer's single-record calls); each `/read` reads `count` records from `from` in pages of
 * `page`. bench/run.mjs times the calls from Node and divides the statements by the records.
 *
 * Routes (POST, JSON): `/append { impl, name, count }`, `/read { impl, name, from, count, page }`,
 * `/counts { impl, name }` (the counts since the last `/counts`).
 */
import { DurableObject } from "cloudflare:workers"
import { DurabilityLog } from "../../src/index.js"
import { Counter, countingContext, countingStorage } from "./counting.js"

interface Env {
  readonly TARGET: DurableObjectNamespace<LogBench>
  readonly TARGET_FLOOR: DurableObjectNamespace<LogFloorBench>
}

interface Body {
  readonly topic: string
  readonly value: number
}

const body = (value: number): Body => ({ topic: "bench", value })

/** The total of statements and rows written since the last call, and resets the counter. */
const take = (counter: Counter) => {
  const counts = counter.snapshot()
  counter.reset()
  const entries = Object.values(counts.statements)
  return {
    statements: entries.reduce((sum, entry) => sum + entry.n, 0),
    rowsWritten: entries.reduce((sum, entry) => sum + entry.rowsWritten, 0),
    transactions: counts.transactions
  }
}

export class LogBench extends DurableObject<Env> {
  private readonly counter = new Counter()
  private readonly log: DurabilityLog<Body>

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.log = new DurabilityLog<Body>({ context: countingContext(ctx, this.counter) })
  }

  async append(count: number): Promise<number> {
    let last = -1
    for (let i = 0; i < count; i++) {
      const result = await this.log.append({ body: body(i) })
      if (!result.success) throw new Error(result.error.message)
      last = result.value[0]!
    }
    return last
  }

  async read(from: number, count: number, page: number): Promise<number> {
    let read = 0
    let at = from
    while (read < count) {
      const got = await this.log.read({ from: at, limit: Math.min(page, count - read) })
      if (got.records.length === 0) break
      read += got.records.length
      at = got.nextOffset
    }
    return read
  }

  counts() {
    return take(this.counter)
  }
}

/** The floor: what a log needs at least, by hand — an insert per record, a select per page. */
export class LogFloorBench extends DurableObject<Env> {
  private readonly counter = new Counter()
  private readonly sql: SqlStorage

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.sql = countingStorage(ctx.storage, this.counter).sql
    this.sql.exec(`CREATE TABLE IF NOT EXISTS floor_log (
      log_offset INTEGER PRIMARY KEY, dedup_key TEXT NOT NULL UNIQUE, payload TEXT NOT NULL, appended_at INTEGER NOT NULL)`)
    this.counter.reset()
  }

  async append(count: number): Promise<number> {
    let last = -1
    for (let i = 0; i < count; i++) {
      const row = this.sql.exec<{ log_offset: number }>(
        "INSERT INTO floor_log (dedup_key, payload, appended_at) VALUES (?, ?, ?) RETURNING log_offset",
        crypto.randomUUID(),
        JSON.stringify(body(i)),
        Date.now()
      ).one()
      last = row.log_offset
    }
    return last
  }

  async read(from: number, count: number, page: number): Promise<number> {
    let read = 0
    let at = from
    while (read < count) {
      const rows = this.sql.exec<{ log_offset: number; payload: string }>(
        "SELECT log_offset, dedup_key, payload, appended_at FROM floor_log WHERE log_offset >= ? ORDER BY log_offset LIMIT ?",
        at,
        Math.min(page, count - read)
      ).toArray()
      if (rows.length === 0) break
      for (const row of rows) JSON.parse(row.payload)
      read += rows.length
      at = rows[rows.length - 1]!.log_offset + 1
    }
    return read
  }

  counts() {
    return take(this.counter)
  }
}

const json = (value: unknown, status = 200) => new Response(JSON.stringify(value), { status, headers: { "Content-Type": "application/json" } })

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url)
    try {
      const params = (await request.json()) as Record<string, unknown>
      const name = String(params["name"])
      const stub = params["impl"] === "floor" ? env.TARGET_FLOOR.get(env.TARGET_FLOOR.idFromName(name)) : env.TARGET.get(env.TARGET.idFromName(name))
      switch (url.pathname) {
        case "/append":
          return json({ last: await stub.append(Number(params["count"])) })
        case "/read":
          return json({ read: await stub.read(Number(params["from"]), Number(params["count"]), Number(params["page"])) })
        case "/counts":
          return json(await stub.counts())
        default:
          return json({ error: `no route ${url.pathname}` }, 404)
      }
    } catch (error) {
      return json({ error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }, 500)
    }
  }
}
