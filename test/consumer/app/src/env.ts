import type { Billing } from "./billing.js"
import type { Images } from "./images-object.js"

export interface Env {
  readonly BILLING: DurableObjectNamespace<Billing>
  readonly IMAGES: DurableObjectNamespace<Images>
}
