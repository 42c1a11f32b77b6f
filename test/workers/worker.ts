/**
 * The Worker that vitest-pool-workers loads for the workerd test project.
 * Each Durable Object class here exists only for tests.
 */
import { DurableObject } from "cloudflare:workers"

/** A bare SQLite-backed object: tests reach its storage through `runInDurableObject`. */
export class StorageObject extends DurableObject {}

export default { fetch: () => new Response("durability test worker") }
