/**
 * `Lifecycle` as `durability/effect` shows it: the events a capability's `onLifecycleEvent` hook is
 * told. How the engine emits them stays internal.
 * @packageDocumentation
 */
export type { LifecycleEntity, LifecycleEvent, LifecycleHook } from "../engine/Lifecycle.js"
