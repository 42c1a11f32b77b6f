/**
 * Bad input at every public entry point, as a table: every constructor option
 * (`Scheduler.resolveConfig`/`Scheduler.layer`, `Operations.make`,
 * `NamedAlarms.make`, `DurabilityScheduler`, `Durability`, `DurabilityAlarms`),
 * every call argument (ids, names, times, payloads, wait timeouts, purge
 * cutoffs, migration targets), results and retry delays.
 *
 * Each bad value must get a typed error (Effect API: its tag and field; promise
 * facade: its Error class or name) whose message names the field, and must
 * leave storage byte-for-byte unchanged, with no statement at all where the
 * check has to come before any storage access. Ids and names made of quotes and
 * SQL are NOT bad input: they must round-trip exactly.
 *
 * The Effect API runs on TestClock; the facade on its own runtime, where
 * nothing here waits on time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Schedule, Schema, TestClock } from "effect"
import {
  Durability,
  DurabilityAlarms,
  DurabilityScheduler,
  type DurableAlarmInfo,
  type DurableCall
} from "../../src/index.js"
import { NonRetryableError } from "../../src/shared/Errors.js"
import type { DurabilityContext } from "../../src/shared/platform.js"
import * as Migrations from "../../src/engine/Migrations.js"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Operations from "../../src/operations/Operations.js"
import * as Scheduler from "../../src/engine/Scheduler.js"
import * as SchedulerConfig from "../../src/engine/SchedulerConfig.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"
import * as TestBackground from "../../src/testing/TestBackground.js"
import * as TestDurability from "../../src/testing/TestDurability.js"
import * as TestScheduler from "../../src/testing/TestScheduler.js"

type Call<P = unknown> = Operations.DurableCall<P>

const MAX_SAFE = Number.MAX_SAFE_INTEGER
const TWO_MB = 2 * 1024 * 1024

class Money {
  constructor(readonly cents: number) {}
}

const cycle = (): Record<string, unknown> => {
  const value: Record<string, unknown> = { name: "loop" }
  value.self = value
  return value
}

/** Values that are not a duration (non-negative safe integer of milliseconds). */
const NOT_DURATIONS: ReadonlyArray<readonly [string, unknown]> = [
  ["NaN", Number.NaN],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["-Infinity", Number.NEGATIVE_INFINITY],
  ["negative", -1],
  ["fractional", 1.5],
  ["unsafe integer", MAX_SAFE + 1],
  ["numeric string", "0"],
  ["null", null],
  ["undefined", undefined],
  ["BigInt", 1n],
  ["Date", new Date(0)]
]

/** Values that are not a point in time (a non-negative safe integer, or a `Date` of one). */
const NOT_TIMESTAMPS: ReadonlyArray<readonly [string, unknown]> = [
  ...NOT_DURATIONS.filter(([label]) => label !== "Date"),
  ["invalid Date", new Date(Number.NaN)],
  ["Date before 1970", new Date(-1)],
  ["a Date-like object", { getTime: () => 0 }]
]

/** Values that are not a positive safe integer (timeouts, attempts, concurrency). */
const NOT_POSITIVE: ReadonlyArray<readonly [string, unknown]> = [
  ["zero", 0],
  ["negative", -1],
  ["fractional", 1.5],
  ["NaN", Number.NaN],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["unsafe integer", MAX_SAFE + 1],
  ["numeric string", "100"],
  ["null", null]
]

/** Values that are not an id / name (non-empty, well-formed string of at most 512 characters). */
const BAD_KEYS: ReadonlyArray<readonly [string, unknown]> = [
  ["empty string", ""],
  ["513 characters", "x".repeat(513)],
  ["number", 42],
  ["null", null],
  ["undefined", undefined],
  ["object", { id: "a" }],
  // SQLite stores a lone surrogate, but reads it back as U+FFFD: the record could never be found again.
  ["lone high surrogate", "inv-\ud800"],
  ["lone low surrogate", "\udc00-inv"]
]

const BAD_PAYLOADS: ReadonlyArray<readonly [string, () => unknown, "type" | "range"]> = [
  ["a BigInt", () => ({ amount: 10n }), "type"],
  ["a cycle", cycle, "type"],
  ["a function", () => ({ run: () => 1 }), "type"],
  ["a bare function", () => () => 1, "type"],
  ["a symbol", () => [1, Symbol("s")], "type"],
  ["a symbol key", () => ({ [Symbol("s")]: 1, a: 1 }), "type"],
  ["NaN", () => ({ n: Number.NaN }), "type"],
  ["Infinity", () => [Number.NEGATIVE_INFINITY], "type"],
  ["a Date", () => ({ at: new Date(0) }), "type"],
  ["a Map", () => ({ m: new Map() }), "type"],
  ["a class instance", () => new Money(5), "type"],
  ["a nested undefined", () => ({ a: undefined }), "type"],
  ["a sparse array", () => [1, , 3], "type"],
  ["a throwing getter", () => ({ get boom(): number { throw new Error("getter exploded") } }), "type"],
  ["over the 2 MB row limit", () => ({ blob: "x".repeat(TWO_MB) }), "range"]
]

/** Ids and names that are valid: quotes, SQL, LIKE wildcards, NUL, emoji, the maximum length. */
const TRICKY_KEYS: ReadonlyArray<string> = [
  "'",
  "\"",
  "`",
  "x'); DROP TABLE durability_calls; --",
  "\" OR 1=1 --",
  "Robert'); DELETE FROM durability_alarms WHERE ('1'='1",
  "%",
  "_",
  "a\\b",
  "?",
  "?1",
  ":id",
  "@p",
  "$1",
  "a\u0000b",
  "a",
  "😀 emoji",
  "line\nbreak",
  "k".repeat(512)
]

const BAD_TARGETS: ReadonlyArray<readonly [string, unknown]> = [
  ["an unknown name", "durability_9999_unknown"],
  ["an empty string", ""],
  ["a number", 5],
  ["an object", { name: "durability_0001_create_calls" }],
  ["true", true]
]

interface Expected {
  readonly tag: string
  /** The `field` of InvalidInputError / InvalidOptionError. */
  readonly field?: string
  readonly kind?: "range" | "type"
  /** What the message must contain (default: the field). */
  readonly mentions?: string
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b))

/**
 * Runs `effect`, which must fail as `expected`, and checks that `storage` is
 * byte-for-byte unchanged (and, with `noAccess`, that no statement ran).
 */
const expectRejected = <A, E>(
  storage: MemoryStorage.MemoryStorage,
  label: string,
  effect: Effect.Effect<A, E>,
  expected: Expected,
  options: { readonly noAccess?: boolean } = {}
) =>
  Effect.gen(function*() {
    const before = storage.snapshot()
    const statements = storage.statements.length
    const alarm = storage.alarmAt
    const outcome = yield* Effect.either(effect)
    if (Either.isRight(outcome)) return expect.fail(`${label}: expected a failure, got ${String(outcome.right)}`)
    const error = outcome.left as { readonly _tag?: unknown; readonly field?: unknown; readonly message?: unknown }
    expect(error._tag, label).toBe(expected.tag)
    if (expected.field !== undefined) expect(error.field, label).toBe(expected.field)
    if (expected.kind !== undefined) expect(error, label).toMatchObject({ kind: expected.kind })
    expect(String(error.message), label).toContain(expected.mentions ?? expected.field)
    expect(sameBytes(storage.snapshot(), before), `${label}: storage changed`).toBe(true)
    expect(storage.alarmAt, `${label}: alarm changed`).toBe(alarm)
    if (options.noAccess !== false) {
      expect(storage.statements.slice(statements), `${label}: statements ran`).toEqual([])
    }
    return undefined
  })

const handler = () => Effect.void

/** Execution options, bad in every way, as `[label, options, field, kind]` for a field prefix. */
const executionCases = (prefix: string) =>
  [
    ...NOT_POSITIVE.map(([label, value]) =>
      [`attemptTimeoutMs ${label}`, { attemptTimeoutMs: value }, `${prefix}attemptTimeoutMs`, "range"] as const
    ),
    ...[["null", null], ["a number", 3], ["a string", "often"]].map(([label, value]) =>
      [`retries ${label}`, { retries: value }, `${prefix}retries`, "type"] as const
    ),
    ...NOT_POSITIVE.map(([label, value]) =>
      [`retries.maxAttempts ${label}`, { retries: { maxAttempts: value } }, `${prefix}retries.maxAttempts`, "range"] as const
    ),
    ...[["a number", 100], ["a string", "soon"], ["an object", {}]].map(([label, value]) =>
      [`retries.delay ${label}`, { retries: { delay: value } }, `${prefix}retries.delay`, "type"] as const
    ),
    ...[["a number", 5], ["a plain object", { step: () => 1 }], ["a function", () => 1]].map(([label, value]) =>
      [`retries.schedule ${label}`, { retries: { schedule: value } }, `${prefix}retries.schedule`, "type"] as const
    ),
    [
      "retries with both delay and schedule",
      { retries: { delay: () => 1, schedule: Schedule.spaced("1 second") } },
      `${prefix}retries`,
      "type"
    ] as const
  ] as const

const RESERVED = ["__proto__", "constructor", "alarm", "purgeBefore", "then", "prototype"] as const

/** A record with one own enumerable property `name` (also for `__proto__`). */
const own = <A>(name: string, value: A): Record<string, A> => {
  const record: Record<string, A> = {}
  Object.defineProperty(record, name, { value, enumerable: true, configurable: true, writable: true })
  return record
}

const BAD_NAMES: ReadonlyArray<readonly [string, string]> = [
  ["empty", ""],
  ["513 characters", "n".repeat(513)],
  ["lone surrogate", "renew-\ud800"]
]

/** One object with operations, named alarms and some state, so "unchanged" means something. */
const seeded = Effect.gen(function*() {
  const object = yield* TestDurability.make()
  const ops = yield* object.run(Operations.make({
    charge: Operations.operation({ handler: (call: Call) => Effect.succeed(call.id) }),
    typed: Operations.operation({
      payload: Schema.Struct({ cents: Schema.Number }),
      handler: (call) => Effect.succeed(call.payload.cents)
    }),
    flaky: Operations.operation({ retries: { delay: () => 60_000 }, handler: () => Effect.fail(new Error("later")) })
  }))
  const alarms = yield* object.run(NamedAlarms.make({ renew: NamedAlarms.alarm({ handler }) }))
  yield* object.run(ops.register("charge", { id: "done", payload: { n: 1 } }))
  yield* object.run(ops.register("flaky", { id: "waiting", payload: null }))
  yield* object.run(alarms.schedule("renew", 3_600_000))
  yield* TestClock.adjust(0)
  expect(object.storage.sql.exec("SELECT id, status FROM durability_calls ORDER BY id").toArray()).toEqual([
    { id: "done", status: "completed" },
    { id: "waiting", status: "pending" }
  ])
  expect(object.storage.alarmAt).toBe(60_000)
  return { object, ops, alarms }
})

describe("Effect API: constructor options", () => {
  const schedulerCases: ReadonlyArray<readonly [string, unknown, string, "range" | "type"]> = [
    ...NOT_POSITIVE.map(([label, value]) =>
      [`alarmConcurrency ${label}`, { alarmConcurrency: value }, "alarmConcurrency", "range"] as const
    ),
    ...[...NOT_POSITIVE, ["below 1000", 999], ["above 15000", 15_001]].map(([label, value]) =>
      [`alarmMinDelayMs ${label}`, { alarmMinDelayMs: value }, "alarmMinDelayMs", "range"] as const
    ),
    ...NOT_POSITIVE.map(([label, value]) =>
      [`alarmHandoffMs ${label}`, { alarmHandoffMs: value }, "alarmHandoffMs", "range"] as const
    ),
    ...[["a string", "yes"], ["a number", 1], ["null", null]].map(([label, value]) =>
      [`liveTimers ${label}`, { liveTimers: value }, "liveTimers", "type"] as const
    ),
    ...[["a number", 1], ["a string", "log"], ["an object", {}]].map(([label, value]) =>
      [`onAlarmRetry ${label}`, { onAlarmRetry: value }, "onAlarmRetry", "type"] as const
    ),
    ...[["a number", 5], ["an object", {}]].map(([label, value]) =>
      [`objectId ${label}`, { objectId: value }, "objectId", "type"] as const
    ),
    ["options null", null, "options", "type"],
    ["options a number", 5, "options", "type"]
  ]

  it.scoped("Scheduler.resolveConfig and Scheduler.layer: InvalidOptionError naming the field, before any statement", () =>
    Effect.gen(function*() {
      const { object } = yield* seeded
      const background = yield* TestBackground.make
      for (const [label, options, field, kind] of schedulerCases) {
        const expected = { tag: "InvalidOptionError", field, kind }
        yield* expectRejected(object.storage, `resolveConfig: ${label}`, SchedulerConfig.resolve(options as never), expected)
        // The whole engine over the same storage: the layer fails to build.
        yield* expectRejected(
          object.storage,
          `layer: ${label}`,
          Effect.scoped(Layer.build(TestScheduler.layer(object.storage, background.layer, options as never))),
          expected
        )
      }
    }))

  it.scoped("Operations.make and NamedAlarms.make: definitions, handler names and execution options", () =>
    Effect.gen(function*() {
      const { object } = yield* seeded
      // A new instance over the seeded storage for every attempt: a wrongly accepted
      // capability would attach to it, not to the seeded one.
      const fresh = () => TestDurability.make({ storage: object.storage })
      const both = (label: string, build: (kind: "operations" | "alarms") => Effect.Effect<unknown, unknown, Scheduler.Services>, expected: Expected) =>
        Effect.gen(function*() {
          for (const kind of ["operations", "alarms"] as const) {
            const instance = yield* fresh()
            yield* expectRejected(object.storage, `${kind}: ${label}`, instance.run(build(kind)), expected)
          }
        })
      const make = (kind: "operations" | "alarms", definitions: unknown, options?: unknown) =>
        kind === "operations"
          ? Operations.make(definitions as never, options as never)
          : NamedAlarms.make(definitions as never, options as never)

      for (const [label, definitions] of [["null", null], ["a number", 5], ["a string", "charge"], ["an array", [{ handler }]]] as const) {
        yield* both(`definitions ${label}`, (kind) => make(kind, definitions), {
          tag: "InvalidOptionError",
          field: "handlers",
          kind: "type"
        })
      }
      // A symbol-keyed handler could never be called: refused, not skipped.
      yield* both("a symbol-keyed definition", (kind) => make(kind, { charge: { handler }, [Symbol("hidden")]: { handler } }), {
        tag: "InvalidOptionError",
        field: "handlers",
        kind: "type",
        mentions: "keyed by strings"
      })
      for (const [label, definition] of [["a number", 5], ["null", null], ["no handler", {}], ["a string handler", { handler: "x" }]] as const) {
        yield* both(`definition ${label}`, (kind) => make(kind, { charge: definition }), {
          tag: "InvalidOptionError",
          field: "handlers.charge",
          kind: "type"
        })
      }
      for (const name of RESERVED) {
        yield* both(`reserved name ${name}`, (kind) => make(kind, own(name, { handler })), {
          tag: "InvalidOptionError",
          field: `handlers.${name}`,
          mentions: `"${name}" is reserved`
        })
      }
      for (const [label, name] of BAD_NAMES) {
        yield* both(`handler name ${label}`, (kind) => make(kind, own(name, { handler })), {
          tag: "InvalidOptionError",
          field: "handlers",
          kind: "type",
          mentions: "handler name"
        })
      }
      for (const [label, options] of [["null", null], ["a number", 5], ["a string", "fast"]] as const) {
        yield* both(`options ${label}`, (kind) => make(kind, { charge: { handler } }, options), {
          tag: "InvalidOptionError",
          field: "options",
          kind: "type"
        })
      }
      for (const [label, hook] of [["a number", 5], ["a string", "log"], ["an object", {}]] as const) {
        yield* both(`onLifecycleEvent ${label}`, (kind) => make(kind, { charge: { handler } }, { onLifecycleEvent: hook }), {
          tag: "InvalidOptionError",
          field: "onLifecycleEvent",
          kind: "type"
        })
      }
      for (const [label, options, field, kind] of executionCases("")) {
        yield* both(`capability ${label}`, (k) => make(k, { charge: { handler } }, options), {
          tag: "InvalidOptionError",
          field,
          kind
        })
      }
      for (const [label, options, field, kind] of executionCases("methods.charge.")) {
        yield* both(`method ${label}`, (k) => make(k, { charge: { handler, ...options } }), {
          tag: "InvalidOptionError",
          field,
          kind
        })
      }
      for (const [label, value] of [["a string", "yes"], ["a number", 1], ["null", null]] as const) {
        const instance = yield* fresh()
        yield* expectRejected(
          object.storage,
          `retryTimeouts ${label}`,
          instance.run(NamedAlarms.make({ renew: { handler, retryTimeouts: value as never } })),
          { tag: "InvalidOptionError", field: "methods.renew.retryTimeouts", kind: "type" }
        )
      }
    }))
})

describe("Effect API: call arguments", () => {
  it.scoped("register, getResult, wait, purgeBefore: InvalidInputError naming the field, before any statement", () =>
    Effect.gen(function*() {
      const { object, ops } = yield* seeded
      const storage = object.storage
      const unknownOperations = ["nope", "__proto__", "constructor", "toString", "hasOwnProperty", ""] as const
      for (const operation of unknownOperations) {
        const expected = { tag: "InvalidInputError", field: "operation", kind: "type" } as const
        yield* expectRejected(storage, `register ${operation}`, object.run(ops.register(operation as "charge", { id: "x", payload: 1 })), expected)
        yield* expectRejected(storage, `getResult ${operation}`, object.run(ops.getResult(operation as "charge", "x")), expected)
        yield* expectRejected(storage, `wait ${operation}`, object.run(ops.wait(operation as "charge", "x", 0)), expected)
      }
      for (const [label, call] of [["null", null], ["undefined", undefined], ["a number", 5], ["a string", "x"]] as const) {
        yield* expectRejected(storage, `register call ${label}`, object.run(ops.register("charge", call as never)), {
          tag: "InvalidInputError",
          field: "call",
          kind: "type"
        })
      }
      for (const [label, id] of BAD_KEYS) {
        const expected = { tag: "InvalidInputError", field: "id", kind: "type" } as const
        yield* expectRejected(storage, `register id ${label}`, object.run(ops.register("charge", { id: id as string, payload: 1 })), expected)
        yield* expectRejected(storage, `getResult id ${label}`, object.run(ops.getResult("charge", id as string)), expected)
        yield* expectRejected(storage, `wait id ${label}`, object.run(ops.wait("charge", id as string, 1_000)), expected)
      }
      for (const [label, payload, kind] of BAD_PAYLOADS) {
        yield* expectRejected(storage, `payload ${label}`, object.run(ops.register("charge", { id: "new", payload: payload() })), {
          tag: "InvalidInputError",
          field: "payload",
          kind
        })
      }
      for (const [label, payload] of [["a wrong type", { cents: "5" }], ["a missing field", {}], ["null", null]] as const) {
        yield* expectRejected(storage, `schema payload ${label}`, object.run(ops.register("typed", { id: "new", payload: payload as never })), {
          tag: "InvalidInputError",
          field: "payload",
          kind: "type"
        })
      }
      // `undefined` means "not given" for these two.
      for (const [label, runAt] of NOT_TIMESTAMPS.filter(([, value]) => value !== undefined)) {
        yield* expectRejected(storage, `register runAt ${label}`, object.run(ops.register("charge", { id: "new", payload: 1, runAt: runAt as number })), {
          tag: "InvalidInputError",
          field: "runAt",
          kind: "range"
        })
      }
      for (const [label, delayMs] of NOT_DURATIONS.filter(([, value]) => value !== undefined)) {
        yield* expectRejected(storage, `register delayMs ${label}`, object.run(ops.register("charge", { id: "new", payload: 1, delayMs: delayMs as number })), {
          tag: "InvalidInputError",
          field: "delayMs",
          kind: "range"
        })
      }
      yield* expectRejected(storage, "register runAt and delayMs", object.run(ops.register("charge", { id: "new", payload: 1, runAt: 1, delayMs: 1 })), {
        tag: "InvalidInputError",
        field: "runAt",
        kind: "type"
      })
      for (const [label, id] of BAD_KEYS) {
        yield* expectRejected(storage, `cancel id ${label}`, object.run(ops.cancel("charge", id as string)), {
          tag: "InvalidInputError",
          field: "id",
          kind: "type"
        })
      }
      const badLists: ReadonlyArray<readonly [string, unknown, string, "range" | "type"]> = [
        ["options null", null, "options", "type"],
        ["limit 0", { limit: 0 }, "limit", "range"],
        ["limit 1.5", { limit: 1.5 }, "limit", "range"],
        ["limit too large", { limit: 1_001 }, "limit", "range"],
        ["limit a string", { limit: "10" }, "limit", "range"],
        ["unknown status", { status: "done" }, "status", "type"],
        ["empty status list", { status: [] }, "status", "type"],
        ["status a number", { status: 1 }, "status", "type"],
        ["cursor without a time", { cursor: "abc" }, "cursor", "type"],
        ["cursor a number", { cursor: 5 }, "cursor", "type"],
        ["cursor with a negative time", { cursor: "-1:a" }, "cursor", "type"]
      ]
      for (const [label, options, field, kind] of badLists) {
        yield* expectRejected(storage, `list ${label}`, object.run(ops.list("charge", options as never)), {
          tag: "InvalidInputError",
          field,
          kind
        })
      }
      for (const [label, timeoutMs] of NOT_DURATIONS) {
        yield* expectRejected(storage, `wait timeoutMs ${label}`, object.run(ops.wait("charge", "waiting", timeoutMs as number)), {
          tag: "InvalidInputError",
          field: "timeoutMs",
          kind: "range"
        })
      }
      for (const [label, before] of NOT_TIMESTAMPS) {
        yield* expectRejected(storage, `purgeBefore ${label}`, object.run(ops.purgeBefore(before as number)), {
          tag: "InvalidInputError",
          field: "timestamp",
          kind: "range"
        })
      }
      expect(yield* object.run(ops.getResult("charge", "new"))).toEqual({ status: "not_found" })
    }))

  it.scoped("schedule and purgeBefore of named alarms: unknown names (prototype keys too), bad times", () =>
    Effect.gen(function*() {
      const { alarms, object } = yield* seeded
      const storage = object.storage
      for (const name of ["nope", "__proto__", "constructor", "toString", "valueOf", "", 42]) {
        yield* expectRejected(storage, `schedule ${String(name)}`, object.run(alarms.schedule(name as "renew", 1_000)), {
          tag: "InvalidInputError",
          field: "name",
          kind: "type",
          mentions: "named alarm"
        })
      }
      for (const name of ["nope", "__proto__", "constructor", "", 42]) {
        const expected = { tag: "InvalidInputError", field: "name", kind: "type", mentions: "named alarm" } as const
        yield* expectRejected(storage, `get ${String(name)}`, object.run(alarms.get(name as "renew")), expected)
        yield* expectRejected(storage, `cancel ${String(name)}`, object.run(alarms.cancel(name as "renew")), expected)
      }
      for (const [label, at] of NOT_TIMESTAMPS) {
        yield* expectRejected(storage, `scheduledTime ${label}`, object.run(alarms.schedule("renew", at as number)), {
          tag: "InvalidInputError",
          field: "scheduledTime",
          kind: "range"
        })
        yield* expectRejected(storage, `alarms purgeBefore ${label}`, object.run(alarms.purgeBefore(at as number)), {
          tag: "InvalidInputError",
          field: "timestamp",
          kind: "range"
        })
      }
    }))

  it.scoped("migration targets: MigrationError naming the target, before any statement", () =>
    Effect.gen(function*() {
      const { object } = yield* seeded
      for (const [label, target] of BAD_TARGETS) {
        const expected = { tag: "MigrationError", mentions: "target" }
        yield* expectRejected(object.storage, `Operations.migrate ${label}`, object.run(Operations.migrate(target as string)), expected)
        yield* expectRejected(object.storage, `NamedAlarms.migrate ${label}`, object.run(NamedAlarms.migrate(target as string)), expected)
      }
      const cases: ReadonlyArray<readonly [string, unknown, unknown, string]> = [
        ["an empty capability", "", Operations.migrations, "capability"],
        ["a capability that is not a string", 5, Operations.migrations, "capability"],
        ["migrations that are not an array", "operations", "up", "migrations must be an array"],
        ["a migration without a name", "operations", [{ up: "SELECT 1", down: "SELECT 1" }], "name"],
        ["a migration without scripts", "operations", [{ name: "m" }], "up and down"],
        ["a name used twice", "operations", [...Operations.migrations, Operations.migrations[0]], "used twice"]
      ]
      for (const [label, capability, migrations, mentions] of cases) {
        yield* expectRejected(
          object.storage,
          `Migrations.migrate ${label}`,
          object.run(Migrations.migrate(capability as string, migrations as never)),
          { tag: "MigrationError", mentions }
        )
      }
    }))
})

describe("Effect API: valid ids and names made of quotes and SQL round-trip", () => {
  it.scoped("operations: registered, retried through the due scan, read back and deduplicated exactly", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const seen: Array<string> = []
      const ops = yield* object.run(Operations.make({
        // Attempt 1 fails, so attempt 2 runs from the due scan, with the key read back from storage.
        echo: Operations.operation({
          retries: { delay: () => 1_000 },
          handler: (call: Call<{ readonly id: string }>) =>
            Effect.suspend(() => {
              seen.push(`${call.id}#${call.attempt}`)
              expect(call.payload.id).toBe(call.id)
              return call.attempt === 1 ? Effect.fail(new Error(`first ${call.id}`)) : Effect.succeed(call.id)
            })
        }),
        other: Operations.operation({ handler })
      }))
      const tablesNow = () =>
        object.storage.sql.exec("SELECT name FROM sqlite_master ORDER BY name").toArray().map((row) => row.name)
      const tables = tablesNow()
      for (const id of TRICKY_KEYS) yield* object.run(ops.register("echo", { id, payload: { id } }))
      yield* TestClock.adjust(1_000)
      yield* TestClock.adjust(1_000)
      for (const id of TRICKY_KEYS) {
        expect(yield* object.run(ops.getResult("echo", id)), JSON.stringify(id)).toEqual({ status: "completed", result: id })
        expect(yield* object.run(ops.wait("echo", id, 0))).toEqual({ status: "completed", result: id })
        const duplicate = yield* Effect.flip(object.run(ops.register("other", { id, payload: null })))
        expect(duplicate).toMatchObject({ _tag: "DuplicateDurableCallError", id, existing: "echo", requested: "other" })
      }
      expect(seen.toSorted()).toEqual(TRICKY_KEYS.flatMap((id) => [`${id}#1`, `${id}#2`]).toSorted())
      const rows = object.storage.sql.exec("SELECT id FROM durability_calls").toArray().map((row) => row.id)
      expect(rows.toSorted()).toEqual([...TRICKY_KEYS].toSorted())
      expect(tablesNow()).toEqual(tables)
      expect(yield* object.run(ops.purgeBefore(1))).toBe(TRICKY_KEYS.length)
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("named alarms: names made of quotes and SQL are scheduled, retried, fired and deleted exactly", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make({ alarms: "manual" })
      const names = TRICKY_KEYS.filter((name) => !name.startsWith("k"))
      const seen: Array<string> = []
      const definitions: Record<string, NamedAlarms.AlarmDefinition<Error, never>> = {}
      for (const name of names) {
        definitions[name] = NamedAlarms.alarm({
          retries: { delay: () => 1_000 },
          handler: (info) =>
            Effect.suspend(() => {
              seen.push(`${info.name}#${info.attempt}`)
              return info.attempt === 1 ? Effect.fail(new Error("first")) : Effect.void
            })
        })
      }
      const alarms = yield* object.run(NamedAlarms.make(definitions))
      for (const name of names) yield* object.run(alarms.schedule(name, 60_000))
      expect(yield* object.fireAlarm()).toBe(true)
      expect(yield* object.fireAlarm()).toBe(true)
      expect(seen.toSorted()).toEqual(names.flatMap((name) => [`${name}#1`, `${name}#2`]).toSorted())
      expect(object.storage.sql.exec("SELECT name FROM durability_alarms").toArray()).toEqual([])
      expect(object.storage.alarmAt).toBeNull()
    }))
})

describe("Effect API: results and retry delays", () => {
  const RESULTS: ReadonlyArray<readonly [string, () => unknown, string]> = [
    ["a BigInt", () => ({ total: 1n }), "result.total is a BigInt"],
    ["a cycle", cycle, "result.self is a circular reference"],
    ["a function", () => ({ f: () => 1 }), "result.f is a function"],
    ["a class instance", () => new Money(1), "result is a Money"],
    ["a symbol key", () => ({ [Symbol("s")]: 1 }), "result has a symbol key"],
    // The completed row would exceed the 2 MB row limit of Durable Object SQLite (see also workers/limits.test.ts).
    ["over the row limit", () => "r".repeat(TWO_MB), "bytes"]
  ]

  it.scoped("a result that cannot be stored fails the call terminally with DurableResultSerializationError after one call", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const calls = new Map<string, number>()
      const byId = new Map(RESULTS.map(([label, result]) => [label, result]))
      const ops = yield* object.run(Operations.make({
        produce: Operations.operation({
          handler: (call: Call<string>) =>
            Effect.sync(() => {
              calls.set(call.id, (calls.get(call.id) ?? 0) + 1)
              return byId.get(call.id)!()
            })
        })
      }))
      for (const [label] of RESULTS) {
        yield* object.run(ops.register("produce", { id: label, payload: "p" }))
      }
      yield* TestClock.adjust(600_000)
      for (const [label, , mentions] of RESULTS) {
        const result = yield* object.run(ops.getResult("produce", label))
        expect(result, label).toMatchObject({
          status: "failed",
          attempt: 1,
          error: { name: "DurableResultSerializationError" }
        })
        if (result.status === "failed") {
          expect(result.error.message, label).toContain("result")
          expect(result.error.message, label).toContain(mentions)
        }
        expect(calls.get(label), label).toBe(1)
      }
      expect(object.storage.alarmAt).toBeNull()
    }))

  it.scoped("a failure with an enormous message is stored clipped, so it settles at once (the row limit is 2 MB)", () =>
    Effect.gen(function*() {
      const object = yield* TestDurability.make()
      const huge = "e".repeat(3 * 1024 * 1024)
      let calls = 0
      const ops = yield* object.run(Operations.make({
        final: Operations.operation({
          handler: () => Effect.zipRight(Effect.sync(() => calls++), Effect.fail(new NonRetryableError({ message: huge })))
        })
      }))
      const alarms = yield* object.run(NamedAlarms.make({
        renew: NamedAlarms.alarm({ retries: { maxAttempts: 2, delay: () => 10 }, handler: () => Effect.fail(new Error(huge)) })
      }))
      yield* object.run(ops.register("final", { id: "a", payload: null }))
      yield* object.run(alarms.schedule("renew", 0))
      yield* TestClock.adjust(1_000)
      expect(calls).toBe(1)
      const result = yield* object.run(ops.getResult("final", "a"))
      expect(result).toMatchObject({ status: "failed", attempt: 1, error: { name: "NonRetryableError" } })
      for (const message of [
        result.status === "failed" ? result.error.message : "",
        String(object.storage.sql.exec("SELECT last_error FROM durability_alarms").toArray()[0]?.last_error)
      ]) {
        expect(message.length).toBeLessThan(8_300)
        expect(message.startsWith("eeee")).toBe(true)
        expect(message).toMatch(/… \(\d+ more characters\)$/)
      }
      expect(object.storage.sql.exec("SELECT status, attempt FROM durability_alarms").toArray()).toEqual([
        { status: "failed", attempt: 2 }
      ])
    }))

  it.scoped("a retry delay that is not a usable number of milliseconds fails the call with DurableRetryPolicyError", () =>
    Effect.gen(function*() {
      const delays: ReadonlyArray<readonly [string, () => number]> = [
        ["NaN", () => Number.NaN],
        ["Infinity", () => Number.POSITIVE_INFINITY],
        ["negative", () => -1],
        ["a string", () => "5" as unknown as number],
        ["unsafe", () => MAX_SAFE + 2],
        ["throwing", () => {
          throw new Error("no delay for you")
        }]
      ]
      for (const [label, delay] of delays) {
        const object = yield* TestDurability.make()
        const ops = yield* object.run(Operations.make({
          flaky: Operations.operation({ retries: { delay }, handler: () => Effect.fail(new Error("transient")) })
        }))
        const alarms = yield* object.run(NamedAlarms.make({
          renew: NamedAlarms.alarm({ retries: { delay }, handler: () => Effect.fail(new Error("transient")) })
        }))
        yield* object.run(ops.register("flaky", { id: "a", payload: null }))
        yield* object.run(alarms.schedule("renew", 0))
        yield* TestClock.adjust(0)
        const result = yield* object.run(ops.getResult("flaky", "a"))
        expect(result, label).toMatchObject({ status: "failed", attempt: 1, error: { name: "DurableRetryPolicyError" } })
        if (result.status === "failed") expect(result.error.message, label).toMatch(/Retry (delay|policy)/)
        expect(object.storage.sql.exec("SELECT status, attempt, last_error_name FROM durability_alarms").toArray(), label)
          .toEqual([{ status: "failed", attempt: 1, last_error_name: "DurableRetryPolicyError" }])
        expect(object.storage.alarmAt, label).toBeNull()
      }
    }))
})

// ---------------------------------------------------------------------------------------------
// The promise facade
// ---------------------------------------------------------------------------------------------

interface MemoryContext extends DurabilityContext {
  readonly memory: MemoryStorage.MemoryStorage
}

const memoryContext = async (): Promise<MemoryContext> => {
  const memory = await Effect.runPromise(MemoryStorage.make)
  return { storage: memory, memory }
}

/** What a rejected facade call must be: an exact Error class, or an Error with this name. */
type FacadeExpected =
  | { readonly is: ErrorConstructor | RangeErrorConstructor | TypeErrorConstructor; readonly mentions: string }
  | { readonly name: string; readonly mentions: string }

const caught = async (run: () => unknown): Promise<unknown> => {
  try {
    await run()
  } catch (error) {
    return error
  }
  return undefined
}

const expectFacadeRejected = async (
  memory: MemoryStorage.MemoryStorage,
  label: string,
  run: () => unknown,
  expected: FacadeExpected,
  options: { readonly noAccess?: boolean } = {}
) => {
  const before = memory.snapshot()
  const statements = memory.statements.length
  const alarm = memory.alarmAt
  const error = await caught(run)
  expect(error, `${label}: expected a rejection`).toBeInstanceOf(Error)
  if ("is" in expected) expect((error as Error).constructor, label).toBe(expected.is)
  else expect((error as Error).name, label).toBe(expected.name)
  expect((error as Error).message.toLowerCase(), label).toContain(expected.mentions.toLowerCase())
  expect(sameBytes(memory.snapshot(), before), `${label}: storage changed`).toBe(true)
  expect(memory.alarmAt, `${label}: alarm changed`).toBe(alarm)
  if (options.noAccess !== false) expect(memory.statements.slice(statements), `${label}: statements ran`).toEqual([])
}

const facadeKind = (kind: "range" | "type") => (kind === "range" ? RangeError : TypeError)

/** A shared scheduler with both helpers and some state. */
const seededFacade = async () => {
  const context = await memoryContext()
  const scheduler = new DurabilityScheduler({ context })
  const durability = new Durability({
    scheduler,
    handlers: { charge: (call: DurableCall<unknown>) => call.id, other: () => null }
  })
  const alarms = new DurabilityAlarms({ scheduler, handlers: { renew: (_: DurableAlarmInfo) => undefined } })
  await durability.charge({ id: "done", payload: { n: 1 } })
  expect(await durability.charge.job("done").wait({ timeoutMs: 60_000 })).toEqual({ status: "completed", result: "done" })
  await alarms.renew(Date.now() + 3_600_000)
  return { context, scheduler, durability, alarms }
}

describe("facade: constructor options", () => {
  const schedulerCases: ReadonlyArray<readonly [string, Record<string, unknown>, string, "range" | "type"]> = [
    ...NOT_POSITIVE.map(([label, value]) => [`alarmConcurrency ${label}`, { alarmConcurrency: value }, "alarmConcurrency", "range"] as const),
    ...[...NOT_POSITIVE, ["below 1000", 999], ["above 15000", 15_001]].map(([label, value]) =>
      [`alarmMinDelayMs ${label}`, { alarmMinDelayMs: value }, "alarmMinDelayMs", "range"] as const
    ),
    ...NOT_POSITIVE.map(([label, value]) => [`alarmHandoffMs ${label}`, { alarmHandoffMs: value }, "alarmHandoffMs", "range"] as const),
    ...[["a string", "yes"], ["a number", 1]].map(([label, value]) => [`liveTimers ${label}`, { liveTimers: value }, "liveTimers", "type"] as const),
    ...[["a number", 1], ["a string", "log"]].map(([label, value]) => [`onAlarmRetry ${label}`, { onAlarmRetry: value }, "onAlarmRetry", "type"] as const)
  ]

  it("DurabilityScheduler, and the scheduler options of Durability and DurabilityAlarms", async () => {
    const { context } = await seededFacade()
    const memory = context.memory
    for (const [label, config] of [["null", null], ["undefined", undefined], ["a number", 5]] as const) {
      await expectFacadeRejected(memory, `config ${label}`, () => new DurabilityScheduler(config as never), { is: TypeError, mentions: "config" })
      await expectFacadeRejected(memory, `Durability config ${label}`, () => new Durability(config as never), { is: TypeError, mentions: "config" })
      await expectFacadeRejected(memory, `DurabilityAlarms config ${label}`, () => new DurabilityAlarms(config as never), { is: TypeError, mentions: "config" })
    }
    const badContexts = [["missing", undefined], ["null", null], ["without storage", {}], ["KV storage", { storage: { get: () => 1 } }]] as const
    for (const [label, bad] of badContexts) {
      const expected = { is: TypeError, mentions: "context" } as const
      await expectFacadeRejected(memory, `context ${label}`, () => new DurabilityScheduler({ context: bad as never }), expected)
      await expectFacadeRejected(memory, `Durability context ${label}`, () => new Durability({ context: bad as never, handlers: { a: () => 1 } }), expected)
      await expectFacadeRejected(memory, `DurabilityAlarms context ${label}`, () => new DurabilityAlarms({ context: bad as never, handlers: { a: () => 1 } }), expected)
      await expectFacadeRejected(memory, `Durability.migrate context ${label}`, () => Durability.migrate(bad as never), expected)
      await expectFacadeRejected(memory, `DurabilityAlarms.migrate context ${label}`, () => DurabilityAlarms.migrate(bad as never), expected)
    }
    for (const [label, options, field, kind] of schedulerCases) {
      const expected = { is: facadeKind(kind), mentions: field }
      await expectFacadeRejected(memory, `scheduler ${label}`, () => new DurabilityScheduler({ context, ...options }), expected)
      await expectFacadeRejected(memory, `Durability ${label}`, () => new Durability({ context, handlers: { a: () => 1 }, ...options }), expected)
      await expectFacadeRejected(memory, `DurabilityAlarms ${label}`, () => new DurabilityAlarms({ context, handlers: { a: () => 1 }, ...options }), expected)
    }
  })

  it("Durability and DurabilityAlarms: handlers, names, execution options, methods, scheduler", async () => {
    const { context, scheduler } = await seededFacade()
    const memory = context.memory
    const build = (kind: "Durability" | "DurabilityAlarms", config: Record<string, unknown>) => () =>
      kind === "Durability"
        ? new Durability({ context, ...config } as never)
        : new DurabilityAlarms({ context, ...config } as never)
    for (const kind of ["Durability", "DurabilityAlarms"] as const) {
      for (const [label, handlers] of [["missing", undefined], ["null", null], ["a number", 5], ["an array", [() => 1]]] as const) {
        await expectFacadeRejected(memory, `${kind} handlers ${label}`, build(kind, { handlers }), { is: TypeError, mentions: "handlers" })
      }
      await expectFacadeRejected(
        memory,
        `${kind} symbol-keyed handler`,
        build(kind, { handlers: { charge: () => 1, [Symbol("hidden")]: () => 1 } }),
        { is: TypeError, mentions: "keyed by strings" }
      )
      for (const [label, value] of [["a string", "later"], ["null", null], ["an object", {}]] as const) {
        await expectFacadeRejected(memory, `${kind} handler ${label}`, build(kind, { handlers: { charge: value } }), {
          is: TypeError,
          mentions: "handlers.charge"
        })
      }
      for (const name of RESERVED) {
        await expectFacadeRejected(memory, `${kind} reserved ${name}`, build(kind, { handlers: own(name, () => 1) }), {
          is: Error,
          mentions: `"${name}" is reserved`
        })
      }
      for (const [label, name] of BAD_NAMES) {
        await expectFacadeRejected(memory, `${kind} name ${label}`, build(kind, { handlers: own(name, () => 1) }), {
          is: TypeError,
          mentions: "handler name"
        })
      }
      for (const [label, options, field, errorKind] of executionCases("")) {
        await expectFacadeRejected(memory, `${kind} ${label}`, build(kind, { handlers: { charge: () => 1 }, ...options }), {
          is: facadeKind(errorKind),
          mentions: field
        })
      }
      for (const [label, options, field, errorKind] of executionCases("methods.charge.")) {
        await expectFacadeRejected(
          memory,
          `${kind} method ${label}`,
          build(kind, { handlers: { charge: () => 1 }, methods: { charge: options } }),
          { is: facadeKind(errorKind), mentions: field }
        )
      }
      for (const [label, methods, field] of [
        ["methods a number", 5, "methods"],
        ["methods a string", "fast", "methods"],
        ["methods.charge a number", { charge: 5 }, "methods.charge"],
        ["methods.charge null", { charge: null }, "methods.charge"],
        ["methods for an unknown handler", { chrage: { attemptTimeoutMs: 5 } }, "methods.chrage"]
      ] as const) {
        await expectFacadeRejected(memory, `${kind} ${label}`, build(kind, { handlers: { charge: () => 1 }, methods }), {
          is: TypeError,
          mentions: field
        })
      }
      await expectFacadeRejected(memory, `${kind} onLifecycleEvent`, build(kind, { handlers: { charge: () => 1 }, onLifecycleEvent: "log" }), {
        is: TypeError,
        mentions: "onLifecycleEvent"
      })
      for (const [label, bad] of [["a look-alike", { alarm: async () => undefined }], ["null prototype", Object.create(null)]] as const) {
        await expectFacadeRejected(
          memory,
          `${kind} scheduler ${label}`,
          () => kind === "Durability"
            ? new Durability({ scheduler: bad as never, handlers: { charge: () => 1 } })
            : new DurabilityAlarms({ scheduler: bad as never, handlers: { charge: () => 1 } }),
          { is: Error, mentions: "scheduler" }
        )
      }
      // Scheduler options next to a shared scheduler would be silently ignored.
      await expectFacadeRejected(
        memory,
        `${kind} scheduler options next to a shared scheduler`,
        () => kind === "Durability"
          ? new Durability({ scheduler, alarmMinDelayMs: 2_000, handlers: { charge: () => 1 } } as never)
          : new DurabilityAlarms({ scheduler, alarmMinDelayMs: 2_000, handlers: { charge: () => 1 } } as never),
        { is: TypeError, mentions: "alarmMinDelayMs" }
      )
    }
    const retryTimeouts = [["a string", "yes"], ["a number", 1], ["null", null]] as const
    for (const [label, value] of retryTimeouts) {
      await expectFacadeRejected(memory, `retryTimeouts ${label}`, build("DurabilityAlarms", { handlers: { renew: () => 1 }, methods: { renew: { retryTimeouts: value } } }), {
        is: TypeError,
        mentions: "methods.renew.retryTimeouts"
      })
    }
  })
})

describe("facade: call arguments", () => {
  it("operation methods, getResult, job().wait(), purgeBefore and migrate", async () => {
    const { alarms, context, durability } = await seededFacade()
    const memory = context.memory
    for (const [label, call] of [["null", null], ["undefined", undefined], ["a number", 5], ["a string", "x"]] as const) {
      await expectFacadeRejected(memory, `call ${label}`, () => durability.charge(call as never), { is: TypeError, mentions: "call" })
    }
    for (const [label, id] of BAD_KEYS) {
      const expected = { is: TypeError, mentions: "id" } as const
      await expectFacadeRejected(memory, `id ${label}`, () => durability.charge({ id: id as string, payload: 1 }), expected)
      await expectFacadeRejected(memory, `getResult id ${label}`, () => durability.charge.getResult(id as string), expected)
      await expectFacadeRejected(memory, `job id ${label}`, () => durability.charge.job(id as string).getResult(), expected)
      await expectFacadeRejected(memory, `job wait id ${label}`, () => durability.charge.job(id as string).wait({ timeoutMs: 0 }), expected)
    }
    for (const [label, payload, kind] of BAD_PAYLOADS) {
      await expectFacadeRejected(memory, `payload ${label}`, () => durability.charge({ id: "new", payload: payload() }), {
        is: facadeKind(kind),
        mentions: "payload"
      })
    }
    for (const [label, options] of [["null", null], ["undefined", undefined], ["a number", 5]] as const) {
      await expectFacadeRejected(memory, `wait options ${label}`, () => durability.charge.job("done").wait(options as never), {
        is: TypeError,
        mentions: "timeoutMs"
      })
    }
    for (const [label, timeoutMs] of NOT_DURATIONS) {
      await expectFacadeRejected(memory, `wait timeoutMs ${label}`, () => durability.charge.job("done").wait({ timeoutMs: timeoutMs as number }), {
        is: RangeError,
        mentions: "timeoutMs"
      })
    }
    for (const [label, id] of BAD_KEYS) {
      await expectFacadeRejected(memory, `cancel id ${label}`, () => durability.charge.cancel(id as string), { is: TypeError, mentions: "id" })
    }
    for (const [label, options, is] of [["limit 0", { limit: 0 }, RangeError], ["status", { status: "done" }, TypeError], ["cursor", { cursor: "x" }, TypeError]] as const) {
      await expectFacadeRejected(memory, `list ${label}`, () => durability.charge.list(options as never), { is, mentions: Object.keys(options)[0]! })
    }
    for (const [label, runAt] of NOT_TIMESTAMPS.filter(([, value]) => value !== undefined)) {
      await expectFacadeRejected(memory, `runAt ${label}`, () => durability.charge({ id: "new", payload: 1, runAt: runAt as number }), { is: RangeError, mentions: "runAt" })
    }
    for (const name of ["nope", "__proto__", ""]) {
      await expectFacadeRejected(memory, `alarms get ${name}`, () => alarms.get(name as "renew"), { is: TypeError, mentions: "named alarm" })
      await expectFacadeRejected(memory, `alarms cancel ${name}`, () => alarms.cancel(name as "renew"), { is: TypeError, mentions: "named alarm" })
    }
    for (const [label, value] of NOT_TIMESTAMPS) {
      await expectFacadeRejected(memory, `purgeBefore ${label}`, () => durability.purgeBefore(value as number), { is: RangeError, mentions: "timestamp" })
      await expectFacadeRejected(memory, `alarms purgeBefore ${label}`, () => alarms.purgeBefore(value as number), { is: RangeError, mentions: "timestamp" })
      await expectFacadeRejected(memory, `scheduledTime ${label}`, () => alarms.renew(value as number), { is: RangeError, mentions: "scheduledTime" })
    }
    for (const [label, target] of BAD_TARGETS) {
      const expected = { name: "MigrationError", mentions: "target" } as const
      await expectFacadeRejected(memory, `Durability.migrate ${label}`, () => Durability.migrate(context, target as string), expected)
      await expectFacadeRejected(memory, `DurabilityAlarms.migrate ${label}`, () => DurabilityAlarms.migrate(context, target as string), expected)
    }
    expect(await durability.charge.getResult("new")).toEqual({ status: "not_found" })
  })

  it("ids and alarm names made of quotes and SQL round-trip through the facade", async () => {
    const context = await memoryContext()
    const scheduler = new DurabilityScheduler({ context })
    const durability = new Durability({
      scheduler,
      handlers: { echo: (call: DurableCall<{ readonly id: string }>) => ({ id: call.id, payload: call.payload.id }) }
    })
    const names = TRICKY_KEYS.filter((name) => !name.startsWith("k"))
    const fired: Array<string> = []
    let allFired!: () => void
    const everyNameFired = new Promise<void>((resolve) => (allFired = resolve))
    const handlers: Record<string, (info: DurableAlarmInfo) => void> = {}
    for (const name of names) {
      handlers[name] = (info) => {
        fired.push(info.name)
        if (fired.length === names.length) allFired()
      }
    }
    const alarms = new DurabilityAlarms({ scheduler, handlers })
    for (const id of TRICKY_KEYS) await durability.echo({ id, payload: { id } })
    for (const id of TRICKY_KEYS) {
      expect(await durability.echo.job(id).wait({ timeoutMs: 60_000 }), JSON.stringify(id)).toEqual({
        status: "completed",
        result: { id, payload: id }
      })
    }
    const all = alarms as unknown as Record<string, (at: number) => Promise<void>>
    for (const name of names) await all[name]!(0)
    await everyNameFired
    expect(fired.toSorted()).toEqual([...names].toSorted())
    expect(context.memory.sql.exec("SELECT id FROM durability_calls").toArray().map((row) => row.id).toSorted())
      .toEqual([...TRICKY_KEYS].toSorted())
  })
})
