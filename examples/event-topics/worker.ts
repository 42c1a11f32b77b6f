/**
 * Example: Kafka-shaped event topics (`DurabilityLog`, `DurabilityFanout`, `DurabilityAlarms`, `durability/routing`).
 *
 * A topic has `PARTITIONS` partitions; each partition is one `TopicPartition` object named `<topic>:<partition>`,
 * chosen by hashing the event's key (`hashedSharding`), so one key's events keep their order in one partition.
 * A partition holds:
 * - a retained log (`DurabilityLog`): publishing appends under a deduplication key (a retried publish appends
 *   nothing new); consumers read a page from their cursor and commit after their work succeeded; retention keeps
 *   the newest `RETAINED_RECORDS` in the object and flushes older ones to R2 (cold storage), where reads still
 *   find them;
 * - a named alarm (`DurabilityAlarms`) that runs `trim()` every `TRIM_EVERY_MS` and re-arms itself;
 * - a fanout (`DurabilityFanout`) that pushes each published event to three static targets: `search` acks,
 *   `billing` acks unless it is down (`POST .../billing {"down": true}`, stored in the object), when its deliveries
 *   fail and are retried every `BILLING_RETRY_MS` until it is back, and `archive` writes a `StoredMessage` per event
 *   to R2 (read back by `GET .../archive`); what uses its attempts goes to R2 as a dead letter (`dlq/`).
 * All three share the object's one scheduler (one alarm, one permit pool) and one `DurabilityRouting` load.
 *
 *   npm start
 *   curl http://127.0.0.1:8787/
 */
import { DurableObject } from "cloudflare:workers"
import {
  type AlarmInvocationInfo,
  answerInspection,
  DurabilityAlarms,
  DurabilityFanout,
  type DurabilityFanoutMessage,
  DurabilityLog,
  DurabilityScheduler,
  type EnqueueResult,
  type LogRecord,
  LogTruncatedError,
  type StoredMessage
} from "durability"
import { DurabilityRouting, hashedSharding } from "durability/routing"
import { answer, HttpError, json, objectBody } from "../http.js"

export interface Env {
  readonly TOPICS: DurableObjectNamespace<TopicPartition>
  /** Cold log segments (`cold/...`) and the archive target's entries (`archive/...`). */
  readonly TOPIC_ARCHIVE: R2Bucket
}

/** One published event, as the log and the fanout targets see it. */
export interface TopicEvent {
  readonly key: string
  readonly value: unknown
  readonly publishedAt: number
}

/** What a publish answers for one event: where it landed. */
export interface Published {
  readonly partition: string
  readonly offset: number
}

/** A partition at a glance (`GET /topics/<topic>`). */
export interface PartitionStatus {
  readonly partition: string
  readonly log: { readonly oldestOffset: number; readonly hotOffset: number; readonly nextOffset: number }
  readonly consumers: Record<string, { readonly offset: number; readonly lag: number }>
  readonly backlog: { readonly slowestConsumerLag: number; readonly fanoutPending: number }
  readonly trimAlarm: { readonly status: string; readonly scheduledTime: number } | null
}

/** One event as the HTTP route and the routing client take it; `id` makes a retried publish land once. */
export interface PublishInput {
  readonly key: string
  readonly value: unknown
  readonly id?: string | undefined
}

/** Partitions per topic. Changing it moves keys to other partitions, as in Kafka. */
export const PARTITIONS = 4
/** Records kept in the object; older ones go to R2 at the next trim. Small so the walkthrough shows a flush. */
export const RETAINED_RECORDS = 5
/** How often the named alarm trims. */
export const TRIM_EVERY_MS = 10 * 60_000
/** How long a failed `billing` delivery waits for its retry. */
export const BILLING_RETRY_MS = 5_000
/** `billing`'s attempts: at one every `BILLING_RETRY_MS`, an outage of about 8 minutes before dead letters. */
export const BILLING_ATTEMPTS = 100

const TOPIC = /^[a-z0-9-]{1,32}$/
const CONSUMER = /^[\w-]{1,64}$/

/** The key that makes a retried publish land on its first offset: the caller's id, else a fresh one. */
const dedupKey = (id: unknown): string | undefined => typeof id === "string" && id.length > 0 ? id : undefined

/** Written once under `key`, never overwritten: a retried write (at least once) collapses onto the first. */
const putOnce = async (bucket: R2Bucket, key: string, value: unknown): Promise<void> => {
  await bucket.put(key, JSON.stringify(value), { onlyIf: { etagDoesNotMatch: "*" } })
}

export class TopicPartition extends DurableObject<Env> {
  // One scheduler per object: the log's trim alarm and the fanout's deliveries share its one alarm.
  private readonly scheduler = new DurabilityScheduler({ context: this.ctx })
  // Shared by the log and the fanout: publishes are inbound, deliveries outbound, answered with each publish.
  private readonly routing = new DurabilityRouting()
  private readonly log = new DurabilityLog<TopicEvent>({
    scheduler: this.scheduler,
    routing: this.routing,
    retention: { maxRecords: RETAINED_RECORDS, maxAgeMs: 7 * 86_400_000 },
    cold: {
      // Keyed by the segment's range: a flush written again after an eviction lands beside the first.
      write: async (segment) => {
        const key = `cold/${this.ctx.id}/${segment.firstOffset}-${segment.lastOffset}`
        await putOnce(this.env.TOPIC_ARCHIVE, key, segment.records)
        return key
      },
      read: async (key) => {
        const object = await this.env.TOPIC_ARCHIVE.get(key)
        return object === null ? undefined : object.json<Array<LogRecord<TopicEvent>>>()
      }
    }
  })
  private readonly fanout = new DurabilityFanout<TopicEvent>({
    scheduler: this.scheduler,
    routing: this.routing,
    // Dead letters, written once under their delivery id: the application reads them back to redrive.
    dlq: (message) => putOnce(this.env.TOPIC_ARCHIVE, `dlq/${this.ctx.id}/${message.id}`, message),
    retries: { maxAttempts: 5, delay: (attempt) => 1_000 * 2 ** attempt },
    targets: {
      search: {
        deliver: async (messages) => {
          for (const message of messages) await message.ack()
        }
      },
      billing: {
        retries: { maxAttempts: BILLING_ATTEMPTS, delay: () => BILLING_RETRY_MS },
        deliver: (messages) => this.bill(messages)
      },
      archive: {
        storage: (message) => putOnce(this.env.TOPIC_ARCHIVE, `archive/${this.ctx.id}/${message.id}`, message)
      }
    }
  })
  private readonly alarms = new DurabilityAlarms({
    scheduler: this.scheduler,
    handlers: {
      trim: async () => {
        await this.log.trim()
        await this.alarms.trim(Date.now() + TRIM_EVERY_MS)
      }
    }
  })

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS topic_billing (id INTEGER PRIMARY KEY CHECK (id = 0), down INTEGER NOT NULL)")
  }

  override async alarm(info?: AlarmInvocationInfo): Promise<void> {
    await this.scheduler.alarm(info)
  }

  /** The inspector's RPC (examples/index.ts mounts it at /_durability): the scheduler answers. */
  inspect(request: unknown) {
    return answerInspection(this.scheduler, request)
  }

  /**
   * The routing client's call: appends the event to the log, then fans it out. The fanout message's id is
   * the event's offset, so a retried publish (same `id`) finds its offset and its live fanout message again.
   */
  async publish(event: PublishInput & { readonly partition: string }): Promise<EnqueueResult<Published>> {
    const { partition } = event
    const key = dedupKey(event.id)
    const appended = await this.log.append({
      body: { key: event.key, value: event.value, publishedAt: Date.now() },
      ...(key === undefined ? {} : { deduplicationKey: key })
    })
    if (!appended.success) return { success: false, error: { name: appended.error.name, message: appended.error.message }, load: appended.load }
    const offset = appended.value[0]!
    // A retried publish found its first offset: fan out the record as first stored, which the fanout then
    // recognises as the same work (skipped while its deliveries are live).
    const [stored] = (await this.log.read({ from: offset, limit: 1 })).records
    const body = stored?.body ?? { key: event.key, value: event.value, publishedAt: Date.now() }
    const fannedOut = await this.fanout.enqueue({ id: `${partition}@${offset}`, body })
    if (!fannedOut.success) return { success: false, error: fannedOut.error, load: fannedOut.load }
    if ((await this.alarms.get("trim")) === undefined) await this.alarms.trim(Date.now() + TRIM_EVERY_MS)
    return { success: true, value: { partition, offset }, load: await this.load() }
  }

  /** The partition's backlog: the log's furthest-behind consumer and the fanout's pending deliveries. */
  async load() {
    const [log, fanout] = await Promise.all([this.log.load(), this.fanout.load()])
    return { ...log, outbound: { ...log.outbound, pendingDeliveries: log.outbound.pendingDeliveries + fanout.outbound.pendingDeliveries } }
  }

  /** The partition at a glance: the log's window, each consumer's cursor and lag, and both loads. */
  async status(name: string): Promise<PartitionStatus> {
    const [bounds, cursors, log, fanout] = await Promise.all([this.log.bounds(), this.log.cursors(), this.log.load(), this.fanout.load()])
    const alarm = await this.alarms.get("trim")
    const consumers = Object.fromEntries(Object.entries(cursors).map(([name, offset]) => [name, { offset, lag: bounds.nextOffset - offset }]))
    return {
      partition: name,
      log: bounds,
      consumers,
      backlog: { slowestConsumerLag: log.outbound.pendingDeliveries, fanoutPending: fanout.outbound.pendingDeliveries },
      trimAlarm: alarm === undefined ? null : { status: alarm.status, scheduledTime: alarm.scheduledTime }
    }
  }

  override fetch(request: Request): Promise<Response> {
    return answer(() => this.route(request))
  }

  /** A downstream that can be down: while it is, the whole batch fails (each delivery retried); else each is acked. */
  private async bill(messages: Array<DurabilityFanoutMessage<TopicEvent>>): Promise<void> {
    // Unsettled when the call throws: each counts as a failed attempt, retried after BILLING_RETRY_MS.
    if (this.billingDown()) throw new Error(`billing is down: ${messages.map((message) => message.id).join(", ")}`)
    for (const message of messages) await message.ack()
  }

  // The outage switch, stored so it survives an eviction (the example's own table, not the library's).
  private billingDown(): boolean {
    const [row] = this.ctx.storage.sql.exec<{ down: number }>("SELECT down FROM topic_billing WHERE id = 0").toArray()
    return row?.down === 1
  }

  private setBillingDown(down: boolean): void {
    this.ctx.storage.sql.exec("INSERT INTO topic_billing (id, down) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET down = excluded.down", down ? 1 : 0)
  }

  private async route(request: Request): Promise<Response> {
    const url = new URL(request.url)
    // /topics/<topic>/<partition>/<action>
    const [, topic, partition, action] = url.pathname.split("/").filter((part) => part.length > 0).map(decodeURIComponent)
    const post = request.method === "POST"
    if (!post && action === undefined) return json(await this.status(`${topic}:${partition}`))
    if (!post && action === "read") {
      const consumer = url.searchParams.get("consumer") ?? ""
      if (!CONSUMER.test(consumer)) throw new HttpError(400, "consumer must be 1 to 64 letters, digits, - or _")
      const limit = Number(url.searchParams.get("limit") ?? "10")
      const from = url.searchParams.has("from") ? Number(url.searchParams.get("from")) : (await this.log.cursor(consumer)) ?? 0
      try {
        // Reading moves nothing: the consumer commits `nextOffset` once it handled the page.
        return json(await this.log.read({ from, limit }))
      } catch (error) {
        if (error instanceof LogTruncatedError) throw new HttpError(410, error.message)
        throw error
      }
    }
    if (post && action === "commit") {
      const input = await objectBody(request)
      if (typeof input.consumer !== "string" || !CONSUMER.test(input.consumer)) throw new HttpError(400, "consumer must be 1 to 64 letters, digits, - or _")
      if (typeof input.offset !== "number") throw new HttpError(400, "offset must be a number")
      await this.log.commit(input.consumer, input.offset)
      return json({ consumer: input.consumer, cursor: await this.log.cursor(input.consumer) })
    }
    if (post && action === "trim") return json({ trimmed: await this.log.trim(), log: await this.log.bounds() })
    if (post && action === "billing") {
      const input = await objectBody(request)
      if (typeof input.down !== "boolean") throw new HttpError(400, "down must be true or false")
      this.setBillingDown(input.down)
      return json({ billing: input.down ? "down" : "up" })
    }
    if (!post && action === "archive") {
      const listed = await this.env.TOPIC_ARCHIVE.list({ prefix: `archive/${this.ctx.id}/` })
      const entries = await Promise.all(listed.objects.map(async (object) => {
        const stored = await this.env.TOPIC_ARCHIVE.get(object.key)
        return stored === null ? undefined : stored.json<StoredMessage<TopicEvent>>()
      }))
      return json(entries.filter((entry) => entry !== undefined))
    }
    throw new HttpError(404, "Not found; see GET /")
  }
}

// ---------------------------------------------------------------------------------------------
// The routing client and HTTP routes: /topics/<topic>/...
// ---------------------------------------------------------------------------------------------

/** The partitions of a topic, as the inspector lists them: `<topic>:0` to `<topic>:<PARTITIONS - 1>`. */
export const partitions = (topic: string) => Array.from({ length: PARTITIONS }, (_, index) => `${topic}:${index}`)

/** The object of `<topic>:<partition>`, for the inspector; undefined for any other name. */
export const partitionOf = (env: Env, name: string) => {
  const [topic, partition] = name.split(":")
  return topic !== undefined && TOPIC.test(topic) && partition !== undefined && /^\d+$/.test(partition) && Number(partition) < PARTITIONS
    ? env.TOPICS.get(env.TOPICS.idFromName(name))
    : undefined
}

// One client per topic and env: its observations (each partition's latest load) live as long as the isolate.
const clients = new WeakMap<Env, Map<string, ReturnType<typeof clientFor>>>()

const clientFor = (env: Env, topic: string) => {
  // The key's hash picks the partition, named `<topic>:<index>`: one key's events stay in order in one log.
  const partitionOf = hashedSharding({ shards: PARTITIONS, key: (event: PublishInput) => event.key, name: topic })
  return DurabilityRouting.client({
    target: TopicPartition,
    namespace: () => env.TOPICS,
    // The object is told its own name (the shard the preset picked), which it stamps on what it publishes.
    invoke: (stub, event: PublishInput) => {
      const target = partitionOf(event)
      return stub.publish({ ...event, partition: typeof target === "string" ? target : target.shard })
    },
    sharding: partitionOf
  })
}

const client = (env: Env, topic: string) => {
  let byTopic = clients.get(env)
  if (byTopic === undefined) clients.set(env, byTopic = new Map())
  let found = byTopic.get(topic)
  if (found === undefined) byTopic.set(topic, found = clientFor(env, topic))
  return found
}

/** Validates one event of a publish body. */
const eventOf = (input: unknown, index: number): PublishInput => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) throw new HttpError(400, `events[${index}] must be an object`)
  const { key, value, id } = input as Record<string, unknown>
  if (typeof key !== "string" || key.length === 0 || key.length > 256) throw new HttpError(400, `events[${index}].key must be a string of 1 to 256 characters`)
  if (id !== undefined && (typeof id !== "string" || id.length === 0 || id.length > 256)) throw new HttpError(400, `events[${index}].id must be a string of 1 to 256 characters`)
  return { key, value, ...(typeof id === "string" ? { id } : {}) }
}

const publish = async (env: Env, topic: string, request: Request) => {
  const input = await objectBody(request)
  const events = Array.isArray(input.events) ? input.events : [input]
  if (events.length === 0 || events.length > 100) throw new HttpError(400, "events must hold 1 to 100 events")
  const checked = events.map(eventOf)
  // One push per event: a push goes to one partition. Events of one key go in order, one after the other.
  const byKey = new Map<string, Array<[number, PublishInput]>>()
  checked.forEach((event, index) => byKey.set(event.key, [...(byKey.get(event.key) ?? []), [index, event]]))
  const results: Array<unknown> = new Array(checked.length)
  await Promise.all([...byKey.values()].map(async (run) => {
    for (const [index, event] of run) {
      const result = await client(env, topic).push(event)
      results[index] = result.success
        ? { key: event.key, ...result.value }
        : { key: event.key, error: result.error }
    }
  }))
  return json(results, 202)
}

/** Each partition's status (window, consumers, backlog), and what the routing client last saw of it. */
const topicLoad = async (env: Env, topic: string) => {
  const observed = client(env, topic).observations()
  return json(await Promise.all(partitions(topic).map(async (name) => {
    const status: PartitionStatus = await env.TOPICS.get(env.TOPICS.idFromName(name)).status(name)
    const seen = observed.get(name)
    return { ...status, lastSeenLoad: seen === undefined ? null : { observedAt: seen.observedAt, inbound: seen.inbound, outbound: seen.outbound } }
  })))
}

export const HELP = `  # topics (a retained log per partition, fanout to 3 targets, a trim alarm, routing by key); <p> is the partition a publish answered
  curl -X POST http://127.0.0.1:8787/topics/orders/publish -d '{"events":[{"key":"alice","value":{"total":12},"id":"o-1"},{"key":"bob","value":{"total":7},"id":"o-2"},{"key":"alice","value":{"total":30},"id":"o-3"}]}'
  curl http://127.0.0.1:8787/topics/orders                       # each partition: window, consumers, backlog
  curl 'http://127.0.0.1:8787/topics/orders/<p>/read?consumer=analytics&limit=10'
  curl -X POST http://127.0.0.1:8787/topics/orders/<p>/commit -d '{"consumer":"analytics","offset":2}'
  curl -X POST http://127.0.0.1:8787/topics/orders/<p>/trim       # keeps the newest 5, older ones go to R2
  curl -X POST http://127.0.0.1:8787/topics/orders/<p>/billing -d '{"down":true}'   # billing's deliveries retry every 5 s until "down":false
  curl http://127.0.0.1:8787/topics/orders/<p>/archive            # the archive target's StoredMessages
`

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    return answer(async () => {
      const [route, topic, second] = new URL(request.url).pathname.split("/").filter((part) => part.length > 0).map(decodeURIComponent)
      if (route !== "topics" || topic === undefined) throw new HttpError(404, "Not found; see GET /")
      if (!TOPIC.test(topic)) throw new HttpError(400, "topic must be 1 to 32 lowercase letters, digits or -")
      if (second === "publish" && request.method === "POST") return publish(env, topic, request)
      if (second === undefined && request.method === "GET") return topicLoad(env, topic)
      if (second === undefined || !/^\d+$/.test(second) || Number(second) >= PARTITIONS) {
        throw new HttpError(404, `No partition ${JSON.stringify(second)}; partitions are 0 to ${PARTITIONS - 1}`)
      }
      return env.TOPICS.get(env.TOPICS.idFromName(`${topic}:${second}`)).fetch(request)
    })
  }
} satisfies ExportedHandler<Env>
