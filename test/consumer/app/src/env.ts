import type { Billing } from "./billing.js"
import type { Images } from "./images-object.js"

export interface Env {
  readonly BILLING: DurableObjectNamespace<Billing>
  readonly IMAGES: DurableObjectNamespace<Images>
  /** The inspector's bearer token (a secret; without it the inspector's API answers 403). */
  readonly INSPECTOR_TOKEN?: string
}
