/** Placeholder: the job queues' workerd test object (filled by the jobs workerd suite). */
import { DurableObject } from "cloudflare:workers"

export class JobsObject extends DurableObject {}
