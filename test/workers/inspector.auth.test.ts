/**
 * The inspector's gate in workerd, through `DurabilityInspector.handler` called as a Worker's fetch
 * would: off unless configured (403), bearer tokens (401 for a missing or wrong one, with
 * `WWW-Authenticate`), Cloudflare Access JWTs signed by a key made here (RS256; bad signature,
 * expired, wrong audience or issuer, unknown key → 401), read-only (actions 403), the POST-only JSON
 * rule (415, 400), the body bound (413), the security headers, the page's CSP, URLs outside the
 * prefix (undefined), refused options (the inspector off, 503 under its prefix, never a throw), cross-site
 * actions and other methods (403, 405), deeply nested bodies (400), the certs fetch bounded (one at a time,
 * backoff, timeout), and an object that throws (503, nothing leaked).
 * The objects here are stand-ins answering from memory; inspector.api.test.ts uses a real one.
 */
import { DurabilityInspector } from "durability/inspector"
import { describe, expect, it } from "vitest"

const TOKEN = "test-token-0123456789abcdef"
const BASE = "https://worker.test"

const OVERVIEW = {
  scheduler: {
    objectId: null,
    physicalAlarm: null,
    earlyTimer: null,
    permits: { capacity: 1, available: 1, waiting: 0 },
    runningCount: 0,
    running: [],
    capabilities: [],
    now: 0
  }
}

/** Requests each stand-in object received, by name. */
const received = new Map<string, Array<unknown>>()

/** A namespace whose objects answer from memory: `broken` throws, `odd` answers a wrong shape. */
const namespace = {
  idFromName: (name: string) => name,
  get: (id: string) => ({
    inspect: async (request: unknown) => {
      received.set(id, [...(received.get(id) ?? []), request])
      if (id === "broken") throw new Error("secret database password in a stack")
      if (id === "odd") return { ok: true, value: { unexpected: "shape" } }
      const tag = (request as { _tag: string })._tag
      return tag === "Overview" ? { ok: true, value: OVERVIEW } : { ok: true, value: { changed: 1 } }
    }
  })
}

const objects = { namespace, names: ["main", "broken", "odd", "tenant:1"] }

const get = (path: string, headers: Record<string, string> = {}) => new Request(`${BASE}${path}`, { headers })
const post = (path: string, body: string | null, headers: Record<string, string> = {}) =>
  new Request(`${BASE}${path}`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body })
const bearer = { Authorization: `Bearer ${TOKEN}` }

const send = async (handler: (request: Request) => Promise<Response | undefined>, request: Request) => {
  const response = await handler(request)
  if (response === undefined) throw new Error(`the inspector did not answer ${request.url}`)
  const text = await response.text()
  const isJson = (response.headers.get("Content-Type") ?? "").startsWith("application/json")
  return { status: response.status, headers: response.headers, text, body: isJson ? JSON.parse(text) as unknown : undefined }
}

// ---------------------------------------------------------------------------------------------
// Access JWTs signed by a key made here

const base64Url = (bytes: Uint8Array | string) => {
  const data = typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes
  let binary = ""
  for (const byte of data) binary += String.fromCharCode(byte)
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
}

const TEAM = "myteam.cloudflareaccess.com"
const AUD = "aud-tag-0123"

const makeKey = async (kid: string) => {
  const pair = await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"]
  ) as CryptoKeyPair
  const jwk = await crypto.subtle.exportKey("jwk", pair.publicKey) as JsonWebKey
  return { kid, privateKey: pair.privateKey, jwk: { kid, kty: "RSA", alg: "RS256", use: "sig", n: jwk.n, e: jwk.e } }
}

const sign = async (key: { readonly kid: string; readonly privateKey: CryptoKey }, claims: Record<string, unknown>, header: Record<string, unknown> = {}) => {
  const head = base64Url(JSON.stringify({ alg: "RS256", kid: key.kid, typ: "JWT", ...header }))
  const body = base64Url(JSON.stringify(claims))
  const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key.privateKey, new TextEncoder().encode(`${head}.${body}`))
  return `${head}.${body}.${base64Url(new Uint8Array(signature))}`
}

const now = () => Math.floor(Date.now() / 1000)
const validClaims = () => ({ iss: `https://${TEAM}`, aud: [AUD], exp: now() + 600, nbf: now() - 10, sub: "user" })

describe("inspector auth: off unless configured", () => {
  it("answers 403 to every API request when neither token nor access is given, and still serves the page", async () => {
    const handler = DurabilityInspector.handler({ objects })
    // `received` is shared by the file's tests, whatever order they run in: count this test's requests only.
    const before = received.get("main")?.length ?? 0
    for (const request of [get("/_durability/api/objects"), get("/_durability/api/objects/main", bearer), post("/_durability/api/objects/main/purge", "{}")]) {
      const response = await send(handler, request)
      expect(response.status).toBe(403)
      expect(response.body).toEqual({ _tag: "Forbidden", message: expect.stringContaining("the inspector is off") })
    }
    expect(received.get("main")?.length ?? 0).toBe(before)
    const page = await send(handler, get("/_durability/"))
    expect(page.status).toBe(200)
    expect(page.headers.get("Content-Type")).toBe("text/html; charset=utf-8")
  })

  it("resolves undefined outside the prefix, so the Worker's own routes go on", async () => {
    const handler = DurabilityInspector.handler({ objects, token: TOKEN })
    for (const path of ["/", "/api/objects", "/_durability_x/api/objects", "/other/_durability/"]) {
      expect(await handler(get(path, bearer))).toBeUndefined()
    }
    const custom = DurabilityInspector.handler({ objects, token: TOKEN, prefix: "/admin/jobs" })
    expect(await custom(get("/_durability/api/objects", bearer))).toBeUndefined()
    expect((await send(custom, get("/admin/jobs/api/objects", bearer))).body).toEqual({
      objects: [{ name: "main" }, { name: "broken" }, { name: "odd" }, { name: "tenant:1" }]
    })
  })
})

describe("inspector auth: bearer token", () => {
  const handler = DurabilityInspector.handler({ objects, token: TOKEN })

  it("lets the right token in", async () => {
    const response = await send(handler, get("/_durability/api/objects/main", bearer))
    expect(response.status).toBe(200)
    expect(response.body).toEqual(OVERVIEW)
  })

  it("answers 401 with WWW-Authenticate for a missing, wrong, truncated or non-Bearer credential", async () => {
    const cases: ReadonlyArray<[Record<string, string>, string]> = [
      [{}, "missing credentials"],
      [{ Authorization: "Bearer wrong-token-0123456789abcdef" }, "invalid bearer token"],
      [{ Authorization: `Bearer ${TOKEN.slice(0, -1)}` }, "invalid bearer token"],
      [{ Authorization: `Bearer ${TOKEN}x` }, "invalid bearer token"],
      [{ Authorization: `Basic ${btoa(`user:${TOKEN}`)}` }, "must be Bearer <token>"],
      [{ "Cf-Access-Jwt-Assertion": "a.b.c" }, "Access JWTs are not accepted here"]
    ]
    for (const [headers, message] of cases) {
      const response = await send(handler, get("/_durability/api/objects/main", headers))
      expect(response.status, JSON.stringify(headers)).toBe(401)
      expect(response.body).toEqual({ _tag: "Unauthorized", message: expect.stringContaining(message) })
      expect(response.headers.get("WWW-Authenticate")).toMatch(/^Bearer /)
    }
  })

  it("checks credentials before anything else: an unknown endpoint or object is 401 without them", async () => {
    for (const request of [get("/_durability/api/nothing"), get("/_durability/api/objects/nobody"), post("/_durability/api/objects/main/purge", "not json")]) {
      expect((await send(handler, request)).status).toBe(401)
    }
  })

  it("never reads the token from a cookie or the URL", async () => {
    for (const request of [get(`/_durability/api/objects?token=${TOKEN}`), get("/_durability/api/objects", { Cookie: `token=${TOKEN}; authorization=Bearer ${TOKEN}` })]) {
      expect((await send(handler, request)).status).toBe(401)
    }
  })

  it("sets no cookie and marks every response no-store, nosniff and HSTS", async () => {
    for (const request of [get("/_durability/api/objects", bearer), get("/_durability/api/objects"), get("/_durability/"), get("/_durability/app.js")]) {
      const response = await send(handler, request)
      expect(response.headers.get("Set-Cookie")).toBeNull()
      expect(response.headers.get("Cache-Control")).toBe("no-store")
      expect(response.headers.get("X-Content-Type-Options")).toBe("nosniff")
      expect(response.headers.get("Strict-Transport-Security")).toBe("max-age=31536000")
    }
  })
})

describe("inspector auth: the page and its assets", () => {
  const handler = DurabilityInspector.handler({ objects, token: TOKEN })

  it("serves the page with the strict CSP, its script and style without credentials", async () => {
    const page = await send(handler, get("/_durability/"))
    expect(page.headers.get("Content-Security-Policy")).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
    )
    expect((await send(handler, get("/_durability/app.js"))).headers.get("Content-Type")).toBe("text/javascript; charset=utf-8")
    expect((await send(handler, get("/_durability/app.css"))).headers.get("Content-Type")).toBe("text/css; charset=utf-8")
  })

  it("redirects the bare prefix to the page, and answers 404 JSON for other paths under it", async () => {
    const redirect = await handler(get("/_durability?x=1"))
    expect(redirect?.status).toBe(308)
    expect(redirect?.headers.get("Location")).toBe("/_durability/?x=1")
    const missing = await send(handler, get("/_durability/secret.txt"))
    expect(missing.status).toBe(404)
    expect(missing.body).toEqual({ _tag: "NotFound", message: expect.any(String) })
    expect((await send(handler, post("/_durability/app.js", "{}"))).status).toBe(405)
  })
})

describe("inspector auth: actions", () => {
  it("answers 403 to actions when read-only, and still answers reads", async () => {
    const handler = DurabilityInspector.handler({ objects, token: TOKEN, readOnly: true })
    const before = received.get("main")?.length ?? 0
    const action = await send(handler, post("/_durability/api/objects/main/queues/work/pause", "{}", bearer))
    expect(action.status).toBe(403)
    expect(action.body).toEqual({ _tag: "Forbidden", message: expect.stringContaining("read-only") })
    expect(received.get("main")?.length ?? 0).toBe(before)
    expect((await send(handler, get("/_durability/api/objects/main", bearer))).status).toBe(200)
  })

  it("takes actions only as POST with a JSON body of at most 16 KiB", async () => {
    const handler = DurabilityInspector.handler({ objects, token: TOKEN })
    const path = "/_durability/api/objects/main/queues/work/jobs/j1/retry"
    const ok = await send(handler, post(path, "{}", bearer))
    expect(ok).toMatchObject({ status: 200, body: { changed: 1 } })
    expect(received.get("main")?.at(-1)).toEqual({ _tag: "RetryJob", queue: "work", id: "j1" })
    // An empty body counts as {}.
    expect((await send(handler, post(path, null, bearer))).status).toBe(200)

    const getAction = await send(handler, get(path, bearer))
    expect(getAction.status).toBe(404)
    expect(getAction.body).toEqual({ _tag: "NotFound", message: `no endpoint GET ${path.slice("/_durability".length)}` })

    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const response = await send(handler, post(path, "{}", { ...bearer, "Content-Type": type }))
      expect(response.status, type).toBe(415)
      expect(response.body).toEqual({ _tag: "UnsupportedMediaType", message: expect.stringContaining("application/json") })
    }
    const malformed = await send(handler, post(path, "{", bearer))
    expect(malformed).toMatchObject({ status: 400, body: { _tag: "BadRequest", message: "the request body is not valid JSON" } })

    const big = JSON.stringify({ reason: "x".repeat(17 * 1024) })
    const tooLarge = await send(handler, post("/_durability/api/objects/main/queues/work/jobs/j1/cancel", big, bearer))
    expect(tooLarge.status).toBe(413)
    expect(tooLarge.body).toEqual({ _tag: "PayloadTooLarge", message: expect.stringContaining("16384 bytes") })
    // Streamed without a length: cut at the bound all the same.
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 20; i++) controller.enqueue(new TextEncoder().encode(" ".repeat(1024)))
        controller.close()
      }
    })
    const streamed = new Request(`${BASE}${path}`, { method: "POST", headers: { ...bearer, "Content-Type": "application/json" }, body: stream })
    expect((await send(handler, streamed)).status).toBe(413)
  })

  it("refuses a body nested deeper than 32 levels with 400 before decoding it (8 000 levels used to answer 500)", async () => {
    const handler = DurabilityInspector.handler({ objects, token: TOKEN })
    const before = received.get("main")?.length ?? 0
    const deep = `${"[".repeat(8_000)}${"]".repeat(8_000)}`
    const response = await send(handler, post("/_durability/api/objects/main/queues/work/jobs/j1/cancel", deep, bearer))
    expect(response).toMatchObject({ status: 400, body: { _tag: "BadRequest", message: "the request body nests deeper than 32 levels" } })
    // Brackets inside a string are not nesting.
    const quoted = JSON.stringify({ reason: "[".repeat(1_000) })
    expect((await send(handler, post("/_durability/api/objects/main/queues/work/jobs/j1/cancel", quoted, bearer))).status).toBe(200)
    expect(received.get("main")?.length ?? 0).toBe(before + 1)
  })

  it("refuses actions another site's page sends (Origin, Sec-Fetch-Site), and other methods with 405", async () => {
    const handler = DurabilityInspector.handler({ objects, token: TOKEN })
    const path = "/_durability/api/objects/main/queues/work/pause"
    const before = received.get("main")?.length ?? 0
    for (const headers of [{ Origin: "https://evil.test" }, { "Sec-Fetch-Site": "cross-site" }, { "Sec-Fetch-Site": "same-site" }]) {
      const response = await send(handler, post(path, "{}", { ...bearer, ...headers }))
      expect(response.status, JSON.stringify(headers)).toBe(403)
      expect(response.body).toEqual({ _tag: "Forbidden", message: expect.stringContaining("the inspector's own page only") })
    }
    expect(received.get("main")?.length ?? 0).toBe(before)
    // The page's own requests, and clients that are not browsers.
    for (const headers of [{ Origin: BASE, "Sec-Fetch-Site": "same-origin" }, {}]) {
      expect((await send(handler, post(path, "{}", { ...bearer, ...headers }))).status, JSON.stringify(headers)).toBe(200)
    }
    for (const method of ["DELETE", "PUT", "PATCH"]) {
      const response = await send(handler, new Request(`${BASE}${path}`, { method, headers: { ...bearer, "Content-Type": "application/json" }, body: "{}" }))
      expect(response.status, method).toBe(405)
      expect(response.headers.get("Allow")).toBe("GET, HEAD, POST")
    }
  })
})

describe("inspector auth: Cloudflare Access", () => {
  const setup = async () => {
    const key = await makeKey("key-1")
    const other = await makeKey("key-2")
    const fetched: Array<string> = []
    const handler = DurabilityInspector.handler({
      objects,
      access: {
        teamDomain: TEAM,
        audience: AUD,
        fetchCerts: async (url) => {
          fetched.push(url)
          return { keys: [key.jwk], public_cert: { kid: key.kid, cert: "unused" } }
        }
      }
    })
    const asked = (jwt: string) => send(handler, get("/_durability/api/objects", { "Cf-Access-Jwt-Assertion": jwt }))
    return { key, other, fetched, handler, asked }
  }

  it("lets a valid JWT in, fetching the team's certs once", async () => {
    const { asked, fetched, key } = await setup()
    expect((await asked(await sign(key, validClaims()))).status).toBe(200)
    expect((await asked(await sign(key, { ...validClaims(), aud: AUD }))).status).toBe(200)
    expect(fetched).toEqual([`https://${TEAM}/cdn-cgi/access/certs`])
  })

  it("answers 401 naming why for a bad signature, another key, expiry, another audience or team, a wrong algorithm or garbage", async () => {
    const { asked, key, other } = await setup()
    const valid = await sign(key, validClaims())
    const [head, body] = valid.split(".")
    const forged = `${head}.${base64Url(JSON.stringify({ ...validClaims(), sub: "admin" }))}.${valid.split(".")[2]}`
    const cases: ReadonlyArray<[string, string]> = [
      [forged, "signature is invalid"],
      [`${head}.${body}.${base64Url("nope")}`, "signature is invalid"],
      [await sign(other, validClaims()), "a key the team does not publish"],
      [await sign(key, { ...validClaims(), exp: now() - 3600 }), "expired"],
      [await sign(key, { ...validClaims(), nbf: now() + 3600 }), "not valid yet"],
      [await sign(key, { ...validClaims(), aud: ["another-app"] }), "another application"],
      [await sign(key, { ...validClaims(), iss: "https://evil.cloudflareaccess.com" }), "another team"],
      [await sign(key, validClaims(), { alg: "none" }), "not RS256"],
      ["not-a-jwt", "not a JWT"]
    ]
    for (const [jwt, reason] of cases) {
      const response = await asked(jwt)
      expect(response.status, reason).toBe(401)
      expect(response.body).toEqual({ _tag: "Unauthorized", message: expect.stringContaining(reason) })
    }
  })

  it("answers 401 when the certs cannot be fetched, and accepts a bearer token only when one is configured", async () => {
    const key = await makeKey("key-1")
    const handler = DurabilityInspector.handler({
      objects,
      token: TOKEN,
      access: { teamDomain: TEAM, audience: AUD, fetchCerts: () => Promise.reject(new Error("offline")) }
    })
    const jwt = await send(handler, get("/_durability/api/objects", { "Cf-Access-Jwt-Assertion": await sign(key, validClaims()) }))
    expect(jwt.status).toBe(401)
    expect(jwt.body).toEqual({ _tag: "Unauthorized", message: expect.stringContaining("could not be fetched") })
    expect((await send(handler, get("/_durability/api/objects", bearer))).status).toBe(200)
    const { handler: accessOnly } = await setup()
    const refused = await send(accessOnly, get("/_durability/api/objects", bearer))
    expect(refused.body).toEqual({ _tag: "Unauthorized", message: expect.stringContaining("bearer tokens are not accepted here") })
  })

  it("fetches the certs once for 50 concurrent JWTs naming random keys, and once while the certs endpoint fails", async () => {
    const { asked, fetched, key } = await setup()
    const attacker = await makeKey("attacker")
    const forged = await Promise.all(Array.from({ length: 50 }, (_, i) => sign({ ...attacker, kid: `random-${i}` }, validClaims())))
    const answers = await Promise.all(forged.map(asked))
    expect(answers.map((answer) => answer.status)).toEqual(forged.map(() => 401))
    expect(fetched).toHaveLength(1)
    // The real key was in that one fetch: valid JWTs go on without another.
    expect((await asked(await sign(key, validClaims()))).status).toBe(200)
    expect(fetched).toHaveLength(1)

    let failing = 0
    const down = DurabilityInspector.handler({
      objects,
      access: {
        teamDomain: TEAM,
        audience: AUD,
        fetchCerts: () => {
          failing++
          return Promise.reject(new Error("certs endpoint down"))
        }
      }
    })
    for (let i = 0; i < 5; i++) {
      const response = await send(down, get("/_durability/api/objects", { "Cf-Access-Jwt-Assertion": await sign(key, validClaims()) }))
      expect(response.status).toBe(401)
    }
    // The first failed; the next waits its backoff (30 s, doubling) instead of fetching per request.
    expect(failing).toBe(1)
  })

  it("gives up on a certs fetch that does not answer within 5 s: 401, not a request that hangs", async () => {
    const key = await makeKey("key-1")
    const handler = DurabilityInspector.handler({
      objects,
      access: { teamDomain: TEAM, audience: AUD, fetchCerts: () => new Promise<never>(() => {}) }
    })
    const response = await send(handler, get("/_durability/api/objects", { "Cf-Access-Jwt-Assertion": await sign(key, validClaims()) }))
    expect(response).toMatchObject({ status: 401, body: { _tag: "Unauthorized", message: expect.stringContaining("could not be fetched") } })
  })
})

describe("inspector auth: long names and ids", () => {
  it("reaches an object named with 256 characters and a job id of 512 (the router stopped at 100)", async () => {
    const longName = "n".repeat(200) + "é".repeat(56)
    const handler = DurabilityInspector.handler({ objects: { namespace, names: [longName] }, token: TOKEN })
    const id = "j".repeat(256) + "✓".repeat(256)
    const path = `/_durability/api/objects/${encodeURIComponent(longName)}/queues/work/jobs/${encodeURIComponent(id)}/retry`
    const response = await send(handler, post(path, "{}", bearer))
    expect(response).toMatchObject({ status: 200, body: { changed: 1 } })
    expect(received.get(longName)?.at(-1)).toEqual({ _tag: "RetryJob", queue: "work", id })
  })

  it("refuses \".\" and \"..\" as object names, which a URL cannot address", () => {
    for (const name of [".", ".."]) {
      const lines: Array<unknown> = []
      DurabilityInspector.handler({ objects: { namespace, names: [name] }, token: TOKEN, log: (line) => void lines.push(line) })
      expect(lines).toEqual([expect.objectContaining({ event: "durability.inspector.misconfigured", message: expect.stringContaining('not "." or ".."') })])
    }
  })
})

describe("inspector: objects found by name", () => {
  it("reaches any object its resolver returns, lists what `list` names (with the label), and 404s the rest", async () => {
    const asked: Array<string> = []
    const handler = DurabilityInspector.handler({
      objects: [
        { namespace, names: ["main"] },
        {
          label: "user",
          resolve: (name) => {
            asked.push(name)
            if (name === "throws") throw new Error("resolver bug")
            return name.startsWith("u-") ? namespace.get(`user:${name}`) : undefined
          },
          list: async () => ["u-1", "u-2", "."]
        }
      ],
      token: TOKEN
    })
    const listed = await send(handler, get("/_durability/api/objects", bearer))
    // "." can never be addressed: it is not listed.
    expect(listed.body).toEqual({ objects: [{ name: "main" }, { name: "user:u-1" }, { name: "user:u-2" }] })
    // A name nobody listed is reached all the same, as the resolver says.
    const overview = await send(handler, get(`/_durability/api/objects/${encodeURIComponent("user:u-9000")}`, bearer))
    expect(overview.status).toBe(200)
    expect(received.get("user:u-9000")?.at(-1)).toEqual({ _tag: "Overview" })
    for (const refused of ["user:admin", "user:throws", "other:u-1", "u-1"]) {
      const response = await send(handler, get(`/_durability/api/objects/${encodeURIComponent(refused)}`, bearer))
      expect(response.status, refused).toBe(404)
      expect(response.body).toEqual({ _tag: "NotFound", message: `no object named ${JSON.stringify(refused)}` })
    }
    expect(asked).toEqual(["u-9000", "admin", "throws"])
  })

  it("answers 503 when the listing fails, and refuses a resolver that is not a function", async () => {
    const lines: Array<Readonly<Record<string, unknown>>> = []
    const handler = DurabilityInspector.handler({
      objects: { resolve: () => undefined, list: () => Promise.reject(new Error("directory down")) },
      token: TOKEN,
      log: (line) => void lines.push(line)
    })
    const response = await send(handler, get("/_durability/api/objects", bearer))
    expect(response).toMatchObject({ status: 503, body: { _tag: "Unavailable", message: "the objects could not be listed" } })
    expect(JSON.stringify(lines)).toContain("directory down")
    const bad = DurabilityInspector.handler({ objects: { resolve: "nope" } as never, token: TOKEN })
    expect((await send(bad, get("/_durability/api/objects", bearer))).body).toMatchObject({ _tag: "Misconfigured", message: expect.stringContaining("resolve must be a function") })
  })
})

describe("inspector auth: failures leak nothing", () => {
  const logged: Array<Readonly<Record<string, unknown>>> = []
  const handler = DurabilityInspector.handler({ objects, token: TOKEN, log: (entry) => void logged.push(entry) })

  it("answers 503 when the object's inspect throws, without its message, and logs it", async () => {
    const response = await send(handler, get("/_durability/api/objects/broken", bearer))
    expect(response.status).toBe(503)
    expect(response.body).toEqual({ _tag: "Unavailable", message: expect.stringContaining(`object "broken" did not answer`) })
    expect(response.text).not.toContain("secret")
    expect(JSON.stringify(logged)).toContain("secret database password")
  })

  it("answers 500 InternalError when an answer has the wrong shape", async () => {
    const response = await send(handler, get("/_durability/api/objects/odd", bearer))
    expect(response).toMatchObject({ status: 500, body: { _tag: "InternalError", message: "internal error" } })
    expect(response.text).not.toContain("unexpected")
    expect(JSON.stringify(logged)).toContain("durability inspector: internal error")
  })

  it("answers 404 for an object it was not given, and reaches names with reserved characters", async () => {
    const unknown = await send(handler, get("/_durability/api/objects/nobody", bearer))
    expect(unknown).toMatchObject({ status: 404, body: { _tag: "NotFound", message: `no object named "nobody"` } })
    expect((await send(handler, get(`/_durability/api/objects/${encodeURIComponent("tenant:1")}`, bearer))).status).toBe(200)
  })
})

describe("inspector auth: the objects' method", () => {
  it("calls the method named by `method`, and answers 503 when the object has no such method", async () => {
    const asked: Array<unknown> = []
    const custom = {
      idFromName: (name: string) => name,
      get: () => ({ look: async (request: unknown) => (asked.push(request), { ok: true, value: OVERVIEW }) })
    }
    const handler = DurabilityInspector.handler({ objects: { namespace: custom, names: ["x"] }, token: TOKEN, method: "look", log: () => undefined })
    expect((await send(handler, get("/_durability/api/objects/x", bearer))).status).toBe(200)
    expect(asked).toEqual([{ _tag: "Overview" }])
    const missing = DurabilityInspector.handler({ objects: { namespace: custom, names: ["x"] }, token: TOKEN, log: () => undefined })
    const response = await send(missing, get("/_durability/api/objects/x", bearer))
    expect(response).toMatchObject({ status: 503, body: { _tag: "Unavailable", message: expect.stringContaining("inspect(request)") } })
  })
})

describe("inspector auth: options", () => {
  it("turns itself off for bad options: 503 naming the rule under its prefix, the Worker's routes untouched, one log line", async () => {
    const cases: ReadonlyArray<[unknown, RegExp]> = [
      [undefined, /needs an options object/],
      [{ objects, tokn: TOKEN }, /no option "tokn"/],
      [{ objects, token: "short" }, /at least 16 visible ASCII characters/],
      [{ objects, token: "with spaces 0123456789" }, /no spaces/],
      [{ objects, token: TOKEN, prefix: "/_durability/" }, /prefix must be a path/],
      [{ objects, token: TOKEN, prefix: "durability" }, /prefix must be a path/],
      [{ token: TOKEN }, /objects must be/],
      [{ objects: { namespace, names: [] }, token: TOKEN }, /objects.names must be a non-empty array/],
      [{ objects: { namespace, names: ["a", "a"] }, token: TOKEN }, /objects.names\[1\] repeats "a"/],
      [{ objects: { namespace: {}, names: ["a"] }, token: TOKEN }, /objects.namespace must be a Durable Object namespace/],
      [{ objects: { router: {} }, token: TOKEN }, /objects.router must be what DurabilityJobs.router/],
      [{ objects: [], token: TOKEN }, /objects must not be an empty array/],
      [{ objects: [{ namespace, names: ["a"], label: "x" }, { namespace, names: ["x:a"] }], token: TOKEN }, /objects\[1\].names\[0\] repeats "x:a"/],
      [{ objects: [{ namespace, names: ["a"], label: "bad label" }], token: TOKEN }, /objects\[0\].label must be/],
      [{ objects, access: { teamDomain: "not a host", audience: AUD } }, /access.teamDomain/],
      [{ objects, access: { teamDomain: TEAM, audience: "" } }, /access.audience/],
      [{ objects, token: TOKEN, readOnly: "yes" }, /readOnly must be a boolean/],
      [{ objects, token: TOKEN, method: "" }, /method must be/]
    ]
    for (const [options, message] of cases) {
      const lines: Array<Readonly<Record<string, unknown>>> = []
      const withLog = typeof options === "object" && options !== null ? { ...options, log: (line: Readonly<Record<string, unknown>>) => void lines.push(line) } : options
      // Built twice, as a handler built inside `fetch` is: it never throws, and logs its problem once.
      for (let i = 0; i < 2; i++) {
        const handler = DurabilityInspector.handler(withLog as never)
        const response = await send(handler, get("/_durability/api/objects", bearer))
        expect(response.status, String(message)).toBe(503)
        expect(response.body).toEqual({ _tag: "Misconfigured", message: expect.stringContaining("the inspector is off: its options were refused") })
        // The value given stays out of the answer (a token's length, an object's name).
        expect(String((response.body as { message: string }).message)).not.toMatch(/, got |"x:a"/)
        expect((await send(handler, get("/_durability/"))).status).toBe(503)
        expect(await handler(get("/my/own/route"))).toBeUndefined()
      }
      if (withLog !== undefined) {
        expect(lines, String(message)).toEqual([
          expect.objectContaining({ level: "ERROR", event: "durability.inspector.misconfigured", message: expect.stringMatching(message) })
        ])
      }
    }
    // A valid prefix is kept for the answer; the default is used when the prefix itself is refused.
    const custom = DurabilityInspector.handler({ objects, token: "short", prefix: "/admin/jobs" } as never)
    expect((await send(custom, get("/admin/jobs/api/objects"))).status).toBe(503)
    expect(await custom(get("/_durability/api/objects"))).toBeUndefined()
  })
})
