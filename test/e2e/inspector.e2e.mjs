#!/usr/bin/env node
/**
 * The inspector end to end in a real browser (last step of `npm test`): `npm start`'s script
 * (examples/start.mjs: `wrangler dev` over every example, the inspector at /_durability/) on a free
 * loopback port with a known token and fresh local state, work seeded through the newsletter
 * example's routes, then Debian's Chromium driven by playwright-core:
 *
 *  1. the page's security headers and script (CSP, no HTML sinks); the API refuses a missing token;
 *  2. a wrong token is refused at sign-in, the right one lets in (no cookie is ever set);
 *  3. a failed job is seen, retried from its page and seen completed (by the page's auto-refresh);
 *  4. the queue is paused from the page and shown paused; a dead letter is redriven; resumed, it completes;
 *     a bulk action (remove by id prefix) runs from the queue's page;
 *  5. `<script>` and attribute-breaking strings stored in a payload, log lines and an error message
 *     appear as text: no element is made from them, nothing runs (`window.__xss` stays undefined),
 *     no dialog opens, no page error, no CSP violation;
 *  6. hostile ids (a bidi override that makes "\u202E1-gnirps" read "spring-1", 512 characters)
 *     show their hidden characters as escapes in the list, the heading and the remove dialog, and
 *     leave the job list's columns on a 1280 px screen; a dialog without a reason field says no "null";
 *  6b. event topics (examples/event-topics): a partition's Log tab (window, cold segment, a consumer's lag) and
 *     Fanout tab (a target taken down: its deliveries pending and retried, emptied once it is back);
 *  7. desktop and phone-width screenshots under test/e2e/artifacts/ (gitignored); the phone layout
 *     does not overflow sideways. UPDATE_SCREENSHOT=1 copies the desktop one to docs/inspector.png;
 *  8. Cloudflare Access alone (the examples' second inspector, no token) through a stand-in for the
 *     Access edge (a proxy that turns a CF_Authorization cookie into a Cf-Access-Jwt-Assertion signed
 *     by a key made here, and serves that key as the team's certs): the page sends the cookie, gets
 *     in, and never asks for a token, not even once the Access session is gone.
 *
 * Chromium must be at /usr/bin/chromium (CHROMIUM overrides): `.ci/run` installs Debian's package.
 * On failure the wrangler log and a screenshot of the failing page are kept in the artifacts.
 */
import assert from "node:assert/strict"
import { spawn } from "node:child_process"
import fs from "node:fs"
import http from "node:http"
import net from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const artifacts = path.join(root, "test", "e2e", "artifacts")
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium"
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run"
]
const TOKEN = "e2e-inspector-token-0123456789"
const PREFIX = "/_durability"
/** The newsletter example's object "demo" (/newsletter/demo/...), as examples/index.ts lists it to the inspector. */
const EXAMPLE = "demo"
const OBJECT = `newsletter:${EXAMPLE}`
const OBJECT_PATH = encodeURIComponent(OBJECT)
const DEADLINE_MS = 240_000

// Strings that would run if any of them were parsed as HTML: in the newsletter's subject (payload and
// every log line) and in a recipient (payload, log lines, and the provider's error message).
const XSS_SUBJECT = `<script>window.__xss="script"</script>"><img src=x onerror="window.__xss='subject'">`
const XSS_RECIPIENT = `"><img/src=x/onerror=window.__xss='recipient'>bounce-ann@example.com`
const BOUNCE = "bounce-bob@example.com"

// Hostile ids, added to the mailroom example's email queue (its job ids are the addresses it is given):
// a right-to-left override that displays as "spring-1", and the longest id the API takes.
const MAILROOM = "mailroom:demo"
const BIDI_ID = "\u202E1-gnirps"
const BIDI_SHOWN = "\\u202E1-gnirps"
const LONG_ID = `long-${"0123456789abcdef".repeat(32)}`.slice(0, 512)

// The examples' Access-only inspector (examples/index.ts), configured through wrangler vars.
const ACCESS_PREFIX = "/_durability-access"
const ACCESS_TEAM = "e2e-team.cloudflareaccess.com"
const ACCESS_AUD = `e2e-aud-${Date.now().toString(36)}`

if (process.argv.length > 2) {
  console.error(`test/e2e/inspector.e2e.mjs takes no arguments (got ${process.argv.slice(2).join(" ")})`)
  process.exit(2)
}
if (!fs.existsSync(CHROMIUM)) {
  console.error(
    `[e2e] FAILED: no Chromium at ${CHROMIUM}. The inspector's browser test needs Debian's chromium package ` +
      "(`sudo apt-get install -y chromium`; .ci/run installs it), or CHROMIUM=/path/to/chromium."
  )
  process.exit(1)
}

// ---------------------------------------------------------------------------------------------
// Steps

const started = performance.now()
const step = async (name, body) => {
  const at = performance.now()
  process.stdout.write(`[e2e] ${name} ... `)
  try {
    const note = await body()
    console.log(`ok (${((performance.now() - at) / 1000).toFixed(1)} s)${note ? `: ${note}` : ""}`)
  } catch (error) {
    console.log("FAILED")
    error.step = name
    throw error
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const until = async (what, check, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  let last
  for (;;) {
    try {
      const value = await check()
      if (value) return value
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}${last ? ` (last error: ${last.message})` : ""}`)
    await sleep(250)
  }
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

// ---------------------------------------------------------------------------------------------
// A stand-in for the Cloudflare Access edge: in front of wrangler dev, it adds a Cf-Access-Jwt-Assertion
// (RS256, signed by a key made for this run) to every request carrying a CF_Authorization cookie, drops
// one sent by the client, and serves the key at /cdn-cgi/access/certs for the inspector to fetch.
// Without the cookie a request passes unchanged (as if Access let it through with no identity).

const base64Url = (data) => Buffer.from(data).toString("base64url")

const makeAccessKey = async () => {
  const pair = await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"]
  )
  const jwk = await crypto.subtle.exportKey("jwk", pair.publicKey)
  const kid = `e2e-${Date.now().toString(36)}`
  return { kid, privateKey: pair.privateKey, jwk: { kid, kty: "RSA", alg: "RS256", use: "sig", n: jwk.n, e: jwk.e } }
}

const signAccessJwt = async (key) => {
  const now = Math.floor(Date.now() / 1000)
  const head = base64Url(JSON.stringify({ alg: "RS256", kid: key.kid, typ: "JWT" }))
  const body = base64Url(JSON.stringify({ iss: `https://${ACCESS_TEAM}`, aud: [ACCESS_AUD], sub: "e2e", email: "e2e@example.com", iat: now, exp: now + 600 }))
  const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key.privateKey, new TextEncoder().encode(`${head}.${body}`))
  return `${head}.${body}.${base64Url(new Uint8Array(signature))}`
}

/** What the edge saw: each proxied request (path, whether it carried the cookie, the answer's status), and certs fetches. */
const edgeSeen = { requests: [], certs: 0 }
let edge

const startEdge = async (port, key, upstream) => {
  edge = http.createServer(async (request, response) => {
    try {
      if (request.url === "/cdn-cgi/access/certs") {
        edgeSeen.certs += 1
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify({ keys: [key.jwk] }))
        return
      }
      const chunks = []
      for await (const chunk of request) chunks.push(chunk)
      const headers = new Headers()
      for (const [name, value] of Object.entries(request.headers)) {
        if (["host", "connection", "cf-access-jwt-assertion", "content-length"].includes(name)) continue
        headers.set(name, Array.isArray(value) ? value.join(", ") : value)
      }
      const cookie = /(?:^|;\s*)CF_Authorization=[^;]+/.test(request.headers.cookie ?? "")
      if (cookie) headers.set("cf-access-jwt-assertion", await signAccessJwt(key))
      const body = chunks.length === 0 ? undefined : Buffer.concat(chunks)
      const answer = await fetch(`${upstream()}${request.url}`, { method: request.method, headers, body, redirect: "manual" })
      edgeSeen.requests.push({ path: request.url, cookie, status: answer.status })
      const out = {}
      answer.headers.forEach((value, name) => {
        if (!["content-encoding", "content-length", "transfer-encoding", "connection"].includes(name)) out[name] = value
      })
      response.writeHead(answer.status, out)
      response.end(Buffer.from(await answer.arrayBuffer()))
    } catch (error) {
      response.writeHead(502, { "content-type": "text/plain" })
      response.end(`edge stand-in: ${error.message}`)
    }
  })
  await new Promise((resolve, reject) => {
    edge.once("error", reject)
    edge.listen(port, "127.0.0.1", resolve)
  })
  return `http://127.0.0.1:${port}`
}

// ---------------------------------------------------------------------------------------------
// wrangler dev through npm start's script

const state = fs.mkdtempSync(path.join(os.tmpdir(), "durability-e2e-state-"))
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "durability-e2e-chromium-"))
fs.mkdirSync(artifacts, { recursive: true })
const logFile = path.join(artifacts, "wrangler.log")
let output = ""
let server
let browser

const startServer = async (port, edgeBase) => {
  const log = fs.createWriteStream(logFile)
  server = spawn(process.execPath, [
    path.join(root, "examples", "start.mjs"),
    "--port",
    String(port),
    "--persist-to",
    state,
    "--show-interactive-dev-session=false",
    "--log-level",
    "info",
    // The Access-only inspector, with the edge stand-in as its team's certs.
    "--var",
    `INSPECTOR_ACCESS_TEAM:${ACCESS_TEAM}`,
    "--var",
    `INSPECTOR_ACCESS_AUD:${ACCESS_AUD}`,
    "--var",
    `INSPECTOR_ACCESS_CERTS_URL:${edgeBase}/cdn-cgi/access/certs`
  ], {
    cwd: root,
    // Its own process group, so the test stops wrangler and workerd with it.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, INSPECTOR_TOKEN: TOKEN, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1", FORCE_COLOR: "0" }
  })
  for (const stream of [server.stdout, server.stderr]) {
    stream.on("data", (chunk) => {
      output += chunk
      log.write(chunk)
    })
  }
  const exited = new Promise((resolve) => server.once("exit", (code) => resolve(code)))
  const base = `http://127.0.0.1:${port}`
  await Promise.race([
    until("wrangler dev to answer", async () => (await fetch(`${base}${PREFIX}/`)).ok, 90_000),
    exited.then((code) => {
      throw new Error(`wrangler dev exited (${code}) before it answered; see ${path.relative(root, logFile)}`)
    })
  ])
  return base
}

const stopServer = () => {
  if (server && server.exitCode === null) {
    try {
      process.kill(-server.pid, "SIGTERM")
    } catch {
      // already gone
    }
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers

let base
const api = async (route, init = {}) => {
  const response = await fetch(`${base}${PREFIX}/api/${route}`, {
    ...init,
    headers: { authorization: `Bearer ${TOKEN}`, ...(init.body ? { "content-type": "application/json" } : {}), ...init.headers }
  })
  const body = await response.json()
  if (!response.ok) throw new Error(`${route}: ${response.status} ${JSON.stringify(body)}`)
  return body
}

const example = async (route, body) => {
  const response = await fetch(`${base}/newsletter/${EXAMPLE}/${route}`, body === undefined ? {} : { method: "POST", body: JSON.stringify(body) })
  const text = await response.text()
  if (!response.ok) throw new Error(`/newsletter/${EXAMPLE}/${route}: ${response.status} ${text}`)
  return JSON.parse(text)
}

const job = (id) => api(`objects/${OBJECT_PATH}/queues/email/jobs/${encodeURIComponent(id)}`)

// ---------------------------------------------------------------------------------------------
// The browser

const watch = (page, record) => {
  page.on("dialog", (dialog) => {
    record.dialogs.push(`${dialog.type()}: ${dialog.message()}`)
    void dialog.dismiss().catch(() => {})
  })
  page.on("pageerror", (error) => record.errors.push(`page error: ${error.message}`))
  page.on("console", (message) => {
    // Expected: the page asks the API once without a token (Cloudflare Access may let it in), and a wrong
    // token is refused; Chromium logs each 401 response.
    if (/status of 401/.test(message.text())) return
    if (message.type() === "error" || message.type() === "warning") record.errors.push(`console ${message.type()}: ${message.text()}`)
  })
}

const shot = (page, name) => page.screenshot({ path: path.join(artifacts, name), fullPage: true })

const confirm = async (page) => {
  await page.getByTestId("confirm-dialog").waitFor({ state: "visible" })
  await page.getByTestId("confirm-ok").click()
  await page.getByTestId("confirm-dialog").waitFor({ state: "hidden" })
}

/** Nothing the page drew came from stored data as markup: no element but the page's own. */
const assertInert = async (page, where) => {
  const found = await page.evaluate(() => ({
    xss: window.__xss,
    images: document.querySelectorAll("img").length,
    scripts: [...document.scripts].map((s) => s.getAttribute("src")),
    handlers: [...document.querySelectorAll("*")].flatMap((el) => [...el.attributes].map((a) => a.name)).filter((n) => n.startsWith("on"))
  }))
  assert.equal(found.xss, undefined, `${where}: window.__xss was set: stored data ran as script`)
  assert.equal(found.images, 0, `${where}: an <img> element exists: stored data became markup`)
  assert.deepEqual(found.scripts, ["app.js"], `${where}: only app.js may be a script`)
  assert.deepEqual(found.handlers, [], `${where}: inline event handler attributes exist`)
}

const signIn = async (page) => {
  await page.goto(`${base}${PREFIX}/`)
  await page.getByTestId("token-input").fill(TOKEN)
  await page.getByTestId("login-submit").click()
  await page.getByTestId("object-list").waitFor()
}

let edgeBase
const main = async () => {
  const port = await freePort()
  const edgePort = await freePort()
  edgeBase = await startEdge(edgePort, await makeAccessKey(), () => base)

  await step(`npm start's script serves the examples and the inspector (wrangler dev on 127.0.0.1:${port})`, async () => {
    base = await startServer(port, edgeBase)
    assert.match(output, new RegExp(`inspector:\\s+${base.replace(/[.]/g, "\\.")}${PREFIX}/`), "start.mjs prints the inspector's URL")
    assert.match(output, new RegExp(`inspector token:\\s+${TOKEN}`), "start.mjs prints the token")
    return base
  })

  await step("the page: strict CSP, no inline code, no HTML sinks in app.js; the API refuses a missing token", async () => {
    const page = await fetch(`${base}${PREFIX}/`)
    const csp = page.headers.get("content-security-policy") ?? ""
    for (const directive of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'none'"]) {
      assert.ok(csp.includes(directive), `CSP lacks ${directive}: ${csp}`)
    }
    assert.ok(!csp.includes("unsafe-inline") && !csp.includes("unsafe-eval"), `CSP allows inline code: ${csp}`)
    const html = await page.text()
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/i, "the page has an inline <script>")
    assert.doesNotMatch(html, /<style|\sstyle=|\son[a-z]+=/i, "the page has inline style or handlers")
    const script = await (await fetch(`${base}${PREFIX}/app.js`)).text()
    // A directive counts only as the first statement of its scope: anywhere after, it is a bare string.
    assert.match(script, /^\(function \(\) \{\s*"use strict";/, "app.js's scope does not start with \"use strict\"")
    for (const sink of ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute(\"style\""]) {
      assert.ok(!script.includes(sink), `app.js uses ${sink}`)
    }
    const anonymous = await fetch(`${base}${PREFIX}/api/objects`)
    assert.equal(anonymous.status, 401)
    assert.match(anonymous.headers.get("www-authenticate") ?? "", /^Bearer/)
  })

  await step("every example object the inspector lists answers it (promise and Effect faces)", async () => {
    const { objects } = await api("objects")
    const names = objects.map((o) => o.name)
    for (const name of [OBJECT, "digest:demo", "mailroom:demo", "mailroom-shard:0", "images-effect:demo", "reminders:demo", "subscriptions:alice"]) {
      assert.ok(names.includes(name), `the inspector lists ${name} (it lists ${names.join(", ")})`)
    }
    const attached = {}
    for (const name of names) {
      const overview = await api(`objects/${encodeURIComponent(name)}`)
      assert.equal(typeof overview.scheduler.now, "number", name)
      attached[name] = overview.scheduler.capabilities.join("+") || "none"
    }
    return Object.entries(attached).map(([name, capabilities]) => `${name} ${capabilities}`).join(", ")
  })

  await step("seed: a newsletter whose subject and one recipient are XSS strings; two recipients bounce", async () => {
    await example("send", {
      id: "spring",
      tenant: "acme",
      subject: XSS_SUBJECT,
      recipients: ["ann@example.com", XSS_RECIPIENT, BOUNCE, "flaky-cy@example.com"]
    })
    // email jobs: spring-1 ann, spring-2 the XSS recipient, spring-3 bob, spring-4 flaky (two retries).
    await until("spring-2 and spring-3 to fail for good (3 attempts each)", async () => {
      const [xss, bob] = await Promise.all([job("spring-2"), job("spring-3")])
      return xss.job.state === "failed" && bob.job.state === "failed"
    }, 60_000)
    const xss = await job("spring-2")
    assert.ok(xss.job.error.message.includes(XSS_RECIPIENT), "the provider's error names the XSS recipient")
    assert.ok(xss.logs.items.some((line) => line.message.includes(XSS_SUBJECT)), "a log line holds the XSS subject")
    // The mailboxes are repaired: a retry or a redrive is delivered now.
    await example("provider/fix", { address: XSS_RECIPIENT })
    await example("provider/fix", { address: BOUNCE })
    // A second, plain newsletter, so the screenshots show ordinary work too.
    await example("send", {
      id: "autumn",
      tenant: "globex",
      subject: "Autumn catalogue",
      recipients: ["dora@example.com", "flaky-eli@example.com", "finn@example.com"]
    })
    await until("the autumn newsletter to finish", async () => (await api(`objects/${OBJECT_PATH}/queues/newsletter/jobs/autumn`)).job.state === "completed", 60_000)
  })

  await step("seed: mailroom email jobs with a bidi-override id and a 512-character id", async () => {
    const response = await fetch(`${base}/mailroom/demo/send`, { method: "POST", body: JSON.stringify({ subject: "Hostile ids", to: [BIDI_ID, LONG_ID] }) })
    assert.ok(response.ok, `/mailroom/demo/send: ${response.status} ${await response.text()}`)
    const listed = await api(`objects/${encodeURIComponent(MAILROOM)}/queues/email/jobs?limit=100`)
    const ids = listed.items.map((j) => j.id)
    assert.ok(ids.includes(BIDI_ID) && ids.includes(LONG_ID), `the mailroom's email jobs: ${ids.join(", ")}`)
  })

  // A fresh profile directory (playwright passes it as --user-data-dir).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    headless: true,
    viewport: { width: 1280, height: 860 }
  })
  browser = context
  const record = { dialogs: [], errors: [] }
  const page = await context.newPage()
  watch(page, record)
  const onFailure = async (error) => {
    await shot(page, "failure.png").catch(() => {})
    throw error
  }

  await step("sign in: a wrong token is refused, the right one lists the objects; no cookie", async () => {
    await page.goto(`${base}${PREFIX}/`)
    await page.getByTestId("token-input").fill("not-the-token-0123456789")
    await page.getByTestId("login-submit").click()
    await until("the refusal", async () => (await page.getByTestId("login-error").textContent()).includes("refused"), 10_000)
    await page.getByTestId("token-input").fill(TOKEN)
    await page.getByTestId("login-submit").click()
    await page.getByTestId("object-link").filter({ hasText: OBJECT }).waitFor()
    assert.deepEqual(await context.cookies(), [])
    // Allowed by the CSP: a browser error here would say what the page tried that it may not.
    assert.deepEqual(record.errors, [])
  }).catch(onFailure)

  await step("the object: scheduler summary, a tab per capability, the email queue with 2 failed jobs", async () => {
    await page.getByTestId("object-link").filter({ hasText: OBJECT }).click()
    await page.getByTestId("scheduler-summary").waitFor()
    assert.match(await page.getByTestId("summary-permits").textContent(), /\d+ of \d+ free/)
    assert.deepEqual(await page.getByTestId("tabs").locator("a").allTextContents().then((tabs) => tabs.map((t) => t.replace(/\d.*$/, "").trim())), ["Jobs", "Dead letters"])
    const email = page.locator("[data-testid=queue-row][data-queue=email]")
    await until("2 failed email jobs", async () => (await email.getByTestId("count-failed").textContent()) === "failed 2")
    await shot(page, "desktop-object.png")
  }).catch(onFailure)

  await step("a failed job: error, payload and logs shown as text; nothing runs", async () => {
    await page.locator("[data-testid=queue-row][data-queue=email]").getByTestId("count-failed").click()
    await page.locator("[data-testid=job-row][data-job-id=spring-2]").waitFor()
    assert.equal(await page.getByTestId("job-row").count(), 2)
    await shot(page, "desktop-failed-jobs.png")
    await page.locator("[data-testid=job-row][data-job-id=spring-2]").getByTestId("job-link").click()
    await page.getByTestId("job-error").waitFor()
    assert.equal(await page.getByTestId("job-state").textContent(), "failed")
    assert.ok((await page.getByTestId("job-error").textContent()).includes(XSS_RECIPIENT), "the error message shows as text")
    const payload = JSON.parse(await page.getByTestId("job-payload").locator("pre").textContent())
    assert.equal(payload.subject, XSS_SUBJECT, "the payload shows the stored subject as text")
    assert.equal(payload.to, XSS_RECIPIENT)
    const logs = await page.getByTestId("log-line").allTextContents()
    assert.ok(logs.some((line) => line.includes(XSS_SUBJECT) && line.includes(XSS_RECIPIENT)), "log lines show as text")
    await assertInert(page, "job detail")
    await shot(page, "desktop-job-failed.png")
  }).catch(onFailure)

  await step("retry it from the page: it completes (seen through auto-refresh)", async () => {
    await page.getByTestId("job-retry").click()
    assert.match(await page.getByTestId("confirm-message").textContent(), /Retry job “spring-2”/)
    await confirm(page)
    await page.getByTestId("toast").filter({ hasText: "Retry: 1 changed" }).waitFor()
    // No click after this: the page refreshes itself every 5 s.
    await until("spring-2 shown completed", async () => (await page.getByTestId("job-state").textContent()) === "completed", 30_000)
    assert.equal((await job("spring-2")).job.state, "completed")
    await page.getByTestId("job-result").waitFor()
    await assertInert(page, "completed job")
  }).catch(onFailure)

  await step("pause the email queue from the page: shown paused, and paused in the object", async () => {
    await page.getByTestId("breadcrumbs").getByRole("link", { name: OBJECT }).click()
    const email = page.locator("[data-testid=queue-row][data-queue=email]")
    await email.getByTestId("queue-pause").click()
    await confirm(page)
    await until("the email queue shown paused", async () => (await email.getByTestId("queue-status").textContent()) === "paused", 10_000)
    const overview = await api(`objects/${OBJECT_PATH}`)
    assert.equal(overview.jobs.queues.find((q) => q.name === "email").paused, true)
    assert.equal(overview.jobs.queues.find((q) => q.name === "newsletter").paused, false)
  }).catch(onFailure)

  await step("redrive a dead letter from the page: it waits in the paused queue, then completes once resumed", async () => {
    await page.getByTestId("tab-dead-letters").click()
    const row = page.locator("[data-testid=dead-letter-row][data-job-id=spring-3]")
    await row.waitFor()
    assert.ok((await row.getByTestId("error-text").textContent()).includes(`550 mailbox ${BOUNCE} unavailable`))
    await shot(page, "desktop-dead-letters.png")
    await row.getByTestId("redrive").click()
    await confirm(page)
    await page.getByTestId("toast").filter({ hasText: "Redriven spring-3" }).waitFor()
    await row.waitFor({ state: "detached" })
    await until("the redriven job waiting", async () => ["waiting", "delayed"].includes((await job("spring-3")).job.state), 10_000)
    await page.getByTestId("tab-jobs").click()
    const email = page.locator("[data-testid=queue-row][data-queue=email]")
    await email.getByTestId("queue-resume").click()
    await confirm(page)
    await until("the email queue shown running", async () => (await email.getByTestId("queue-status").textContent()) === "running", 10_000)
    await until("spring-3 completed", async () => (await job("spring-3")).job.state === "completed", 30_000)
    await page.goto(`${base}${PREFIX}/#/objects/${OBJECT_PATH}/queues/email`)
    await until("spring-3 shown completed", async () =>
      (await page.locator("[data-testid=job-row][data-job-id=spring-3]").getByTestId("job-state").textContent()) === "completed", 15_000)
    await assertInert(page, "job list")
    await shot(page, "desktop-jobs.png")
  }).catch(onFailure)

  await step("a job that needed retries: attempts, progress, result and logs (the README's screenshot)", async () => {
    await page.goto(`${base}${PREFIX}/#/objects/${OBJECT_PATH}/queues/email/jobs/autumn-2`)
    await page.getByTestId("job-result").waitFor()
    assert.equal(await page.getByTestId("job-state").textContent(), "completed")
    assert.equal(JSON.parse(await page.getByTestId("job-result").locator("pre").textContent()).to, "flaky-eli@example.com")
    const logs = await page.getByTestId("log-line").allTextContents()
    assert.ok(logs.some((line) => line.includes("attempt 3/3")) && logs.some((line) => line.includes("421 service busy")), logs.join("\n"))
    await page.evaluate(() => document.getElementById("toasts").replaceChildren())
    await page.screenshot({ path: path.join(artifacts, "desktop-job.png") })
  }).catch(onFailure)

  await step("a bulk action from the queue's page: the autumn newsletter's completed email jobs removed by id prefix", async () => {
    await until("the autumn email jobs completed", async () =>
      (await Promise.all(["autumn-1", "autumn-2", "autumn-3"].map(job))).every((detail) => detail.job.state === "completed"), 30_000)
    await page.goto(`${base}${PREFIX}/#/objects/${OBJECT_PATH}/queues/email?state=completed`)
    await page.locator("[data-testid=job-row][data-job-id=autumn-2]").waitFor()
    await page.locator("details[data-key^='bulk:'] > summary").click()
    await page.getByTestId("bulk-action").selectOption("remove")
    await page.getByTestId("bulk-prefix").fill("autumn-")
    await page.getByTestId("bulk-run").click()
    assert.match(await page.getByTestId("confirm-message").textContent(), /Remove every completed job of queue “email” whose id starts with “autumn-”\? This cannot be undone\./)
    await confirm(page)
    await page.getByTestId("toast").filter({ hasText: "remove: 3 jobs changed" }).waitFor()
    await page.locator("[data-testid=job-row][data-job-id=autumn-2]").waitFor({ state: "detached" })
    const left = await api(`objects/${OBJECT_PATH}/queues/email/jobs?state=completed`)
    assert.deepEqual(left.items.filter((item) => item.id.startsWith("autumn-")), [])
    assert.ok(left.items.some((item) => item.id === "spring-2"), "jobs outside the prefix stay")
  }).catch(onFailure)

  await step("the other tabs: schedules (digest), operations and alarms (images); trigger and purge from the page", async () => {
    const post = async (route, body) => {
      const response = await fetch(`${base}${route}`, { method: "POST", body: JSON.stringify(body) })
      assert.ok(response.ok, `${route}: ${response.status} ${await response.text()}`)
    }
    await post("/digest/demo/users/ana", { timezone: "Europe/Lisbon", hour: 8 })
    await post("/images/demo/flaky-dog", { width: 800, height: 600, sizes: [400, 1600] })
    await page.goto(`${base}${PREFIX}/#/objects/digest%3Ademo/schedules`)
    const schedule = page.locator("[data-testid=schedule-row]").first()
    await schedule.waitFor()
    assert.equal(await schedule.getByTestId("schedule-status").textContent(), "active")
    await schedule.getByTestId("schedule-trigger").click()
    await confirm(page)
    await page.getByTestId("toast").filter({ hasText: "Trigger: 1 changed" }).waitFor()

    const images = encodeURIComponent("images:demo")
    await until("the images' operations to settle", async () => (await api(`objects/${images}`)).operations.counts.pending === 0, 20_000)
    await page.goto(`${base}${PREFIX}/#/objects/${images}/operations?status=failed`)
    const failed = page.locator("[data-testid=operation-row]")
    await failed.first().waitFor()
    assert.match(await failed.first().getByTestId("error-text").textContent(), /NonRetryableError: cannot upscale/)
    await page.getByTestId("tab-alarms").click()
    await page.locator("[data-testid=alarm-row][data-name=cleanup]").waitFor()

    const before = (await api(`objects/${images}`)).operations.counts
    await page.getByTestId("tab-operations").click()
    await page.locator("details[data-key=purge] > summary").click()
    await page.getByTestId("purge-capability").selectOption("operations")
    const tomorrow = new Date(Date.now() + 86_400_000)
    await page.getByTestId("purge-before").fill(tomorrow.toISOString().slice(0, 10))
    await page.getByTestId("purge").click()
    assert.match(await page.getByTestId("confirm-message").textContent(), /Delete every operations record created before .*, pending ones too/)
    await confirm(page)
    await page.getByTestId("toast").filter({ hasText: /^Purged \d+ records?$/ }).waitFor()
    const after = (await api(`objects/${images}`)).operations.counts
    assert.equal(after.completed + after.failed, 0, `purged: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`)
    await until("the empty operations list", async () => (await page.getByTestId("empty").textContent()) === "No operations.", 10_000)
    return `${before.completed} completed and ${before.failed} failed operations purged`
  }).catch(onFailure)

  await step("hostile ids: hidden characters shown as escapes in the list, heading and remove dialog; a 512-character id keeps the row on screen", async () => {
    await page.goto(`${base}${PREFIX}/#/objects/${encodeURIComponent(MAILROOM)}/queues/email`)
    await page.getByTestId("job-row").first().waitFor()
    const seen = await until("both hostile rows", () => page.evaluate(([bidi, long]) => {
      const rows = [...document.querySelectorAll("[data-testid=job-row]")]
      const bidiRow = rows.find((row) => row.dataset.jobId === bidi)
      const longRow = rows.find((row) => row.dataset.jobId === long)
      if (!bidiRow || !longRow) return undefined
      const wrap = longRow.closest(".table-wrap")
      return {
        bidiLink: bidiRow.querySelector("[data-testid=job-link]").textContent,
        longTitle: longRow.querySelector("[data-testid=job-link]").getAttribute("title"),
        rights: [...longRow.cells].map((cell) => Math.round(cell.getBoundingClientRect().right)),
        state: Math.round(longRow.querySelector("[data-testid=job-state]").getBoundingClientRect().right),
        wrap: { scroll: wrap.scrollWidth, client: wrap.clientWidth },
        width: window.innerWidth
      }
    }, [BIDI_ID, LONG_ID]), 15_000)
    assert.equal(seen.bidiLink, BIDI_SHOWN, "the bidi override is shown as an escape in the job list, not applied")
    assert.equal(seen.longTitle, LONG_ID, "the whole long id is in the link's title")
    assert.ok(seen.state <= seen.width && Math.max(...seen.rights) <= seen.width,
      `the 512-character id's row leaves the screen: state badge at ${seen.state} px, cells end at ${seen.rights.join(", ")} px, screen ${seen.width} px`)
    assert.ok(seen.wrap.scroll <= seen.wrap.client + 1, `the job table is ${seen.wrap.scroll} px wide in ${seen.wrap.client} px`)
    await shot(page, "desktop-hostile-ids.png")

    await page.goto(`${base}${PREFIX}/#/objects/${encodeURIComponent(MAILROOM)}/queues/email/jobs/${encodeURIComponent(BIDI_ID)}`)
    await page.getByTestId("job-remove").waitFor()
    assert.equal(await page.getByTestId("job-id").textContent(), `Job ${BIDI_SHOWN}`)
    assert.ok((await page.getByTestId("breadcrumbs").textContent()).includes(BIDI_SHOWN), "the crumbs show the escape")
    assert.ok(!(await page.title()).includes("\u202E"), `the title applies the override: ${await page.title()}`)
    await page.getByTestId("job-remove").click()
    await page.getByTestId("confirm-dialog").waitFor({ state: "visible" })
    assert.equal(await page.getByTestId("confirm-message").textContent(), `Remove job \u201c${BIDI_SHOWN}\u201d and its logs? This cannot be undone.`)
    const dialogText = await page.getByTestId("confirm-dialog").textContent()
    assert.ok(!dialogText.includes("null"), `the dialog says "null": ${JSON.stringify(dialogText)}`)
    assert.ok(!dialogText.includes("\u202E"), "the dialog holds the raw override")
    await page.getByTestId("confirm-cancel").click()
    await page.getByTestId("confirm-dialog").waitFor({ state: "hidden" })
    assert.equal((await api(`objects/${encodeURIComponent(MAILROOM)}/queues/email/jobs/${encodeURIComponent(BIDI_ID)}`)).job.id, BIDI_ID, "canceled: the job is kept")
  }).catch(onFailure)

  await step("objects found by name: the page opens an unlisted object its resolver reaches, and says 404 for one it refuses", async () => {
    await page.goto(`${base}${PREFIX}/#/`)
    await page.getByTestId("open-object-form").waitFor()
    assert.ok(!(await page.getByTestId("object-link").allTextContents()).includes("subscriptions:bob"), "bob is not listed")
    await page.getByTestId("open-object-input").fill("subscriptions:bob")
    await page.getByTestId("open-object-submit").click()
    await page.getByTestId("scheduler-summary").waitFor()
    assert.equal(await page.evaluate(() => decodeURIComponent(location.hash)), "#/objects/subscriptions:bob")
    await page.goto(`${base}${PREFIX}/#/`)
    const errorsBefore = record.errors.length
    await page.getByTestId("open-object-input").fill("subscriptions:Not Allowed!")
    await page.getByTestId("open-object-submit").click()
    await until("the refusal", async () => ((await page.getByTestId("error").textContent().catch(() => "")) ?? "").includes("no object named"), 10_000)
    // Away from the refused object before the page refreshes it again (every 5 s).
    await page.goto(`${base}${PREFIX}/#/`)
    await page.getByTestId("object-list").waitFor()
    // The browser logs the refusal's 404 as a failed load: expected here, so not an error of the page.
    const caused = record.errors.splice(errorsBefore)
    assert.ok(caused.every((error) => error.includes("404")), `unexpected errors: ${JSON.stringify(caused)}`)
  }).catch(onFailure)

  await step("event topics: the Log tab shows a partition's window, its cold segment and a consumer's lag; the Fanout tab the failing target's pending retries, until they ack", async () => {
    const topics = async (route, body) => {
      const response = await fetch(`${base}/topics/orders${route}`, body === undefined ? {} : { method: "POST", body: JSON.stringify(body) })
      const text = await response.text()
      assert.ok(response.ok, `/topics/orders${route}: ${response.status} ${text}`)
      return JSON.parse(text)
    }
    // billing down on every partition first: its deliveries stay pending (retried every 5 s) until it is back,
    // however long the steps below take.
    for (let shard = 0; shard < 4; shard++) assert.deepEqual(await topics(`/${shard}/billing`, { down: true }), { billing: "down" })
    // Seven events of one key: one partition, offsets 0 to 6 in order (the state is fresh for this run).
    const published = await topics("/publish", { events: Array.from({ length: 7 }, (_, i) => ({ key: "e2e-key", value: { n: i }, id: `e2e-${i}` })) })
    const partition = published[0].partition
    assert.deepEqual(published.map((p) => [p.partition, p.offset]), Array.from({ length: 7 }, (_, i) => [partition, i]), JSON.stringify(published))
    const shard = partition.split(":")[1]
    // A consumer handles a page of two and commits; retention (the newest 5) flushes offsets 0-1 to R2.
    const page2 = await topics(`/${shard}/read?consumer=analytics&limit=2`)
    assert.deepEqual(page2.records.map((r) => r.offset), [0, 1])
    await topics(`/${shard}/commit`, { consumer: "analytics", offset: page2.nextOffset })
    const trimmed = await topics(`/${shard}/trim`, {})
    assert.deepEqual(trimmed, { trimmed: 2, log: { oldestOffset: 0, hotOffset: 2, nextOffset: 7 } })
    const cold = await topics(`/${shard}/read?consumer=analytics&from=0&limit=5`)
    assert.deepEqual(cold.records.map((r) => r.body.value.n), [0, 1], "offsets 0-1 read back from the cold segment")

    const object = encodeURIComponent(`topics:${partition}`)
    // billing is down: its seven deliveries fail and stay; search and archive ack at once.
    const pending = await until("billing's attempts to fail, the other targets to ack", async () => {
      const { items } = await api(`objects/${object}/fanout?limit=50`)
      return items.length === 7 && items.every((d) => d.target === "billing" && d.attempt >= 1 && d.error !== null) ? items : undefined
    }, 60_000)

    await page.goto(`${base}${PREFIX}/#/objects/${object}/log`)
    await page.getByTestId("log-window").waitFor()
    assert.match(await page.getByTestId("log-window").textContent(), /^Offsets 0 to 6 readable; from 2 in the object \(\d+ bytes\); next offset 7\.$/)
    const consumer = page.locator("[data-testid=log-consumer-row][data-consumer=analytics]")
    assert.deepEqual((await consumer.locator("td").allTextContents()).slice(0, 3), ["analytics", "2", "5"], "analytics: cursor 2, lag 5")
    assert.equal(await page.getByTestId("log-segment-row").count(), 1, "one cold segment")
    assert.match(await page.getByTestId("log-segment-row").textContent(), /^0–1/)
    assert.match(await page.getByTestId("tab-log").textContent(), /7 records/)
    await shot(page, "desktop-topics-log.png")

    await page.getByTestId("tab-fanout").click()
    const rows = page.locator("[data-testid=fanout-row]")
    await rows.first().waitFor()
    assert.equal(await rows.count(), 7, "one pending delivery per event")
    assert.equal(await page.locator("[data-testid=fanout-row][data-target=billing]").count(), 7, "all for billing")
    assert.match(await rows.first().getByTestId("error-text").textContent(), /^Error: billing is down: orders:\d@\d(, orders:\d@\d)*$/)
    assert.match(await page.getByTestId("tab-fanout").textContent(), /7 pending/)
    await shot(page, "desktop-topics-fanout.png")

    // billing back: its next attempts ack; the page (auto-refresh) empties, and the archive holds one StoredMessage per event.
    for (let shard = 0; shard < 4; shard++) assert.deepEqual(await topics(`/${shard}/billing`, { down: false }), { billing: "up" })
    await until("billing's retries to ack, seen by the page", async () =>
      (await page.locator("[data-testid=empty]", { hasText: "No deliveries pending." }).count()) === 1, 60_000)
    const archived = await topics(`/${shard}/archive`)
    assert.deepEqual(archived.map((m) => m.messageId).sort(), Array.from({ length: 7 }, (_, i) => `${partition}@${i}`).sort())
    assert.ok(archived.every((m) => m.target === "archive" && m.attempts === 1 && m.body.key === "e2e-key"), JSON.stringify(archived[0]))
    return `${partition}: ${pending.length} billing retries pending, then acked; 7 events archived`
  }).catch(onFailure)

  await step("nothing ran: no dialog, no page error, no CSP violation", async () => {
    assert.deepEqual(record.dialogs, [], "a dialog opened")
    assert.deepEqual(record.errors, [], "the browser reported errors")
    assert.equal(await page.evaluate(() => window.__xss), undefined)
  }).catch(onFailure)

  await step("phone width (390 px): signed in, the object, job lists (one with a 512-character id) and a job fit the screen", async () => {
    // A new tab: its own sessionStorage, so it signs in again.
    const small = await context.newPage()
    await small.setViewportSize({ width: 390, height: 844 })
    watch(small, record)
    await signIn(small)
    const fits = async (where) => {
      const { scroll, width } = await small.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }))
      assert.ok(scroll <= width + 1, `${where}: the page is ${scroll} px wide on a ${width} px screen`)
    }
    await small.goto(`${base}${PREFIX}/#/objects/${OBJECT_PATH}`)
    await small.locator("[data-testid=queue-row][data-queue=email]").waitFor()
    await fits("object")
    await small.screenshot({ path: path.join(artifacts, "phone-object.png"), fullPage: true })
    await small.goto(`${base}${PREFIX}/#/objects/${OBJECT_PATH}/queues/email`)
    await small.locator("[data-testid=job-row]").first().waitFor()
    await fits("job list")
    await small.screenshot({ path: path.join(artifacts, "phone-jobs.png"), fullPage: true })
    await small.goto(`${base}${PREFIX}/#/objects/${encodeURIComponent(MAILROOM)}/queues/email`)
    await small.locator("[data-testid=job-row]").nth(1).waitFor()
    await fits("job list with a 512-character id")
    await small.goto(`${base}${PREFIX}/#/objects/${OBJECT_PATH}/queues/email/jobs/spring-2`)
    await small.getByTestId("job-payload").waitFor()
    await fits("job")
    await assertInert(small, "phone job")
    await small.screenshot({ path: path.join(artifacts, "phone-job.png"), fullPage: true })
    await small.close()
    assert.deepEqual(record.dialogs, [])
    assert.deepEqual(record.errors, [])
  }).catch(onFailure)

  await step("Cloudflare Access alone, through the edge stand-in: the page sends the cookie, gets in, never asks for a token", async () => {
    const anonymous = await fetch(`${edgeBase}${ACCESS_PREFIX}/api/objects`)
    assert.equal(anonymous.status, 401)
    assert.doesNotMatch(anonymous.headers.get("www-authenticate") ?? "", /^Bearer/i, "the Access-only inspector's challenge is not Bearer")
    const vouched = await fetch(`${edgeBase}${ACCESS_PREFIX}/api/objects`, { headers: { cookie: "CF_Authorization=e2e-session" } })
    assert.equal(vouched.status, 200, `the edge's JWT is accepted: ${await vouched.text()}`)
    assert.ok(edgeSeen.certs >= 1, "the inspector fetched the team's keys from the stand-in")

    const access = await context.newPage()
    watch(access, record)
    await context.addCookies([{ name: "CF_Authorization", value: "e2e-session", url: edgeBase }])
    const before = edgeSeen.requests.length
    await access.goto(`${edgeBase}${ACCESS_PREFIX}/`)
    // Whichever comes first: the objects (let in) or a token form (the cookie was not sent, or not enough).
    await access.locator("[data-testid=object-list], [data-testid=login-form]").first().waitFor()
    assert.equal(await access.getByTestId("login-form").count(), 0,
      `the page asks for a token behind Access; its API calls: ${JSON.stringify(edgeSeen.requests.slice(before))}`)
    await access.getByTestId("object-link").filter({ hasText: OBJECT }).click()
    await access.getByTestId("scheduler-summary").waitFor()
    const calls = edgeSeen.requests.slice(before).filter((r) => r.path.startsWith(`${ACCESS_PREFIX}/api/`))
    assert.ok(calls.length >= 2, `the page called the API through the edge: ${JSON.stringify(calls)}`)
    assert.ok(calls.every((r) => r.cookie && r.status === 200), `every API call carried the cookie and was let in: ${JSON.stringify(calls)}`)
    assert.equal(await access.getByTestId("token-input").count(), 0)
    assert.equal(await access.getByTestId("logout").isVisible(), false, "no token, so no sign-out")

    // The Access session is gone: the page says to sign in through Access, and asks for no token.
    await context.clearCookies()
    await access.reload()
    await access.getByTestId("access-required").waitFor()
    assert.equal(await access.getByTestId("token-input").count(), 0, "the page asks for a token the inspector does not take")
    await access.screenshot({ path: path.join(artifacts, "desktop-access-signed-out.png") })
    await access.close()
    assert.deepEqual(record.dialogs, [])
    assert.deepEqual(record.errors, [])
  }).catch(onFailure)

  if (process.env.UPDATE_SCREENSHOT === "1") {
    fs.mkdirSync(path.join(root, "docs"), { recursive: true })
    fs.copyFileSync(path.join(artifacts, "desktop-job.png"), path.join(root, "docs", "inspector.png"))
    console.log("[e2e] docs/inspector.png updated from test/e2e/artifacts/desktop-job.png")
  }
}

const timer = setTimeout(() => {
  console.error(`[e2e] FAILED: still running after ${DEADLINE_MS / 1000} s`)
  stopServer()
  process.exit(1)
}, DEADLINE_MS)
timer.unref()

let failed = false
try {
  await main()
  console.log(`[e2e] passed in ${((performance.now() - started) / 1000).toFixed(1)} s; screenshots in ${path.relative(root, artifacts)}/`)
} catch (error) {
  failed = true
  console.error(`\n[e2e] FAILED${error.step ? ` at "${error.step}"` : ""}: ${error.stack ?? error}`)
  console.error(`[e2e] wrangler's output: ${path.relative(root, logFile)}; screenshots: ${path.relative(root, artifacts)}/`)
} finally {
  await browser?.close().catch(() => {})
  stopServer()
  edge?.close()
  fs.rmSync(profile, { recursive: true, force: true })
  fs.rmSync(state, { recursive: true, force: true })
}
process.exit(failed ? 1 : 0)
