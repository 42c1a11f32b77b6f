/**
 * `ShardedJobsObject`: one shard of a sharded job queue, as an application writes it: a
 * `DurableObject` with a `DurabilityJobs` and the one method a `DurabilityJobs.router` calls
 * (`jobsCall`). Handler calls are recorded in the object's own table; the scenarios read them,
 * the stored job rows and the alarm over RPC.
 *
 * Queues (payload `{ tag }`): `task` returns `{ tag }`; `report` (a flow's parent) returns how many
 * children completed.
 */
import { DurableObject } from "cloudflare:workers"
import { type AlarmInvocationInfo, DurabilityJobs, type DurableJob } from "../../../src/index.js"

export interface ShardTask {
  readonly tag?: string
  readonly tenant?: string
}

export interface ShardCall {
  readonly seq: number
  readonly queue: string
  readonly id: string
  readonly instance: string
  readonly ended: number
}

export interface ShardRow {
  readonly key: string
  readonly queue: string
  readonly id: string
  readonly status: string
  readonly parent_key: string | null
}

export class ShardedJobsObject extends DurableObject {
  readonly instance = crypto.randomUUID()

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS shard_calls (
      seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, id TEXT NOT NULL, instance TEXT NOT NULL, ended INTEGER NOT NULL DEFAULT 0
    )`)
  }

  readonly jobs = new DurabilityJobs({
    context: this.ctx,
    // Not on the console: the test pool hangs when an instance it reset writes to it.
    log: () => {},
    queues: {
      task: {
        handler: (job: DurableJob<ShardTask>) => this.record(job, () => ({ tag: job.payload.tag ?? null }))
      },
      report: {
        handler: (job: DurableJob<ShardTask>) =>
          this.record(job, async () => {
            const children = Object.values(await job.childrenValues())
            return { completed: children.filter((child) => child.state === "completed").length }
          })
      }
    }
  })

  private async record<A>(job: DurableJob<ShardTask>, body: () => A | Promise<A>): Promise<A> {
    const sql = this.ctx.storage.sql
    const { seq } = sql.exec<{ seq: number }>("INSERT INTO shard_calls (queue, id, instance) VALUES (?, ?, ?) RETURNING seq", job.queue, job.id, this.instance).one()
    try {
      return await body()
    } finally {
      sql.exec("UPDATE shard_calls SET ended = 1 WHERE seq = ?", seq)
    }
  }

  // The ops of the protocol calls this instance answered (in memory: the scenarios count a listing's calls).
  private readonly answered: Array<string> = []

  /** The router's entry point. */
  jobsCall(call: unknown): Promise<unknown> {
    this.answered.push(String((call as { readonly op?: unknown } | null)?.op))
    return DurabilityJobs.serve(this.jobs, call)
  }

  /** The ops of the protocol calls this instance answered, oldest first. */
  protocolCalls(): ReadonlyArray<string> {
    return this.answered
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.jobs.alarm(info)
  }

  rows(): ReadonlyArray<ShardRow> {
    return this.ctx.storage.sql.exec("SELECT key, queue, id, status, parent_key FROM durability_jobs ORDER BY seq").toArray() as unknown as ReadonlyArray<ShardRow>
  }

  calls(): ReadonlyArray<ShardCall> {
    return this.ctx.storage.sql.exec("SELECT * FROM shard_calls ORDER BY seq").toArray() as unknown as ReadonlyArray<ShardCall>
  }

  alarmAt(): Promise<number | null> {
    return this.ctx.storage.getAlarm()
  }

  whoami(): string {
    return this.instance
  }
}
