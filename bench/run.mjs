#!/usr/bin/env node
/**
 * `npm run bench`: this library, the Agents SDK scheduler (the peer) and a raw-SQL floor, side by
 * side in one real workerd (Miniflare, local, no account), scenario by scenario in alternation.
 * Prints a table and writes bench/results/latest.json (`--smoke`: tiny N, bench/results/smoke.json,
 * for CI: it checks that everything runs and asserts no timing).
 *
 *   node bench/run.mjs [--smoke] [--reps N] [--only B1,B3] [--out FILE] [--profile]
 *
 * Every implementation is bundled by `wrangler deploy --dry-run` (the peer from its own package in
 * bench/peer, installed here with `npm ci` when missing) and runs in its own worker, so each has its
 * own isolate (B4 reads that isolate's heap through workerd's inspector).
 */
import { execFileSync } from "node:child_process"
import fs from "node:fs"
import net from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { Miniflare } from "miniflare"
import { Inspector } from "./inspector.mjs"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const bench = path.join(root, "bench")
const wrangler = path.join(root, "node_modules", ".bin", "wrangler")
const COMPATIBILITY_DATE = "2026-03-01"
const PEER_VERSION = "0.21.0"

// ---------------------------------------------------------------------------------------------
// Options

const argv = process.argv.slice(2)
const flag = (name) => argv.includes(name)
const option = (name) => {
  const at = argv.indexOf(name)
  return at === -1 ? undefined : argv[at + 1]
}
const smoke = flag("--smoke")
const only = option("--only")?.split(",")
const wanted = (scenario) => only === undefined || only.includes(scenario)

const settings = smoke
  ? {
    reps: 1,
    b1: { n: 200, batch: 100 },
    b3: { rounds: 1, alarms: 8, leadMs: 300, spreadMs: 400, loadBatch: 5, loadEveryMs: 50 },
    b4: { backlog: 1_000, chunk: 500 },
    b5: { small: 100, large: 1_000, n: 100, batch: 100, reps: 1 }
  }
  : {
    reps: 3,
    b1: { n: 10_000, batch: 100 },
    b3: { rounds: 3, alarms: 64, leadMs: 500, spreadMs: 2_000, loadBatch: 10, loadEveryMs: 25 },
    b4: { backlog: 100_000, chunk: 500 },
    b5: { small: 1_000, large: 100_000, n: 1_000, batch: 100, reps: 3 }
  }
if (option("--reps") !== undefined) settings.reps = Number(option("--reps"))
const outFile = option("--out") ?? path.join(bench, "results", smoke ? "smoke.json" : "latest.json")

const log = (...parts) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}]`, ...parts)

// ---------------------------------------------------------------------------------------------
// The peer's own package, and the bundles

const ensurePeer = () => {
  const peer = path.join(bench, "peer")
  const installed = path.join(peer, "node_modules", "agents", "package.json")
  const lock = path.join(peer, "node_modules", ".package-lock.json")
  const fresh = fs.existsSync(installed) &&
    JSON.parse(fs.readFileSync(installed, "utf8")).version === PEER_VERSION &&
    fs.existsSync(lock) &&
    fs.statSync(lock).mtimeMs >= fs.statSync(path.join(peer, "package-lock.json")).mtimeMs
  if (fresh) return
  log("installing the peer's package (bench/peer: npm ci)")
  // --ignore-scripts: its only install scripts are an esbuild self-check and a core-js banner.
  execFileSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: peer,
    stdio: ["ignore", "inherit", "inherit"]
  })
}

const buildDir = fs.mkdtempSync(path.join(os.tmpdir(), "durability-bench-"))

/** `wrangler deploy --dry-run` of one config: the bundle's path and wrangler's size line. */
const bundle = (config, name) => {
  const outdir = path.join(buildDir, name)
  const output = execFileSync(wrangler, ["deploy", "--dry-run", "--outdir", outdir, "--config", config], {
    cwd: root,
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1", FORCE_COLOR: "0" },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  })
  const size = /Total Upload:\s*([\d.]+)\s*KiB\s*\/\s*gzip:\s*([\d.]+)\s*KiB/.exec(output)
  if (size === null) throw new Error(`wrangler printed no bundle size for ${config}:\n${output}`)
  const main = fs.readdirSync(outdir).find((file) => file.endsWith(".js"))
  return { file: path.join(outdir, main), outdir, kib: Number(size[1]), gzipKib: Number(size[2]) }
}

// ---------------------------------------------------------------------------------------------
// Statistics and classification

const median = (values) => {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
const percentile = (values, p) => {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}
const round = (value, digits = 2) => value === null || value === undefined ? null : Number(value.toFixed(digits))

/** Which step of an operation's life each statement belongs to (by its text), per implementation. */
const PHASES = {
  library: [
    ["registration", /^INSERT INTO durability_calls|^SELECT operation FROM durability_calls WHERE id/],
    ["execution", /^SELECT \* FROM durability_calls WHERE id = \?|SET attempt = attempt \+ 1|next_attempt_at <= \?/],
    ["settlement", /SET status = 'completed'|SET status = \?, next_attempt_at|SET status = 'failed'/]
  ],
  peer: [
    ["registration", /^INSERT OR REPLACE INTO cf_agents_schedules/],
    ["execution", /^SELECT \* FROM cf_agents_schedules WHERE time <= \?/],
    ["settlement", /^DELETE FROM cf_agents_schedules WHERE id = \?/]
  ],
  floor: [
    ["registration", /^INSERT INTO floor_work/],
    ["execution", /^SELECT id, kind, due FROM floor_work|SET status = 1/],
    ["settlement", /SET status = 2|^DELETE FROM floor_work/]
  ]
}

/** B2: statements and rows written per completed operation, by phase ("upkeep": alarm and timer reads). */
const perOperation = (impl, counts, completed) => {
  const phases = { registration: { statements: 0, rowsWritten: 0 } }
  for (const [phase] of PHASES[impl]) phases[phase] = { statements: 0, rowsWritten: 0 }
  phases.upkeep = { statements: 0, rowsWritten: 0 }
  const statements = []
  for (const [query, { n, rowsWritten }] of Object.entries(counts.statements)) {
    const phase = PHASES[impl].find(([, pattern]) => pattern.test(query))?.[0] ?? "upkeep"
    phases[phase].statements += n
    phases[phase].rowsWritten += rowsWritten
    statements.push({ phase, perOp: round(n / completed, 3), rowsPerOp: round(rowsWritten / completed, 3), sql: query })
  }
  const total = Object.values(phases).reduce(
    (sum, p) => ({ statements: sum.statements + p.statements, rowsWritten: sum.rowsWritten + p.rowsWritten }),
    { statements: 0, rowsWritten: 0 }
  )
  const per = (value) => round(value / completed, 3)
  return {
    completed,
    statementsPerOp: per(total.statements),
    rowsWrittenPerOp: per(total.rowsWritten),
    phases: Object.fromEntries(
      Object.entries(phases).map(([name, p]) => [name, { statements: per(p.statements), rowsWritten: per(p.rowsWritten) }])
    ),
    alarmWritesPerOp: per(counts.setAlarm + counts.deleteAlarm),
    transactionsPerOp: per(counts.transactions),
    statements: statements.sort((a, b) => b.perOp - a.perOp)
  }
}

// ---------------------------------------------------------------------------------------------
// workerd

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const IMPLEMENTATIONS = ["library", "peer", "floor"]

const workerOptions = (name, built, bindings, flags = []) => ({
  name,
  modulesRoot: built.outdir,
  modules: [{ type: "ESModule", path: built.file, contents: fs.readFileSync(built.file, "utf8") }],
  compatibilityDate: COMPATIBILITY_DATE,
  compatibilityFlags: flags,
  durableObjects: Object.fromEntries(bindings.map(([binding, className]) => [binding, { className, useSQLite: true }]))
})

// ---------------------------------------------------------------------------------------------
// Main

const started = new Date()
const results = {
  command: `npm run bench${smoke ? " -- --smoke" : ""}${argv.filter((a) => a !== "--smoke").length ? ` ${argv.filter((a) => a !== "--smoke").join(" ")}` : ""}`,
  date: started.toISOString(),
  smoke,
  settings,
  machine: {
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? null,
    memoryGiB: round(os.totalmem() / 2 ** 30, 1),
    loadAverage: os.loadavg().map((v) => round(v, 2))
  },
  versions: {},
  scenarios: {}
}

ensurePeer()
results.versions = {
  miniflare: JSON.parse(fs.readFileSync(path.join(root, "node_modules/miniflare/package.json"), "utf8")).version,
  workerd: JSON.parse(fs.readFileSync(path.join(root, "node_modules/workerd/package.json"), "utf8")).version,
  wrangler: JSON.parse(fs.readFileSync(path.join(root, "node_modules/wrangler/package.json"), "utf8")).version,
  agents: JSON.parse(fs.readFileSync(path.join(bench, "peer/node_modules/agents/package.json"), "utf8")).version,
  effect: JSON.parse(fs.readFileSync(path.join(root, "node_modules/effect/package.json"), "utf8")).version
}

log("bundling (wrangler deploy --dry-run)")
const built = {
  library: bundle(path.join(bench, "workers/lib.wrangler.toml"), "library"),
  peer: bundle(path.join(bench, "peer/wrangler.toml"), "peer"),
  floor: bundle(path.join(bench, "workers/floor.wrangler.toml"), "floor")
}

if (wanted("B6")) {
  const baseline = bundle(path.join(bench, "bundle/baseline.wrangler.toml"), "b6-baseline")
  const library = bundle(path.join(bench, "bundle/lib-min.wrangler.toml"), "b6-library")
  const peer = bundle(path.join(bench, "peer/min.wrangler.toml"), "b6-peer")
  results.scenarios.B6 = {
    baseline: { kib: baseline.kib, gzipKib: baseline.gzipKib },
    library: { kib: library.kib, gzipKib: library.gzipKib, shareGzipKib: round(library.gzipKib - baseline.gzipKib) },
    peer: { kib: peer.kib, gzipKib: peer.gzipKib, shareGzipKib: round(peer.gzipKib - baseline.gzipKib) }
  }
}

const inspectorPort = await freePort()
const persist = fs.mkdtempSync(path.join(os.tmpdir(), "durability-bench-state-"))
const workerdLog = fs.createWriteStream(path.join(buildDir, "workerd.log"))
const mf = new Miniflare({
  inspectorPort,
  durableObjectsPersist: persist,
  handleRuntimeStdio(stdout, stderr) {
    stdout.pipe(workerdLog)
    stderr.pipe(workerdLog)
  },
  workers: [
    workerOptions("library", built.library, [["TARGET", "LibBench"], ["TARGET_LIVE", "LibBenchLive"]]),
    workerOptions("peer", built.peer, [["TARGET", "PeerBench"]], ["nodejs_compat"]),
    workerOptions("floor", built.floor, [["TARGET", "FloorBench"], ["TARGET_SCHEMA", "FloorSchemaBench"]])
  ]
})

let failed = false
try {
  await mf.ready
  const fetchers = {}
  for (const impl of IMPLEMENTATIONS) fetchers[impl] = await mf.getWorker(impl)
  let runs = 0
  const call = async (impl, scenario, params) => {
    const response = await fetchers[impl].fetch(`http://bench/${scenario}`, {
      method: "POST",
      body: JSON.stringify(params)
    })
    const body = await response.json()
    if (body.error !== undefined) throw new Error(`${impl} ${scenario}: ${body.error}`)
    return body
  }
  const fresh = (impl, label) => `${label}-${impl}-${++runs}`
  /** The implementations in a rotating order, so none always goes first. */
  const order = (rep) => IMPLEMENTATIONS.map((_, i) => IMPLEMENTATIONS[(i + rep) % IMPLEMENTATIONS.length])

  // Warm each isolate (bundle evaluated, SQLite file open, code paths compiled).
  for (const impl of IMPLEMENTATIONS) await call(impl, "drain", { name: fresh(impl, "warm"), n: 200, batch: 100 })
  // ... and the named-alarm path B3 measures (its first use is much slower than the rest).
  if (wanted("B3")) {
    for (const [impl, binding] of [["library", "TARGET"], ["library", "TARGET_LIVE"], ["peer", "TARGET"], ["floor", "TARGET"]]) {
      await call(impl, "latency", {
        name: fresh(impl, "warm"),
        binding,
        rounds: 1,
        alarms: 8,
        leadMs: 100,
        spreadMs: 200,
        loadBatch: 2,
        loadEveryMs: 50
      })
    }
  }

  if (wanted("B4") || wanted("B5")) {
    // B4 first, on isolates that hold only the warm-up objects.
    const inspectors = {}
    for (const impl of IMPLEMENTATIONS) inspectors[impl] = await Inspector.connect(inspectorPort, impl)
    const b4 = {}
    const large = {}
    for (const impl of order(0)) {
      const name = fresh(impl, "backlog")
      large[impl] = name
      await call(impl, "drain", { name, n: 10, batch: 10 })
      const before = await inspectors[impl].heapUsed()
      const t0 = Date.now()
      for (let start = 0; start < settings.b4.backlog; start += 5_000) {
        await call(impl, "seed", { name, start, count: Math.min(5_000, settings.b4.backlog - start), chunk: settings.b4.chunk })
      }
      let pending = 0
      for (let tries = 0; tries < 10 && pending < settings.b4.backlog; tries++) {
        pending = (await call(impl, "seeded", { name, count: settings.b4.backlog, timeoutMs: 120_000 })).pending
      }
      const seedMs = Date.now() - t0
      const after = await inspectors[impl].heapUsed()
      b4[impl] = {
        backlog: settings.b4.backlog,
        pending,
        seedMs,
        heapBeforeMB: round(before / 2 ** 20),
        heapAfterMB: round(after / 2 ** 20),
        growthMB: round((after - before) / 2 ** 20)
      }
      log(`B4 ${impl}: ${pending} pending, heap ${b4[impl].heapBeforeMB} -> ${b4[impl].heapAfterMB} MB (seeded in ${seedMs} ms)`)
    }
    for (const inspector of Object.values(inspectors)) inspector.close()
    results.scenarios.B4 = b4

    if (wanted("B5")) {
      const small = {}
      for (const impl of order(1)) {
        const name = fresh(impl, "small-backlog")
        small[impl] = name
        await call(impl, "seed", { name, start: 0, count: settings.b5.small, chunk: settings.b4.chunk })
        await call(impl, "seeded", { name, count: settings.b5.small, timeoutMs: 120_000 })
      }
      const samples = Object.fromEntries(IMPLEMENTATIONS.map((impl) => [impl, { small: [], large: [] }]))
      for (let rep = 0; rep < settings.b5.reps; rep++) {
        for (const impl of order(rep)) {
          for (const size of rep % 2 === 0 ? ["small", "large"] : ["large", "small"]) {
            const name = size === "small" ? small[impl] : large[impl]
            const run = await call(impl, "drain", {
              name,
              start: 10_000_000 * (rep + 1),
              n: settings.b5.n,
              batch: settings.b5.batch
            })
            samples[impl][size].push(run.totalMs / run.n)
          }
        }
      }
      results.scenarios.B5 = Object.fromEntries(IMPLEMENTATIONS.map((impl) => {
        const s = median(samples[impl].small)
        const l = median(samples[impl].large)
        return [impl, {
          pendingSmall: settings.b5.small,
          pendingLarge: settings.b5.large,
          msPerOpSmall: round(s, 4),
          msPerOpLarge: round(l, 4),
          ratio: round(l / s, 3),
          samples: samples[impl]
        }]
      }))
      log("B5", JSON.stringify(Object.fromEntries(IMPLEMENTATIONS.map((i) => [i, results.scenarios.B5[i].ratio]))))
    }
  }

  if (wanted("B1") || wanted("B2")) {
    const runsBy = Object.fromEntries(IMPLEMENTATIONS.map((impl) => [impl, []]))
    const batchRuns = []
    const schemaFloorRuns = []
    // --profile: a CPU profile of each isolate during its first B1 run (open it in Chrome DevTools).
    const profiler = async (impl, rep, label = impl) => {
      if (!flag("--profile") || rep !== 0) return undefined
      const inspector = await Inspector.connect(inspectorPort, impl)
      await inspector.send("Profiler.enable")
      await inspector.send("Profiler.start")
      return async () => {
        const { profile } = await inspector.send("Profiler.stop")
        const file = path.join(bench, "results", `${label}.cpuprofile`)
        fs.writeFileSync(file, JSON.stringify(profile))
        inspector.close()
        log(`CPU profile: ${path.relative(root, file)}`)
      }
    }
    for (let rep = 0; rep < settings.reps; rep++) {
      for (const impl of order(rep)) {
        const stop = await profiler(impl, rep)
        const run = await call(impl, "drain", { name: fresh(impl, "b1"), ...settings.b1 })
        await stop?.()
        if (run.done < run.n) throw new Error(`${impl} B1 drained ${run.done} of ${run.n}`)
        runsBy[impl].push(run)
        log(`B1 ${impl} rep ${rep + 1}: ${run.totalMs} ms (${round(run.n / (run.totalMs / 1000), 0)} ops/s)`)
      }
      // The library again through its batch API (`durability.op.many`, one transaction per RPC batch).
      const stopBatch = await profiler("library", rep, "library-batch")
      const batched = await call("library", "drain", { name: fresh("library", "b1-batch"), ...settings.b1, api: "batch" })
      await stopBatch?.()
      if (batched.done < batched.n) throw new Error(`library (batch API) B1 drained ${batched.done} of ${batched.n}`)
      batchRuns.push(batched)
      log(`B1 library, batch API, rep ${rep + 1}: ${batched.totalMs} ms (${round(batched.n / (batched.totalMs / 1000), 0)} ops/s)`)
      // The floor again, on the library's schema with the library's statements (what SQL alone costs).
      const schemaFloor = await call("floor", "drain", { name: fresh("floor", "b1-schema"), binding: "TARGET_SCHEMA", ...settings.b1 })
      if (schemaFloor.done < schemaFloor.n) throw new Error(`floor (library's schema) B1 drained ${schemaFloor.done} of ${schemaFloor.n}`)
      schemaFloorRuns.push(schemaFloor)
      log(`B1 floor on the library's schema, rep ${rep + 1}: ${schemaFloor.totalMs} ms`)
    }
    results.scenarios.B1 = Object.fromEntries(IMPLEMENTATIONS.map((impl) => {
      const totals = runsBy[impl].map((run) => run.totalMs)
      const ms = median(totals)
      return [impl, {
        n: settings.b1.n,
        batch: settings.b1.batch,
        totalMs: ms,
        opsPerSec: round(settings.b1.n / (ms / 1000), 0),
        registerMs: median(runsBy[impl].map((run) => run.registerMs)),
        drainAfterRegisterMs: median(runsBy[impl].map((run) => run.drainAfterRegisterMs)),
        runsMs: totals
      }]
    }))
    {
      const totals = batchRuns.map((run) => run.totalMs)
      const ms = median(totals)
      results.scenarios.B1.libraryBatch = {
        n: settings.b1.n,
        batch: settings.b1.batch,
        totalMs: ms,
        opsPerSec: round(settings.b1.n / (ms / 1000), 0),
        registerMs: median(batchRuns.map((run) => run.registerMs)),
        drainAfterRegisterMs: median(batchRuns.map((run) => run.drainAfterRegisterMs)),
        statementsPerOp: round(perOperation("library", batchRuns[0].counts, batchRuns[0].n).statementsPerOp, 2),
        runsMs: totals
      }
      const schemaTotals = schemaFloorRuns.map((run) => run.totalMs)
      results.scenarios.B1.floorSchema = { n: settings.b1.n, totalMs: median(schemaTotals), runsMs: schemaTotals }
    }
    const b2 = Object.fromEntries(IMPLEMENTATIONS.map((impl) => {
      const all = runsBy[impl].map((run) => perOperation(impl, run.counts, run.n))
      const first = all[0]
      return [impl, {
        ...first,
        statementsPerOpAcrossRuns: all.map((r) => r.statementsPerOp)
      }]
    }))
    results.scenarios.B2 = b2
  }

  if (wanted("B3")) {
    const variants = [
      ["library", "TARGET", "library (liveTimers off)"],
      ["library", "TARGET_LIVE", "library (liveTimers on)"],
      ["peer", "TARGET", "peer"],
      ["floor", "TARGET", "floor"]
    ]
    const b3 = {}
    for (let i = 0; i < variants.length; i++) {
      const [impl, binding, label] = variants[(i + 1) % variants.length]
      const run = await call(impl, "latency", { name: fresh(impl, "b3"), binding, ...settings.b3 })
      const lateness = run.samples.map((s) => s.startedAt - s.scheduledAt)
      const error = lateness.map(Math.abs)
      b3[label] = {
        samples: lateness.length,
        expected: settings.b3.rounds * settings.b3.alarms,
        p50Ms: percentile(error, 50),
        p99Ms: percentile(error, 99),
        maxMs: Math.max(...error),
        early: lateness.filter((ms) => ms < 0).length,
        scheduledLate: run.scheduledLate,
        leadMs: run.leadMs,
        scheduleRoundMs: run.scheduleMs,
        backgroundOps: run.loaded
      }
      log(`B3 ${label}: p50 ${b3[label].p50Ms} ms, p99 ${b3[label].p99Ms} ms, ${b3[label].early} early`)
    }
    results.scenarios.B3 = b3
  }
} catch (error) {
  failed = true
  console.error(error)
} finally {
  await mf.dispose().catch(() => undefined)
  fs.rmSync(persist, { recursive: true, force: true })
}

// ---------------------------------------------------------------------------------------------
// Report

const goals = []
const s = results.scenarios
const fmt = (value, digits = 1) => value === null || value === undefined ? "-" : typeof value === "number" ? value.toFixed(digits) : String(value)
const rows = []
const row = (scenario, metric, library, peer, floor, ratio, goal, met) =>
  rows.push({ scenario, metric, library, peer, floor, ratio, goal, met: met === undefined ? "" : met ? "yes" : "NO" })

if (s.B1) {
  const lib = s.B1.library, peer = s.B1.peer, floor = s.B1.floor
  const vsPeer = lib.opsPerSec / peer.opsPerSec
  const vsFloor = lib.totalMs / floor.totalMs
  row("B1", `ops/s, ${lib.n} ops in RPC batches of ${lib.batch}`, fmt(lib.opsPerSec, 0), fmt(peer.opsPerSec, 0), fmt(floor.opsPerSec, 0), `${fmt(vsPeer, 2)}x peer`, ">= 2x peer", vsPeer >= 2)
  row("B1", "end-to-end ms (median)", fmt(lib.totalMs, 0), fmt(peer.totalMs, 0), fmt(floor.totalMs, 0), `${fmt(vsFloor, 2)}x floor time`, "<= 3x floor", vsFloor <= 3)
  goals.push({ goal: "B1 >= 2x peer", value: round(vsPeer, 2), met: vsPeer >= 2 }, { goal: "B1 <= 3x floor time", value: round(vsFloor, 2), met: vsFloor <= 3 })
  const batched = s.B1.libraryBatch
  if (batched !== undefined) {
    const batchVsFloor = batched.totalMs / floor.totalMs
    row("B1", "end-to-end ms, library's batch API (median)", fmt(batched.totalMs, 0), "-", fmt(floor.totalMs, 0), `${fmt(batchVsFloor, 2)}x floor time`, "<= 1.5x floor", batchVsFloor <= 1.5)
    goals.push({ goal: "B1 batch API <= 1.5x floor time", value: round(batchVsFloor, 2), met: batchVsFloor <= 1.5 })
  }
  const schema = s.B1.floorSchema
  if (schema !== undefined) {
    row("B1", "end-to-end ms, floor on the library's schema and statements", "-", "-", fmt(schema.totalMs, 0), `${fmt(schema.totalMs / floor.totalMs, 2)}x floor time`, "", undefined)
  }
}
if (s.B2) {
  const b = s.B2
  for (const phase of ["registration", "execution", "settlement", "upkeep"]) {
    row("B2", `statements/op: ${phase}`, fmt(b.library.phases[phase].statements, 2), fmt(b.peer.phases[phase].statements, 2), fmt(b.floor.phases[phase].statements, 2), "", "", undefined)
  }
  row("B2", "statements/op amortized", fmt(b.library.statementsPerOp, 2), fmt(b.peer.statementsPerOp, 2), fmt(b.floor.statementsPerOp, 2), `${fmt(b.library.statementsPerOp / b.floor.statementsPerOp, 2)}x floor`, "<= 4", b.library.statementsPerOp <= 4)
  row("B2", "rows written/op (workerd count)", fmt(b.library.rowsWrittenPerOp, 2), fmt(b.peer.rowsWrittenPerOp, 2), fmt(b.floor.rowsWrittenPerOp, 2), "", "", undefined)
  row("B2", "alarm writes/op", fmt(b.library.alarmWritesPerOp, 3), fmt(b.peer.alarmWritesPerOp, 3), fmt(b.floor.alarmWritesPerOp, 3), "", "", undefined)
  goals.push({ goal: "B2 <= 4 statements/op", value: b.library.statementsPerOp, met: b.library.statementsPerOp <= 4 })
}
if (s.B3) {
  const off = s.B3["library (liveTimers off)"], on = s.B3["library (liveTimers on)"], peer = s.B3.peer, floor = s.B3.floor
  row("B3", "due->start p50 ms, liveTimers off", fmt(off.p50Ms, 0), fmt(peer.p50Ms, 0), fmt(floor.p50Ms, 0), "", "", undefined)
  row("B3", "due->start p99 ms, liveTimers off", fmt(off.p99Ms, 0), fmt(peer.p99Ms, 0), fmt(floor.p99Ms, 0), "", "", undefined)
  row("B3", "due->start p50 ms, liveTimers on", fmt(on.p50Ms, 0), fmt(peer.p50Ms, 0), fmt(floor.p50Ms, 0), "", "", undefined)
  row("B3", "due->start p99 ms, liveTimers on", fmt(on.p99Ms, 0), fmt(peer.p99Ms, 0), fmt(floor.p99Ms, 0), "", "<= 5 ms", on.p99Ms <= 5)
  row("B3", "fired early (of samples)", `${off.early + on.early}/${off.samples + on.samples}`, `${peer.early}/${peer.samples}`, `${floor.early}/${floor.samples}`, "", "", undefined)
  goals.push({ goal: "B3 p99 <= 5 ms (liveTimers)", value: on.p99Ms, met: on.p99Ms <= 5 })
}
if (s.B4) {
  const b = s.B4
  row("B4", `heap growth MB, ${b.library.backlog} pending`, fmt(b.library.growthMB, 2), fmt(b.peer.growthMB, 2), fmt(b.floor.growthMB, 2), "", "<= 5 MB", b.library.growthMB <= 5)
  goals.push({ goal: "B4 growth <= 5 MB", value: b.library.growthMB, met: b.library.growthMB <= 5 })
}
if (s.B5) {
  const b = s.B5
  row("B5", `ms/op with ${b.library.pendingSmall} pending`, fmt(b.library.msPerOpSmall, 3), fmt(b.peer.msPerOpSmall, 3), fmt(b.floor.msPerOpSmall, 3), "", "", undefined)
  row("B5", `ms/op with ${b.library.pendingLarge} pending`, fmt(b.library.msPerOpLarge, 3), fmt(b.peer.msPerOpLarge, 3), fmt(b.floor.msPerOpLarge, 3), "", "", undefined)
  row("B5", "ratio large/small", fmt(b.library.ratio, 2), fmt(b.peer.ratio, 2), fmt(b.floor.ratio, 2), "", "<= 1.2", b.library.ratio <= 1.2)
  goals.push({ goal: "B5 ratio <= 1.2", value: b.library.ratio, met: b.library.ratio <= 1.2 })
}
if (s.B6) {
  const b = s.B6
  row("B6", "minimal worker, KiB gzip", fmt(b.library.gzipKib, 1), fmt(b.peer.gzipKib, 1), fmt(b.baseline.gzipKib, 2), "floor col = no library", "", undefined)
  row("B6", "library share, KiB gzip", fmt(b.library.shareGzipKib, 1), fmt(b.peer.shareGzipKib, 1), "0", `${fmt(b.library.shareGzipKib / b.peer.shareGzipKib, 2)}x peer`, "<= 150 KiB", b.library.shareGzipKib <= 150)
  goals.push({ goal: "B6 share <= 150 KiB gz", value: b.library.shareGzipKib, met: b.library.shareGzipKib <= 150 })
}
results.goals = goals
results.failed = failed

const headers = ["scenario", "metric", "library", "peer", "floor", "ratio", "goal", "met"]
const widths = headers.map((h) => Math.max(h.length, ...rows.map((r) => String(r[h]).length)))
const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(" | ")} |`
const table = [line(headers), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map((r) => line(headers.map((h) => r[h])))]
results.table = table.join("\n")

fs.mkdirSync(path.dirname(outFile), { recursive: true })
fs.writeFileSync(outFile, `${JSON.stringify(results, null, 2)}\n`)
console.log(`\ndurability bench — ${results.date} — ${results.command}${smoke ? " (smoke: tiny N, figures mean nothing)" : ""}`)
console.log(`machine: ${os.cpus().length} cores, Node ${process.version}, workerd ${results.versions.workerd}, agents ${results.versions.agents}, load ${results.machine.loadAverage.join(" ")}\n`)
console.log(results.table)
console.log(`\nwritten to ${path.relative(root, outFile)}`)
if (failed) {
  const lines = fs.existsSync(path.join(buildDir, "workerd.log")) ? fs.readFileSync(path.join(buildDir, "workerd.log"), "utf8").split("\n") : []
  console.error(`workerd output (last lines of ${path.join(buildDir, "workerd.log")}):\n${lines.slice(-40).join("\n")}`)
} else {
  fs.rmSync(buildDir, { recursive: true, force: true })
}
if (failed || rows.length === 0) process.exit(1)
