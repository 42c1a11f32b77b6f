/**
 * `Background` as `durability/effect` shows it: the service `Scheduler.layerWith` takes (where work
 * that outlives a call goes, and where failures nobody awaits are reported) and how to build one.
 * The engine's reporting helpers stay internal.
 * @packageDocumentation
 */
export { Background, layerDurableObject, make, type Report, type Sink } from "../engine/Background.js"
