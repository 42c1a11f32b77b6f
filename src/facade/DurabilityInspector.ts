/**
 * `DurabilityInspector`: the inspector's web page and admin API, mounted in a Worker's `fetch`:
 *
 * ```ts
 * const inspector = DurabilityInspector.handler({ objects: { namespace: env.JOBS, names: ["main"] }, token: env.INSPECTOR_TOKEN })
 * export default { fetch: async (request, env) => (await inspector(request)) ?? app(request, env) }
 * ```
 *
 * Each object answers through its `inspect(request)` method, which hands the request to its
 * scheduler: `inspect(request: unknown) { return answerInspection(this.scheduler, request) }`.
 */
import type { DurableJobsRouter, DurableJobsShardNamespace } from "./DurabilityJobs.js"
import { type AccessConfig, CERTS_TIMEOUT_MS } from "../inspector/auth.js"
import { makeHandler, misconfiguredHandler } from "../inspector/http.js"
import * as Logging from "../engine/Logging.js"

/** The part of a Durable Object namespace the inspector uses, as the jobs router does (any `DurableObjectNamespace` fits). */
export type DurabilityInspectorNamespace = DurableJobsShardNamespace

/**
 * One source of objects: named objects of one namespace, or the shards of a jobs router. With a
 * `label`, each object is listed (and addressed) as `${label}:${name}`.
 */
export type DurabilityInspectorSource =
  | { readonly namespace: DurabilityInspectorNamespace; readonly names: ReadonlyArray<string>; readonly label?: string | undefined }
  /** A `DurabilityJobs.router(...)` result: its shards `${name}:${i}`. */
  | { readonly router: Pick<DurableJobsRouter, "objects">; readonly label?: string | undefined }
  | DurabilityInspectorResolver

/**
 * Objects found by name, for designs with an object per user or tenant: `resolve` turns the name in the
 * URL into the object's stub (`(name) => env.USERS.get(env.USERS.idFromName(name))`), or `undefined` to
 * refuse it; the inspector reaches only what it returns. `list`, optional, names the objects the page
 * lists (the page opens any other by name). With a `label`, names are `${label}:${name}` and `resolve`
 * gets the part after the label.
 */
export interface DurabilityInspectorResolver {
  /** The stub of the object named `name` (the part after the label), or `undefined` to refuse the name. */
  readonly resolve: (name: string) => unknown
  /** The names the page lists (at most 10 000 in all sources); others are opened by name. */
  readonly list?: (() => Iterable<string> | Promise<Iterable<string>>) | undefined
  /** Names are `${label}:${name}` when given. */
  readonly label?: string | undefined
}

/** Which objects the inspector shows: one source, or several (their listed names must not collide). */
export type DurabilityInspectorObjects = DurabilityInspectorSource | ReadonlyArray<DurabilityInspectorSource>

/**
 * Cloudflare Access as the inspector's login: requests with a valid Access token for this application are let
 * in.
 */
export interface DurabilityInspectorAccess {
  /** The team's Access domain, e.g. `myteam.cloudflareaccess.com`. */
  readonly teamDomain: string
  /** The Access application's audience (AUD) tag. */
  readonly audience: string
  /**
   * Fetches the team's certs (`https://<teamDomain>/cdn-cgi/access/certs`, a `{ keys: JWK[] }` document);
   * default `fetch`. Tests give keys they made.
   */
  readonly fetchCerts?: ((url: string) => Promise<unknown>) | undefined
}

/**
 * `DurabilityInspector.handler`'s options: where it is mounted, which objects it shows, and who may use it.
 */
export interface DurabilityInspectorOptions {
  /** Where the inspector is mounted (default `"/_durability"`): the page at `<prefix>/`, the API at `<prefix>/api/`. */
  readonly prefix?: string | undefined
  /** Which objects the inspector lists and reaches. */
  readonly objects: DurabilityInspectorObjects
  /** A secret of at least 16 characters, sent as `Authorization: Bearer <token>`. */
  readonly token?: string | undefined
  /** Cloudflare Access: requests carrying a valid `Cf-Access-Jwt-Assertion` for this application are let in. */
  readonly access?: DurabilityInspectorAccess | undefined
  /** Reads only: every action answers 403. */
  readonly readOnly?: boolean | undefined
  /** The objects' method that answers inspector requests (default `"inspect"`). */
  readonly method?: string | undefined
  /** Where internal errors are logged (default: the console); responses never carry them. */
  readonly log?: Logging.Sink | undefined
}

/**
 * A Worker `fetch` handler: the inspector's response, or undefined for a URL outside its prefix (your routes
 * go on).
 */
export type DurabilityInspectorHandler = (request: Request) => Promise<Response | undefined>

const OPTIONS = ["prefix", "objects", "token", "access", "readOnly", "method", "log"]
const MIN_TOKEN = 16
const MAX_OBJECTS = 10_000

const shown = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)
  if (typeof value === "function") return "a function"
  if (Array.isArray(value)) return "an array"
  if (value === null) return "null"
  return typeof value === "object" ? "an object" : String(value)
}

const isObject = (value: unknown): value is Record<PropertyKey, unknown> => typeof value === "object" && value !== null

const checkPrefix = (prefix: unknown): string => {
  if (prefix === undefined) return "/_durability"
  if (typeof prefix !== "string" || !/^(\/[A-Za-z0-9._~!$&'()*+,;=:@-]+)+$/.test(prefix)) {
    throw new TypeError(`prefix must be a path like "/_durability" (starting with "/", no trailing "/"), got ${shown(prefix)}`)
  }
  return prefix
}

const checkNamespace = (namespace: unknown, field: string): DurabilityInspectorNamespace => {
  if (!isObject(namespace) || typeof namespace["idFromName"] !== "function" || typeof namespace["get"] !== "function") {
    throw new TypeError(`${field} must be a Durable Object namespace (with idFromName and get), got ${shown(namespace)}`)
  }
  return namespace as unknown as DurabilityInspectorNamespace
}

interface Target {
  readonly namespace: DurabilityInspectorNamespace
  readonly name: string
}

interface Resolver {
  readonly label: string | undefined
  readonly resolve: (name: string) => unknown
  readonly list: (() => Iterable<string> | Promise<Iterable<string>>) | undefined
}

const isReachableName = (name: unknown): name is string =>
  typeof name === "string" && name.length > 0 && name.length <= 256 && name !== "." && name !== ".."

const checkSource = (source: unknown, field: string, targets: Map<string, Target>, resolvers: Array<Resolver>): void => {
  if (!isObject(source)) throw new TypeError(`${field} must be { namespace, names }, { router } or { resolve }, got ${shown(source)}`)
  const label = source["label"]
  if (label !== undefined && (typeof label !== "string" || !/^[A-Za-z0-9._~-]{1,64}$/.test(label))) {
    throw new TypeError(`${field}.label must be 1 to 64 letters, digits or . _ ~ -, got ${shown(label)}`)
  }
  if ("resolve" in source) {
    const { list, resolve } = source
    if (typeof resolve !== "function") throw new TypeError(`${field}.resolve must be a function from a name to a stub, got ${shown(resolve)}`)
    if (list !== undefined && typeof list !== "function") throw new TypeError(`${field}.list must be a function, got ${shown(list)}`)
    resolvers.push({
      label: label as string | undefined,
      resolve: resolve as Resolver["resolve"],
      list: list as Resolver["list"]
    })
    return
  }
  let namespace: DurabilityInspectorNamespace
  let names: ReadonlyArray<unknown>
  if ("router" in source) {
    // The router's `objects` (`JobsRouter.RouterObjects`): its namespace and shard names.
    const routed = isObject(source["router"]) ? source["router"]["objects"] : undefined
    if (!isObject(routed)) throw new TypeError(`${field}.router must be what DurabilityJobs.router(...) returned, got ${shown(source["router"])}`)
    namespace = checkNamespace(routed["namespace"], `${field}.router's namespace`)
    const given = routed["names"]
    if (!Array.isArray(given) || given.length === 0) throw new TypeError(`${field}.router.objects.names must be a non-empty array, got ${shown(given)}`)
    names = given
  } else {
    namespace = checkNamespace(source["namespace"], `${field}.namespace`)
    const given = source["names"]
    if (!Array.isArray(given) || given.length === 0 || given.length > MAX_OBJECTS) {
      throw new TypeError(`${field}.names must be a non-empty array of at most ${MAX_OBJECTS} object names, got ${shown(given)}`)
    }
    names = given
  }
  for (const [index, name] of names.entries()) {
    if (!isReachableName(name)) {
      throw new TypeError(`${field}.names[${index}] must be a name of 1 to 256 characters, not "." or ".." (a URL cannot address them), got ${shown(name)}`)
    }
    const listed = label === undefined ? name : `${label}:${name}`
    if (targets.has(listed)) throw new TypeError(`${field}.names[${index}] repeats ${shown(listed)} (listed names must be unique)`)
    targets.set(listed, { namespace, name })
  }
}

/** The listed names, each with the namespace and name of its object, and the resolvers in order. */
const checkObjects = (objects: unknown) => {
  const targets = new Map<string, Target>()
  const resolvers: Array<Resolver> = []
  if (Array.isArray(objects)) {
    if (objects.length === 0) throw new TypeError("objects must not be an empty array")
    objects.forEach((source, index) => checkSource(source, `objects[${index}]`, targets, resolvers))
  } else {
    checkSource(objects, "objects", targets, resolvers)
  }
  if (targets.size > MAX_OBJECTS) throw new TypeError(`objects lists ${targets.size} objects; at most ${MAX_OBJECTS}`)
  return { targets, resolvers }
}

/** The stub of `listed`: a listed object's, else the first resolver's that answers for it. */
const stubOf = (targets: ReadonlyMap<string, Target>, resolvers: ReadonlyArray<Resolver>) => (listed: string): unknown => {
  const target = targets.get(listed)
  if (target !== undefined) {
    const namespace = target.namespace as unknown as { idFromName(name: string): unknown; get(id: unknown): unknown }
    return namespace.get(namespace.idFromName(target.name))
  }
  for (const resolver of resolvers) {
    const name = resolver.label === undefined
      ? listed
      : listed.startsWith(`${resolver.label}:`) ? listed.slice(resolver.label.length + 1) : undefined
    if (name === undefined || !isReachableName(name)) continue
    const stub = resolver.resolve(name)
    if (stub !== undefined && stub !== null) return stub
  }
  return undefined
}

/** The names the page lists: the listed objects, then each resolver's listing (at most `MAX_OBJECTS` in all). */
const listNames = (targets: ReadonlyMap<string, Target>, resolvers: ReadonlyArray<Resolver>) => async (): Promise<ReadonlyArray<string>> => {
  const names = new Set(targets.keys())
  for (const resolver of resolvers) {
    if (resolver.list === undefined) continue
    for (const name of await resolver.list()) {
      if (names.size >= MAX_OBJECTS) return [...names]
      if (isReachableName(name)) names.add(resolver.label === undefined ? name : `${resolver.label}:${name}`)
    }
  }
  return [...names]
}

const checkAccess = (access: unknown): AccessConfig | undefined => {
  if (access === undefined) return undefined
  if (!isObject(access)) throw new TypeError(`access must be { teamDomain, audience }, got ${shown(access)}`)
  for (const key of Object.keys(access)) {
    if (!["teamDomain", "audience", "fetchCerts"].includes(key)) throw new TypeError(`access has no option ${shown(key)}`)
  }
  const domain = access["teamDomain"]
  if (typeof domain !== "string" || !/^[a-z0-9.-]+\.[a-z]{2,}$/i.test(domain.replace(/^https:\/\//, "").replace(/\/$/, ""))) {
    throw new TypeError(`access.teamDomain must be a host like "myteam.cloudflareaccess.com", got ${shown(domain)}`)
  }
  const audience = access["audience"]
  if (typeof audience !== "string" || audience.length === 0) {
    throw new TypeError(`access.audience must be the Access application's AUD tag (a non-empty string), got ${shown(audience)}`)
  }
  const fetchCerts = access["fetchCerts"]
  if (fetchCerts !== undefined && typeof fetchCerts !== "function") {
    throw new TypeError(`access.fetchCerts must be a function, got ${shown(fetchCerts)}`)
  }
  return {
    teamDomain: domain.replace(/^https:\/\//, "").replace(/\/$/, "").toLowerCase(),
    audience,
    fetchCerts: (fetchCerts as AccessConfig["fetchCerts"] | undefined) ?? (async (url) => {
      const response = await fetch(url, { signal: AbortSignal.timeout(CERTS_TIMEOUT_MS) })
      if (!response.ok) throw new Error(`${url} answered ${response.status}`)
      return response.json()
    })
  }
}

const checkOptions = (options: unknown) => {
  if (!isObject(options)) throw new TypeError("DurabilityInspector.handler needs an options object")
  for (const key of Object.keys(options)) {
    if (!OPTIONS.includes(key)) throw new TypeError(`DurabilityInspector.handler has no option ${shown(key)} (options: ${OPTIONS.join(", ")})`)
  }
  const token = options["token"]
  if (token !== undefined && (typeof token !== "string" || token.length < MIN_TOKEN || !/^[\x21-\x7e]+$/.test(token))) {
    // Shown by length only: the value is a secret.
    throw new TypeError(
      `token must be a secret of at least ${MIN_TOKEN} visible ASCII characters (no spaces), got ${typeof token === "string" ? `a string of ${token.length} characters` : shown(token)}`
    )
  }
  for (const key of ["readOnly"] as const) {
    if (options[key] !== undefined && typeof options[key] !== "boolean") throw new TypeError(`${key} must be a boolean, got ${shown(options[key])}`)
  }
  const method = options["method"]
  if (method !== undefined && (typeof method !== "string" || method.length === 0)) {
    throw new TypeError(`method must be the name of the objects' inspect method, got ${shown(method)}`)
  }
  const log = options["log"]
  if (log !== undefined && typeof log !== "function") throw new TypeError(`log must be a function, got ${shown(log)}`)
  const { resolvers, targets } = checkObjects(options["objects"])
  return {
    prefix: checkPrefix(options["prefix"]),
    listNames: listNames(targets, resolvers),
    stubOf: stubOf(targets, resolvers),
    method: (method as string | undefined) ?? "inspect",
    token: token as string | undefined,
    access: checkAccess(options["access"]),
    readOnly: options["readOnly"] === true,
    log: (log as Logging.Sink | undefined) ?? Logging.consoleSink
  }
}

/** Problems already logged in this isolate: a handler built per request logs its problem once. */
const logged = new Set<string>()

/**
 * What an anonymous caller may read of a refused option: the rule, not the value given (a token's length,
 * an object's name).
 */
const publicProblem = (message: string): string => message.replace(/, got [\s\S]*$/, "").replace(/ repeats [\s\S]*$/, " repeats a name")

/** The prefix to answer under when the options were refused: the one given when it is valid, else the default. */
const prefixOf = (options: unknown): string => {
  try {
    return checkPrefix(isObject(options) ? options["prefix"] : undefined)
  } catch {
    return "/_durability"
  }
}

/** The inspector's web page and admin API, to mount in a Worker's `fetch`. */
export const DurabilityInspector = {
  /**
   * A `fetch` handler for the inspector: resolves `undefined` for URLs outside `prefix` (your own
   * routes go on), else the page or the API's answer. Off (403 on the API) until `token` or
   * `access` is given. Build it once (e.g. at module scope, or once per `env`), not per request.
   *
   * It never throws: options it refuses (a token too short, an unknown option, …) turn the inspector off
   * instead, every URL under its prefix answering 503 `Misconfigured` with the rule that was broken, and
   * the whole problem logged once (`durability.inspector.misconfigured`); the Worker's other routes go on.
   */
  handler(options: DurabilityInspectorOptions): DurabilityInspectorHandler {
    try {
      return makeHandler(checkOptions(options))
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      const sink = isObject(options) && typeof options["log"] === "function" ? options["log"] as Logging.Sink : Logging.consoleSink
      if (!logged.has(message)) {
        logged.add(message)
        try {
          sink({ level: "ERROR", event: "durability.inspector.misconfigured", message: `durability inspector is off: ${message}` })
        } catch {
          // A broken sink must not take the Worker down either.
        }
      }
      return misconfiguredHandler(prefixOf(options), publicProblem(message))
    }
  }
} as const
