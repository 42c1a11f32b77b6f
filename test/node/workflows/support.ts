/**
 * The workflow engine's tests build it on the in-memory engine, in a scope each "instance" owns: closing
 * it is an eviction (fibers and timers gone), and a new instance over the same storage is the object
 * woken again.
 */
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import * as TestBackground from "../../../src/testing/TestBackground.js"
import * as TestScheduler from "../../../src/testing/TestScheduler.js"
import type { SqlValue } from "../../../src/engine/StorageService.js"
import * as DurableWorkflowEngine from "../../../src/workflows/WorkflowEngine.js"

export type Row = Record<string, SqlValue>

export interface Instance {
  readonly run: <A, E>(effect: Effect.Effect<A, E, WorkflowEngine.WorkflowEngine | TestScheduler.Services>) => Effect.Effect<A, E>
  readonly evict: Effect.Effect<void>
}

/** One instance of the object over `storage`, with `workflows` registered (layers needing the engine). */
export const instance = (
  storage: MemoryStorage.MemoryStorage,
  workflows: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine>
) =>
  Effect.gen(function*() {
    const background = yield* TestBackground.make
    const scope = yield* Scope.make()
    const engine = TestScheduler.layer(storage, background.layer)
    const layer = Layer.provideMerge(
      workflows,
      Layer.provideMerge(DurableWorkflowEngine.layerEngine(), engine)
    )
    const context: Context.Context<WorkflowEngine.WorkflowEngine | TestScheduler.Services> = yield* Layer.buildWithScope(layer, scope)
      .pipe(Effect.orDie)
    return {
      run: (effect) => Effect.provide(effect, context),
      evict: Scope.close(scope, Exit.void)
    } satisfies Instance
  })

/** A fresh object (new storage) and its first instance. */
export const fresh = (workflows: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine>) =>
  Effect.gen(function*() {
    const storage = yield* MemoryStorage.make
    return { storage, ...(yield* instance(storage, workflows)) }
  })

/** Lets forked runs go on until `done` holds (no time passes). */
export const until = <E, R>(done: Effect.Effect<boolean, E, R>, turns = 500) =>
  Effect.gen(function*() {
    for (let i = 0; i < turns; i++) {
      if (yield* done) return
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage("condition not reached")
  })

export const rows = (storage: MemoryStorage.MemoryStorage, sql: string, ...bindings: Array<SqlValue>): Effect.Effect<Array<Row>> =>
  Effect.sync(() => storage.sql.exec(sql, ...bindings).toArray() as Array<Row>)
