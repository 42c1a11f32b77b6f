/**
 * The workflow engine's tests build it on a `TestDurability` object (in-memory storage, the whole engine,
 * the platform's alarm delivered as the test clock reaches it). An instance's `evict` ends its fibers and
 * timers; a new instance over the same storage is the object woken again.
 */
import type * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import { Effect, Exit, Layer, Scope } from "effect"
import type { SqlValue } from "../../../src/engine/StorageService.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import * as DurableWorkflowEngine from "../../../src/workflows/WorkflowEngine.js"

export type Row = Record<string, SqlValue>

export interface Instance {
  readonly object: TestDurability.TestObject
  readonly run: <A, E>(effect: Effect.Effect<A, E, WorkflowEngine.WorkflowEngine>) => Effect.Effect<A, E>
  readonly evict: Effect.Effect<void>
}

/** One instance of the object over `storage`, with `workflows` registered (layers needing the engine). */
export const instance = (
  storage: MemoryStorage.MemoryStorage,
  workflows: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine>
): Effect.Effect<Instance, never, Scope.Scope> =>
  Effect.gen(function*() {
    const object = yield* Effect.orDie(TestDurability.make({ storage }))
    const scope = yield* Scope.make()
    const context = yield* object.run(
      Layer.buildWithScope(Layer.provideMerge(workflows, DurableWorkflowEngine.layerEngine()), scope)
    ).pipe(Effect.orDie)
    return {
      object,
      run: (effect) => object.run(Effect.provide(effect, context)),
      evict: Effect.zipRight(Scope.close(scope, Exit.void), object.evict)
    }
  })

/** A fresh object (new storage) and its first instance. */
export const fresh = (workflows: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine>) =>
  Effect.gen(function*() {
    const storage = yield* MemoryStorage.make
    return { storage, ...(yield* instance(storage, workflows)) }
  })

// Execution ids are hashed with WebCrypto: a real promise, which only a real macrotask lets settle.
const macrotask = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 0)))

/** Lets forked runs go on until `done` holds (no test-clock time passes). */
export const until = <E, R>(done: Effect.Effect<boolean, E, R>, turns = 500) =>
  Effect.gen(function*() {
    for (let i = 0; i < turns; i++) {
      if (yield* done) return
      yield* Effect.yieldNow()
      if (i % 10 === 9) yield* macrotask
    }
    return yield* Effect.dieMessage("condition not reached")
  })

export const rows = (storage: MemoryStorage.MemoryStorage, sql: string, ...bindings: Array<SqlValue>): Effect.Effect<Array<Row>> =>
  Effect.sync(() => storage.sql.exec(sql, ...bindings).toArray() as Array<Row>)
