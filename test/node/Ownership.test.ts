/**
 * Each table has one owning module that holds its SQL, reads included: the other modules (the
 * inspection sources among them) call it, and only the owner and its schema file (the DDL and
 * migrations) name the table in SQL. The fencing condition of a writer (`… generation_id = ? AND
 * status = 'pending'`) is written once per table, in its owner; `status = 'pending'` appears nowhere
 * else but in the engine's own statements (`engine/tableSql.ts`).
 *
 * A table is named by its literal name, or by interpolating its constant into SQL (`${JOBS}`,
 * `${Schema.TABLE}`) or passing the constant to a statement's builder (`cappedCount(TABLE, …)`).
 */
import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src")

interface Owned {
  readonly table: string
  /** The name of the table's constant, in its folder. */
  readonly constant: string
  readonly owner: string
  readonly schema?: string
}

const OWNED: ReadonlyArray<Owned> = [
  { table: "durability_jobs", constant: "JOBS", owner: "jobs/jobsTable.ts", schema: "jobs/schema.ts" },
  // Written with its job, in `add`'s transaction.
  { table: "durability_job_dedup", constant: "DEDUP", owner: "jobs/jobsTable.ts", schema: "jobs/schema.ts" },
  { table: "durability_job_queues", constant: "QUEUES", owner: "jobs/queuesTable.ts", schema: "jobs/schema.ts" },
  { table: "durability_job_buckets", constant: "BUCKETS", owner: "jobs/bucketsTable.ts", schema: "jobs/schema.ts" },
  { table: "durability_job_logs", constant: "LOGS", owner: "jobs/logsTable.ts", schema: "jobs/schema.ts" },
  { table: "durability_job_dead_letters", constant: "DEAD_LETTERS", owner: "jobs/deadLettersTable.ts", schema: "jobs/schema.ts" },
  { table: "durability_job_outbox", constant: "OUTBOX", owner: "jobs/outboxTable.ts", schema: "jobs/schema.ts" },
  { table: "durability_calls", constant: "TABLE", owner: "operations/callsTable.ts", schema: "operations/schema.ts" },
  { table: "durability_alarms", constant: "TABLE", owner: "alarms/alarmsTable.ts", schema: "alarms/schema.ts" },
  { table: "durability_schedules", constant: "TABLE", owner: "schedules/schedulesTable.ts", schema: "schedules/schema.ts" },
  { table: "durability_steps", constant: "MEMO_TABLE", owner: "steps/memoTable.ts" },
  { table: "durability_workflows", constant: "TABLE", owner: "workflows/instancesTable.ts", schema: "workflows/schema.ts" },
  { table: "durability_workflow_steps", constant: "STEPS", owner: "workflows/stepsTable.ts", schema: "workflows/schema.ts" },
  { table: "durability_workflow_events", constant: "EVENTS", owner: "workflows/eventsTable.ts", schema: "workflows/schema.ts" },
  { table: "durability_effect_workflow_executions", constant: "EXECUTIONS", owner: "workflows/engine/executionsTable.ts", schema: "workflows/engine/schema.ts" },
  { table: "durability_effect_workflow_activities", constant: "ACTIVITIES", owner: "workflows/engine/journalTable.ts", schema: "workflows/engine/schema.ts" },
  { table: "durability_log_records", constant: "RECORDS", owner: "log/recordsTable.ts", schema: "log/schema.ts" },
  // The offset counter and the byte total, moved with the records in the same transactions.
  { table: "durability_log_seq", constant: "LOG_SEQ", owner: "log/recordsTable.ts", schema: "log/schema.ts" },
  { table: "durability_log_cursors", constant: "CURSORS", owner: "log/recordsTable.ts", schema: "log/schema.ts" },
  // Indexed in the transaction that deletes the segment's records.
  { table: "durability_log_segments", constant: "SEGMENTS", owner: "log/recordsTable.ts", schema: "log/schema.ts" },
  { table: "durability_log_leases", constant: "LOG_LEASES", owner: "log/leasesTable.ts", schema: "log/schema.ts" },
  { table: "durability_log_allocations", constant: "ALLOCATIONS", owner: "log/leasesTable.ts", schema: "log/schema.ts" },
  { table: "durability_effect_workflow_deferreds", constant: "DEFERREDS", owner: "workflows/engine/journalTable.ts", schema: "workflows/engine/schema.ts" },
  { table: "durability_fanout_messages", constant: "MESSAGES", owner: "fanout/deliveriesTable.ts", schema: "fanout/schema.ts" },
  { table: "durability_fanout_deliveries", constant: "DELIVERIES", owner: "fanout/deliveriesTable.ts", schema: "fanout/schema.ts" },
  { table: "durability_fanout_seq", constant: "SEQ", owner: "fanout/deliveriesTable.ts", schema: "fanout/schema.ts" },
  { table: "durability_fanout_targets", constant: "TARGETS", owner: "fanout/deliveriesTable.ts", schema: "fanout/schema.ts" }
]

/** The owners of the engine's records: each writes its fence once. */
const FENCED = [
  "jobs/jobsTable.ts",
  "operations/callsTable.ts",
  "alarms/alarmsTable.ts",
  "schedules/schedulesTable.ts",
  "workflows/instancesTable.ts",
  "workflows/engine/executionsTable.ts",
  "fanout/deliveriesTable.ts"
]

const modules = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return modules(path)
    return path.endsWith(".ts") ? [path] : []
  })

const shown = (path: string) => relative(SRC, path).split(sep).join("/")

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const CONSTANTS = [...new Set(OWNED.map((owned) => owned.constant))].join("|")
/** `${JOBS}`, `${Schema.TABLE}`: a table's constant in SQL text. */
const INTERPOLATED = new RegExp(`\\$\\{\\s*(?:[A-Za-z_$][\\w$]*\\.)?(${CONSTANTS})\\s*\\}`, "g")
/** `cappedCount(TABLE, …)`: a table's constant given to a statement's builder. */
const PASSED = new RegExp(`[(,]\\s*(?:[A-Za-z_$][\\w$]*\\.)?(${CONSTANTS})\\s*(?=[,)])`, "g")

const folderOf = (file: string) => file.split("/")[0]

/** The tables a module names through their constants (a constant is its own folder's). */
const namedByConstant = (file: string, text: string): Array<string> => {
  const constants = new Set([...text.matchAll(INTERPOLATED), ...text.matchAll(PASSED)].map((match) => match[1]!))
  return OWNED.filter((owned) => constants.has(owned.constant) && folderOf(owned.owner) === folderOf(file)).map((owned) => owned.table)
}

/** The tables a module names literally. */
const namedLiterally = (text: string): Array<string> =>
  OWNED.filter((owned) => new RegExp(`(?<![\\w$])${escaped(owned.table)}(?![\\w$])`).test(text)).map((owned) => owned.table)

const occurrences = (text: string, needle: string) => text.split(needle).length - 1

describe("table ownership", () => {
  const files = new Map(modules(SRC).map((path) => [shown(path), readFileSync(path, "utf8")]))
  const allowed = (file: string, table: string) =>
    OWNED.some((owned) => owned.table === table && (owned.owner === file || owned.schema === file))

  it("every owner and schema file is there, and names its tables", () => {
    for (const owned of OWNED) {
      const text = files.get(owned.owner)
      expect(text, owned.owner).toBeDefined()
      const named = [...namedByConstant(owned.owner, text!), ...namedLiterally(text!)]
      const schema = owned.schema === undefined ? undefined : files.get(owned.schema)
      const inSchema = schema === undefined ? [] : [...namedByConstant(owned.schema!, schema), ...namedLiterally(schema)]
      expect([...named, ...inSchema], `${owned.owner} names ${owned.table}`).toContain(owned.table)
    }
  })

  it("only a table's owner and its schema file name it", () => {
    const strays = [...files].flatMap(([file, text]) => {
      // The engine's own tables and statements (over any participant's table, given its name) are its own.
      const byConstant = file.startsWith("engine/") ? [] : namedByConstant(file, text)
      return [...new Set([...byConstant, ...namedLiterally(text)])]
        .filter((table) => !allowed(file, table))
        .map((table) => `${file} names ${table}`)
    })
    expect(strays).toEqual([])
  })

  it("`status = 'pending'` is written only in the owners and the engine's statements", () => {
    const owners = new Set([...OWNED.map((owned) => owned.owner), "engine/tableSql.ts"])
    const strays = [...files].filter(([file, text]) => !owners.has(file) && text.includes("status = 'pending'")).map(([file]) => file)
    expect(strays).toEqual([])
  })

  it("each owner of records writes its writer's fence once", () => {
    for (const owner of FENCED) {
      expect(occurrences(files.get(owner) ?? "", "generation_id = ? AND status = 'pending'"), owner).toBe(1)
    }
  })
})
