#!/usr/bin/env node
/**
 * The API report: the public declarations of every entry point (package.json "exports"), one file each in
 * api/, so a change to the public types is a diff someone reviews.
 *
 *   node api/report.mjs          writes the report (`npm run api`)
 *   node api/report.mjs --check  compares it with the committed one (part of `npm run typecheck`, so of `npm test`)
 *
 * How: tsc emits the library's declarations in memory (tsconfig.build.json's options, nothing written); a
 * second program over those declarations walks each entry point's exports (into `export * as X`
 * namespaces) and prints every exported declaration without comments, then every declaration of the
 * library the printed ones refer to without exporting it under a name (a type reachable from the
 * public types is part of them). Modules nothing public reaches are not in the report, so changing
 * them needs no review here. Deterministic: sorted names, TypeScript's printer, no paths of this machine.
 */
import fs from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const reportDir = path.join(root, "api")
// Never written: the emitted declarations live in memory under this path.
const virtualOut = path.join(root, ".api-declarations")

/** The entry points: the package's subpath, its source, the report file. */
const ENTRIES = [
  { subpath: "durability", source: "src/index.ts", report: "index.api.md" },
  { subpath: "durability/effect", source: "src/effect.ts", report: "effect.api.md" },
  { subpath: "durability/testing", source: "src/testing.ts", report: "testing.api.md" },
  { subpath: "durability/inspector", source: "src/inspector.ts", report: "inspector.api.md" },
  { subpath: "durability/utils", source: "src/utils.ts", report: "utils.api.md" },
  { subpath: "durability/workflow-engine", source: "src/workflowEngine.ts", report: "workflow-engine.api.md" },
  { subpath: "durability/routing", source: "src/routing.ts", report: "routing.api.md" }
]

const args = process.argv.slice(2)
const check = args.includes("--check")
if (args.some((arg) => arg !== "--check")) {
  console.error(`api/report.mjs takes only --check (got ${args.join(" ")})`)
  process.exit(2)
}

const fail = (message) => {
  console.error(message)
  process.exit(1)
}

const diagnosticText = (diagnostics) =>
  ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (file) => file,
    getCurrentDirectory: () => root,
    getNewLine: () => "\n"
  })

// ---------------------------------------------------------------------------------------------
// 1. The declarations, emitted in memory

const buildOptions = () => {
  const configFile = path.join(root, "tsconfig.build.json")
  const { config, error } = ts.readConfigFile(configFile, ts.sys.readFile)
  if (error) fail(diagnosticText([error]))
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root, undefined, configFile)
  if (parsed.errors.length > 0) fail(diagnosticText(parsed.errors))
  return {
    fileNames: parsed.fileNames,
    options: {
      ...parsed.options,
      outDir: virtualOut,
      noEmit: false,
      declaration: true,
      emitDeclarationOnly: true,
      declarationMap: false,
      sourceMap: false
    }
  }
}

/** Both programs parse the same library files (Effect's declarations, the workers types) once. */
const parsed = new Map()
const cachedSourceFile = (host) => {
  const { getSourceFile } = host
  return (file, language, onError, shouldCreate) => {
    const key = `${typeof language === "object" ? language.languageVersion : language}:${path.resolve(file)}`
    if (!parsed.has(key)) parsed.set(key, getSourceFile.call(host, file, language, onError, shouldCreate))
    return parsed.get(key)
  }
}

const emitDeclarations = () => {
  const { fileNames, options } = buildOptions()
  const host = ts.createCompilerHost(options, true)
  host.getSourceFile = cachedSourceFile(host)
  const program = ts.createProgram({ rootNames: fileNames, options, host })
  const emitted = new Map()
  const result = program.emit(undefined, (file, text) => emitted.set(path.resolve(file), text), undefined, true)
  const errors = [...program.getOptionsDiagnostics(), ...program.getSyntacticDiagnostics(), ...result.diagnostics]
  if (errors.length > 0) fail(`api/report.mjs: the declarations did not emit:\n${diagnosticText(errors)}`)
  return { emitted, options }
}

// ---------------------------------------------------------------------------------------------
// 2. The public declarations, walked from each entry point

const declarationPath = (source) => path.join(virtualOut, path.relative(path.join(root, "src"), path.join(root, source)))
  .replace(/\.ts$/, ".d.ts")

/** The source a declaration file was emitted from, as the report names it. */
const sourceName = (file) => `src/${path.relative(virtualOut, file).split(path.sep).join("/").replace(/\.d\.ts$/, ".ts")}`

const declarationsProgram = (emitted, buildOptions) => {
  const options = {
    ...buildOptions,
    noEmit: true,
    emitDeclarationOnly: false,
    declaration: false,
    skipLibCheck: true,
    rootDir: undefined,
    outDir: undefined
  }
  const host = ts.createCompilerHost(options, true)
  const inVirtual = (file) => path.resolve(file).startsWith(virtualOut + path.sep)
  const { directoryExists, fileExists, readFile } = host
  const getSourceFile = cachedSourceFile(host)
  host.fileExists = (file) => inVirtual(file) ? emitted.has(path.resolve(file)) : fileExists.call(host, file)
  host.readFile = (file) => inVirtual(file) ? emitted.get(path.resolve(file)) : readFile.call(host, file)
  host.directoryExists = (dir) =>
    inVirtual(dir) || path.resolve(dir) === virtualOut ? true : directoryExists?.call(host, dir) ?? ts.sys.directoryExists(dir)
  host.getSourceFile = (file, language, onError, shouldCreate) => {
    if (!inVirtual(file)) return getSourceFile(file, language, onError, shouldCreate)
    const text = emitted.get(path.resolve(file))
    return text === undefined ? undefined : ts.createSourceFile(file, text, language, true)
  }
  const rootNames = ENTRIES.map((entry) => declarationPath(entry.source))
  for (const file of rootNames) {
    if (!emitted.has(file)) fail(`api/report.mjs: no declarations were emitted for ${sourceName(file)}`)
  }
  // Not type-checked again here: the consumer test checks the built declarations without skipLibCheck.
  return { program: ts.createProgram({ rootNames, options, host }), inVirtual }
}

const printer = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed })

/** What a declaration prints as: a variable with its statement (`declare const x: T`), the rest as they are. */
const printable = (declaration) =>
  ts.isVariableDeclaration(declaration) && ts.isVariableDeclarationList(declaration.parent) &&
    declaration.parent.declarations.length === 1
    ? declaration.parent.parent
    : declaration

const print = (declaration) =>
  printer.printNode(ts.EmitHint.Unspecified, printable(declaration), declaration.getSourceFile())
    // The export modifiers say nothing here: what is exported, and under which name, is the heading.
    .replace(/^export (default )?/, "")

const byText = (a, b) => (a < b ? -1 : a > b ? 1 : 0)

const reportFor = (entry, program, inVirtual) => {
  const checker = program.getTypeChecker()
  const file = program.getSourceFile(declarationPath(entry.source))
  const moduleSymbol = checker.getSymbolAtLocation(file)
  const resolve = (symbol) => (symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol)
  const ours = (declaration) => inVirtual(declaration.getSourceFile().fileName)
  const isModule = (symbol) => (symbol.declarations ?? []).some((declaration) => ts.isSourceFile(declaration))

  /** Exported name → the symbol, namespaces re-exported with `export * as` walked into. */
  const exported = []
  const walk = (module, prefix, seen) => {
    for (const symbol of checker.getExportsOfModule(module)) {
      const name = `${prefix}${symbol.escapedName}`
      const target = resolve(symbol)
      if (isModule(target)) {
        if (!seen.has(target)) walk(target, `${name}.`, new Set([...seen, target]))
        continue
      }
      exported.push({ name, symbol: target })
    }
  }
  if (moduleSymbol === undefined) fail(`api/report.mjs: ${entry.source} is not a module`)
  walk(moduleSymbol, "", new Set([moduleSymbol]))
  exported.sort((a, b) => byText(a.name, b.name))

  const publicSymbols = new Set(exported.map(({ symbol }) => symbol))
  const referenced = new Map()
  const queue = []
  const refer = (node) => {
    const name = ts.isTypeReferenceNode(node)
      ? node.typeName
      : ts.isExpressionWithTypeArguments(node)
      ? node.expression
      : ts.isTypeQueryNode(node)
      ? node.exprName
      : ts.isImportTypeNode(node)
      ? node.qualifier
      : undefined
    let symbol = name === undefined ? undefined : checker.getSymbolAtLocation(name)
    if (symbol === undefined && ts.isImportTypeNode(node)) {
      const type = checker.getTypeFromTypeNode(node)
      symbol = type.aliasSymbol ?? type.getSymbol()
    }
    if (symbol === undefined) return
    symbol = resolve(symbol)
    if (symbol.flags & ts.SymbolFlags.TypeParameter || isModule(symbol)) return
    const declarations = (symbol.declarations ?? []).filter(ours)
    if (declarations.length === 0 || publicSymbols.has(symbol) || referenced.has(symbol)) return
    referenced.set(symbol, declarations)
    queue.push(...declarations)
  }
  const visit = (node) => {
    if (
      ts.isTypeReferenceNode(node) || ts.isExpressionWithTypeArguments(node) || ts.isTypeQueryNode(node) ||
      ts.isImportTypeNode(node)
    ) refer(node)
    ts.forEachChild(node, visit)
  }

  const exportsText = exported.map(({ name, symbol }) => {
    const declarations = (symbol.declarations ?? []).filter(ours)
    queue.push(...declarations)
    // Re-exported from a package (e.g. an Effect type): named, not printed.
    const body = declarations.length === 0
      ? `// from ${(symbol.declarations ?? [])[0]?.getSourceFile().fileName.replace(/^.*node_modules\//, "") ?? "elsewhere"}`
      : declarations.map(print).join("\n")
    return `// ${name}\n${body}`
  })
  while (queue.length > 0) visit(printable(queue.shift()))

  const referencedText = [...referenced.entries()]
    .map(([symbol, declarations]) => ({
      key: `${sourceName(declarations[0].getSourceFile().fileName)}: ${symbol.escapedName}`,
      text: declarations.map(print).join("\n")
    }))
    .sort((a, b) => byText(a.key, b.key))
    .map(({ key, text }) => `// ${key}\n${text}`)

  return [
    `# \`${entry.subpath}\`: public API report`,
    "",
    "Generated by `npm run api` (api/report.mjs) from the declarations tsc emits for " +
    `\`${entry.source}\`; \`npm test\` fails while it differs. A diff here is a change of the public types: review it.`,
    "",
    "## Exports",
    "",
    "```ts",
    exportsText.join("\n\n"),
    "```",
    "",
    "## Referenced declarations",
    "",
    "Declarations of the library that the exports refer to without exporting them under a name.",
    "",
    "```ts",
    referencedText.length === 0 ? "// none" : referencedText.join("\n\n"),
    "```",
    ""
  ].join("\n")
}

// ---------------------------------------------------------------------------------------------
// 3. Write, or compare

const started = performance.now()
const { emitted, options } = emitDeclarations()
const { program, inVirtual } = declarationsProgram(emitted, options)
const reports = ENTRIES.map((entry) => ({ entry, text: reportFor(entry, program, inVirtual) }))
const seconds = ((performance.now() - started) / 1000).toFixed(1)

const committed = new Set(
  fs.existsSync(reportDir) ? fs.readdirSync(reportDir).filter((file) => file.endsWith(".api.md")) : []
)

if (!check) {
  for (const { entry, text } of reports) {
    fs.writeFileSync(path.join(reportDir, entry.report), text)
    committed.delete(entry.report)
  }
  for (const stale of committed) fs.rmSync(path.join(reportDir, stale))
  console.log(`api: wrote ${reports.map(({ entry }) => `api/${entry.report}`).join(", ")} (${seconds} s)`)
  process.exit(0)
}

/** The first lines where `expected` and `actual` part, with a little context. */
const firstDifference = (expected, actual) => {
  const a = expected.split("\n")
  const b = actual.split("\n")
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  const from = Math.max(0, i - 2)
  return [
    ...a.slice(from, i).map((line) => `    ${line}`),
    ...a.slice(i, i + 6).map((line) => `  - ${line}`),
    ...b.slice(i, i + 6).map((line) => `  + ${line}`)
  ].join("\n")
}

const problems = []
for (const { entry, text } of reports) {
  const file = path.join(reportDir, entry.report)
  committed.delete(entry.report)
  if (!fs.existsSync(file)) {
    problems.push(`api/${entry.report} is missing`)
    continue
  }
  const before = fs.readFileSync(file, "utf8")
  if (before !== text) problems.push(`api/${entry.report} differs (- committed, + now; first difference):\n${firstDifference(before, text)}`)
}
for (const stale of committed) problems.push(`api/${stale} is not an entry point's report`)
if (problems.length > 0) {
  fail(`public API changed: run npm run api and review the diff.\n\n${problems.join("\n\n")}`)
}
console.log(`api: the reports match the public declarations of ${reports.length} entry points (${seconds} s)`)
