#!/usr/bin/env node
/**
 * Every ```ts block of README.md and docs/*.md compiles as shown (part of `npm run typecheck`): each block is a
 * module of its own, type-checked against this repository's sources ("durability[/x]" mapped to src/ by
 * tsconfig.json's `paths`) with the workers types and "cloudflare:workers", under tsconfig.json's strict options.
 * One program for all blocks; a failure names the file and line of each diagnostic (`docs/testing.md:42:7`).
 * The consumer test (test/consumer/run.mjs) checks the same blocks again against the packed package, under the
 * user tsconfig that docs/testing.md shows (stricter: noPropertyAccessFromIndexSignature, which this repository's
 * sources, checked in the same program here, do not follow).
 *
 * A type-check, so it runs with the type-check rather than among the behaviour tests: it costs 6–9 s of CPU
 * (the library's sources are checked again under the blocks), which the Node test project's budget is not for.
 */
import fs from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
/** README.md, then docs/*.md (not docs/api/), as paths relative to the root. */
const markdownFiles = () => [
  "README.md",
  ...fs.readdirSync(path.join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]

/**
 * The blocks of one file, each with the 1-based line of its first line of code and a virtual file in the root
 * (so "effect", "@effect/vitest"... resolve from node_modules).
 */
const extractBlocks = (relative, markdown) => {
  const lines = markdown.split("\n")
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```ts\s*$/.test(lines[i])) continue
    const end = lines.findIndex((line, j) => j > i && /^```\s*$/.test(line))
    if (end === -1) throw new Error(`${relative}:${i + 1}: a \`\`\`ts block is never closed`)
    const virtual = `${relative.replace(/\//g, "__")}.L${i + 2}.ts`
    blocks.push({ source: relative, line: i + 2, code: lines.slice(i + 1, end).join("\n"), file: path.join(root, virtual) })
    i = end
  }
  return blocks
}

const compilerOptions = () => {
  const configFile = path.join(root, "tsconfig.json")
  const { config, error } = ts.readConfigFile(configFile, ts.sys.readFile)
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, "\n"))
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root, undefined, configFile)
  return {
    ...parsed.options,
    types: ["@cloudflare/workers-types"],
    noEmit: true,
    // A snippet may declare something it only shows, and a block is a module even without imports.
    noUnusedLocals: false,
    noUnusedParameters: false,
    moduleDetection: ts.ModuleDetectionKind.Force
  }
}

const typeCheck = (blocks) => {
  const options = compilerOptions()
  const byFile = new Map(blocks.map((block) => [block.file, block]))
  const host = ts.createCompilerHost(options, true)
  const { fileExists, readFile, getSourceFile } = host
  host.fileExists = (file) => byFile.has(file) || fileExists.call(host, file)
  host.readFile = (file) => byFile.get(file)?.code ?? readFile.call(host, file)
  host.getSourceFile = (file, language, onError, shouldCreate) => {
    const block = byFile.get(file)
    return block === undefined
      ? getSourceFile.call(host, file, language, onError, shouldCreate)
      : ts.createSourceFile(file, block.code, language, true, ts.ScriptKind.TS)
  }
  const program = ts.createProgram({ rootNames: [...byFile.keys()], options, host })
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n  ")
    const block = diagnostic.file === undefined ? undefined : byFile.get(diagnostic.file.fileName)
    if (diagnostic.file === undefined || diagnostic.start === undefined) return `(no file): TS${diagnostic.code} ${message}`
    const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start)
    const where = block === undefined
      ? `${path.relative(root, diagnostic.file.fileName)}:${line + 1}`
      : `${block.source}:${block.line + line}`
    return `${where}:${character + 1}: TS${diagnostic.code} ${message}`
  })
}

const files = markdownFiles()
const blocks = files.flatMap((relative) => extractBlocks(relative, fs.readFileSync(path.join(root, relative), "utf8")))
if (!blocks.some((block) => block.source === "README.md")) {
  console.error("README.md: no ```ts block found")
  process.exit(1)
}
const diagnostics = typeCheck(blocks)
if (diagnostics.length > 0) {
  console.error(`The code of README.md and docs/ does not compile:\n${diagnostics.join("\n")}`)
  process.exit(1)
}
console.log(`README.md and docs/: ${blocks.length} \`\`\`ts blocks in ${files.length} files type-check`)
