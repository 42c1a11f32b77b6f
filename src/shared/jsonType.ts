/**
 * JSON at the type level: what a handler may return so that its result can be
 * stored (`Json.check` enforces the same at run time, also for values whose
 * types cannot tell, such as instances of data-only classes).
 * @internal
 */

type Primitive = string | number | boolean | null | undefined | void

type NotJson =
  | bigint
  | symbol
  | ((...args: ReadonlyArray<never>) => unknown)
  | Date
  | RegExp
  | Error
  | ReadonlyMap<unknown, unknown>
  | ReadonlySet<unknown>
  | PromiseLike<unknown>
  | ArrayBuffer
  | ArrayBufferView

/** `T` with every part that JSON cannot carry replaced by `never` (`unknown` is left to the run-time check). */
export type JsonShape<T> = unknown extends T ? T
  : T extends Primitive ? T
  : T extends NotJson ? never
  : T extends ReadonlyArray<infer E> ? ReadonlyArray<JsonShape<E>>
  : T extends object ? { readonly [K in keyof T]: K extends symbol ? never : JsonShape<T[K]> }
  : never

/** Whether every value of `T` is JSON. */
export type IsJson<T> = [T] extends [JsonShape<T>] ? true : false

