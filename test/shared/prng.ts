/**
 * mulberry32: a small, fast seeded generator, enough to draw a history or pick the moments of a chaos run.
 * Shared by the model tests (Node) and the chaos runs (workerd): one seed replays one run.
 */
export const prng = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}
