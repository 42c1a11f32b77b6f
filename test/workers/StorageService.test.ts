/**
 * The StorageService contract inside workerd, over the real SQLite storage of a
 * `StorageObject` Durable Object. Each test body runs inside the object
 * (`runInDurableObject`) on `state.storage`; isolatedStorage gives every test
 * an empty database and no alarm.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { Effect } from "effect"
import { it } from "vitest"
import * as StorageService from "../../src/engine/StorageService.js"
import { storageServiceContract } from "../contract/StorageService.contract.js"

storageServiceContract("Durable Object SQLite (workerd)", {
  test: (name, body) =>
    it(name, async () => {
      const stub = env.STORAGE_OBJECT.get(env.STORAGE_OBJECT.newUniqueId())
      await runInDurableObject(stub, (_instance, state) =>
        Effect.runPromise(
          Effect.gen(function*() {
            const service = yield* StorageService.make(state.storage)
            yield* body({ storage: state.storage, service })
          })
        ))
    })
})
