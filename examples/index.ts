/**
 * The one Worker that serves every example (`npm start`, root `wrangler.toml`).
 * Routes by the first path segment; `GET /` lists a curl command for each route.
 */
import { DurabilityInspector, type DurabilityInspectorHandler, type DurabilityInspectorOptions } from "durability/inspector"
import digest, { type Env as DigestEnv, HELP as DIGEST_HELP } from "./digest/worker.js"
import topics, { type Env as TopicsEnv, HELP as TOPICS_HELP, partitionOf, partitions } from "./event-topics/worker.js"
import imageJobsEffect, { type Env as ImageJobsEffectEnv, HELP as IMAGE_JOBS_EFFECT_HELP } from "./image-jobs/effect-worker.js"
import imageJobs, { type Env as ImageJobsEnv, HELP as IMAGE_JOBS_HELP } from "./image-jobs/worker.js"
import onboarding, { type Env as OnboardingEnv, HELP as ONBOARDING_HELP } from "./onboarding/worker.js"
import newsletter, { type Env as NewsletterEnv, HELP as NEWSLETTER_HELP } from "./newsletter/worker.js"
import mailroom, { type Env as MailroomEnv, HELP as MAILROOM_HELP, queue as mailroomQueue, router as mailroomRouter } from "./newsletter-queues/worker.js"
import reminders, { type Env as RemindersEnv } from "./reminders/worker.js"
import subscriptions, { type Env as SubscriptionsEnv, HELP as SUBSCRIPTIONS_HELP } from "./subscription-renewals/worker.js"

// Every Durable Object class the config binds must be exported by the main module.
export { Digest } from "./digest/worker.js"
export { TopicPartition } from "./event-topics/worker.js"
export { ImageJobsEffect } from "./image-jobs/effect-worker.js"
export { ImageJobs } from "./image-jobs/worker.js"
export { Newsletter } from "./newsletter/worker.js"
export { Onboarding } from "./onboarding/worker.js"
export { Mailroom } from "./newsletter-queues/worker.js"
export { Reminders } from "./reminders/worker.js"
export { Payments, Subscription } from "./subscription-renewals/worker.js"

export interface Env extends RemindersEnv, SubscriptionsEnv, ImageJobsEnv, ImageJobsEffectEnv, NewsletterEnv, DigestEnv, MailroomEnv, OnboardingEnv, TopicsEnv {
  /** The inspector's bearer token (`npm start` makes one per run); without it the inspector's API is off. */
  readonly INSPECTOR_TOKEN?: string
  /**
   * Cloudflare Access for a second, token-less inspector at /_durability-access/ (off unless both are
   * set): the team domain (`myteam.cloudflareaccess.com`) and the Access application's AUD tag.
   */
  readonly INSPECTOR_ACCESS_TEAM?: string
  readonly INSPECTOR_ACCESS_AUD?: string
  /** Where that inspector fetches the team's signing keys instead of the team's certs URL: a local stand-in for Access (the browser test). */
  readonly INSPECTOR_ACCESS_CERTS_URL?: string
}

/** Where the inspector (page and API) is mounted: http://127.0.0.1:8787/_durability/ */
const INSPECTOR_PREFIX = "/_durability"

/** The same inspector behind Cloudflare Access alone (no token): the page asks for none. */
const ACCESS_PREFIX = "/_durability-access"

// Built once per env, not per request: the handler builds its HTTP API once.
const inspectors = new WeakMap<Env, DurabilityInspectorHandler>()

const inspectorOf = (env: Env): DurabilityInspectorHandler => {
  let inspector = inspectors.get(env)
  if (inspector === undefined) {
    const token = DurabilityInspector.handler({ prefix: INSPECTOR_PREFIX, objects: inspected(env), token: env.INSPECTOR_TOKEN })
    const team = env.INSPECTOR_ACCESS_TEAM
    const audience = env.INSPECTOR_ACCESS_AUD
    const certsUrl = env.INSPECTOR_ACCESS_CERTS_URL
    const access = team === undefined || audience === undefined ? undefined : DurabilityInspector.handler({
      prefix: ACCESS_PREFIX,
      objects: inspected(env),
      access: {
        teamDomain: team,
        audience,
        ...(certsUrl === undefined ? {} : {
          fetchCerts: async () => {
            const response = await fetch(certsUrl)
            if (!response.ok) throw new Error(`${certsUrl} answered ${response.status}`)
            return response.json()
          }
        })
      }
    })
    // Each answers only under its own prefix (undefined elsewhere).
    inspector = access === undefined ? token : async (request) => (await access(request)) ?? token(request)
    inspectors.set(env, inspector)
  }
  return inspector
}

/** The objects the walkthroughs use, by the name their route gives them, labelled by route: "newsletter:demo"
 * is /newsletter/demo. The sharded mailroom's shards are "mailroom-shard:0" to ":3". */
const inspected = (env: Env): DurabilityInspectorOptions["objects"] => [
  { label: "newsletter", namespace: env.NEWSLETTER, names: ["demo"] },
  { label: "digest", namespace: env.DIGEST, names: ["demo"] },
  { label: "onboarding", namespace: env.ONBOARDING, names: ["demo"] },
  { label: "mailroom", namespace: env.MAILROOM, names: ["demo"] },
  { router: mailroomRouter(env) },
  { label: "images", namespace: env.IMAGE_JOBS, names: ["demo"] },
  { label: "images-effect", namespace: env.IMAGE_JOBS_EFFECT, names: ["demo"] },
  { label: "reminders", namespace: env.REMINDERS, names: ["demo"] },
  // One object per customer: any customer's subscription is found by its name (the page opens it by name);
  // "alice", the walkthrough's, is listed.
  {
    label: "subscriptions",
    resolve: (name) => /^[a-z0-9-]{1,64}$/.test(name) ? env.SUBSCRIPTIONS.get(env.SUBSCRIPTIONS.idFromName(name)) : undefined,
    list: () => ["alice"]
  },
  // One object per topic partition, "topics:orders:0" to ":3" for the walkthrough's topic; any topic's
  // partition opens by name.
  { label: "topics", resolve: (name) => partitionOf(env, name), list: () => partitions("orders") }
]

const REMINDERS_HELP = `  # reminders (Effect-native, its own table attached to the engine)
  curl -X POST http://127.0.0.1:8787/reminders/demo/tea -d '{"message":"tea is ready","inMs":2000}'
  curl -X POST http://127.0.0.1:8787/reminders/demo/flaky -d '{"message":"flaky delivery","inMs":1000}'
  curl http://127.0.0.1:8787/reminders/demo
  curl 'http://127.0.0.1:8787/reminders/demo?until=settled'   # once none is pending
`

const HELP = `durability examples: reminders, subscriptions, images, images-effect, newsletter, digest, mailroom, onboarding, topics

  # the inspector (page + API): open http://127.0.0.1:8787${INSPECTOR_PREFIX}/ and sign in with the token npm start printed
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8787${INSPECTOR_PREFIX}/api/objects

${REMINDERS_HELP}
${SUBSCRIPTIONS_HELP}
${IMAGE_JOBS_HELP}
${IMAGE_JOBS_EFFECT_HELP}
${NEWSLETTER_HELP}
${DIGEST_HELP}
${MAILROOM_HELP}
${ONBOARDING_HELP}
${TOPICS_HELP}`

const routes: Record<string, ExportedHandlerFetchHandler<Env>> = {
  reminders: (request, env) => reminders.fetch(request, env),
  subscriptions: (request, env) => subscriptions.fetch(request, env),
  images: (request, env) => imageJobs.fetch(request, env),
  "images-effect": (request, env) => imageJobsEffect.fetch(request, env),
  newsletter: (request, env) => newsletter.fetch(request, env),
  digest: (request, env) => digest.fetch(request, env),
  mailroom: (request, env) => mailroom.fetch(request, env),
  onboarding: (request, env) => onboarding.fetch(request, env),
  "mailroom-sharded": (request, env) => mailroom.fetch(request, env),
  topics: (request, env) => topics.fetch(request, env)
}

export default {
  async fetch(request, env, ctx): Promise<Response> {
    // The inspector answers only under its prefix (undefined elsewhere), so it goes first.
    const inspected = await inspectorOf(env)(request)
    if (inspected !== undefined) return inspected
    const [prefix] = new URL(request.url).pathname.split("/").filter((part) => part.length > 0)
    if (prefix === undefined) return new Response(HELP, { headers: { "content-type": "text/plain; charset=utf-8" } })
    const route = Object.prototype.hasOwnProperty.call(routes, prefix) ? routes[prefix] : undefined
    if (route === undefined) {
      return new Response(JSON.stringify({ error: "Not found; see GET /" }, null, 2) + "\n", {
        status: 404,
        headers: { "content-type": "application/json" }
      })
    }
    return route(request, env, ctx)
  },
  // The mailroom's Cloudflare Queues consumers (its email queue and that queue's dead letters).
  async queue(batch, env) {
    await mailroomQueue(batch, env)
  }
} satisfies ExportedHandler<Env>
