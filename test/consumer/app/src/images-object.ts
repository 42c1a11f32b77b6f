/** The Effect face in a Durable Object: one ManagedRuntime per instance over the object's scheduler. */
import { DurableObject } from "cloudflare:workers"
import { Effect, Layer, ManagedRuntime } from "effect"
import type { AlarmInvocationInfo } from "durability"
import { Scheduler } from "durability/effect"
import type { Env } from "./env.js"
import { makeJobs, Renderer } from "./jobs.js"

const renderer = Layer.succeed(Renderer, {
  render: (imageId, width) => Effect.succeed(`${imageId}/w${width}.webp`),
  sweep: () => Effect.succeed(0)
})

export class Images extends DurableObject<Env> {
  private readonly runtime = ManagedRuntime.make(
    Layer.mergeAll(Scheduler.layerDurableObject(this.ctx, { alarmMinDelayMs: 5_000 }), renderer)
  )

  private readonly jobs = this.ctx.blockConcurrencyWhile(() =>
    this.runtime.runPromise(Effect.gen(function*() {
      yield* (yield* Scheduler.Scheduler).warm
      return yield* makeJobs
    }))
  )

  async resize(imageId: string, width: number) {
    const { ops, alarms } = await this.jobs
    return this.runtime.runPromise(Effect.gen(function*() {
      yield* ops.register("resize", { id: `${imageId}:${width}`, payload: { imageId, width } })
      yield* alarms.schedule("sweep", Date.now() + 60_000)
      return yield* ops.wait("resize", `${imageId}:${width}`, 2_000)
    }))
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.jobs
    await this.runtime.runPromise(Effect.flatMap(Scheduler.Scheduler, (scheduler) => scheduler.alarm(info)))
  }
}
