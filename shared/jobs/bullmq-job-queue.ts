import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from '../logger.js';
import { decodeJobError, jobTimeoutError, type JobQueue, type JobRequest } from './job-queue.js';

export const JOBS_QUEUE_NAME = 'jobs';
export const bullPrefix = (redisPrefix: string) => `${redisPrefix}:bull`;
/** BullMQ's blocking commands must never give up, hence `maxRetriesPerRequest: null`. */
export const bullConnection = (url: string, name: string) =>
  new Redis(url, { maxRetriesPerRequest: null, connectionName: name });

/**
 * Producer side of BullMQ: adds a job and waits for its result through QueueEvents.
 *
 * Fairness without BullMQ Pro groups: each organization has a counter of its unfinished jobs, and a new job's
 * priority is that count (lower runs first). An organization with one job waiting overtakes another with
 * fifty queued, so nobody is starved by somebody else's burst.
 */
export class BullmqJobQueue implements JobQueue {
  readonly kind = 'bullmq' as const;
  private readonly queue: Queue;
  private readonly events: QueueEvents;
  private readonly redis: Redis;
  /** BullMQ leaves a connection it was handed open on close; we close it. */
  private readonly eventsRedis: Redis;
  private readonly ready: Promise<unknown>;

  constructor(
    url: string,
    private readonly redisPrefix: string,
    private readonly logger?: Logger,
  ) {
    const prefix = bullPrefix(redisPrefix);
    this.redis = bullConnection(url, 'floorcast-jobs-producer');
    this.queue = new Queue(JOBS_QUEUE_NAME, { connection: this.redis, prefix });
    this.eventsRedis = bullConnection(url, 'floorcast-jobs-events');
    this.events = new QueueEvents(JOBS_QUEUE_NAME, { connection: this.eventsRedis, prefix });
    const onError = (error: Error) => this.logger?.warn({ err: error }, 'bullmq connection error');
    this.queue.on('error', onError);
    this.events.on('error', onError);
    this.ready = this.events.waitUntilReady();
  }

  private counterKey(organizationId: string) {
    return `${this.redisPrefix}:jobs:unfinished:${organizationId}`;
  }

  async run<T>(request: JobRequest, timeoutMs: number): Promise<T> {
    await this.ready;
    const counter = this.counterKey(request.organizationId);
    const [[, unfinished]] = (await this.redis.multi().incr(counter).expire(counter, 3600).exec()) as [[null, number]];
    try {
      const job = await this.queue.add(
        request.name,
        { organizationId: request.organizationId, data: request.data },
        {
          priority: Math.min(unfinished, 2_000_000),
          attempts: 1,
          removeOnComplete: { age: 300 },
          removeOnFail: { age: 3600 },
        },
      );
      try {
        return (await job.waitUntilFinished(this.events, timeoutMs)) as T;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        if (/timed out/i.test(message)) {
          await job.remove().catch(() => undefined); // still waiting: nobody will read its result
          throw jobTimeoutError(timeoutMs);
        }
        throw decodeJobError(message);
      }
    } finally {
      await this.redis.decr(counter).catch(() => undefined);
    }
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.events.close(), this.queue.close()]);
    await Promise.allSettled([this.redis.quit(), this.eventsRedis.quit()]);
  }
}
