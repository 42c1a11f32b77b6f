/**
 * The inspector's web handler: the page's static assets, and `InspectorApi` served through
 * `HttpApiBuilder.toWebHandler`, behind the rules every response keeps (security headers, a bounded
 * JSON body for actions, no internals in errors).
 * @internal
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
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

export const PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
/** JSON is never a document: nothing in it may load or run, whoever opens it. */
const API_CSP = "default-src 'none'; frame-ancestors 'none'"

export interface HttpConfig extends AuthConfig {
  /** Where the inspector is mounted: `/x` (no trailing slash). */
  readonly prefix: string
  readonly names: ReadonlyArray<string>
  /** The stub of the object with that name (asked only for names in `names`). */
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
  const known = new Set(config.names)
  return Layer.succeed(InspectorApi.Backend, {
    prefix: config.prefix,
    names: config.names,
    inspect: (object, request) =>
      Effect.gen(function*() {
        if (!known.has(object)) return yield* new InspectorApi.NotFound({ message: `no object named ${JSON.stringify(object)}` })
        // A stub per request: stubs are I/O objects of the request that made them.
        const answer = yield* Effect.tryPromise(() => {
          const stub = config.stubOf(object) as Record<string, (request: unknown) => Promise<unknown>>
          return Promise.resolve(stub[config.method]!(request))
        }).pipe(
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
  return { text }
}

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
    Layer.mergeAll(InspectorApi.layer, HttpServer.layerContext).pipe(
      Layer.provide(InspectorApi.authorization(makeAuthorize(config))),
      Layer.provide(backend(config)),
      Layer.provide(Logging.layer(config.log))
    )
  )

  const api = async (request: Request, url: URL, rest: string): Promise<Response> => {
    const target = new URL(url)
    target.pathname = rest
    let verdict: Verdict | undefined
    let body: string | null = null
    if (request.method !== "GET" && request.method !== "HEAD") {
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
    let url: URL
    try {
      url = new URL(request.url)
    } catch {
      return undefined
    }
    const path = url.pathname
    if (path !== prefix && !path.startsWith(`${prefix}/`)) return undefined
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
