#!/usr/bin/env node
/**
 * The inspector's workflows page in a real browser: an object with `DurabilityWorkflows` on the test kit
 * (`workflows.harness.ts`, bundled here by esbuild, which wrangler brings), served by
 * `DurabilityInspector.handler` on a loopback port, and Debian's Chromium driven by playwright-core:
 *
 *  1. the Workflows tab: the status chips count the seeded instances, a chip filters the list;
 *  2. an instance's timeline: its steps with their kinds and statuses, the wait it is in;
 *  3. a payload that is not JSON is named in the page and nothing is sent; a good event is sent from the
 *     form, the waiting instance consumes it and completes (seen by the page's auto-refresh);
 *  4. pause, resume, terminate and restart from the instance's page, each seen in the page and in storage;
 *  5. stored params holding `<script>` and attribute-breaking strings show as text; nothing runs, no page
 *     error, no CSP violation; desktop and phone-width screenshots under test/e2e/artifacts/.
 *
 * Chromium must be at /usr/bin/chromium (CHROMIUM overrides), as for `inspector.e2e.mjs`.
 */
import assert from "node:assert/strict"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { build } from "esbuild"
import { chromium } from "playwright-core"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const artifacts = path.join(root, "test", "e2e", "artifacts")
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium"
const TOKEN = "e2e-workflows-token-0123456789"
const PREFIX = "/_durability"

if (!fs.existsSync(CHROMIUM)) {
  console.error(`[e2e] FAILED: no Chromium at ${CHROMIUM} (sudo apt-get install -y chromium, or CHROMIUM=/path/to/chromium).`)
  process.exit(1)
}
fs.mkdirSync(artifacts, { recursive: true })

const step = async (name, body) => {
  const at = performance.now()
  process.stdout.write(`[e2e workflows] ${name} ... `)
  try {
    await body()
    console.log(`ok (${((performance.now() - at) / 1000).toFixed(1)} s)`)
  } catch (error) {
    console.log("FAILED")
    throw error
  }
}

const until = async (what, check, timeoutMs = 15_000) => {
  const deadline = Date.now() + timeoutMs
  let last
  for (;;) {
    try {
      const value = await check()
      if (value) return value
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${last.message})` : ""}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

// The harness imports the library's TypeScript sources; its packages stay external (resolved from node_modules).
const bundle = path.join(artifacts, "workflows-harness.mjs")
await build({
  entryPoints: [path.join(root, "test", "e2e", "workflows.harness.ts")],
  bundle: true,
  platform: "node",
  format: "esm",
  packages: "external",
  outfile: bundle,
  logLevel: "warning"
})
const harness = await import(pathToFileURL(bundle).href)
const object = await harness.start({ token: TOKEN, prefix: PREFIX })
const statusOf = (id) => object.rows(`SELECT status, paused FROM durability_workflows WHERE instance_id = '${id}'`)[0]

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "durability-e2e-workflows-"))
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  headless: true,
  viewport: { width: 1280, height: 860 }
})
const page = await context.newPage()
const errors = []
const dialogs = []
page.on("dialog", (dialog) => {
  dialogs.push(dialog.message())
  void dialog.dismiss().catch(() => {})
})
page.on("pageerror", (error) => errors.push(`page error: ${error.message}`))
page.on("console", (message) => {
  if (/status of 401/.test(message.text())) return
  if (message.type() === "error" || message.type() === "warning") errors.push(`console ${message.type()}: ${message.text()}`)
})
const shot = (name) => page.screenshot({ path: path.join(artifacts, name), fullPage: true })
const confirm = async () => {
  await page.getByTestId("confirm-dialog").waitFor({ state: "visible" })
  await page.getByTestId("confirm-ok").click()
  await page.getByTestId("confirm-dialog").waitFor({ state: "hidden" })
}
const instanceStatus = () => page.locator("h2 ~ [data-testid=workflow-status]").first().textContent()

let failed = false
try {
  await step("sign in and open the Workflows tab: status chips count the instances", async () => {
    await page.goto(`${object.base}${PREFIX}/`)
    await page.getByTestId("token-input").fill(TOKEN)
    await page.getByTestId("login-submit").click()
    await page.getByTestId("object-list").waitFor()
    await page.goto(`${object.base}${PREFIX}/#/objects/shop/workflows`)
    await page.getByTestId("workflow-status-filter").waitFor()
    assert.match(await page.getByTestId("tab-workflows").textContent(), /Workflows\s*3 live/)
    const count = async (status) => (await page.getByTestId(`workflow-status-filter-${status}`).locator(".count").textContent()).trim()
    assert.deepEqual(
      await Promise.all(["queued", "running", "paused", "waiting", "complete", "errored", "terminated"].map(count)),
      ["0", "0", "1", "2", "1", "1", "1"]
    )
    assert.equal(await page.getByTestId("workflow-row").count(), 6)
    await shot("workflows-desktop-list.png")
    await page.getByTestId("workflow-status-filter-waiting").click()
    await until("the waiting instances alone", async () => (await page.getByTestId("workflow-row").count()) === 2)
    assert.deepEqual(await page.getByTestId("workflow-row").evaluateAll((rows) => rows.map((row) => row.getAttribute("data-instance-id"))), [
      "waiter",
      "sleepy"
    ])
  })

  await step("an instance's timeline: its steps and the wait it is in", async () => {
    await page.locator("[data-testid=workflow-row][data-instance-id=waiter]").getByTestId("workflow-instance-link").click()
    await page.getByTestId("workflow-timeline").waitFor()
    assert.equal(await instanceStatus(), "waiting")
    assert.equal(await page.getByTestId("workflow-waiting-for").textContent(), "event:approved")
    const steps = await page.getByTestId("workflow-step").evaluateAll((items) => items.map((li) => [li.getAttribute("data-position"), li.getAttribute("data-status")]))
    assert.deepEqual(steps, [["1", "completed"], ["2", "waiting"]])
    assert.match(await page.locator("[data-testid=workflow-step][data-position='2']").textContent(), /event\s+approval\s+waiting.*times out/s)
  })

  await step("send an event: a payload that is not JSON is named and not sent; a good one is consumed", async () => {
    await page.getByText("Send an event").click()
    await page.getByTestId("event-type").fill("approved")
    await page.getByTestId("event-payload-input").fill("{oops")
    await page.getByTestId("workflow-send-event").click()
    await page.getByTestId("toast-error").filter({ hasText: "not valid JSON" }).waitFor()
    assert.equal(await page.getByTestId("confirm-dialog").isVisible(), false)
    assert.equal(object.rows("SELECT COUNT(*) AS n FROM durability_workflow_events")[0].n, 0)
    await page.getByTestId("event-payload-input").fill("{\"by\": \"e2e\"}")
    await page.getByTestId("workflow-send-event").click()
    await confirm()
    await until("the instance to complete (auto-refresh)", async () => (await instanceStatus()) === "complete")
    assert.equal(await page.getByTestId("event-consumed").textContent(), "by step #2")
    assert.deepEqual(JSON.parse(await page.getByTestId("workflow-output").locator("pre").textContent()), { receipt: "r-waiter", by: "e2e" })
    await shot("workflows-desktop-instance.png")
  })

  await step("pause, resume, terminate and restart from the instance's page", async () => {
    await page.goto(`${object.base}${PREFIX}/#/objects/shop/workflows/orders/instances/sleepy`)
    await page.getByTestId("workflow-timeline").waitFor()
    const act = async (testid, status, stored) => {
      await page.getByTestId(testid).first().click()
      await confirm()
      await until(`${testid}: ${status}`, async () => (await instanceStatus()) === status)
      assert.deepEqual(statusOf("sleepy"), stored)
    }
    await act("workflow-pause", "paused", { status: "suspended", paused: 1 })
    await act("workflow-resume", "waiting", { status: "suspended", paused: 0 })
    await act("workflow-terminate", "terminated", { status: "terminated", paused: 0 })
    await act("workflow-restart", "waiting", { status: "suspended", paused: 0 })
  })

  await step("stored markup shows as text; nothing runs; no page error or CSP violation; phone width fits", async () => {
    await page.goto(`${object.base}${PREFIX}/#/objects/shop/workflows/orders/instances/done`)
    // The previous instance's page shows its own params until the hash route's answer arrives: wait for this one's.
    const params = page.getByTestId("workflow-params").locator("pre")
    await until("the done instance's params", async () => JSON.parse(await params.textContent()).note === harness.XSS)
    const found = await page.evaluate(() => ({ xss: window.__xss, images: document.querySelectorAll("img").length }))
    assert.deepEqual(found, { xss: undefined, images: 0 })
    await page.setViewportSize({ width: 390, height: 844 })
    await page.goto(`${object.base}${PREFIX}/#/objects/shop/workflows`)
    await page.getByTestId("workflow-row").first().waitFor()
    await shot("workflows-phone-list.png")
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    assert.ok(overflow <= 0, `the phone layout overflows sideways by ${overflow} px`)
    assert.deepEqual(dialogs, [])
    assert.deepEqual(errors, [])
  })
} catch (error) {
  failed = true
  await shot("workflows-failure.png").catch(() => {})
  console.error(error)
} finally {
  await context.close().catch(() => {})
  await object.close()
  fs.rmSync(profile, { recursive: true, force: true })
}
if (failed) process.exit(1)
console.log("[e2e workflows] all steps passed; screenshots in test/e2e/artifacts/")
