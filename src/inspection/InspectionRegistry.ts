/**
 * The object's registry of inspection sources: each capability registers its `Source` here when it
 * is made, and the `Inspector` answers over what is registered, so it sees exactly the capabilities
 * this object made; a request about another is `NotFound`.
 *
 * One registry per object instance, in memory (`layer`): the runtimes the library builds (the
 * promise face's, `TestDurability`, `TestScheduler.layer`) provide it. An Effect runtime built on
 * `Scheduler.layerDurableObject` adds `InspectionRegistry.layer` to be inspected. A capability made
 * where no registry is provided registers nowhere (`register`): it works the same, it is only not
 * inspectable. So the registry is never a requirement of a capability, only of the inspector.
 * @packageDocumentation
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { Source } from "./source.js"

export type { OverviewPart, Source, SourceError } from "./source.js"

/**
 * The registry service's tag: what the `Inspector` answers over, one source per capability this object made.
 */
export class InspectionRegistry extends Context.Tag("durability/InspectionRegistry")<InspectionRegistry, {
  /** Adds a capability's source; a later source of the same capability replaces the earlier, in its place. */
  readonly register: (source: Source) => Effect.Effect<void>
  /** The registered sources, in the order their capabilities were first registered. */
  readonly sources: Effect.Effect<ReadonlyArray<Source>>
}>() {}

/** An empty registry. */
export const make: Effect.Effect<Context.Tag.Service<InspectionRegistry>> = Effect.sync(() => {
  const sources: Array<Source> = []
  return InspectionRegistry.of({
    register: (source) =>
      Effect.sync(() => {
        const at = sources.findIndex((known) => known.capability === source.capability)
        if (at >= 0) sources[at] = source
        else sources.push(source)
      }),
    sources: Effect.sync(() => [...sources])
  })
})

/** One registry per build: provide it once per object instance, beside the engine. */
export const layer: Layer.Layer<InspectionRegistry> = Layer.effect(InspectionRegistry, make)

/** Registers `source` in the context's registry; without one, nowhere (the capability is then not inspectable). */
export const register = (source: Source): Effect.Effect<void> =>
  Effect.flatMap(
    Effect.serviceOption(InspectionRegistry),
    Option.match({ onNone: () => Effect.void, onSome: (registry) => registry.register(source) })
  )
