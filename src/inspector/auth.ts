/**
 * Who may use the inspector: a bearer token compared in constant time, and/or a Cloudflare Access JWT
 * verified against the team's signing keys. Off (403) unless one is configured; read-only refuses
 * actions (403) to callers who are otherwise let in.
 * @internal
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { Forbidden, Unauthorized } from "./InspectorApi.js"

export interface AccessConfig {
  /** The team's Access domain, e.g. `myteam.cloudflareaccess.com` (the JWT's issuer is `https://<teamDomain>`). */
  readonly teamDomain: string
  /** The Access application's audience (AUD) tag. */
  readonly audience: string
  /** Fetches the team's certs document (`{ keys: JWK[] }`) from the URL; a seam for tests and custom fetching. */
  readonly fetchCerts: (url: string) => Promise<unknown>
}

export interface AuthConfig {
  readonly token: string | undefined
  readonly access: AccessConfig | undefined
  readonly readOnly: boolean
}

/** Keys are kept this long; a JWT naming an unknown key refetches at most once per `REFETCH_MS`. */
const KEYS_TTL_MS = 60 * 60 * 1000
const REFETCH_MS = 30 * 1000
/** After failed fetches the next waits `REFETCH_MS`, doubling, up to this. */
const MAX_BACKOFF_MS = 5 * 60 * 1000
/** A certs fetch that has not answered by then counts as failed. */
export const CERTS_TIMEOUT_MS = 5_000
/** Clock skew tolerated on `exp` and `nbf`. */
const SKEW_S = 60

const encoder = new TextEncoder()

const sha256 = async (text: string): Promise<Uint8Array> =>
  new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)))

/**
 * Equal secrets, in time independent of where they differ: both sides are hashed first, so the
 * compared bytes have a fixed length and an attacker learns nothing from a prefix match.
 */
export const sameSecret = async (given: string, expected: string): Promise<boolean> => {
  const [a, b] = await Promise.all([sha256(given), sha256(expected)])
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!
  return difference === 0
}

const base64UrlBytes = (text: string): Uint8Array => {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new Error("not base64url")
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4)
  const binary = atob(padded)
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

const base64UrlJson = (text: string): unknown => JSON.parse(new TextDecoder().decode(base64UrlBytes(text)))

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Verifies Access JWTs for one team and audience, keeping the team's keys between requests. */
export class AccessVerifier {
  readonly #config: AccessConfig
  readonly #issuer: string
  // Only settled values are kept: an in-flight fetch belongs to the request that started it (a promise of
  // one request's I/O is not awaited by another), so while one runs other requests use the keys there are.
  #keys = new Map<string, CryptoKey>()
  #fetchedAt = Number.NEGATIVE_INFINITY
  /** When the last fetch started, whatever came of it: anonymous JWTs naming random keys cannot make more. */
  #attemptedAt = Number.NEGATIVE_INFINITY
  #fetching = false
  #failures = 0

  constructor(config: AccessConfig) {
    this.#config = config
    this.#issuer = `https://${config.teamDomain}`
  }

  get certsUrl(): string {
    return `${this.#issuer}/cdn-cgi/access/certs`
  }

  async #refresh(now: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.certsUrl} did not answer within ${CERTS_TIMEOUT_MS} ms`)), CERTS_TIMEOUT_MS)
    })
    const document = await Promise.race([this.#config.fetchCerts(this.certsUrl), timeout]).finally(() => {
      if (timer !== undefined) clearTimeout(timer)
    })
    const jwks = isRecord(document) && Array.isArray(document["keys"]) ? document["keys"] : []
    const keys = new Map<string, CryptoKey>()
    for (const jwk of jwks) {
      if (!isRecord(jwk) || jwk["kty"] !== "RSA" || typeof jwk["kid"] !== "string") continue
      const key = await crypto.subtle.importKey(
        "jwk",
        { kty: "RSA", n: jwk["n"] as string, e: jwk["e"] as string, alg: "RS256", ext: true },
        { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
        false,
        ["verify"]
      )
      keys.set(jwk["kid"], key)
    }
    this.#keys = keys
    this.#fetchedAt = now
  }

  async #key(kid: string, now: number): Promise<CryptoKey | undefined> {
    const stale = now - this.#fetchedAt > KEYS_TTL_MS
    const wait = this.#failures === 0 ? REFETCH_MS : Math.min(REFETCH_MS * 2 ** (this.#failures - 1), MAX_BACKOFF_MS)
    // The first fetch goes at once; any other waits its turn, failed or not. One fetch at a time.
    const due = this.#attemptedAt === Number.NEGATIVE_INFINITY || now - this.#attemptedAt > wait
    if ((stale || !this.#keys.has(kid)) && due && !this.#fetching) {
      this.#fetching = true
      this.#attemptedAt = now
      try {
        await this.#refresh(now)
        this.#failures = 0
      } catch (error) {
        this.#failures++
        // Keys fetched before still verify while Access is unreachable.
        if (!this.#keys.has(kid)) throw error
      } finally {
        this.#fetching = false
      }
    } else if (!this.#keys.has(kid) && this.#fetchedAt === Number.NEGATIVE_INFINITY) {
      throw new Error("the team's signing keys are not fetched yet")
    }
    return this.#keys.get(kid)
  }

  /** Why the JWT is not accepted, or `undefined` when it is. Never rejects. */
  async verify(jwt: string, now: number): Promise<string | undefined> {
    const parts = jwt.split(".")
    if (parts.length !== 3) return "it is not a JWT"
    let header: unknown
    let claims: unknown
    let signature: Uint8Array
    try {
      header = base64UrlJson(parts[0]!)
      claims = base64UrlJson(parts[1]!)
      signature = base64UrlBytes(parts[2]!)
    } catch {
      return "it is not a JWT"
    }
    if (!isRecord(header) || header["alg"] !== "RS256") return "its algorithm is not RS256"
    if (typeof header["kid"] !== "string") return "it names no signing key"
    if (!isRecord(claims)) return "it is not a JWT"
    let key: CryptoKey | undefined
    try {
      key = await this.#key(header["kid"], now)
    } catch {
      return "the team's signing keys could not be fetched"
    }
    if (key === undefined) return "it is signed by a key the team does not publish"
    const signed = encoder.encode(`${parts[0]}.${parts[1]}`)
    const valid = await crypto.subtle.verify("RSASSA-PKCS1-v1_5", key, signature, signed).catch(() => false)
    if (!valid) return "its signature is invalid"
    if (claims["iss"] !== this.#issuer) return "it was issued for another team"
    const audience = claims["aud"]
    const audiences = Array.isArray(audience) ? audience : [audience]
    if (!audiences.includes(this.#config.audience)) return "it was issued for another application (aud)"
    const seconds = now / 1000
    if (typeof claims["exp"] !== "number" || claims["exp"] + SKEW_S <= seconds) return "it has expired"
    if (claims["nbf"] !== undefined && (typeof claims["nbf"] !== "number" || claims["nbf"] - SKEW_S > seconds)) {
      return "it is not valid yet"
    }
    return undefined
  }
}

const BEARER = /^Bearer[ ]+(.+)$/i

/**
 * The inspector's decision over one request: off → 403, no or bad credentials → 401, an action
 * while read-only → 403. Credentials are read from the headers only (never cookies or the URL).
 */
export const makeAuthorize = (config: AuthConfig) => {
  const verifier = config.access === undefined ? undefined : new AccessVerifier(config.access)
  const missing = config.access === undefined
    ? "missing credentials: send Authorization: Bearer <token>"
    : config.token === undefined
    ? "missing credentials: sign in through Cloudflare Access (its JWT in Cf-Access-Jwt-Assertion)"
    : "missing credentials: send Authorization: Bearer <token> or a Cloudflare Access JWT in Cf-Access-Jwt-Assertion"

  const bearerProblem = async (header: string): Promise<string | undefined> => {
    if (config.token === undefined) return "bearer tokens are not accepted here (the inspector uses Cloudflare Access)"
    const match = BEARER.exec(header)
    if (match === null) return "the Authorization header must be Bearer <token>"
    return (await sameSecret(match[1]!.trim(), config.token)) ? undefined : "invalid bearer token"
  }

  return (request: HttpServerRequest.HttpServerRequest): Effect.Effect<void, Unauthorized | Forbidden> =>
    Effect.gen(function*() {
      if (config.token === undefined && verifier === undefined) {
        return yield* new Forbidden({
          message: "the inspector is off: give DurabilityInspector.handler a token or access option to turn it on"
        })
      }
      const authorization = request.headers["authorization"]
      const jwt = request.headers["cf-access-jwt-assertion"]
      const problems: Array<string> = []
      let admitted = false
      if (authorization !== undefined && authorization !== "") {
        const problem = yield* Effect.promise(() => bearerProblem(authorization))
        if (problem === undefined) admitted = true
        else problems.push(problem)
      }
      if (!admitted && jwt !== undefined && jwt !== "") {
        if (verifier === undefined) {
          problems.push("Access JWTs are not accepted here (the inspector uses a bearer token)")
        } else {
          const now = yield* Clock.currentTimeMillis
          const problem = yield* Effect.promise(() => verifier.verify(jwt, now))
          if (problem === undefined) admitted = true
          else problems.push(`invalid Access JWT: ${problem}`)
        }
      }
      if (!admitted) return yield* new Unauthorized({ message: problems.length === 0 ? missing : problems.join("; ") })
      if (config.readOnly && request.method !== "GET" && request.method !== "HEAD") {
        return yield* new Forbidden({ message: "the inspector is read-only: actions are turned off (readOnly: true)" })
      }
    })
}
