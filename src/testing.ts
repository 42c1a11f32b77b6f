/**
 * `durability/testing`: in-memory backends and test handles, so handlers can be
 * tested in plain Node under `TestClock` with no workerd and no real waiting.
 * @module durability/testing
 */
export * as MemoryStorage from "./testing/MemoryStorage.js"
export * as TestBackground from "./testing/TestBackground.js"
export * as TestScheduler from "./testing/TestScheduler.js"
export * as TestDurability from "./testing/TestDurability.js"
export * as TestObjectState from "./testing/TestObjectState.js"
export * as FaultyStorage from "./testing/FaultyStorage.js"
