import { describe, expect, it } from "@effect/vitest"
import * as Cron from "effect/Cron"
import * as Either from "effect/Either"
import * as Timing from "../../../src/schedules/timing.js"

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

const at = (iso: string): number => {
  const ms = Date.parse(iso)
  if (Number.isNaN(ms)) throw new Error(`bad test date ${iso}`)
  return ms
}
const iso = (ms: number | undefined): string => (ms === undefined ? "none" : new Date(ms).toISOString())
const isos = (slots: ReadonlyArray<number>): Array<string> => slots.map(iso)

const spec = (input: unknown): Timing.TimingSpec => Either.getOrThrow(Timing.parse("spec", input))
const cron = (expression: string, timezone = "UTC"): Timing.Timing =>
  Timing.compile(spec({ cron: expression, timezone }), 0)
const every = (everyMs: number, anchor: number): Timing.Timing => Timing.compile(spec({ everyMs }), anchor)

/** The error `parse` returns, as plain fields. */
const rejection = (input: unknown) => {
  const parsed = Timing.parse("spec", input)
  if (Either.isRight(parsed)) throw new Error(`accepted ${JSON.stringify(parsed.right)}`)
  const { field, kind, message } = parsed.left
  return { field, kind, message }
}

/** Slots in (after, upTo] by chaining nextAfter from each previous slot. */
const chain = (timing: Timing.Timing, after: number, upTo: number, bounds: Timing.Bounds = {}): Array<number> => {
  const slots: Array<number> = []
  for (let slot = Timing.nextAfter(timing, bounds, after); slot !== undefined && slot <= upTo;) {
    slots.push(slot)
    slot = Timing.nextAfter(timing, bounds, slot)
  }
  return slots
}

/** All slots in [from, upTo] from dueSlots (keep large enough for every one of them). */
const allDue = (timing: Timing.Timing, from: number, upTo: number, bounds: Timing.Bounds = {}) =>
  Timing.dueSlots(timing, bounds, from, upTo, 100_000)

/** "2026-03-29 02:30:00 Sun": the wall clock in `zone` at `ms`, read through Intl (not through the module). */
const localTime = (zone: string) => {
  const wall = new Intl.DateTimeFormat("sv-SE", {
    timeZone: zone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hourCycle: "h23"
  })
  const weekday = new Intl.DateTimeFormat("en-US", { timeZone: zone, weekday: "short" })
  return (ms: number) => `${wall.format(ms)} ${weekday.format(ms)}`
}

/**
 * The slots by definition, scanning every `stepMs` in [from, upTo]: instants whose wall time in `zone` matches
 * (Effect's own time-zoned `Cron.match`) and was not already shown within the last three hours (clocks fell back).
 * Wall times in a spring-forward gap are never shown, so they never match.
 */
const oracle = (expression: string, zone: string, from: number, upTo: number, stepMs = MINUTE): Array<number> => {
  const zoned = Cron.unsafeParse(expression, zone)
  const wall = localTime(zone)
  const slots: Array<number> = []
  for (let t = Math.ceil(from / stepMs) * stepMs; t <= upTo; t += stepMs) {
    if (!Cron.match(zoned, new Date(t))) continue
    const shown = wall(t)
    let repeat = false
    for (let back = 15 * MINUTE; back <= 3 * HOUR && !repeat; back += 15 * MINUTE) repeat = wall(t - back) === shown
    if (!repeat) slots.push(t)
  }
  return slots
}

describe("Timing.parse", () => {
  it("accepts a cron, defaulting the time zone to UTC and collapsing whitespace", () => {
    expect(spec({ cron: "  0 9   * * 1-5 " })).toEqual({ cron: "0 9 * * 1-5", timezone: "UTC" })
    expect(spec({ cron: "0 9 * * 1-5", timezone: undefined })).toEqual({ cron: "0 9 * * 1-5", timezone: "UTC" })
    expect(spec({ cron: "*/15 * * * * *", timezone: "Europe/Lisbon" })).toEqual({
      cron: "*/15 * * * * *",
      timezone: "Europe/Lisbon"
    })
  })

  it("stores the time zone as Intl names it and keys in a fixed order (the JSON is compared)", () => {
    expect(JSON.stringify(spec({ timezone: "europe/lisbon", cron: "0 9 * * *" }))).toBe(
      `{"cron":"0 9 * * *","timezone":"Europe/Lisbon"}`
    )
    expect(spec({ cron: "0 9 * * *", timezone: "Etc/UTC" })).toEqual({ cron: "0 9 * * *", timezone: "UTC" })
  })

  it("accepts everyMs from one second to 366 days", () => {
    expect(spec({ everyMs: 1000 })).toEqual({ everyMs: 1000 })
    expect(spec({ everyMs: 366 * DAY })).toEqual({ everyMs: 366 * DAY })
    expect(spec({ everyMs: 60_000, cron: undefined })).toEqual({ everyMs: 60_000 })
  })

  it("rejects input that is not an object", () => {
    expect(rejection(null)).toEqual({
      field: "spec",
      kind: "type",
      message: "spec must be { cron, timezone? } or { everyMs }, got null"
    })
    expect(rejection("0 9 * * *").message).toBe(
      `spec must be { cron, timezone? } or { everyMs }, got "0 9 * * *"`
    )
    expect(rejection([]).message).toBe("spec must be { cron, timezone? } or { everyMs }, got an array")
  })

  it("rejects both kinds, neither kind and unknown keys", () => {
    expect(rejection({ cron: "0 9 * * *", everyMs: 60_000 })).toEqual({
      field: "spec",
      kind: "type",
      message: "spec must give either cron or everyMs, not both"
    })
    expect(rejection({})).toEqual({
      field: "spec",
      kind: "type",
      message: "spec must give either cron (with an optional timezone) or everyMs"
    })
    expect(rejection({ timezone: "UTC" }).message).toBe(
      "spec must give either cron (with an optional timezone) or everyMs"
    )
    expect(rejection({ cron: "0 9 * * *", tz: "UTC" })).toEqual({
      field: "spec",
      kind: "type",
      message: `spec has an unknown key "tz"; expected { cron, timezone? } or { everyMs }`
    })
    expect(rejection({ everyMs: 60_000, timezone: "UTC" })).toEqual({
      field: "spec.timezone",
      kind: "type",
      message: "spec.timezone applies only to a cron timing, not to everyMs"
    })
  })

  it("rejects a bad cron with Effect's reason and the expression", () => {
    expect(rejection({ cron: "0 9 * *" })).toEqual({
      field: "spec.cron",
      kind: "type",
      message: `spec.cron "0 9 * *" is not a valid cron expression: Invalid number of segments in cron expression`
    })
    expect(rejection({ cron: "61 9 * * *" })).toEqual({
      field: "spec.cron",
      kind: "type",
      message: `spec.cron "61 9 * * *" is not a valid cron expression: Expected a value between 0 and 59 (in "61")`
    })
    expect(rejection({ cron: "0 9 * * mon-xyz" }).message).toBe(
      `spec.cron "0 9 * * mon-xyz" is not a valid cron expression: Expected a positive integer (in "mon-xyz")`
    )
    expect(rejection({ cron: 9 })).toEqual({
      field: "spec.cron",
      kind: "type",
      message: "spec.cron must be a cron expression string, got 9"
    })
    expect(rejection({ cron: "0 ".repeat(200) })).toEqual({
      field: "spec.cron",
      kind: "range",
      message: "spec.cron must be at most 256 characters, got a string of 400 characters"
    })
  })

  it("rejects a cron that never fires, without hanging", () => {
    expect(rejection({ cron: "0 0 30 2 *" })).toEqual({
      field: "spec.cron",
      kind: "range",
      message: `spec.cron "0 0 30 2 *" never fires: no date matches it`
    })
    // 02:30 on the second Sunday of March (a wildcard step makes day AND weekday): always in New York's gap.
    expect(rejection({ cron: "30 2 8-14 3 */7", timezone: "America/New_York" })).toEqual({
      field: "spec.cron",
      kind: "range",
      message:
        `spec.cron "30 2 8-14 3 */7" never fires in America/New_York: ` +
        "every time it matches is skipped by a daylight-saving change"
    })
    // The same wall time exists in UTC, and a Feb 29 that is a Sunday comes every 28 years or less.
    expect(spec({ cron: "30 2 8-14 3 */7" })).toEqual({ cron: "30 2 8-14 3 */7", timezone: "UTC" })
    expect(spec({ cron: "0 0 29 2 */7" })).toEqual({ cron: "0 0 29 2 */7", timezone: "UTC" })
  })

  it("rejects a bad time zone", () => {
    expect(rejection({ cron: "0 9 * * *", timezone: "Mars/Olympus_Mons" })).toEqual({
      field: "spec.timezone",
      kind: "range",
      message: `spec.timezone must be an IANA time zone name such as "Europe/Lisbon" or "UTC", got "Mars/Olympus_Mons"`
    })
    expect(rejection({ cron: "0 9 * * *", timezone: "+01:00" }).message).toBe(
      `spec.timezone must be an IANA time zone name such as "Europe/Lisbon" or "UTC", got "+01:00"`
    )
    expect(rejection({ cron: "0 9 * * *", timezone: 1 })).toEqual({
      field: "spec.timezone",
      kind: "type",
      message: `spec.timezone must be an IANA time zone name such as "Europe/Lisbon" or "UTC", got 1`
    })
  })

  it("rejects everyMs below a second, above 366 days or not an integer", () => {
    const message = (got: string) =>
      `spec.everyMs must be an integer number of milliseconds from 1000 to 31622400000 (366 days), got ${got}`
    expect(rejection({ everyMs: 999 })).toEqual({ field: "spec.everyMs", kind: "range", message: message("999") })
    expect(rejection({ everyMs: 1500.5 }).message).toBe(message("1500.5"))
    expect(rejection({ everyMs: 366 * DAY + 1 }).message).toBe(message("31622400001"))
    expect(rejection({ everyMs: "60000" }).message).toBe(message(`"60000"`))
    expect(rejection({ everyMs: Number.NaN }).message).toBe(message("NaN"))
  })
})

describe("Timing.describe", () => {
  it("names the cron and its zone, or the interval", () => {
    expect(Timing.describe(spec({ cron: "0 9 * * 1-5", timezone: "Europe/Lisbon" }))).toBe(
      `cron "0 9 * * 1-5" in Europe/Lisbon`
    )
    expect(Timing.describe(spec({ everyMs: 60_000 }))).toBe("every 60000ms")
  })
})

describe("Timing everyMs", () => {
  const anchor = at("2026-01-01T00:00:00.000Z")
  const minutely = every(MINUTE, anchor)

  it("starts at the anchor and steps by everyMs, strictly after the given time", () => {
    expect(iso(Timing.nextAfter(minutely, {}, 0))).toBe("2026-01-01T00:00:00.000Z")
    expect(iso(Timing.nextAfter(minutely, {}, anchor - 1))).toBe("2026-01-01T00:00:00.000Z")
    expect(iso(Timing.nextAfter(minutely, {}, anchor))).toBe("2026-01-01T00:01:00.000Z")
    expect(iso(Timing.nextAfter(minutely, {}, anchor + 59_999))).toBe("2026-01-01T00:01:00.000Z")
    expect(iso(Timing.nextAfter(minutely, {}, at("2026-07-15T13:45:30.123Z")))).toBe("2026-07-15T13:46:00.000Z")
  })

  it("keeps millisecond anchors exact and never drifts, chained or jumping a year ahead", () => {
    const odd = every(7_001, anchor + 123)
    const slots = chain(odd, anchor, anchor + DAY)
    expect(slots.length).toBe(Math.floor((DAY - 123) / 7_001) + 1)
    expect(slots.every((slot, k) => slot === anchor + 123 + k * 7_001)).toBe(true)
    const yearOn = Timing.nextAfter(odd, {}, anchor + 365 * DAY)!
    expect((yearOn - anchor - 123) % 7_001).toBe(0)
    expect(yearOn - (anchor + 365 * DAY)).toBeGreaterThan(0)
    expect(yearOn - (anchor + 365 * DAY)).toBeLessThanOrEqual(7_001)
  })

  it("honours startAt and endAt (both inclusive)", () => {
    const bounds = { startAt: anchor + 90_000, endAt: anchor + 5 * MINUTE }
    expect(iso(Timing.nextAfter(minutely, bounds, 0))).toBe("2026-01-01T00:02:00.000Z")
    expect(isos(chain(minutely, 0, Infinity, bounds))).toEqual([
      "2026-01-01T00:02:00.000Z",
      "2026-01-01T00:03:00.000Z",
      "2026-01-01T00:04:00.000Z",
      "2026-01-01T00:05:00.000Z"
    ])
    expect(Timing.nextAfter(minutely, bounds, anchor + 5 * MINUTE)).toBeUndefined()
    expect(iso(Timing.nextAfter(minutely, { startAt: anchor + 2 * MINUTE }, 0))).toBe("2026-01-01T00:02:00.000Z")
  })

  it("dueSlots keeps the last slots and counts the earlier ones exactly, in O(1) for a huge range", () => {
    const perSecond = every(1000, anchor)
    const due = Timing.dueSlots(perSecond, {}, anchor, anchor + 30 * DAY, 3)
    expect(isos(due.slots)).toEqual([
      "2026-01-30T23:59:58.000Z",
      "2026-01-30T23:59:59.000Z",
      "2026-01-31T00:00:00.000Z"
    ])
    expect(due.earlier).toBe(30 * 24 * 3600 + 1 - 3)
    expect(due.earlierIsExact).toBe(true)
    const bounded = Timing.dueSlots(perSecond, { startAt: anchor + 500, endAt: anchor + 10_000 }, 0, anchor + DAY, 2)
    expect(bounded).toEqual({ slots: [anchor + 9_000, anchor + 10_000], earlier: 8, earlierIsExact: true })
    expect(Timing.dueSlots(perSecond, {}, anchor + 1, anchor + 999, 5)).toEqual({
      slots: [],
      earlier: 0,
      earlierIsExact: true
    })
    expect(Timing.dueSlots(perSecond, {}, 0, anchor - 1, 5).slots).toEqual([])
  })

  it("dueSlots agrees with chained nextAfter", () => {
    const timing = every(45_000, anchor + 17)
    const ranges = [[anchor - HOUR, anchor + HOUR], [anchor + 17, anchor + 45_017], [anchor + 18, anchor + 18]] as const
    for (const [from, upTo] of ranges) {
      const due = allDue(timing, from, upTo)
      expect(due.slots).toEqual(chain(timing, from - 1, upTo))
      expect(due.earlier).toBe(0)
    }
  })
})

describe("Timing cron in UTC", () => {
  it("has millisecond-exact slots strictly after the given time, seconds field included", () => {
    const quarter = cron("*/15 * * * * *")
    expect(iso(Timing.nextAfter(quarter, {}, at("2026-05-01T12:00:07.250Z")))).toBe("2026-05-01T12:00:15.000Z")
    expect(iso(Timing.nextAfter(quarter, {}, at("2026-05-01T12:00:14.999Z")))).toBe("2026-05-01T12:00:15.000Z")
    expect(iso(Timing.nextAfter(quarter, {}, at("2026-05-01T12:00:15.000Z")))).toBe("2026-05-01T12:00:30.000Z")
    const due = allDue(quarter, at("2026-05-01T12:00:15.000Z"), at("2026-05-01T12:00:45.000Z"))
    expect(isos(due.slots)).toEqual([
      "2026-05-01T12:00:15.000Z",
      "2026-05-01T12:00:30.000Z",
      "2026-05-01T12:00:45.000Z"
    ])
    expect(isos(allDue(quarter, at("2026-05-01T12:00:15.001Z"), at("2026-05-01T12:00:44.999Z")).slots)).toEqual([
      "2026-05-01T12:00:30.000Z"
    ])
  })

  it("honours startAt and endAt (both inclusive)", () => {
    const hourly = cron("0 * * * *")
    const bounds = { startAt: at("2026-05-01T10:00:00Z"), endAt: at("2026-05-01T12:00:00Z") }
    expect(isos(chain(hourly, 0, Infinity, bounds))).toEqual([
      "2026-05-01T10:00:00.000Z",
      "2026-05-01T11:00:00.000Z",
      "2026-05-01T12:00:00.000Z"
    ])
    expect(iso(Timing.nextAfter(hourly, { startAt: at("2026-05-01T10:00:00.001Z") }, 0))).toBe(
      "2026-05-01T11:00:00.000Z"
    )
    expect(Timing.nextAfter(hourly, { endAt: at("2026-05-01T10:59:59Z") }, at("2026-05-01T10:00:00Z")))
      .toBeUndefined()
    const due = Timing.dueSlots(hourly, bounds, at("2026-05-01T00:00:00Z"), at("2026-05-02T00:00:00Z"), 2)
    expect(isos(due.slots)).toEqual(["2026-05-01T11:00:00.000Z", "2026-05-01T12:00:00.000Z"])
    expect(due).toMatchObject({ earlier: 1, earlierIsExact: true })
  })

  it("counts earlier slots exactly up to MAX_COUNTED_SLOTS", () => {
    const hourly = cron("0 * * * *")
    const due = Timing.dueSlots(hourly, {}, at("2026-06-01T00:00:00Z"), at("2026-07-01T00:00:00Z"), 5)
    expect(isos(due.slots)).toEqual([
      "2026-06-30T20:00:00.000Z",
      "2026-06-30T21:00:00.000Z",
      "2026-06-30T22:00:00.000Z",
      "2026-06-30T23:00:00.000Z",
      "2026-07-01T00:00:00.000Z"
    ])
    expect(due).toMatchObject({ earlier: 30 * 24 + 1 - 5, earlierIsExact: true })
    const none = Timing.dueSlots(hourly, {}, at("2026-06-01T00:00:01Z"), at("2026-06-01T00:59:59Z"), 5)
    expect(none).toEqual({ slots: [], earlier: 0, earlierIsExact: true })
    const counted = Timing.dueSlots(hourly, {}, 0, at("2026-07-01T00:00:00Z"), 0)
    expect(counted).toEqual({ slots: [], earlier: Timing.MAX_COUNTED_SLOTS, earlierIsExact: false })
  })

  it("returns undefined past the last representable date instead of throwing", () => {
    expect(Timing.nextAfter(cron("0 0 1 1 *"), {}, 8_640_000_000_000_000 - 30 * DAY)).toBeUndefined()
  })
})

describe("Timing cron across daylight saving, Europe/Lisbon 2026", () => {
  // Spring: 2026-03-29 01:00 WET (UTC+0) -> 02:00 WEST (UTC+1). Fall: 2026-10-25 02:00 WEST -> 01:00 WET.
  const zone = "Europe/Lisbon"

  it("skips a wall time that does not exist (spring forward) to the next day", () => {
    const daily = cron("30 1 * * *", zone)
    // Effect's own zoned cron shifts it to 02:30 WEST (01:30Z) instead, and its match rejects that.
    expect(Cron.match(Cron.unsafeParse("30 1 * * *", zone), new Date(at("2026-03-29T01:30:00Z")))).toBe(false)
    const froms = ["2026-03-28T12:00:00Z", "2026-03-29T00:59:59Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"]
    for (const from of froms) {
      expect(iso(Timing.nextAfter(daily, {}, at(from)))).toBe("2026-03-30T00:30:00.000Z")
    }
    expect(isos(chain(daily, at("2026-03-27T00:00:00Z"), at("2026-03-31T00:00:00Z")))).toEqual([
      "2026-03-27T01:30:00.000Z",
      "2026-03-28T01:30:00.000Z",
      "2026-03-30T00:30:00.000Z"
    ])
  })

  it("runs a repeated wall time (fall back) once, at its first occurrence, from before, inside and after", () => {
    const daily = cron("30 1 * * *", zone)
    expect(iso(Timing.nextAfter(daily, {}, at("2026-10-24T12:00:00Z")))).toBe("2026-10-25T00:30:00.000Z")
    // Inside the first 01:xx (WEST), after the slot: the second 01:30 (WET, 01:30Z) is not a slot.
    expect(iso(Timing.nextAfter(daily, {}, at("2026-10-25T00:45:00Z")))).toBe("2026-10-26T01:30:00.000Z")
    // Inside the second 01:xx (WET). Effect's zoned Cron.next returns 00:30Z here, before its start.
    expect(iso(Timing.nextAfter(daily, {}, at("2026-10-25T01:00:00Z")))).toBe("2026-10-26T01:30:00.000Z")
    expect(iso(Timing.nextAfter(daily, {}, at("2026-10-25T01:10:00Z")))).toBe("2026-10-26T01:30:00.000Z")
    expect(iso(Timing.nextAfter(daily, {}, at("2026-10-25T01:30:00Z")))).toBe("2026-10-26T01:30:00.000Z")
    expect(iso(Timing.nextAfter(daily, {}, at("2026-10-25T03:00:00Z")))).toBe("2026-10-26T01:30:00.000Z")
  })

  it("hourly and */30 crons skip the spring gap", () => {
    expect(isos(chain(cron("0 * * * *", zone), at("2026-03-28T23:00:00Z"), at("2026-03-29T03:00:00Z")))).toEqual([
      "2026-03-29T00:00:00.000Z", // 00:00 WET
      "2026-03-29T01:00:00.000Z", // 02:00 WEST (01:00 does not exist)
      "2026-03-29T02:00:00.000Z",
      "2026-03-29T03:00:00.000Z"
    ])
    expect(isos(chain(cron("*/30 * * * *", zone), at("2026-03-28T23:30:00Z"), at("2026-03-29T01:30:00Z"))))
      .toEqual([
        "2026-03-29T00:00:00.000Z", // 00:00 WET
        "2026-03-29T00:30:00.000Z", // 00:30 WET
        "2026-03-29T01:00:00.000Z", // 02:00 WEST
        "2026-03-29T01:30:00.000Z" // 02:30 WEST
      ])
  })

  it("hourly and */30 crons run the repeated hour once, whether the search starts before, inside or after it", () => {
    const hourly = cron("0 * * * *", zone)
    const halfHourly = cron("*/30 * * * *", zone)
    expect(isos(chain(hourly, at("2026-10-24T22:30:00Z"), at("2026-10-25T03:00:00Z")))).toEqual([
      "2026-10-24T23:00:00.000Z", // 00:00 WEST
      "2026-10-25T00:00:00.000Z", // 01:00 WEST (the second 01:00, at 01:00Z, does not run)
      "2026-10-25T02:00:00.000Z", // 02:00 WET
      "2026-10-25T03:00:00.000Z"
    ])
    expect(isos(chain(halfHourly, at("2026-10-24T23:00:00Z"), at("2026-10-25T02:30:00Z")))).toEqual([
      "2026-10-24T23:30:00.000Z",
      "2026-10-25T00:00:00.000Z", // 01:00 WEST
      "2026-10-25T00:30:00.000Z", // 01:30 WEST
      "2026-10-25T02:00:00.000Z", // 02:00 WET
      "2026-10-25T02:30:00.000Z"
    ])
    const insides = ["2026-10-25T00:10:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:59:59.999Z"]
    for (const inside of insides) {
      expect(iso(Timing.nextAfter(hourly, {}, at(inside)))).toBe("2026-10-25T02:00:00.000Z")
    }
    expect(iso(Timing.nextAfter(halfHourly, {}, at("2026-10-25T01:15:00Z")))).toBe("2026-10-25T02:00:00.000Z")
    expect(iso(Timing.nextAfter(halfHourly, {}, at("2026-10-25T00:15:00Z")))).toBe("2026-10-25T00:30:00.000Z")
  })

  it("dueSlots walking back from inside the repeated hour finds the first occurrences only", () => {
    const halfHourly = cron("*/30 * * * *", zone)
    const due = Timing.dueSlots(halfHourly, {}, at("2026-10-24T23:00:00Z"), at("2026-10-25T01:45:00Z"), 10)
    expect(isos(due.slots)).toEqual([
      "2026-10-24T23:00:00.000Z",
      "2026-10-24T23:30:00.000Z",
      "2026-10-25T00:00:00.000Z",
      "2026-10-25T00:30:00.000Z"
    ])
    const spring = Timing.dueSlots(halfHourly, {}, at("2026-03-29T00:00:00Z"), at("2026-03-29T01:00:00Z"), 10)
    expect(isos(spring.slots)).toEqual([
      "2026-03-29T00:00:00.000Z",
      "2026-03-29T00:30:00.000Z",
      "2026-03-29T01:00:00.000Z"
    ])
  })

  it("a year of chained `0 9 * * 1-5` slots is exactly 09:00 local on every weekday, never drifting", () => {
    const weekdays = cron("0 9 * * 1-5", zone)
    const slots = chain(weekdays, at("2025-12-31T12:00:00Z"), at("2026-12-31T12:00:00Z"))
    const local = localTime(zone)
    const expected: Array<string> = []
    for (let day = Date.UTC(2026, 0, 1); day < Date.UTC(2027, 0, 1); day += DAY) {
      const weekday = new Date(day).getUTCDay()
      if (weekday !== 0 && weekday !== 6) expected.push(new Date(day).toISOString().slice(0, 10))
    }
    expect(expected.length).toBe(261)
    expect(slots.map((slot) => local(slot).slice(0, 10))).toEqual(expected)
    expect(slots.every((slot) => /^\d{4}-\d\d-\d\d 09:00:00 (Mon|Tue|Wed|Thu|Fri)$/.test(local(slot)))).toBe(true)
    // Winter slots are 09:00Z, summer ones 08:00Z.
    expect(iso(slots[0])).toBe("2026-01-01T09:00:00.000Z")
    expect(iso(slots.find((slot) => slot > at("2026-07-01T00:00:00Z")))).toBe("2026-07-01T08:00:00.000Z")
    expect(allDue(weekdays, at("2026-01-01T00:00:00Z"), at("2026-12-31T12:00:00Z")).slots).toEqual(slots)
  })
})

describe("Timing cron across daylight saving, America/New_York 2026", () => {
  // Spring: 2026-03-08 02:00 EST (UTC-5) -> 03:00 EDT (UTC-4). Fall: 2026-11-01 02:00 EDT -> 01:00 EST.
  const zone = "America/New_York"

  it("skips 02:30 on the spring-forward day, from before, inside and after the gap", () => {
    const daily = cron("30 2 * * *", zone)
    // Effect's own zoned cron gives 07:30Z (03:30 EDT) here.
    expect(Cron.match(Cron.unsafeParse("30 2 * * *", zone), new Date(at("2026-03-08T07:30:00Z")))).toBe(false)
    const froms = ["2026-03-07T08:00:00Z", "2026-03-08T06:59:59Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"]
    for (const from of froms) {
      expect(iso(Timing.nextAfter(daily, {}, at(from)))).toBe("2026-03-09T06:30:00.000Z")
    }
    expect(isos(chain(cron("0 * * * *", zone), at("2026-03-08T05:30:00Z"), at("2026-03-08T08:00:00Z")))).toEqual([
      "2026-03-08T06:00:00.000Z", // 01:00 EST
      "2026-03-08T07:00:00.000Z", // 03:00 EDT
      "2026-03-08T08:00:00.000Z"
    ])
    expect(isos(chain(cron("*/30 * * * *", zone), at("2026-03-08T06:00:00Z"), at("2026-03-08T07:30:00Z"))))
      .toEqual([
        "2026-03-08T06:30:00.000Z", // 01:30 EST
        "2026-03-08T07:00:00.000Z", // 03:00 EDT
        "2026-03-08T07:30:00.000Z" // 03:30 EDT
      ])
  })

  it("runs 01:30 once on the fall-back day, from before, inside and after the repeated hour", () => {
    const daily = cron("30 1 * * *", zone)
    expect(iso(Timing.nextAfter(daily, {}, at("2026-10-31T12:00:00Z")))).toBe("2026-11-01T05:30:00.000Z") // EDT
    const froms = ["2026-11-01T05:30:00Z", "2026-11-01T05:45:00Z", "2026-11-01T06:10:00Z", "2026-11-01T06:30:00Z"]
    for (const from of [...froms, "2026-11-01T07:00:00Z"]) {
      expect(iso(Timing.nextAfter(daily, {}, at(from)))).toBe("2026-11-02T06:30:00.000Z") // EST
    }
    expect(isos(chain(cron("0 * * * *", zone), at("2026-11-01T03:30:00Z"), at("2026-11-01T08:00:00Z")))).toEqual([
      "2026-11-01T04:00:00.000Z", // 00:00 EDT
      "2026-11-01T05:00:00.000Z", // 01:00 EDT (01:00 EST, at 06:00Z, does not run)
      "2026-11-01T07:00:00.000Z", // 02:00 EST
      "2026-11-01T08:00:00.000Z"
    ])
    expect(isos(chain(cron("*/30 * * * *", zone), at("2026-11-01T06:05:00Z"), at("2026-11-01T07:30:00Z"))))
      .toEqual(["2026-11-01T07:00:00.000Z", "2026-11-01T07:30:00.000Z"])
  })
})

describe("Timing cron against a brute-force scan of the wall clock", () => {
  const transitions: ReadonlyArray<readonly [zone: string, instant: string]> = [
    ["Europe/Lisbon", "2026-03-29T01:00:00Z"],
    ["Europe/Lisbon", "2026-10-25T01:00:00Z"],
    ["America/New_York", "2026-03-08T07:00:00Z"],
    ["America/New_York", "2026-11-01T06:00:00Z"],
    // Lord Howe Island moves its clocks by 30 minutes.
    ["Australia/Lord_Howe", "2026-04-04T15:00:00Z"],
    ["Australia/Lord_Howe", "2026-10-03T15:30:00Z"]
  ]
  const expressions = [
    "0 * * * *",
    "*/30 * * * *",
    "30 1 * * *",
    "30 2 * * *",
    "*/20 1-3 * * *",
    "15,45 2 * * 0",
    "0 0 * * *"
  ]

  for (const [zone, instant] of transitions) {
    it(`nextAfter chains and dueSlots match it around ${zone} ${instant}`, () => {
      const from = at(instant) - 30 * HOUR
      const upTo = at(instant) + 30 * HOUR
      for (const expression of expressions) {
        const timing = cron(expression, zone)
        const expected = oracle(expression, zone, from, upTo)
        expect({ expression, slots: isos(chain(timing, from - 1, upTo)) }).toEqual({
          expression,
          slots: isos(expected)
        })
        expect({ expression, slots: isos(allDue(timing, from, upTo).slots) }).toEqual({
          expression,
          slots: isos(expected)
        })
        // Window ends through the 6 hours around the transition, 10 minutes apart, and off the minute.
        for (let end = at(instant) - 3 * HOUR; end <= at(instant) + 3 * HOUR; end += 10 * MINUTE + 7) {
          const inRange = expected.filter((slot) => slot >= end - 4 * HOUR && slot <= end)
          const due = Timing.dueSlots(timing, {}, end - 4 * HOUR, end, 2)
          expect({ expression, end: iso(end), slots: isos(due.slots), earlier: due.earlier }).toEqual({
            expression,
            end: iso(end),
            slots: isos(inRange.slice(-2)),
            earlier: Math.max(0, inRange.length - 2)
          })
          const next = expected.find((slot) => slot > end)
          if (next !== undefined) expect({ expression, end: iso(end), next: iso(Timing.nextAfter(timing, {}, end)) })
            .toEqual({ expression, end: iso(end), next: iso(next) })
        }
      }
    })
  }

  // Effect 3.22.4's Cron.prev throws or answers wrongly for several of these; dueSlots must not depend on it.
  it("crons mixing days, weekdays and months match the scan over 14 months, walked both ways", () => {
    const zone = "Europe/Lisbon"
    const from = at("2026-01-01T00:00:00Z")
    const upTo = at("2027-03-01T00:00:00Z")
    const mixed = [
      "0 9 * 2 6",
      "0 2 29 1-3 3",
      "0 */6 31 1-3 *",
      "0 * 1-7 11 6",
      "0 9 31 11 6",
      "0 */6 31 3,10 3",
      "0 0 29 2 *",
      "0 12 */10 */4 */2"
    ]
    for (const expression of mixed) {
      const timing = cron(expression, zone)
      const expected = oracle(expression, zone, from, upTo, HOUR)
      expect({ expression, slots: isos(allDue(timing, from, upTo).slots) }).toEqual({
        expression,
        slots: isos(expected)
      })
      expect({ expression, slots: isos(chain(timing, from - 1, upTo)) }).toEqual({ expression, slots: isos(expected) })
      for (let end = from; end <= upTo; end += 9 * DAY + 7 * HOUR) {
        const due = Timing.dueSlots(timing, {}, from, end, 3)
        const inRange = expected.filter((slot) => slot <= end)
        expect({ expression, end: iso(end), slots: isos(due.slots), earlier: due.earlier }).toEqual({
          expression,
          end: iso(end),
          slots: isos(inRange.slice(-3)),
          earlier: Math.max(0, inRange.length - 3)
        })
      }
    }
  })

  it("a per-second cron over a spring-forward gap matches the scan second by second", () => {
    const zone = "Europe/Lisbon"
    const from = at("2026-03-29T00:55:00Z")
    const upTo = at("2026-03-29T01:05:00Z")
    const expected = oracle("* * * * * *", zone, from, upTo, 1000)
    expect(expected.length).toBe(601)
    expect(allDue(cron("* * * * * *", zone), from, upTo).slots).toEqual(expected)
    expect(chain(cron("*/7 * * * * *", zone), from - 1, upTo)).toEqual(oracle("*/7 * * * * *", zone, from, upTo, 1000))
  })

  it("a per-second cron over a fall-back hour skips every repeated second", () => {
    const zone = "America/New_York"
    const from = at("2026-11-01T05:58:00Z")
    const upTo = at("2026-11-01T07:02:00Z")
    const slots = allDue(cron("* * * * * *", zone), from, upTo).slots
    expect(slots).toEqual(oracle("* * * * * *", zone, from, upTo, 1000))
    // 05:58:00..05:59:59 (EDT), then nothing until 02:00:00 EST (07:00Z), then to 07:02:00.
    expect(slots.length).toBe(120 + 121)
    expect(iso(Timing.nextAfter(cron("* * * * * *", zone), {}, at("2026-11-01T06:30:00Z")))).toBe(
      "2026-11-01T07:00:00.000Z"
    )
  })
})

describe("Timing.dueSlots for a huge cron range", () => {
  it("a per-second cron over 30 days returns the last slots and a lower bound, walking no further than the count cap", () => {
    const perSecond = cron("* * * * * *", "Europe/Lisbon")
    const due = Timing.dueSlots(perSecond, {}, at("2026-03-01T00:00:00Z"), at("2026-03-31T00:00:00Z"), 3)
    expect(isos(due.slots)).toEqual([
      "2026-03-30T23:59:58.000Z",
      "2026-03-30T23:59:59.000Z",
      "2026-03-31T00:00:00.000Z"
    ])
    // The walk stopped at the cap (a lower bound, not the 2.6 million slots the range holds): its cost is
    // `keep` + MAX_COUNTED_SLOTS steps whatever the range, which is what a wall-clock bound here used to stand for.
    expect(due).toMatchObject({ earlier: Timing.MAX_COUNTED_SLOTS, earlierIsExact: false })
  })
})
