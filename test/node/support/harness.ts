/**
 * Builds the engine on in-memory backends inside a scope the test owns, so a
 * test can "evict" the object (close the scope) and build a fresh instance on
 * the same storage.
 */
import { Context, Effect, Exit, Layer, Scope } from "effect"
import type * as Scheduler from "../../../src/engine/Scheduler.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import * as TestBackground from "../../../src/testing/TestBackground.js"
import * as TestScheduler from "../../../src/testing/TestScheduler.js"
import * as TaskTable from "../../shared/TaskTable.js"

export interface Instance {
  readonly context: Context.Context<TestScheduler.Services>
  readonly handle: Scheduler.TableHandle
  readonly scope: Scope.CloseableScope
  /** Runs an effect against this instance's services. */
  readonly run: <A, E>(effect: Effect.Effect<A, E, TestScheduler.Services>) => Effect.Effect<A, E>
  /** Simulated eviction: every fiber and timer of the instance is gone; storage stays. */
  readonly evict: Effect.Effect<void>
}

export const instance = (
  storage: MemoryStorage.MemoryStorage,
  background: TestBackground.TestBackground,
  tasks: TaskTable.TaskTableOptions,
  options: Scheduler.SchedulerOptions = {}
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(TestScheduler.layer(storage, background.layer, options), scope)
    const run = <A, E>(effect: Effect.Effect<A, E, TestScheduler.Services>) => Effect.provide(effect, context)
    const handle = yield* run(TaskTable.attach(tasks))
    return { context, handle, scope, run, evict: Scope.close(scope, Exit.void) } satisfies Instance
  })

export const fresh = (tasks: TaskTable.TaskTableOptions, options: Scheduler.SchedulerOptions = {}) =>
  Effect.gen(function*() {
    const storage = yield* MemoryStorage.make
    const background = yield* TestBackground.make
    const object = yield* instance(storage, background, tasks, options)
    return { storage, background, ...object }
  })
