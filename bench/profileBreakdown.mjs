/**
 * Where a CPU profile's time went, by component: workerd's SQL (its `exec` and row reads), the garbage
 * collector, keep_names (esbuild's `__name`, which wrangler's default build wraps every named function
 * in), Effect's runtime and combinators, this library's code, the bench's own object and driver, and
 * the rest. Samples are attributed by their function's line in the bundle, whose module comments
 * (`// ../../src/engine/attempt.ts`) tell which source file a line came from.
 */

/** The bundle's module of each line: sorted starts, searched by line. */
const modulesOf = (bundle) => {
  const starts = []
  bundle.split("\n").forEach((line, at) => {
    const module = /^\/\/ (?:\.\.\/)*(\S+\.[cm]?[jt]s)$/.exec(line)
    if (module !== null) starts.push({ at, module: module[1] })
  })
  return (line) => {
    let low = 0
    let high = starts.length - 1
    let found = "?"
    while (low <= high) {
      const mid = (low + high) >> 1
      if (starts[mid].at <= line) {
        found = starts[mid].module
        low = mid + 1
      } else high = mid - 1
    }
    return found
  }
}

const NATIVE = {
  exec: "SQL (workerd's exec, rows)",
  toArray: "SQL (workerd's exec, rows)",
  one: "SQL (workerd's exec, rows)",
  raw: "SQL (workerd's exec, rows)",
  transactionSync: "SQL (workerd's exec, rows)",
  "(garbage collector)": "garbage collector",
  // What `__name`'s `Object.defineProperty(fn, "name")` costs inside V8.
  "set kv": "keep_names (__name)",
  "(idle)": "idle"
}

const componentOf = (module) =>
  module.startsWith("node_modules/effect/") ? "Effect runtime and combinators"
  : module.startsWith("src/") ? "library code (src/)"
  : module.startsWith("node_modules/") ? `other packages (${module.split("/")[1]})`
  : "bench object and driver"

/**
 * `profile`: a V8 CPU profile; `bundle`: the worker's bundled source; `executions`: what the run did
 * (operations, jobs), to give µs per execution. Components sorted by time, and the top source modules.
 */
export const breakdown = (profile, bundle, executions) => {
  const moduleAt = modulesOf(bundle)
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  const selfUs = new Map()
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const components = new Map()
  const modules = new Map()
  let totalUs = 0
  for (const [id, us] of selfUs) {
    const frame = nodes.get(id).callFrame
    totalUs += us
    let component
    if (frame.functionName === "__name") component = "keep_names (__name)"
    else if (frame.url === "" || frame.lineNumber < 0) component = NATIVE[frame.functionName] ?? "other native"
    else {
      const module = moduleAt(frame.lineNumber)
      modules.set(module, (modules.get(module) ?? 0) + us)
      component = componentOf(module)
    }
    components.set(component, (components.get(component) ?? 0) + us)
  }
  const row = ([name, us]) => ({
    name,
    ms: Math.round(us / 100) / 10,
    share: Math.round((1000 * us) / totalUs) / 10,
    usPerExecution: Math.round((10 * us) / executions) / 10
  })
  return {
    executions,
    totalMs: Math.round(totalUs / 1000),
    components: [...components].sort((a, b) => b[1] - a[1]).map(row),
    modules: [...modules].sort((a, b) => b[1] - a[1]).slice(0, 12).map(row)
  }
}

/** The breakdown as lines for the log. */
export const describe = (label, figures) => [
  `${label}: ${figures.totalMs} ms profiled, ${figures.executions} executions`,
  ...figures.components.map((c) => `  ${String(c.usPerExecution).padStart(6)} µs/execution ${String(c.share).padStart(5)}%  ${c.name}`)
]
