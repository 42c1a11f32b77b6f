#!/usr/bin/env node
// `npm start`: `wrangler dev` serving every example (examples/index.ts) on http://127.0.0.1:8787, with the
// inspector at /_durability/ behind a development token made for this run (or INSPECTOR_TOKEN from the
// environment). The token reaches the Worker as INSPECTOR_TOKEN through an env file readable by this user
// only (never on wrangler's command line, where `ps` would show it); without it the inspector is off.
// Extra arguments go to `wrangler dev` (an --ip or --port given there replaces the default).
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

const PREFIX = "/_durability"
const args = process.argv.slice(2)
const option = (name, fallback) => {
  const at = args.findIndex((arg) => arg === name || arg.startsWith(`${name}=`))
  if (at < 0) return { value: fallback, given: false }
  const arg = args[at]
  return { value: arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : args[at + 1], given: true }
}

const token = process.env.INSPECTOR_TOKEN || randomBytes(24).toString("base64url")
if (token.length < 16 || !/^[\w.~+/=-]+$/.test(token)) {
  console.error("INSPECTOR_TOKEN must be at least 16 characters of letters, digits and . _ ~ + / = -")
  process.exit(2)
}
const ip = option("--ip", "127.0.0.1")
const port = option("--port", "8787")
const host = ip.value.includes(":") ? `[${ip.value}]` : ip.value
const base = `http://${host}:${port.value}`

console.log([
  "",
  `  durability examples: ${base}/   (curl it for every route)`,
  `  inspector:           ${base}${PREFIX}/`,
  `  inspector token:     ${token}`,
  `  e.g. curl -H "Authorization: Bearer ${token}" ${base}${PREFIX}/api/objects`,
  ""
].join("\n"))

const wrangler = join(dirname(createRequire(import.meta.url).resolve("wrangler/package.json")), "bin", "wrangler.js")
const secrets = mkdtempSync(join(tmpdir(), "durability-start-"))
const envFile = join(secrets, ".env")
writeFileSync(envFile, `INSPECTOR_TOKEN=${token}\n`, { mode: 0o600 })
process.on("exit", () => rmSync(secrets, { recursive: true, force: true }))
const child = spawn(process.execPath, [
  wrangler,
  "dev",
  ...(ip.given ? [] : ["--ip", ip.value]),
  ...(port.given ? [] : ["--port", port.value]),
  "--env-file",
  envFile,
  ...args
], { stdio: "inherit" })

// Ctrl-C reaches wrangler through the terminal; a signal sent to this process alone is passed on.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (child.exitCode === null) child.kill(signal)
  })
}
child.on("exit", (code) => process.exit(code ?? 1))
