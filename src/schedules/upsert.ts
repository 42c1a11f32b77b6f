/**
 * Creating or updating a schedule. The same timing, payload and options again write nothing; a
 * changed timing (or bounds) recomputes the next run from now, never re-running a slot it ran.
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { InvalidInputError } from "../shared/Errors.js"
import * as Codec from "../shared/codec.js"
import * as Json from "../shared/json.js"
import * as Validate from "../shared/validate.js"
import * as Options from "./options.js"
import * as Plan from "./plan.js"
import { checked, invalidInput, type Parts, readRow } from "./read.js"
import * as Rows from "./rows.js"
import * as SchedulesTable from "./schedulesTable.js"
import * as Slots from "./slots.js"
import * as Timing from "./timing.js"
import type { AnyScheduleDefinition, TimingInput, UpsertResult } from "./types.js"

const encodePayload = (definition: AnyScheduleDefinition, payload: unknown) =>
  Effect.mapError(Json.encodeStored(definition.payload, payload, "payload"), (failure) =>
    failure._tag === "Schema"
      ? invalidInput("options.payload", Codec.describeParseError("options.payload", failure.cause))
      : failure._tag === "NotJson"
      ? invalidInput("options.payload", `options.payload must be JSON: ${failure.reason}`)
      : new InvalidInputError({ field: "options.payload", kind: "range", message: `options.payload ${Json.tooLarge(failure.bytes)}` }))

export const upsert = (
  parts: Parts,
  name: string,
  key: string,
  timingInput: TimingInput,
  given?: Options.UpsertOptions<unknown>
) =>
  Effect.gen(function*() {
    const target = yield* checked(parts, name, key, Validate.newKey)
    const spec = yield* Either.match(Timing.parse("timing", timingInput), { onLeft: Effect.fail, onRight: Effect.succeed })
    const resolved = yield* Options.resolve(given)
    const payload = yield* encodePayload(target.definition, given?.payload ?? null)
    const now = yield* Clock.currentTimeMillis
    const timingText = JSON.stringify(spec)
    const existing = yield* readRow(parts, target.id)
    const sameTiming = existing !== undefined && existing.timing === timingText &&
      existing.start_at === resolved.startAt && existing.end_at === resolved.endAt
    const sameRest = existing !== undefined && existing.payload === payload &&
      (existing.run_limit === null ? null : Number(existing.run_limit)) === resolved.limit &&
      existing.catch_up === resolved.catchUp && existing.overlap === resolved.overlap &&
      Number(existing.grace_ms) === resolved.graceMs
    if (existing !== undefined && sameTiming && sameRest) {
      const info = Rows.infoOf(existing, null)
      return { created: false, changed: false, nextRunAt: info.nextRunAt } satisfies UpsertResult
    }
    const anchor = sameTiming
      ? Number(existing.anchor_at)
      : resolved.startAt ?? ("everyMs" in spec ? now + spec.everyMs : now)
    const scheduledRuns = existing === undefined ? 0 : Number(existing.scheduled_runs)
    const bounds = { ...(resolved.startAt === null ? {} : { startAt: resolved.startAt }), ...(resolved.endAt === null ? {} : { endAt: resolved.endAt }) }
    const timing = parts.timingOf(timingText, anchor)
    // A re-timed schedule never runs again a slot it ran (or runs) already: e.g. one re-timed in the
    // very millisecond of a slot that just ran, whose new timing has that slot too.
    const ranUpTo = existing === undefined || existing.started_slot === null ? -1 : Number(existing.started_slot)
    const fresh = Plan.firstFrom({ timing, bounds, limit: resolved.limit, scheduledRuns }, Math.max(now, ranUpTo + 1))
    // An unchanged timing keeps its cursor (no reset of the next run), unless a new limit ends or revives it.
    const cursor = !sameTiming
      ? fresh
      : resolved.limit !== null && scheduledRuns >= resolved.limit
      ? null
      : existing.slot_at === null
      ? fresh
      : Number(existing.slot_at)
    const manualAt = existing === undefined || existing.manual_at === null ? null : Number(existing.manual_at)
    const running = existing !== undefined && existing.run_slot !== null
    const due = Plan.dueAt({ cursor, manualAt })
    const status = running || due !== null ? "pending" : "ended"
    const nextAttemptAt = running ? Number(existing.next_attempt_at) : due ?? now
    const write = SchedulesTable.store(parts.storage, {
      key: target.id,
      schedule: name,
      scheduleKey: target.key,
      generation: crypto.randomUUID(),
      status,
      nextAttemptAt,
      timing: timingText,
      anchorAt: anchor,
      startAt: resolved.startAt,
      endAt: resolved.endAt,
      runLimit: resolved.limit,
      catchUp: resolved.catchUp,
      overlap: resolved.overlap,
      graceMs: resolved.graceMs,
      payload,
      slotAt: cursor,
      now,
      keepWaited: sameTiming
    })
    // Its slot timer (or its run at once, when due now), in the write's transaction.
    yield* parts.handle.writePending(
      Effect.zipRight(write, Slots.update(parts.runs, parts.handle.timers, target.id, now)),
      (made) => made,
      { reconcile: existing !== undefined }
    )
    return { created: existing === undefined, changed: true, nextRunAt: due } satisfies UpsertResult
  }).pipe(Effect.withSpan("Schedules.upsert"))
