#!/usr/bin/env node
/**
 * The consumer test (last step of `npm test`): the library as a user gets it.
 *
 *  1. `npm pack` (prepack builds dist/) and check the tarball: entry points, LICENSE, what must not ship
 *     (tests, bench/, the repository's dev launcher), and every relative link of README.md and docs/*.md.
 *  2. A fresh project in os.tmpdir() from test/consumer/app, plus the README quick start and its
 *     wrangler.toml, the tsconfig.json and vitest.config.ts exactly as docs/testing.md shows them, and
 *     every ```ts block of README.md and docs/*.md as a file of its own under test/docs/ (a block that
 *     imports vitest or @effect/vitest is a test: `*.test.ts`); installed with exactly the README's "Use
 *     it in your project" commands (the tarball substituted for `durability`), the versions checked
 *     against the README's table.
 *  3. Before sql.js is installed, `durability/testing` must name the install command; then it is installed.
 *  4. tsc with the documented strict tsconfig (moduleResolution bundler) and with nodenext: the app and
 *     every documented block (an error names the markdown file and line); the declarations without
 *     skipLibCheck; the entry points through the old node10 resolver.
 *  5. The app's vitest suite and the documented tests (durability/testing, TestClock) in Node, on the
 *     built JavaScript, under the documented vitest config.
 *  6. `wrangler deploy --dry-run` of the app and of the quick start.
 *
 * Installs reuse the npm cache of the repository's own install (--prefer-offline). On failure the
 * temporary files are kept and their path printed; KEEP_CONSUMER=1 keeps them on success too.
 */
import { execFileSync, spawn } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const appSource = path.join(root, "test", "consumer", "app")
const INSTALL_FLAGS = ["--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"]
const SECTION = "## Use it in your project"

if (process.argv.length > 2) {
  console.error(
    `test/consumer/run.mjs takes no arguments (got ${process.argv.slice(2).join(" ")}).\n` +
      "npm test runs tsc, vitest and this test; pass vitest flags to `npx vitest run`, `npm run test:node` " +
      "or `npm run test:workers` instead (CI asks for vitest's JSON report with VITEST_JSON_REPORT=<file>)."
  )
  process.exit(2)
}

// ---------------------------------------------------------------------------------------------
// Steps, timings and failures

class ConsumerError extends Error {}
const fail = (message) => {
  throw new ConsumerError(message)
}

const timings = []
const step = (name, body) => {
  const started = performance.now()
  process.stdout.write(`[consumer] ${name} ... `)
  try {
    const note = body()
    const ms = performance.now() - started
    timings.push({ name, ms })
    console.log(`ok (${(ms / 1000).toFixed(1)} s)${note ? `: ${note}` : ""}`)
  } catch (error) {
    console.log("FAILED")
    error.step = name
    throw error
  }
}

// Child processes see neither the outer `npm test`'s package context nor colours.
const childEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) =>
    !/^npm_(package|lifecycle)_/i.test(key) && !/^(npm_config_local_prefix|npm_command|INIT_CWD)$/i.test(key)
  )
)
Object.assign(childEnv, { WRANGLER_SEND_METRICS: "false", NO_COLOR: "1", FORCE_COLOR: "0", CI: "true" })

/** Runs a command; on failure throws with its output. Returns stdout. */
const run = (command, args, cwd, { allowFailure = false } = {}) => {
  try {
    return execFileSync(command, args, {
      cwd,
      env: childEnv,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      maxBuffer: 64 * 1024 * 1024
    })
  } catch (error) {
    if (allowFailure) return { failed: true, stdout: error.stdout ?? "", stderr: error.stderr ?? "" }
    fail(`\`${[command, ...args].join(" ")}\` (in ${cwd}) exited with ${error.status ?? error.signal}\n` +
      `${error.stdout ?? ""}${error.stderr ?? ""}`.trim())
  }
}

/** `run`, without blocking: resolves with stdout, rejects (ConsumerError) with the output on failure. */
const runAsync = (command, args, cwd) =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: childEnv, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code, signal) =>
      code === 0 ? resolve(stdout) : reject(new ConsumerError(
        `\`${[command, ...args].join(" ")}\` (in ${cwd}) exited with ${code ?? signal}\n${stdout}${stderr}`.trim()
      )))
  })

/** Independent checks at once (the machine's cores are otherwise idle); each is timed and reported. */
const parallel = async (tasks) => {
  const results = await Promise.allSettled(tasks.map(async ({ name, body }) => {
    const started = performance.now()
    const note = await body()
    return { name, note, ms: performance.now() - started }
  }))
  const failures = []
  results.forEach((result, index) => {
    const { name } = tasks[index]
    if (result.status === "fulfilled") {
      timings.push({ name, ms: result.value.ms })
      console.log(`[consumer] ${name} ... ok (${(result.value.ms / 1000).toFixed(1)} s)${result.value.note ? `: ${result.value.note}` : ""}`)
    } else {
      console.log(`[consumer] ${name} ... FAILED`)
      failures.push(`${name}:\n${result.reason instanceof ConsumerError ? result.reason.message : result.reason?.stack}`)
    }
  })
  if (failures.length > 0) {
    const error = new ConsumerError(failures.join("\n\n"))
    error.step = results.length === 1 ? tasks[0].name : `${failures.length} of ${results.length} parallel checks`
    throw error
  }
}

// ---------------------------------------------------------------------------------------------
// What the README promises

/** The "Use it in your project" section: install commands, version table, quick start and its wrangler.toml. */
const readReadme = () => {
  const readme = fs.readFileSync(path.join(root, "README.md"), "utf8")
  const start = readme.indexOf(`\n${SECTION}\n`)
  if (start === -1) fail(`README.md has no "${SECTION}" section`)
  const rest = readme.slice(start + SECTION.length + 2)
  const section = rest.slice(0, rest.search(/^## /m) === -1 ? rest.length : rest.search(/^## /m))
  const blocks = [...section.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)].map(([, lang, body]) => ({ lang, body }))

  const installs = blocks.filter((b) => b.lang === "sh").flatMap((b) => b.body.split("\n"))
    .map((line) => line.replace(/#.*$/, "").trim()).filter((line) => line.startsWith("npm install"))
  if (installs.length === 0) fail(`README.md "${SECTION}" shows no \`npm install\` command`)

  const versions = new Map()
  let node
  for (const line of section.split("\n")) {
    const row = /^\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|/.exec(line)
    if (row) versions.set(row[1], row[2])
    const nodeRow = /^\|\s*Node(?:\.js)?\s*\|\s*`(\d+)`/.exec(line)
    if (nodeRow) node = nodeRow[1]
  }
  if (versions.size === 0 || node === undefined) fail(`README.md "${SECTION}" has no version table (| \`package\` | \`version\` |, | Node.js | \`20\` |)`)

  const quickStart = blocks.find((b) => b.lang === "ts")
  const toml = blocks.find((b) => b.lang === "toml")
  if (!quickStart || !toml) fail(`README.md "${SECTION}" needs a \`\`\`toml wrangler.toml and a \`\`\`ts quick start`)
  return { readme, installs, versions, node, quickStart: quickStart.body, toml: toml.body }
}

/** docs/*.md (not docs/api/), relative to the root. */
const docPages = () =>
  fs.readdirSync(path.join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)

/**
 * What the documentation shows, for the fresh project: every ```ts block of README.md and docs/*.md, and the
 * blocks marked `<!-- consumer: <file> -->` on the line before (the user's tsconfig.json and vitest.config.ts),
 * written to the project verbatim.
 */
const readDocs = () => {
  const blocks = []
  const marked = new Map()
  for (const relative of ["README.md", ...docPages()]) {
    const lines = fs.readFileSync(path.join(root, relative), "utf8").split("\n")
    for (let i = 0; i < lines.length; i++) {
      const open = /^```(\w*)\s*$/.exec(lines[i])
      if (open === null) continue
      const end = lines.findIndex((line, j) => j > i && /^```\s*$/.test(line))
      if (end === -1) fail(`${relative}:${i + 1}: a code block is never closed`)
      const code = lines.slice(i + 1, end).join("\n") + "\n"
      const marker = /^<!--\s*consumer:\s*(\S+)\s*-->\s*$/.exec(lines[i - 1] ?? "")
      if (marker !== null) {
        if (marked.has(marker[1])) fail(`${relative}:${i}: a second block is marked as ${marker[1]}`)
        marked.set(marker[1], { code, where: `${relative}:${i + 2}` })
      }
      if (open[1] === "ts") blocks.push({ source: relative, line: i + 2, code })
      i = end
    }
  }
  for (const file of ["tsconfig.json", "vitest.config.ts"]) {
    if (!marked.has(file)) fail(`no block of README.md or docs/*.md is marked <!-- consumer: ${file} --> (docs/testing.md shows the user's ${file})`)
  }
  return { blocks, marked }
}

/** The project file of a documented block: test/docs/<page>.L<line>.ts, `.test.ts` for a test. */
const blockFile = (block) => {
  const page = path.posix.basename(block.source, ".md")
  const isTest = /from\s+"(vitest|@effect\/vitest)"/.test(block.code)
  return `test/docs/${page}.L${block.line}${isTest ? ".test" : ""}.ts`
}

/** `name@version` → [name, version] (scoped names included); a bare name → [name, undefined]. */
const splitSpec = (spec) => {
  const at = spec.lastIndexOf("@")
  return at > 0 ? [spec.slice(0, at), spec.slice(at + 1)] : [spec, undefined]
}
const packagesOf = (command) => command.split(/\s+/).slice(2).filter((arg) => !arg.startsWith("-"))

const checkVersions = ({ installs, versions, node }) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"))
  const installed = new Map()
  for (const command of installs) {
    for (const spec of packagesOf(command)) {
      const [name, version] = splitSpec(spec)
      if (name === "durability") continue
      if (version === undefined) fail(`README install command "${command}": ${name} has no exact version`)
      installed.set(name, version)
    }
  }
  if (!installs.some((command) => packagesOf(command).includes("durability"))) {
    fail("no README install command installs `durability`")
  }
  for (const [name, version] of versions) {
    if (installed.get(name) !== version) {
      fail(`README: the table says ${name} ${version}, the install commands ${installed.get(name) ?? "do not install it"}`)
    }
    const own = pkg.devDependencies?.[name]
    if (own !== version) fail(`README: the table says ${name} ${version}, but this repository is tested with ${own ?? "none"} (package.json devDependencies)`)
  }
  for (const [name] of installed) {
    if (!versions.has(name)) fail(`README: ${name} is installed by the README's commands but missing from the version table`)
  }
  const major = process.versions.node.split(".")[0]
  return `${versions.size} packages, Node ${node}${major === node ? "" : ` (running on Node ${process.versions.node})`}`
}

// ---------------------------------------------------------------------------------------------
// The tarball

const ENTRY_POINTS = ["index", "effect", "testing", "utils", "inspector", "workflowEngine", "routing"]

const pack = (destination) => {
  const stdout = run("npm", ["pack", "--json", "--pack-destination", destination], root)
  // prepack's output (the build) may precede npm's JSON on stdout.
  const start = stdout.search(/^\[\s*$/m)
  if (start === -1) fail(`npm pack printed no JSON:\n${stdout}`)
  const [result] = JSON.parse(stdout.slice(start))
  return { tarball: path.join(destination, result.filename), files: result.files.map((f) => f.path), result }
}

const checkTarball = ({ files, result }) => {
  const set = new Set(files)
  const has = (file) => set.has(file) || files.some((f) => f.startsWith(`${file.replace(/\/$/, "")}/`))
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"))
  const problems = []

  for (const file of ["package.json", "README.md", "LICENSE"]) if (!set.has(file)) problems.push(`${file} is not in the tarball`)
  for (const entry of ENTRY_POINTS) {
    for (const ext of [".js", ".d.ts", ".d.ts.map"]) {
      if (!set.has(`dist/${entry}${ext}`)) problems.push(`dist/${entry}${ext} is not in the tarball`)
    }
  }
  // Every target the package.json resolves to: in the tarball and never the TypeScript sources.
  const targets = [pkg.main, pkg.types]
  const walk = (value) => typeof value === "string" ? targets.push(value) : Object.values(value ?? {}).forEach(walk)
  walk(pkg.exports)
  walk(pkg.typesVersions)
  for (const target of targets) {
    const file = target.replace(/^\.\//, "")
    if (!set.has(file)) problems.push(`package.json points at ${target}, which is not in the tarball`)
    if (file !== "package.json" && !file.startsWith("dist/")) problems.push(`package.json points at ${target}, outside dist/`)
  }
  // What a user cannot use: the tests, the benchmarks and their results, the repository's dev launcher.
  for (const file of files) {
    if (/^(test\/|bench\/|examples\/start\.mjs$|node_modules\/|\.)/.test(file)) problems.push(`${file} should not be published`)
  }
  // Relative links must work from the package page (unpkg, the registry's code view): their targets are packed.
  // A link to a file that is not (an example, bench/RESULTS.md) is an absolute URL into the repository.
  for (const page of ["README.md", ...docPages()]) {
    if (!set.has(page)) problems.push(`${page} is not in the tarball`)
    const markdown = fs.readFileSync(path.join(root, page), "utf8")
    for (const [, target] of markdown.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (/^([a-z][a-z0-9+.-]*:|#)/i.test(target)) continue
      const file = path.posix.normalize(path.posix.join(path.posix.dirname(page), decodeURIComponent(target.split("#")[0])))
      if (!has(file)) problems.push(`${page} links to ${target}, which is not in the tarball (add it to "files" or link the repository)`)
    }
  }
  if (problems.length > 0) fail(`the tarball is wrong:\n  ${problems.join("\n  ")}`)
  return `${result.filename}, ${files.length} files, ${(result.size / 1024).toFixed(0)} KiB packed`
}

// ---------------------------------------------------------------------------------------------
// The user's project

const copyApp = (project, { quickStart, toml }, docs) => {
  fs.cpSync(appSource, project, { recursive: true })
  fs.mkdirSync(path.join(project, "quickstart", "src"), { recursive: true })
  fs.writeFileSync(path.join(project, "quickstart", "wrangler.toml"), toml)
  fs.writeFileSync(path.join(project, "quickstart", "src", "index.ts"), quickStart)
  // The documented configuration is the project's: the app has no copy of its own.
  for (const [file, { code }] of docs.marked) fs.writeFileSync(path.join(project, file), code)
  fs.mkdirSync(path.join(project, "test", "docs"), { recursive: true })
  for (const block of docs.blocks) {
    // A block is a module of its own (they all import something; this keeps a future one without imports so).
    const code = /^(import|export)\b/m.test(block.code) ? block.code : `${block.code}export {}\n`
    fs.writeFileSync(path.join(project, blockFile(block)), code)
  }
}

/** tsc's `test/docs/<page>.L<n>.ts(row,col)` as the markdown file and line the block came from. */
const toMarkdownLines = (output, docs) => {
  const byFile = new Map(docs.blocks.map((block) => [blockFile(block), block]))
  return output.replace(/(test\/docs\/[^\s(]+\.ts)\((\d+),(\d+)\)/g, (match, file, row, column) => {
    const block = byFile.get(file)
    return block === undefined ? match : `${block.source}:${block.line + Number(row) - 1}:${column} (${file})`
  })
}

const tsc = (project, config, docs) =>
  runAsync("node", [path.join(project, "node_modules", "typescript", "bin", "tsc"), "-p", config], project)
    .then(() => undefined, (error) => {
      if (error instanceof ConsumerError) error.message = toMarkdownLines(error.message, docs)
      throw error
    })

const wranglerDryRun = async (project, config, outdir) => {
  const output = await runAsync(path.join(project, "node_modules", ".bin", "wrangler"),
    ["deploy", "--dry-run", "--outdir", outdir, "--config", config], project)
  const size = /Total Upload:\s*([\d.]+\s*KiB\s*\/\s*gzip:\s*[\d.]+\s*KiB)/.exec(output)
  if (size === null) fail(`wrangler printed no bundle size for ${config}:\n${output}`)
  return size[1].replace(/\s+/g, " ")
}

// ---------------------------------------------------------------------------------------------

const main = async () => {
  const started = performance.now()
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "durability-consumer-"))
  const project = path.join(work, "app")
  let ok = false
  try {
    let spec
    let docs
    let packed
    step("README: install commands and version table agree with package.json", () => {
      spec = readReadme()
      return checkVersions(spec)
    })
    step("README and docs: the code blocks and the documented tsconfig.json and vitest.config.ts", () => {
      docs = readDocs()
      const tests = docs.blocks.filter((block) => blockFile(block).endsWith(".test.ts")).length
      return `${docs.blocks.length} \`\`\`ts blocks (${tests} of them tests), ${[...docs.marked.keys()].join(", ")}`
    })
    step("npm pack (prepack builds dist/)", () => {
      packed = pack(work)
      return checkTarball(packed)
    })
    copyApp(project, spec, docs)

    const installsSqlJs = (command) => packagesOf(command).some((s) => splitSpec(s)[0] === "sql.js")
    const firstSqlJs = spec.installs.findIndex(installsSqlJs)
    if (firstSqlJs === -1) fail("no README install command installs sql.js (durability/testing needs it)")
    if (packagesOf(spec.installs[firstSqlJs]).includes("durability")) {
      fail("the README installs sql.js together with durability: it must be a separate step (it is an optional peer)")
    }
    spec.installs.forEach((command, index) => {
      if (index === firstSqlJs) {
        step("without sql.js, durability/testing names the install command", () => {
          const out = run("node", ["scripts/missing-sqljs.mjs"], project, { allowFailure: true })
          if (typeof out !== "string") fail(`MemoryStorage.make did not fail as documented:\n${out.stdout}${out.stderr}`)
          return JSON.stringify(out.trim().slice(0, 60) + "…")
        })
      }
      const args = command.split(/\s+/).slice(1).map((arg) => arg === "durability" ? packed.tarball : arg)
      step(`${command.replace(/ durability( |$)/, " <tarball>$1")}`, () => {
        run("npm", [...args, ...INSTALL_FLAGS], project)
      })
    })
    step("installed versions match the README table, one copy of effect; npm ls is clean", () => {
      for (const [name, version] of spec.versions) {
        const file = path.join(project, "node_modules", name, "package.json")
        const actual = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")).version : "not installed"
        if (actual !== version) fail(`${name}: README says ${version}, the project got ${actual}`)
      }
      // effect is a peer: the library must use the app's copy, not a nested one of its own.
      const nested = path.join(project, "node_modules", "durability", "node_modules")
      if (fs.existsSync(nested)) fail(`durability got its own dependencies: ${fs.readdirSync(nested).join(", ")}`)
      run("npm", ["ls"], project)
    })
    await parallel([
      { name: "tsc, the documented tsconfig (bundler): the app and every documented block", body: () => tsc(project, "tsconfig.json", docs) },
      { name: "tsc, module/moduleResolution nodenext", body: () => tsc(project, "tsconfig.nodenext.json", docs) },
      { name: "tsc, skipLibCheck false (every entry point's declarations)", body: () => tsc(project, "tsconfig.libcheck.json", docs) },
      { name: "tsc, moduleResolution node10 (main/types/typesVersions)", body: () => tsc(project, "tsconfig.node10.json", docs) }
    ])
    await parallel([
      {
        name: "vitest run, the documented config (the app's tests and the documented ones)",
        body: async () => {
          const out = await runAsync(path.join(project, "node_modules", ".bin", "vitest"), ["run"], project)
          const tests = /Tests\s+(\d+) passed/.exec(out)
          if (tests === null) fail(`vitest printed no passed count:\n${out}`)
          const files = /Test Files\s+(\d+) passed/.exec(out)
          const documented = docs.blocks.filter((block) => blockFile(block).endsWith(".test.ts")).length
          const ran = [...out.matchAll(/test\/docs\/\S+\.test\.ts/g)].length
          if (documented > 0 && ran === 0) fail(`vitest ran none of the ${documented} documented tests:\n${out}`)
          return `${tests[1]} tests in ${files?.[1] ?? "?"} files passed, ${documented} files of them documented`
        }
      },
      {
        name: "wrangler deploy --dry-run (the app)",
        body: () => wranglerDryRun(project, "wrangler.toml", path.join(work, "bundle-app"))
      },
      {
        name: "wrangler deploy --dry-run (the README quick start)",
        body: () => wranglerDryRun(project, "quickstart/wrangler.toml", path.join(work, "bundle-quickstart"))
      }
    ])
    ok = true
  } catch (error) {
    console.error(`\n[consumer] FAILED${error.step ? ` at "${error.step}"` : ""}:\n${error instanceof ConsumerError ? error.message : error.stack}`)
    console.error(`[consumer] the temporary files are kept: ${work}`)
  } finally {
    const total = (performance.now() - started) / 1000
    if (ok) {
      const slowest = [...timings].sort((a, b) => b.ms - a.ms).slice(0, 3)
        .map((t) => `${t.name.slice(0, 40)} ${(t.ms / 1000).toFixed(1)} s`).join(", ")
      console.log(`[consumer] passed: ${timings.length} steps in ${total.toFixed(1)} s (slowest: ${slowest})`)
      if (process.env["KEEP_CONSUMER"] === "1") console.log(`[consumer] kept: ${project}`)
      else fs.rmSync(work, { recursive: true, force: true })
    }
  }
  process.exit(ok ? 0 : 1)
}

await main()
