/**
 * `InspectedObject`: an object with every capability, seen through `DurabilityInspector.handler`
 * (inspector.api.test.ts): operations, named alarms, job queues (`work` fails its `fail`-payload
 * jobs to the dead letters on their only attempt) and schedules, and the `inspect` method the handler
 * calls. Stored text carries markup-like strings so the tests can check they come back unchanged.
 */
import { DurableObject } from "cloudflare:workers"
import {
  answerInspection,
  type AlarmInvocationInfo,
  Durability,
  DurabilityAlarms,
  DurabilityJobs,
  DurabilityScheduler,
  DurabilitySchedules,
  type DurableCall,
  type DurableJob,
  NonRetryableError
} from "../../../src/index.js"

/** Strings that would run or break out of an attribute if a page rendered them as HTML. */
export const XSS = {
  script: "<script>window.__xss = 1</script>",
  attribute: `"><img src=x onerror=alert(1)>`
} as const

export interface WorkPayload {
  readonly n: number
  readonly fail?: boolean
  readonly note?: string
}

const DAY = 24 * 60 * 60 * 1000

export class InspectedObject extends DurableObject {
  readonly scheduler = new DurabilityScheduler({
    context: this.ctx,
    // Not the console: the test pool hangs when an instance it reset writes to it.
    log: () => undefined
  })

  readonly durability = new Durability({
    scheduler: this.scheduler,
    handlers: {
      send: (call: DurableCall<{ readonly to: string }>) => ({ sent: call.payload.to }),
      boom: (_call: DurableCall<unknown>) => {
        throw new NonRetryableError(`boom ${XSS.script}`)
      }
    }
  })

  readonly alarms = new DurabilityAlarms({
    scheduler: this.scheduler,
    handlers: { remind: () => undefined, expire: () => undefined }
  })

  readonly jobs = new DurabilityJobs({
    scheduler: this.scheduler,
    queues: {
      work: {
        retries: { maxAttempts: 1 },
        deadLetter: true,
        handler: async (job: DurableJob<WorkPayload>) => {
          await job.log(`line ${XSS.attribute}`)
          await job.progress({ done: job.payload.n, note: XSS.script })
          if (job.payload.fail === true && !this.healed) throw new Error(`failed ${XSS.attribute}`)
          return { doubled: job.payload.n * 2 }
        }
      },
      later: {
        handler: (job: DurableJob<WorkPayload>) => ({ n: job.payload.n })
      }
    }
  })

  readonly schedules = new DurabilitySchedules({
    scheduler: this.scheduler,
    handlers: { tick: () => undefined }
  })

  /** Once set, `fail` jobs succeed (so a retried or redriven one completes). In memory: no test resets the object. */
  private healed = false

  heal(): void {
    this.healed = true
  }

  /** The inspector's entry point. */
  inspect(request: unknown) {
    return answerInspection(this.scheduler, request)
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  /**
   * Seeds every capability: `ok` work jobs that complete, `fail` ones that land in the dead letters,
   * delayed `later` jobs, an operation that completes and one that fails, two named alarms a day out,
   * two schedules. Resolves once the immediate jobs and operations settled.
   */
  async seed(options: { readonly ok: number; readonly fail: number; readonly later: number }): Promise<void> {
    const ids: Array<string> = []
    for (let n = 0; n < options.ok; n++) {
      ids.push((await this.jobs.work.add({ id: `ok-${n}`, payload: { n, note: XSS.script } })).id)
    }
    for (let n = 0; n < options.fail; n++) {
      ids.push((await this.jobs.work.add({ id: `fail-${n}`, payload: { n, fail: true, note: XSS.attribute } })).id)
    }
    for (let n = 0; n < options.later; n++) {
      await this.jobs.later.add({ id: `later-${n}`, payload: { n }, delayMs: DAY })
    }
    await this.durability.send({ id: "sent-1", payload: { to: XSS.attribute } })
    await this.durability.boom({ id: "boom-1", payload: null })
    await this.alarms.remind(Date.now() + DAY)
    await this.alarms.expire(Date.now() + 2 * DAY)
    await this.schedules.tick.upsert("daily", { cron: "0 9 * * *", timezone: "Europe/Lisbon" }, { payload: { note: XSS.script } })
    await this.schedules.tick.upsert("hourly", { everyMs: 60 * 60 * 1000 })
    for (const id of ids) await this.jobs.work.job(id).wait({ timeoutMs: 10_000 })
    await this.durability.send.job("sent-1").wait({ timeoutMs: 10_000 })
    await this.durability.boom.job("boom-1").wait({ timeoutMs: 10_000 })
  }

  /** A work job's state as the queue reports it (what an action changed). */
  async jobState(queue: "work" | "later", id: string): Promise<string | undefined> {
    return (await this.jobs[queue].get(id))?.state
  }

  async waitJob(id: string): Promise<string | undefined> {
    return (await this.jobs.work.job(id).wait({ timeoutMs: 10_000 }))?.state
  }

  async isPaused(queue: "work" | "later"): Promise<boolean> {
    return this.jobs[queue].isPaused()
  }

  async scheduleStatus(key: string): Promise<string | undefined> {
    return (await this.schedules.tick.get(key))?.status
  }

  async alarmNames(): Promise<ReadonlyArray<string>> {
    const names: Array<string> = []
    for (const name of ["remind", "expire"] as const) if ((await this.alarms.get(name)) !== undefined) names.push(name)
    return names
  }
}
