/**
 * One contract for `StorageService`, run against every backend: the sql.js
 * `MemoryStorage` in Node (test/node) and a real SQLite-backed Durable Object in
 * workerd (test/workers). Runtime-agnostic: it imports only vitest, effect and src.
 *
 * Each backend supplies `test`, which registers one vitest test whose body gets a
 * fresh, empty storage and the service built over it by `StorageService.make`.
 */
import { Cause, Effect, Either, Exit, Option, Schema } from "effect"
import { describe, expect } from "vitest"
import { StorageError } from "../../src/shared/Errors.js"
import type { DurableObjectStorageLike } from "../../src/shared/platform.js"
import type { StorageService } from "../../src/engine/StorageService.js"

export interface StorageFixture {
  /** The platform object (`ctx.storage` or a `MemoryStorage`), to read the alarm behind the service's back. */
  readonly storage: DurableObjectStorageLike
  /** `StorageService.make(storage)`. */
  readonly service: StorageService
}

/** Registers one test; its body runs against a fresh storage. */
export type ContractTest = (name: string, body: (fixture: StorageFixture) => Effect.Effect<void, unknown>) => void

export interface StorageServiceHarness {
  readonly test: ContractTest
}

// Far-future alarm times: a real alarm must not fire during a workerd test.
const T1 = 4_102_444_800_000 // 2100-01-01
const T2 = T1 + 60_000
const T3 = T1 + 120_000

class Boom extends Schema.TaggedError<Boom>()("Boom", { message: Schema.String }) {}

const Item = Schema.Struct({ id: Schema.Number, name: Schema.String })

/** Fails the test unless `effect` fails with a StorageError (a typed failure, not a defect). */
const storageError = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<StorageError, unknown> =>
  Effect.flatMap(Effect.exit(effect), (exit) => {
    if (Exit.isSuccess(exit)) return Effect.dieMessage(`expected a StorageError, got success ${String(exit.value)}`)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure) && failure.value instanceof StorageError) return Effect.succeed(failure.value)
    return Effect.dieMessage(`expected a StorageError failure, got ${Cause.pretty(exit.cause)}`)
  })

/** Fails the test unless `effect` dies; returns the defect. */
const defect = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<unknown, unknown> =>
  Effect.flatMap(Effect.exit(effect), (exit) => {
    if (Exit.isFailure(exit)) {
      const died = Cause.dieOption(exit.cause)
      if (Option.isSome(died) && Option.isNone(Cause.failureOption(exit.cause))) return Effect.succeed(died.value)
      return Effect.dieMessage(`expected a defect, got ${Cause.pretty(exit.cause)}`)
    }
    return Effect.dieMessage("expected a defect, got success")
  })

/** Lets any continuation queued on the microtask queue run (no timers). */
const drainMicrotasks = Effect.promise(async () => {
  for (let i = 0; i < 50; i++) await Promise.resolve()
})

export const storageServiceContract = (name: string, harness: StorageServiceHarness): void => {
  const { test } = harness

  describe(`StorageService contract: ${name}`, () => {
    const createItems = (service: StorageService) =>
      service.exec("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")

    const insertItem = (service: StorageService, id: number, name = `item-${id}`) =>
      service.exec("INSERT INTO items (id, name) VALUES (?, ?)", [id, name])

    const ids = (service: StorageService) =>
      Effect.map(service.exec("SELECT id FROM items ORDER BY id"), (rows) => rows.map((row) => row.id))

    describe("exec", () => {
      test("runs a statement with bound parameters and returns its rows", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          yield* insertItem(service, 1, "one")
          yield* insertItem(service, 2, "two")
          const rows = yield* service.exec("SELECT id, name FROM items WHERE id >= ? AND name <> ? ORDER BY id", [
            1,
            "two"
          ])
          expect(rows).toEqual([{ id: 1, name: "one" }])
          expect(yield* service.exec("SELECT id FROM items WHERE id > ?", [5])).toEqual([])
        }))

      test("runs a script of several statements without bindings and returns the last statement's rows", ({ service }) =>
        Effect.gen(function*() {
          const created = yield* service.exec(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n" +
              "CREATE INDEX items_by_name ON items (name);\n" +
              "INSERT INTO items VALUES (1, 'a'), (2, 'b');\n"
          )
          expect(created).toEqual([])
          const rows = yield* service.exec("INSERT INTO items VALUES (3, 'c'); SELECT count(*) AS n FROM items")
          expect(rows).toEqual([{ n: 3 }])
          const index = yield* service.exec("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'items'")
          expect(index).toEqual([{ name: "items_by_name" }])
        }))

      test("binds parameters to the last statement of a script", ({ service }) =>
        Effect.gen(function*() {
          yield* service.exec("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO items VALUES (?, ?)", [
            7,
            "seven"
          ])
          expect(yield* service.exec("SELECT id, name FROM items")).toEqual([{ id: 7, name: "seven" }])
          const error = yield* storageError(service.exec("SELECT ? AS a; SELECT 1 AS b", [1]))
          expect(error.operation).toBe("sql")
        }))

      test("supports RETURNING and ON CONFLICT DO NOTHING", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          const inserted = yield* service.exec(
            "INSERT INTO items (id, name) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING id, name",
            [1, "one"]
          )
          expect(inserted).toEqual([{ id: 1, name: "one" }])
          const skipped = yield* service.exec(
            "INSERT INTO items (id, name) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING id, name",
            [1, "uno"]
          )
          expect(skipped).toEqual([])
          const upserted = yield* service.exec(
            "INSERT INTO items (id, name) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET name = excluded.name RETURNING name",
            [1, "uno"]
          )
          expect(upserted).toEqual([{ name: "uno" }])
          const deleted = yield* service.exec("DELETE FROM items WHERE id = ? RETURNING id", [1])
          expect(deleted).toEqual([{ id: 1 }])
          expect(yield* ids(service)).toEqual([])
        }))

      test("binds every number as a REAL, as workerd does", ({ service }) =>
        Effect.gen(function*() {
          const [row] = yield* service.exec("SELECT ? / 2 AS half, typeof(?) AS type, 'k' || ? AS text", [3, 1, 1])
          expect(row).toEqual({ half: 1.5, type: "real", text: "k1.0" })
          // An INTEGER-affinity column still stores an integer.
          yield* createItems(service)
          yield* insertItem(service, 4)
          expect(yield* service.exec("SELECT typeof(id) AS type, id || '' AS text FROM items")).toEqual([
            { type: "integer", text: "4" }
          ])
        }))
    })

    describe("query", () => {
      test("decodes rows with a Schema", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          yield* insertItem(service, 1, "one")
          yield* insertItem(service, 2, "two")
          const items = yield* service.query(Item, "SELECT id, name FROM items ORDER BY id")
          expect(items).toEqual([{ id: 1, name: "one" }, { id: 2, name: "two" }])
          const renamed = yield* service.query(
            Schema.Struct({ n: Schema.NumberFromString }),
            "SELECT CAST(count(*) AS TEXT) AS n FROM items"
          )
          expect(renamed).toEqual([{ n: 2 }])
        }))

      test("fails with a StorageError (operation decode) when a row does not decode", ({ service }) =>
        Effect.gen(function*() {
          yield* service.exec("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
          yield* service.exec("INSERT INTO items VALUES (1, 'one'), (2, NULL)")
          const error = yield* storageError(service.query(Item, "SELECT id, name FROM items ORDER BY id"))
          expect(error._tag).toBe("StorageError")
          expect(error.operation).toBe("decode")
        }))

      test("passes SQL errors through as StorageError (operation sql)", ({ service }) =>
        Effect.gen(function*() {
          const error = yield* storageError(service.query(Item, "SELECT id, name FROM missing"))
          expect(error.operation).toBe("sql")
        }))
    })

    describe("the same statement run again (backends keep statements prepared)", () => {
      test("fresh bindings every time, after a failed run, and after its table was dropped and recreated", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          const find = (id: number) => service.exec("SELECT id, name FROM items WHERE id = ?", [id])
          for (let id = 1; id <= 3; id++) yield* insertItem(service, id)
          expect(yield* find(2)).toEqual([{ id: 2, name: "item-2" }])
          expect(yield* find(3)).toEqual([{ id: 3, name: "item-3" }])
          // A constraint violation leaves the statement usable; the next run binds its own values.
          yield* storageError(insertItem(service, 1))
          yield* insertItem(service, 4)
          expect(yield* ids(service)).toEqual([1, 2, 3, 4])
          yield* storageError(service.exec("SELECT id, name FROM items WHERE id = ?", []))
          expect(yield* find(4)).toEqual([{ id: 4, name: "item-4" }])
          // The same text over a recreated table with other columns sees the new table.
          yield* service.exec("DROP TABLE items")
          yield* storageError(find(1))
          yield* service.exec("CREATE TABLE items (name TEXT NOT NULL, id INTEGER PRIMARY KEY, extra TEXT)")
          yield* insertItem(service, 7, "seven")
          expect(yield* find(7)).toEqual([{ id: 7, name: "seven" }])
          expect(yield* service.exec("SELECT * FROM items WHERE id = ?", [7])).toEqual([{ name: "seven", id: 7, extra: null }])
        }))
    })

    describe("SQL errors", () => {
      test("a syntax error, a missing table and a constraint violation fail with StorageError", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          yield* insertItem(service, 1, "one")
          for (
            const [text, bindings] of [
              ["SELEC 1", []],
              ["SELECT * FROM missing", []],
              ["INSERT INTO items (id, name) VALUES (?, ?)", [1, "again"]],
              ["INSERT INTO items (id, name) VALUES (?, ?)", [2, "one"]],
              ["INSERT INTO items (id, name) VALUES (?, NULL)", [3]],
              ["SELECT ? AS a, ? AS b", [1]],
              ["SELECT ? AS a", [1, 2]],
              ["", []]
            ] as const
          ) {
            const error = yield* storageError(service.exec(text, bindings))
            expect(error._tag).toBe("StorageError")
            expect(error.operation).toBe("sql")
            expect(error.message).toContain("sql failed")
          }
          expect(yield* ids(service)).toEqual([1])
        }))

      test("enforces foreign keys", ({ service }) =>
        Effect.gen(function*() {
          yield* service.exec(
            "CREATE TABLE parents (id INTEGER PRIMARY KEY);" +
              "CREATE TABLE children (parent INTEGER NOT NULL REFERENCES parents (id))"
          )
          yield* storageError(service.exec("INSERT INTO children VALUES (?)", [1]))
          yield* service.exec("INSERT INTO parents VALUES (1); INSERT INTO children VALUES (1)")
          expect(yield* service.exec("SELECT parent FROM children")).toEqual([{ parent: 1 }])
        }))

      test("BEGIN, SAVEPOINT, COMMIT, ROLLBACK and RELEASE via exec fail with StorageError", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          for (
            const text of [
              "BEGIN",
              "BEGIN TRANSACTION",
              "  savepoint x",
              "SAVEPOINT x",
              "RELEASE x",
              "ROLLBACK",
              "COMMIT",
              "END",
              "/* hidden */ BEGIN"
            ]
          ) {
            const error = yield* storageError(service.exec(text))
            expect(error._tag).toBe("StorageError")
          }
          // Inside a script, the statements before it have run when it is rejected.
          yield* storageError(service.exec("INSERT INTO items VALUES (1, 'one'); SAVEPOINT x"))
          expect(yield* ids(service)).toEqual([1])
          // The storage still works and transactions still roll back.
          yield* Effect.either(service.transaction(Effect.zipRight(insertItem(service, 2), Effect.fail("no"))))
          expect(yield* ids(service)).toEqual([1])
        }))
    })

    describe("transaction", () => {
      test("commits every write of a successful synchronous body and returns its value", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          const result = yield* service.transaction(
            Effect.gen(function*() {
              yield* insertItem(service, 1)
              yield* insertItem(service, 2)
              yield* service.exec("UPDATE items SET name = ? WHERE id = ?", ["renamed", 1])
              return yield* ids(service)
            })
          )
          expect(result).toEqual([1, 2])
          expect(yield* service.exec("SELECT id, name FROM items ORDER BY id")).toEqual([
            { id: 1, name: "renamed" },
            { id: 2, name: "item-2" }
          ])
        }))

      test("a failing body rolls back its SQL writes and alarm; the failure is returned unchanged", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          yield* insertItem(service, 1)
          yield* service.setAlarm(T1)
          const boom = new Boom({ message: "boom" })
          const result = yield* Effect.either(
            service.transaction(
              Effect.gen(function*() {
                yield* insertItem(service, 2)
                yield* service.exec("UPDATE items SET name = 'changed' WHERE id = 1")
                yield* service.setAlarm(T2)
                expect(yield* service.alarm).toBe(T2)
                return yield* boom
              })
            )
          )
          expect(result).toEqual(Either.left(boom))
          if (Either.isLeft(result)) expect(result.left).toBe(boom)
          expect(yield* service.alarm).toBe(T1)
          expect(yield* Effect.promise(() => storage.getAlarm())).toBe(T1)
          expect(yield* service.exec("SELECT id, name FROM items")).toEqual([{ id: 1, name: "item-1" }])
        }))

      test("a failing body rolls back deleteAlarm", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* service.setAlarm(T1)
          const result = yield* Effect.either(service.transaction(Effect.zipRight(service.deleteAlarm, Effect.fail("no"))))
          expect(result).toEqual(Either.left("no"))
          expect(yield* service.alarm).toBe(T1)
          expect(yield* Effect.promise(() => storage.getAlarm())).toBe(T1)
        }))

      test("a failing SQL statement inside the body fails the transaction with that StorageError", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          const error = yield* storageError(
            service.transaction(Effect.zipRight(insertItem(service, 1), service.exec("SELECT * FROM missing")))
          )
          expect(error.operation).toBe("sql")
          expect(yield* ids(service)).toEqual([])
        }))

      test("a failed statement caught inside the body does not stop the rest from committing", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          yield* service.transaction(
            Effect.gen(function*() {
              yield* insertItem(service, 1, "one")
              const duplicate = yield* Effect.either(insertItem(service, 2, "one"))
              expect(Either.isLeft(duplicate)).toBe(true)
              yield* insertItem(service, 3, "three")
            })
          )
          expect(yield* ids(service)).toEqual([1, 3])
        }))

      test("a body that dies is rolled back and the transaction dies with the defect", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          expect(yield* service.readAlarm).toBeNull()
          const died = yield* defect(
            service.transaction(
              Effect.gen(function*() {
                yield* insertItem(service, 1)
                yield* service.setAlarm(T1)
                return yield* Effect.die("broken invariant")
              })
            )
          )
          expect(died).toBe("broken invariant")
          expect(yield* ids(service)).toEqual([])
          expect(yield* service.alarm).toBeNull()
          expect(yield* Effect.promise(() => storage.getAlarm())).toBeNull()
        }))

      test("a body that throws inside Effect.sync is rolled back and dies", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          const thrown = new Error("thrown")
          const died = yield* defect(
            service.transaction(
              Effect.zipRight(
                insertItem(service, 1),
                Effect.sync(() => {
                  throw thrown
                })
              )
            )
          )
          expect(died).toBe(thrown)
          expect(yield* ids(service)).toEqual([])
        }))

      test("a body that awaits a promise is rolled back, dies, and never resumes", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          expect(yield* service.readAlarm).toBeNull()
          let resumed = false
          yield* defect(
            service.transaction(
              Effect.gen(function*() {
                yield* insertItem(service, 1)
                yield* service.setAlarm(T1)
                yield* Effect.promise(() => Promise.resolve(1))
                resumed = true
                yield* insertItem(service, 2)
              })
            )
          )
          expect(yield* ids(service)).toEqual([])
          expect(yield* service.alarm).toBeNull()
          // The abandoned body must not carry on (and write outside any transaction) later.
          yield* drainMicrotasks
          expect(resumed).toBe(false)
          expect(yield* ids(service)).toEqual([])
          expect(yield* Effect.promise(() => storage.getAlarm())).toBeNull()
        }))

      test("a body that sleeps is rolled back and dies", ({ service }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          yield* defect(
            service.transaction(Effect.zipRight(insertItem(service, 1), Effect.sleep("10 millis")))
          )
          yield* insertItem(service, 5)
          expect(yield* ids(service)).toEqual([5])
        }))

      test("setAlarm and deleteAlarm in a successful body commit with the SQL writes", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          yield* service.transaction(Effect.zipRight(insertItem(service, 1), service.setAlarm(T1)))
          expect(yield* service.alarm).toBe(T1)
          expect(yield* Effect.promise(() => storage.getAlarm())).toBe(T1)
          expect(yield* ids(service)).toEqual([1])

          yield* service.transaction(
            Effect.gen(function*() {
              yield* service.setAlarm(T2)
              yield* service.setAlarm(T3)
              yield* insertItem(service, 2)
            })
          )
          expect(yield* service.alarm).toBe(T3)
          expect(yield* Effect.promise(() => storage.getAlarm())).toBe(T3)

          yield* service.transaction(Effect.zipRight(service.deleteAlarm, insertItem(service, 3)))
          expect(yield* service.alarm).toBeNull()
          expect(yield* Effect.promise(() => storage.getAlarm())).toBeNull()
          expect(yield* ids(service)).toEqual([1, 2, 3])
        }))

      test("nested: an inner failure caught by the outer body rolls back only the inner writes", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          const inner = yield* service.transaction(
            Effect.gen(function*() {
              yield* insertItem(service, 1)
              yield* service.setAlarm(T1)
              const inner = yield* Effect.either(
                service.transaction(
                  Effect.gen(function*() {
                    yield* insertItem(service, 2)
                    yield* service.setAlarm(T2)
                    return yield* Effect.fail("inner")
                  })
                )
              )
              expect(yield* service.alarm).toBe(T1)
              yield* insertItem(service, 3)
              return inner
            })
          )
          expect(inner).toEqual(Either.left("inner"))
          expect(yield* ids(service)).toEqual([1, 3])
          expect(yield* service.alarm).toBe(T1)
          expect(yield* Effect.promise(() => storage.getAlarm())).toBe(T1)
        }))

      test("nested: an inner success is rolled back with a failing outer body", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* createItems(service)
          expect(yield* service.readAlarm).toBeNull()
          const result = yield* Effect.either(
            service.transaction(
              Effect.gen(function*() {
                yield* insertItem(service, 1)
                yield* service.transaction(Effect.zipRight(insertItem(service, 2), service.setAlarm(T1)))
                return yield* Effect.fail("outer")
              })
            )
          )
          expect(result).toEqual(Either.left("outer"))
          expect(yield* ids(service)).toEqual([])
          expect(yield* service.alarm).toBeNull()
          expect(yield* Effect.promise(() => storage.getAlarm())).toBeNull()
        }))
    })

    describe("alarm", () => {
      test("is unknown (undefined) until readAlarm or a write, and is not read by building the service", ({ service, storage }) =>
        Effect.gen(function*() {
          expect(yield* service.alarm).toBeUndefined()
          expect(yield* service.readAlarm).toBeNull()
          expect(yield* service.alarm).toBeNull()
          expect(yield* Effect.promise(() => storage.getAlarm())).toBeNull()
        }))

      test("a rolled-back write restores an unknown alarm to unknown", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* Effect.either(service.transaction(Effect.zipRight(service.setAlarm(T1), Effect.fail("no"))))
          expect(yield* service.alarm).toBeUndefined()
          expect(yield* Effect.promise(() => storage.getAlarm())).toBeNull()
        }))

      test("setAlarm and deleteAlarm outside a transaction update the service and the platform", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* service.setAlarm(T1)
          expect(yield* service.alarm).toBe(T1)
          expect(yield* Effect.promise(() => storage.getAlarm())).toBe(T1)
          yield* service.setAlarm(T2)
          expect(yield* service.alarm).toBe(T2)
          expect(yield* Effect.promise(() => storage.getAlarm())).toBe(T2)
          yield* service.deleteAlarm
          expect(yield* service.alarm).toBeNull()
          expect(yield* Effect.promise(() => storage.getAlarm())).toBeNull()
        }))

      test("readAlarm returns the platform value and refreshes alarm", ({ service, storage }) =>
        Effect.gen(function*() {
          yield* service.setAlarm(T1)
          yield* Effect.promise(() => storage.setAlarm(T2))
          expect(yield* service.alarm).toBe(T1)
          expect(yield* service.readAlarm).toBe(T2)
          expect(yield* service.alarm).toBe(T2)
          yield* Effect.promise(() => storage.deleteAlarm())
          expect(yield* service.readAlarm).toBeNull()
          expect(yield* service.alarm).toBeNull()
        }))
    })

    describe("values", () => {
      test("blobs round-trip as ArrayBuffer", ({ service }) =>
        Effect.gen(function*() {
          yield* service.exec("CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB)")
          const bytes = new Uint8Array([0, 1, 2, 127, 128, 254, 255])
          yield* service.exec("INSERT INTO blobs VALUES (?, ?)", [1, bytes.slice().buffer])
          yield* service.exec("INSERT INTO blobs VALUES (?, ?)", [2, new ArrayBuffer(0)])
          const rows = yield* service.exec("SELECT id, data, typeof(data) AS type, length(data) AS size FROM blobs ORDER BY id")
          expect(rows.map((row) => [row.type, row.size])).toEqual([["blob", 7], ["blob", 0]])
          const [first, second] = rows
          expect(first?.data).toBeInstanceOf(ArrayBuffer)
          expect(new Uint8Array(first?.data as ArrayBuffer)).toEqual(bytes)
          expect(second?.data).toBeInstanceOf(ArrayBuffer)
          expect((second?.data as ArrayBuffer).byteLength).toBe(0)
          const literal = yield* service.exec("SELECT X'00FF' AS data")
          expect(new Uint8Array(literal[0]?.data as ArrayBuffer)).toEqual(new Uint8Array([0, 255]))
        }))

      test("NULLs round-trip", ({ service }) =>
        Effect.gen(function*() {
          yield* service.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER, c BLOB)")
          yield* service.exec("INSERT INTO t VALUES (?, ?, ?, ?)", [1, null, null, null])
          expect(yield* service.exec("SELECT a, b, c, typeof(a) AS type FROM t")).toEqual([
            { a: null, b: null, c: null, type: "null" }
          ])
          expect(yield* service.exec("SELECT id FROM t WHERE a IS ?", [null])).toEqual([{ id: 1 }])
        }))

      test("integers up to Number.MAX_SAFE_INTEGER round-trip", ({ service }) =>
        Effect.gen(function*() {
          yield* service.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
          const values = [0, 1, -1, 2 ** 31, -(2 ** 31) - 1, 1_767_225_600_000, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]
          yield* Effect.forEach(values, (n, i) => service.exec("INSERT INTO t VALUES (?, ?)", [i, n]), { discard: true })
          const rows = yield* service.exec("SELECT n, typeof(n) AS type FROM t ORDER BY id")
          expect(rows.map((row) => row.n)).toEqual(values)
          expect(rows.every((row) => row.type === "integer")).toBe(true)
          expect(yield* service.exec("SELECT id FROM t WHERE n = ?", [Number.MAX_SAFE_INTEGER])).toEqual([{ id: 6 }])
          expect(yield* service.exec("SELECT 9007199254740991 AS n")).toEqual([{ n: Number.MAX_SAFE_INTEGER }])
        }))

      test("strings and reals round-trip", ({ service }) =>
        Effect.gen(function*() {
          const text = "héllo, wörld 🌍 'quoted' \"double\"\n\ttab"
          const rows = yield* service.exec("SELECT ? AS text, ? AS real, ? AS empty", [text, 0.1 + 0.2, ""])
          expect(rows).toEqual([{ text, real: 0.1 + 0.2, empty: "" }])
        }))
    })
  })
}
