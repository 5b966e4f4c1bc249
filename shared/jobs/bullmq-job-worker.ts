import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import { AppError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { RedisClient, RedisConnections } from '../redis/redis-connections.js';
import { JOBS_QUEUE_NAME, bullConnection, bullPrefix, scheduleOn, workerAliveKey } from './bullmq-job-queue.js';
import { encodeJobError, jobTimeoutError, limitsUntil, type ProcessorContext, type ProcessorRegistry } from './job-queue.js';

/**
 * Consumer side of BullMQ, run by `npm run workers` (workers/main.ts). A processor's AppError (bad
 * parameters, nothing found) is final: it is marked unrecoverable so BullMQ does not retry it.
 */
export interface WorkerOptions {
  /** JOBS_WORKER_TTL_MS: the liveness key is renewed every third of it, and lapses this long after the last worker died. */
  aliveTtlMs?: number;
}

/** Beats in a row that found jobs waiting while this worker had room and ran none: it is not consuming. */
export const STUCK_BEATS = 3;

export interface WatchdogLook {
  /** BullMQ's `isRunning()`: its main loop is alive. */
  running: boolean;
  /** Jobs ready to run in the queue (plain and prioritized). */
  ready: number;
  /** Jobs this worker runs now, and how many it may. */
  active: number;
  concurrency: number;
  /** Beats in a row so far that found it starved. */
  stuckBeats: number;
}

/**
 * The watchdog's decision at one beat, pure: replace a worker that is not running, or that had room while jobs
 * were ready for STUCK_BEATS beats in a row (a busy worker, or an empty queue, resets the count).
 */
export function watchdogStep(look: WatchdogLook): { stuckBeats: number; replace: boolean } {
  const starved = look.ready > 0 && look.active < look.concurrency;
  const stuckBeats = starved ? look.stuckBeats + 1 : 0;
  return { stuckBeats, replace: !look.running || stuckBeats >= STUCK_BEATS };
}

export class BullmqJobWorker {
  private worker: Worker;
  /** BullMQ leaves a connection it was handed open on close; we close it. */
  private redis: RedisClient;
  /** Jobs being processed here, and who waits for them to be done (close). */
  private active = 0;
  private idle: (() => void)[] = [];
  /** Producer for the follow-up jobs processors schedule (webhook retries), opened on first use. */
  private scheduler?: { queue: Queue; redis: RedisClient };
  /** Liveness and the watchdog's look at the queue: fails fast while Redis is away instead of queueing. */
  private readonly beats: RedisClient;
  private readonly beatTimer: NodeJS.Timeout;
  private readonly aliveTtlMs: number;
  private stuckBeats = 0;
  private closing = false;
  private readonly firstBeat: Promise<void>;
  private beaten?: () => void;
  /** How many times the watchdog replaced a worker that had stopped consuming (tests read it). */
  restarts = 0;
  private readonly context: ProcessorContext;

  constructor(
    private readonly connections: RedisConnections,
    private readonly redisPrefix: string,
    private readonly processors: ProcessorRegistry,
    baseContext: ProcessorContext,
    private readonly concurrency: number,
    private readonly logger: Logger,
    options: WorkerOptions = {},
  ) {
    this.context = {
      ...baseContext,
      schedule: async (request, scheduleOptions = {}) => {
        if (!this.scheduler) {
          const redis = bullConnection(connections, 'floorcast-jobs-scheduler');
          redis.on('error', (error) => logger.warn({ err: error }, 'bullmq scheduler connection error'));
          this.scheduler = {
            redis,
            queue: new Queue(JOBS_QUEUE_NAME, { connection: redis, prefix: bullPrefix(connections, redisPrefix) }),
          };
        }
        await scheduleOn(this.scheduler.queue, request, scheduleOptions);
      },
    };
    ({ worker: this.worker, redis: this.redis } = this.createWorker());
    this.aliveTtlMs = options.aliveTtlMs ?? 5000;
    this.beats = connections.connect({ name: 'floorcast-jobs-heartbeat', maxRetriesPerRequest: 1, enableOfflineQueue: false });
    this.beats.on('error', () => undefined); // the worker's own connection logs Redis errors
    this.firstBeat = new Promise((resolve) => (this.beaten = resolve));
    this.beatTimer = setInterval(() => void this.beat(), Math.max(100, Math.floor(this.aliveTtlMs / 3)));
    this.beatTimer.unref();
  }

  private createWorker(): { worker: Worker; redis: RedisClient } {
    const redis = bullConnection(this.connections, 'floorcast-jobs-worker');
    redis.on('error', (error) => this.logger.warn({ err: error }, 'bullmq worker connection error'));
    const worker = new Worker(JOBS_QUEUE_NAME, (job) => this.process(job), {
      connection: redis,
      prefix: bullPrefix(this.connections, this.redisPrefix),
      concurrency: this.concurrency,
    });
    worker.on('error', (error) => this.logger.warn({ err: error }, 'bullmq worker error'));
    return { worker, redis };
  }

  private async process(job: Job): Promise<unknown> {
    const processor = this.processors[job.name];
    if (!processor) throw new UnrecoverableError(`no processor named ${job.name}`);
    // Jobs queued before deadlines existed have none: they get the whole of no time limit, as before.
    const deadline = typeof job.data.deadline === 'number' ? job.data.deadline : Number.POSITIVE_INFINITY;
    // Nobody waits for it any more (it sat in the queue past its caller's timeout): do not run it.
    if (Date.now() >= deadline) throw new UnrecoverableError(encodeJobError(jobTimeoutError(0)));
    const bounds = limitsUntil(Number.isFinite(deadline) ? deadline : Date.now() + 2 ** 31 - 1);
    this.active += 1;
    try {
      const result = await processor(job.data.data, this.context, bounds.limits);
      // Past its deadline the caller has given up (or is about to, on its own timer): a result now is a timeout,
      // whichever of the two the caller hears first, never a success it would take for an answer in time.
      if (bounds.limits.signal.aborted) throw bounds.limits.signal.reason;
      return result === undefined ? null : result;
    } catch (error) {
      if (!(error instanceof AppError)) this.logger.error({ err: error, job: job.name }, 'job failed');
      throw new UnrecoverableError(encodeJobError(error));
    } finally {
      bounds.dispose();
      if (--this.active === 0) for (const resolve of this.idle.splice(0)) resolve();
    }
  }

  /**
   * Every third of the TTL: renews the liveness key while this worker consumes, and is its watchdog. A BullMQ
   * worker can stop consuming after a Redis restart without saying so (it is not running, or it runs but its
   * blocking connection no longer hears of new jobs); one found not running, or idle while jobs have waited
   * for STUCK_BEATS beats, is replaced by a new one on a new connection. Redis away: nothing to do, no key.
   */
  private async beat(): Promise<void> {
    if (this.closing || this.beats.status !== 'ready') return;
    try {
      const prefix = `${bullPrefix(this.connections, this.redisPrefix)}:${JOBS_QUEUE_NAME}`;
      // BullMQ's lists of jobs ready to run (plain and prioritized).
      const [[, waiting], [, prioritized]] = (await this.beats.multi().llen(`${prefix}:wait`).zcard(`${prefix}:prioritized`).exec()) as [
        [null, number],
        [null, number],
      ];
      const step = watchdogStep({
        running: this.worker.isRunning(),
        ready: waiting + prioritized,
        active: this.active,
        concurrency: this.concurrency,
        stuckBeats: this.stuckBeats,
      });
      this.stuckBeats = step.stuckBeats;
      if (step.replace) return this.replaceWorker();
      await this.beats.set(workerAliveKey(this.redisPrefix), String(process.pid), 'PX', this.aliveTtlMs);
      this.beaten?.();
    } catch (error) {
      this.logger.debug({ err: error }, 'worker heartbeat failed');
    }
  }

  private async replaceWorker(): Promise<void> {
    this.logger.warn(
      { running: this.worker.isRunning(), stuckBeats: this.stuckBeats },
      'job worker stopped consuming (Redis restarted?): replacing it',
    );
    this.stuckBeats = 0;
    this.restarts += 1;
    const old = { worker: this.worker, redis: this.redis };
    ({ worker: this.worker, redis: this.redis } = this.createWorker());
    // Jobs in hand on the old one finish (its processor calls are ours); its connections go.
    void Promise.race([old.worker.close(true).catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 2000).unref())]).then(
      () => old.redis.disconnect(),
    );
  }

  /** Ready to take jobs, and announced to the gateways (the liveness key written once). */
  async waitUntilReady(): Promise<void> {
    await this.worker.waitUntilReady();
    void this.beat();
    await this.firstBeat;
  }

  /**
   * Finishes the jobs in hand, takes no new ones. BullMQ's close may wait for a Redis that went away (or came
   * back under its blocking connection): after the jobs in hand (bounded by their deadlines) and a short grace,
   * the connection is dropped. The liveness key is left to lapse: another worker may be renewing it.
   */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.beatTimer);
    this.beaten?.();
    const graceful = this.worker
      .close()
      .then(() => this.redis.quit())
      .catch(() => undefined);
    const jobsDone = this.active === 0 ? Promise.resolve() : new Promise<void>((resolve) => this.idle.push(resolve));
    // BullMQ's close can wait for ever on a blocking connection that lived through a Redis restart.
    const drained = jobsDone.then(() => new Promise((resolve) => setTimeout(resolve, 2000).unref()));
    await Promise.race([graceful, drained]);
    this.redis.disconnect();
    this.beats.disconnect();
    if (this.scheduler) {
      const { queue, redis } = this.scheduler;
      await Promise.race([queue.close().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
      redis.disconnect();
    }
  }
}
