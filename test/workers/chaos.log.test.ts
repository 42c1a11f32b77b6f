/**
 * Reset chaos for the retained log inside workerd (objects/LogObject.ts: real SQLite, real R2, three
 * records kept in the object, trims in steps of three). A seeded PRNG drives rounds of: appends of a
 * few records (each with its dedup key, so a call a reset cut is sent again and appends nothing twice),
 * then a trim that runs through, or a trim whose n-th flush is held after its R2 write and the object
 * reset there, or a trim or an append with a reset sent right behind it (landing wherever it lands).
 * After every round an audit: the records read back from offset 0 (the object's, then R2's through
 * the segment index) are exactly the values appended, in order, each at its own offset — nothing lost,
 * nothing twice; the index covers every offset below the object's window with contiguous segments.
 *
 * The seed is printed; a failure message starts with it. Replay one by setting LOG_CHAOS_SEED below.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { expect, it } from "vitest"
import { prng } from "../shared/prng.js"
import { LOG, type LogObject } from "./objects/LogObject.js"
import { waitFor } from "./support/lab.js"

/** Replay a run by putting its seed here. */
const LOG_CHAOS_SEED: number | undefined = undefined
const ROUNDS = 16

type Stub = DurableObjectStub<LogObject>

it("resets during trims, flushes and appends lose no record and duplicate none", async () => {
  const seed = LOG_CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31)
  const random = prng(seed)
  const tag = `seed ${seed}`
  console.log(`log chaos: ${tag}`)
  const id = env.LOG_OBJECT.newUniqueId()
  let stub: Stub = env.LOG_OBJECT.get(id)
  const resets = { held: 0, trim: 0, append: 0 }

  const reset = async () => {
    await runInDurableObject(stub, (_instance, state) => state.abort("reset by the log chaos test")).then(
      () => {
        throw new Error(`${tag}: state.abort() did not throw, the object was not reset`)
      },
      () => undefined
    )
    stub = env.LOG_OBJECT.get(id)
  }

  /** Sends `call` until the object answers it (a reset makes it unreachable for a moment). */
  const patiently = async <A>(call: () => Promise<A>): Promise<A> =>
    (await waitFor(() => call().then((value) => ({ value }), () => undefined), (answer) => answer !== undefined))!.value

  let appended = 0
  const append = async (count: number) => {
    const records = Array.from({ length: count }, (_, i) => ({
      deduplicationKey: `e-${appended + i}`,
      body: { topic: "chaos", value: appended + i }
    }))
    const result = await patiently(async () => await stub.append(records))
    expect(result, tag).toMatchObject({ success: true, value: records.map((record) => record.body.value) })
    appended += count
  }

  const audit = async (when: string) => {
    const bounds = await patiently(() => stub.bounds())
    expect(bounds.nextOffset, `${tag} ${when}: next offset`).toBe(appended)
    expect(bounds.oldestOffset, `${tag} ${when}: nothing expired for good`).toBe(0)
    const values: Array<number> = []
    let at = 0
    for (;;) {
      const page = await patiently(() => stub.read(at))
      if (page.records.length === 0) break
      for (const record of page.records) expect(record.offset, `${tag} ${when}: offset of ${record.body.value}`).toBe(record.body.value)
      values.push(...page.records.map((record) => record.body.value))
      at = page.nextOffset
    }
    expect(values, `${tag} ${when}: every record, once, in order`).toEqual(Array.from({ length: appended }, (_, i) => i))
    const segments = await patiently(() => stub.segments())
    let covered = 0
    for (const segment of segments) {
      expect(segment.first, `${tag} ${when}: segments contiguous`).toBe(covered)
      covered = segment.last + 1
    }
    expect(covered, `${tag} ${when}: the index reaches the object's window`).toBe(bounds.hotOffset)
  }

  for (let round = 0; round < ROUNDS; round++) {
    const draw = random()
    if (draw < 0.2) {
      // An append with a reset right behind it: sent again with the same keys until answered.
      const count = 1 + Math.floor(random() * LOG.maxBatchSize)
      const records = Array.from({ length: count }, (_, i) => ({
        deduplicationKey: `e-${appended + i}`,
        body: { topic: "chaos", value: appended + i }
      }))
      const cut = stub.append(records).catch(() => undefined)
      await reset()
      await cut
      resets.append++
      await append(count)
    } else {
      await append(1 + Math.floor(random() * LOG.maxBatchSize))
      await append(1 + Math.floor(random() * LOG.maxBatchSize))
    }
    const action = random()
    // The last round holds a flush if none did yet: the run's premise (a reset between an R2 write and its
    // delete) holds for every seed.
    const forced = round === ROUNDS - 1 && resets.held === 0
    if (action < 0.4 || forced) {
      // A flush held after its R2 write, and the object reset there (unless the trim had fewer steps).
      // Forced, the first flush: every round's appends leave more than the object keeps, so a trim flushes once.
      const drawn = 1 + Math.floor(random() * 3)
      const nth = forced ? 1 : drawn
      await patiently(() => stub.holdFlush(nth))
      let settled = false
      const trimming = stub.trim().then(
        () => void (settled = true),
        () => void (settled = true)
      )
      const writes = await waitFor(() => stub.coldWrites(), (count) => count >= nth || settled)
      if (writes >= nth) {
        await reset()
        resets.held++
      }
      await trimming
    } else if (action < 0.6) {
      // A trim with a reset right behind it.
      const cut = stub.trim().catch(() => undefined)
      await reset()
      await cut
      resets.trim++
    } else {
      await patiently(() => stub.trim())
    }
    await audit(`round ${round}`)
  }
  // Retention applied in full at the end, then audited once more.
  await patiently(() => stub.trim())
  const bounds = await patiently(() => stub.bounds())
  expect(bounds.nextOffset - bounds.hotOffset, `${tag}: the object keeps maxRecords`).toBe(LOG.maxRecords)
  await audit("the end")
  console.log(`log chaos: ${tag}, ${appended} records, resets ${JSON.stringify(resets)}`)
  expect(resets.held, `${tag}: a reset landed between a segment's R2 write and its delete`).toBeGreaterThan(0)
  await reset()
})
