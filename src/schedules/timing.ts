/**
 * When a recurring schedule fires: a cron expression read on a time zone's wall clock, or a fixed interval.
 * Pure: every function takes the times it needs (epoch ms) and reads no clock.
 *
 * A cron is stepped on the wall clock with Effect's `Cron.next` in a zero-offset zone (so no daylight-saving
 * logic runs there), and each matching wall time is mapped to an instant here. Effect's own time-zoned stepping
 * is not used: in effect 3.22.4 it moves a non-existent wall time to the next hour instead of skipping it, can
 * return a time before its start when started inside a repeated hour, throws from `prev` across a
 * spring-forward gap, and costs ~65 µs a step against ~4 µs for a zero-offset one. `Cron.prev` is not used
 * either (see `wallPrev`).
 *
 * Daylight-saving rules: a wall time that does not exist (clocks spring forward over it) has no slot; a wall
 * time that occurs twice (clocks fall back) has one slot, its first occurrence.
 * @internal
 */
import * as Cron from "effect/Cron"
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Time from "../shared/duration.js"
import { InvalidInputError } from "../shared/Errors.js"
import { shown } from "../shared/validate.js"

/** What the user gave, validated and canonical (stored as JSON in the schedule's row). */
export type TimingSpec = CronSpec | EverySpec

/** A cron expression (5 fields, or 6 with seconds first) read on `timezone`'s wall clock. */
export interface CronSpec {
  readonly cron: string
  /** An IANA time zone name; "UTC" when the user gave none. */
  readonly timezone: string
}

/** A fixed interval: slots at anchor + k × everyMs. */
export interface EverySpec {
  readonly everyMs: number
}

export const MIN_EVERY_MS = 1_000
export const MAX_EVERY_MS = 366 * 24 * 60 * 60 * 1000
/** Longer expressions are rejected before Effect parses them (no real cron needs more). */
export const MAX_CRON_LENGTH = 256
/** How many earlier due slots `dueSlots` counts one by one for a cron before reporting a lower bound. */
export const MAX_COUNTED_SLOTS = 10_000

const SECOND = 1000
const HOUR = 60 * 60 * SECOND
const DAY = 24 * HOUR
/** Every zone's offset is within ±14 h, so the instants that show a wall time W all lie within this of W. */
const REACH = 15 * HOUR
/**
 * Consecutive matches skipped because they fall in daylight-saving gaps before a cron is treated as never
 * firing again (a cron that only matches inside gaps, e.g. 02:30 on the second Sunday of March in New York).
 */
const MAX_GAP_SKIPS = 100
/** Where `parse` looks for a first slot to reject a cron that never fires (2026-01-01T00:00:00Z). */
const PARSE_REFERENCE = Date.UTC(2026, 0, 1)
/** The largest epoch ms a Date holds. */
const MAX_EPOCH_MS = 8_640_000_000_000_000

const SHAPE = "{ cron, timezone? } or { everyMs }"
const ZONE_HINT = `an IANA time zone name such as "Europe/Lisbon" or "UTC"`

// ---------------------------------------------------------------------------------------------------------
// Time zones: offsets (wall clock minus instant, in ms) read from Intl
// ---------------------------------------------------------------------------------------------------------

/**
 * The offsets over [lo, hi]: `before` until the transition at `at`, `after` from it (`at` is Infinity when
 * the offset is constant). Read as one transition at most per two days, the assumption Effect's DateTime makes.
 */
interface Span {
  readonly lo: number
  readonly hi: number
  readonly before: number
  readonly at: number
  readonly after: number
}

const ALWAYS_UTC: Span = { lo: -Infinity, hi: Infinity, before: 0, at: Infinity, after: 0 }

/** A zone's offsets, remembering the last span read: a walk over slots reads Intl about once a day, not per slot. */
export class Zone {
  private span: Span | undefined
  private readonly offsetAt: (t: number) => number

  constructor(readonly id: string) {
    if (id === "UTC") {
      this.span = ALWAYS_UTC
      this.offsetAt = () => 0
      return
    }
    const format = new Intl.DateTimeFormat("en-US", {
      timeZone: id,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric"
    })
    // `format` + a digit match is ~3x faster than `formatToParts`; en-US numeric output is "M/D/YYYY, HH:MM:SS".
    this.offsetAt = (t) => {
      const whole = Math.floor(t / SECOND) * SECOND
      const [month, day, year, hour, minute, second] = (format.format(whole).match(/\d+/g) ?? []).map(Number)
      const wall = new Date(0)
      wall.setUTCFullYear(year!, month! - 1, day!)
      wall.setUTCHours(hour!, minute!, second!)
      return wall.getTime() - whole
    }
  }

  /** The offsets over at least [x - REACH, x + REACH]. */
  around(x: number): Span {
    const known = this.span
    if (known !== undefined && x - REACH >= known.lo && x + REACH <= known.hi) return known
    const lo = x - DAY
    const hi = x + DAY
    const before = this.offsetAt(lo)
    const after = this.offsetAt(hi)
    let at = Infinity
    if (before !== after) {
      // Bisect to the first millisecond with the new offset.
      let a = lo
      let b = hi
      while (b - a > 1) {
        const mid = Math.floor((a + b) / 2)
        if (this.offsetAt(mid) === before) a = mid
        else b = mid
      }
      at = b
    }
    this.span = { lo, hi, before, at, after }
    return this.span
  }
}

const zoneName = (id: string): string | undefined =>
  // Offsets such as "+01:00" are not zone names (and only some runtimes' Intl accepts them).
  /^[+\-\d]/.test(id) ? undefined : Option.getOrUndefined(Option.map(DateTime.zoneMakeNamed(id), (zone) => zone.id))

/**
 * The latest wall time shown at or before instant `t`. After clocks fall back it exceeds `t`'s own wall time
 * until the repeated stretch is over: every wall time up to it has already had its (first) occurrence.
 */
const highWater = (zone: Zone, t: number): number => {
  const span = zone.around(t)
  if (t < span.at) return t + span.before
  const now = t + span.after
  return span.before > span.after ? Math.max(now, span.at - 1 + span.before) : now
}

type Resolved =
  | { readonly _tag: "At"; readonly at: number }
  /** The wall times [start, end) do not exist: clocks jumped over them. */
  | { readonly _tag: "Gap"; readonly start: number; readonly end: number }

/** The first instant showing wall time `wall`, or the gap it falls in. */
const resolve = (zone: Zone, wall: number): Resolved => {
  const span = zone.around(wall)
  // Read with the earlier offset first: when the wall time occurs twice, that is the first occurrence.
  const early = wall - span.before
  if (early < span.at) return { _tag: "At", at: early }
  const late = wall - span.after
  if (late >= span.at) return { _tag: "At", at: late }
  return { _tag: "Gap", start: span.at + span.before, end: span.at + span.after }
}

// ---------------------------------------------------------------------------------------------------------
// Wall-clock cron stepping (Effect's Cron; it throws when no match is within its search budget or range)
// ---------------------------------------------------------------------------------------------------------

const WALL = DateTime.zoneMakeOffset(0)

/** The least matching wall time > w. */
const wallNext = (cron: Cron.Cron, w: number): number | undefined => {
  try {
    return Cron.next(cron, w).getTime()
  } catch {
    return undefined
  }
}

/**
 * The greatest matching wall time in [floor, w), found with `next` over windows below w that grow from `spacing`
 * (the expected distance between matches; a regular cron costs two `next` calls). Effect's `Cron.prev` is not
 * used: in effect 3.22.4 it throws, or returns a non-matching time or one after its start, for some month and
 * weekday combinations (6% of random expressions, where `next` agreed with a brute-force scan on all of them).
 */
const wallPrev = (cron: Cron.Cron, w: number, floor: number, spacing: number): number | undefined => {
  for (let window = Math.max(spacing, SECOND);; window *= 4) {
    const start = Math.max(w - window, floor)
    // `next` from start - 1 ms is the first match at or after start.
    const first = wallNext(cron, start - 1)
    if (first !== undefined && first < w) return lastBefore(cron, first, w)
    if (start <= floor) return undefined
  }
}

/**
 * The greatest match < w, given a match `first` < w: steps through a few matches (a window that overshot a
 * weekend holds two or three), then bisects on whole seconds (one that overshot a day of per-minute matches).
 */
const lastBefore = (cron: Cron.Cron, first: number, w: number): number => {
  let match = first
  for (let step = 0; step < 4; step++) {
    const later = wallNext(cron, match)
    if (later === undefined || later >= w) return match
    match = later
  }
  // `match` is a match < w; no match lies in [above, w).
  let above = w
  while (above - match > SECOND) {
    const mid = match + Math.max(1, Math.floor((above - match) / (2 * SECOND))) * SECOND
    const found = wallNext(cron, mid - 1)
    if (found !== undefined && found < above) match = found
    else above = mid
  }
  return match
}

// ---------------------------------------------------------------------------------------------------------
// Compiled timings
// ---------------------------------------------------------------------------------------------------------

export interface CronTiming {
  readonly _tag: "Cron"
  readonly spec: CronSpec
  /** The expression on the wall clock (a zero-offset zone). */
  readonly wall: Cron.Cron
  readonly zone: Zone
}

export interface EveryTiming {
  readonly _tag: "Every"
  readonly spec: EverySpec
  /** The first slot. */
  readonly anchor: number
}

/** A compiled timing: slots are epoch ms. */
export type Timing = CronTiming | EveryTiming

/** Bounds: only slots in [startAt, endAt] exist (each optional). */
export interface Bounds {
  readonly startAt?: number | undefined
  readonly endAt?: number | undefined
}

const isCronSpec = (spec: TimingSpec): spec is CronSpec => "cron" in spec

/**
 * Compiles a spec `parse` accepted (read back from storage). `anchor` is the first slot of an everyMs timing;
 * a cron ignores it. A spec that does not parse is a defect: it was validated before it was stored.
 */
export const compile = (spec: TimingSpec, anchor: number): Timing => {
  if (!isCronSpec(spec)) return { _tag: "Every", spec, anchor }
  const wall = Either.getOrThrowWith(Cron.parse(spec.cron, WALL), (error) => new Error(error.message))
  const id = zoneName(spec.timezone)
  if (id === undefined) throw new Error(`Unknown time zone ${JSON.stringify(spec.timezone)}`)
  return { _tag: "Cron", spec, wall, zone: new Zone(id) }
}

/** Slots of a cron > `after`, ascending. */
function* cronAscending(timing: CronTiming, after: number): Generator<number, void> {
  let wall = highWater(timing.zone, after)
  let misses = 0
  while (misses < MAX_GAP_SKIPS) {
    const next = wallNext(timing.wall, wall)
    if (next === undefined) return
    const resolved = resolve(timing.zone, next)
    if (resolved._tag === "Gap") {
      misses++
      wall = resolved.end - 1
      continue
    }
    wall = next
    // Guard: by the high-water mark every slot found here is after `after`.
    if (resolved.at > after) {
      misses = 0
      yield resolved.at
    } else {
      misses++
    }
  }
}

/** Slots of a cron in [lowest, before), descending. */
function* cronDescending(timing: CronTiming, lowest: number, before: number): Generator<number, void> {
  // Slots < before are the first occurrences of the wall times up to the high-water mark at before - 1.
  let wall = highWater(timing.zone, Math.ceil(before) - 1) + 1
  // A wall time more than REACH below `lowest` shows at an instant below it.
  const floor = Math.max(lowest - REACH, -MAX_EPOCH_MS)
  let spacing = SECOND
  let misses = 0
  while (misses < MAX_GAP_SKIPS) {
    const prev = wallPrev(timing.wall, wall, floor, spacing)
    if (prev === undefined) return
    const resolved = resolve(timing.zone, prev)
    if (resolved._tag === "Gap") {
      misses++
      wall = resolved.start
      continue
    }
    spacing = wall - prev
    wall = prev
    if (resolved.at < lowest) return
    if (resolved.at < before) {
      misses = 0
      yield resolved.at
    } else {
      misses++
    }
  }
}

/** The first slot strictly after `after`; undefined when none exists (past endAt, or a cron that never fires again). */
export const nextAfter = (timing: Timing, bounds: Bounds, after: number): number | undefined => {
  const from = bounds.startAt === undefined ? Math.floor(after) : Math.max(Math.floor(after), bounds.startAt - 1)
  let slot: number | undefined
  if (timing._tag === "Every") {
    const everyMs = timing.spec.everyMs
    const steps = from < timing.anchor ? 0 : Math.floor((from - timing.anchor) / everyMs) + 1
    slot = timing.anchor + steps * everyMs
    if (!Number.isSafeInteger(slot)) return undefined
  } else {
    const found = cronAscending(timing, from).next()
    slot = found.done === true ? undefined : found.value
  }
  return slot === undefined || (bounds.endAt !== undefined && slot > bounds.endAt) ? undefined : slot
}

export interface DueSlots {
  /** The last `keep` slots of the range, ascending. */
  readonly slots: ReadonlyArray<number>
  /** How many slots of the range precede `slots` (a lower bound when `earlierIsExact` is false). */
  readonly earlier: number
  readonly earlierIsExact: boolean
}

/**
 * The slots in [from, upTo] (both inclusive), ascending: the LAST `keep` of them in `slots`, and in `earlier`
 * how many precede those (exact for everyMs; for a cron counted by walking, at most MAX_COUNTED_SLOTS, then
 * it is a lower bound and `earlierIsExact` is false). A cron is walked backwards from upTo, so the cost is
 * `keep` + MAX_COUNTED_SLOTS steps however many slots the range holds.
 */
export const dueSlots = (timing: Timing, bounds: Bounds, from: number, upTo: number, keep: number): DueSlots => {
  const lo = Math.ceil(bounds.startAt === undefined ? from : Math.max(from, bounds.startAt))
  const hi = Math.floor(bounds.endAt === undefined ? upTo : Math.min(upTo, bounds.endAt))
  const wanted = Math.max(0, Math.floor(keep))
  if (!(lo <= hi)) return { slots: [], earlier: 0, earlierIsExact: true }
  if (timing._tag === "Every") {
    const { anchor } = timing
    const everyMs = timing.spec.everyMs
    const first = Math.max(0, Math.ceil((lo - anchor) / everyMs))
    const last = Math.floor((hi - anchor) / everyMs)
    const count = Math.max(0, last - first + 1)
    const kept = Math.min(wanted, count)
    const slots = Array.from({ length: kept }, (_, i) => anchor + (last - kept + 1 + i) * everyMs)
    return { slots, earlier: count - kept, earlierIsExact: true }
  }
  const slots: Array<number> = []
  let earlier = 0
  let earlierIsExact = true
  for (const slot of cronDescending(timing, lo, hi + 1)) {
    if (slots.length < wanted) {
      slots.push(slot)
    } else if (earlier < MAX_COUNTED_SLOTS) {
      earlier++
    } else {
      earlierIsExact = false
      break
    }
  }
  return { slots: slots.reverse(), earlier, earlierIsExact }
}

/** Human description for messages and reads: `cron "0 9 * * 1-5" in Europe/Lisbon` or `every 60000ms`. */
export const describe = (spec: TimingSpec): string =>
  isCronSpec(spec) ? `cron ${JSON.stringify(spec.cron)} in ${spec.timezone}` : `every ${spec.everyMs}ms`

// ---------------------------------------------------------------------------------------------------------
// Validation of user input
// ---------------------------------------------------------------------------------------------------------

const invalid = (field: string, kind: "range" | "type", message: string) =>
  Either.left(new InvalidInputError({ field, kind, message }))

const parseCron = (field: string, cron: unknown, timezone: unknown): Either.Either<TimingSpec, InvalidInputError> => {
  if (typeof cron !== "string") {
    return invalid(`${field}.cron`, "type", `${field}.cron must be a cron expression string, got ${shown(cron)}`)
  }
  if (cron.length > MAX_CRON_LENGTH) {
    return invalid(
      `${field}.cron`,
      "range",
      `${field}.cron must be at most ${MAX_CRON_LENGTH} characters, got ${shown(cron)}`
    )
  }
  const zoneId = timezone === undefined ? "UTC" : typeof timezone === "string" ? zoneName(timezone) : undefined
  if (zoneId === undefined) {
    return invalid(
      `${field}.timezone`,
      typeof timezone === "string" ? "range" : "type",
      `${field}.timezone must be ${ZONE_HINT}, got ${shown(timezone)}`
    )
  }
  const expression = cron.trim().split(/\s+/).join(" ")
  const parsed = Cron.parse(expression, WALL)
  if (Either.isLeft(parsed)) {
    const { input, message } = parsed.left
    const where = input === undefined || input === expression ? "" : ` (in ${JSON.stringify(input)})`
    return invalid(
      `${field}.cron`,
      "type",
      `${field}.cron ${JSON.stringify(expression)} is not a valid cron expression: ${message}${where}`
    )
  }
  if (wallNext(parsed.right, PARSE_REFERENCE) === undefined) {
    return invalid(
      `${field}.cron`,
      "range",
      `${field}.cron ${JSON.stringify(expression)} never fires: no date matches it`
    )
  }
  const spec: CronSpec = { cron: expression, timezone: zoneId }
  if (nextAfter(compile(spec, 0), {}, PARSE_REFERENCE) === undefined) {
    return invalid(
      `${field}.cron`,
      "range",
      `${field}.cron ${JSON.stringify(expression)} never fires in ${zoneId}: ` +
        "every time it matches is skipped by a daylight-saving change"
    )
  }
  return Either.right(spec)
}

const isEvery = (ms: number): boolean => Number.isSafeInteger(ms) && ms >= MIN_EVERY_MS && ms <= MAX_EVERY_MS

/**
 * A number is milliseconds, checked and worded as always; a Duration (the Effect face) is stored as its
 * milliseconds. Anything else (a bigint, which a Duration would read as nanoseconds, included) keeps the
 * number's message, which it has always had.
 */
const parseEvery = (field: string, everyMs: unknown): Either.Either<TimingSpec, InvalidInputError> => {
  const time = typeof everyMs === "number" || typeof everyMs === "bigint" ? undefined : Time.millisOf(everyMs)
  if (time !== undefined) {
    return isEvery(time.millis)
      ? Either.right({ everyMs: time.millis })
      : invalid(`${field}.everyMs`, "range", `${field}.everyMs must be a Duration from 1 second to 366 days, got ${time.shown}`)
  }
  return typeof everyMs === "number" && isEvery(everyMs)
    ? Either.right({ everyMs })
    : invalid(
      `${field}.everyMs`,
      "range",
      `${field}.everyMs must be an integer number of milliseconds from ${MIN_EVERY_MS} to ${MAX_EVERY_MS} ` +
        `(366 days), got ${shown(everyMs)}`
    )
}

/**
 * Validates user input `{ cron, timezone? } | { everyMs }` (exactly one kind, no unknown keys; a key set to
 * undefined counts as absent) at `field`. The result is canonical: the cron's whitespace collapsed, the
 * time zone as Intl names it, keys in a fixed order (its JSON is compared to detect a changed timing).
 */
export const parse = (field: string, input: unknown): Either.Either<TimingSpec, InvalidInputError> => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return invalid(field, "type", `${field} must be ${SHAPE}, got ${shown(input)}`)
  }
  let given: Record<string, unknown>
  try {
    given = Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined))
  } catch {
    return invalid(field, "type", `${field} must be ${SHAPE}, got an unreadable value`)
  }
  const unknownKey = Object.keys(given).find((key) => key !== "cron" && key !== "timezone" && key !== "everyMs")
  if (unknownKey !== undefined) {
    return invalid(field, "type", `${field} has an unknown key ${JSON.stringify(unknownKey)}; expected ${SHAPE}`)
  }
  if ("cron" in given && "everyMs" in given) {
    return invalid(field, "type", `${field} must give either cron or everyMs, not both`)
  }
  if ("everyMs" in given) {
    return "timezone" in given
      ? invalid(`${field}.timezone`, "type", `${field}.timezone applies only to a cron timing, not to everyMs`)
      : parseEvery(field, given["everyMs"])
  }
  if ("cron" in given) return parseCron(field, given["cron"], given["timezone"])
  return invalid(field, "type", `${field} must give either cron (with an optional timezone) or everyMs`)
}
