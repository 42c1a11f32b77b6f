/**
 * What a chaos or model run found, in three parts a reader can tell apart (issue 23):
 * - **violations**: an invariant of the engine broken: work lost or doubled, a stale write accepted, a
 *   start before its time or past maxAttempts, due work the alarm does not cover. Only these are called
 *   "violation", and they fail the run.
 * - **harness problems**: the test's own driver could not do its part: one of its calls unanswered through
 *   all its retries, a premise of the scenario not reached (too few resets, no handler cut short), its wait
 *   for the work to drain spent while the alarm still covered that work. The run then proves less than it
 *   claims, so it fails too, as a "harness" failure that makes no claim about the engine.
 * - **figures**: what the run did, printed either way (by the test).
 *
 * No imports: the workerd chaos tests and the Node model tests both use it.
 */

/** A harness problem thrown (a budget of the driver spent): what a `Verdict` records as one. */
export class HarnessFailure extends Error {
  override readonly name = "HarnessFailure"
}

/** A run that found a broken invariant. */
export class InvariantViolation extends Error {
  override readonly name = "InvariantViolation"
}

export interface Verdict {
  readonly violations: ReadonlyArray<string>
  readonly harnessProblems: ReadonlyArray<string>
  /** An invariant of the engine broken. */
  readonly violation: (message: string) => void
  /** The driver could not do its part (no claim about the engine). */
  readonly harness: (message: string) => void
}

export const make = (): Verdict => {
  const violations: Array<string> = []
  const harnessProblems: Array<string> = []
  return {
    violations,
    harnessProblems,
    violation: (message) => void violations.push(message),
    harness: (message) => void harnessProblems.push(message)
  }
}

/** Whether the run found nothing wrong, neither in the engine nor in its own driving. */
export const clean = (verdict: Verdict): boolean => verdict.violations.length === 0 && verdict.harnessProblems.length === 0

const list = (lines: ReadonlyArray<string>, limit: number) =>
  `${lines.slice(0, limit).map((line) => `\n  - ${line}`).join("")}${lines.length > limit ? `\n  … and ${lines.length - limit} more` : ""}`

/**
 * The failure a run ends with (undefined when clean): its invariant violations if any (the harness
 * problems after them, named as such), else its harness problems, with a message that says so.
 */
export const failure = (title: string, verdict: Verdict, limit = 20): InvariantViolation | HarnessFailure | undefined => {
  const { harnessProblems, violations } = verdict
  const harness = harnessProblems.length === 0
    ? ""
    : `${harnessProblems.length} harness problem(s) (the test's driver, not the engine):${list(harnessProblems, limit)}`
  if (violations.length > 0) {
    return new InvariantViolation(
      `${title}: ${violations.length} invariant violation(s):${list(violations, limit)}${harness === "" ? "" : `\nand ${harness}`}`
    )
  }
  if (harness !== "") {
    return new HarnessFailure(`${title}: harness failure, no invariant was found broken but the run proves less than it claims; ${harness}`)
  }
  return undefined
}

/** Fails the test as `failure` says; does nothing for a clean run. */
export const settle = (title: string, verdict: Verdict, limit?: number): void => {
  const failed = failure(title, verdict, limit)
  if (failed !== undefined) throw failed
}
