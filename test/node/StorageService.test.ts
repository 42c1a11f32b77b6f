/**
 * The StorageService contract over the sql.js-backed `MemoryStorage`, under
 * `@effect/vitest` (`it.effect`: TestClock, so `Effect.sleep` never really waits).
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as StorageService from "../../src/engine/StorageService.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import { storageServiceContract } from "../contract/StorageService.contract.js"

storageServiceContract("MemoryStorage (sql.js)", {
  test: (name, body) =>
    it.effect(name, () =>
      Effect.gen(function*() {
        const storage = yield* MemoryStorage.make
        const service = yield* StorageService.make(storage)
        yield* body({ storage, service })
      }))
})

it.effect("MemoryStorage: a statement kept prepared runs again after a snapshot (which frees every statement)", () =>
  Effect.gen(function*() {
    const storage = yield* MemoryStorage.make
    storage.sql.exec("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    const insert = (id: number) => storage.sql.exec("INSERT INTO t (id) VALUES (?) RETURNING id", id).toArray()
    expect(insert(1)).toEqual([{ id: 1 }])
    expect(insert(2)).toEqual([{ id: 2 }])
    const image = storage.snapshot()
    expect(image.byteLength).toBeGreaterThan(0)
    expect(insert(3)).toEqual([{ id: 3 }])
    expect(storage.sql.exec("SELECT COUNT(*) AS n FROM t").toArray()).toEqual([{ n: 3 }])
  }))
