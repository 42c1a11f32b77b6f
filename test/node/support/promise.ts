/**
 * Shared by the promise-face suites: an in-memory object context (its storage kept for reading
 * tables back) and the error a constructor throws.
 */
import { Effect } from "effect"
import type { DurabilityContext } from "../../../src/shared/platform.js"
import * as MemoryStorage from "../../../src/testing/MemoryStorage.js"

export const memoryContext = async (): Promise<DurabilityContext & { readonly memory: MemoryStorage.MemoryStorage }> => {
  const memory = await Effect.runPromise(MemoryStorage.make)
  return { storage: memory, memory }
}

export const thrownBy = (build: () => unknown): Error => {
  try {
    build()
  } catch (error) {
    return error as Error
  }
  throw new Error("expected the call to throw")
}
