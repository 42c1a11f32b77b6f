/**
 * One object, both faces, one scheduler (`FacesObject`), called over a real RPC boundary: what a caller
 * receives when a call fails, and the work of both faces driven by the one alarm.
 */
import { env, runInDurableObject } from "cloudflare:test"
import { ManagedRuntime } from "effect"
import { expect, it } from "vitest"
import * as Scheduler from "../../src/engine/Scheduler.js"
import * as SchedulerConfig from "../../src/engine/SchedulerConfig.js"
import { DuplicateDurableCallError, reviveError } from "../../src/index.js"
import { FacesObject } from "./objects/FacesObject.js"
import { IDLE, isIdle } from "./objects/idle.js"
import { waitFor } from "./support/lab.js"

const faces = () => env.FACES_OBJECT.get(env.FACES_OBJECT.newUniqueId())
type Faces = ReturnType<typeof faces>

/**
 * Ends an idle object whose RPC method rejected. workerd counts a rejection of an RPC method as an
 * uncaught exception of the instance, which then keeps its SQLite file open past the test (a
 * `.sqlite-shm` side file the pool's storage isolation refuses); resetting the instance closes it.
 */
const endAfterRejection = async (stub: Faces): Promise<void> => {
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
  await expect(runInDurableObject(stub, (_instance, state) => state.abort("the scenario ended"))).rejects.toThrow()
}

/** The rejection of `call`, as the caller's side of the RPC sees it. */
const rejection = async (call: Promise<unknown>): Promise<Error> => {
  try {
    await call
  } catch (error) {
    return error as Error
  }
  throw new Error("the call resolved")
}

it("a library error crosses RPC as its name and message; reviveError gives back its class", async () => {
  const stub = faces()
  await stub.resize("img-1", 640)
  const raw = await rejection(stub.crop("img-1"))
  // What the platform does with an error that is not a standard one: a plain Error, the name in the message.
  expect(raw.name).toBe("Error")
  expect(raw.message).toBe(`DuplicateDurableCallError: Durable call "img-1" already belongs to operation "resize", not "crop"`)
  const revived = reviveError(raw)
  expect(revived).toBeInstanceOf(DuplicateDurableCallError)
  expect(revived.name).toBe("DuplicateDurableCallError")
  expect(revived.message).toBe(`Durable call "img-1" already belongs to operation "resize", not "crop"`)
  await endAfterRejection(stub)
})

it("bad input is a TypeError or RangeError on either face, which RPC carries as such", async () => {
  const stub = faces()
  const promiseFace = await rejection(stub.resize("", 10))
  expect(promiseFace).toBeInstanceOf(TypeError)
  expect(promiseFace.message).toMatch(/^id must be/)
  // The Effect face through `scheduler.runtime`: the same error classes, not a FiberFailure.
  const effectFace = await rejection(stub.cleanupAt(Number.NaN))
  expect(effectFace.name).toMatch(/^(TypeError|RangeError)$/)
  expect(effectFace.message).toMatch(/^scheduledTime/)
  expect(effectFace.message).not.toContain("FiberFailure")
  expect(await stub.ledger()).toEqual([])
  await endAfterRejection(stub)
})

it("a ManagedRuntime of the user's own rejects with a FiberFailure; reviveError restores the tag", async () => {
  const stub = faces()
  const raw = await rejection(stub.ownRuntimeCleanup("nightly"))
  expect(raw.name).toBe("Error")
  expect(raw.message).toContain("(FiberFailure) InvalidInputError: ")
  const revived = reviveError(raw)
  expect(revived.name).toBe("InvalidInputError")
  expect(revived.message).toBe(`Unknown named alarm "nightly"`)
  await endAfterRejection(stub)
})

it("promise-face operations and Effect-face named alarms (with a payload) share the one alarm of the object", async () => {
  const stub = faces()
  const start = Date.now()
  const cleanupAt = await stub.cleanupAt(start + FacesObject.MIN_DELAY_MS + 200, { bucket: "thumbs" })
  await stub.resize("later", 320)
  // The Effect handler ran with the layer's service, through the alarm the promise helper shares.
  const ledger = await waitFor(() => stub.ledger(), (lines) => lines.length === 2)
  // The payload was stored with the occurrence and reached the handler through the real alarm.
  expect([...ledger].sort()).toEqual([`cleanup ${cleanupAt} {"bucket":"thumbs"}`, "resize later"])
  expect(await stub.result("later")).toEqual({ status: "completed", result: { width: 320 } })
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("Scheduler.transaction on the Effect face: a ledger row and a named alarm commit together, or neither on a failure", async () => {
  const stub = faces()
  const at = Date.now() + FacesObject.MIN_DELAY_MS + 200
  expect(await stub.planCleanup(at, true)).toBe("rolled back")
  expect(await stub.ledger()).toEqual([])
  expect(await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm())).toBeNull()
  expect(await stub.planCleanup(at, false)).toBe("committed")
  // The alarm committed with the row wakes the object for the named alarm.
  const ledger = await waitFor(() => stub.ledger(), (lines) => lines.length === 2)
  expect(ledger).toEqual([`planned ${at}`, `cleanup ${at} -`])
  expect(await waitFor(() => stub.idle(), isIdle)).toEqual(IDLE)
})

it("an Effect-face scheduler (Scheduler.layerDurableObject) names its object by ctx.id, as the promise face does", async () => {
  const stub = env.STORAGE_OBJECT.get(env.STORAGE_OBJECT.newUniqueId())
  await runInDurableObject(stub, async (_instance, state) => {
    const runtime = ManagedRuntime.make(Scheduler.layerDurableObject(state))
    try {
      expect((await runtime.runPromise(SchedulerConfig.SchedulerConfig)).objectId).toBe(state.id.toString())
      const named = ManagedRuntime.make(Scheduler.layerDurableObject(state, { objectId: "tenant-7" }))
      expect((await named.runPromise(SchedulerConfig.SchedulerConfig)).objectId).toBe("tenant-7")
      await named.dispose()
    } finally {
      await runtime.dispose()
    }
  })
})
