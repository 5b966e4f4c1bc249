import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { redisConnections } from '../redis/redis-connections.js';
import { BullmqJobQueue } from './bullmq-job-queue.js';
import type { JobQueue, ProcessorContext, ProcessorRegistry } from './job-queue.js';
import { LocalJobQueue } from './local-job-queue.js';

export type { JobLimits, JobQueue, JobRequest, Processor, ProcessorContext, ProcessorRegistry, ScheduleOptions } from './job-queue.js';

/** BullMQ when Redis is configured, one Redis or a Redis Cluster (workers run in `npm run workers`), the in-process runner otherwise. */
export function createJobQueue(config: Config, processors: ProcessorRegistry, context: ProcessorContext, logger?: Logger): JobQueue {
  const redis = redisConnections(config);
  return redis
    ? new BullmqJobQueue(redis, config.REDIS_PREFIX, logger, config.JOBS_ENQUEUE_TIMEOUT_MS)
    : new LocalJobQueue(processors, context, config.JOB_CONCURRENCY);
}
