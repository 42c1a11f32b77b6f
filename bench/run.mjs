#!/usr/bin/env node
/**
 * `npm run bench`: this library, the Agents SDK scheduler (the peer) and a raw-SQL floor, side by
 * side in one real workerd (Miniflare, local, no account), scenario by scenario in alternation
 * (B1–B6); then the job queues (J1–J4, J8, J9: this library's `DurabilityJobs` in the same workerd, BullMQ and
 * pg-boss from bench/jobs-peer as a child process, on their own local servers); then jobs beyond one
 * object (J5–J7: the Cloudflare Queues path through a local Miniflare queue, the router's overhead
 * over 16 objects, the reclaim of expired leases; the library alone); then what the inspector costs
 * (I1: `DurabilityInspector.handler` over HTTP and the object's `inspect` RPC, objects of 1 000 to
 * 100 000 settled jobs, then paused queues of 100 000 and 200 000 waiting ones with a detail read timed
 * while clients poll the overview); then workflows (W1–W3: Cloudflare Workflows run locally by Miniflare
 * in the same workerd, the peer, beside this library's `DurabilityWorkflows` in one object; W4: the
 * library alone, 100 000 sleeping instances in one object).
 * Prints a table and writes bench/results/latest.json (`--smoke`: tiny N, bench/results/smoke.json,
 * for CI: it checks that everything runs and asserts no timing; `--only` with J scenarios alone:
 * bench/results/jobs.json, or bench/results/jobs-external.json with J5–J7 alone, or
 * bench/results/inspector.json with I1 alone, or bench/results/workflows.json with W scenarios alone).
 *
 *   node bench/run.mjs [--smoke] [--reps N] [--only B1,B3,J1,J5,I1,W1] [--out FILE] [--profile] [--no-jobs-peer]
 *
 * Every implementation is bundled by `wrangler deploy --dry-run` (the peer from its own package in
 * bench/peer, installed here with `npm ci` when missing) and runs in its own worker, so each has its
 * own isolate (B4 reads that isolate's heap through workerd's inspector).
 */
import { execFileSync, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import fs from "node:fs"
import net from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { Miniflare } from "miniflare"
import { Inspector } from "./inspector.mjs"
import { breakdown, describe } from "./profileBreakdown.mjs"

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
const only = option("--only")?.split(",").map((name) => name.trim().toUpperCase())
const wanted = (scenario) => only === undefined || only.includes(scenario)
const wantB = ["B1", "B2", "B3", "B4", "B5", "B6"].some(wanted)
const wantJ = ["J1", "J2", "J3", "J4", "J8", "J9", "JB"].some(wanted)
// Jobs beyond one object (issue 15): Queues transport, router, lease reclaim; their own worker.
const wantX = ["J5", "J6", "J7"].some(wanted)
// The inspector's cost (issue 16): its own worker.
const wantI = wanted("I1")
// Workflows (W1–W4): the peer (Cloudflare Workflows, local) and the library, each its own worker.
const wantW = ["W1", "W2", "W3", "W4"].some(wanted)
// The retained log (L1): the library and its raw-SQL floor, one worker.
const wantL = wanted("L1")
// Fanout (issue 30): deliveries/s to 4 targets beside a raw-SQL floor; its own worker.
const wantF = wanted("F1")

const settings = smoke
  ? {
    reps: 1,
    l1: { n: 200, batch: 100, page: 100 },
    b1: { n: 200, batch: 100 },
    b3: { rounds: 1, alarms: 8, leadMs: 300, spreadMs: 400, loadBatch: 5, loadEveryMs: 50 },
    b4: { backlog: 1_000, chunk: 500 },
    b5: { small: 100, large: 1_000, n: 100, batch: 100, reps: 1 },
    j1: { n: 200, batch: 100 },
    j8: { n: 100, batch: 50 },
    jb: { n: 1_000, batch: 500, limit: 500 },
    j9: { n: 100, batch: 50 },
    j2: { runMs: 1_000, windowsMs: [1_000], queued: { j2: 40, j2fast: 80 }, keys: { each: 10, keys: 9 } },
    j3: { jobs: 8, leadMs: 300, spreadMs: 400, seed: 0x5eed, loadBatch: 5, loadEveryMs: 100 },
    // BullMQ's J1 checks the child-process path; pg-boss's PostgreSQL start (initdb) alone takes seconds.
    jobsPeer: { n: 200, only: ["J1"], peers: ["bullmq"] },
    j5: { n: 50, batch: 25, everyMs: 10 },
    j6: { n: 200, batch: 100, shards: 16 },
    // The probe gives up 2 s after the last lease end (a late reclaim shows as "not leasable again").
    j7: { groups: 2, perGroup: 5, everyMs: 37, timeoutMs: 2_000 },
    i1: { sizes: [200], sparse: [200], pollers: 4, seedCall: 200, bulk: 100, requests: 5, warmup: 1, cold: 2, deepAt: 0.9 },
    w1: { n: 20, batch: 10 },
    w2: { n: 10, minMs: 200, maxMs: 400, batch: 10 },
    w3: { n: 5, batch: 5, settleMs: 100, spacingMs: 20 },
    w4: { small: 20, large: 200, seedCall: 100, batch: 50, probes: 2, probeMs: 200 },
    f1: { n: 100, batch: 50 }
  }
  : {
    reps: 3,
    // L1: n single-record appends (batch per request from here), then n records read back in pages of `page`.
    l1: { n: 10_000, batch: 1_000, page: 100 },
    b1: { n: 10_000, batch: 100 },
    b3: { rounds: 3, alarms: 64, leadMs: 500, spreadMs: 2_000, loadBatch: 10, loadEveryMs: 25 },
    b4: { backlog: 100_000, chunk: 500 },
    b5: { small: 1_000, large: 100_000, n: 1_000, batch: 100, reps: 3 },
    // As bench/jobs-peer/run.mjs's J1–J3 (same sizes, concurrency 10, seed and spread).
    j1: { n: 10_000, batch: 100 },
    j8: { n: 2_000, batch: 100 },
    // JB: a bulk cancel then a bulk remove of 10 000 waiting jobs, 500 per call (issue 29).
    jb: { n: 10_000, batch: 500, limit: 500 },
    // J9: J1's trivial jobs on a batched queue (batch.size 10, the scheduler's default permits) vs one by one.
    j9: { n: 2_000, batch: 100 },
    j2: { runMs: 5_000, windowsMs: [1_000, 2_000, 5_000], queued: { j2: 200, j2fast: 400 }, keys: { each: 40, keys: 9 } },
    j3: { jobs: 64, leadMs: 500, spreadMs: 2_000, seed: 0x5eed, loadBatch: 10, loadEveryMs: 100 },
    jobsPeer: { n: 10_000, only: ["J1", "J2", "J3"], peers: ["bullmq", "pgboss"] },
    // J5: the Queues path (local Miniflare queue, batches of up to 100, no batch wait).
    j5: { n: 2_000, batch: 100, everyMs: 10 },
    // J6: J1's workload (same n, bulks, concurrency 10 per object), one object vs 16 through the router.
    j6: { n: 10_000, batch: 100, shards: 16 },
    // J7: 20 leases of 10 jobs 37 ms apart (expiries spread over ~0.7 s), leaseMs 1 000, per round.
    // The probe gives up 20 s after the last lease end (past the 15 s physical-alarm floor, alarmMinDelayMs).
    j7: { groups: 20, perGroup: 10, everyMs: 37, timeoutMs: 20_000 },
    // I1: one object per size (one queue: 90 % completed, 10 % failed, half of those dead-lettered), seeded by
    // `addBulk`s of `bulk` per RPC of `seedCall` jobs; per request kind and path, `warmup` untimed then `requests`
    // timed one after another; `cold` fresh handlers; the deep pages start at `deepAt` of the jobs. Then the sparse
    // shape (issue 26): one object per `sparse` size whose paused queue holds that many waiting jobs, its overview
    // timed alone and a job detail timed alone and while `pollers` clients read the overview in a loop.
    i1: {
      sizes: [1_000, 10_000, 100_000],
      sparse: [100_000, 200_000],
      pollers: 4,
      seedCall: 10_000,
      bulk: 1_000,
      requests: 100,
      warmup: 3,
      cold: 10,
      deepAt: 0.9
    },
    // W1: n instances of 10 trivial steps, created in batches of 100 (createBatch's limit on Cloudflare), `reps` runs.
    w1: { n: 1_000, batch: 100 },
    // W2: per rep, n sleepers whose sleeps spread evenly over [minMs, maxMs] (local sleeps are real time), pooled.
    w2: { n: 100, minMs: 200, maxMs: 1_000, batch: 100 },
    // W3: per rep, n waiters parked; once all are (and settleMs more), one event each, spacingMs apart, pooled.
    w3: { n: 100, batch: 100, settleMs: 200, spacingMs: 20 },
    // W4 (library): one object with `small`, one with `large` sleepers of an hour (seeded `seedCall` per request,
    // `batch` per RPC); then, in each, `probes` sleepers of probeMs one after another.
    w4: { small: 1_000, large: 100_000, seedCall: 10_000, batch: 1_000, probes: 20, probeMs: 200 },
    // F1: n messages to 4 targets (4n deliveries), enqueued 100 per call.
    f1: { n: 5_000, batch: 100 }
  }
if (option("--reps") !== undefined) settings.reps = Number(option("--reps"))
// A run of job scenarios alone does not replace the B figures of latest.json.
const outFile = option("--out") ??
  path.join(bench, "results", smoke ? "smoke.json" : wantB ? "latest.json" : wantJ ? "jobs.json" : wantX ? "jobs-external.json" : wantI ? "inspector.json" : wantL ? "log.json" : "workflows.json")

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

/**
 * B6's worker as a user builds it: the README's quick start (the first `ts` block of "Use it in your
 * project", marked `<!-- quick-start ... -->`) as the worker's main, under the wrangler.toml the same section
 * shows (wrangler's defaults: no minify), with `durability` resolved to this repository's sources (an
 * `[alias]`, as the package's own entry points would be). Returns the config's path.
 */
const quickStartWorker = () => {
  const readme = fs.readFileSync(path.join(root, "README.md"), "utf8")
  const start = readme.indexOf("\n## Use it in your project\n")
  if (start === -1) throw new Error("B6: README.md has no \"## Use it in your project\" section (the quick start lives there)")
  const end = readme.indexOf("\n## ", start + 1)
  const section = readme.slice(start, end === -1 ? undefined : end)
  const fenced = (lang, from = 0) => {
    const match = new RegExp("^```" + lang + "\\n([\\s\\S]*?)^```$", "m").exec(section.slice(from))
    return match === null ? undefined : match[1]
  }
  const marker = section.indexOf("<!-- quick-start")
  const code = fenced("ts", marker === -1 ? 0 : marker)
  const toml = fenced("toml")
  if (code === undefined || !/from "durability"/.test(code)) {
    throw new Error("B6: no quick start (a ```ts block importing \"durability\") in README.md's \"Use it in your project\"")
  }
  if (toml === undefined || !/^main = /m.test(toml)) {
    throw new Error("B6: no wrangler.toml (a ```toml block with main) in README.md's \"Use it in your project\"")
  }
  const dir = path.join(buildDir, "b6-quick-start-src")
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "index.ts"), code)
  const src = (file) => JSON.stringify(path.join(root, "src", file))
  fs.writeFileSync(
    path.join(dir, "wrangler.toml"),
    toml.replace(/^main = .*$/m, 'main = "index.ts"') +
      `\n[alias]\n"durability" = ${src("index.ts")}\n"durability/effect" = ${src("effect.ts")}\n` +
      `"durability/inspector" = ${src("inspector.ts")}\n"durability/utils" = ${src("utils.ts")}\n`
  )
  return path.join(dir, "wrangler.toml")
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

/** J4: which part of a job's life each statement of the jobs object belongs to (by its text). */
const JOB_KINDS = [
  // `counts()`, which J1 calls once every handler returned to see the last completions: not the jobs' own.
  ["probe", /GROUP BY status, later|^SELECT next_attempt_at FROM durability_jobs WHERE status = 'pending' AND key IN/],
  ["insert", /^INSERT INTO durability_jobs /],
  ["claim", /^UPDATE durability_jobs SET attempt = attempt \+ 1/],
  ["complete", /^UPDATE durability_jobs SET status = CASE WHEN cancel_requested = 1 THEN 'canceled' ELSE 'completed' END/],
  ["read", /^SELECT /]
]

/** J4: statements, rows written and transactions per completed job, by kind ("other": the rest). */
const perJob = (counts, completed) => {
  const kinds = Object.fromEntries([...JOB_KINDS.map(([kind]) => kind), "other"].map((kind) => [kind, { statements: 0, rowsWritten: 0 }]))
  const statements = []
  for (const [query, { n, rowsWritten }] of Object.entries(counts.statements)) {
    const kind = JOB_KINDS.find(([, pattern]) => pattern.test(query))?.[0] ?? "other"
    kinds[kind].statements += n
    kinds[kind].rowsWritten += rowsWritten
    statements.push({ kind, n, perJob: round(n / completed, 3), rowsPerJob: round(rowsWritten / completed, 3), sql: query })
  }
  const per = (value) => round(value / completed, 3)
  const own = Object.entries(kinds).filter(([kind]) => kind !== "probe").map(([, k]) => k)
  return {
    completed,
    statementsPerJob: per(own.reduce((sum, k) => sum + k.statements, 0)),
    rowsWrittenPerJob: per(own.reduce((sum, k) => sum + k.rowsWritten, 0)),
    kinds: Object.fromEntries(Object.entries(kinds).map(([kind, k]) => [kind, { statements: per(k.statements), rowsWritten: per(k.rowsWritten), n: k.statements }])),
    transactionsPerJob: per(counts.transactions),
    alarmWritesPerJob: per(counts.setAlarm + counts.deleteAlarm),
    statements: statements.sort((a, b) => b.n - a.n)
  }
}

/**
 * J2's figures from start times (the library's, and BullMQ's from the peer's raw start times, by
 * the same code): a token bucket of capacity C refilled at r per ms lets at most C + r*t jobs start
 * in any closed window [s, s + t], and a bucket kept saturated reaches it. "From first" opens at the
 * first start, "sliding" at every start. (bench/jobs-peer's own figures use half-open windows
 * [s, s + t), where a perfect bucket reaches C + r*t - 1: 19/20 in 1 s at 10 + 10/s.)
 */
const bucketFigures = (starts, { capacity, refillPerSecond }, { runMs, windowsMs }) => {
  const t0 = Math.min(...starts)
  const inRun = starts.filter((t) => t <= t0 + runMs).sort((a, b) => a - b)
  const perSecond = Array.from({ length: Math.ceil(runMs / 1_000) }, () => 0)
  for (const t of inRun) if (t < t0 + runMs) perSecond[Math.floor((t - t0) / 1_000)]++
  const busiest = (t) => {
    let most = 0
    for (let i = 0, j = 0; i < inRun.length; i++) {
      while (j < inRun.length && inRun[j] <= inRun[i] + t) j++
      most = Math.max(most, j - i)
    }
    return most
  }
  const windows = {}
  for (const t of windowsMs) {
    const bound = capacity + (refillPerSecond / 1_000) * t
    const sliding = busiest(t)
    const fromFirst = inRun.filter((start) => start <= t0 + t).length
    windows[t] = {
      bound,
      maxStartedSliding: sliding,
      ratioSliding: round(sliding / bound, 3),
      startedFromFirst: fromFirst,
      ratioFromFirst: round(fromFirst / bound, 3)
    }
  }
  const ratios = (field) => Object.values(windows).map((w) => w[field])
  return {
    started: inRun.length,
    perSecond,
    windows,
    worstRatio: Math.max(...ratios("ratioSliding")),
    minRatioFromFirst: Math.min(...ratios("ratioFromFirst")),
    maxRatioFromFirst: Math.max(...ratios("ratioFromFirst"))
  }
}

/** J3's figures from `{ due, started }` samples, as bench/jobs-peer/run.mjs computes the peers'. */
const latenessFigures = (samples) => {
  const lateness = samples.map((sample) => sample.started - sample.due)
  const error = lateness.map(Math.abs)
  return {
    jobs: lateness.length,
    p50: percentile(lateness, 50),
    p99: percentile(lateness, 99),
    max: Math.max(...lateness),
    min: Math.min(...lateness),
    early: lateness.filter((ms) => ms < 0).length,
    absP50: percentile(error, 50),
    absP99: percentile(error, 99),
    absMax: Math.max(...error)
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

/**
 * The workflow scenarios' implementations (W1–W4). Each is one worker answering the same scenario routes
 * (bench/workers/workflowsDriver.ts), so the same loop runs both through a driver: `driver(scenario, params)`.
 * `perRun`: whether each run gets its own object (`params.name`), the library's way; the peer's instances
 * are their own objects whatever the run.
 */
const WORKFLOW_IMPLEMENTATIONS = [
  {
    key: "peer",
    label: "Cloudflare Workflows (local)",
    worker: "workflowsPeer",
    scenarios: ["W1", "W2", "W3"],
    durableObjects: [],
    // As bench/workers/workflowsPeer.wrangler.toml: one workflow per binding, each its own engine service.
    workflows: {
      WF_TEN: { name: "bench-ten", className: "TenWorkflow" },
      WF_SLEEPER: { name: "bench-sleeper", className: "SleeperWorkflow" },
      WF_WAITER: { name: "bench-waiter", className: "WaiterWorkflow" }
    },
    perRun: false
  },
  // bench/workers/workflows.ts: `DurabilityWorkflows` in one object; its rows read "not built" when it does not bundle.
  // W4 is the library's alone.
  {
    key: "library",
    label: "library",
    worker: "workflows",
    scenarios: ["W1", "W2", "W3", "W4"],
    durableObjects: [["TARGET", "WorkflowsBench"], ["TARGET_LIVE", "WorkflowsBenchLive"]],
    perRun: true
  },
  // The same worker's object built with `liveTimers: true` (the issue's W2 goal is stated for it).
  {
    key: "libraryLive",
    label: "library, liveTimers",
    worker: "workflows",
    live: true,
    scenarios: ["W2", "W3"],
    durableObjects: [["TARGET", "WorkflowsBench"], ["TARGET_LIVE", "WorkflowsBenchLive"]],
    perRun: true
  }
]

/** One worker per workflow implementation's worker (two implementations may share one). */
const workflowWorkers = () => WORKFLOW_IMPLEMENTATIONS.filter((impl, i, all) => all.findIndex((other) => other.worker === impl.worker) === i)

/**
 * W1, the peer: what local Workflows persisted, read from its files after the runs (workerd's SQL statements in
 * Miniflare's engine objects cannot be counted from here: the engine is Miniflare's own worker). One SQLite file
 * per instance (its engine Durable Object) under workflowsPersist; rows per table in a sample of them, with the
 * sqlite3 CLI (read-only; the WAL is read along). Null figures, with the reason, when that cannot be read.
 */
const peerStorage = (workflowName, stepsPerInstance, sample = 20) => {
  const dir = path.join(persist, "workflows", `miniflare-workflows-${workflowName}`)
  try {
    const files = fs.readdirSync(dir).filter((file) => file.endsWith(".sqlite"))
    const tables = ["_cf_KV", "states", "priority_queue"]
    const rows = files.slice(0, sample).map((file) => {
      const out = execFileSync("sqlite3", ["-readonly", path.join(dir, file), tables.map((t) => `SELECT COUNT(*) FROM ${t};`).join(" ")], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"]
      })
      return Object.fromEntries(out.trim().split("\n").map((n, i) => [tables[i], Number(n)]))
    })
    const perInstance = Object.fromEntries(tables.map((t) => [t, median(rows.map((r) => r[t]))]))
    const total = tables.reduce((sum, t) => sum + perInstance[t], 0)
    return {
      observable: "rows persisted (on disk), not statements",
      instanceFiles: files.length,
      sampled: rows.length,
      rowsPerInstance: perInstance,
      rowsPerStep: round(total / stepsPerInstance, 2)
    }
  } catch (error) {
    return { observable: false, reason: String(error.message ?? error).split("\n")[0] }
  }
}

/**
 * W2, the peer: when each local engine actually started its sleep's timer. The engine records a sleep as a
 * `priority_queue` row (action 1, type 1) whose target is its `Date.now()` + the duration when it starts waiting,
 * and logs the duration (`states`, event 8: SLEEP_START). Read from the instances' files (sqlite3 CLI) and matched to
 * the samples by duration and time, this splits a sample's lateness from the sleep call into the engine's delay before
 * its timer starts (target − duration − sleepAt) and its wake-up after the target (wokeAt − target).
 */
const peerSleepTimers = (workflowName, samples) => {
  const dir = path.join(persist, "workflows", `miniflare-workflows-${workflowName}`)
  try {
    const timers = fs.readdirSync(dir).filter((file) => file.endsWith(".sqlite")).flatMap((file) => {
      const out = execFileSync("sqlite3", ["-readonly", path.join(dir, file),
        "SELECT target_timestamp FROM priority_queue WHERE action = 1 AND entryType = 1; SELECT metadata FROM states WHERE event = 8;"], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"]
      }).trim().split("\n")
      if (out.length < 2) return []
      return [{ target: Number(out[0]), durationMs: JSON.parse(out[1]).durationMs }]
    })
    const before = []
    const after = []
    for (const x of samples) {
      // The same duration recurs in every run (a few seconds apart): the closest timer start to this sleep call.
      let match
      for (const t of timers) {
        if (t.durationMs !== x.ms) continue
        if (match === undefined || Math.abs(t.target - x.ms - x.sleepAt) < Math.abs(match.target - x.ms - x.sleepAt)) match = t
      }
      if (match === undefined || Math.abs(match.target - x.ms - x.sleepAt) > 2_000) continue
      before.push(match.target - x.ms - x.sleepAt)
      after.push(x.wokeAt - match.target)
    }
    const figures = (values) => ({ p50: percentile(values, 50), p99: percentile(values, 99), max: Math.max(...values), min: Math.min(...values) })
    return { matched: before.length, of: samples.length, timerStartAfterCall: figures(before), wokeAfterTarget: figures(after) }
  } catch (error) {
    return { observable: false, reason: String(error.message ?? error).split("\n")[0] }
  }
}

/** J5's Cloudflare Queue, local: the consumer is the same worker; one batch in flight at a time (Miniflare's broker). */
const J5_QUEUE = "durability-bench-j5"
const J5_CONSUMER = { maxBatchSize: 100, maxBatchTimeout: 0, maxRetries: 2 }

/**
 * CPU time (user + system, ms) of the workerd processes Miniflare started (children of this process):
 * every isolate, SQLite and the queue broker together. /proc only (Linux); null elsewhere.
 */
const workerdCpuMs = () => {
  try {
    const tick = 1000 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim() || 100)
    const children = (pid) =>
      fs.readdirSync(`/proc/${pid}/task`).flatMap((task) =>
        fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
      )
    let total = 0
    let found = 0
    const visit = (pid) => {
      for (const child of children(pid)) {
        const stat = fs.readFileSync(`/proc/${child}/stat`, "utf8")
        // The fields after the command name (which may hold spaces), from field 3 on.
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        if (fs.readFileSync(`/proc/${child}/comm`, "utf8").trim() === "workerd") {
          total += (Number(fields[11]) + Number(fields[12])) * tick
          found++
        }
        visit(child)
      }
    }
    visit(process.pid)
    return found === 0 ? null : total
  } catch {
    return null
  }
}

/** `promise`, or a rejection naming `what` after `ms` (an inspector call on a dropped socket never answers). */
const within = (promise, ms, what) => {
  let timer
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)
    })
  ]).finally(() => clearTimeout(timer))
}

/**
 * One inspector session on the J5–J7 worker for all of their profiled runs: workerd may drop a
 * session opened while the previous one is still closing, and a dropped one never answers.
 */
let externalInspector
const profileRun = async (run) => {
  externalInspector ??= await within(Inspector.connect(inspectorPort, "jobsExternal"), 10_000, "inspector connect")
  await within(externalInspector.send("Profiler.enable"), 10_000, "Profiler.enable")
  await within(externalInspector.send("Profiler.start"), 10_000, "Profiler.start")
  const result = await run()
  const { profile } = await within(externalInspector.send("Profiler.stop"), 60_000, "Profiler.stop")
  return { result, profile }
}

/** Busy time (ms) of one isolate in a CPU profile: every sample but `(idle)`, by its time delta. */
const busyMs = (profile) => {
  const idle = new Set(profile.nodes.filter((node) => node.callFrame.functionName === "(idle)").map((node) => node.id))
  let busy = 0
  let total = 0
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0
    total += delta
    if (!idle.has(profile.samples[i])) busy += delta
  }
  return { busyMs: busy / 1000, profiledMs: total / 1000 }
}

const workerOptions = (name, built, bindings, flags = []) => ({
  name,
  modulesRoot: built.outdir,
  modules: [{ type: "ESModule", path: built.file, contents: fs.readFileSync(built.file, "utf8") }],
  compatibilityDate: COMPATIBILITY_DATE,
  compatibilityFlags: flags,
  durableObjects: Object.fromEntries(bindings.map(([binding, className]) => [binding, { className, useSQLite: true }]))
})

// ---------------------------------------------------------------------------------------------
// The job-queue peers (BullMQ, pg-boss): bench/jobs-peer, its own package and servers

const jobsPeerDir = path.join(bench, "jobs-peer")
const usePeers = !flag("--no-jobs-peer")

/** Installs bench/jobs-peer's package when missing or stale; false (said once) when that failed. */
let jobsPeerInstall
const ensureJobsPeer = () => {
  if (jobsPeerInstall === undefined) {
    try {
      installJobsPeer()
      jobsPeerInstall = true
    } catch (error) {
      log(`job-queue peers not run: bench/jobs-peer's npm ci failed: ${error.message}`)
      results.jobsPeer = { errors: [`npm ci in bench/jobs-peer failed: ${error.message}`] }
      jobsPeerInstall = false
    }
  }
  return jobsPeerInstall
}

const installJobsPeer = () => {
  const installed = ["bullmq", "pg-boss"].every((pkg) => fs.existsSync(path.join(jobsPeerDir, "node_modules", pkg, "package.json")))
  const lock = path.join(jobsPeerDir, "node_modules", ".package-lock.json")
  if (installed && fs.existsSync(lock) && fs.statSync(lock).mtimeMs >= fs.statSync(path.join(jobsPeerDir, "package-lock.json")).mtimeMs) return
  log("installing the job-queue peers' package (bench/jobs-peer: npm ci)")
  // --ignore-scripts: the only install script is msgpackr-extract's native build (msgpackr falls back to JS).
  execFileSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: jobsPeerDir,
    stdio: ["ignore", "inherit", "inherit"]
  })
}

/** bench/jobs-peer/run.mjs as a child process (its progress on our stderr): its one JSON object, or `{ error }`. */
const runJobsPeer = (scenarios, peers) => {
  const args = ["run.mjs", "--only", scenarios.join(","), "--peers", peers.join(","), "--n", String(settings.jobsPeer.n)]
  log(`job-queue peers: node bench/jobs-peer/${args.join(" ")}`)
  const child = spawnSync(process.execPath, args, {
    cwd: jobsPeerDir,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 64 * 2 ** 20,
    timeout: 30 * 60_000
  })
  if (child.error !== undefined) return { error: `bench/jobs-peer did not run: ${child.error.message}` }
  try {
    return { ...JSON.parse(child.stdout), exitCode: child.status }
  } catch {
    return { error: `bench/jobs-peer exited ${child.status ?? child.signal} without its JSON: ${child.stdout.slice(-500)}` }
  }
}

/** Gathers the peers' figures into `results.jobsPeer` ({ peers: { bullmq, pgboss }, ... } as bench/jobs-peer prints them). */
const jobsPeer = {
  add(output) {
    if (output.error !== undefined) {
      log(`job-queue peers: ${output.error}`)
      results.jobsPeer = { ...results.jobsPeer, errors: [...(results.jobsPeer?.errors ?? []), output.error] }
      return
    }
    const { peers, ...rest } = output
    results.jobsPeer = { ...results.jobsPeer, ...rest, peers: { ...results.jobsPeer?.peers } }
    for (const [key, peer] of Object.entries(peers ?? {})) {
      if (peer.skipped !== undefined) log(`job-queue peer ${key} skipped: ${peer.skipped}`)
      else if (peer.error !== undefined) log(`job-queue peer ${key} failed: ${peer.error}`)
      const { wallMs: _wallMs, ...figures } = peer
      results.jobsPeer.peers[key] = { ...results.jobsPeer.peers[key], ...figures }
    }
  },
  skipped: (key) => results.jobsPeer?.peers?.[key]?.skipped !== undefined
}

// ---------------------------------------------------------------------------------------------
// Main

/** The commit measured, and whether src/ differed from it (a hash of the diff tells two dirty trees apart). */
function sourceState() {
  try {
    const git = (...args) => execFileSync("git", args, { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
    const diff = git("diff", "HEAD", "--", "src")
    return {
      commit: git("rev-parse", "--short", "HEAD").trim(),
      srcDirty: diff.length > 0,
      ...(diff.length > 0 ? { srcDiffSha1: createHash("sha1").update(diff).digest("hex").slice(0, 12) } : {})
    }
  } catch {
    return undefined
  }
}

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
  source: sourceState(),
  scenarios: {}
}

if (wantB) ensurePeer()
const versionOf = (file) => JSON.parse(fs.readFileSync(file, "utf8")).version
results.versions = {
  miniflare: versionOf(path.join(root, "node_modules/miniflare/package.json")),
  workerd: versionOf(path.join(root, "node_modules/workerd/package.json")),
  wrangler: versionOf(path.join(root, "node_modules/wrangler/package.json")),
  ...(wantB ? { agents: versionOf(path.join(bench, "peer/node_modules/agents/package.json")) } : {}),
  effect: versionOf(path.join(root, "node_modules/effect/package.json"))
}

log("bundling (wrangler deploy --dry-run)")
const built = wantB
  ? {
    library: bundle(path.join(bench, "workers/lib.wrangler.toml"), "library"),
    peer: bundle(path.join(bench, "peer/wrangler.toml"), "peer"),
    floor: bundle(path.join(bench, "workers/floor.wrangler.toml"), "floor")
  }
  : {}
if (wantJ) built.jobs = bundle(path.join(bench, "workers/jobs.wrangler.toml"), "jobs")
if (wantX) built.jobsExternal = bundle(path.join(bench, "workers/jobsExternal.wrangler.toml"), "jobsExternal")
if (wantI) built.inspector = bundle(path.join(bench, "workers/inspector.wrangler.toml"), "inspector")
if (wantL) built.log = bundle(path.join(bench, "workers/log.wrangler.toml"), "log")
if (wantF) built.fanout = bundle(path.join(bench, "workers/fanout.wrangler.toml"), "fanout")
/** Workers of the workflow scenarios that did not bundle: worker -> why (their rows print "not built"). */
const notBuilt = {}
if (wantW) {
  for (const impl of workflowWorkers()) {
    try {
      built[impl.worker] = bundle(path.join(bench, `workers/${impl.worker}.wrangler.toml`), impl.worker)
    } catch (error) {
      // wrangler's first real error line (esbuild's "No matching export ...", say), not its whole log.
      const output = `${error.stderr ?? ""}\n${error.stdout ?? ""}`.replace(/\x1b\[[0-9;]*m/g, "")
      const errors = output.split("\n").filter((line) => line.includes("[ERROR]")).map((line) => line.replace(/^.*\[ERROR\]\s*/, "").trim())
      notBuilt[impl.worker] = (errors.find((line) => !line.startsWith("Build failed")) ?? errors[0] ?? String(error.message ?? error)).slice(0, 300)
      log(`workflows: ${impl.label} not built (bench/workers/${impl.worker}.wrangler.toml): ${notBuilt[impl.worker]}`)
    }
  }
}

if (wanted("B6")) {
  const baseline = bundle(path.join(bench, "bundle/baseline.wrangler.toml"), "b6-baseline")
  const quickStart = bundle(quickStartWorker(), "b6-quick-start")
  const library = bundle(path.join(bench, "bundle/lib-min.wrangler.toml"), "b6-library")
  const peer = bundle(path.join(bench, "peer/min.wrangler.toml"), "b6-peer")
  results.scenarios.B6 = {
    baseline: { kib: baseline.kib, gzipKib: baseline.gzipKib },
    quickStart: { kib: quickStart.kib, gzipKib: quickStart.gzipKib, shareGzipKib: round(quickStart.gzipKib - baseline.gzipKib) },
    library: { kib: library.kib, gzipKib: library.gzipKib, shareGzipKib: round(library.gzipKib - baseline.gzipKib) },
    peer: { kib: peer.kib, gzipKib: peer.gzipKib, shareGzipKib: round(peer.gzipKib - baseline.gzipKib) }
  }
}

const inspectorPort = await freePort()
const persist = fs.mkdtempSync(path.join(os.tmpdir(), "durability-bench-state-"))
const workerdLog = fs.createWriteStream(path.join(buildDir, "workerd.log"))
const mfOptions = {
  inspectorPort,
  durableObjectsPersist: persist,
  // Local Workflows: one SQLite file per instance (its engine object) under here, read by W1 after its runs.
  workflowsPersist: path.join(persist, "workflows"),
  handleRuntimeStdio(stdout, stderr) {
    stdout.pipe(workerdLog)
    stderr.pipe(workerdLog)
  },
  workers: [
    ...(wantB
      ? [
        workerOptions("library", built.library, [["TARGET", "LibBench"], ["TARGET_LIVE", "LibBenchLive"]]),
        workerOptions("peer", built.peer, [["TARGET", "PeerBench"]], ["nodejs_compat"]),
        workerOptions("floor", built.floor, [["TARGET", "FloorBench"], ["TARGET_SCHEMA", "FloorSchemaBench"]])
      ]
      : []),
    ...(wantJ ? [workerOptions("jobs", built.jobs, [["TARGET", "JobsBench"], ["TARGET_LIVE", "JobsBenchLive"]])] : []),
    ...(wantX
      ? [{
        ...workerOptions("jobsExternal", built.jobsExternal, [["TARGET", "JobsExternalBench"], ["TARGET_LIVE", "JobsExternalBenchLive"]]),
        // As bench/workers/jobsExternal.wrangler.toml (Miniflare takes the queues from options, not the toml).
        queueProducers: { J5_QUEUE: { queueName: J5_QUEUE } },
        queueConsumers: { [J5_QUEUE]: J5_CONSUMER }
      }]
      : []),
    ...(wantI ? [workerOptions("inspector", built.inspector, [["TARGET", "InspectorBench"]])] : []),
    ...(wantL ? [workerOptions("log", built.log, [["TARGET", "LogBench"], ["TARGET_FLOOR", "LogFloorBench"]])] : []),
    ...(wantF ? [workerOptions("fanout", built.fanout, [["TARGET", "FanoutBench"], ["TARGET_FLOOR", "FanoutFloorBench"]])] : []),
    ...(wantW
      ? workflowWorkers().filter((impl) => built[impl.worker] !== undefined).map((impl) => ({
        ...workerOptions(impl.worker, built[impl.worker], impl.durableObjects),
        // As the worker's wrangler.toml (Miniflare takes the workflows from options, not the toml).
        ...(impl.workflows === undefined ? {} : { workflows: impl.workflows })
      }))
      : [])
  ]
}
const mf = new Miniflare(mfOptions)

let failed = false
try {
  await mf.ready
  const fetchers = {}
  for (const impl of wantB ? IMPLEMENTATIONS : []) fetchers[impl] = await mf.getWorker(impl)
  if (wantJ) fetchers.jobs = await mf.getWorker("jobs")
  if (wantX) fetchers.jobsExternal = await mf.getWorker("jobsExternal")
  if (wantI) fetchers.inspector = await mf.getWorker("inspector")
  if (wantL) fetchers.log = await mf.getWorker("log")
  if (wantF) fetchers.fanout = await mf.getWorker("fanout")
  for (const impl of wantW ? WORKFLOW_IMPLEMENTATIONS : []) {
    if (built[impl.worker] !== undefined) fetchers[impl.worker] = await mf.getWorker(impl.worker)
  }
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

  // --profile: a CPU profile of each isolate during its first B1 (or J1) run (open it in Chrome DevTools).
  const profiler = async (impl, rep, label = impl, executions = settings.b1.n) => {
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
      // By component (SQL, GC, keep_names, Effect, the library, the bench), from the bundle this isolate runs.
      const figures = breakdown(profile, fs.readFileSync(built[impl].file, "utf8"), executions)
      ;(results.profiles ??= {})[label] = figures
      for (const line of describe(label, figures)) log(line)
    }
  }
  // Warm each isolate (bundle evaluated, SQLite file open, code paths compiled).
  for (const impl of wantB ? IMPLEMENTATIONS : []) await call(impl, "drain", { name: fresh(impl, "warm"), n: 200, batch: 100 })
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

  if (wantJ) {
    // Warm the jobs isolate: bundle evaluated, SQLite file open, add/claim/complete and the delayed path compiled.
    await call("jobs", "j1", { name: fresh("jobs", "warm"), n: 200, batch: 100 })
    await call("jobs", "j3", { name: fresh("jobs", "warm"), jobs: 8, leadMs: 200, spreadMs: 200, loadBatch: 2, loadEveryMs: 50 })

    if (wanted("J1") || wanted("J4")) {
      const runs = []
      // BullMQ's J1 alternates with the library's (workerd sits idle meanwhile): both see the same machine.
      const bullmqRuns = []
      const bullmqJ1 = wanted("J1") && usePeers && settings.jobsPeer.only.includes("J1") &&
        settings.jobsPeer.peers.includes("bullmq") && ensureJobsPeer()
      for (let rep = 0; rep < settings.reps; rep++) {
        const stop = await profiler("jobs", rep, "jobs-j1", settings.j1.n)
        const run = await call("jobs", "j1", { name: fresh("jobs", "j1"), ...settings.j1 })
        await stop?.()
        if (run.ms === null) throw new Error(`J1: ${run.completed} of ${run.n} jobs completed (${run.handled} handled)`)
        runs.push(run)
        log(`J1 library rep ${rep + 1}: ${run.ms} ms (${round(run.n / (run.ms / 1000), 0)} jobs/s; adds took ${run.addMs} ms; ${run.probes} counts() probe(s))`)
        if (bullmqJ1 && !jobsPeer.skipped("bullmq")) {
          const output = runJobsPeer(["J1"], ["bullmq"])
          jobsPeer.add(output)
          const figures = output.peers?.bullmq?.J1
          if (figures?.ms !== undefined) bullmqRuns.push(figures)
        }
      }
      if (bullmqRuns.length > 0) {
        const ms = median(bullmqRuns.map((run) => run.ms))
        results.jobsPeer.peers.bullmq.J1 = {
          ...bullmqRuns[0],
          ms,
          jobsPerSec: round(settings.jobsPeer.n / (ms / 1000), 0),
          addMs: median(bullmqRuns.map((run) => run.addMs)),
          runsMs: bullmqRuns.map((run) => run.ms)
        }
      }
      const ms = median(runs.map((run) => run.ms))
      // Where the time goes: adding alone (queue paused), then draining alone.
      const splitName = fresh("jobs", "j1split")
      const split = wanted("J1") ? await call("jobs", "j1split", { name: splitName, ...settings.j1 }) : undefined
      // The same statements with no library, on a copy of the jobs table (in the split run's object, where it exists).
      const floor = split === undefined ? undefined : await call("jobs", "j1floor", { name: splitName, ...settings.j1 })
      if (split !== undefined) {
        log(`J1 library split: adding alone ${split.addMs} ms (${round(split.addMs * 1000 / split.n, 1)} µs/job), draining alone ${split.drainMs} ms (${round(split.drainMs * 1000 / split.n, 1)} µs/job, first start ${split.firstStartAfterResumeMs} ms after resume); SQL alone ${floor.ms} ms (inserts ${floor.insertMs} ms)`)
      }
      if (wanted("J1")) {
        results.scenarios.J1 = {
          library: {
            n: settings.j1.n,
            batch: settings.j1.batch,
            concurrency: 10,
            ms,
            jobsPerSec: round(settings.j1.n / (ms / 1000), 0),
            addMs: median(runs.map((run) => run.addMs)),
            firstStartMs: median(runs.map((run) => run.firstStartMs)),
            lastHandlerMs: median(runs.map((run) => run.handledMs)),
            runsMs: runs.map((run) => run.ms),
            probes: runs.map((run) => run.probes),
            split: { addMs: split.addMs, drainMs: split.drainMs, firstStartAfterResumeMs: split.firstStartAfterResumeMs },
            sqlFloor: { ms: floor.ms, insertMs: floor.insertMs }
          }
        }
      }
      if (wanted("J4")) {
        const all = runs.map((run) => perJob(run.counts, run.n))
        results.scenarios.J4 = { library: { ...all[0], statementsPerJobAcrossRuns: all.map((r) => r.statementsPerJob) } }
        log(`J4 library: ${all[0].statementsPerJob} statements per completed job`)
      }
    }

    if (wanted("J8")) {
      // The same ten pieces of work per job, as durable steps and inline, alternating (same machine state).
      const runs = { j8steps: [], j8plain: [] }
      for (let rep = 0; rep < settings.reps; rep++) {
        for (const queue of rep % 2 === 0 ? ["j8plain", "j8steps"] : ["j8steps", "j8plain"]) {
          const run = await call("jobs", "j8", { name: fresh("jobs", `j8-${queue}`), ...settings.j8, j8Queue: queue })
          if (run.ms === null) throw new Error(`J8 ${queue}: ${run.handled} of ${run.n} jobs handled, not all completed`)
          runs[queue].push(run)
          log(`J8 ${queue} rep ${rep + 1}: ${run.ms} ms (${round(run.n / (run.ms / 1000), 0)} jobs/s)`)
        }
      }
      const figures = (list) => {
        const ms = median(list.map((run) => run.ms))
        const own = perJob(list[0].counts, list[0].n)
        return { ms, jobsPerSec: round(list[0].n / (ms / 1000), 0), runsMs: list.map((run) => run.ms), statementsPerJob: own.statementsPerJob, rowsWrittenPerJob: own.rowsWrittenPerJob, transactionsPerJob: own.transactionsPerJob }
      }
      const steps = figures(runs.j8steps)
      const plain = figures(runs.j8plain)
      results.scenarios.J8 = {
        library: {
          n: settings.j8.n,
          batch: settings.j8.batch,
          stepsPerJob: 10,
          steps,
          plain,
          // What memoising one step costs: the difference per step, over the same work.
          usPerStep: round(((steps.ms - plain.ms) * 1000) / (settings.j8.n * 10), 1)
        }
      }
      log(`J8: steps ${steps.ms} ms, inline ${plain.ms} ms: ${results.scenarios.J8.library.usPerStep} µs per step`)
    }

    if (wanted("J9")) {
      // The same trivial jobs, batched and one by one, alternating (same machine state).
      const runs = { j9batched: [], j9plain: [] }
      for (let rep = 0; rep < settings.reps; rep++) {
        for (const queue of rep % 2 === 0 ? ["j9plain", "j9batched"] : ["j9batched", "j9plain"]) {
          const run = await call("jobs", "j9", { name: fresh("jobs", `j9-${queue}`), ...settings.j9, j9Queue: queue })
          if (run.ms === null) throw new Error(`J9 ${queue}: ${run.handled} of ${run.n} jobs handled, not all completed`)
          runs[queue].push(run)
          log(`J9 ${queue} rep ${rep + 1}: ${run.ms} ms (${round(run.n / (run.ms / 1000), 0)} jobs/s, ${run.calls} handler calls)`)
        }
      }
      const figures = (list) => {
        const ms = median(list.map((run) => run.ms))
        const own = perJob(list[0].counts, list[0].n)
        return {
          ms,
          jobsPerSec: round(list[0].n / (ms / 1000), 0),
          runsMs: list.map((run) => run.ms),
          jobsPerCall: round(list[0].n / list[0].calls, 2),
          statementsPerJob: own.statementsPerJob,
          transactionsPerJob: own.transactionsPerJob
        }
      }
      const batched = figures(runs.j9batched)
      const plain = figures(runs.j9plain)
      results.scenarios.J9 = { library: { n: settings.j9.n, batch: settings.j9.batch, batchSize: 10, batched, plain } }
      log(`J9: batched ${batched.ms} ms (${batched.jobsPerCall} jobs per call), one by one ${plain.ms} ms`)
    }

    if (wanted("JB")) {
      const runs = []
      for (let rep = 0; rep < settings.reps; rep++) {
        const run = await call("jobs", "jb", { name: fresh("jobs", "jb"), ...settings.jb })
        for (const action of ["cancel", "remove"]) {
          if (run[action].affected !== run.n) throw new Error(`JB ${action}: ${run[action].affected} of ${run.n} jobs changed`)
        }
        runs.push(run)
        log(`JB rep ${rep + 1}: cancel ${run.cancel.ms} ms in ${run.cancel.calls} calls, remove ${run.remove.ms} ms in ${run.remove.calls} calls`)
      }
      const figures = (action) => {
        const first = runs[0][action]
        return {
          ms: median(runs.map((run) => run[action].ms)),
          runsMs: runs.map((run) => run[action].ms),
          calls: first.calls,
          transactions: first.transactions,
          statementsPerJob: round(first.statements / runs[0].n, 2)
        }
      }
      results.scenarios.JB = { library: { n: settings.jb.n, limit: settings.jb.limit, cancel: figures("cancel"), remove: figures("remove") } }
    }

    if (wanted("J2")) {
      const j2 = {}
      for (const queue of ["j2", "j2fast"]) {
        const run = await call("jobs", "j2", {
          name: fresh("jobs", queue),
          queue,
          queued: settings.j2.queued[queue],
          runMs: settings.j2.runMs
        })
        j2[queue] = {
          limit: run.limit,
          kind: "token bucket (DurabilityJobs rateLimit)",
          concurrency: 10,
          queued: run.queued,
          runMs: run.runMs,
          ...bucketFigures(run.starts, run.limit, settings.j2)
        }
        log(`J2 library ${queue} ${JSON.stringify(run.limit)}: per second ${j2[queue].perSecond.join(" ")}, ratio from first ${j2[queue].minRatioFromFirst}..${j2[queue].maxRatioFromFirst}, worst sliding ${j2[queue].worstRatio}`)
      }
      // With a concurrency by key: one hot key with 10x the jobs of each other key, the queue's total binding.
      const keyed = await call("jobs", "j2keys", { name: fresh("jobs", "j2keys"), ...settings.j2.keys })
      log(`J2 library keyed ${JSON.stringify(keyed.limit)}: most running per key ${keyed.mostRunningPerKey}, in all ${keyed.mostRunning}; shares over the first ${keyed.fairWindow} starts ${JSON.stringify(keyed.shares)}, worst deviation from equal ${keyed.worstDeviation}`)
      results.scenarios.J2 = { library: j2, keyed }
    }

    if (wanted("J3")) {
      // `reps` rounds of each variant in turn, pooled: with 64 jobs a round, p99 of one round is its maximum.
      const variants = [["load", "TARGET", true], ["idle", "TARGET", false], ["load, liveTimers", "TARGET_LIVE", true]]
      const rounds = Object.fromEntries(variants.map(([label]) => [label, []]))
      for (let rep = 0; rep < settings.reps; rep++) {
        for (const [label, binding, load] of variants) {
          const run = await call("jobs", "j3", { name: fresh("jobs", "j3"), binding, load, ...settings.j3 })
          const figures = latenessFigures(run.samples)
          rounds[label].push({ ...run, figures })
          log(`J3 library (${label}) round ${rep + 1}: p50 ${figures.p50} ms, max ${figures.max} ms, ${figures.early} early of ${figures.jobs}`)
        }
      }
      const j3 = {}
      for (const [label] of variants) {
        const all = rounds[label]
        j3[label] = {
          ...latenessFigures(all.flatMap((run) => run.samples)),
          rounds: all.length,
          maxPerRound: all.map((run) => run.figures.max),
          addMs: all.map((run) => run.addMs),
          dueBeforeAdded: all.reduce((sum, run) => sum + run.dueBeforeAdded, 0),
          background: all[0].background,
          // Per round, [due - first due, lateness] per job by due time: where the tail falls.
          samples: all.map((run) => {
            const byDue = [...run.samples].sort((a, b) => a.due - b.due)
            return byDue.map((sample) => [sample.due - byDue[0].due, sample.started - sample.due])
          })
        }
        log(`J3 library (${label}): ${j3[label].jobs} samples, p50 ${j3[label].p50} ms, p99 ${j3[label].p99} ms, max ${j3[label].max} ms, ${j3[label].early} early`)
      }
      results.scenarios.J3 = { library: j3 }
    }
  }

  if (wantX) {
    // Warm the isolate: bundle evaluated, the transport, consumer, router and lease paths compiled.
    await call("jobsExternal", "j5", { name: fresh("jobsExternal", "warm"), n: 20, batch: 10, everyMs: 10 })
    await call("jobsExternal", "j6", { name: fresh("jobsExternal", "warm"), n: 200, batch: 100, variant: "direct" })
    await call("jobsExternal", "j6", { name: fresh("jobsExternal", "warm"), n: 200, batch: 100, variant: "router", shards: settings.j6.shards })

    if (wanted("J5")) {
      const runs = []
      for (let rep = 0; rep < settings.reps; rep++) {
        const run = await call("jobsExternal", "j5", { name: fresh("jobsExternal", "j5"), ...settings.j5 })
        if (run.ms === null) throw new Error(`J5: ${run.counts.completed} of ${run.n} jobs completed (${JSON.stringify(run.counts)})`)
        runs.push(run)
        log(`J5 rep ${rep + 1}: ${run.ms} ms (${round(run.n / (run.ms / 1000), 0)} jobs/s; adds took ${run.addMs} ms; ${run.polls} counts() polls; ${run.consumer.messages} messages in ${run.consumer.batches} batches)`)
      }
      // One more run under the CPU profiler: how busy the worker's isolate (object, consumer, driver) was.
      let profiled
      if (!smoke) {
        const { profile, result: run } = await profileRun(() => call("jobsExternal", "j5", { name: fresh("jobsExternal", "j5p"), ...settings.j5 }))
        if (flag("--profile")) {
          const file = path.join(bench, "results", "jobs-j5.cpuprofile")
          fs.writeFileSync(file, JSON.stringify(profile))
          log(`CPU profile: ${path.relative(root, file)}`)
        }
        profiled = { ms: run.ms, ...busyMs(profile) }
        profiled.busyShare = round(profiled.busyMs / profiled.profiledMs, 3)
        profiled.busyUsPerJob = round(profiled.busyMs * 1000 / run.n, 1)
        log(`J5 profiled: ${run.ms} ms, isolate busy ${round(profiled.busyMs, 0)} of ${round(profiled.profiledMs, 0)} ms (${profiled.busyUsPerJob} µs/job)`)
      }
      const ms = median(runs.map((run) => run.ms))
      // The first run's statements per completed job, by text (the counts() polls apart, as J4 leaves them out).
      const first = runs[0]
      const probe = JOB_KINDS.find(([kind]) => kind === "probe")[1]
      const own = Object.entries(first.statements.statements).filter(([sql]) => !probe.test(sql))
      const per = (value) => round(value / first.n, 3)
      const statements = {
        statementsPerJob: per(own.reduce((sum, [, c]) => sum + c.n, 0)),
        rowsWrittenPerJob: per(own.reduce((sum, [, c]) => sum + c.rowsWritten, 0)),
        transactionsPerJob: per(first.statements.transactions),
        alarmWritesPerJob: per(first.statements.setAlarm + first.statements.deleteAlarm),
        top: own.map(([sql, c]) => ({ perJob: per(c.n), rowsPerJob: per(c.rowsWritten), sql })).sort((a, b) => b.perJob - a.perJob).slice(0, 20)
      }
      log(`J5 statements per job: ${statements.statementsPerJob} (${statements.transactionsPerJob} transactions)`)
      results.scenarios.J5 = {
        library: {
          n: settings.j5.n,
          batch: settings.j5.batch,
          consumer: J5_CONSUMER,
          ms,
          jobsPerSec: round(settings.j5.n / (ms / 1000), 0),
          msPerJob: round(ms / settings.j5.n, 3),
          addMs: median(runs.map((run) => run.addMs)),
          runsMs: runs.map((run) => run.ms),
          consumerBatches: runs.map((run) => run.consumer),
          statements,
          ...(profiled === undefined ? {} : { profiled })
        }
      }
    }

    if (wanted("J6")) {
      const variants = [
        ["one object, direct", { variant: "direct" }],
        ["router, 1 shard", { variant: "router", shards: 1 }],
        [`router, ${settings.j6.shards} shards`, { variant: "router", shards: settings.j6.shards }]
      ]
      const samples = Object.fromEntries(variants.map(([label]) => [label, []]))
      for (let rep = 0; rep < settings.reps; rep++) {
        for (let i = 0; i < variants.length; i++) {
          const [label, params] = variants[(i + rep) % variants.length]
          const cpu0 = workerdCpuMs()
          const run = await call("jobsExternal", "j6", { name: fresh("jobsExternal", "j6"), n: settings.j6.n, batch: settings.j6.batch, ...params })
          const cpu1 = workerdCpuMs()
          if (run.ms === null) throw new Error(`J6 ${label}: ${run.completed} of ${run.n} jobs completed`)
          const cpuMs = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0
          samples[label].push({ ...run, cpuMs })
          log(`J6 ${label} rep ${rep + 1}: ${run.ms} ms (${round(run.ms * 1000 / run.n, 0)} µs/job wall; workerd CPU ${cpuMs === null ? "-" : `${round(cpuMs, 0)} ms, ${round(cpuMs * 1000 / run.n, 0)} µs/job`}; adds ${run.addMs} ms)`)
        }
      }
      // Then as many profiled runs each: the isolate's own busy time (the CPU profile's non-idle samples).
      const profiledRuns = Object.fromEntries(variants.map(([label]) => [label, []]))
      for (let rep = 0; rep < (smoke ? 0 : settings.reps); rep++) {
        for (let i = 0; i < variants.length; i++) {
          const [label, params] = variants[(i + rep) % variants.length]
          const { profile, result: run } = await profileRun(() =>
            call("jobsExternal", "j6", { name: fresh("jobsExternal", "j6p"), n: settings.j6.n, batch: settings.j6.batch, ...params })
          )
          const busy = busyMs(profile)
          profiledRuns[label].push({ ms: run.ms, ...busy })
          log(`J6 ${label} profiled rep ${rep + 1}: ${run.ms} ms, isolate busy ${round(busy.busyMs, 0)} of ${round(busy.profiledMs, 0)} ms profiled (${round(busy.busyMs * 1000 / run.n, 1)} µs/job)`)
          // --profile: where that time went, by component (the first rep of each variant).
          if (flag("--profile") && rep === 0) {
            const figures = breakdown(profile, fs.readFileSync(built.jobsExternal.file, "utf8"), run.n)
            ;(results.profiles ??= {})[`j6-${label}`] = figures
            for (const line of describe(`J6 ${label}`, figures)) log(line)
          }
        }
      }
      const profiled = {}
      for (const [label] of variants) {
        const runs = profiledRuns[label]
        if (runs.length === 0) continue
        const busy = median(runs.map((run) => run.busyMs))
        profiled[label] = {
          busyMs: round(busy, 1),
          busyUsPerJob: round(busy * 1000 / settings.j6.n, 1),
          runsBusyMs: runs.map((run) => round(run.busyMs, 0)),
          runsMs: runs.map((run) => run.ms)
        }
      }
      const j6 = {}
      for (const [label] of variants) {
        const runs = samples[label]
        const ms = median(runs.map((run) => run.ms))
        const cpu = runs.every((run) => run.cpuMs !== null) ? median(runs.map((run) => run.cpuMs)) : null
        j6[label] = {
          n: settings.j6.n,
          batch: settings.j6.batch,
          shards: runs[0].shards,
          objectsWithJobs: runs[0].objectsWithJobs,
          ms,
          wallUsPerJob: round(ms * 1000 / settings.j6.n, 1),
          cpuMs: cpu,
          cpuUsPerJob: cpu === null ? null : round(cpu * 1000 / settings.j6.n, 1),
          addMs: median(runs.map((run) => run.addMs)),
          // Over every object holding jobs (the waits' few counts() reads included).
          statementsPerJob: round(runs[0].statements / settings.j6.n, 3),
          transactionsPerJob: round(runs[0].transactions / settings.j6.n, 3),
          alarmWritesPerJob: round(runs[0].alarmWrites / settings.j6.n, 3),
          runsMs: runs.map((run) => run.ms),
          runsCpuMs: runs.map((run) => run.cpuMs === null ? null : round(run.cpuMs, 0)),
          ...(profiled[label] === undefined ? {} : { profiled: profiled[label] })
        }
      }
      const one = j6[variants[0][0]]
      const sharded = j6[variants[2][0]]
      results.scenarios.J6 = {
        library: j6,
        ratios: {
          wall: round(sharded.ms / one.ms, 3),
          cpu: one.cpuMs === null || sharded.cpuMs === null ? null : round(sharded.cpuMs / one.cpuMs, 3),
          isolateBusy: sharded.profiled === undefined ? null : round(sharded.profiled.busyMs / one.profiled.busyMs, 3),
          routerOneShardWall: round(j6[variants[1][0]].ms / one.ms, 3)
        }
      }
      log(`J6 ratios (${settings.j6.shards} shards / one object): ${JSON.stringify(results.scenarios.J6.ratios)}`)
    }

    externalInspector?.close()
    externalInspector = undefined

    if (wanted("J7")) {
      const variants = [["alarm (liveTimers off)", "TARGET", 1_000], ["liveTimers on", "TARGET_LIVE", 1_000]]
      const rounds = Object.fromEntries(variants.map(([label]) => [label, []]))
      for (let rep = 0; rep < settings.reps; rep++) {
        for (let i = 0; i < variants.length; i++) {
          const [label, binding, leaseMs] = variants[(i + rep) % variants.length]
          const run = await call("jobsExternal", "j7", { name: fresh("jobsExternal", "j7"), binding, ...settings.j7, leaseMs })
          const lag = run.samples.map((sample) => sample.reclaimedBy - sample.leasedUntil)
          // Not leasable again within the timeout: reported (and the goal missed), not a crash of the bench.
          const missing = run.total - run.samples.length
          rounds[label].push({ ...run, lag, missing })
          log(`J7 ${label} round ${rep + 1}: reclaim lag p50 ${percentile(lag, 50)} ms, max ${lag.length === 0 ? "-" : Math.max(...lag)} ms, ${missing} not reclaimed within ${settings.j7.timeoutMs} ms after the last lease end, ${run.early} early, ${run.passes} probe passes, attempt after ${run.firstAttempt}`)
        }
      }
      // One round with leases longer than alarmMinDelayMs (15 s): the physical alarm may land on the first lease's end.
      if (!smoke) {
        const long = ["alarm (liveTimers off), leaseMs 16 000", "TARGET", 16_000]
        variants.push(long)
        const run = await call("jobsExternal", "j7", { name: fresh("jobsExternal", "j7"), binding: long[1], ...settings.j7, leaseMs: long[2] })
        const lag = run.samples.map((sample) => sample.reclaimedBy - sample.leasedUntil)
        rounds[long[0]] = [{ ...run, lag, missing: run.total - run.samples.length, leaseMs: long[2] }]
        log(`J7 ${long[0]}: reclaim lag p50 ${percentile(lag, 50)} ms, max ${lag.length === 0 ? "-" : Math.max(...lag)} ms, ${run.total - run.samples.length} not reclaimed, ${run.early} early`)
      }
      const j7 = {}
      for (const [label, , leaseMs] of variants) {
        const all = rounds[label]
        const lag = all.flatMap((run) => run.lag)
        j7[label] = {
          jobs: all.reduce((sum, run) => sum + run.total, 0),
          reclaimed: lag.length,
          missing: all.reduce((sum, run) => sum + run.missing, 0),
          timeoutMs: settings.j7.timeoutMs,
          rounds: all.length,
          leaseMs,
          p50: percentile(lag, 50),
          p99: percentile(lag, 99),
          max: lag.length === 0 ? null : Math.max(...lag),
          min: lag.length === 0 ? null : Math.min(...lag),
          early: all.reduce((sum, run) => sum + run.early, 0),
          maxPerRound: all.map((run) => run.lag.length === 0 ? null : Math.max(...run.lag)),
          probePasses: all.map((run) => run.passes),
          attemptAfter: all.map((run) => run.firstAttempt)
        }
        log(`J7 ${label}: ${j7[label].reclaimed} of ${j7[label].jobs} reclaimed, p50 ${j7[label].p50} ms, p99 ${j7[label].p99} ms, max ${j7[label].max} ms, ${j7[label].early} early`)
      }
      results.scenarios.J7 = { library: j7 }
    }
  }

  if (wantF) {
    // F1: n messages enqueued in batches to 4 consumer targets that ack each one, until every delivery is
    // acked; the library beside a raw-SQL floor doing the same inserts and deletes by hand. Statements per
    // message are counted by the worker's counted storage (reliable on a loaded machine; times are not).
    // `libraryOnReturn`: the same consumers settling by `ackOnReturn` (one transaction per batch, not per ack).
    const f1 = { library: [], libraryOnReturn: [], floor: [] }
    await call("fanout", "f1", { name: fresh("fanout", "f1-warm"), binding: "TARGET", n: 50, batch: 50 })
    for (let rep = 0; rep < settings.reps; rep++) {
      for (const [impl, binding, settle] of [["library", "TARGET", "ack"], ["libraryOnReturn", "TARGET", "return"], ["floor", "TARGET_FLOOR", "ack"]]) {
        // --profile: the library's first run under the CPU profiler (bench/results/fanout-f1.cpuprofile).
        const stop = impl === "library" ? await profiler("fanout", rep, "fanout-f1", settings.f1.n * 4) : undefined
        const cpu0 = workerdCpuMs()
        const run = await call("fanout", "f1", { name: fresh("fanout", `f1-${impl}`), binding, settle, ...settings.f1 })
        const cpu1 = workerdCpuMs()
        await stop?.()
        const cpuMs = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0
        if (run.deliveries < run.n * 4) throw new Error(`F1 ${impl} delivered ${run.deliveries} of ${run.n * 4}`)
        const statements = Object.values(run.counts.statements).reduce((sum, c) => sum + c.n, 0)
        const rowsWritten = Object.values(run.counts.statements).reduce((sum, c) => sum + c.rowsWritten, 0)
        f1[impl].push({
          ms: run.ms,
          deliveriesPerSec: round(run.deliveries * 1000 / Math.max(1, run.ms), 0),
          statementsPerMessage: round(statements / run.n, 2),
          rowsWrittenPerMessage: round(rowsWritten / run.n, 2),
          transactionsPerMessage: round(run.counts.transactions / run.n, 3),
          alarmWritesPerMessage: round((run.counts.setAlarm + run.counts.deleteAlarm) / run.n, 3),
          // workerd's CPU over the run (10 ms ticks), per delivery: against wall time it says what waits.
          cpuUsPerDelivery: cpuMs === null ? null : round(cpuMs * 1000 / Math.max(1, run.deliveries), 1),
          wallUsPerDelivery: round(run.ms * 1000 / Math.max(1, run.deliveries), 1)
        })
        log(`F1 ${impl} rep ${rep + 1}: ${run.deliveries} deliveries in ${run.ms} ms, ${round(statements / run.n, 2)} statements/message`)
      }
    }
    const mid = (list, key) => median(list.map((r) => r[key]))
    results.scenarios.F1 = Object.fromEntries(["library", "libraryOnReturn", "floor"].map((impl) => [impl, {
      n: settings.f1.n,
      targets: 4,
      deliveriesPerSec: mid(f1[impl], "deliveriesPerSec"),
      statementsPerMessage: mid(f1[impl], "statementsPerMessage"),
      rowsWrittenPerMessage: mid(f1[impl], "rowsWrittenPerMessage"),
      transactionsPerMessage: mid(f1[impl], "transactionsPerMessage"),
      alarmWritesPerMessage: mid(f1[impl], "alarmWritesPerMessage"),
      cpuUsPerDelivery: mid(f1[impl], "cpuUsPerDelivery"),
      wallUsPerDelivery: mid(f1[impl], "wallUsPerDelivery"),
      runs: f1[impl]
    }]))
  }

  if (wantI) {
    // I1: what the inspector costs. Every request is timed from here (Node's clock around the whole
    // exchange: one loopback hop into workerd, which `GET /noop` measures alone); workerd's CPU is read
    // around each batch of requests (10 ms ticks, so per request it is a batch's mean).
    const worker = fetchers.inspector
    const i1 = settings.i1
    const TOKEN = "i1-bench-token-0123456789abcdef" // as bench/workers/inspector.ts
    const auth = { headers: { Authorization: `Bearer ${TOKEN}` } }
    const names = i1.sizes.map((n) => `i1-${n}`)
    const sparseNames = i1.sparse.map((n) => `i1-waiting-${n}`)
    const post = async (route, params) => {
      const response = await worker.fetch(`http://bench${route}`, { method: "POST", body: JSON.stringify(params) })
      const body = await response.json()
      if (!response.ok || body?.error !== undefined) throw new Error(`I1 ${route}: ${response.status} ${JSON.stringify(body).slice(0, 500)}`)
      return body
    }
    /** One exchange: wall ms (until the body was read), the body's bytes and text. */
    const exchange = async (url, init) => {
      const t0 = performance.now()
      const response = await worker.fetch(url, init)
      const bytes = new Uint8Array(await response.arrayBuffer())
      const ms = performance.now() - t0
      return { ms, status: response.status, bytes: bytes.byteLength, text: new TextDecoder().decode(bytes) }
    }
    const http = (route) => () => exchange(`http://bench/_durability/api/objects/${route}`, auth)
    const rpc = (name, request) => () =>
      exchange("http://bench/rpc", { method: "POST", body: JSON.stringify({ name, request }) })
    /** `warmup` untimed exchanges, then `requests` timed; `check` sees the first answer's JSON. */
    const batch = async (label, run, check, count = i1.requests) => {
      for (let i = 0; i < i1.warmup; i++) await run()
      const samples = []
      const sizes = []
      let first
      const cpu0 = workerdCpuMs()
      for (let i = 0; i < count; i++) {
        const one = await run()
        if (one.status !== 200) throw new Error(`I1 ${label}: status ${one.status}: ${one.text.slice(0, 500)}`)
        first ??= one.text
        samples.push(one.ms)
        sizes.push(one.bytes)
      }
      const cpu1 = workerdCpuMs()
      check?.(JSON.parse(first))
      return {
        requests: count,
        p50Ms: round(median(samples), 2),
        p99Ms: round(percentile(samples, 99), 2),
        maxMs: round(Math.max(...samples), 2),
        cpuMsPerRequest: cpu0 === null || cpu1 === null ? null : round((cpu1 - cpu0) / count, 2),
        bytes: Math.max(...sizes),
        bytesMin: Math.min(...sizes)
      }
    }
    const expect = (label, condition, what) => {
      if (!condition) throw new Error(`I1 ${label}: ${what}`)
    }

    const allNames = [...names, ...sparseNames]
    await post("/reset", { names: allNames })
    // Seeding: addBulk into the paused queue, settled by SQL (bench/workers/inspector.ts), or left waiting.
    const seed = async (name, n, shape) => {
      const t0 = Date.now()
      for (let start = 0; start < n; start += i1.seedCall) {
        await post("/seed", { name, start, count: Math.min(i1.seedCall, n - start), chunk: i1.bulk, shape })
      }
      const o = { name, ...(await post("/finish", { name, deepAt: i1.deepAt, shape })), seedMs: Date.now() - t0 }
      log(`I1 seeded ${name}: ${o.total} jobs (${o.failed} failed, ${o.pending} waiting, ${o.deadLetters} dead letters) in ${o.seedMs} ms`)
      expect(name, o.total === n, `${o.total} jobs of ${n}`)
      return o
    }
    const objects = {}
    for (const [index, n] of i1.sizes.entries()) objects[n] = await seed(names[index], n, "settled")

    // Cold vs warm: the first request through a fresh handler builds the HttpApi's runtime. The first cycle
    // apart from the rest (the first route's is this isolate's first HttpApi request: its code not yet compiled).
    const small = objects[i1.sizes[0]]
    const coldRoutes = [
      ["objects list (no RPC)", () => exchange("http://bench/_durability/api/objects", auth)],
      ["jobs page, limit 25", http(`${small.name}/queues/bench/jobs?limit=25`)]
    ]
    const cold = {}
    for (const [label, run] of coldRoutes) {
      const resets = []
      const firsts = []
      const seconds = []
      const cpu0 = workerdCpuMs()
      for (let r = 0; r < i1.cold; r++) {
        const t0 = performance.now()
        await post("/reset", { names: allNames })
        resets.push(performance.now() - t0)
        const first = await run()
        expect(`cold ${label}`, first.status === 200, `status ${first.status}: ${first.text.slice(0, 300)}`)
        firsts.push(first.ms)
        seconds.push((await run()).ms)
      }
      const cpu1 = workerdCpuMs()
      const warm = await batch(`warm ${label}`, run)
      cold[label] = {
        firstCycleMs: round(firsts[0], 2),
        resetMs: round(median(resets), 2),
        coldP50Ms: round(median(firsts.slice(1)), 2),
        coldMaxMs: round(Math.max(...firsts.slice(1)), 2),
        secondP50Ms: round(median(seconds), 2),
        coldRuns: firsts.map((ms) => round(ms, 1)),
        // Per cycle: the reset (building the handler), its cold first request and a second one.
        cpuMsPerCycle: cpu0 === null || cpu1 === null ? null : round((cpu1 - cpu0) / i1.cold, 2),
        warm
      }
      log(`I1 cold ${label}: first cycle ${cold[label].firstCycleMs} ms, cold p50 ${cold[label].coldP50Ms} ms, second ${cold[label].secondP50Ms} ms, warm p50 ${warm.p50Ms} ms`)
    }
    const noop = await batch("noop", () => exchange("http://bench/noop"))
    log(`I1 loopback hop (GET /noop): p50 ${noop.p50Ms} ms, CPU ${noop.cpuMsPerRequest} ms`)

    // The requests, per size: through the handler (HTTP) and to the object alone (RPC), in turn.
    const page = (n, limit = 25) => Math.min(limit, n)
    const kinds = (o, n) => {
      const q = (extra) => `${o.name}/queues/bench/${extra}`
      const failed = Math.round(n / 10)
      return [
        ["Overview", http(o.name), { _tag: "Overview" }, (v) => {
          // The overview's counts stop at COUNT_CAP (10 000).
          const capped = (count) => Math.min(count, 10_000)
          const { counts } = v.jobs.queues[0]
          expect("Overview", counts.completed === capped(n - failed) && counts.failed === capped(failed), JSON.stringify(v.jobs))
        }],
        ["Jobs, no filter, first page", http(q("jobs?limit=25")), { _tag: "Jobs", queue: "bench", limit: 25 }, (v) => expect("Jobs", v.items.length === page(n), `${v.items.length} items`)],
        ["Jobs, no filter, deep page", http(q(`jobs?limit=25&cursor=${o.deepCursor}`)), { _tag: "Jobs", queue: "bench", limit: 25, cursor: o.deepCursor }, (v) => expect("Jobs deep", v.items.length > 0, "no items")],
        ["Jobs, state=failed, first page", http(q("jobs?state=failed&limit=25")), { _tag: "Jobs", queue: "bench", state: "failed", limit: 25 }, (v) => expect("Jobs failed", v.items.length === page(failed) && v.items.every((item) => item.state === "failed"), `${v.items.length} items`)],
        ["Jobs, state=failed, deep page", http(q(`jobs?state=failed&limit=25&cursor=${o.deepFailedCursor}`)), { _tag: "Jobs", queue: "bench", state: "failed", limit: 25, cursor: o.deepFailedCursor }, (v) => expect("Jobs failed deep", v.items.length > 0 && v.items.every((item) => item.state === "failed"), `${v.items.length} items`)],
        ["Job detail", http(q(`jobs/${o.detailId}`)), { _tag: "Job", queue: "bench", id: o.detailId }, (v) => expect("Job", v.job.id === o.detailId && v.logs.total === 5, JSON.stringify(v).slice(0, 300))],
        ["DeadLetters, first page", http(q("dead-letters?limit=25")), { _tag: "DeadLetters", queue: "bench", limit: 25 }, (v) => expect("DeadLetters", v.items.length === page(o.deadLetters), `${v.items.length} items`)]
      ]
    }
    const figures = {}
    for (const n of i1.sizes) {
      const o = objects[n]
      figures[n] = {}
      for (const [index, [label, viaHttp, request, check]] of kinds(o, n).entries()) {
        const paths = [["http", viaHttp, check], ["rpc", rpc(o.name, request), (answer) => {
          expect(`${label} (RPC)`, answer.ok === true, JSON.stringify(answer).slice(0, 300))
          check(answer.value)
        }]]
        if (index % 2 === 1) paths.reverse()
        figures[n][label] = {}
        for (const [path, run, checkOne] of paths) figures[n][label][path] = await batch(`${label} ${path} N=${n}`, run, checkOne)
        const f = figures[n][label]
        log(`I1 N=${n} ${label}: HTTP p50 ${f.http.p50Ms} / p99 ${f.http.p99Ms} ms (CPU ${f.http.cpuMsPerRequest} ms, ${f.http.bytes} B); RPC p50 ${f.rpc.p50Ms} / p99 ${f.rpc.p99Ms} ms (CPU ${f.rpc.cpuMsPerRequest} ms, ${f.rpc.bytes} B)`)
      }
    }

    // The sparse shape (issue 26): N waiting jobs in a paused queue, where a count filtering on anything the
    // index does not order (due or not, leased or not) reads all N. Seeded after the dense figures so that their
    // objects' pages are measured as before; each sparse object is seeded just before it is measured.
    const sparse = {}
    for (const [index, n] of i1.sparse.entries()) {
      const o = await seed(sparseNames[index], n, "waiting")
      expect(o.name, o.pending === n, `${o.pending} waiting of ${n}`)
      const overviewCheck = (v) => {
        const [queue] = v.jobs.queues
        expect(`sparse Overview N=${n}`, queue.paused === true && queue.counts.waiting === Math.min(n, 10_000) && queue.counts.active === 0, JSON.stringify(v.jobs))
      }
      const overview = http(o.name)
      const detail = http(`${o.name}/queues/bench/jobs/${o.detailId}`)
      const detailCheck = (v) =>
        expect(`sparse Job N=${n}`, v.job.id === o.detailId && v.job.state === "waiting" && v.logs.total === 5, JSON.stringify(v).slice(0, 300))
      const f = {}
      f.overviewHttp = await batch(`sparse Overview http N=${n}`, overview, overviewCheck)
      f.overviewRpc = await batch(`sparse Overview rpc N=${n}`, rpc(o.name, { _tag: "Overview" }), (answer) => {
        expect(`sparse Overview (RPC) N=${n}`, answer.ok === true, JSON.stringify(answer).slice(0, 300))
        overviewCheck(answer.value)
      })
      f.detailAlone = await batch(`sparse Job alone N=${n}`, detail, detailCheck)
      // The page polls the overview (every 5 s per open tab); here `pollers` clients ask again as soon as
      // answered, the worst case: a detail read waits behind whatever the object (and, locally, the one
      // isolate that also runs the handler) is serving.
      const underLoad = async (what, poll) => {
        let polling = true
        const polled = []
        const poller = async () => {
          while (polling) {
            const one = await poll()
            if (one.status !== 200) throw new Error(`I1 sparse ${what} poller N=${n}: status ${one.status}: ${one.text.slice(0, 300)}`)
            polled.push(one.ms)
          }
        }
        const pollers = Array.from({ length: i1.pollers }, poller)
        try {
          const timed = await batch(`sparse Job with ${i1.pollers} ${what} pollers N=${n}`, detail, detailCheck)
          return { ...timed, pollers: i1.pollers, served: polled.length, polledP50Ms: round(median(polled), 2), polledP99Ms: round(percentile(polled, 99), 2) }
        } finally {
          polling = false
          await Promise.all(pollers)
        }
      }
      f.detailWithPollers = await underLoad("overview", overview)
      f.ratio = round(f.detailWithPollers.p50Ms / f.detailAlone.p50Ms, 2)
      // The control: the same pollers reading the detail itself, a read the issue does not call unbounded. What
      // the overview's pollers cost a detail read beyond this is the overview's own share.
      f.detailWithDetailPollers = await underLoad("detail", detail)
      f.controlRatio = round(f.detailWithDetailPollers.p50Ms / f.detailAlone.p50Ms, 2)
      // Not the overview, the same question: a page filtered on a state none of the N jobs is in.
      f.failedPage = await batch(`sparse Jobs state=failed N=${n}`, http(`${o.name}/queues/bench/jobs?state=failed&limit=25`), (v) =>
        expect(`sparse Jobs state=failed N=${n}`, v.items.length === 0, `${v.items.length} items`))
      const { plans, ...object } = o
      sparse[n] = { object, plans, ...f }
      log(
        `I1 sparse N=${n}: overview HTTP p50 ${f.overviewHttp.p50Ms} / p99 ${f.overviewHttp.p99Ms} ms (CPU ${f.overviewHttp.cpuMsPerRequest} ms), ` +
          `RPC p50 ${f.overviewRpc.p50Ms} / p99 ${f.overviewRpc.p99Ms} ms; detail alone p50 ${f.detailAlone.p50Ms} ms, ` +
          `with ${i1.pollers} overview pollers p50 ${f.detailWithPollers.p50Ms} ms (x${f.ratio}; ${f.detailWithPollers.served} overviews served, p50 ${f.detailWithPollers.polledP50Ms} ms), ` +
          `with ${i1.pollers} detail pollers p50 ${f.detailWithDetailPollers.p50Ms} ms (x${f.controlRatio})`
      )
    }
    // Each sparse object's overview again once all are seeded: the first timing follows its seeding's writes
    // at once, so a difference between sizes there may be the storage settling, not the size.
    for (const [index, n] of i1.sparse.entries()) {
      sparse[n].overviewHttpAgain = await batch(`sparse Overview again N=${n}`, http(sparseNames[index]))
      log(`I1 sparse N=${n}: overview HTTP again p50 ${sparse[n].overviewHttpAgain.p50Ms} / p99 ${sparse[n].overviewHttpAgain.p99Ms} ms; state=failed page p50 ${sparse[n].failedPage.p50Ms} ms`)
    }
    results.scenarios.I1 = {
      library: {
        sizes: i1.sizes,
        objects: Object.fromEntries(Object.entries(objects).map(([n, { plans, ...o }]) => [n, o])),
        plans: objects[i1.sizes[i1.sizes.length - 1]].plans,
        noop,
        cold,
        requests: figures,
        sparse
      }
    }
  }
  if (wantL) {
    // L1: the retained log beside its raw-SQL floor. Appends and reads are timed from here, around the requests
    // (each carries `batch` appends or the whole read); statements and rows written are counted in the object.
    const { batch, n, page } = settings.l1
    const l1 = {}
    for (const impl of ["library", "floor"]) {
      const samples = { appendsPerSec: [], readsPerSec: [], appendStatements: [], appendRows: [], readStatements: [] }
      for (let rep = 0; rep < settings.reps; rep++) {
        const name = fresh(impl, "l1")
        await call("log", "counts", { impl, name })
        let started = performance.now()
        for (let done = 0; done < n; done += batch) await call("log", "append", { impl, name, count: Math.min(batch, n - done) })
        samples.appendsPerSec.push(n / ((performance.now() - started) / 1_000))
        const appended = await call("log", "counts", { impl, name })
        started = performance.now()
        const { read } = await call("log", "read", { impl, name, from: 0, count: n, page })
        samples.readsPerSec.push(read / ((performance.now() - started) / 1_000))
        if (read !== n) throw new Error(`L1 ${impl}: read ${read} of ${n} records`)
        const reading = await call("log", "counts", { impl, name })
        samples.appendStatements.push(appended.statements / n)
        samples.appendRows.push(appended.rowsWritten / n)
        samples.readStatements.push(reading.statements / n)
      }
      l1[impl] = {
        appendsPerSec: round(median(samples.appendsPerSec), 0),
        readsPerSec: round(median(samples.readsPerSec), 0),
        statementsPerAppend: round(median(samples.appendStatements), 3),
        rowsWrittenPerAppend: round(median(samples.appendRows), 3),
        statementsPerRecordRead: round(median(samples.readStatements), 3)
      }
      log(`L1 ${impl}: ${l1[impl].appendsPerSec} appends/s, ${l1[impl].readsPerSec} reads/s, ${l1[impl].statementsPerAppend} statements per append, ${l1[impl].statementsPerRecordRead} per record read`)
    }
    results.scenarios.L1 = { n, batch, page, ...l1 }
  }
  if (wantW) {
    // Workflows, W1–W4: each implementation through its driver, by the same functions (bench/workers/workflowsDriver.ts
    // runs each scenario inside workerd and answers its samples; the figures are made here, the same for both).
    const w = {}
    const wFigure = (scenario, key, figures) => {
      w[scenario] ??= {}
      w[scenario][key] = figures
    }
    const available = (impl, scenario) => {
      if (!impl.scenarios.includes(scenario) || !wanted(scenario)) return false
      if (built[impl.worker] !== undefined) return true
      wFigure(scenario, impl.key, { notBuilt: notBuilt[impl.worker] ?? "not bundled" })
      return false
    }
    const driverOf = (impl) => (scenario, params) =>
      call(impl.worker, scenario, {
        ...(impl.perRun ? { name: fresh(impl.worker, `${scenario}-obj`) } : {}),
        ...(impl.live === true ? { live: true } : {}),
        ...params
      })
    const reps = settings.reps
    /**
     * Every W run starts on a fresh workerd (Miniflare's setOptions restarts it; storage stays on disk), warmed by
     * a run of 10 instances. Local Workflows never evicts an instance's engine object (`preventEviction`), each
     * holding its SQLite file open (3 descriptors, ~0.4 MB): near 2 700 live instances workerd's SQLite fails
     * (SQLITE_NOMEM in the engine's constructor) and the instance is "not found". One workerd for all the runs
     * (3 x 1 000 in W1 alone) would hit that, and each run would carry the earlier runs' objects.
     */
    const freshWorkerd = async (impl) => {
      await mf.setOptions(mfOptions)
      for (const other of WORKFLOW_IMPLEMENTATIONS) {
        if (built[other.worker] !== undefined) fetchers[other.worker] = await mf.getWorker(other.worker)
      }
      await driverOf(impl)("w1", { prefix: fresh(impl.key, "warm"), n: 10, batch: 10 })
    }

    /** W1: n instances of ten trivial steps; the last one's own return from the first create, median of `reps` runs. */
    const runW1 = async (impl, driver) => {
      const runs = []
      for (let rep = 0; rep < reps; rep++) {
        await freshWorkerd(impl)
        const cpu0 = workerdCpuMs()
        const run = await driver("w1", { prefix: fresh(impl.key, "w1"), ...settings.w1 })
        const cpu1 = workerdCpuMs()
        if (run.missing > 0 || run.completed < run.n) {
          throw new Error(`W1 ${impl.label}: ${run.completed} of ${run.n} complete, ${run.missing} not final; failed ${JSON.stringify(run.failed)}; stuck ${JSON.stringify(run.stuck)}`)
        }
        runs.push({ ...run, cpuMs: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0 })
        log(`W1 ${impl.label} rep ${rep + 1}: ${run.n} x 10 steps, last done ${run.lastDoneMs} ms (${round(run.n * 10 / (run.lastDoneMs / 1000), 0)} steps/s), created in ${run.createMs} ms, last seen ${run.lastSeenMs} ms`)
      }
      const steps = settings.w1.n * 10
      const ms = median(runs.map((run) => run.lastDoneMs))
      const cpu = runs.every((run) => run.cpuMs !== null) ? median(runs.map((run) => run.cpuMs)) : null
      const figures = {
        n: settings.w1.n,
        batch: settings.w1.batch,
        steps,
        ms,
        stepsPerSec: ms > 0 ? round(steps / (ms / 1000), 0) : null,
        createMs: median(runs.map((run) => run.createMs)),
        firstDoneMs: median(runs.map((run) => run.firstDoneMs)),
        lastSeenMs: median(runs.map((run) => run.lastSeenMs)),
        cpuUsPerStep: cpu === null ? null : round(cpu * 1000 / steps, 1),
        runsMs: runs.map((run) => run.lastDoneMs),
        polls: runs.map((run) => run.polls)
      }
      // Statements per step where the implementation counts them (the library's object). The driver's status polls are
      // counted apart: one `status()` is two reads (the instance's row, a page of its steps), `polls` of them per run.
      const counts = runs[0].counts
      if (counts !== null && counts !== undefined) {
        const statements = Object.values(counts.statements).reduce((sum, c) => sum + c.n, 0)
        const rowsWritten = Object.values(counts.statements).reduce((sum, c) => sum + c.rowsWritten, 0)
        figures.storage = {
          statementsPerStep: round(statements / steps, 3),
          statementsPerStepWithoutPolls: round((statements - 2 * runs[0].polls) / steps, 3),
          rowsWrittenPerStep: round(rowsWritten / steps, 3),
          transactionsPerStep: round(counts.transactions / steps, 3),
          alarmWritesPerStep: round((counts.setAlarm + counts.deleteAlarm) / steps, 3),
          polls: runs[0].polls,
          top: Object.entries(counts.statements).map(([sql, c]) => ({ perStep: round(c.n / steps, 3), sql })).sort((a, b) => b.perStep - a.perStep).slice(0, 20)
        }
      }
      return figures
    }

    /** W2: sleeps of minMs..maxMs; lateness of the wake-up from the step before the sleep (and from the sleep call). */
    const runW2 = async (impl, driver) => {
      const all = []
      for (let rep = 0; rep < reps; rep++) {
        await freshWorkerd(impl)
        const run = await driver("w2", { prefix: fresh(impl.key, "w2"), ...settings.w2 })
        if (run.missing > 0 || run.samples.length < run.n) {
          throw new Error(`W2 ${impl.label}: ${run.samples.length} of ${run.n} complete; failed ${JSON.stringify(run.failed)}; stuck ${JSON.stringify(run.stuck)}`)
        }
        all.push(...run.samples)
        const f = latenessFigures(run.samples.map((x) => ({ due: x.startedAt + x.ms, started: x.wokeAt })))
        log(`W2 ${impl.label} rep ${rep + 1}: lateness p50 ${f.p50} ms, max ${f.max} ms, ${f.early} early of ${f.jobs}`)
      }
      const fromStep = latenessFigures(all.map((x) => ({ due: x.startedAt + x.ms, started: x.wokeAt })))
      const fromCall = latenessFigures(all.map((x) => ({ due: x.sleepAt + x.ms, started: x.wokeAt })))
      return {
        ...settings.w2,
        rounds: reps,
        fromStep,
        fromCall,
        stepToCallP50: percentile(all.map((x) => x.sleepAt - x.startedAt), 50),
        samples: all.map((x) => [x.ms, x.wokeAt - (x.startedAt + x.ms), x.wokeAt - (x.sleepAt + x.ms)]),
        ...(impl.workflows === undefined ? {} : { engineTimers: peerSleepTimers(impl.workflows.WF_SLEEPER.name, all) })
      }
    }

    /** W3: sendEvent (the driver's call) -> the waiting workflow's own resume. */
    const runW3 = async (impl, driver) => {
      const all = []
      let notParked = 0
      for (let rep = 0; rep < reps; rep++) {
        await freshWorkerd(impl)
        const run = await driver("w3", { prefix: fresh(impl.key, "w3"), ...settings.w3 })
        if (run.missing > 0 || run.samples.length < run.n) {
          throw new Error(`W3 ${impl.label}: ${run.samples.length} of ${run.n} resumed; ${run.notParked} never parked; failed ${JSON.stringify(run.failed)}; stuck ${JSON.stringify(run.stuck)}`)
        }
        notParked += run.notParked
        all.push(...run.samples)
        const latency = run.samples.map((x) => x.resumedAt - x.sentAt)
        log(`W3 ${impl.label} rep ${rep + 1}: sendEvent -> resumed p50 ${percentile(latency, 50)} ms, max ${Math.max(...latency)} ms (all parked after ${run.armedMs} ms)`)
      }
      const latency = all.map((x) => x.resumedAt - x.sentAt)
      const ack = all.map((x) => x.ackAt - x.sentAt)
      return {
        ...settings.w3,
        rounds: reps,
        samples: all.length,
        notParked,
        p50: percentile(latency, 50),
        p99: percentile(latency, 99),
        max: Math.max(...latency),
        min: Math.min(...latency),
        // Before the send: resumed before the driver's call (an event taken early); must be 0.
        beforeSend: latency.filter((ms) => ms < 0).length,
        ackP50: percentile(ack, 50),
        ackP99: percentile(ack, 99),
        latencies: latency
      }
    }

    /**
     * W4 (library): `small` then `large` sleepers of an hour, each size in its own object; the isolate's heap
     * (as B4: after a full collection, through workerd's inspector) before and after each seeding; then one wake-up
     * at a time among them (`probes` sleepers of probeMs, one after another) and workerd's CPU while they run.
     */
    const runW4 = async (impl, driver) => {
      const w4 = settings.w4
      await freshWorkerd(impl)
      const inspector = await Inspector.connect(inspectorPort, impl.worker)
      try {
        const sizes = {}
        let heap = await inspector.heapUsed()
        const heapAtStartMB = round(heap / 2 ** 20)
        for (const n of [w4.small, w4.large]) {
          const name = fresh(impl.worker, `W4-${n}`)
          const prefix = fresh(impl.key, `w4-${n}`)
          const t0 = Date.now()
          for (let start = 0; start < n; start += w4.seedCall) {
            await driver("w4seed", { name, prefix, start, count: Math.min(w4.seedCall, n - start), batch: w4.batch })
          }
          const seedMs = Date.now() - t0
          const after = await inspector.heapUsed()
          const cpu0 = workerdCpuMs()
          const probe = await driver("w4probe", { name, prefix: `${prefix}-probe`, probes: w4.probes, probeMs: w4.probeMs })
          const cpu1 = workerdCpuMs()
          const lateness = latenessFigures(probe.samples.map((x) => ({ due: x.startedAt + x.ms, started: x.wokeAt })))
          sizes[n] = {
            sleeping: n,
            seedMs,
            heapBeforeMB: round(heap / 2 ** 20),
            heapAfterMB: round(after / 2 ** 20),
            growthMB: round((after - heap) / 2 ** 20),
            bytesPerInstance: round((after - heap) / n, 0),
            probes: probe.samples.length,
            lateness,
            createP50Ms: percentile(probe.samples.map((x) => x.createMs), 50),
            statementsPerProbe: probe.statementsPerProbe === null ? null : round(probe.statementsPerProbe, 1),
            cpuMsPerProbe: cpu0 === null || cpu1 === null ? null : round((cpu1 - cpu0) / probe.samples.length, 2)
          }
          heap = after
          log(`W4 ${impl.label} ${n} sleeping: seeded in ${seedMs} ms, heap +${sizes[n].growthMB} MB; one wake-up: lateness p50 ${lateness.p50} ms, create p50 ${sizes[n].createP50Ms} ms, ${sizes[n].statementsPerProbe} statements and workerd CPU ${sizes[n].cpuMsPerProbe} ms per probe`)
        }
        const small = sizes[w4.small]
        const large = sizes[w4.large]
        return {
          ...w4,
          heapAtStartMB,
          sizes,
          ratios: {
            wakeLatenessP50: small.lateness.p50 > 0 ? round(large.lateness.p50 / small.lateness.p50, 2) : null,
            createP50: small.createP50Ms > 0 ? round(large.createP50Ms / small.createP50Ms, 2) : null,
            statementsPerProbe: small.statementsPerProbe > 0 && large.statementsPerProbe !== null ? round(large.statementsPerProbe / small.statementsPerProbe, 2) : null,
            cpuPerProbe: small.cpuMsPerProbe > 0 && large.cpuMsPerProbe !== null ? round(large.cpuMsPerProbe / small.cpuMsPerProbe, 2) : null
          }
        }
      } finally {
        inspector.close()
      }
    }

    const runners = { W1: runW1, W2: runW2, W3: runW3, W4: runW4 }
    for (const scenario of ["W1", "W2", "W3", "W4"]) {
      for (const impl of WORKFLOW_IMPLEMENTATIONS) {
        if (!available(impl, scenario)) continue
        try {
          wFigure(scenario, impl.key, await runners[scenario](impl, driverOf(impl)))
        } catch (error) {
          // One implementation failing its scenario leaves the other's rows: the error is reported in its cell.
          log(`${scenario} ${impl.label} failed: ${error.message ?? error}`)
          wFigure(scenario, impl.key, { error: String(error.message ?? error).slice(0, 2_000) })
          failed = true
        }
      }
      if (scenario === "W1" && w.W1?.peer?.ms !== undefined) w.W1.peer.storage = peerStorage("bench-ten", 10)
    }
    Object.assign(results.scenarios, w)
  }
} catch (error) {
  failed = true
  console.error(error)
} finally {
  await mf.dispose().catch(() => undefined)
  fs.rmSync(persist, { recursive: true, force: true })
}

// The rest of the peers' scenarios, once workerd is gone: pg-boss's J1 (minutes at 10 000 jobs
// without its batch tuning: run once), and J2/J3 of both.
if (usePeers && !failed) {
  const rest = settings.jobsPeer.only.filter(wanted)
  const peerRuns = [
    ["pgboss", rest],
    ["bullmq", rest.filter((scenario) => scenario !== "J1")]
  ].filter(([key]) => settings.jobsPeer.peers.includes(key))
  for (const [key, scenarios] of peerRuns) {
    if (scenarios.length === 0 || jobsPeer.skipped(key) || !ensureJobsPeer()) continue
    try {
      jobsPeer.add(runJobsPeer(scenarios, [key]))
    } catch (error) {
      jobsPeer.add({ error: String(error.message ?? error) })
    }
  }
  // BullMQ's limiter held to the same bound by the same code: a bucket of capacity max refilled at max per duration.
  const limiter = results.jobsPeer?.peers?.bullmq?.J2
  if (results.scenarios.J2 !== undefined && limiter?.startOffsetsMs?.length > 0) {
    const limit = { capacity: limiter.limiter.max, refillPerSecond: (limiter.limiter.max * 1_000) / limiter.limiter.durationMs }
    results.scenarios.J2.bullmq = {
      limit,
      kind: limiter.limiter.kind,
      concurrency: limiter.concurrency,
      queued: limiter.queued,
      runMs: limiter.runMs,
      ...bucketFigures(limiter.startOffsetsMs, limit, { runMs: limiter.runMs, windowsMs: settings.j2.windowsMs })
    }
  }
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
    row("B1", "end-to-end ms, library's batch API (median)", fmt(batched.totalMs, 0), "-", fmt(floor.totalMs, 0), `${fmt(batchVsFloor, 2)}x floor time`, "<= 2x floor", batchVsFloor <= 2)
    goals.push({ goal: "B1 batch API <= 2x floor time", value: round(batchVsFloor, 2), met: batchVsFloor <= 2 })
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
  // The goal is the quick start's whole worker, as `wrangler deploy --dry-run` reports it to its user.
  row("B6", "README quick start worker, KiB gzip", fmt(b.quickStart.gzipKib, 1), "", fmt(b.baseline.gzipKib, 2), "floor col = no library", "<= 150 KiB", b.quickStart.gzipKib <= 150)
  row("B6", "quick start's library share, KiB gzip", fmt(b.quickStart.shareGzipKib, 1), "", "0", "", "", undefined)
  row("B6", "minimal worker, KiB gzip", fmt(b.library.gzipKib, 1), fmt(b.peer.gzipKib, 1), fmt(b.baseline.gzipKib, 2), "floor col = no library", "", undefined)
  row("B6", "library share, KiB gzip", fmt(b.library.shareGzipKib, 1), fmt(b.peer.shareGzipKib, 1), "0", `${fmt(b.library.shareGzipKib / b.peer.shareGzipKib, 2)}x peer`, "", undefined)
  goals.push({ goal: "B6 quick start <= 150 KiB gz", value: b.quickStart.gzipKib, met: b.quickStart.gzipKib <= 150 })
}
// Job queues: the library against BullMQ and pg-boss (bench/jobs-peer), when it ran.
const jobRows = []
const jobRow = (scenario, metric, library, bullmq, pgboss, goal, met) =>
  jobRows.push({ scenario, metric, library, BullMQ: bullmq, "pg-boss": pgboss, goal, met: met === undefined ? "" : met ? "yes" : "NO" })
/** A peer's figure for the table: the value, or why there is none. */
const peerFigure = (key, scenario, pick) => {
  const run = results.jobsPeer
  if (run === undefined) return "-"
  const peer = run.peers?.[key]
  if (peer === undefined) return run.errors === undefined ? "-" : "error"
  if (peer.skipped !== undefined) return "skipped"
  const figures = peer[scenario]
  if (figures === undefined) return peer.error === undefined ? "-" : "error"
  if (figures.error !== undefined) return "error"
  if (figures.supported === false) return "no limiter"
  return pick(figures)
}
const numeric = (value) => typeof value === "number" ? value : undefined
const lateness = (f) => `${fmt(f.p50, 0)} / ${fmt(f.p99, 0)} / ${fmt(f.max, 0)}`
if (s.J1) {
  const lib = s.J1.library
  const bullmq = numeric(peerFigure("bullmq", "J1", (f) => f.jobsPerSec))
  const vsBullmq = bullmq === undefined ? undefined : lib.jobsPerSec / bullmq
  jobRow(
    "J1",
    `jobs/s, ${lib.n} jobs added in bulks of ${lib.batch}, concurrency ${lib.concurrency}`,
    fmt(lib.jobsPerSec, 0),
    peerFigure("bullmq", "J1", (f) => fmt(f.jobsPerSec, 0)),
    peerFigure("pgboss", "J1", (f) => `${fmt(f.jobsPerSec, 0)}${f.batched?.jobsPerSec === undefined ? "" : ` (batched ${fmt(f.batched.jobsPerSec, 0)})`}`),
    ">= BullMQ",
    vsBullmq === undefined ? undefined : vsBullmq >= 1
  )
  jobRow("J1", "first add to last completion, ms (median)", fmt(lib.ms, 0), peerFigure("bullmq", "J1", (f) => fmt(f.ms, 0)), peerFigure("pgboss", "J1", (f) => fmt(f.ms, 0)), "", undefined)
  jobRow("J1", "of which adding (sequential bulks), ms", fmt(lib.addMs, 0), peerFigure("bullmq", "J1", (f) => fmt(f.addMs, 0)), peerFigure("pgboss", "J1", (f) => fmt(f.addMs, 0)), "", undefined)
  jobRow("J1", "library alone: adding into a paused queue / draining after resume, ms", `${fmt(lib.split.addMs, 0)} / ${fmt(lib.split.drainMs, 0)}`, "-", "-", "", undefined)
  jobRow("J1", "same statements, no library (SQL floor): all / of which inserts, ms", `${fmt(lib.sqlFloor.ms, 0)} / ${fmt(lib.sqlFloor.insertMs, 0)}`, "-", "-", "", undefined)
  if (vsBullmq !== undefined) goals.push({ goal: "J1 >= BullMQ's jobs/s", value: round(vsBullmq, 2), met: vsBullmq >= 1 })
}
if (s.J8) {
  const lib = s.J8.library
  const label = `${lib.n} jobs of ${lib.stepsPerJob} pieces, bulks of ${lib.batch}, concurrency 10`
  jobRow("J8", `jobs/s, ${label}: each piece a durable step`, fmt(lib.steps.jobsPerSec, 0), "-", "-", "", undefined)
  jobRow("J8", `jobs/s, ${label}: the same pieces inline`, fmt(lib.plain.jobsPerSec, 0), "-", "-", "", undefined)
  jobRow("J8", "what one durable step costs, µs (time difference / steps)", fmt(lib.usPerStep, 1), "-", "-", "", undefined)
  jobRow("J8", "SQL statements / transactions per job: steps, inline", `${fmt(lib.steps.statementsPerJob, 2)} / ${fmt(lib.steps.transactionsPerJob, 2)}, ${fmt(lib.plain.statementsPerJob, 2)} / ${fmt(lib.plain.transactionsPerJob, 2)}`, "-", "-", "", undefined)
}
if (s.J9) {
  const lib = s.J9.library
  const label = `${lib.n} trivial jobs, bulks of ${lib.batch}, concurrency 10`
  jobRow("J9", `jobs/s, ${label}: batched (batch.size ${lib.batchSize})`, fmt(lib.batched.jobsPerSec, 0), "-", "-", "", undefined)
  jobRow("J9", `jobs/s, ${label}: one job per call`, fmt(lib.plain.jobsPerSec, 0), "-", "-", "", undefined)
  jobRow("J9", "jobs per handler call: batched, one by one", `${fmt(lib.batched.jobsPerCall, 2)}, ${fmt(lib.plain.jobsPerCall, 2)}`, "-", "-", "", undefined)
  jobRow("J9", "SQL statements / transactions per job: batched, one by one", `${fmt(lib.batched.statementsPerJob, 2)} / ${fmt(lib.batched.transactionsPerJob, 2)}, ${fmt(lib.plain.statementsPerJob, 2)} / ${fmt(lib.plain.transactionsPerJob, 2)}`, "-", "-", "", undefined)
}
if (s.JB) {
  const lib = s.JB.library
  for (const action of ["cancel", "remove"]) {
    const f = lib[action]
    jobRow("JB", `bulk ${action} of ${lib.n} waiting jobs, ${lib.limit} per call: ms (median) / calls / transactions`, `${fmt(f.ms, 0)} / ${f.calls} / ${f.transactions}`, "-", "-", "", undefined)
    jobRow("JB", `bulk ${action}: SQL statements per job`, fmt(f.statementsPerJob, 2), "-", "-", "", undefined)
  }
}
if (s.J2) {
  const bullmq = s.J2.bullmq
  for (const [queue, figures] of Object.entries(s.J2.library)) {
    const { capacity, refillPerSecond } = figures.limit
    // BullMQ's limiter is set as the "j2" bucket (10 per second); nothing matches the faster one.
    const peer = (pick) => queue === "j2" ? (bullmq === undefined ? peerFigure("bullmq", "J2", () => "-") : pick(bullmq)) : "-"
    const pgboss = queue === "j2" ? peerFigure("pgboss", "J2", () => "-") : "-"
    const label = `bucket ${capacity} + ${refillPerSecond}/s`
    const window = (w) => `${w.startedFromFirst}/${w.bound} (${fmt(w.ratioFromFirst, 3)})`
    for (const [t, w] of Object.entries(figures.windows)) {
      jobRow(
        "J2",
        `${label}: started in [first, first + ${Number(t) / 1000} s] / bound C + r*t`,
        window(w),
        peer((f) => f.windows[t] === undefined ? "-" : window(f.windows[t])),
        pgboss,
        ">= 0.95, <= 1",
        w.ratioFromFirst >= 0.95 && w.ratioFromFirst <= 1
      )
    }
    jobRow(
      "J2",
      `${label}: most started in any window / bound (worst of ${Object.keys(figures.windows).map((t) => `${Number(t) / 1000} s`).join(", ")})`,
      fmt(figures.worstRatio, 3),
      peer((f) => fmt(f.worstRatio, 3)),
      pgboss,
      "<= 1",
      figures.worstRatio <= 1
    )
    jobRow("J2", `${label}: started per second from the first`, figures.perSecond.join(" "), peer((f) => f.perSecond.join(" ")), "-", "", undefined)
    const met = figures.worstRatio <= 1 && figures.minRatioFromFirst >= 0.95
    goals.push({ goal: `J2 ${label}: never above the bound, >= 95 % of it`, value: { worst: figures.worstRatio, min: figures.minRatioFromFirst }, met })
  }
}
if (s.J2?.keyed) {
  const k = s.J2.keyed
  const label = `by key (limit ${k.limit.limit}, total ${k.limit.total}; ${k.keys} keys, the hot one ${k.hot} jobs, the others ${k.each})`
  jobRow("J2", `${label}: most running for one key / in all`, `${k.mostRunningPerKey} / ${k.mostRunning}`, "-", "-", `<= ${k.limit.limit} / ${k.limit.total}`, k.mostRunningPerKey <= k.limit.limit && k.mostRunning <= k.limit.total)
  goals.push({ goal: `J2 ${label}: running per key never above the limit`, value: k.mostRunningPerKey, met: k.mostRunningPerKey <= k.limit.limit })
  jobRow("J2", `${label}: share of starts per key while every key has work waiting (first ${k.fairWindow} starts)`, Object.entries(k.shares).map(([key, share]) => `${key} ${share}`).join(", "), "-", "-", "", undefined)
  jobRow("J2", `${label}: worst deviation of a key's share from equal`, fmt(k.worstDeviation, 3), "-", "-", "<= 0.10", k.worstDeviation <= 0.1)
  goals.push({ goal: `J2 ${label}: shares within 10 % of equal among keys with work waiting`, value: k.worstDeviation, met: k.worstDeviation <= 0.1 })
  jobRow("J2", `${label}: SQL statements / transactions per job`, `${fmt(k.statementsPerJob, 2)} / ${fmt(k.transactionsPerJob, 2)}`, "-", "-", "", undefined)
}
if (s.J3) {
  for (const [label, f] of Object.entries(s.J3.library)) {
    const peerKey = label === "idle" ? "idle" : label === "load" ? "load" : undefined
    const pick = (g) => (figures) => {
      const chosen = peerKey === "idle" ? figures.idle : figures
      return chosen === undefined || chosen.error !== undefined ? "error" : g(chosen)
    }
    const met = f.p99 <= 10 && f.early === 0
    jobRow(
      "J3",
      `lateness p50 / p99 / max ms, jobs due 0.5-2.5 s ahead (${label}; library: ${f.rounds} x ${f.jobs / f.rounds} pooled)`,
      lateness(f),
      peerKey ? peerFigure("bullmq", "J3", pick(lateness)) : "-",
      peerKey ? peerFigure("pgboss", "J3", pick(lateness)) : "-",
      "p99 <= 10 ms",
      met
    )
    jobRow(
      "J3",
      `started early (${label})`,
      `${f.early}/${f.jobs}`,
      peerKey ? peerFigure("bullmq", "J3", pick((g) => `${g.early}/${g.jobs}`)) : "-",
      peerKey ? peerFigure("pgboss", "J3", pick((g) => `${g.early}/${g.jobs}`)) : "-",
      "0",
      f.early === 0
    )
    goals.push({ goal: `J3 (${label}) p99 <= 10 ms, never early`, value: { p99: f.p99, early: f.early }, met })
  }
}
if (s.J4) {
  const lib = s.J4.library
  jobRow("J4", "SQL statements per completed job (J1 workload)", fmt(lib.statementsPerJob, 2), "-", "-", "<= 4", lib.statementsPerJob <= 4)
  for (const kind of ["insert", "claim", "complete", "read", "other"]) {
    jobRow("J4", `  of which ${kind}`, fmt(lib.kinds[kind].statements, 2), "-", "-", "", undefined)
  }
  jobRow("J4", "rows written per job (workerd count)", fmt(lib.rowsWrittenPerJob, 2), "-", "-", "", undefined)
  jobRow("J4", "transactions / alarm writes per job", `${fmt(lib.transactionsPerJob, 2)} / ${fmt(lib.alarmWritesPerJob, 3)}`, "-", "-", "", undefined)
  goals.push({ goal: "J4 <= 4 statements per job", value: lib.statementsPerJob, met: lib.statementsPerJob <= 4 })
}

// Fanout (F1): the library beside the raw-SQL floor, in the main table (no peer runs fanout).
if (s.F1) {
  const lib = s.F1.library, floor = s.F1.floor
  row("F1", `fanout deliveries/s, ${lib.n} messages to ${lib.targets} targets`, fmt(lib.deliveriesPerSec, 0), "-", fmt(floor.deliveriesPerSec, 0), `${fmt(lib.deliveriesPerSec / floor.deliveriesPerSec, 2)}x floor`, "", undefined)
  row("F1", "statements per message (all targets)", fmt(lib.statementsPerMessage, 2), "-", fmt(floor.statementsPerMessage, 2), `${fmt(lib.statementsPerMessage / floor.statementsPerMessage, 2)}x floor`, "", undefined)
  row("F1", "rows written per message (workerd count)", fmt(lib.rowsWrittenPerMessage, 2), "-", fmt(floor.rowsWrittenPerMessage, 2), "", "", undefined)
  row("F1", "transactions / alarm writes per message", `${fmt(lib.transactionsPerMessage, 2)} / ${fmt(lib.alarmWritesPerMessage, 3)}`, "-", `${fmt(floor.transactionsPerMessage, 2)} / ${fmt(floor.alarmWritesPerMessage, 3)}`, "", "", undefined)
  if (typeof lib.cpuUsPerDelivery === "number") {
    row("F1", "workerd CPU / wall time per delivery, µs", `${fmt(lib.cpuUsPerDelivery, 1)} / ${fmt(lib.wallUsPerDelivery, 1)}`, "-", `${fmt(floor.cpuUsPerDelivery, 1)} / ${fmt(floor.wallUsPerDelivery, 1)}`, "", "", undefined)
  }
  const onReturn = s.F1.libraryOnReturn
  if (onReturn !== undefined) {
    row("F1", "deliveries/s, consumers settling by ackOnReturn", fmt(onReturn.deliveriesPerSec, 0), "-", fmt(floor.deliveriesPerSec, 0), `${fmt(onReturn.deliveriesPerSec / floor.deliveriesPerSec, 2)}x floor`, "", undefined)
    row("F1", "statements / transactions per message, by ackOnReturn", `${fmt(onReturn.statementsPerMessage, 2)} / ${fmt(onReturn.transactionsPerMessage, 2)}`, "-", `${fmt(floor.statementsPerMessage, 2)} / ${fmt(floor.transactionsPerMessage, 2)}`, "", "", undefined)
  }
}

// Jobs beyond one object (J5–J7): the library alone (no peer runs these).
const externalRows = []
const externalRow = (scenario, metric, value, goal, met) =>
  externalRows.push({ scenario, metric, library: value, goal, met: met === undefined ? "" : met ? "yes" : "NO" })
if (s.J5) {
  const lib = s.J5.library
  externalRow("J5", `jobs/s through the Queues path, ${lib.n} jobs added in bulks of ${lib.batch} (median)`, fmt(lib.jobsPerSec, 0), "", undefined)
  externalRow("J5", "first add to last completion, ms (runs)", `${fmt(lib.ms, 0)} (${lib.runsMs.join(" / ")})`, "", undefined)
  externalRow("J5", "of which adding, ms", fmt(lib.addMs, 0), "", undefined)
  externalRow("J5", "SQL statements / transactions per job in the object (first run; counts() polls apart)", `${fmt(lib.statements.statementsPerJob, 2)} / ${fmt(lib.statements.transactionsPerJob, 2)}`, "", undefined)
  const delivered = lib.consumerBatches.reduce((sum, c) => ({ batches: sum.batches + c.batches, messages: sum.messages + c.messages }), { batches: 0, messages: 0 })
  externalRow("J5", "messages per consumer batch (mean over the runs)", fmt(delivered.messages / delivered.batches, 1), "", undefined)
  if (lib.profiled !== undefined) {
    externalRow("J5", "isolate busy per job, µs, and share of the run (one profiled run)", `${fmt(lib.profiled.busyUsPerJob, 0)} (${fmt(lib.profiled.busyShare * 100, 0)} %)`, "", undefined)
  }
}
if (s.J6) {
  for (const [label, v] of Object.entries(s.J6.library)) {
    externalRow(
      "J6",
      `${label}: wall / workerd CPU per job, µs (${v.n} jobs, bulks of ${v.batch})`,
      `${fmt(v.wallUsPerJob, 0)} / ${fmt(v.cpuUsPerJob, 0)}`,
      "",
      undefined
    )
    externalRow("J6", `${label}: SQL statements / transactions / alarm writes per job`, `${fmt(v.statementsPerJob, 2)} / ${fmt(v.transactionsPerJob, 3)} / ${fmt(v.alarmWritesPerJob, 3)}`, "", undefined)
    if (v.profiled !== undefined) externalRow("J6", `${label}: isolate busy per job, µs (CPU profile, median of ${v.profiled.runsBusyMs.length})`, fmt(v.profiled.busyUsPerJob, 0), "", undefined)
  }
  const r = s.J6.ratios
  const shards = s.J6.library[Object.keys(s.J6.library)[2]].shards
  externalRow("J6", `${shards} shards / one object: workerd CPU (wall; isolate busy)`, `${fmt(r.cpu, 2)} (${fmt(r.wall, 2)}; ${fmt(r.isolateBusy, 2)})`, "<= 1.2", r.cpu === null ? undefined : r.cpu <= 1.2)
  goals.push({ goal: "J6 sharded CPU per job <= 1.2x one object", value: r, met: r.cpu !== null && r.cpu <= 1.2 })
}
if (s.J7) {
  for (const [label, f] of Object.entries(s.J7.library)) {
    const met = f.missing === 0 && f.p99 !== null && f.p99 <= 50 && f.early === 0
    externalRow("J7", `lease end -> leasable again p50 / p99 / max ms (${label}; ${f.rounds} rounds, ${f.jobs} jobs, leaseMs ${f.leaseMs})`, `${fmt(f.p50, 0)} / ${fmt(f.p99, 0)} / ${fmt(f.max, 0)}`, "p99 <= 50 ms", met)
    externalRow("J7", `not leasable again within ${f.timeoutMs} ms of the last lease end (${label})`, `${f.missing}/${f.jobs}`, "0", f.missing === 0)
    externalRow("J7", `leasable before the lease ended (${label})`, `${f.early}/${f.reclaimed}`, "0", f.early === 0)
    goals.push({ goal: `J7 (${label}) p99 <= 50 ms after expiry, never early`, value: { p99: f.p99, missing: f.missing, early: f.early }, met })
  }
}

// The inspector's cost (I1): one column per object size.
const inspectorRows = []
if (s.I1) {
  const lib = s.I1.library
  const columns = Object.fromEntries(lib.sizes.map((n) => [`N=${n}`, ""]))
  const inspectorRow = (metric, cell) =>
    inspectorRows.push({ scenario: "I1", metric, ...Object.fromEntries(lib.sizes.map((n) => [`N=${n}`, cell(n)])) })
  const wall = (f) => `${fmt(f.p50Ms, 1)} / ${fmt(f.p99Ms, 1)} (${fmt(f.cpuMsPerRequest, 1)})`
  for (const label of Object.keys(lib.requests[lib.sizes[0]])) {
    inspectorRow(`${label}, HTTP: wall p50 / p99 ms (workerd CPU ms)`, (n) => wall(lib.requests[n][label].http))
    inspectorRow(`${label}, RPC alone: wall p50 / p99 ms (workerd CPU ms)`, (n) => wall(lib.requests[n][label].rpc))
    inspectorRow(`${label}: response bytes, HTTP / RPC`, (n) => `${lib.requests[n][label].http.bytes} / ${lib.requests[n][label].rpc.bytes}`)
  }
  for (const [label, c] of Object.entries(lib.cold)) {
    inspectorRows.push({
      scenario: "I1",
      metric: `${label}: first cycle / cold p50 / second / warm p50 ms (CPU ms per reset + 2 requests; warm)`,
      ...columns,
      [`N=${lib.sizes[0]}`]: `${fmt(c.firstCycleMs, 0)} / ${fmt(c.coldP50Ms, 1)} / ${fmt(c.secondP50Ms, 1)} / ${fmt(c.warm.p50Ms, 1)} (${fmt(c.cpuMsPerCycle, 1)}; ${fmt(c.warm.cpuMsPerRequest, 1)})`
    })
  }
  inspectorRows.push({ scenario: "I1", metric: "loopback hop alone (GET /noop): wall p50 / p99 ms (workerd CPU ms)", ...columns, [`N=${lib.sizes[0]}`]: wall(lib.noop) })
}
// The sparse shape (issue 26): its own rows, one object per size, with the issue's goals.
const sparseRows = []
for (const [n, f] of Object.entries(s.I1?.library.sparse ?? {})) {
  const wall = (b) => `${fmt(b.p50Ms, 1)} / ${fmt(b.p99Ms, 1)} (${fmt(b.cpuMsPerRequest, 1)})`
  const overviewMet = f.overviewHttp.p50Ms <= 10
  const ratioMet = f.ratio <= 2
  const row = (metric, value, goal = "", met = undefined) =>
    sparseRows.push({ scenario: "I1", metric: `sparse N=${n} ${metric}`, value, goal, met: met === undefined ? "" : met ? "yes" : "**no**" })
  row("overview HTTP: wall p50 / p99 ms (workerd CPU ms)", wall(f.overviewHttp), "p50 <= 10 ms", overviewMet)
  row("overview RPC alone: wall p50 / p99 ms (workerd CPU ms)", wall(f.overviewRpc))
  if (f.overviewHttpAgain !== undefined) row("overview HTTP again, all sparse objects seeded: wall p50 / p99 ms (workerd CPU ms)", wall(f.overviewHttpAgain))
  row(
    `job detail alone p50 / with ${f.detailWithPollers.pollers} overview pollers p50 ms (ratio)`,
    `${fmt(f.detailAlone.p50Ms, 1)} / ${fmt(f.detailWithPollers.p50Ms, 1)} (${fmt(f.ratio, 2)}x)`,
    "<= 2x",
    ratioMet
  )
  row(
    `while polled: detail p99 ms; overviews served, their p50 / p99 ms`,
    `${fmt(f.detailWithPollers.p99Ms, 1)}; ${f.detailWithPollers.served}, ${fmt(f.detailWithPollers.polledP50Ms, 1)} / ${fmt(f.detailWithPollers.polledP99Ms, 1)}`
  )
  row(
    `control: job detail with ${f.detailWithDetailPollers.pollers} detail pollers p50 ms (ratio; detail p99)`,
    `${fmt(f.detailWithDetailPollers.p50Ms, 1)} (${fmt(f.controlRatio, 2)}x; ${fmt(f.detailWithDetailPollers.p99Ms, 1)})`
  )
  row("jobs page state=failed (none of the N): wall p50 / p99 ms (workerd CPU ms)", wall(f.failedPage))
  goals.push(
    { goal: `I1 sparse N=${n} overview p50 <= 10 ms`, value: f.overviewHttp.p50Ms, met: overviewMet },
    { goal: `I1 sparse N=${n} detail with ${f.detailWithPollers.pollers} pollers <= 2x alone`, value: f.ratio, met: ratioMet }
  )
}

// The retained log (L1): the library beside its raw-SQL floor.
const logRows = []
if (s.L1) {
  const { floor, library } = s.L1
  const logRow = (metric, key, digits) =>
    logRows.push({ scenario: "L1", metric, library: fmt(library[key], digits), floor: fmt(floor[key], digits), ratio: fmt(library[key] / floor[key], 2) })
  logRow(`single-record appends/s (n=${s.L1.n}, timed from Node)`, "appendsPerSec", 0)
  logRow(`records read/s (pages of ${s.L1.page})`, "readsPerSec", 0)
  logRow("SQL statements per append (the answered load included)", "statementsPerAppend", 2)
  logRow("rows written per append (indexes included)", "rowsWrittenPerAppend", 2)
  logRow("SQL statements per record read", "statementsPerRecordRead", 3)
}

// Workflows (W1–W4): the library beside Cloudflare Workflows run locally (the peer); "not built" while the
// library's worker does not bundle, "error" when a run failed (its message in the JSON).
const workflowRows = []
const workflowRow = (scenario, metric, cell, goal = "", met = undefined) =>
  workflowRows.push({
    scenario,
    metric,
    library: cell("library"),
    "library, liveTimers": cell("libraryLive"),
    "CF Workflows (local)": cell("peer"),
    goal,
    met: met === undefined ? "" : met ? "yes" : "NO"
  })
/** A W cell: `pick(figures)`, or why there is none. */
const wCell = (scenario, pick) => (key) => {
  const f = s[scenario]?.[key]
  if (f === undefined) return "-"
  if (f.notBuilt !== undefined) return "not built"
  if (f.error !== undefined) return "error"
  return pick(f)
}
/** Whether every implementation that ran `scenario` meets `test` (undefined when none ran). */
const wMet = (scenario, test) => {
  const ran = ["library", "libraryLive", "peer"].map((key) => s[scenario]?.[key]).filter((f) => f !== undefined && f.notBuilt === undefined && f.error === undefined)
  return ran.length === 0 ? undefined : ran.every(test)
}
if (s.W1) {
  const n = settings.w1.n
  workflowRow("W1", `steps/s, ${n} instances x 10 trivial steps, created in batches of ${settings.w1.batch} (median of ${settings.reps})`, wCell("W1", (f) => fmt(f.stepsPerSec, 0)))
  workflowRow("W1", "first create -> last instance's own return, ms (runs)", wCell("W1", (f) => `${fmt(f.ms, 0)} (${f.runsMs.join(" / ")})`))
  workflowRow("W1", "of which creating, ms; first instance done, ms", wCell("W1", (f) => `${fmt(f.createMs, 0)}; ${fmt(f.firstDoneMs, 0)}`))
  workflowRow("W1", "driver saw the last complete, ms (status polling)", wCell("W1", (f) => fmt(f.lastSeenMs, 0)))
  workflowRow("W1", "workerd CPU per step, µs (every isolate, SQLite)", wCell("W1", (f) => fmt(f.cpuUsPerStep, 0)))
  workflowRow("W1", "SQL statements per step (library: counted, status polls in)", wCell("W1", (f) => f.storage?.statementsPerStep === undefined ? "not observable" : fmt(f.storage.statementsPerStep, 2)))
  workflowRow("W1", "SQL statements per step, the driver's status polls out", wCell("W1", (f) => f.storage?.statementsPerStepWithoutPolls === undefined ? "not observable" : fmt(f.storage.statementsPerStepWithoutPolls, 2)))
  workflowRow("W1", "rows written per step (library: workerd count; peer: rows on disk)", wCell("W1", (f) =>
    f.storage === undefined ? "-" : f.storage.rowsWrittenPerStep !== undefined ? fmt(f.storage.rowsWrittenPerStep, 2) : f.storage.rowsPerStep !== undefined ? fmt(f.storage.rowsPerStep, 2) : "not observable"))
}
if (s.W2) {
  const { minMs, maxMs } = settings.w2
  const met = wMet("W2", (f) => f.fromStep.early === 0)
  workflowRow("W2", `wake-up lateness p50 / p99 / max ms, sleeps ${minMs}-${maxMs} ms (from the step before the sleep)`, wCell("W2", (f) => lateness(f.fromStep)))
  // Code between steps runs again on every replay: where the wake-up replays the body, its Date.now() before the
  // sleep is the replay's (after the wake-up), so the figure says nothing there.
  workflowRow("W2", "the same from the body's sleep call (Date.now() before step.sleep)", wCell("W2", (f) =>
    f.fromCall.p50 < 0 ? "n/a (replayed)" : lateness(f.fromCall)))
  workflowRow("W2", "of which: sleep call -> engine's timer started p50 / p99 ms (peer: engine's own record)", wCell("W2", (f) =>
    f.engineTimers === undefined ? "-" : f.engineTimers.matched === undefined ? "not observable" : `${fmt(f.engineTimers.timerStartAfterCall.p50, 0)} / ${fmt(f.engineTimers.timerStartAfterCall.p99, 0)}`))
  workflowRow("W2", "of which: timer's target -> workflow resumed p50 / p99 ms", wCell("W2", (f) =>
    f.engineTimers === undefined ? "-" : f.engineTimers.matched === undefined ? "not observable" : `${fmt(f.engineTimers.wokeAfterTarget.p50, 0)} / ${fmt(f.engineTimers.wokeAfterTarget.p99, 0)}`))
  workflowRow("W2", "woke early (of samples)", wCell("W2", (f) => `${f.fromStep.early}/${f.fromStep.jobs}`), "0", met)
  const live = s.W2.libraryLive
  if (live?.fromStep?.p99 !== undefined) {
    const liveMet = live.fromStep.p99 <= 10
    workflowRow("W2", "the library with liveTimers: lateness p99 ms", (key) => key === "libraryLive" ? fmt(live.fromStep.p99, 0) : "-", "<= 10", liveMet)
    goals.push({ goal: "W2 wake-up lateness p99 <= 10 ms with liveTimers", value: live.fromStep.p99, met: liveMet })
  }
  if (met !== undefined) goals.push({ goal: "W2 no early wake-up", value: Object.fromEntries(Object.entries(s.W2).map(([k, f]) => [k, f.fromStep?.early ?? null])), met })
}
if (s.W3) {
  workflowRow("W3", `sendEvent -> waiting step resumed p50 / p99 / max ms (${settings.w3.n} parked x ${settings.reps}, sends ${settings.w3.spacingMs} ms apart)`, wCell("W3", (f) => `${fmt(f.p50, 0)} / ${fmt(f.p99, 0)} / ${fmt(f.max, 0)}`))
  workflowRow("W3", "sendEvent call returned p50 / p99 ms", wCell("W3", (f) => `${fmt(f.ackP50, 0)} / ${fmt(f.ackP99, 0)}`))
  workflowRow("W3", "resumed before the send (of samples)", wCell("W3", (f) => `${f.beforeSend}/${f.samples}`), "0", wMet("W3", (f) => f.beforeSend === 0))
  for (const key of ["library", "libraryLive"]) {
    const f = s.W3[key]
    if (f?.p99 === undefined) continue
    workflowRow("W3", `the library${key === "libraryLive" ? " with liveTimers" : ""}: sendEvent -> resumed p99 ms`, (cell) => cell === key ? fmt(f.p99, 0) : "-", "<= 10", f.p99 <= 10)
    goals.push({ goal: `W3 sendEvent -> resumed p99 <= 10 ms (${key})`, value: f.p99, met: f.p99 <= 10 })
  }
}
if (s.W4) {
  const { small, large } = settings.w4
  const at = (n, pick) => wCell("W4", (f) => pick(f.sizes[n]))
  workflowRow("W4", `heap growth MB with ${large} sleeping in one object (bytes per instance)`, at(large, (x) => `${fmt(x.growthMB, 1)} (${fmt(x.bytesPerInstance, 0)})`))
  workflowRow("W4", `heap growth MB with ${small} sleeping (bytes per instance)`, at(small, (x) => `${fmt(x.growthMB, 2)} (${fmt(x.bytesPerInstance, 0)})`))
  for (const n of [small, large]) {
    workflowRow("W4", `one sleeper of ${settings.w4.probeMs} ms among ${n}: lateness p50 / p99 ms; create p50 ms; statements; workerd CPU ms`, at(n, (x) =>
      `${fmt(x.lateness.p50, 0)} / ${fmt(x.lateness.p99, 0)}; ${fmt(x.createP50Ms, 0)}; ${fmt(x.statementsPerProbe, 1)}; ${fmt(x.cpuMsPerProbe, 1)}`))
  }
  const w4 = s.W4.library
  const ratioMet = w4?.ratios === undefined ? undefined : w4.ratios.cpuPerProbe <= 1.2
  workflowRow("W4", `one sleeper, ${large} / ${small}: workerd CPU (statements; create)`, wCell("W4", (f) =>
    `${fmt(f.ratios.cpuPerProbe, 2)} (${fmt(f.ratios.statementsPerProbe, 2)}; ${fmt(f.ratios.createP50, 2)})`), "<= 1.2", ratioMet)
  const heapMet = w4?.sizes?.[large] === undefined ? undefined : w4.sizes[large].growthMB <= 5
  if (heapMet !== undefined) {
    workflowRow("W4", `heap growth with ${large} sleeping, MB`, (key) => key === "library" ? fmt(w4.sizes[large].growthMB, 2) : "-", "<= 5", heapMet)
    goals.push({ goal: `W4 heap growth <= 5 MB with ${large} sleeping`, value: w4.sizes[large].growthMB, met: heapMet })
    goals.push({ goal: "W4 one wake-up at 100 000 / at 1 000 <= 1.2x (workerd CPU)", value: w4.ratios.cpuPerProbe, met: ratioMet })
  }
  workflowRow("W4", `seeding ${large} sleepers, ms`, at(large, (x) => fmt(x.seedMs, 0)))
}

results.goals = goals
results.failed = failed

const render = (headers, body) => {
  const widths = headers.map((h) => Math.max(h.length, ...body.map((r) => String(r[h]).length)))
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(" | ")} |`
  return [line(headers), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...body.map((r) => line(headers.map((h) => r[h])))].join("\n")
}
if (rows.length > 0) results.table = render(["scenario", "metric", "library", "peer", "floor", "ratio", "goal", "met"], rows)
if (jobRows.length > 0) results.jobsTable = render(["scenario", "metric", "library", "BullMQ", "pg-boss", "goal", "met"], jobRows)
if (externalRows.length > 0) results.externalJobsTable = render(["scenario", "metric", "library", "goal", "met"], externalRows)
if (inspectorRows.length > 0) results.inspectorTable = render(Object.keys(inspectorRows[0]), inspectorRows)
if (sparseRows.length > 0) results.inspectorSparseTable = render(["scenario", "metric", "value", "goal", "met"], sparseRows)
if (logRows.length > 0) results.logTable = render(["scenario", "metric", "library", "floor", "ratio"], logRows)
if (workflowRows.length > 0) results.workflowsTable = render(["scenario", "metric", "library", "library, liveTimers", "CF Workflows (local)", "goal", "met"], workflowRows)

fs.mkdirSync(path.dirname(outFile), { recursive: true })
fs.writeFileSync(outFile, `${JSON.stringify(results, null, 2)}\n`)
console.log(`\ndurability bench — ${results.date} — ${results.command}${smoke ? " (smoke: tiny N, figures mean nothing)" : ""}`)
if (results.source !== undefined) {
  console.log(`source: ${results.source.commit}${results.source.srcDirty ? ` with uncommitted src/ changes (diff ${results.source.srcDiffSha1})` : ""}`)
}
const peerServers = Object.values(results.jobsPeer?.peers ?? {}).filter((p) => p.server !== undefined).map((p) => `${p.name} ${p.version} on ${p.server}`)
console.log(
  `machine: ${os.cpus().length} cores, Node ${process.version}, workerd ${results.versions.workerd}` +
    `${results.versions.agents === undefined ? "" : `, agents ${results.versions.agents}`}` +
    `${peerServers.length === 0 ? "" : `, ${peerServers.join(", ")}`}, load ${results.machine.loadAverage.join(" ")}\n`
)
if (results.table !== undefined) console.log(results.table)
if (results.table !== undefined && results.jobsTable !== undefined) console.log("")
if (results.jobsTable !== undefined) console.log(results.jobsTable)
if (results.externalJobsTable !== undefined) {
  if (results.table !== undefined || results.jobsTable !== undefined) console.log("")
  console.log(results.externalJobsTable)
}
if (results.inspectorTable !== undefined) {
  if (results.table !== undefined || results.jobsTable !== undefined || results.externalJobsTable !== undefined) console.log("")
  console.log(results.inspectorTable)
}
if (results.inspectorSparseTable !== undefined) console.log(`\n${results.inspectorSparseTable}`)
if (results.workflowsTable !== undefined) {
  if (results.table !== undefined || results.jobsTable !== undefined || results.externalJobsTable !== undefined || results.inspectorTable !== undefined) console.log("")
  console.log(results.workflowsTable)
  const missing = Object.entries(notBuilt)
  for (const [worker, reason] of missing) console.log(`not built: bench/workers/${worker}.ts (${reason})`)
}
if (results.logTable !== undefined) console.log(`\n${results.logTable}`)
console.log(`\nwritten to ${path.relative(root, outFile)}`)
if (failed) {
  const lines = fs.existsSync(path.join(buildDir, "workerd.log")) ? fs.readFileSync(path.join(buildDir, "workerd.log"), "utf8").split("\n") : []
  console.error(`workerd output (last lines of ${path.join(buildDir, "workerd.log")}):\n${lines.slice(-40).join("\n")}`)
} else {
  fs.rmSync(buildDir, { recursive: true, force: true })
}
if (failed || rows.length + jobRows.length + externalRows.length + inspectorRows.length + workflowRows.length + logRows.length === 0) process.exit(1)
