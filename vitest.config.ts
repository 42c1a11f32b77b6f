import { defineWorkersProject } from "@cloudflare/vitest-pool-workers/config"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

// Inside this repository "durability[/x]" is the source (no build needed); the published package points at dist/.
// The same mapping is in tsconfig.json (`paths`) and wrangler.toml (`[alias]`).
const source = (file: string) => fileURLToPath(new URL(`./src/${file}`, import.meta.url))
const alias = [
  { find: /^durability$/, replacement: source("index.ts") },
  { find: /^durability\/(effect|testing|utils|inspector|routing)$/, replacement: source("$1.ts") },
  { find: /^durability\/workflow-engine$/, replacement: source("workflowEngine.ts") }
]

// `.ci/run` sets VITEST_JSON_REPORT to a file for its closing count line: `npm test` runs more than vitest,
// so flags appended to it would not reach vitest.
const jsonReport = process.env["VITEST_JSON_REPORT"]

export default defineConfig({
  test: {
    // Vitest keeps one core free by default; on a 2-core machine that runs the node files one at a time.
    // Their tests are CPU-bound under TestClock with no real waiting, so both cores halve the wall time.
    maxWorkers: 2,
    // One module graph per worker, not per file: the node project imports effect and sql.js once per worker
    // instead of once per file, 36 s -> 20 s on 2 cores. Safe because no node test touches globals (a shuffled
    // order passes too) and per-test state lives in the layers each test builds. The workers pool keeps its own
    // per-file isolation (isolatedStorage).
    isolate: false,
    ...(jsonReport ? { reporters: ["default", "json"], outputFile: { json: jsonReport } } : {}),
    projects: [
      {
        resolve: { alias },
        test: {
          name: "node",
          environment: "node",
          include: ["test/node/**/*.test.ts"],
          // A deadline, not a premise: these tests wait for nothing real (TestClock), so a test's length is its
          // CPU, and only a hang should fail it. Beside workerd and two CPU hogs (npm run test:stress) the
          // heaviest (10 000 jobs through retention, the cron scans) took 6–8× their quiet 4–5 s, past vitest's
          // 5 s default and a 30 s one; the models set their own, longer.
          testTimeout: 120_000
        }
      },
      defineWorkersProject({
        resolve: { alias },
        test: {
          name: "workers",
          include: ["test/workers/**/*.test.ts"],
          // A deadline, not a premise: every scenario waits for signals its object gives (rows, calls,
          // alarms), so its length only bounds how long a hung test takes to fail. The scenarios take 1–5 s
          // on a quiet 2-core machine and up to 3× that with two CPU hogs beside them (npm run
          // test:stress); vitest's 5 s default turned that slowness into failures, and a test cut off by
          // it leaves its objects running into the pool's storage isolation (a `.sqlite-shm` side file).
          testTimeout: 30_000,
          hookTimeout: 30_000,
          poolOptions: {
            workers: {
              main: "./test/workers/worker.ts",
              wrangler: { configPath: "./test/workers/wrangler.toml" },
              isolatedStorage: true
            }
          }
        }
      })
    ]
  }
})
