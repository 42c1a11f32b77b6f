/** Placeholder: the job queues' chaos object (filled by the reliability suite). */
import { DurableObject } from "cloudflare:workers"

export class JobsChaosObject extends DurableObject {}
