/**
 * The inspector mounted as docs/inspector.md shows: one handler per env (built once, not per request), the
 * billing object by name, the token from a secret.
 */
import { DurabilityInspector, type DurabilityInspectorHandler } from "durability/inspector"
import type { Env } from "./env.js"

const handlers = new WeakMap<Env, DurabilityInspectorHandler>()

export const inspect = (request: Request, env: Env): Promise<Response | undefined> => {
  let handler = handlers.get(env)
  if (handler === undefined) {
    handler = DurabilityInspector.handler({ objects: { namespace: env.BILLING, names: ["alice"] }, token: env.INSPECTOR_TOKEN })
    handlers.set(env, handler)
  }
  return handler(request)
}
