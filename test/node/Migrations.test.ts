import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { MigrationError, StorageError } from "../../src/shared/Errors.js"
import * as Migrations from "../../src/engine/Migrations.js"
import * as NamedAlarms from "../../src/alarms/NamedAlarms.js"
import * as Operations from "../../src/operations/Operations.js"
import * as Jobs from "../../src/jobs/Jobs.js"
import * as Schedules from "../../src/schedules/Schedules.js"
import * as Timers from "../../src/engine/timers.js"
import type { Migration } from "../../src/engine/Migrations.js"
import * as StorageService from "../../src/engine/StorageService.js"
import * as MemoryStorage from "../../src/testing/MemoryStorage.js"

const widgets: ReadonlyArray<Migration> = [
  {
    name: "widgets_0001_create",
    // Two statements in one script: scripts run without bindings, as a whole.
    up: "CREATE TABLE widgets (id INTEGER PRIMARY KEY, name TEXT NOT NULL); INSERT INTO widgets (name) VALUES ('seed');",
    down: "DROP TABLE widgets;"
  },
  {
    name: "widgets_0002_name_index",
    up: "CREATE INDEX widgets_name_idx ON widgets (name)",
    down: "DROP INDEX widgets_name_idx"
  },
  {
    name: "widgets_0003_color",
    up: "ALTER TABLE widgets ADD COLUMN color TEXT",
    down: "ALTER TABLE widgets DROP COLUMN color"
  }
]
const widgetNames = widgets.map((m) => m.name)

const gadgets: ReadonlyArray<Migration> = [
  {
    name: "gadgets_0001_create",
    up: "CREATE TABLE gadgets (id INTEGER PRIMARY KEY); CREATE INDEX gadgets_id_idx ON gadgets (id);",
    down: "DROP INDEX gadgets_id_idx; DROP TABLE gadgets;"
  }
]

/** What a newer library version adds to the widgets list. */
const newerWidgets: ReadonlyArray<Migration> = [
  ...widgets,
  {
    name: "widgets_0004_parts",
    up: "CREATE TABLE widget_parts (id INTEGER PRIMARY KEY)",
    down: "DROP TABLE widget_parts"
  },
  {
    name: "widgets_0005_part_size",
    up: "ALTER TABLE widget_parts ADD COLUMN size INTEGER",
    down: "ALTER TABLE widget_parts DROP COLUMN size"
  },
  {
    name: "widgets_0006_part_weight",
    up: "ALTER TABLE widget_parts ADD COLUMN weight INTEGER",
    down: "ALTER TABLE widget_parts DROP COLUMN weight"
  }
]

const setup = Effect.gen(function*() {
  const storage = yield* MemoryStorage.make
  const sql = yield* StorageService.make(storage)
  const run = <A, E>(effect: Effect.Effect<A, E, StorageService.StorageService>) =>
    Effect.provideService(effect, StorageService.StorageService, sql)
  const tables = () =>
    sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").pipe(
      Effect.map((rows) => rows.map((row) => row["name"]))
    )
  const indexes = () =>
    sql.exec("SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name").pipe(
      Effect.map((rows) => rows.map((row) => row["name"]))
    )
  const columns = (table: string) =>
    sql.exec(`SELECT name FROM pragma_table_info('${table}')`).pipe(Effect.map((rows) => rows.map((row) => row["name"])))
  const history = () =>
    sql.exec("SELECT name, capability, down FROM durability_migrations ORDER BY id").pipe(
      Effect.map((rows) => rows.map((row) => ({ ...row })))
    )
  return { storage, sql, run, tables, indexes, columns, history }
})

const migrationError = (error: MigrationError | StorageError): MigrationError => {
  expect(error).toBeInstanceOf(MigrationError)
  return error as MigrationError
}

describe("Migrations.migrate", () => {
  it.effect("applies every migration up to the latest and records capability and down", () =>
    Effect.gen(function*() {
      const { columns, history, indexes, run, sql, tables } = yield* setup
      const result = yield* run(Migrations.migrate("widgets", widgets))
      expect(result).toEqual({ applied: widgetNames, rolledBack: [] })
      expect(yield* tables()).toEqual(["durability_migrations", "widgets"])
      expect(yield* indexes()).toEqual(["widgets_name_idx"])
      expect(yield* columns("widgets")).toEqual(["id", "name", "color"])
      expect(yield* sql.exec("SELECT name FROM widgets")).toEqual([{ name: "seed" }])
      expect(yield* history()).toEqual(
        widgets.map((m) => ({ name: m.name, capability: "widgets", down: m.down }))
      )
      const [row] = yield* sql.exec("SELECT applied_at FROM durability_migrations LIMIT 1")
      expect(typeof row?.["applied_at"]).toBe("string")
    }))

  it.effect("is idempotent: a second run applies nothing and writes nothing", () =>
    Effect.gen(function*() {
      const { run, storage } = yield* setup
      yield* run(Migrations.migrate("widgets", widgets))
      const before = storage.snapshot()
      const statements = storage.statements.length
      expect(yield* run(Migrations.migrate("widgets", widgets))).toEqual({ applied: [], rolledBack: [] })
      expect(storage.snapshot()).toEqual(before)
      const later = storage.statements.slice(statements)
      expect(later.every((s) => /^\s*SELECT/i.test(s))).toBe(true)
    }))

  it.effect("reverts down to a named target, then to null, and drops the empty history table", () =>
    Effect.gen(function*() {
      const { columns, history, indexes, run, tables } = yield* setup
      yield* run(Migrations.migrate("widgets", widgets))

      const partial = yield* run(Migrations.migrate("widgets", widgets, "widgets_0001_create"))
      expect(partial).toEqual({ applied: [], rolledBack: ["widgets_0003_color", "widgets_0002_name_index"] })
      expect(yield* indexes()).toEqual([])
      expect(yield* columns("widgets")).toEqual(["id", "name"])
      expect((yield* history()).map((row) => row["name"])).toEqual(["widgets_0001_create"])

      const up = yield* run(Migrations.migrate("widgets", widgets, "widgets_0002_name_index"))
      expect(up).toEqual({ applied: ["widgets_0002_name_index"], rolledBack: [] })

      const all = yield* run(Migrations.migrate("widgets", widgets, null))
      expect(all).toEqual({ applied: [], rolledBack: ["widgets_0002_name_index", "widgets_0001_create"] })
      expect(yield* tables()).toEqual([])
      expect(yield* indexes()).toEqual([])

      // Nothing recorded and nothing to revert: still no history table.
      expect(yield* run(Migrations.migrate("widgets", widgets, null))).toEqual({ applied: [], rolledBack: [] })
      expect(yield* tables()).toEqual([])
    }))

  it.effect("keeps capabilities independent", () =>
    Effect.gen(function*() {
      const { history, run, tables } = yield* setup
      expect(yield* run(Migrations.migrate("widgets", widgets))).toEqual({ applied: widgetNames, rolledBack: [] })
      expect(yield* run(Migrations.migrate("gadgets", gadgets))).toEqual({
        applied: ["gadgets_0001_create"],
        rolledBack: []
      })

      expect(yield* run(Migrations.migrate("widgets", widgets, null))).toEqual({
        applied: [],
        rolledBack: [...widgetNames].reverse()
      })
      expect(yield* tables()).toEqual(["durability_migrations", "gadgets"])
      expect(yield* history()).toEqual([
        { name: "gadgets_0001_create", capability: "gadgets", down: "DROP INDEX gadgets_id_idx; DROP TABLE gadgets;" }
      ])
      // A capability never sees another's rows as unknown future migrations.
      expect(yield* run(Migrations.migrate("widgets", widgets))).toEqual({ applied: widgetNames, rolledBack: [] })
      expect(yield* run(Migrations.migrate("gadgets", gadgets, null))).toEqual({
        applied: [],
        rolledBack: ["gadgets_0001_create"]
      })
      expect(yield* tables()).toEqual(["durability_migrations", "widgets"])
    }))

  it.effect("applies a batch atomically: a failing script rolls back schema and history", () =>
    Effect.gen(function*() {
      const { history, run, storage, tables } = yield* setup
      const broken: ReadonlyArray<Migration> = [
        { name: "broken_0001_create", up: "CREATE TABLE broken_ok (id INTEGER)", down: "DROP TABLE broken_ok" },
        { name: "broken_0002_syntax", up: "CREATE TABLE broken_bad (", down: "DROP TABLE broken_bad" }
      ]

      const fresh = migrationError(yield* Effect.flip(run(Migrations.migrate("broken", broken))))
      expect(fresh.message).toContain("broken_0002_syntax")
      expect(fresh.cause).toBeInstanceOf(StorageError)
      expect(yield* tables()).toEqual([])

      yield* run(Migrations.migrate("widgets", widgets))
      const before = storage.snapshot()
      const error = migrationError(yield* Effect.flip(run(Migrations.migrate("broken", broken))))
      expect(error.message).toContain("broken_0002_syntax")
      expect(yield* tables()).toEqual(["durability_migrations", "widgets"])
      expect((yield* history()).map((row) => row["name"])).toEqual(widgetNames)
      expect(storage.snapshot()).toEqual(before)
    }))

  it.effect("rolls back known reverts too when a later step of the batch fails", () =>
    Effect.gen(function*() {
      const { history, run, tables } = yield* setup
      yield* run(Migrations.migrate("widgets", widgets))
      const badDown = widgets.map((m, i) => (i === 0 ? { ...m, down: "DROP TABLE no_such_table" } : m))
      const error = migrationError(yield* Effect.flip(run(Migrations.migrate("widgets", badDown, null))))
      expect(error.message).toContain("widgets_0001_create")
      expect(yield* tables()).toEqual(["durability_migrations", "widgets"])
      expect((yield* history()).map((row) => row["down"])).toEqual(widgets.map((m) => m.down))
    }))

  it.effect("rejects an unknown target without writing", () =>
    Effect.gen(function*() {
      const { run, storage } = yield* setup
      yield* run(Migrations.migrate("widgets", widgets, "widgets_0001_create"))
      const before = storage.snapshot()
      const error = migrationError(yield* Effect.flip(run(Migrations.migrate("widgets", widgets, "nope"))))
      expect(error.message).toBe("Unknown durability migration target \"nope\"")
      expect(storage.snapshot()).toEqual(before)
    }))

  it.effect("validates its inputs before any write", () =>
    Effect.gen(function*() {
      const { run, storage, tables } = yield* setup
      const [first] = widgets
      if (first === undefined) throw new Error("sample list is empty")
      const cases: ReadonlyArray<readonly [string, ReadonlyArray<Migration>, string]> = [
        ["", widgets, "capability"],
        ["widgets", [first, { ...first, up: "SELECT 1" }], "used twice"],
        ["widgets", [{ ...first, name: "" }], "non-empty name"]
      ]
      const statements = storage.statements.length
      for (const [capability, list, message] of cases) {
        const error = migrationError(yield* Effect.flip(run(Migrations.migrate(capability, list))))
        expect(error.message).toContain(message)
      }
      expect(storage.statements.length).toBe(statements)
      expect(yield* tables()).toEqual([])
    }))

  it.effect("refuses a migration name already recorded by another capability", () =>
    Effect.gen(function*() {
      const { run, storage } = yield* setup
      yield* run(Migrations.migrate("widgets", widgets))
      const before = storage.snapshot()
      const error = migrationError(yield* Effect.flip(run(Migrations.migrate("copycat", widgets))))
      expect(error.message).toContain("already recorded for capability \"widgets\"")
      expect(storage.snapshot()).toEqual(before)
    }))

  it.effect("reverts migrations recorded by a newer version from their stored down scripts", () =>
    Effect.gen(function*() {
      const { columns, history, run, tables } = yield* setup
      const newer = newerWidgets.slice(0, 5)
      yield* run(Migrations.migrate("widgets", newer))
      expect(yield* columns("widget_parts")).toEqual(["id", "size"])

      const result = yield* run(Migrations.migrate("widgets", widgets))
      expect(result).toEqual({ applied: [], rolledBack: ["widgets_0005_part_size", "widgets_0004_parts"] })
      expect(yield* tables()).toEqual(["durability_migrations", "widgets"])
      expect((yield* history()).map((row) => row["name"])).toEqual(widgetNames)
    }))

  it.effect("reverts one future migration before the known reverts down to a target", () =>
    Effect.gen(function*() {
      const { columns, history, run } = yield* setup
      yield* run(Migrations.migrate("widgets", newerWidgets.slice(0, 5), "widgets_0004_parts"))

      const result = yield* run(Migrations.migrate("widgets", widgets, "widgets_0002_name_index"))
      expect(result).toEqual({ applied: [], rolledBack: ["widgets_0004_parts", "widgets_0003_color"] })
      expect(yield* columns("widgets")).toEqual(["id", "name"])
      expect((yield* history()).map((row) => row["name"])).toEqual(widgetNames.slice(0, 2))
    }))

  it.effect("refuses to revert more than two future migrations and changes nothing", () =>
    Effect.gen(function*() {
      const { run, storage } = yield* setup
      yield* run(Migrations.migrate("widgets", newerWidgets))
      const before = storage.snapshot()
      const error = migrationError(yield* Effect.flip(run(Migrations.migrate("widgets", widgets))))
      expect(error.message).toContain("3 migrations ahead")
      expect(error.message).toContain("refusing to revert more than 2")
      expect(storage.snapshot()).toEqual(before)
    }))

  it.effect("fails when a future migration has no stored down script", () =>
    Effect.gen(function*() {
      const { run, sql, storage } = yield* setup
      yield* run(Migrations.migrate("widgets", widgets))
      yield* sql.exec("INSERT INTO durability_migrations (name, capability) VALUES ('widgets_0009_mystery', 'widgets')")
      const before = storage.snapshot()
      const error = migrationError(yield* Effect.flip(run(Migrations.migrate("widgets", widgets))))
      expect(error.message).toContain("widgets_0009_mystery")
      expect(error.message).toContain("no stored down script")
      expect(storage.snapshot()).toEqual(before)
    }))

  it.effect("refreshes a stored down script that differs from the current one", () =>
    Effect.gen(function*() {
      const { history, indexes, run } = yield* setup
      yield* run(Migrations.migrate("widgets", widgets))
      const revised = widgets.map((m) =>
        m.name === "widgets_0002_name_index" ? { ...m, down: "DROP INDEX IF EXISTS widgets_name_idx" } : m
      )
      expect(yield* run(Migrations.isCurrent("widgets", revised))).toBe(false)
      expect(yield* run(Migrations.migrate("widgets", revised))).toEqual({ applied: [], rolledBack: [] })
      expect(yield* history()).toEqual(revised.map((m) => ({ name: m.name, capability: "widgets", down: m.down })))
      expect(yield* run(Migrations.isCurrent("widgets", revised))).toBe(true)

      // An older version without that list still reverts with the refreshed script.
      expect(yield* run(Migrations.migrate("widgets", widgets.slice(0, 1)))).toEqual({
        applied: [],
        rolledBack: ["widgets_0003_color", "widgets_0002_name_index"]
      })
      expect(yield* indexes()).toEqual([])
    }))
})

describe("Migrations legacy v2 history", () => {
  // Running any of these `up` scripts against a v2 database fails (the tables
  // and columns exist), so a successful migrate proves none of them ran.
  const operations: ReadonlyArray<Migration> = [
    {
      name: "durability_0001_create_calls",
      up: "CREATE TABLE durability_calls (id TEXT PRIMARY KEY, status TEXT NOT NULL)",
      down: "DROP TABLE durability_calls"
    },
    {
      name: "durability_0002_pending_index",
      up: "CREATE INDEX durability_calls_pending_idx ON durability_calls (status)",
      down: "DROP INDEX durability_calls_pending_idx"
    },
    {
      name: "durability_0004_calls_generation_and_created_at",
      up: "ALTER TABLE durability_calls ADD COLUMN generation_id TEXT NOT NULL DEFAULT 'legacy'",
      down: "ALTER TABLE durability_calls DROP COLUMN generation_id"
    }
  ]
  const namedAlarms: ReadonlyArray<Migration> = [
    {
      name: "durability_0003_create_alarms",
      up: "CREATE TABLE durability_alarms (name TEXT PRIMARY KEY)",
      down: "DROP TABLE durability_alarms"
    },
    {
      name: "durability_0004_alarms_generation_and_created_at",
      up: "ALTER TABLE durability_alarms ADD COLUMN generation_id TEXT NOT NULL DEFAULT 'legacy'",
      down: "ALTER TABLE durability_alarms DROP COLUMN generation_id"
    }
  ]

  const v2 = Effect.gen(function*() {
    const env = yield* setup
    // The table workers-qb created in 2.x: no capability or down column.
    yield* env.sql.exec(`
      CREATE TABLE durability_migrations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT UNIQUE,
        applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
      );
      CREATE TABLE durability_calls (id TEXT PRIMARY KEY, status TEXT NOT NULL, generation_id TEXT NOT NULL DEFAULT 'legacy');
      CREATE INDEX durability_calls_pending_idx ON durability_calls (status);
      CREATE TABLE durability_alarms (name TEXT PRIMARY KEY, generation_id TEXT NOT NULL DEFAULT 'legacy');
      INSERT INTO durability_calls (id, status, generation_id) VALUES ('call-1', 'pending', 'g1');
      INSERT INTO durability_alarms (name, generation_id) VALUES ('daily', 'g2');
      INSERT INTO durability_migrations (name) VALUES
        ('durability_0001_create_calls'),
        ('durability_0002_pending_index'),
        ('durability_0003_create_alarms'),
        ('durability_0004_generation_and_created_at');
    `)
    return env
  })

  it.effect("translates the combined row without running any schema statement", () =>
    Effect.gen(function*() {
      const { history, run, sql, storage } = yield* v2
      expect(yield* run(Migrations.isCurrent("operations", operations))).toBe(false)
      const statements = storage.statements.length

      expect(yield* run(Migrations.migrate("operations", operations))).toEqual({ applied: [], rolledBack: [] })
      expect(yield* run(Migrations.migrate("namedAlarms", namedAlarms))).toEqual({ applied: [], rolledBack: [] })

      const scripts = new Set([...operations, ...namedAlarms].flatMap((m) => [m.up, m.down]))
      expect(storage.statements.slice(statements).filter((s) => scripts.has(s))).toEqual([])
      expect(yield* history()).toEqual([
        { name: "durability_0001_create_calls", capability: "operations", down: operations[0]?.down },
        { name: "durability_0002_pending_index", capability: "operations", down: operations[1]?.down },
        { name: "durability_0003_create_alarms", capability: "namedAlarms", down: namedAlarms[0]?.down },
        { name: "durability_0004_generation_and_created_at", capability: null, down: null },
        { name: "durability_0004_calls_generation_and_created_at", capability: "operations", down: operations[2]?.down },
        { name: "durability_0004_alarms_generation_and_created_at", capability: "namedAlarms", down: namedAlarms[1]?.down }
      ])
      expect(yield* sql.exec("SELECT id, status, generation_id FROM durability_calls")).toEqual([
        { id: "call-1", status: "pending", generation_id: "g1" }
      ])
      expect(yield* sql.exec("SELECT name, generation_id FROM durability_alarms")).toEqual([
        { name: "daily", generation_id: "g2" }
      ])
      expect(yield* run(Migrations.isCurrent("operations", operations))).toBe(true)
      expect(yield* run(Migrations.isCurrent("namedAlarms", namedAlarms))).toBe(true)
    }))

  it.effect("does not translate the combined row again after its half was reverted", () =>
    Effect.gen(function*() {
      const { columns, history, run } = yield* v2
      yield* run(Migrations.migrate("operations", operations))
      expect(yield* run(Migrations.migrate("operations", operations, "durability_0002_pending_index"))).toEqual({
        applied: [],
        rolledBack: ["durability_0004_calls_generation_and_created_at"]
      })
      expect(yield* columns("durability_calls")).toEqual(["id", "status"])

      expect(yield* run(Migrations.migrate("operations", operations))).toEqual({
        applied: ["durability_0004_calls_generation_and_created_at"],
        rolledBack: []
      })
      expect(yield* columns("durability_calls")).toEqual(["id", "status", "generation_id"])

      // Reverting everything keeps the combined 2.x row, hence the table.
      yield* run(Migrations.migrate("operations", operations, null))
      yield* run(Migrations.migrate("namedAlarms", namedAlarms, null))
      expect(yield* history()).toEqual([
        { name: "durability_0004_generation_and_created_at", capability: null, down: null }
      ])
    }))
})

describe("Migrations.isCurrent", () => {
  it.effect("is true only when the whole list is applied with current downs and nothing unknown", () =>
    Effect.gen(function*() {
      const { run, storage } = yield* setup
      expect(yield* run(Migrations.isCurrent("widgets", []))).toBe(true)
      expect(yield* run(Migrations.isCurrent("widgets", widgets))).toBe(false)

      yield* run(Migrations.migrate("widgets", widgets, "widgets_0002_name_index"))
      expect(yield* run(Migrations.isCurrent("widgets", widgets))).toBe(false)
      expect(yield* run(Migrations.isCurrent("widgets", widgets.slice(0, 2)))).toBe(true)

      yield* run(Migrations.migrate("widgets", widgets))
      const before = storage.snapshot()
      expect(yield* run(Migrations.isCurrent("widgets", widgets))).toBe(true)
      expect(storage.snapshot()).toEqual(before)
      expect(yield* run(Migrations.isCurrent("gadgets", gadgets))).toBe(false)
      expect(yield* run(Migrations.isCurrent("gadgets", []))).toBe(true)
      // Recorded migrations missing from the list are unknown (future) ones.
      expect(yield* run(Migrations.isCurrent("widgets", widgets.slice(0, 2)))).toBe(false)
      expect(yield* run(Migrations.isCurrent("", widgets))).toBe(false)

      yield* run(Migrations.migrate("widgets", newerWidgets.slice(0, 4)))
      expect(yield* run(Migrations.isCurrent("widgets", widgets))).toBe(false)
    }))
})

describe("the capabilities' own migrations", () => {
  const capabilities = [
    ["operations", Operations.migrations, "durability_calls"],
    ["namedAlarms", NamedAlarms.migrations, "durability_alarms"]
  ] as const

  it.effect("a 2.x combined row with claimed 0001/0002 rows and no split 0004 row: 0004 is recorded, never re-run over live rows", () =>
    Effect.gen(function*() {
      const { history, run, sql } = yield* setup
      yield* run(Operations.migrate())
      yield* run(NamedAlarms.migrate())
      yield* sql.exec(
        `INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, generation_id, created_at)
         VALUES ('live', 'charge', '{"kind":"value","value":1}', 'pending', 1, 5000, 'g-live', 123)`
      )
      yield* sql.exec(
        `INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, next_attempt_at, attempt, created_at)
         VALUES ('renew', 'g-alarm', 'pending', 9000, 9000, 1, 456)`
      )
      // The history a 2.x upgrade can leave: the combined 0004 row, no split halves.
      yield* sql.exec(
        `DELETE FROM durability_migrations WHERE name LIKE 'durability_0004_%';
         INSERT INTO durability_migrations (name) VALUES ('durability_0004_generation_and_created_at')`
      )
      const rowsBefore = {
        calls: yield* sql.exec("SELECT * FROM durability_calls"),
        alarms: yield* sql.exec("SELECT * FROM durability_alarms")
      }
      expect(yield* run(Migrations.isCurrent("operations", Operations.migrations))).toBe(false)

      expect(yield* run(Operations.migrate())).toEqual({ applied: [], rolledBack: [] })
      expect(yield* run(NamedAlarms.migrate())).toEqual({ applied: [], rolledBack: [] })

      expect(yield* sql.exec("SELECT * FROM durability_calls")).toEqual(rowsBefore.calls)
      expect(yield* sql.exec("SELECT * FROM durability_alarms")).toEqual(rowsBefore.alarms)
      expect(rowsBefore.calls[0]).toMatchObject({ generation_id: "g-live", created_at: 123 })
      const recorded = yield* history()
      expect(recorded).toContainEqual({
        name: "durability_0004_calls_generation_and_created_at",
        capability: "operations",
        down: Operations.migrations[2]?.down
      })
      expect(recorded).toContainEqual({
        name: "durability_0004_alarms_generation_and_created_at",
        capability: "namedAlarms",
        down: NamedAlarms.migrations[1]?.down
      })
      expect(yield* run(Migrations.isCurrent("operations", Operations.migrations))).toBe(true)
      expect(yield* run(Migrations.isCurrent("namedAlarms", NamedAlarms.migrations))).toBe(true)
    }))

  it.effect("a migration whose effect is already in the schema is recorded without running up", () =>
    Effect.gen(function*() {
      const { history, run, sql, storage } = yield* setup
      yield* run(Operations.migrate())
      yield* sql.exec("INSERT INTO durability_calls (id, operation, payload, status, next_attempt_at) VALUES ('x', 'op', 'null', 'pending', 1)")
      // The history is gone (e.g. dropped by hand); the tables are not.
      yield* sql.exec("DROP TABLE durability_migrations")
      const statements = storage.statements.length
      expect(yield* run(Operations.migrate())).toEqual({ applied: [], rolledBack: [] })
      const ups = new Set(Operations.migrations.map((m) => m.up))
      expect(storage.statements.slice(statements).filter((s) => ups.has(s))).toEqual([])
      expect((yield* history()).map((row) => row["name"])).toEqual(Operations.migrations.map((m) => m.name))
      expect(yield* sql.exec("SELECT id FROM durability_calls")).toEqual([{ id: "x" }])
    }))

  it("every down script that drops an object tolerates a missing one (IF EXISTS)", () => {
    for (const [, list] of capabilities) {
      for (const migration of list) {
        const drops = migration.down.match(/DROP\s+(TABLE|INDEX)\s+(?!IF EXISTS)\w+/gi) ?? []
        expect(drops, migration.name).toEqual([])
      }
    }
  })

  it.effect("reverts run when the objects they drop are already gone; stored downs are refreshed to the tolerant ones", () =>
    Effect.gen(function*() {
      const { history, run, sql, tables } = yield* setup
      yield* run(Operations.migrate("durability_0002_pending_index"))
      // Stored by an older version: the strict down scripts.
      yield* sql.exec(`UPDATE durability_migrations SET down = 'DROP INDEX durability_calls_pending_idx'
                       WHERE name = 'durability_0002_pending_index'`)
      yield* run(Operations.migrate("durability_0002_pending_index"))
      expect((yield* history()).find((row) => row["name"] === "durability_0002_pending_index")?.["down"])
        .toBe("DROP INDEX IF EXISTS durability_calls_pending_idx;")

      yield* sql.exec("DROP INDEX durability_calls_pending_idx")
      expect(yield* run(Operations.migrate("durability_0001_create_calls"))).toEqual({
        applied: [],
        rolledBack: ["durability_0002_pending_index"]
      })
      yield* sql.exec("DROP TABLE durability_calls")
      expect(yield* run(Operations.migrate(null))).toEqual({ applied: [], rolledBack: ["durability_0001_create_calls"] })
      expect(yield* tables()).toEqual([])

      yield* run(NamedAlarms.migrate("durability_0003_create_alarms"))
      yield* sql.exec("DROP TABLE durability_alarms")
      expect(yield* run(NamedAlarms.migrate(null))).toEqual({ applied: [], rolledBack: ["durability_0003_create_alarms"] })
    }))
})

describe("stored down scripts", () => {
  // The reference stores its down scripts with a closing `;` and its tests compare them exactly; ours
  // end the same way, so a history written by either reads the same.
  it("end with a semicolon, for every capability", () => {
    const lists = { Operations, NamedAlarms, Jobs, Schedules, Timers: { migrations: Timers.MIGRATIONS } }
    for (const [owner, { migrations }] of Object.entries(lists)) {
      for (const migration of migrations) expect(`${owner} ${migration.name}: ${migration.down.trimEnd().slice(-1)}`).toBe(`${owner} ${migration.name}: ;`)
    }
  })
})
