/**
 * A named alarm's payload (JSON, stored with its occurrence, replaced with it) and its pages, on both
 * faces, on TestClock: the handler's `info.payload`, the stored row and `get`/`list` are asserted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, TestClock } from "effect"
import { it as vit } from "vitest"
import { DurabilityAlarms, type DurableAlarmInfo, DurabilityScheduler } from "durability"
import { TestObjectState } from "durability/testing"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as TestDurability from "../../src/testing/TestDurability.js"

describe("NamedAlarms: payloads", () => {
  it.scoped("reach the handler; a replacement replaces the payload; none is undefined; bad JSON writes nothing", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<unknown> = []
      const alarms = yield* object.run(NamedAlarms.make({
        remind: NamedAlarms.alarm({ handler: (info) => Effect.sync(() => seen.push(info.payload)) })
      }))
      yield* object.run(alarms.schedule("remind", 1_000, { to: "alice", note: "first" }))
      yield* object.run(alarms.schedule("remind", 2_000, { to: "alice", note: "second" }))
      const row = object.storage.sql.exec("SELECT payload FROM durability_alarms WHERE name = 'remind'").toArray()[0]
      expect(JSON.parse(String(row?.payload))).toEqual({ kind: "value", value: { to: "alice", note: "second" } })
      expect(yield* object.run(alarms.get("remind"))).toMatchObject({ _tag: "Some", value: { payload: { to: "alice", note: "second" } } })
      yield* TestClock.adjust(2_000)
      expect(seen).toEqual([{ to: "alice", note: "second" }])

      yield* object.run(alarms.schedule("remind", 3_000))
      yield* TestClock.adjust(1_000)
      expect(seen).toEqual([{ to: "alice", note: "second" }, undefined])

      const before = object.storage.statements.length
      const error = yield* Effect.flip(object.run(alarms.schedule("remind", 5_000, { at: new Date(0) })))
      expect(error).toMatchObject({ _tag: "InvalidInputError", field: "payload", kind: "type" })
      expect(object.storage.statements.length).toBe(before)
    }))

  it.scoped("list pages soonest first with a cursor, filtered by status", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const alarms = yield* object.run(NamedAlarms.make({
        a: NamedAlarms.alarm({ handler: () => Effect.void }),
        b: NamedAlarms.alarm({ handler: () => Effect.void }),
        c: NamedAlarms.alarm({ handler: () => Effect.void })
      }))
      yield* object.run(alarms.schedule("c", 10_000))
      yield* object.run(alarms.schedule("a", 30_000))
      yield* object.run(alarms.schedule("b", 20_000, [1, 2]))
      const first = yield* object.run(alarms.list({ limit: 2 }))
      expect(first.items.map((state) => [state.name, state.nextAttemptAt, state.payload])).toEqual([["c", 10_000, undefined], ["b", 20_000, [1, 2]]])
      expect(first.cursor).toBeDefined()
      const second = yield* object.run(alarms.list({ limit: 2, cursor: first.cursor }))
      expect(second).toMatchObject({ items: [{ name: "a" }] })
      expect(second.cursor).toBeUndefined()
      expect((yield* object.run(alarms.list({ status: "failed" }))).items).toEqual([])
      expect(yield* Effect.flip(object.run(alarms.list({ limit: 0 })))).toMatchObject({ _tag: "InvalidInputError", field: "limit" })
    }))
})

describe("NamedAlarms: one property per name", () => {
  it.scoped("alarms.<name>.schedule/get/cancel are the by-name calls; \"schedule\" is a reserved name", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<unknown> = []
      const alarms = yield* object.run(NamedAlarms.make({
        cleanup: NamedAlarms.alarm({ handler: (info) => Effect.sync(() => seen.push(info.payload)) })
      }))
      yield* object.run(alarms.cleanup.schedule(5_000, "bucket-a"))
      expect(yield* object.run(alarms.cleanup.get)).toMatchObject({ _tag: "Some", value: { name: "cleanup", scheduledTime: 5_000, payload: "bucket-a" } })
      expect(yield* object.run(alarms.cleanup.cancel)).toBe(true)
      expect(yield* object.run(alarms.get("cleanup"))).toMatchObject({ _tag: "None" })
      yield* object.run(alarms.cleanup.schedule(6_000))
      yield* TestClock.adjust(6_000)
      expect(seen).toEqual([undefined])

      const fresh = yield* TestDurability.make()
      const error = yield* Effect.flip(fresh.run(NamedAlarms.make({ schedule: NamedAlarms.alarm({ handler: () => Effect.void }) })))
      expect(error).toMatchObject({ _tag: "InvalidOptionError", field: "handlers.schedule", kind: "type" })
      expect(fresh.storage.statements).toEqual([])
    }))
})

describe("DurabilityAlarms: payloads", () => {
  vit("alarms.<name>(time, payload) reaches an annotated handler typed by its payload", async () => {
    const state = await TestObjectState.make({ startTime: 0 })
    const scheduler = new DurabilityScheduler({ context: state.context })
    const seen: Array<string> = []
    const alarms = new DurabilityAlarms({
      scheduler,
      handlers: {
        remind: (info: DurableAlarmInfo<"remind", { readonly to: string }>) => void seen.push(`${info.payload?.to} @${info.scheduledTime}`)
      }
    })
    await alarms.remind(60_000, { to: "bob" })
    expect((await alarms.list()).items).toMatchObject([{ name: "remind", payload: { to: "bob" } }])
    await state.advance("1 minute")
    expect(seen).toEqual(["bob @60000"])
    expect(await alarms.list()).toEqual({ items: [] })
  })
})

describe("NamedAlarms: a payload schema", () => {
  it.scoped("checks and encodes at schedule (a bad one writes nothing), decodes for the handler", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<unknown> = []
      const alarms = yield* object.run(NamedAlarms.make({
        remind: NamedAlarms.alarm({
          payload: Schema.Struct({ to: Schema.NonEmptyString, at: Schema.DateFromNumber }),
          handler: (info) => Effect.sync(() => seen.push(info.payload))
        })
      }))
      yield* object.run(alarms.remind.schedule(1_000, { to: "ann", at: new Date(5_000) }))
      const row = object.storage.sql.exec("SELECT payload FROM durability_alarms WHERE name = 'remind'").toArray()[0]
      // Stored in its encoded form (the Date as a number).
      expect(JSON.parse(String(row?.payload))).toEqual({ kind: "value", value: { to: "ann", at: 5_000 } })
      const before = object.storage.statements.length
      const error = yield* Effect.flip(object.run(alarms.schedule("remind", 2_000, { to: "", at: new Date(0) })))
      expect(error).toMatchObject({ _tag: "InvalidInputError", field: "payload", kind: "type" })
      expect(error.message).toMatch(/^payload\.to: /)
      expect(object.storage.statements.length).toBe(before)
      yield* TestClock.adjust(1_000)
      expect(seen).toEqual([{ to: "ann", at: new Date(5_000) }])
    }))
})
