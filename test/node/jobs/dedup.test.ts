/**
 * Deduplication by key: without `ttlMs` a duplicate is dropped while the first job is unfinished;
 * with `ttlMs` (throttle) for that long whatever its state; `mode: "replace"` (debounce) replaces
 * the payload and run time of a job not started yet. The dedup table's primary key (one row per
 * key) is what makes two concurrent adds unable to both insert.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import * as Jobs from "../../../src/jobs/Jobs.js"
import * as TestDurability from "../../../src/testing/TestDurability.js"
import { count, gates, jobRow, recorder, rows, stored, type TestObject } from "./support.js"

const setup = (object: TestObject) =>
  Effect.gen(function*() {
    const held = gates()
    const events = recorder()
    const seen: Array<string> = []
    const jobs = yield* object.run(Jobs.make({
      work: Jobs.queue({
        handler: (job: Jobs.JobContext<string>) =>
          Effect.gen(function*() {
            seen.push(`${job.id}:${job.payload}@${yield* Clock.currentTimeMillis}`)
            if (job.payload.startsWith("hold")) yield* held.wait(job.id)
          })
      })
    }, { onLifecycleEvent: events.hook }))
    return { jobs, held, events, seen }
  })

const dedupRows = (object: TestObject) => rows(object, "SELECT queue, dedup_key, job_id, expires_at FROM durability_job_dedup ORDER BY dedup_key")

describe("dedup without ttl", () => {
  it.scoped("drops duplicates while the first job is delayed, waiting or active; allows one again once it finished", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, held, jobs, seen } = yield* setup(object)
      const add = (id: string, payload: string, delayMs?: number) =>
        object.run(jobs.work.add({ id, payload, dedup: { key: "k" }, ...(delayMs === undefined ? {} : { delayMs }) }))

      expect(yield* add("a", "hold", 1_000)).toEqual({ id: "a", state: "delayed", deduplicated: false })
      expect(yield* add("b", "x")).toEqual({ id: "a", state: "delayed", deduplicated: true })
      yield* TestClock.adjust(1_000)
      expect(yield* add("c", "x")).toEqual({ id: "a", state: "active", deduplicated: true })
      expect(events.of("deduplicated")).toMatchObject([
        { id: "b", existingId: "a", replaced: false, dedupKey: "k" },
        { id: "c", existingId: "a", replaced: false, dedupKey: "k" }
      ])
      expect(yield* jobRow(object, "work", "b")).toBeUndefined()
      yield* held.open("a")
      yield* TestClock.adjust(0)
      expect(yield* add("d", "x")).toEqual({ id: "d", state: "waiting", deduplicated: false })
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["a:hold@1000", "d:x@1000"])
      expect(yield* dedupRows(object)).toEqual([{ queue: "work", dedup_key: "k", job_id: "d", expires_at: null }])

      // A failed or canceled first job frees the key too.
      yield* add("e", "later", 60_000)
      expect(yield* add("f", "x")).toMatchObject({ id: "e", deduplicated: true })
      yield* object.run(jobs.work.cancel("e"))
      expect(yield* add("g", "x", 60_000)).toEqual({ id: "g", state: "delayed", deduplicated: false })
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_dedup")).toBe(1)
    }))

  it.scoped("keys are per queue", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const jobs = yield* object.run(Jobs.make({
        a: Jobs.queue({ handler: () => Effect.void }),
        b: Jobs.queue({ handler: () => Effect.void })
      }))
      yield* object.run(jobs.a.add({ id: "1", payload: null, delayMs: 10_000, dedup: { key: "k" } }))
      expect(yield* object.run(jobs.b.add({ id: "1", payload: null, delayMs: 10_000, dedup: { key: "k" } }))).toMatchObject({ deduplicated: false })
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_dedup")).toBe(2)
    }))
})

describe("dedup with ttlMs (throttle)", () => {
  it.scoped("drops duplicates for ttlMs after the first was added, even once it completed; then allows one", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs, seen } = yield* setup(object)
      const add = (id: string) => object.run(jobs.work.add({ id, payload: "x", dedup: { key: "t", ttlMs: 10_000 } }))
      expect(yield* add("a")).toMatchObject({ id: "a", deduplicated: false })
      yield* TestClock.adjust(0)
      expect(yield* dedupRows(object)).toEqual([{ queue: "work", dedup_key: "t", job_id: "a", expires_at: 10_000 }])
      yield* TestClock.adjust(9_999)
      expect(yield* add("b")).toEqual({ id: "a", state: "completed", deduplicated: true })
      // The first job gone: still throttled, told as removed.
      yield* object.run(jobs.work.remove("a"))
      expect(yield* add("c")).toEqual({ id: "a", state: "removed", deduplicated: true })
      yield* TestClock.adjust(1)
      expect(yield* add("d")).toEqual({ id: "d", state: "waiting", deduplicated: false })
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["a:x@0", "d:x@10000"])
      expect(yield* dedupRows(object)).toEqual([{ queue: "work", dedup_key: "t", job_id: "d", expires_at: 20_000 }])
    }))

  it.scoped("with ttlMs a long unfinished first job frees the key when the ttl ends", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "a", payload: "x", delayMs: 60_000, dedup: { key: "t", ttlMs: 5_000 } }))
      yield* TestClock.adjust(5_000)
      expect(yield* object.run(jobs.work.add({ id: "b", payload: "x", delayMs: 60_000, dedup: { key: "t", ttlMs: 5_000 } })))
        .toEqual({ id: "b", state: "delayed", deduplicated: false })
    }))
})

describe("dedup mode replace (debounce)", () => {
  it.scoped("replaces the payload and run time of a delayed job; it runs once, with the last payload, at the last time", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { events, jobs, seen } = yield* setup(object)
      const add = (id: string, payload: string, delayMs: number) =>
        object.run(jobs.work.add({ id, payload, delayMs, dedup: { key: "r", mode: "replace" } }))
      expect(yield* add("a", "v1", 30_000)).toMatchObject({ id: "a", state: "delayed", deduplicated: false })
      expect(object.storage.alarmAt).toBe(30_000)
      yield* TestClock.adjust(1_000)
      expect(yield* add("b", "v2", 60_000)).toEqual({ id: "a", state: "delayed", deduplicated: true })
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ payload: stored("v2"), run_at: 61_000, next_attempt_at: 61_000 })
      yield* TestClock.adjust(1_000)
      // An earlier time moves the wake-up earlier.
      expect(yield* add("c", "v3", 20_000)).toEqual({ id: "a", state: "delayed", deduplicated: true })
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ payload: stored("v3"), run_at: 22_000 })
      expect(object.storage.alarmAt).toBe(22_000)
      expect(events.of("deduplicated")).toMatchObject([
        { id: "b", existingId: "a", replaced: true, dedupKey: "r" },
        { id: "c", existingId: "a", replaced: true, dedupKey: "r" }
      ])
      yield* TestClock.adjust(60_000)
      expect(seen).toEqual(["a:v3@22000"])
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs")).toBe(1)
    }))

  it.scoped("replaces a waiting job (paused queue); leaves an active one alone", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { held, jobs, seen } = yield* setup(object)
      yield* object.run(jobs.work.pause)
      yield* object.run(jobs.work.add({ id: "a", payload: "hold-1", dedup: { key: "r", mode: "replace" } }))
      yield* TestClock.adjust(0)
      expect(yield* object.run(jobs.work.add({ id: "b", payload: "hold-2", dedup: { key: "r", mode: "replace" } })))
        .toEqual({ id: "a", state: "waiting", deduplicated: true })
      yield* object.run(jobs.work.resume)
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["a:hold-2@0"])
      expect(yield* object.run(jobs.work.add({ id: "c", payload: "v3", dedup: { key: "r", mode: "replace" } })))
        .toEqual({ id: "a", state: "active", deduplicated: true })
      expect(yield* jobRow(object, "work", "a")).toMatchObject({ payload: stored("hold-2") })
      yield* held.open("a")
      yield* TestClock.adjust(0)
      expect(seen).toEqual(["a:hold-2@0"])
    }))
})

describe("dedup under concurrency", () => {
  it.scoped("twenty adds of one key from concurrent fibers in the same tick insert one job", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs, seen } = yield* setup(object)
      const results = yield* Effect.all(
        Array.from({ length: 20 }, (_, i) => object.run(jobs.work.add({ id: `j${i}`, payload: `p${i}`, dedup: { key: "same" } }))),
        { concurrency: "unbounded" }
      )
      const inserted = results.filter((result) => !result.deduplicated)
      expect(inserted).toHaveLength(1)
      const winner = inserted[0]!.id
      expect(results.every((result) => result.id === winner)).toBe(true)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_jobs")).toBe(1)
      expect(yield* dedupRows(object)).toEqual([{ queue: "work", dedup_key: "same", job_id: winner, expires_at: null }])
      yield* TestClock.adjust(0)
      expect(seen).toHaveLength(1)
    }))

  it.scoped("the dedup table holds one row per (queue, key): a second row is refused by SQLite", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const { jobs } = yield* setup(object)
      yield* object.run(jobs.work.add({ id: "a", payload: "x", delayMs: 1_000, dedup: { key: "k" } }))
      expect(() =>
        object.storage.sql.exec("INSERT INTO durability_job_dedup (queue, dedup_key, job_id, expires_at) VALUES ('work', 'k', 'z', NULL)")
      ).toThrow(/UNIQUE|PRIMARY KEY|constraint/i)
      expect(yield* count(object, "SELECT COUNT(*) FROM durability_job_dedup")).toBe(1)
    }))
})
