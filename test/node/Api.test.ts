/**
 * The public surface is deliberate. `npm run api:check` (part of `npm test`) compares every entry point's
 * declarations with its report in api/; these tests hold the choices the reports record: what
 * `durability/effect` exports at run time, and that every entry point of package.json has a report
 * in which the engine-only members do not appear.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import * as DurabilityEffect from "../../src/effect.js"

const root = path.resolve(__dirname, "../..")

const keysOf = (namespace: object) => Object.keys(namespace).sort()

/** The exported names a report lists (`// Scheduler.layerWith`), in its Exports section. */
const reportedExports = (report: string): Array<string> => {
  const text = fs.readFileSync(path.join(root, "api", report), "utf8")
  const exports = text.slice(text.indexOf("## Exports"), text.indexOf("## Referenced declarations"))
  return [...exports.matchAll(/^\/\/ (\S+)$/gm)].map(([, name]) => name!)
}

describe("the public surface", () => {
  it("durability/effect: the capabilities and what a user provides or reads, not the engine's services", () => {
    expect(keysOf(DurabilityEffect)).toEqual([
      "Background",
      "Errors",
      "Fanout",
      "InspectionRegistry",
      "Inspector",
      "Jobs",
      "JobsConsumer",
      "JobsMetrics",
      "JobsProtocol",
      "JobsRouter",
      "Lifecycle",
      "Log",
      "Logging",
      "Migrations",
      "NamedAlarms",
      "Operations",
      "RetryPolicy",
      "RoutingClient",
      "RoutingLoad",
      "Scheduler",
      "SchedulerConfig",
      "Schedules",
      "Steps",
      "StorageService"
    ])
    // The engine modules that mix public and engine-only members show the public ones.
    // A table of your own decides admissions and lease expiries with these constructors.
    // `transaction`: your own writes and the library's in one transaction of the object's storage.
    expect(keysOf(DurabilityEffect.Scheduler)).toEqual(["Admission", "LeaseExpiry", "Scheduler", "UPKEEP_DELAY", "layerDurableObject", "layerWith", "transaction"])
    expect(keysOf(DurabilityEffect.SchedulerConfig)).toEqual(["SchedulerConfig", "defaults", "layer"])
    expect(keysOf(DurabilityEffect.Background)).toEqual(["Background", "layerDurableObject", "make"])
    expect(keysOf(DurabilityEffect.RetryPolicy)).toEqual([
      "DEFAULT_ATTEMPT_TIMEOUT_MS",
      "DEFAULT_MAX_ATTEMPTS",
      "defaultSchedule",
      "fromDelay",
      "isNonRetryable"
    ])
    expect(keysOf(DurabilityEffect.Lifecycle)).toEqual([])
    expect(keysOf(DurabilityEffect.Logging)).not.toContain("consoleLogger")
    expect(keysOf(DurabilityEffect.Logging)).not.toContain("layerConsole")
  })

  it("every entry point of package.json has a report; engine-only members are in none under a public name", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as {
      readonly exports: Readonly<Record<string, unknown>>
    }
    const entries = Object.keys(manifest.exports).filter((subpath) => subpath !== "./package.json")
    const reports = entries.map((subpath) => subpath === "." ? "index.api.md" : `${subpath.slice(2)}.api.md`)
    expect(fs.readdirSync(path.join(root, "api")).filter((file) => file.endsWith(".api.md")).sort()).toEqual(
      [...reports].sort()
    )
    const effect = reportedExports("effect.api.md")
    expect(effect).toContain("Scheduler.layerDurableObject")
    expect(effect).toContain("Operations.make")
    const engineOnly = [
      /^AlarmService\./,
      /^PermitSemaphore\./,
      /^DurableTable\./,
      /^Scheduler\.(make|layer|layerDurableObjectResolved)$/,
      /^SchedulerConfig\.(resolve|layerResolved)$/,
      /^RetryPolicy\.decide$/,
      /^Background\.(serializeError|logReport|waitUntilOr)$/,
      /^Lifecycle\.emitTo$/
    ]
    for (const internal of engineOnly) {
      expect(effect.filter((name) => internal.test(name)), String(internal)).toEqual([])
    }
  })
})
