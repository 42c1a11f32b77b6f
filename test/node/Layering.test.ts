/**
 * The layers of `src/`, bottom to top: a module imports only its own folder or a lower layer
 * (type-only imports included), and no import cycle joins modules or folders. A lower layer is the
 * contract a higher one builds on (the engine's `DurableTable`, the inspection's `Source`), so it
 * must never need the higher one.
 *
 *   shared < engine < inspection < steps, routing < operations, alarms, jobs, workflows, log < schedules < inspector
 *     < facade, effect < testing
 *
 * Operations, alarms and jobs are one layer: none imports another; so are the two faces, facade
 * (promises) and effect (what `durability/effect` shows). The entry points (`src/*.ts`) may import
 * anything, and nothing imports them.
 */
import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src")

/** Each folder's layer: higher imports lower, never the other way. */
const LAYERS: Readonly<Record<string, number>> = {
  shared: 0,
  engine: 1,
  inspection: 2,
  steps: 3,
  routing: 3,
  operations: 4,
  alarms: 4,
  jobs: 4,
  workflows: 4,
  log: 4,
  fanout: 4,
  schedules: 5,
  inspector: 6,
  facade: 7,
  effect: 7,
  testing: 8
}

const modules = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return modules(path)
    return path.endsWith(".ts") ? [path] : []
  })

// Static imports and re-exports (`import … from`, `export … from`, `import "…"`) and type-level
// `import("…")`, relative ones only.
const SPECIFIERS = [
  /^\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?["'](\.[^"']+)["']/gm,
  /\bimport\(\s*["'](\.[^"']+)["']\s*\)/g
]

const importsOf = (file: string): Array<string> => {
  const text = readFileSync(file, "utf8")
  return [...new Set(SPECIFIERS.flatMap((pattern) => [...text.matchAll(pattern)].map((match) =>
    resolve(dirname(file), match[1]!.replace(/\.js$/, ".ts"))
  )))]
}

type Graph = ReadonlyMap<string, ReadonlyArray<string>>

const shown = (path: string) => relative(SRC, path).split(sep).join("/")

/** A module's folder under `src/`, or undefined for an entry point (`src/*.ts`). */
const folderOf = (path: string): string | undefined => {
  const parts = shown(path).split("/")
  return parts.length > 1 ? parts[0] : undefined
}

/** Every import that breaks the layers, as "from → to". */
const violations = (graph: Graph): Array<string> =>
  [...graph].flatMap(([from, imports]) => {
    const source = folderOf(from)
    if (source === undefined) return []
    return imports.flatMap((to) => {
      const target = folderOf(to)
      const allowed = target !== undefined && (
        target === source ||
        (LAYERS[source] !== undefined && LAYERS[target] !== undefined && LAYERS[target] < LAYERS[source])
      )
      return allowed ? [] : [`${shown(from)} → ${shown(to)}`]
    })
  })

/** Every cycle's first occurrence, as "a → b → a". */
const cycles = (graph: Graph): Array<string> => {
  const found: Array<string> = []
  const state = new Map<string, "open" | "done">()
  const stack: Array<string> = []
  const visit = (node: string): void => {
    state.set(node, "open")
    stack.push(node)
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") {
        found.push([...stack.slice(stack.indexOf(next)), next].join(" → "))
      } else if (!state.has(next)) {
        visit(next)
      }
    }
    stack.pop()
    state.set(node, "done")
  }
  for (const node of graph.keys()) if (!state.has(node)) visit(node)
  return found
}

/** The graph of modules, with names relative to `src/`. */
const named = (graph: Graph): Graph => new Map([...graph].map(([from, imports]) => [shown(from), imports.map(shown)]))

/** The graph of folders (entry points left out: nothing imports them). */
const folders = (graph: Graph): Graph => {
  const edges = new Map<string, Set<string>>()
  for (const [from, imports] of graph) {
    const source = folderOf(from)
    if (source === undefined) continue
    const targets = edges.get(source) ?? new Set()
    for (const to of imports) {
      const target = folderOf(to)
      if (target !== undefined && target !== source) targets.add(target)
    }
    edges.set(source, targets)
  }
  return new Map([...edges].map(([folder, targets]) => [folder, [...targets].sort()]))
}

const at = (path: string) => join(SRC, path)

describe("src/ layering", () => {
  const graph: Graph = new Map(modules(SRC).map((file) => [file, importsOf(file)]))

  it("every folder of src/ has a layer", () => {
    const unplaced = [...new Set([...graph.keys()].flatMap((file) => folderOf(file) ?? []))]
      .filter((folder) => LAYERS[folder] === undefined)
    expect(unplaced).toEqual([])
  })

  it("a module imports only its own folder or a lower layer, type-only imports included", () => {
    expect(graph.size).toBeGreaterThan(30)
    // The edges are read, not assumed: known ones must be there (a type-only import among them).
    expect(graph.get(at("engine/Scheduler.ts"))).toContain(at("engine/DurableTable.ts"))
    expect(graph.get(at("inspection/source.ts"))).toContain(at("inspection/protocol.ts"))
    expect(graph.get(at("operations/attach.ts"))).toContain(at("inspection/InspectionRegistry.ts"))
    expect(violations(graph)).toEqual([])
  })

  it("has no import cycle among modules", () => {
    expect(cycles(named(graph))).toEqual([])
  })

  it("has no import cycle among folders", () => {
    const byFolder = folders(graph)
    expect(byFolder.get("inspector")).toContain("inspection")
    expect(cycles(byFolder)).toEqual([])
  })
})

describe("the layering checks themselves", () => {
  it("find an import of a higher layer, of a same-layer folder, of an entry point and of an unknown folder", () => {
    const graph: Graph = new Map([
      [at("engine/a.ts"), [at("engine/b.ts"), at("shared/c.ts"), at("inspector/d.ts")]],
      [at("operations/e.ts"), [at("jobs/f.ts"), at("steps/g.ts"), at("index.ts")]],
      [at("index.ts"), [at("testing/h.ts")]],
      [at("elsewhere/i.ts"), [at("shared/c.ts")]]
    ])
    expect(violations(graph)).toEqual([
      "engine/a.ts → inspector/d.ts",
      "operations/e.ts → jobs/f.ts",
      "operations/e.ts → index.ts",
      "elsewhere/i.ts → shared/c.ts"
    ])
  })

  it("find a cycle among modules and among folders", () => {
    const graph: Graph = new Map([
      [at("jobs/a.ts"), [at("jobs/b.ts")]],
      [at("jobs/b.ts"), [at("jobs/a.ts"), at("alarms/c.ts")]],
      [at("alarms/c.ts"), [at("alarms/d.ts")]],
      [at("alarms/d.ts"), [at("jobs/e.ts")]]
    ])
    expect(cycles(named(graph))).toEqual(["jobs/a.ts → jobs/b.ts → jobs/a.ts"])
    expect(cycles(folders(graph))).toEqual(["jobs → alarms → jobs"])
  })

  it("read type-only imports and re-exports", () => {
    const file = at("inspection/InspectionRegistry.ts")
    expect(importsOf(file)).toContain(at("inspection/source.ts"))
  })
})
