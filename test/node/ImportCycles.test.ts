/**
 * `src/` has no import cycle, type-only imports included: a cycle hides which module is the lower
 * layer (the extension point, the engine, the services) and which one builds on it.
 */
import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src")

const modules = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return modules(path)
    return path.endsWith(".ts") ? [path] : []
  })

// Static imports and re-exports (`import … from`, `export … from`, `import "…"`), relative ones only.
const SPECIFIER = /^\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?["'](\.[^"']+)["']/gm

const importsOf = (file: string): Array<string> =>
  [...readFileSync(file, "utf8").matchAll(SPECIFIER)].map((match) =>
    resolve(dirname(file), match[1]!.replace(/\.js$/, ".ts"))
  )

/** Every cycle's first occurrence, as a path of files relative to `src/`. */
const cycles = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  const found: Array<Array<string>> = []
  const state = new Map<string, "open" | "done">()
  const stack: Array<string> = []
  const visit = (file: string): void => {
    state.set(file, "open")
    stack.push(file)
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === "open") {
        found.push([...stack.slice(stack.indexOf(next)), next].map((path) => relative(SRC, path)))
      } else if (!state.has(next)) {
        visit(next)
      }
    }
    stack.pop()
    state.set(file, "done")
  }
  for (const file of graph.keys()) if (!state.has(file)) visit(file)
  return found
}

describe("src/ module graph", () => {
  it("has no import cycle, type-only imports included", () => {
    const graph = new Map(modules(SRC).map((file) => [file, importsOf(file)]))
    expect(graph.size).toBeGreaterThan(30)
    // The edges are read, not assumed: a known one must be there.
    expect(graph.get(join(SRC, "engine/Scheduler.ts"))).toContain(join(SRC, "engine/DurableTable.ts"))
    expect(cycles(graph)).toEqual([])
  })

  it("finds a cycle when there is one (the check itself works)", () => {
    const graph = new Map([[join(SRC, "a.ts"), [join(SRC, "b.ts")]], [join(SRC, "b.ts"), [join(SRC, "a.ts")]]])
    expect(cycles(graph)).toEqual([["a.ts", "b.ts", "a.ts"]])
  })
})
