import { defineWorkersProject } from "@cloudflare/vitest-pool-workers/config"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "node",
          environment: "node",
          include: ["test/node/**/*.test.ts"]
        }
      },
      defineWorkersProject({
        test: {
          name: "workers",
          include: ["test/workers/**/*.test.ts"],
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
