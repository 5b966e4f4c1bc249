import { Queue, QueueEvents, type Job } from 'bullmq';
import { AppError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { RedisClient, RedisConnections } from '../redis/redis-connections.js';
import {
  decodeJobError,
  jobsUnavailableError,
  jobTimeoutError,
  noWorkerError,
  type JobQueue,
  type JobRequest,
  type ScheduleOptions,
} from './job-queue.js';

export const JOBS_QUEUE_NAME = 'jobs';
/** The key a worker renews while it consumes (bullmq-job-worker.ts): gateways answer job requests 503 at once while it is absent. */
export const workerAliveKey = (redisPrefix: string) => `${redisPrefix}:jobs:worker-alive`;
const LOST = new Set(['reconnecting', 'close', 'end']);
/** BullMQ's keys: on a Redis Cluster hash-tagged (`{<prefix>:bull}`), since its scripts touch several keys of a queue at once. */
export const bullPrefix = (redis: RedisConnections, redisPrefix: string) => redis.slotGroup(`${redisPrefix}:bull`);
/** BullMQ's blocking commands must never give up, hence `maxRetriesPerRequest: null`. */
export const bullConnection = (redis: RedisConnections, name: string) => redis.connect({ name, maxRetriesPerRequest: null });

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
  private readonly redis: RedisClient;
  /** BullMQ leaves a connection it was handed open on close; we close it. */
  private readonly eventsRedis: RedisClient;
  private readonly ready: Promise<unknown>;

  constructor(
    connections: RedisConnections,
    private readonly redisPrefix: string,
    private readonly logger?: Logger,
    /** How long handing a job to Redis may take before the request answers 503 (Redis down or stalled). */
    private readonly enqueueTimeoutMs = 5000,
  ) {
    const prefix = bullPrefix(connections, redisPrefix);
    this.redis = bullConnection(connections, 'floorcast-jobs-producer');
    this.queue = new Queue(JOBS_QUEUE_NAME, { connection: this.redis, prefix });
    this.eventsRedis = bullConnection(connections, 'floorcast-jobs-events');
    this.events = new QueueEvents(JOBS_QUEUE_NAME, { connection: this.eventsRedis, prefix });
    const onError = (error: Error) => this.logger?.warn({ err: error }, 'bullmq connection error');
    this.queue.on('error', onError);
    this.events.on('error', onError);
    this.redis.on('error', onError);
    this.eventsRedis.on('error', onError);
    this.ready = this.events.waitUntilReady();
  }

  private counterKey(organizationId: string) {
    return `${this.redisPrefix}:jobs:unfinished:${organizationId}`;
  }

  /**
   * With Redis down, BullMQ's connections (`maxRetriesPerRequest: null`) would queue every command until it
   * returns, and the request would hang: a connection that is not ready refuses at once, and handing the job
   * over is bounded by `enqueueTimeoutMs`; both answer 503 `unavailable` with Retry-After.
   */
  async run<T>(request: JobRequest, timeoutMs: number): Promise<T> {
    // Lost its connection: refuse now. Still connecting (just started): wait, within the enqueue timeout.
    if (LOST.has(this.redis.status)) throw jobsUnavailableError();
    const deadline = Date.now() + timeoutMs;
    let gaveUp = false;
    const handedOver = this.enqueue(request, deadline);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        gaveUp = true;
        reject(jobsUnavailableError());
      }, this.enqueueTimeoutMs);
    });
    // Late to arrive after a 503: nobody waits for it, so it goes (and the worker would skip it past its deadline).
    handedOver.then(
      ({ job, release }) => {
        if (!gaveUp) return;
        void job.remove().catch(() => undefined);
        void release();
      },
      () => undefined,
    );
    let job: Job;
    let release: () => Promise<void>;
    try {
      ({ job, release } = await Promise.race([handedOver, timedOut]));
    } catch (error) {
      if (error instanceof AppError) throw error;
      this.logger?.warn({ err: error }, 'could not queue a job');
      throw jobsUnavailableError();
    } finally {
      clearTimeout(timer);
    }
    try {
      const result = (await job.waitUntilFinished(this.events, Math.max(1, deadline - Date.now()))) as T;
      // A result may hold people's rows (a report, a data export): it is not kept in Redis once its caller has it.
      void job.remove().catch(() => undefined);
      return result;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (/timed out/i.test(message)) {
        await job.remove().catch(() => undefined); // still waiting: nobody will read its result
        throw jobTimeoutError(timeoutMs);
      }
      throw decodeJobError(message);
    } finally {
      void release(); // not awaited: with Redis gone it would wait for Redis, and the answer with it
    }
  }

  async schedule(request: JobRequest, options: ScheduleOptions = {}): Promise<void> {
    if (LOST.has(this.redis.status)) throw jobsUnavailableError();
    await scheduleOn(this.queue, request, options);
  }

  /**
   * Whether a worker renewed the liveness key within JOBS_WORKER_TTL_MS (bullmq-job-worker.ts). Without one a job
   * would wait in Redis until its caller's timeout: refused at once instead, with when to try again.
   */
  private async requireWorker(): Promise<void> {
    if ((await this.redis.exists(workerAliveKey(this.redisPrefix))) === 0) throw noWorkerError();
  }

  /** Adds the job; `release` undoes the organization's unfinished-jobs count once it is over. */
  private async enqueue(request: JobRequest, deadline: number): Promise<{ job: Job; release: () => Promise<void> }> {
    await this.ready;
    await this.requireWorker();
    const counter = this.counterKey(request.organizationId);
    const [[, unfinished]] = (await this.redis.multi().incr(counter).expire(counter, 3600).exec()) as [[null, number]];
    const release = async () => void (await this.redis.decr(counter).catch(() => undefined));
    try {
      const job = await this.queue.add(
        request.name,
        // The deadline travels with the job: the worker bounds its database work by it and skips a job past it.
        { organizationId: request.organizationId, data: request.data, deadline },
        {
          priority: Math.min(unfinished, 2_000_000),
          attempts: 1,
          removeOnComplete: { age: 300 },
          removeOnFail: { age: 3600 },
        },
      );
      return { job, release };
    } catch (error) {
      void release();
      throw error;
    }
  }

  /** Bounded like `ping`: with Redis away a scrape gets no queue depth rather than hanging. */
  async stats(): Promise<{ waiting: number; active: number }> {
    if (LOST.has(this.redis.status)) throw new Error(`redis is unreachable (${this.redis.status})`);
    let timer: NodeJS.Timeout | undefined;
    const counts = await Promise.race([
      this.queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active'),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('job counts timed out')), 1000))),
    ]).finally(() => clearTimeout(timer));
    return { waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0), active: counts.active ?? 0 };
  }

  /** Refuses at once while the connection is lost (a PING would otherwise wait in the offline queue for Redis); not ready without a live worker. */
  async ping(): Promise<void> {
    if (LOST.has(this.redis.status)) throw new Error(`redis is unreachable (${this.redis.status})`);
    await this.requireWorker();
  }

  /** Bounded: with Redis down, BullMQ's own close would wait for it; the connections are then dropped. */
  async close(): Promise<void> {
    const graceful = Promise.allSettled([this.events.close(), this.queue.close()]).then(() =>
      Promise.allSettled([this.redis.quit(), this.eventsRedis.quit()]),
    );
    await Promise.race([graceful, new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
    this.redis.disconnect();
    this.eventsRedis.disconnect();
  }
}

/**
 * Adds a job nobody waits for: no deadline (the worker gives it all the time it needs), no priority counter
 * (deliveries are short and must not wait behind a burst of reports), no BullMQ retry (its owner keeps the
 * retry schedule in storage).
 */
export async function scheduleOn(queue: Queue, request: JobRequest, options: ScheduleOptions): Promise<void> {
  await queue.add(
    request.name,
    { organizationId: request.organizationId, data: request.data },
    { delay: Math.max(0, Math.round(options.delayMs ?? 0)), attempts: 1, removeOnComplete: true, removeOnFail: { age: 3600 } },
  );
}
