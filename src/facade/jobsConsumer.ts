/**
 * The promise face of the Cloudflare Queues consumer of job queues with `processing: { queue }`
 * (`jobsConsumer`, `jobsDeadLetterConsumer`, `DurabilityJobs.consumer`). The consumer is Effect-free
 * and lives with the jobs (`jobs/consumer.ts`); this face exports it as it is.
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
