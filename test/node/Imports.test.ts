/**
 * The library imports Effect module by module: esbuild (and so wrangler) keeps every export of a
 * namespace re-exported from the `effect` barrel, which more than doubled a minimal worker's
 * bundle (bench B6: 232 KiB gz through the barrel, 125 KiB with module imports).
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const sourceFiles = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    return entry.isDirectory() ? sourceFiles(full) : entry.name.endsWith(".ts") ? [full] : []
  })

describe("imports", () => {
  it("no module under src/ imports from the effect barrel", () => {
    const root = path.resolve(__dirname, "../../src")
    const offenders = sourceFiles(root).filter((file) =>
      /from\s+["']effect["']/.test(fs.readFileSync(file, "utf8"))
    ).map((file) => path.relative(root, file))
    expect(offenders).toEqual([])
  })

  it("only the workflow engine (src/workflows, entry durability/workflow-engine) imports @effect/workflow", () => {
    const root = path.resolve(__dirname, "../../src")
    const offenders = sourceFiles(root).filter((file) => /from\s+["']@effect\/workflow/.test(fs.readFileSync(file, "utf8")))
      .map((file) => path.relative(root, file).split(path.sep).join("/"))
      .filter((file) => !file.startsWith("workflows/") && file !== "workflowEngine.ts")
    expect(offenders).toEqual([])
  })

  it("no other entry point reaches the workflow engine (a worker that never imports it never needs @effect/workflow)", () => {
    const root = path.resolve(__dirname, "../../src")
    const reaches = sourceFiles(root).filter((file) => !path.relative(root, file).startsWith("workflows")).filter((file) =>
      path.basename(file) !== "workflowEngine.ts" && /from\s+["'][./]*\/?workflows\/(?:WorkflowEngine|engine\/)/.test(fs.readFileSync(file, "utf8"))
    )
    expect(reaches.map((file) => path.relative(root, file))).toEqual([])
  })

  it("only the routing client imports cloudflare:workers, and only dynamically (Node code, and a push given a namespace, never load it)", () => {
    const root = path.resolve(__dirname, "../../src")
    const importers = sourceFiles(root).filter((file) => /["']cloudflare:workers["']\s*\)?/.test(fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "")))
      .map((file) => path.relative(root, file).split(path.sep).join("/"))
    expect(importers).toEqual(["facade/DurabilityRouting.ts"])
    const text = fs.readFileSync(path.join(root, "facade/DurabilityRouting.ts"), "utf8")
    expect(text).not.toMatch(/^\s*import[^(]*["']cloudflare:workers["']/m)
    expect(text).toMatch(/await import\("cloudflare:workers"\)/)
  })
})
