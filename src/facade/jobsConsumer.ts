/**
 * The promise face of the Cloudflare Queues consumer of job queues with `processing: { queue }`
 * (`jobsConsumer`, `jobsDeadLetterConsumer`, `DurabilityJobs.consumer`): the Effect consumer
 * (`jobs/JobsConsumer.ts`) run per batch with promise handlers (`jobs/consumer.ts`); this face exports it.
 */
export {
  type DurableJobEnvelope,
  type DurableJobsConsumerOptions,
  type DurableJobsDeadLetterConsumerOptions,
  type DurableJobsNamespace,
  type DurableQueueBatch,
  type DurableQueuedJob,
  type DurableQueuedJobHandler,
  type DurableQueueHandler,
  type DurableQueueMessage,
  jobsConsumer,
  jobsDeadLetterConsumer
} from "../jobs/consumer.js"
