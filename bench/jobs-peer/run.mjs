#!/usr/bin/env node
/**
 * Job-queue peers for the benchmark: BullMQ on a local redis-server and pg-boss on a local
 * PostgreSQL, each server started here on its own free loopback port and temp dir, and removed at
 * the end (also on an error, SIGINT or SIGTERM).
 *
 *   node run.mjs [--only J1,J2,J3] [--peers bullmq,pgboss] [--n 10000] [--pgboss-n N]
 *                [--out FILE] [--redis-aof] [--redis-hz N]
 *
 * Progress goes to stderr; stdout gets exactly one JSON object (its shape is in README.md). A peer
 * whose server binaries are missing is reported as `{ skipped }`; a scenario that throws is reported
 * as `{ error }` and makes the exit code 1, and the other figures are still printed.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import fs from "node:fs"
import net from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
if (!fs.existsSync(path.join(here, "node_modules", "bullmq")) || !fs.existsSync(path.join(here, "node_modules", "pg-boss"))) {
  console.error(`jobs-peer: dependencies missing; run \`npm ci\` in ${here} first`)
  process.exit(2)
}

// ---------------------------------------------------------------------------------------------
// Options

const argv = process.argv.slice(2)
const flag = (name) => argv.includes(name)
const option = (name) => {
  const at = argv.indexOf(name)
  return at === -1 ? undefined : argv[at + 1]
}
const positive = (name, fallback) => {
  const raw = option(name)
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} wants a positive integer, got ${raw}`)
  return value
}
const only = option("--only")?.split(",").map((s) => s.trim().toUpperCase())
const wanted = (scenario) => only === undefined || only.includes(scenario)
const peersWanted = option("--peers")?.split(",").map((s) => s.trim().toLowerCase())
const outFile = option("--out")
const redisAof = flag("--redis-aof")
const redisHz = positive("--redis-hz", 10) // Redis's own default

const n = positive("--n", 10_000)
const settings = {
  J1: { n, pgbossN: positive("--pgboss-n", n), batch: 100, concurrency: 10 },
  J2: { max: 10, durationMs: 1_000, runMs: 5_000, queued: 200, concurrency: 10, windowsMs: [1_000, 2_000, 5_000] },
  J3: { jobs: 64, leadMs: 500, spreadMs: 2_000, seed: 0x5eed, loadBatch: 10, loadEveryMs: 100, concurrency: 10 }
}

const log = (...parts) => console.error(`[jobs-peer ${new Date().toISOString().slice(11, 23)}]`, ...parts)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))
const round = (value, digits = 1) => (value === null || value === undefined ? null : Number(value.toFixed(digits)))
// Nearest-rank, the definition bench/run.mjs uses, so merged figures mean the same thing.
const percentile = (values, p) => {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}
// A fresh queue per run: nothing left by an earlier (or failed) run can be counted.
const fresh = (scenario) => `${scenario}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
const versionOf = (pkg) => JSON.parse(fs.readFileSync(path.join(here, "node_modules", pkg, "package.json"), "utf8")).version

/** Resolves once `count()` reaches `target`; rejects after `timeoutMs`. */
const until = async (count, target, timeoutMs, what) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const now = await count()
    if (now >= target) return
    if (Date.now() > deadline) throw new Error(`${what}: ${now}/${target} after ${timeoutMs} ms`)
    await sleep(2)
  }
}

// ---------------------------------------------------------------------------------------------
// Servers: started by this script, torn down on every way out.

const children = new Set()
const tempDirs = new Set()

const removeTemp = (dir) => {
  try {
    fs.rmSync(dir, { recursive: true, force: true })
  } catch {}
  tempDirs.delete(dir)
}

// Last resort for an exit not handled below (a crash, process.exit elsewhere): only sync work here.
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL")
  for (const dir of tempDirs) removeTemp(dir)
})

const stopChild = async (child, signal, graceMs = 10_000) => {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once("exit", resolve))
    child.kill(signal)
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
    await exited
    clearTimeout(timer)
  }
  children.delete(child)
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const isExecutable = (file) => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return fs.statSync(file).isFile()
  } catch {
    return false
  }
}
const onPath = (name, extraDirs = []) => {
  for (const dir of [...(process.env.PATH ?? "").split(path.delimiter), ...extraDirs]) {
    if (dir && isExecutable(path.join(dir, name))) return path.join(dir, name)
  }
  return undefined
}

/** Spawns a server in the foreground, keeping the tail of its output so a failed start can say why. */
const spawnServer = (label, file, args, options = {}) => {
  const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"], ...options })
  children.add(child)
  let output = ""
  const keep = (chunk) => {
    output = (output + chunk.toString()).slice(-4_000)
  }
  child.stdout.on("data", keep)
  child.stderr.on("data", keep)
  child.once("exit", () => children.delete(child))
  return { child, output: () => `${label} output:\n${output}` }
}

/** Polls `probe` until it answers true, failing fast if the server process is gone. */
const waitReady = async (server, probe, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(`server exited during start (${server.child.exitCode ?? server.child.signalCode})\n${server.output()}`)
    }
    try {
      if (await probe()) return
    } catch {}
    if (Date.now() > deadline) throw new Error(`server not ready after ${timeoutMs} ms\n${server.output()}`)
    await sleep(50)
  }
}

const redisPing = (port) =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    const done = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1_000, () => done(false))
    socket.once("connect", () => socket.write("PING\r\n"))
    socket.once("data", (data) => done(data.toString().startsWith("+PONG")))
    socket.once("error", () => done(false))
  })

async function startRedis() {
  // REDIS_SERVER (a path to redis-server) overrides the PATH search.
  const bin = process.env.REDIS_SERVER ?? onPath("redis-server")
  if (bin === undefined || !isExecutable(bin)) return { skipped: `redis-server not ${process.env.REDIS_SERVER ? `at REDIS_SERVER=${bin}` : "on PATH"} (Debian: apt-get install redis-server)` }
  const version = execFileSync(bin, ["--version"]).toString().match(/v=(\S+)/)?.[1] ?? "unknown"
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "jobs-peer-redis-"))
  tempDirs.add(dir)
  const port = await freePort()
  // No RDB snapshots (a fork mid-run would be noise); AOF only with --redis-aof (off by default in
  // Redis too). noeviction is what BullMQ requires.
  const args = [
    "--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
    "--appendonly", redisAof ? "yes" : "no", "--appendfsync", "everysec",
    "--maxmemory-policy", "noeviction", "--hz", String(redisHz), "--daemonize", "no"
  ]
  const server = spawnServer("redis-server", bin, args, { cwd: dir })
  await waitReady(server, () => redisPing(port))
  const persistence = redisAof ? "appendonly, fsync everysec" : "no persistence: AOF off, no snapshots"
  return {
    server: `redis-server ${version} (${persistence}, hz ${redisHz})`,
    port,
    stop: async () => {
      await stopChild(server.child, "SIGTERM")
      removeTemp(dir)
    }
  }
}

/** PostgreSQL refuses to run as root: as root, run it as `nobody` (or a bench user created for it). */
function unprivilegedUser() {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return undefined
  const lookup = (name) => {
    const line = fs.readFileSync("/etc/passwd", "utf8").split("\n").find((l) => l.startsWith(`${name}:`))
    if (line === undefined) return undefined
    const [, , uid, gid] = line.split(":")
    return { uid: Number(uid), gid: Number(gid), name }
  }
  const found = lookup("nobody") ?? lookup("durability-bench")
  if (found !== undefined) return found
  const useradd = onPath("useradd", ["/usr/sbin", "/sbin"]) ?? "useradd"
  execFileSync(useradd, ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "durability-bench"])
  return lookup("durability-bench")
}

/** Whether a user other than the owner can reach `dir` (every ancestor searchable by others). */
const othersCanEnter = (dir) => {
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    if ((fs.statSync(at).mode & 0o001) === 0) return false
    if (path.dirname(at) === at) return true
  }
}

const hasPostgres = (dir) => isExecutable(path.join(dir, "initdb")) && isExecutable(path.join(dir, "postgres"))
function findPostgresBin() {
  // PG_BIN (a directory with initdb and postgres) overrides the search.
  if (process.env.PG_BIN !== undefined) return hasPostgres(process.env.PG_BIN) ? process.env.PG_BIN : undefined
  const initdb = onPath("initdb")
  if (initdb !== undefined) {
    const dir = path.dirname(fs.realpathSync(initdb))
    if (hasPostgres(dir)) return dir
  }
  // Debian keeps the server binaries off PATH, under /usr/lib/postgresql/<major>/bin.
  const debian = "/usr/lib/postgresql"
  const majors = fs.existsSync(debian)
    ? fs.readdirSync(debian).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a))
    : []
  for (const major of majors) {
    const bin = path.join(debian, major, "bin")
    if (hasPostgres(bin)) return bin
  }
  return undefined
}

async function startPostgres() {
  const bin = findPostgresBin()
  if (bin === undefined) {
    const where = process.env.PG_BIN ? `in PG_BIN=${process.env.PG_BIN}` : "on PATH nor under /usr/lib/postgresql/*/bin"
    return { skipped: `PostgreSQL initdb/postgres not ${where} (Debian: apt-get install postgresql)` }
  }
  const pg = (await import("pg")).default
  const version = execFileSync(path.join(bin, "postgres"), ["--version"]).toString().trim()
  const user = unprivilegedUser()
  const asUser = user === undefined ? {} : { uid: user.uid, gid: user.gid }
  // The server's user must reach its directory: a TMPDIR under /root would not do for `nobody`.
  const base = user === undefined || othersCanEnter(os.tmpdir()) ? os.tmpdir() : "/tmp"
  const dir = fs.mkdtempSync(path.join(base, "jobs-peer-pg-"))
  tempDirs.add(dir)
  if (user !== undefined) fs.chownSync(dir, user.uid, user.gid)
  const data = path.join(dir, "data")
  const env = { ...process.env, LC_ALL: "C", LANG: "C", HOME: dir }
  const initdb = spawnSync(path.join(bin, "initdb"), ["-D", data, "-U", "bench", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"], {
    cwd: dir, env, encoding: "utf8", ...asUser
  })
  if (initdb.status !== 0) throw new Error(`initdb failed (${initdb.status ?? initdb.error}):\n${initdb.stderr}`)
  const port = await freePort()
  // TCP on loopback only, no unix socket; durability settings (fsync, synchronous_commit) at their defaults.
  const args = ["-D", data, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="]
  const server = spawnServer("postgres", path.join(bin, "postgres"), args, { cwd: dir, env, ...asUser })
  const connectionString = `postgres://bench@127.0.0.1:${port}/postgres`
  await waitReady(server, async () => {
    const client = new pg.Client({ connectionString })
    try {
      await client.connect()
      await client.query("select 1")
      return true
    } finally {
      await client.end().catch(() => {})
    }
  })
  return {
    server: `${version}${user ? `, run as ${user.name}` : ""} (defaults: fsync on, synchronous_commit on)`,
    connectionString,
    stop: async () => {
      // SIGINT is PostgreSQL's fast shutdown: it does not wait for clients to disconnect.
      await stopChild(server.child, "SIGINT")
      removeTemp(dir)
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Peers. Each adapter's `queue(scenario)` opens a fresh queue with:
//   add(items)            items: [{ data, due? }], one bulk call; `due` (epoch ms) makes it delayed
//   work(onStart, opts)   starts consuming; onStart(data) runs at the start of each job
//   waitCompleted(n, ms)  until n jobs are recorded as completed by the backend
//   close()               stops its workers and deletes the queue and its jobs

async function bullmqPeer(server) {
  const { Queue, Worker } = await import("bullmq")
  const connection = { host: "127.0.0.1", port: server.port, maxRetriesPerRequest: null }
  return {
    name: "BullMQ",
    version: versionOf("bullmq"),
    server: server.server,
    queue(scenario) {
      const name = fresh(scenario)
      const queue = new Queue(name, { connection })
      const workers = []
      let completed = 0
      return {
        add: (items) =>
          queue.addBulk(items.map(({ data, due }) => ({
            name: "job",
            data,
            // delay counts from the add, so it is taken as late as possible to land on `due`.
            opts: due === undefined ? undefined : { delay: Math.max(0, due - Date.now()) }
          }))),
        async work(onStart, { concurrency, limiter }) {
          const worker = new Worker(name, async (job) => onStart(job.data), { connection, concurrency, limiter })
          worker.on("error", (error) => log(`BullMQ ${scenario} worker: ${error.message}`))
          // 'completed' fires once Redis has the job as completed: where a job counts as done.
          worker.on("completed", () => completed++)
          workers.push(worker)
          await worker.waitUntilReady()
        },
        waitCompleted: (count, timeoutMs) => until(() => completed, count, timeoutMs, `BullMQ ${scenario} completions`),
        async close() {
          await Promise.all(workers.map((w) => w.close(true)))
          await queue.obliterate({ force: true }).catch(() => {})
          await queue.close()
        }
      }
    },
    close: async () => {}
  }
}

// pg-boss at its fastest for one job per handler, 10 at a time: pollingIntervalSeconds at its
// minimum (0.5 s; default 2 s), LISTEN/NOTIFY so a send wakes idle workers, and 10 workers of
// batchSize 1 (localConcurrency 10). A worker only re-fetches without sleeping out the poll while
// its fetches come back full *and* the cached ready count exceeds burstWhenReadyExceeds; that cache
// is refreshed by the monitor, every second here (the minimum; default 60 s). Without this, 10
// workers take at most 10 jobs per poll: about 20 jobs/s at 0.5 s.
const PGBOSS_BOSS = {
  useListenNotify: true,
  schedule: false,
  max: 20, // pool: 10 workers + the listener + maintenance, so fetches never wait for a connection
  queueCacheIntervalSeconds: 1,
  monitorIntervalSeconds: 1,
  superviseIntervalSeconds: 1
}
const PGBOSS_WORK = {
  localConcurrency: 10,
  batchSize: 1,
  pollingIntervalSeconds: 0.5,
  notifyPollingIntervalSeconds: 0.5,
  burstWhenReadyExceeds: 1
}
// pg-boss's batch path, also 10 jobs at a time: one worker fetches 10 and completes them together,
// re-fetching at once while fetches come back full (burstWhenBatchFull). Reported beside J1.
const PGBOSS_WORK_BATCHED = {
  localConcurrency: 1,
  batchSize: 10,
  pollingIntervalSeconds: 0.5,
  notifyPollingIntervalSeconds: 0.5,
  burstWhenBatchFull: true
}

async function pgbossPeer(server) {
  const { PgBoss } = await import("pg-boss")
  const boss = new PgBoss({ connectionString: server.connectionString, ...PGBOSS_BOSS })
  boss.on("error", (error) => log(`pg-boss error: ${error.message}`))
  boss.on("warning", (warning) => log(`pg-boss warning: ${warning.message}`))
  const t0 = Date.now()
  await boss.start()
  const startMs = Date.now() - t0
  const db = boss.getDb()
  return {
    name: "pg-boss",
    version: versionOf("pg-boss"),
    server: server.server,
    startMs,
    bossOptions: PGBOSS_BOSS,
    workOptions: PGBOSS_WORK,
    queue(scenario) {
      const name = fresh(scenario)
      const created = boss.createQueue(name, { notify: true })
      let handled = 0
      return {
        async add(items) {
          await created
          // insert() is pg-boss's bulk path: one statement for the whole array. A Date startAfter
          // keeps its milliseconds (a number would mean whole seconds from now).
          await boss.insert(name, items.map(({ data, due }) => (due === undefined ? { data } : { data, startAfter: new Date(due) })))
        },
        async work(onStart, options = PGBOSS_WORK) {
          await created
          await boss.work(name, options, async (batch) => {
            await Promise.all(batch.map(async (job) => onStart(job.data)))
            handled += batch.length
          })
        },
        async waitCompleted(count, timeoutMs) {
          await until(() => handled, count, timeoutMs, `pg-boss ${scenario} handlers`)
          // A handler returning is not the job completed yet: wait for its rows to say so.
          await until(async () => {
            const { rows } = await db.executeSql("select count(*)::int as done from pgboss.job where name = $1 and state = 'completed'", [name])
            return rows[0].done
          }, count, timeoutMs, `pg-boss ${scenario} completions`)
        },
        async close() {
          await created.catch(() => {})
          await boss.offWork(name, { wait: true }).catch(() => {})
          await boss.deleteQueue(name).catch(() => {})
        }
      }
    },
    close: () => boss.stop({ graceful: true, timeout: 5_000, close: true })
  }
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/** Runs `body` on a fresh queue of `peer` and always deletes the queue after. */
const onQueue = async (peer, scenario, body) => {
  const queue = peer.queue(scenario)
  try {
    return await body(queue)
  } finally {
    await queue.close()
  }
}

/** J1: n trivial jobs added in sequential bulks while a 10-wide worker drains them. */
const j1 = (peer, n, workOptions) =>
  onQueue(peer, "j1", async (queue) => {
    const { batch, concurrency } = settings.J1
    await queue.work(() => {}, workOptions ?? { concurrency })
    const t0 = Date.now()
    for (let i = 0; i < n; i += batch) {
      await queue.add(Array.from({ length: Math.min(batch, n - i) }, (_, k) => ({ data: { i: i + k } })))
    }
    const addMs = Date.now() - t0
    await queue.waitCompleted(n, 600_000)
    const ms = Date.now() - t0
    return { n, batch, concurrency, ms, addMs, jobsPerSec: round((n * 1_000) / ms) }
  })

/**
 * J2's figures from job start times. A token bucket of capacity C refilled at r per ms lets at most
 * C + r*t jobs start in any window of length t. BullMQ's limiter is a fixed window, which lets up to
 * 2*max start in a sliding window of one duration (the end of one window and the start of the
 * next), so it is held to the token-bucket bound with C = max and r = max/duration; the plain "most
 * started in any sliding duration, vs max" is given too.
 */
const rateFigures = (starts, { max, durationMs, runMs, windowsMs }) => {
  const t0 = Math.min(...starts)
  const inRun = starts.filter((t) => t < t0 + runMs).sort((a, b) => a - b)
  const perSecond = Array.from({ length: Math.ceil(runMs / 1_000) }, () => 0)
  for (const t of inRun) perSecond[Math.floor((t - t0) / 1_000)]++
  // The busiest half-open window [s, s + t) can be taken to open at a job's start: try each one.
  const busiest = (t) => {
    let most = 0
    for (let i = 0, j = 0; i < inRun.length; i++) {
      while (j < inRun.length && inRun[j] < inRun[i] + t) j++
      most = Math.max(most, j - i)
    }
    return most
  }
  const windows = {}
  let worst = 0
  for (const t of windowsMs) {
    const bound = max + (max / durationMs) * t
    const sliding = busiest(t)
    const fromFirst = inRun.filter((s) => s < t0 + t).length
    windows[t] = {
      bound,
      maxStartedSliding: sliding,
      ratioSliding: round(sliding / bound, 3),
      startedFromFirst: fromFirst,
      ratioFromFirst: round(fromFirst / bound, 3)
    }
    worst = Math.max(worst, sliding / bound)
  }
  const most = busiest(durationMs)
  return {
    started: inRun.length,
    perSecond,
    maxStartedInSlidingDuration: most,
    vsMax: round(most / max, 3),
    windows,
    worstRatio: round(worst, 3),
    // The raw start times (ms after the first), so bench/run.mjs can apply its own windows.
    startOffsetsMs: inRun.map((t) => t - t0)
  }
}

/** J2 (BullMQ): a queue saturated before the worker starts, so the limiter alone sets the pace. */
const j2 = (peer) =>
  onQueue(peer, "j2", async (queue) => {
    const { max, durationMs, runMs, queued, concurrency } = settings.J2
    await queue.add(Array.from({ length: queued }, (_, i) => ({ data: { i } })))
    const starts = []
    await queue.work(() => {
      starts.push(Date.now())
    }, { concurrency, limiter: { max, duration: durationMs } })
    await until(() => starts.length, 1, 10_000, "J2 first start")
    await sleep(starts[0] + runMs + 100 - Date.now())
    return {
      supported: true,
      limiter: { max, durationMs, kind: "fixed window (BullMQ Worker limiter)" },
      concurrency,
      queued,
      runMs,
      ...rateFigures(starts, settings.J2)
    }
  })

/** Small deterministic PRNG (xorshift32): J3's due times are the same on every run and peer. */
const randomFrom = (seed) => {
  let state = seed >>> 0 || 1
  return () => {
    state = (state ^ (state << 13)) >>> 0
    state = (state ^ (state >>> 17)) >>> 0
    state = (state ^ (state << 5)) >>> 0
    return state / 0x1_0000_0000
  }
}

/** J3: delayed jobs' lateness (start - due), with or without immediate jobs on the same queue. */
const j3 = (peer, { load, workOptions }) =>
  onQueue(peer, load ? "j3" : "j3idle", async (queue) => {
    const { jobs, leadMs, spreadMs, seed, loadBatch, loadEveryMs, concurrency } = settings.J3
    const samples = []
    let loadDone = 0
    await queue.work((data) => {
      if (data.due !== undefined) samples.push({ due: data.due, started: Date.now() })
      else loadDone++
    }, workOptions ?? { concurrency })
    const random = randomFrom(seed)
    const now = Date.now()
    const due = Array.from({ length: jobs }, () => now + leadMs + Math.floor(random() * spreadMs))
    // The load runs until the last due time has passed, so every delayed job meets it.
    const end = Math.max(...due) + 200
    let loaded = 0
    const background = (async () => {
      while (load && Date.now() < end) {
        await queue.add(Array.from({ length: loadBatch }, (_, i) => ({ data: { i: loaded + i } })))
        loaded += loadBatch
        await sleep(loadEveryMs)
      }
    })()
    const addStart = Date.now()
    await queue.add(due.map((at, i) => ({ data: { i, due: at }, due: at })))
    const addMs = Date.now() - addStart
    await background
    await until(() => samples.length, jobs, 30_000, "J3 delayed jobs")
    await until(() => loadDone, loaded, 30_000, "J3 background jobs")
    const lateness = samples.map((s) => s.started - s.due)
    const error = lateness.map(Math.abs)
    return {
      jobs,
      p50: percentile(lateness, 50),
      p99: percentile(lateness, 99),
      max: Math.max(...lateness),
      min: Math.min(...lateness),
      early: lateness.filter((ms) => ms < 0).length,
      absP50: percentile(error, 50),
      absP99: percentile(error, 99),
      absMax: Math.max(...error),
      addMs,
      background: load ? { jobs: loaded, batch: loadBatch, everyMs: loadEveryMs } : null
    }
  })

// ---------------------------------------------------------------------------------------------
// Driver

let failed = false
/** Runs one scenario; an exception becomes `{ error }` so that the other figures survive. */
async function measure(label, body) {
  const t0 = Date.now()
  log(`${label} ...`)
  try {
    const figures = await body()
    log(`${label}: ${JSON.stringify(figures)} (${Date.now() - t0} ms)`)
    return figures
  } catch (error) {
    failed = true
    log(`${label} failed: ${error.stack ?? error}`)
    return { error: String(error.message ?? error) }
  }
}

const PEERS = [
  {
    key: "bullmq",
    label: "BullMQ",
    start: startRedis,
    open: bullmqPeer,
    async run(peer, out) {
      if (wanted("J1")) out.J1 = await measure("BullMQ J1", () => j1(peer, settings.J1.n))
      if (wanted("J2")) out.J2 = await measure("BullMQ J2", () => j2(peer))
      if (wanted("J3")) {
        out.J3 = await measure("BullMQ J3", () => j3(peer, { load: true }))
        if (out.J3.error === undefined) out.J3.idle = await measure("BullMQ J3 idle", () => j3(peer, { load: false }))
      }
    }
  },
  {
    key: "pgboss",
    label: "pg-boss",
    start: startPostgres,
    open: pgbossPeer,
    async run(peer, out) {
      if (wanted("J1")) {
        out.J1 = await measure("pg-boss J1", () => j1(peer, settings.J1.pgbossN, PGBOSS_WORK))
        if (out.J1.error === undefined) {
          out.J1.batched = await measure("pg-boss J1 batched", () => j1(peer, settings.J1.pgbossN, PGBOSS_WORK_BATCHED))
          out.J1.batched.workOptions = PGBOSS_WORK_BATCHED
        }
      }
      if (wanted("J2")) {
        // Nothing to measure: saying so beats a number from a different mechanism.
        out.J2 = {
          supported: false,
          reason: "pg-boss 12 has no rate limiter: nothing caps how many queued jobs start per duration.",
          closest:
            "Throttling at send time: sendThrottled(name, data, options, seconds, key) / singletonSeconds admits one job " +
            "per key into each N-second slot and drops the others (send resolves null); sendDebounced / singletonNextSlot " +
            "puts one extra job into the next slot instead (any further ones are dropped). That limits how many jobs get created, not how fast queued jobs " +
            "start. localConcurrency / groupConcurrency cap jobs in flight, which is not a rate either."
        }
      }
      if (wanted("J3")) {
        out.J3 = await measure("pg-boss J3", () => j3(peer, { load: true, workOptions: PGBOSS_WORK }))
        if (out.J3.error === undefined) {
          out.J3.idle = await measure("pg-boss J3 idle", () => j3(peer, { load: false, workOptions: PGBOSS_WORK }))
        }
      }
    }
  }
]

let stopCurrent
const onSignal = (signal) => {
  log(`${signal}: stopping the servers`)
  Promise.resolve(stopCurrent?.())
    .catch(() => {})
    .finally(() => process.exit(signal === "SIGINT" ? 130 : 143))
}
process.once("SIGINT", onSignal)
process.once("SIGTERM", onSignal)

const startedAt = Date.now()
const output = {
  startedAt: new Date(startedAt).toISOString(),
  node: process.version,
  platform: `${os.platform()} ${os.arch()}, ${os.cpus().length} cpus`,
  settings,
  peers: {},
  notes: [
    "J1: clock from the first add to the last job recorded as completed (BullMQ: the worker's 'completed' event; pg-boss: its rows in state 'completed', polled every 2 ms once every handler has returned). Adds are sequential bulks of 100 (BullMQ addBulk, pg-boss insert), with the worker already running.",
    "pg-boss is tuned to its fastest: pollingIntervalSeconds 0.5 (the minimum; default 2), LISTEN/NOTIFY on (useListenNotify + queue notify), 10 workers of batchSize 1 (localConcurrency 10: 10 jobs at a time, as BullMQ's concurrency 10), burstWhenReadyExceeds 1 with the queue stats it reads refreshed every 1 s (the minimum; default 60 s). Without the burst setting each worker sleeps out the poll after every job: about 20 jobs/s (21.7 jobs/s measured on this 2-core machine when the bench was written; not re-measured per run: 10 000 jobs would take ~8 min). J1.batched: one worker, batchSize 10, burstWhenBatchFull (10 jobs handed over and completed together).",
    "J2: BullMQ's limiter is a fixed window (max per duration), not a token bucket: up to 2*max jobs may start in a sliding window of one duration. windows[t].bound = max + (max/duration)*t is the token-bucket bound of capacity max at the same rate; ratio <= 1 means within it. pg-boss has no rate limiter: J2 says so.",
    "J3: 64 delayed jobs due at uniform random offsets in [0.5 s, 2.5 s) from one fixed seed, on the same queue as a background load of 10 immediate jobs every 100 ms; lateness = handler start - due (p50/p99/max signed; abs* are |lateness| as bench/run.mjs B3 reports them). J3.idle: the same without the load. BullMQ: opts.delay, woken by a Redis blocking-command timeout, which Redis checks hz times a second (default 10: up to ~100 ms late; --redis-hz 100 gives ~10 ms). pg-boss: startAfter as a Date (milliseconds kept), but a deferred job is only found by a fetch, and fetches happen on the poll (0.5 s) or when a NOTIFY for a newly added ready job wakes the workers (so the load makes it less late); and when more jobs come due in one poll than there are workers (10), the rest wait for a later poll, which is why J3.idle can exceed 0.5 s.",
    redisAof
      ? "Redis: appendonly yes, appendfsync everysec; PostgreSQL: defaults (fsync on, synchronous_commit on)."
      : "Redis runs without persistence (AOF off, no snapshots; --redis-aof for appendfsync everysec); PostgreSQL with its defaults (fsync on, synchronous_commit on): pg-boss pays a durable commit per fetch and completion, BullMQ does not.",
    `pg-boss ${versionOf("pg-boss")} declares node >= 22.12; this run used ${process.version}.`,
    "The servers, this process and its workers share the machine's cores."
  ]
}

for (const entry of PEERS) {
  if (peersWanted !== undefined && !peersWanted.includes(entry.key)) continue
  const t0 = Date.now()
  let server
  try {
    server = await entry.start()
  } catch (error) {
    failed = true
    log(`${entry.label}: server failed to start: ${error.stack ?? error}`)
    output.peers[entry.key] = { error: `server failed to start: ${error.message ?? error}` }
    continue
  }
  if (server.skipped !== undefined) {
    log(`skip ${entry.label}: ${server.skipped}`)
    output.peers[entry.key] = { skipped: server.skipped }
    continue
  }
  stopCurrent = server.stop
  log(`${entry.label}: ${server.server} up`)
  try {
    const peer = await entry.open(server)
    const { queue, close, ...description } = peer
    const out = (output.peers[entry.key] = { ...description })
    try {
      await entry.run(peer, out)
    } finally {
      await close().catch((error) => log(`${entry.label} close: ${error.message}`))
    }
  } catch (error) {
    failed = true
    log(`${entry.label} failed: ${error.stack ?? error}`)
    output.peers[entry.key] = { ...output.peers[entry.key], error: String(error.message ?? error) }
  } finally {
    await server.stop()
    stopCurrent = undefined
  }
  output.peers[entry.key].wallMs = Date.now() - t0
}

output.wallMs = Date.now() - startedAt
const json = JSON.stringify(output, null, 2)
if (outFile !== undefined) {
  fs.mkdirSync(path.dirname(path.resolve(outFile)), { recursive: true })
  fs.writeFileSync(outFile, `${json}\n`)
}
process.stdout.write(`${json}\n`)
log(`done in ${output.wallMs} ms${outFile ? `, written to ${outFile}` : ""}`)
process.exitCode = failed ? 1 : 0
