/**
 * A/B check of an engine change: the library's B1 drain from two copies of bench/workers (each
 * importing its own ../../src), alternating in one workerd, reporting workerd CPU time per operation
 * (less sensitive to a loaded machine than wall time) and statements per operation.
 *
 *   EXP_A=<copy>/bench/workers EXP_B=bench/workers node bench/ab.mjs [n=1000] [reps=5]
 *
 * The copy must sit inside this repo (e.g. under .wrangler/, which git ignores) so it resolves
 * node_modules; make it with `cp -r src bench .wrangler/exp/` and edit its src.
 */
import { Miniflare } from "miniflare"
import fs from "node:fs"
import { execSync } from "node:child_process"
const dirs = { A: process.env.EXP_A ?? ".wrangler/exp/bench/workers", B: process.env.EXP_B ?? "bench/workers" }
const workers = []
for (const [k, d] of Object.entries(dirs)) {
  execSync(`node_modules/.bin/wrangler deploy --dry-run --outdir /tmp/bq${k} -c ${d}/lib.wrangler.toml`, { stdio: "ignore", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } })
  const file = `/tmp/bq${k}/lib.js`
  workers.push({ name: k, modulesRoot: `/tmp/bq${k}`, modules: [{ type: "ESModule", path: file, contents: fs.readFileSync(file, "utf8") }], compatibilityDate: "2026-03-01",
    durableObjects: { TARGET: { className: "LibBench", useSQLite: true }, TARGET_LIVE: { className: "LibBenchLive", useSQLite: true } } })
}
const mf = new Miniflare({ handleRuntimeStdio(o, e) { o.resume(); e.resume() }, workers })
await mf.ready
const wpid = execSync(`ps -o pid=,comm= --ppid ${process.pid}`).toString().split("\n").find(l => l.includes("workerd")).trim().split(/\s+/)[0]
const cpu = () => { const f = fs.readFileSync(`/proc/${wpid}/stat`, "utf8").split(") ")[1].split(" "); return (Number(f[11]) + Number(f[12])) * 10 }
console.log("workerd pid", wpid)
const n = Number(process.argv[2] ?? 1000), reps = Number(process.argv[3] ?? 5)
const res = { A: [], B: [] }, wall = { A: [], B: [] }
for (const k of ["A", "B"]) await (await mf.getWorker(k)).fetch("http://b/drain", { method: "POST", body: JSON.stringify({ name: "warm", n: 300, batch: 100 }) }).then(r => r.json())
let st = {}
for (let r = 0; r < reps; r++) for (const k of (r % 2 ? ["B", "A"] : ["A", "B"])) {
  const c0 = cpu()
  const j = await (await (await mf.getWorker(k)).fetch("http://b/drain", { method: "POST", body: JSON.stringify({ name: "q" + r, n, batch: 100, ...(process.env.API ? { api: process.env.API } : {}) }) })).json()
  if (j.error) { console.log(k, j.error); process.exit(1) }
  res[k].push((cpu() - c0) * 1000 / n); wall[k].push(j.totalMs * 1000 / n); st[k] = Object.values(j.counts.statements).reduce((a, s) => a + s.n, 0) / n
}
const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]
for (const k of ["A", "B"]) console.log(k, "wall us/op median", med(wall[k]).toFixed(0), "cpu us/op min", Math.min(...res[k]).toFixed(0), "median", med(res[k]).toFixed(0), "stmts/op", st[k].toFixed(2), res[k].map(x => x.toFixed(0)).join(" "))
console.log("B/A median", (med(res.B) / med(res.A)).toFixed(3), "min", (Math.min(...res.B) / Math.min(...res.A)).toFixed(3))
await mf.dispose()
