import { Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError } from '../errors.js';
import type { Logger } from '../logger.js';
import { JOBS_QUEUE_NAME, bullConnection, bullPrefix, scheduleOn } from './bullmq-job-queue.js';
import { encodeJobError, jobTimeoutError, limitsUntil, type ProcessorContext, type ProcessorRegistry } from './job-queue.js';

/**
 * Consumer side of BullMQ, run by `npm run workers` (workers/main.ts). A processor's AppError (bad
 * parameters, nothing found) is final: it is marked unrecoverable so BullMQ does not retry it.
 */
export class BullmqJobWorker {
  private readonly worker: Worker;
  /** BullMQ leaves a connection it was handed open on close; we close it. */
  private readonly redis: Redis;
  /** Jobs being processed here, and who waits for them to be done (close). */
  private active = 0;
  private idle: (() => void)[] = [];
  /** Producer for the follow-up jobs processors schedule (webhook retries), opened on first use. */
  private scheduler?: { queue: Queue; redis: Redis };

  constructor(url: string, redisPrefix: string, processors: ProcessorRegistry, baseContext: ProcessorContext, concurrency: number, logger: Logger) {
    this.redis = bullConnection(url, 'floorcast-jobs-worker');
    this.redis.on('error', (error) => logger.warn({ err: error }, 'bullmq worker connection error'));
    const context: ProcessorContext = {
      ...baseContext,
      schedule: async (request, options = {}) => {
        if (!this.scheduler) {
          const redis = bullConnection(url, 'floorcast-jobs-scheduler');
          redis.on('error', (error) => logger.warn({ err: error }, 'bullmq scheduler connection error'));
          this.scheduler = { redis, queue: new Queue(JOBS_QUEUE_NAME, { connection: redis, prefix: bullPrefix(redisPrefix) }) };
        }
        await scheduleOn(this.scheduler.queue, request, options);
      },
    };
    this.worker = new Worker(
      JOBS_QUEUE_NAME,
      async (job) => {
        const processor = processors[job.name];
        if (!processor) throw new UnrecoverableError(`no processor named ${job.name}`);
        // Jobs queued before deadlines existed have none: they get the whole of no time limit, as before.
        const deadline = typeof job.data.deadline === 'number' ? job.data.deadline : Number.POSITIVE_INFINITY;
        // Nobody waits for it any more (it sat in the queue past its caller's timeout): do not run it.
        if (Date.now() >= deadline) throw new UnrecoverableError(encodeJobError(jobTimeoutError(0)));
        const bounds = limitsUntil(Number.isFinite(deadline) ? deadline : Date.now() + 2 ** 31 - 1);
        this.active += 1;
        try {
          const result = await processor(job.data.data, context, bounds.limits);
          return result === undefined ? null : result;
        } catch (error) {
          if (!(error instanceof AppError)) logger.error({ err: error, job: job.name }, 'job failed');
          throw new UnrecoverableError(encodeJobError(error));
        } finally {
          bounds.dispose();
          if (--this.active === 0) for (const resolve of this.idle.splice(0)) resolve();
        }
      },
      { connection: this.redis, prefix: bullPrefix(redisPrefix), concurrency },
    );
    this.worker.on('error', (error) => logger.warn({ err: error }, 'bullmq worker error'));
  }

  waitUntilReady(): Promise<unknown> {
    return this.worker.waitUntilReady();
  }

  /**
   * Finishes the jobs in hand, takes no new ones. BullMQ's close may wait for a Redis that went away (or came
   * back under its blocking connection): after the jobs in hand (bounded by their deadlines) and a short grace,
   * the connection is dropped.
   */
  async close(): Promise<void> {
    const graceful = this.worker.close().then(() => this.redis.quit()).catch(() => undefined);
    const jobsDone = this.active === 0 ? Promise.resolve() : new Promise<void>((resolve) => this.idle.push(resolve));
    // BullMQ's close can wait for ever on a blocking connection that lived through a Redis restart.
    const drained = jobsDone.then(() => new Promise((resolve) => setTimeout(resolve, 2000).unref()));
    await Promise.race([graceful, drained]);
    this.redis.disconnect();
    if (this.scheduler) {
      const { queue, redis } = this.scheduler;
      await Promise.race([queue.close().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
      redis.disconnect();
    }
  }
}
