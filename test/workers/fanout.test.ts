/**
 * Fanout inside workerd: real SQLite storage, real alarms, a real (miniflare) R2 bucket. Acceptance and
 * independent delivery to consumers and an R2 storage target keyed by the delivery id (a retried write
 * collapses onto the first); an atomic batch rolled back by a conflict; and resets at random moments
 * during deliveries: nothing lost, nothing delivered to a target again after its ack.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect, it } from "vitest"
import type { FanoutLogRow, FanoutObject } from "./objects/FanoutObject.js"
import { isIdle } from "./objects/idle.js"
import { DRIVER_CALL, patiently } from "./support/chaos.js"
import { waitFor } from "./support/lab.js"
import { prng } from "../shared/prng.js"

type Stub = DurableObjectStub<FanoutObject>

const fresh = () => {
  const id = env.FANOUT_OBJECT.newUniqueId()
  return { id, stub: env.FANOUT_OBJECT.get(id) as Stub }
}

const archived = async (prefix: string): Promise<Array<{ readonly key: string; readonly body: Record<string, unknown> }>> => {
  const listed = await env.FANOUT_ARCHIVE.list({ prefix })
  return Promise.all(listed.objects.map(async (object) => ({
    key: object.key,
    body: JSON.parse(await (await env.FANOUT_ARCHIVE.get(object.key))!.text()) as Record<string, unknown>
  })))
}

const pairsOf = (log: ReadonlyArray<FanoutLogRow>) => {
  const pairs = new Map<string, Array<FanoutLogRow>>()
  for (const row of log) {
    const key = `${row.target}/${row.message_id}`
    pairs.set(key, [...(pairs.get(key) ?? []), row])
  }
  return pairs
}

it("accepts durably, then delivers consumers and an R2 storage target independently", async () => {
  const { stub } = fresh()
  const result = await stub.enqueue([{ id: "a", body: "A" }, { id: "b", body: "B" }])
  expect(result).toMatchObject({ success: true, value: ["a", "b"], pending: 6 })
  expect(await waitFor(() => stub.pending(), (pending) => pending === 0)).toBe(0)
  const log = await stub.log()
  expect(log.filter((row) => row.event === "acked").map((row) => `${row.target}/${row.message_id}/${row.attempt}`).sort()).toEqual([
    "consumer/a/1",
    "consumer/b/1",
    "flaky/a/2",
    "flaky/b/2"
  ])
  const stored = await archived("archive/")
  expect(stored.map((entry) => [entry.body.messageId, entry.body.target, entry.body.body, entry.body.attempts])).toEqual(
    expect.arrayContaining([["a", "archive", "A", 1], ["b", "archive", "B", 1]])
  )
  for (const entry of stored) expect(entry.key).toBe(`archive/${String(entry.body.id)}`)
  // A second write under the same id is refused by R2 and changes nothing.
  const first = stored[0]!
  expect(await env.FANOUT_ARCHIVE.put(first.key, "overwrite", { onlyIf: { etagDoesNotMatch: "*" } })).toBeNull()
  expect(JSON.parse(await (await env.FANOUT_ARCHIVE.get(first.key))!.text())).toEqual(first.body)
  expect(await waitFor(() => stub.idle(), isIdle)).toMatchObject({ alarm: null })
})

it("rejects an atomic batch on a conflict without leaving its earlier messages", async () => {
  const { stub } = fresh()
  // Held, "kept" stays live (its key in use) whatever the machine's speed.
  await stub.hold()
  expect(await stub.enqueue([{ id: "kept", body: "x" }], ["consumer"])).toMatchObject({ success: true })
  const rejected = await stub.enqueue([{ id: "fresh", body: "y" }, { id: "kept", body: "different" }], ["consumer"])
  expect(rejected).toMatchObject({ success: false, error: { name: "FanoutEnqueueError" } })
  expect(await stub.rows("SELECT key FROM durability_fanout_messages WHERE key = 'fresh'")).toEqual([])
  await stub.release()
  expect(await waitFor(() => stub.pending(), (pending) => pending === 0)).toBe(0)
  expect((await stub.log()).filter((row) => row.message_id === "fresh")).toEqual([])
  expect(await waitFor(() => stub.idle(), isIdle)).toMatchObject({ alarm: null })
})

it("resets during deliveries lose nothing and never deliver to a target again after its ack", { timeout: 90_000 }, async () => {
  const { id } = fresh()
  let stub = env.FANOUT_OBJECT.get(id) as Stub
  const random = prng(0xfa17)
  const MESSAGES = 40
  let resets = 0
  for (let batch = 0; batch < MESSAGES / 4; batch++) {
    const messages = Array.from({ length: 4 }, (_, i) => ({ id: `m${batch * 4 + i}`, body: `body-${batch * 4 + i}` }))
    const cutting = random() < 0.6
    // A reset after the consumer's signal that it holds one of these messages lands mid-delivery.
    if (cutting) await stub.hold()
    // An enqueue a reset cut may have committed: sent again, it is the same work under the same keys.
    const answer = await patiently(`enqueue ${batch}`, DRIVER_CALL, async () => (await stub.enqueue(messages)).success, () => {
      stub = env.FANOUT_OBJECT.get(id) as Stub
    })
    expect(answer).toEqual({ ok: true, value: true })
    if (cutting) {
      await waitFor(() => stub.log(), (log) => log.some((row) => row.target === "consumer" && messages.some((m) => m.id === row.message_id)))
      await runInDurableObject(stub, (_instance, state) => state.abort("reset by the scenario")).catch(() => undefined)
      stub = env.FANOUT_OBJECT.get(id) as Stub
      resets++
    }
  }
  expect(resets).toBeGreaterThan(3)
  const drained = await patiently("drain", { withinMs: 60_000, pauseMs: 50 }, async () => {
    const pending = await stub.pending()
    if (pending !== 0) throw new Error(`${pending} deliveries pending`)
    return pending
  }, () => {
    stub = env.FANOUT_OBJECT.get(id) as Stub
  })
  expect(drained).toEqual({ ok: true, value: 0 })
  const log = await stub.log()
  const pairs = pairsOf(log)
  for (let n = 0; n < MESSAGES; n++) {
    for (const target of ["consumer", "flaky"]) {
      const rows = pairs.get(`${target}/m${n}`) ?? []
      expect(rows.some((row) => row.event === "delivered"), `${target}/m${n} delivered`).toBe(true)
      const acked = rows.findIndex((row) => row.event === "acked")
      // Nothing after its ack: no delivery, no second ack.
      if (acked >= 0) expect(rows.slice(acked + 1), `${target}/m${n} after its ack`).toEqual([])
      const attempts = rows.filter((row) => row.event === "delivered").map((row) => row.attempt)
      expect(attempts, `${target}/m${n} attempts`).toEqual([...attempts].sort((a, b) => a - b).filter((a, i, all) => all.indexOf(a) === i))
    }
  }
  // Resets that cut a delivery short: the consumer saw that message again, at a later attempt.
  const cut = log.filter((row) => row.target === "consumer" && row.event === "delivered" && row.attempt > 1).length
  console.log(`fanout chaos: ${resets} resets, ${cut} consumer deliveries cut short and redelivered, ${log.length} log rows`)
  expect(cut, "resets landed during deliveries").toBeGreaterThan(0)
  const stored = await archived("archive/")
  const ids = new Set(stored.filter((entry) => String(entry.body.messageId).startsWith("m")).map((entry) => entry.body.messageId))
  expect(ids.size).toBe(MESSAGES)
  expect(await stub.rows("SELECT COUNT(*) AS n FROM durability_fanout_messages")).toEqual([{ n: 0 }])
  expect(await waitFor(() => stub.idle(), isIdle, 20_000)).toMatchObject({ alarm: null })
})
