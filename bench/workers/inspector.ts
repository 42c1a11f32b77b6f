/**
 * The inspector's cost as a benchmark target (I1): one object per size holding one queue of N jobs,
 * seen through `DurabilityInspector.handler` mounted in this worker's `fetch` (the full path: bearer
 * token, the HttpApi's decode, the RPC to the object, the answer's encode) and through the object's
 * `inspect` RPC alone. bench/run.mjs times every request from Node (one loopback hop, measured by
 * `GET /noop`) and reads workerd's CPU around batches of them.
 *
 * Seeding goes around the job engine on purpose: N jobs are added by `addBulk` into a paused queue,
 * then settled by one SQL `UPDATE` per chunk (90 % completed with a result, 10 % failed with an error,
 * half of those dead-lettered) instead of running N handlers: the inspector reads the rows, not how
 * they got there, and 100 000 real runs would take minutes.
 *
 * The sparse shape (issue 26), `shape: "waiting"`: the same `addBulk`s and nothing after them, the queue left
 * paused, so all N jobs stay waiting. Counts whose matches are rare among N are what an unindexed filter pays
 * for in full, which the dense shape (every count reaches the cap in its first rows) never showed.
 *
 * Routes (POST, JSON): `/reset { names }` builds a new handler (its first request builds the HttpApi's
 * runtime: the cold path), `/seed { name, start, count, chunk, shape }`, `/finish { name, deepAt, shape }`,
 * `/rpc { name, request }` (the answer's JSON, as the handler would get it); `GET /noop`;
 * `/_durability/**`: the handler.
 */
import { DurableObject } from "cloudflare:workers"
import { answerInspection, type AlarmInvocationInfo, DurabilityJobs, DurabilityScheduler, type DurableJob } from "../../src/index.js"
import { DurabilityInspector, type DurabilityInspectorHandler } from "../../src/inspector.js"

/** The handler's token (a bench secret: the runner sends it as `Authorization: Bearer`). */
const TOKEN = "i1-bench-token-0123456789abcdef"
const QUEUE = "bench"
const JOBS = "durability_jobs"
const LOGS = "durability_job_logs"
const DEAD_LETTERS = "durability_job_dead_letters"

/** How a seeded queue ends: settled by SQL (dense: completed and failed) or left paused with every job waiting (sparse). */
type Shape = "settled" | "waiting"
const shapeOf = (value: unknown): Shape => value === "waiting" ? "waiting" : "settled"

interface Env {
  readonly TARGET: DurableObjectNamespace<InspectorBench>
}

interface Payload {
  readonly i: number
  readonly to: string
  readonly subject: string
}

const payloadOf = (i: number): Payload => ({
  i,
  to: `user-${i}@example.com`,
  subject: `Your receipt #${i}: ${"lorem ipsum dolor sit amet ".repeat(6)}`
})

/** One job in ten fails (ids ending in 0); one in twenty is dead-lettered (ids ending in 00, 20, 40, …). */
const FAILED = `CAST(id AS INTEGER) % 10 = 0`
const DEAD = `CAST(id AS INTEGER) % 20 = 0`

export class InspectorBench extends DurableObject<Env> {
  readonly scheduler = new DurabilityScheduler({ context: this.ctx, log: () => undefined })
  readonly jobs = new DurabilityJobs({
    scheduler: this.scheduler,
    queues: {
      [QUEUE]: {
        retries: { maxAttempts: 1 },
        deadLetter: true,
        handler: (job: DurableJob<Payload>) => ({ sent: job.payload.i })
      }
    }
  })

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  /** What the inspector's handler calls. */
  inspect(request: unknown): Promise<unknown> {
    return answerInspection(this.scheduler, request)
  }

  /** Jobs `start..start+count-1` by `addBulk`s of `chunk` into the paused queue, then settled by SQL unless `waiting`. */
  async seed(start: number, count: number, chunk: number, shape: Shape): Promise<{ readonly added: number }> {
    const queue = this.jobs[QUEUE]
    if (start === 0) await queue.pause()
    for (let at = start; at < start + count; at += chunk) {
      const n = Math.min(chunk, start + count - at)
      await queue.addBulk(Array.from({ length: n }, (_, k) => ({ id: String(at + k), payload: payloadOf(at + k) })))
    }
    if (shape === "waiting") return { added: count }
    const sql = this.ctx.storage.sql
    sql.exec(
      `UPDATE ${JOBS} SET
         status = CASE WHEN ${FAILED} THEN 'failed' ELSE 'completed' END,
         attempt = 1, started_at = created_at + 1, finished_at = created_at + 3,
         result = CASE WHEN ${FAILED} THEN NULL ELSE '{"kind":"value","value":{"sent":' || id || '}}' END,
         last_error_name = CASE WHEN ${FAILED} THEN 'SmtpError' ELSE NULL END,
         last_error = CASE WHEN ${FAILED} THEN 'SMTP 550: mailbox unavailable for job ' || id ELSE NULL END
       WHERE queue = ? AND status = 'pending'`,
      QUEUE
    )
    sql.exec(
      `INSERT INTO ${DEAD_LETTERS} (queue, id, payload, attempts, error_name, error_message, failed_at)
       SELECT queue, id, payload, attempt, last_error_name, last_error, finished_at FROM ${JOBS}
       WHERE queue = ? AND status = 'failed' AND ${DEAD} AND CAST(id AS INTEGER) >= ? AND CAST(id AS INTEGER) < ?`,
      QUEUE,
      start,
      start + count
    )
    return { added: count }
  }

  /**
   * Once seeded: the queue resumed (nothing is pending), a failed job with a few log lines for the
   * detail, and the cursors a reader following `cursor` would hold at `deepAt` (0..1) of all jobs
   * and of the failed ones (cursors are the `seq` of the page's last job). A `waiting` queue stays
   * paused (resuming it would start running the N jobs under the measurement), and its detail job is
   * the middle waiting one.
   */
  async finish(deepAt: number, shape: Shape) {
    if (shape === "settled") await this.jobs[QUEUE].resume()
    const sql = this.ctx.storage.sql
    const one = (query: string, ...bindings: Array<SqlStorageValue>) => sql.exec(query, ...bindings).toArray()[0] ?? {}
    const total = Number(one(`SELECT COUNT(*) AS n FROM ${JOBS} WHERE queue = ?`, QUEUE).n)
    const failed = Number(one(`SELECT COUNT(*) AS n FROM ${JOBS} WHERE queue = ? AND status = 'failed'`, QUEUE).n)
    const pending = Number(one(`SELECT COUNT(*) AS n FROM ${JOBS} WHERE queue = ? AND status = 'pending'`, QUEUE).n)
    const deadLetters = Number(one(`SELECT COUNT(*) AS n FROM ${DEAD_LETTERS} WHERE queue = ?`, QUEUE).n)
    const detailStatus = shape === "waiting" ? "pending" : "failed"
    const detail = one(
      `SELECT key, id FROM ${JOBS} WHERE queue = ? AND status = ? ORDER BY seq LIMIT 1 OFFSET ?`,
      QUEUE,
      detailStatus,
      Math.floor((shape === "waiting" ? pending : failed) / 2)
    )
    const now = Date.now()
    for (let line = 0; line < 5; line++) {
      sql.exec(`INSERT OR REPLACE INTO ${LOGS} (key, seq, at, message) VALUES (?, ?, ?, ?)`, detail.key!, line + 1, now, `attempt 1: step ${line + 1} of 5`)
    }
    const deepCursor = String(one(`SELECT seq FROM ${JOBS} WHERE queue = ? ORDER BY seq LIMIT 1 OFFSET ?`, QUEUE, Math.floor(total * deepAt)).seq)
    const deepFailedCursor = String(
      one(`SELECT seq FROM ${JOBS} WHERE queue = ? AND status = 'failed' ORDER BY seq LIMIT 1 OFFSET ?`, QUEUE, Math.floor(failed * deepAt)).seq
    )
    return { shape, total, failed, pending, deadLetters, detailId: String(detail.id), deepCursor, deepFailedCursor, plans: this.plans() }
  }

  /** SQLite's plans for the statements the inspector's job reads run (their text as src/jobs/jobsTable.ts and deadLettersTable.ts write them). */
  plans(): Record<string, ReadonlyArray<string>> {
    const plan = (query: string, ...bindings: Array<SqlStorageValue>) =>
      this.ctx.storage.sql.exec(`EXPLAIN QUERY PLAN ${query}`, ...bindings).toArray().map((row) => String(row.detail))
    // The overview's counts as src/jobs/jobsTable.ts `cappedStateCounts` writes them (10 000: COUNT_CAP).
    const capped = (where: string, ...bindings: Array<SqlStorageValue>) =>
      plan(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${JOBS} WHERE ${where} LIMIT 10000)`, ...bindings)
    const now = Date.now()
    return {
      "overview leased (active elsewhere)": plan(
        `SELECT key, next_attempt_at > ? AS later FROM ${JOBS} WHERE queue = ? AND leased_until IS NOT NULL`,
        now,
        QUEUE
      ),
      "overview waiting (pending, due)": capped("queue = ? AND status = 'pending' AND next_attempt_at <= ?", QUEUE, now),
      "overview delayed (pending, later)": capped("queue = ? AND status = 'pending' AND next_attempt_at > ?", QUEUE, now),
      "overview by status (failed)": capped("queue = ? AND status = ?", QUEUE, "failed"),
      "overview dead letters": plan(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${DEAD_LETTERS} WHERE queue = ? LIMIT 10000)`, QUEUE),
      "jobs page": plan(`SELECT * FROM ${JOBS} WHERE queue = ? AND seq > ? ORDER BY seq LIMIT ?`, QUEUE, 0, 26),
      "jobs page, state=failed": plan(`SELECT * FROM ${JOBS} WHERE queue = ? AND seq > ? AND status = ? ORDER BY seq LIMIT ?`, QUEUE, 0, "failed", 26),
      "dead letters page": plan(`SELECT * FROM ${DEAD_LETTERS} WHERE queue = ? ORDER BY failed_at, id LIMIT ?`, QUEUE, 26)
    }
  }
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } })

/** The handler the `/_durability` routes use; `/reset` replaces it (its next request is a cold one). */
let inspector: DurabilityInspectorHandler | undefined

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url)
    if (url.pathname.startsWith("/_durability")) {
      if (inspector === undefined) return json({ error: "POST /reset first" }, 500)
      return (await inspector(request)) ?? json({ error: "not the inspector's" }, 404)
    }
    if (url.pathname === "/noop") return json({})
    try {
      const params = (await request.json()) as Record<string, unknown>
      const stub = () => env.TARGET.get(env.TARGET.idFromName(String(params["name"])))
      switch (url.pathname) {
        case "/reset":
          inspector = DurabilityInspector.handler({
            objects: { namespace: env.TARGET, names: params["names"] as ReadonlyArray<string> },
            token: TOKEN,
            log: () => undefined
          })
          return json({})
        case "/seed":
          return json(await stub().seed(Number(params["start"]), Number(params["count"]), Number(params["chunk"]), shapeOf(params["shape"])))
        case "/finish":
          return json(await stub().finish(Number(params["deepAt"]), shapeOf(params["shape"])))
        case "/rpc":
          // The answer's JSON as the handler receives it over RPC (before the HttpApi re-encodes it).
          return new Response(JSON.stringify(await stub().inspect(params["request"])), { headers: { "Content-Type": "application/json" } })
        default:
          return json({ error: `no route ${url.pathname}` }, 404)
      }
    } catch (error) {
      return json({ error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }, 500)
    }
  }
}
