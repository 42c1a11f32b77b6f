/**
 * Shared by the inspector suites: asking an object's inspector as the wire does (`answer`, an
 * encoded request in, an `Answer` out) or typed (`inspect`), and walking every page of a list.
 */
import { Effect } from "effect"
import * as Inspector from "../../../src/inspector/InspectorService.js"
import type * as TestDurability from "../../../src/testing/TestDurability.js"

type TestObject = TestDurability.TestObject

/** The encoded request's answer, as `DurabilityScheduler.inspect` resolves it. */
export const ask = (object: TestObject, request: unknown): Effect.Effect<Inspector.Answer> =>
  object.run(Effect.flatMap(Inspector.make, (inspector) => inspector.answer(request)))

/** The answer's value; fails the test with the failure otherwise. */
export const valueOf = (object: TestObject, request: unknown): Effect.Effect<any> =>
  Effect.flatMap(ask(object, request), (answer) =>
    answer.ok ? Effect.succeed(answer.value) : Effect.dieMessage(`${answer.failure._tag}: ${answer.failure.message}`))

/** The failure of an answer expected to fail. */
export const failureOf = (object: TestObject, request: unknown): Effect.Effect<Inspector.Failure> =>
  Effect.flatMap(ask(object, request), (answer) =>
    answer.ok ? Effect.dieMessage(`expected a failure, got ${JSON.stringify(answer.value)}`) : Effect.succeed(answer.failure))

/** Every item of a paged read, following its cursors; and the number of pages read. */
export const walk = (object: TestObject, request: Record<string, unknown>): Effect.Effect<{ readonly items: Array<any>; readonly pages: number }> =>
  Effect.gen(function*() {
    const items: Array<any> = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = yield* valueOf(object, cursor === undefined ? request : { ...request, cursor })
      items.push(...page.items)
      cursor = page.cursor
      pages++
      if (pages > 1_000) return yield* Effect.dieMessage("the cursor never ended")
    } while (cursor !== undefined)
    return { items, pages }
  })
