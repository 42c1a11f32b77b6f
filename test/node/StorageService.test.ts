/**
 * The StorageService contract over the sql.js-backed `MemoryStorage`, under
 * `@effect/vitest` (`it.effect`: TestClock, so `Effect.sleep` never really waits).
 */
import { it } from "@effect/vitest"
import { Effect } from "effect"
import * as StorageService from "../../src/StorageService.js"
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
