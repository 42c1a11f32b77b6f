/**
 * The inspector's web handler: the page's static assets, and `InspectorApi` served through
 * `HttpApiBuilder.toWebHandler`, behind the rules every response keeps (security headers, a bounded
 * JSON body for actions, no internals in errors).
 * @internal
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as InspectorApi from "./InspectorApi.js"
import * as Logging from "../engine/Logging.js"
import { type AuthConfig, makeAuthorize } from "./auth.js"
import { APP_CSS, APP_JS, INDEX_HTML } from "./page.js"
import * as P from "../inspection/protocol.js"

/** Request bodies (actions) are at most this many bytes. */
export const MAX_BODY_BYTES = 16 * 1024
/** Arrays and objects nest at most this deep in an action's body (no action's body nests more than 2). */
export const MAX_BODY_DEPTH = 32

/** How deep `text`'s arrays and objects nest (JSON already parsed: brackets inside strings are skipped). */
const depthOf = (text: string): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i)
    if (inString) {
      if (char === 92) i++ // a backslash escapes the next character
      else if (char === 34) inString = false
    } else if (char === 34) inString = true
    else if (char === 91 || char === 123) deepest = Math.max(deepest, ++depth)
    else if (char === 93 || char === 125) depth--
  }
  return deepest
}

export const PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
/** JSON is never a document: nothing in it may load or run, whoever opens it. */
const API_CSP = "default-src 'none'; frame-ancestors 'none'"

export interface HttpConfig extends AuthConfig {
  /** Where the inspector is mounted: `/x` (no trailing slash). */
  readonly prefix: string
  /** The names the API lists, in display order (read per request: a resolver's listing may change). */
  readonly listNames: () => Promise<ReadonlyArray<string>>
  /** The stub of the object with that name, or undefined when the inspector may not reach it. */
  readonly stubOf: (name: string) => unknown
  /** The object's RPC method that answers inspector requests. */
  readonly method: string
  readonly log: Logging.Sink
}

const AnswerSchema = Schema.Union(
  Schema.Struct({ ok: Schema.Literal(true), value: Schema.Unknown }),
  Schema.Struct({ ok: Schema.Literal(false), failure: P.Failure })
)
const decodeAnswer = Schema.decodeUnknown(AnswerSchema)

const describe = (error: unknown): string => error instanceof Error ? `${error.name}: ${error.message}` : String(error)

const backend = (config: HttpConfig): Layer.Layer<InspectorApi.Backend> => {
  const notFound = (object: string) => new InspectorApi.NotFound({ message: `no object named ${JSON.stringify(object)}` })
  return Layer.succeed(InspectorApi.Backend, {
    prefix: config.prefix,
    names: Effect.tryPromise(config.listNames).pipe(
      Effect.tapError((error) => Effect.logError(`durability inspector: listing the objects failed: ${describe(error.error)}`)),
      Effect.mapError(() => new InspectorApi.Unavailable({ message: "the objects could not be listed" }))
    ),
    inspect: (object, request) =>
      Effect.gen(function*() {
        // A stub per request: stubs are I/O objects of the request that made them. A resolver that throws
        // refuses the name, as one that returns undefined does.
        const stub = yield* Effect.try(() => config.stubOf(object)).pipe(Effect.orElseSucceed(() => undefined))
        if (stub === undefined || stub === null) return yield* notFound(object)
        // Called as a method of the stub, not through `.call`: on an RPC stub `.call` is a remote property too.
        const answer = yield* Effect.tryPromise(() =>
          Promise.resolve((stub as Record<string, (request: unknown) => Promise<unknown>>)[config.method]!(request))
        ).pipe(
          Effect.tapError((error) =>
            Effect.logError(`durability inspector: object ${JSON.stringify(object)} did not answer ${request._tag}: ${describe(error.error)}`)
          ),
          Effect.mapError(() =>
            new InspectorApi.Unavailable({
              message: `object ${JSON.stringify(object)} did not answer (does its class have an ${config.method}(request) method that returns answerInspection(this.scheduler, request)?)`
            })
          )
        )
        // An answer of another shape is a server bug (500), not something to forward.
        return yield* Effect.orDie(decodeAnswer(answer))
      })
  })
}

const baseHeaders = (headers: Headers) => {
  // Browsers take it over HTTPS only; without includeSubDomains it binds no host but the Worker's.
  headers.set("Strict-Transport-Security", "max-age=31536000")
  headers.set("Cache-Control", "no-store")
  headers.set("X-Content-Type-Options", "nosniff")
  headers.set("Referrer-Policy", "no-referrer")
  headers.set("X-Frame-Options", "DENY")
}

const json = (status: number, body: unknown, extra?: Record<string, string>): Response => {
  const headers = new Headers({ "Content-Type": "application/json", "Content-Security-Policy": API_CSP, ...extra })
  baseHeaders(headers)
  return new Response(JSON.stringify(body), { status, headers })
}

const failure = (status: number, tag: string, message: string, extra?: Record<string, string>) =>
  json(status, { _tag: tag, message }, extra)

const ASSETS: Readonly<Record<string, { readonly body: string; readonly type: string }>> = {
  "/": { body: INDEX_HTML, type: "text/html; charset=utf-8" },
  "/app.js": { body: APP_JS, type: "text/javascript; charset=utf-8" },
  "/app.css": { body: APP_CSS, type: "text/css; charset=utf-8" }
}

const asset = (entry: { readonly body: string; readonly type: string }, head: boolean): Response => {
  const headers = new Headers({ "Content-Type": entry.type, "Content-Security-Policy": PAGE_CSP })
  baseHeaders(headers)
  return new Response(head ? null : entry.body, { status: 200, headers })
}

const API_METHODS = ["GET", "HEAD", "POST"]

/**
 * The router's longest path parameter, as sent (percent-encoded: up to 12 characters a character). Its
 * default, 100, made an id over 100 characters unreachable although ids may have 512 and names 256.
 */
const ROUTER_CONFIG = HttpRouter.setRouterConfig({ maxParamLength: 12 * 512 })

/**
 * Why an action comes from another site, if it does. The JSON content type already needs a CORS
 * preflight no one answers; under Cloudflare Access the credential is an ambient cookie, so a browser's
 * own word on where the request comes from is checked too. Clients that are not browsers send neither
 * header and are judged by their credentials alone.
 */
const crossSiteProblem = (request: Request, url: URL): string | undefined => {
  const site = request.headers.get("Sec-Fetch-Site")
  if (site !== null && site !== "same-origin" && site !== "none") return `actions are taken from the inspector's own page only (Sec-Fetch-Site: ${site.slice(0, 20)})`
  const origin = request.headers.get("Origin")
  if (origin !== null && origin !== url.origin) return "actions are taken from the inspector's own page only (another Origin)"
  return undefined
}

type Verdict = InspectorApi.BadRequest | InspectorApi.PayloadTooLarge | InspectorApi.UnsupportedMediaType

const tooLarge = () =>
  new InspectorApi.PayloadTooLarge({ message: `the request body is over ${MAX_BODY_BYTES} bytes` })

/** Reads at most `MAX_BODY_BYTES` (+1 to know it is over), whatever Content-Length says. */
const readBounded = async (body: ReadableStream<Uint8Array>): Promise<Uint8Array | undefined> => {
  const reader = body.getReader()
  const chunks: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > MAX_BODY_BYTES) {
      await reader.cancel().catch(() => {})
      return undefined
    }
    chunks.push(value)
  }
  const bytes = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) {
    bytes.set(chunk, offset)
    offset += chunk.byteLength
  }
  return bytes
}

/** An action's body: JSON (an empty body is `{}`), at most 16 KiB; or why it is refused. */
const readBody = async (request: Request): Promise<{ readonly text: string } | { readonly verdict: Verdict }> => {
  const type = (request.headers.get("Content-Type") ?? "").split(";")[0]!.trim().toLowerCase()
  if (type !== "application/json") {
    return {
      verdict: new InspectorApi.UnsupportedMediaType({
        message: `actions take a JSON body: send Content-Type: application/json${type === "" ? "" : ` (not ${type.slice(0, 100)})`}`
      })
    }
  }
  const length = Number(request.headers.get("Content-Length") ?? "0")
  if (Number.isFinite(length) && length > MAX_BODY_BYTES) return { verdict: tooLarge() }
  const bytes = request.body === null ? new Uint8Array(0) : await readBounded(request.body)
  if (bytes === undefined) return { verdict: tooLarge() }
  let text: string
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes)
  } catch {
    return { verdict: new InspectorApi.BadRequest({ message: "the request body is not UTF-8 text" }) }
  }
  if (text.trim() === "") return { text: "{}" }
  try {
    JSON.parse(text)
  } catch {
    return { verdict: new InspectorApi.BadRequest({ message: "the request body is not valid JSON" }) }
  }
  // Refused before decoding: describing a decode failure 8 000 levels deep overflowed the stack (a 500).
  if (depthOf(text) > MAX_BODY_DEPTH) {
    return { verdict: new InspectorApi.BadRequest({ message: `the request body nests deeper than ${MAX_BODY_DEPTH} levels` }) }
  }
  return { text }
}

/** The request's URL when it is under `prefix` (the inspector's to answer), else undefined (the Worker's own). */
const underPrefix = (request: Request, prefix: string): URL | undefined => {
  let url: URL
  try {
    url = new URL(request.url)
  } catch {
    return undefined
  }
  return url.pathname === prefix || url.pathname.startsWith(`${prefix}/`) ? url : undefined
}

/**
 * The handler of an inspector whose options were refused: every URL under `prefix` answers 503 naming the
 * problem, and the Worker's own routes go on (`undefined`). A misconfigured inspector must never take the
 * Worker down, as a `TypeError` thrown from its `fetch` would.
 */
export const misconfiguredHandler = (prefix: string, problem: string) => async (request: Request): Promise<Response | undefined> =>
  underPrefix(request, prefix) === undefined
    ? undefined
    : failure(503, "Misconfigured", `the inspector is off: its options were refused (${problem}); the Worker's log has the details`)

/**
 * The handler for one configuration: `undefined` for a URL outside the prefix. The HttpApi's
 * runtime is built on the first request and kept for the handler's life.
 */
export const makeHandler = (config: HttpConfig): (request: Request) => Promise<Response | undefined> => {
  const log = (message: string, error: unknown) => {
    try {
      config.log({ level: "ERROR", message: `${message}: ${describe(error)}` })
    } catch {
      // A broken sink must not turn a failure into another one.
    }
  }
  const web = HttpApiBuilder.toWebHandler(
    Layer.mergeAll(InspectorApi.layer, HttpServer.layerContext, ROUTER_CONFIG).pipe(
      Layer.provide(InspectorApi.authorization(makeAuthorize(config))),
      Layer.provide(backend(config)),
      Layer.provide(Logging.layer(config.log))
    )
  )

  const api = async (request: Request, url: URL, rest: string): Promise<Response> => {
    const target = new URL(url)
    target.pathname = rest
    if (!API_METHODS.includes(request.method)) {
      return failure(405, "MethodNotAllowed", `${request.method.slice(0, 20)} is not allowed here (GET for reads, POST for actions)`, {
        Allow: API_METHODS.join(", ")
      })
    }
    let verdict: Verdict | undefined
    let body: string | null = null
    if (request.method === "POST") {
      const crossSite = crossSiteProblem(request, url)
      if (crossSite !== undefined) return failure(403, "Forbidden", crossSite)
      const read = await readBody(request)
      if ("verdict" in read) verdict = read.verdict
      else body = read.text
    }
    const forwarded = new Request(target, { method: request.method, headers: request.headers, body })
    const response = await web.handler(forwarded, Context.make(InspectorApi.BodyVerdict, verdict))
    const headers = new Headers(response.headers)
    baseHeaders(headers)
    headers.set("Content-Security-Policy", API_CSP)
    // The challenge names the credential taken: the page asks for a token only after a Bearer one.
    if (response.status === 401) {
      headers.set("WWW-Authenticate", config.token === undefined ? `CloudflareAccess realm="durability inspector"` : `Bearer realm="durability inspector"`)
    }
    if (response.status >= 500 && response.status !== 503 && !(headers.get("Content-Type") ?? "").includes("json")) {
      // A failure the API did not describe: the same fixed body as any other internal error.
      return failure(500, "InternalError", "internal error")
    }
    return new Response(request.method === "HEAD" ? null : response.body, { status: response.status, headers })
  }

  const prefix = config.prefix
  return async (request: Request): Promise<Response | undefined> => {
    const url = underPrefix(request, prefix)
    if (url === undefined) return undefined
    const path = url.pathname
    try {
      const rest = path.slice(prefix.length)
      if (rest === "") {
        const headers = new Headers({ Location: `${prefix}/${url.search}` })
        baseHeaders(headers)
        return new Response(null, { status: 308, headers })
      }
      if (rest === "/api" || rest.startsWith("/api/")) return await api(request, url, rest)
      const entry = ASSETS[rest]
      if (entry === undefined) return failure(404, "NotFound", `no page at ${JSON.stringify(path.slice(0, 200))}`)
      if (request.method !== "GET" && request.method !== "HEAD") {
        return failure(405, "MethodNotAllowed", `${request.method.slice(0, 20)} is not allowed here (GET only)`, { Allow: "GET, HEAD" })
      }
      return asset(entry, request.method === "HEAD")
    } catch (error) {
      log("durability inspector: internal error", error)
      return failure(500, "InternalError", "internal error")
    }
  }
}
