#!/usr/bin/env node
/**
 * `npm run test:stress`: the whole `npm test` on a saturated machine, several times.
 *
 * A test whose outcome depends on how fast the machine is passes on a quiet laptop and fails in CI
 * next to other work. This script makes the busy machine itself: it starts CPU hogs (one busy-looping
 * Node process per core unless told otherwise, so nothing outside npm is needed), then runs the
 * type-check once and, per run, vitest (both projects), the consumer test and the browser test.
 * It stops the hogs on exit and prints each run's outcome and duration.
 *
 *   node test/stress.mjs [--runs N] [--hogs N] [--shuffle] [--only-vitest] [-- <vitest args>]
 *
 * --runs      how many runs (default 2)
 * --hogs      CPU-bound processes beside the suite (default: the number of cores)
 * --shuffle   vitest's --sequence.shuffle, with a fresh seed per run (printed, so a failure can be replayed
 *             with `npx vitest run --sequence.shuffle --sequence.seed=<seed>`); for order dependence, best with
 *             --hogs 0: beside the hogs a shuffled order can starve vitest 3's own runner, whose worker RPC
 *             gives up after a fixed 60 s ("Timeout calling onTaskUpdate") with every test passed
 * --only-vitest  skip the type-check, the consumer and the browser steps (for a quick look at some test files)
 * Arguments after `--` go to vitest (e.g. a file filter).
 */
import { spawn, spawnSync } from "node:child_process"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

const parse = (argv) => {
  const options = { runs: 2, hogs: os.availableParallelism(), shuffle: false, onlyVitest: false, vitest: [] }
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]
    const number = () => {
      const value = Number(argv[++index])
      if (!Number.isInteger(value) || value < 0) throw new Error(`${arg} takes a non-negative integer`)
      return value
    }
    if (arg === "--") options.vitest = argv.slice(index + 1), index = argv.length
    else if (arg === "--runs") options.runs = number()
    else if (arg === "--hogs") options.hogs = number()
    else if (arg === "--shuffle") options.shuffle = true
    else if (arg === "--only-vitest") options.onlyVitest = true
    else throw new Error(`unknown argument ${arg} (see the comment at the top of test/stress.mjs)`)
  }
  return options
}

const options = parse(process.argv.slice(2))

// A hog is a Node process spinning on the CPU; it has no work to finish, so killing it is its end.
const HOG = "for (;;) {}"
const hogs = Array.from({ length: options.hogs }, () => spawn(process.execPath, ["-e", HOG], { stdio: "ignore" }))
const stopHogs = () => {
  for (const hog of hogs) if (hog.exitCode === null) hog.kill("SIGKILL")
}
process.on("exit", stopHogs)
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(130))

const step = (label, command, args) => {
  const started = Date.now()
  const { status } = spawnSync(command, args, { cwd: root, stdio: "inherit" })
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  console.log(`\n[stress] ${label}: ${status === 0 ? "passed" : `FAILED (exit ${status})`} in ${seconds} s`)
  return { label, ok: status === 0, seconds }
}

console.log(`[stress] ${options.hogs} CPU hog(s) beside the suite on ${os.availableParallelism()} core(s); ${options.runs} run(s)`)
const results = options.onlyVitest ? [] : [step("type-check", "npm", ["run", "--silent", "typecheck"])]
for (let run = 1; run <= options.runs && results.every((result) => result.ok); run++) {
  const seed = Date.now() % 1_000_000_007
  const shuffle = options.shuffle ? ["--sequence.shuffle", `--sequence.seed=${seed}`] : []
  const label = (name) => `run ${run}/${options.runs} ${name}${options.shuffle && name === "vitest" ? ` (seed ${seed})` : ""}`
  const started = Date.now()
  const outcome = [step(label("vitest"), process.execPath, ["node_modules/vitest/vitest.mjs", "run", ...shuffle, ...options.vitest])]
  if (!options.onlyVitest) {
    outcome.push(step(label("consumer"), process.execPath, ["test/consumer/run.mjs"]))
    outcome.push(step(label("browser"), process.execPath, ["test/e2e/inspector.e2e.mjs"]))
  }
  results.push(...outcome, { label: `run ${run}/${options.runs} in all`, ok: outcome.every((o) => o.ok), seconds: ((Date.now() - started) / 1000).toFixed(1) })
}
stopHogs()

console.log("\n[stress] summary (load average at the end: " + os.loadavg().map((load) => load.toFixed(1)).join(" ") + ")")
for (const { label, ok, seconds } of results) console.log(`[stress]   ${ok ? "ok    " : "FAILED"} ${label} (${seconds} s)`)
process.exit(results.every((result) => result.ok) ? 0 : 1)
